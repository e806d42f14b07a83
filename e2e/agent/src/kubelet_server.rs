//! The agent's kubelet port: HTTPS on `<bridge address>:--port` (kubelet's 10250) with kubelet's
//! flags (`--tls-cert-file`, `--tls-private-key-file`, `--client-ca-file`), answering only
//! clients whose certificate that CA signed (the API server's `--kubelet-client-certificate`).
//! It serves the streaming endpoints the API server's `pods/log`, `pods/exec`, `pods/attach`
//! and `pods/portforward` reach, with kubelet's paths:
//!
//! - `GET /containerLogs/<namespace>/<pod>/<container>` ([`crate::kubelet_logs`])
//! - `GET|POST /exec/<namespace>/<pod>/<container>?command=...` ([`crate::kubelet_exec`])
//! - `GET|POST /portForward/<namespace>/<pod>` ([`crate::kubelet_portforward`])
//! - `GET|POST /attach/<namespace>/<pod>/<container>` ([`crate::kubelet_exec`], output only)
//!
//! Connections are HTTP/1.1 with upgrades (the streaming protocols switch protocols).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::context::Ctx;
use crate::error::{Error, Result, io};
use crate::kubelet_exec::{self, Mode};
use crate::{kubelet_logs, kubelet_portforward};

/// The body of every answer of the kubelet port.
pub type Body = BoxBody<Bytes, Infallible>;

/// kubelet's serving flags.
#[derive(Debug, Clone)]
pub struct KubeletTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_file: PathBuf,
}

/// A plain-text answer, as kubelet's errors are.
pub fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message.into())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn tls_config(tls: &KubeletTls) -> Result<Arc<ServerConfig>> {
    let read = |path: &Path| std::fs::read(path).map_err(io(format!("reading {}", path.display())));
    let invalid = |path: &Path, reason: String| {
        Error::Config(format!("kubelet TLS file {}: {reason}", path.display()))
    };
    let certificates = |path: &Path| -> Result<Vec<CertificateDer<'static>>> {
        let pem = read(path)?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| invalid(path, e.to_string()))?;
        if certs.is_empty() {
            return Err(invalid(path, "no certificate in it".into()));
        }
        Ok(certs)
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in certificates(&tls.client_ca_file)? {
        roots
            .add(ca)
            .map_err(|e| invalid(&tls.client_ca_file, e.to_string()))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(&tls.client_ca_file, e.to_string()))?;
    let chain = certificates(&tls.cert_file)?;
    let key = PrivateKeyDer::from_pem_slice(&read(&tls.key_file)?)
        .map_err(|e| invalid(&tls.key_file, e.to_string()))?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| {
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain, key)
        })
        .map_err(|e| Error::Config(format!("kubelet TLS configuration: {e}")))?;
    Ok(Arc::new(config))
}

/// Binds the kubelet port and serves it until the returned task is aborted.
pub async fn start(ctx: Arc<Ctx>, address: SocketAddr, tls: &KubeletTls) -> Result<JoinHandle<()>> {
    let acceptor = TlsAcceptor::from(tls_config(tls)?);
    let listener = TcpListener::bind(address)
        .await
        .map_err(io(format!("binding the kubelet port {address}")))?;
    tracing::info!(%address, "serving the kubelet endpoints");
    Ok(tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a kubelet connection");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let tls = match acceptor.accept(stream).await {
                    Ok(tls) => tls,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "kubelet TLS handshake failed");
                        return;
                    }
                };
                let service = service_fn(move |request| {
                    let ctx = ctx.clone();
                    async move { Ok::<_, Infallible>(route(ctx, request).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .with_upgrades();
                if let Err(error) = connection.await {
                    tracing::debug!(%peer, %error, "kubelet connection ended with an error");
                }
            });
        }
    }))
}

/// The endpoint a path names: kubelet's path segments after the endpoint's name.
async fn route(ctx: Arc<Ctx>, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (request.method(), segments.as_slice()) {
        (&Method::GET, ["containerLogs", namespace, pod, container]) => {
            let query = request.uri().query().unwrap_or_default();
            kubelet_logs::serve(&ctx, namespace, pod, container, query)
        }
        (
            &Method::GET | &Method::POST,
            [action @ ("exec" | "attach"), namespace, pod, container],
        ) => {
            let mode = if *action == "exec" {
                Mode::Exec
            } else {
                Mode::Attach
            };
            let (namespace, pod, container) = (
                namespace.to_string(),
                pod.to_string(),
                container.to_string(),
            );
            kubelet_exec::serve(&ctx, request, (&namespace, &pod, &container), mode)
        }
        (&Method::GET | &Method::POST, ["portForward", namespace, pod]) => {
            let (namespace, pod) = (namespace.to_string(), pod.to_string());
            kubelet_portforward::serve(&ctx, request, &namespace, &pod)
        }
        _ => text(StatusCode::NOT_FOUND, "404 page not found"),
    }
}
