//! Forwarding one request to its backend and relaying the answer, as a reverse proxy must.
//!
//! Bodies are passed through frame by frame in both directions, never collected: a watch over
//! HTTP/1.1 chunked encoding or HTTP/2 stays open as long as client and backend keep it, a long
//! list is relayed while the shard is still writing it, and a backend stream that breaks breaks
//! the client's response (its error travels in the body) instead of ending it as if complete.
//! There is no deadline on a request (upstream kcp #2479: watches through `/services/` were cut).
//!
//! Hop-by-hop headers (RFC 9110 section 7.6.1: `Connection` and the headers it names,
//! `Keep-Alive`, `Proxy-*`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`) belong to one
//! connection and are dropped both ways, as Go's `httputil.ReverseProxy` does; `Host` is the
//! backend's. An upgrade request (`Connection: Upgrade`, as `kubectl exec` and `port-forward`
//! send) goes over HTTP/1.1 with its `Upgrade` header, and when the backend switches protocols
//! the two connections are spliced until either side closes.

use bytes::Bytes;
use http::header::{
    CONNECTION, HOST, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER, TRANSFER_ENCODING,
    UPGRADE,
};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Uri, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use kcp_apiserver::listener::{splice, upgrade_protocol};

use crate::backend::Backend;

/// The error a relayed body can carry.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The proxy's response body: a backend's stream (which may fail) or the proxy's own answer.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// One of the proxy's own responses (a `Status`, health, metrics) as a [`ProxyBody`].
pub fn own(response: Response<kcp_apiserver::response::Body>) -> Response<ProxyBody> {
    response.map(|body| body.map_err(|never| match never {}).boxed())
}

/// Headers that describe one connection, never forwarded. Names, not strings: removing by a
/// string parses it first, which was most of what stripping cost per request.
const HOP_BY_HOP: [HeaderName; 9] = [
    CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION,
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
];

/// Removes the hop-by-hop headers and every header `Connection` names.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // Requests and responses rarely carry any (HTTP/2 forbids them): one pass over the names
    // present is cheaper than removing each of the nine by its hash.
    if !headers.keys().any(|name| HOP_BY_HOP.contains(name)) {
        return;
    }
    if headers.contains_key(CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Sends `request` to `target` and relays the answer; an error is the backend's (unreachable,
/// TLS refused, connection lost before the response head).
pub async fn forward(
    backend: &Backend,
    mut request: Request<Incoming>,
    target: Uri,
) -> Result<Response<ProxyBody>, hyper_util::client::legacy::Error> {
    let upgrade = upgrade_protocol(request.headers());
    let headers = request.headers_mut();
    remove_hop_by_hop(headers);
    headers.remove(HOST);
    *request.uri_mut() = target;
    // The client picks the backend's protocol by ALPN; HTTP/1.1 here means "any".
    *request.version_mut() = Version::HTTP_11;
    match upgrade {
        None if long_running(request.uri()) => Ok(relay(backend.streams.request(request).await?)),
        None => Ok(relay(backend.http1.request(request).await?)),
        Some(protocol) => forward_upgrade(backend, request, protocol).await,
    }
}

/// Whether a response may stay open for long (a watch, a followed log): such requests share the
/// HTTP/2 connections instead of holding an HTTP/1.1 connection each.
fn long_running(uri: &Uri) -> bool {
    let query = uri.query();
    query_flag(query, "watch") || query_flag(query, "follow") || uri.path().contains("/watch/")
}

/// Whether `query` turns `name` on (`name`, `name=true` or `name=1`), as Kubernetes reads
/// `watch` and `follow`.
pub fn query_flag(query: Option<&str>, name: &str) -> bool {
    query.is_some_and(|query| {
        query.split('&').any(|pair| match pair.strip_prefix(name) {
            Some(value) => matches!(value, "" | "=true" | "=1"),
            None => false,
        })
    })
}

fn relay(response: Response<Incoming>) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    remove_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, body.map_err(BoxError::from).boxed())
}

async fn forward_upgrade(
    backend: &Backend,
    mut request: Request<Incoming>,
    protocol: HeaderValue,
) -> Result<Response<ProxyBody>, hyper_util::client::legacy::Error> {
    let client_side = hyper::upgrade::on(&mut request);
    let headers = request.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, protocol);
    let mut response = backend.http1.request(request).await?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(relay(response));
    }
    let backend_side = hyper::upgrade::on(&mut response);
    tokio::spawn(splice(client_side, backend_side));
    // The 101 keeps `Connection` and `Upgrade`: they are the answer to the client's upgrade.
    let (parts, _) = response.into_parts();
    let empty = Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed();
    Ok(Response::from_parts(parts, empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in list {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_names_go() {
        let mut h = headers(&[
            ("Connection", "keep-alive, X-Private"),
            ("X-Private", "1"),
            ("Keep-Alive", "timeout=5"),
            ("Transfer-Encoding", "chunked"),
            ("TE", "trailers"),
            ("Upgrade", "SPDY/3.1"),
            ("Proxy-Authorization", "Basic x"),
            ("Accept", "application/json"),
            ("Content-Type", "application/json"),
        ]);
        remove_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "content-type"]);
    }

    #[test]
    fn watches_and_follows_are_long_running() {
        let long = |uri: &str| long_running(&uri.parse::<Uri>().unwrap());
        assert!(long("/api/v1/configmaps?watch=true"));
        assert!(long("/api/v1/configmaps?limit=5&watch=1"));
        assert!(long("/api/v1/namespaces/a/pods/p/log?follow=true"));
        assert!(long("/api/v1/watch/configmaps"));
        assert!(!long("/api/v1/configmaps?watch=false"));
        assert!(!long("/api/v1/configmaps?watchers=true"));
        assert!(!long("/api/v1/namespaces/a/configmaps/b"));
    }
}
