//! One request to a kubelet and its answer relayed, as kube-apiserver's upgrade-aware proxy
//! does: a new TLS connection per request (HTTP/1.1: the streaming protocols upgrade it); only
//! the headers the kubelet needs are sent (never the client's credentials); a log is relayed as
//! it is written; an upgrade (SPDY/3.1 or WebSocket) answered `101` is passed back with the
//! kubelet's protocol headers and the two connections are spliced byte for byte until either
//! side closes; any other answer becomes a `Status` (400 and 404 keep the kubelet's text as
//! kube's `GenericHttpResponseChecker` does). A kubelet that cannot be reached, or does not
//! answer within [`ANSWER_TIMEOUT`], is a 503, never a hang.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http::header::{ACCEPT, CONNECTION, HOST, UPGRADE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, BodyStream, Empty, Limited, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kcp_apimachinery::ApiError;
use kcp_apimachinery::status::StatusReason;
use kcp_apiserver::listener::{splice, upgrade_protocol};
use kcp_apiserver::pod_connect::PodConnectRequest;
use kcp_apiserver::response::Body;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::target::Kubelet;

/// How long connecting, the TLS handshake and the kubelet's response head may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of a kubelet's error answer that is read.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The streaming protocols' headers, passed to the kubelet as the client sent them.
const PROTOCOL_HEADERS: [&str; 5] = [
    "x-stream-protocol-version",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
];

fn unreachable(kubelet: &Kubelet, what: impl std::fmt::Display) -> ApiError {
    ApiError::service_unavailable(&format!(
        "error dialing backend: {what} (node {}, {}:{})",
        kubelet.node, kubelet.address, kubelet.port
    ))
}

/// The headers the kubelet gets.
fn kubelet_headers(client: &HeaderMap, kubelet: &Kubelet) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for name in [ACCEPT, USER_AGENT]
        .into_iter()
        .chain(PROTOCOL_HEADERS.iter().map(|n| HeaderName::from_static(n)))
    {
        for value in client.get_all(&name) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Some(protocol) = upgrade_protocol(client) {
        headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(UPGRADE, protocol);
    }
    if let Ok(host) = HeaderValue::from_str(&format!("{}:{}", kubelet.address, kubelet.port)) {
        headers.insert(HOST, host);
    }
    headers
}

/// Sends the request to the kubelet and relays its answer.
pub async fn forward(
    tls: Arc<rustls::ClientConfig>,
    kubelet: Kubelet,
    mut request: PodConnectRequest,
) -> Result<Response<Body>, ApiError> {
    let upgrading = upgrade_protocol(&request.headers).is_some();
    let mut outgoing = Request::builder()
        .method(request.method.clone())
        .uri(&kubelet.path_and_query)
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::bad_request(&format!("building the kubelet request: {e}")))?;
    *outgoing.headers_mut() = kubelet_headers(&request.headers, &kubelet);
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, send(tls, &kubelet, outgoing)).await;
    let mut response = match answer {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Err(error),
        Err(_) => return Err(unreachable(&kubelet, "the kubelet did not answer in time")),
    };
    let status = response.status();
    if upgrading && status == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_side) = request.upgrade.take() else {
            return Err(ApiError::bad_request("the connection cannot be upgraded"));
        };
        let kubelet_side = hyper::upgrade::on(&mut response);
        tokio::spawn(splice(client_side, kubelet_side));
        let (parts, _) = response.into_parts();
        return Ok(Response::from_parts(parts, response_body_empty()));
    }
    if status.is_success() {
        let (parts, body) = response.into_parts();
        let mut relayed = Response::new(relay(body));
        *relayed.status_mut() = parts.status;
        if let Some(content_type) = parts.headers.get(http::header::CONTENT_TYPE) {
            relayed
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, content_type.clone());
        }
        return Ok(relayed);
    }
    let text = match Limited::new(response.into_body(), ERROR_BODY_LIMIT)
        .collect()
        .await
    {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes())
            .trim()
            .to_owned(),
        Err(_) => String::new(),
    };
    Err(kubelet_error(status, &text, &request.name))
}

/// A kubelet's error answer as a `Status`.
fn kubelet_error(status: StatusCode, text: &str, pod: &str) -> ApiError {
    match status.as_u16() {
        400 => ApiError::bad_request(text),
        404 => ApiError::not_found("", "pods", pod),
        code => ApiError {
            code,
            reason: StatusReason::InternalError,
            message: format!("the kubelet answered {status}: {text}"),
            details: None,
        },
    }
}

fn response_body_empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

/// The kubelet's body as it comes; a broken kubelet stream ends the client's.
fn relay(body: Incoming) -> Body {
    let frames = BodyStream::new(body)
        .take_while(|frame| std::future::ready(frame.is_ok()))
        .filter_map(|frame| std::future::ready(frame.ok().map(Ok)));
    BodyExt::boxed(StreamBody::new(frames))
}

async fn send(
    tls: Arc<rustls::ClientConfig>,
    kubelet: &Kubelet,
    request: Request<Empty<Bytes>>,
) -> Result<Response<Incoming>, ApiError> {
    let tcp = TcpStream::connect((kubelet.address, kubelet.port))
        .await
        .map_err(|e| unreachable(kubelet, e))?;
    let _ = tcp.set_nodelay(true);
    let stream = TlsConnector::from(tls)
        .connect(ServerName::IpAddress(kubelet.address.into()), tcp)
        .await
        .map_err(|e| unreachable(kubelet, format!("TLS: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(kubelet, e))?;
    tokio::spawn(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!(%error, "kubelet connection ended with an error");
        }
    });
    sender
        .send_request(request)
        .await
        .map_err(|e| unreachable(kubelet, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubelet() -> Kubelet {
        Kubelet {
            node: "n1".into(),
            address: "10.0.0.1".parse().unwrap(),
            port: 10250,
            path_and_query: "/exec/ns/p/c?command=sh".into(),
        }
    }

    #[test]
    fn only_protocol_headers_reach_the_kubelet() {
        let mut client = HeaderMap::new();
        client.insert("authorization", HeaderValue::from_static("Bearer secret"));
        client.insert("impersonate-user", HeaderValue::from_static("x"));
        client.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        client.insert(UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        client.append(
            "x-stream-protocol-version",
            HeaderValue::from_static("v4.channel.k8s.io"),
        );
        client.append(
            "x-stream-protocol-version",
            HeaderValue::from_static("v3.channel.k8s.io"),
        );
        let headers = kubelet_headers(&client, &kubelet());
        assert!(headers.get("authorization").is_none());
        assert!(headers.get("impersonate-user").is_none());
        assert_eq!(headers[UPGRADE], "SPDY/3.1");
        assert_eq!(headers[HOST], "10.0.0.1:10250");
        assert_eq!(
            headers.get_all("x-stream-protocol-version").iter().count(),
            2
        );
        let plain = kubelet_headers(&HeaderMap::new(), &kubelet());
        assert!(plain.get(UPGRADE).is_none() && plain.get(CONNECTION).is_none());
    }

    #[test]
    fn kubelet_errors_become_statuses() {
        let bad = kubelet_error(
            StatusCode::BAD_REQUEST,
            "previous terminated container \"c\" in pod \"p\" not found",
            "p",
        );
        assert_eq!(
            (bad.code, bad.message.as_str()),
            (
                400,
                "previous terminated container \"c\" in pod \"p\" not found"
            )
        );
        assert_eq!(
            kubelet_error(StatusCode::NOT_FOUND, "", "p").message,
            "pods \"p\" not found"
        );
        assert_eq!(kubelet_error(StatusCode::FORBIDDEN, "no", "p").code, 403);
    }

    #[tokio::test]
    async fn an_unreachable_kubelet_is_a_503() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let kubelet = Kubelet {
            address: "127.0.0.1".parse().unwrap(),
            port,
            ..kubelet()
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let request = Request::new(Empty::<Bytes>::new());
        let error = send(Arc::new(tls), &kubelet, request).await.unwrap_err();
        assert_eq!(error.code, 503);
        assert!(
            error.message.starts_with("error dialing backend: "),
            "{}",
            error.message
        );
    }
}
