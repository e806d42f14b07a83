//! The plain-HTTP endpoints (hyper, HTTP/1.1): `/metrics` and the status page (`/`, see
//! `crate::status_page`) on the metrics address, `/healthz` and `/readyz` on the health probe
//! address. Each listener stops accepting when its token is
//! cancelled and gives open connections a few seconds to finish.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use crate::controller::Metrics;

/// How long open connections may take to finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (out of file descriptors), so it does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

const TEXT: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer to a GET of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    fn text(status: StatusCode, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: TEXT,
            body: body.into(),
        }
    }

    fn not_found() -> Self {
        Self::text(StatusCode::NOT_FOUND, "not found\n")
    }
}

/// `/metrics` in the OpenMetrics text format.
pub fn metrics_reply(metrics: &Metrics, path: &str) -> Reply {
    if path != "/metrics" {
        return Reply::not_found();
    }
    match metrics.encode() {
        Ok(body) => Reply {
            status: StatusCode::OK,
            content_type: OPENMETRICS,
            body,
        },
        Err(error) => Reply::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to encode metrics: {error}\n"),
        ),
    }
}

/// The metrics port: the status page at `/` (rendered by `page` only when asked for), `/metrics`.
pub fn metrics_port_reply<E: std::error::Error>(
    metrics: &Metrics,
    page: impl FnOnce() -> Result<String, E>,
    path: &str,
) -> Reply {
    if path != "/" {
        return metrics_reply(metrics, path);
    }
    match page() {
        Ok(body) => Reply {
            status: StatusCode::OK,
            content_type: HTML,
            body,
        },
        Err(error) => Reply::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{}\n", crate::controller::error_chain(&error)),
        ),
    }
}

/// `/healthz` (the process runs) and `/readyz` (see [`super::health`]).
pub fn health_reply(health: &Health, path: &str) -> Reply {
    match path {
        "/healthz" => Reply::text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let phase = health.phase();
            let status = if phase.ready() {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            Reply::text(status, format!("{}\n", phase.describe()))
        }
        _ => Reply::not_found(),
    }
}

fn respond(
    reply: impl FnOnce(&str) -> Reply,
    request: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let reply = if request.method() == Method::GET || request.method() == Method::HEAD {
        reply(request.uri().path())
    } else {
        Reply::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n")
    };
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = reply.status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(reply.content_type),
    );
    response
}

/// Serves `reply` on `listener` until `shutdown` is cancelled, then waits (at most a few
/// seconds) for open connections.
pub async fn serve<R>(listener: TcpListener, reply: R, shutdown: CancellationToken)
where
    R: Fn(&str) -> Reply + Clone + Send + Sync + 'static,
{
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let reply = reply.clone();
                    let service = service_fn(move |request| {
                        let response = respond(&reply, &request);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let connection = graceful.watch(
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service),
                    );
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!(%error, "HTTP connection failed");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "failed to accept an HTTP connection");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
            },
            () = shutdown.cancelled() => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open after shutdown; closing them");
    }
}
