//! Counting what the operator asks of its host cluster: a layer on the host cluster's client
//! that names each request by its Kubernetes verb, as the API server's request info does
//! (`GET` of a collection is `list`, with `watch=true` `watch`, of one object `get`; `DELETE` of
//! a collection is `deletecollection`), and adds it to `kcp_operator_api_requests_total{verb}`.
//! Issue 24 asks what an idle operator costs (no hot loop, requests per minute by verb); this is
//! how it is measured, on any cluster, without access to the API server's own metrics.

use std::sync::Arc;

use http::{Method, Request, Uri};
use kube::client::Body;
use tower::util::MapRequestLayer;

use crate::controller::Metrics;

/// The layer to put on the host cluster's client (`kube::client::ClientBuilder::with_layer`).
pub fn counting(
    metrics: Arc<Metrics>,
) -> MapRequestLayer<impl Fn(Request<Body>) -> Request<Body> + Clone> {
    MapRequestLayer::new(move |request: Request<Body>| {
        metrics.api_request(verb(request.method(), request.uri()));
        request
    })
}

/// The Kubernetes verb of a request to `uri` with `method`.
pub fn verb(method: &Method, uri: &Uri) -> &'static str {
    let named = names_an_object(uri.path());
    match *method {
        Method::GET | Method::HEAD if is_watch(uri.query()) => "watch",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

/// Whether a resource path names one object (`.../secrets/x`, `/api/v1/namespaces/x`) rather
/// than a collection (`.../secrets`, `/api/v1/namespaces`).
fn names_an_object(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return false,
    };
    let rest = match rest {
        ["namespaces", _namespace, resource @ ..] if !resource.is_empty() => resource,
        other => other,
    };
    rest.len() >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: Method, uri: &str) -> &'static str {
        verb(&method, &uri.parse().expect("uri"))
    }

    #[test]
    fn requests_are_named_by_their_kubernetes_verb() {
        for (method, uri, expected) in [
            (Method::GET, "/api/v1/namespaces", "list"),
            (Method::GET, "/api/v1/namespaces/kcp", "get"),
            (Method::GET, "/api/v1/namespaces/kcp/secrets", "list"),
            (Method::GET, "/api/v1/namespaces/kcp/secrets/ca", "get"),
            (
                Method::GET,
                "/apis/operator.kcp.io/v1alpha1/rootshards?watch=true&resourceVersion=1",
                "watch",
            ),
            (
                Method::GET,
                "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/shards",
                "list",
            ),
            (
                Method::PATCH,
                "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/rootshards/root/status",
                "patch",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kcp/leases/kcp-operator",
                "update",
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/kcp/events",
                "create",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/kcp/secrets/ca",
                "delete",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/kcp/secrets",
                "deletecollection",
            ),
            (Method::GET, "/version", "list"),
        ] {
            assert_eq!(of(method.clone(), uri), expected, "{method} {uri}");
        }
    }

    #[tokio::test]
    async fn the_layer_counts_every_request_of_the_client() {
        use tower::{Layer, Service, ServiceExt};

        let metrics = Arc::new(Metrics::default());
        let service =
            tower::service_fn(|_: Request<Body>| async { Ok::<_, std::convert::Infallible>(()) });
        let mut counted = counting(metrics.clone()).layer(service);
        for (method, uri) in [
            (Method::GET, "/api/v1/namespaces/kcp/secrets/a"),
            (Method::GET, "/api/v1/namespaces/kcp/secrets/b"),
            (Method::PATCH, "/api/v1/namespaces/kcp/secrets/a"),
        ] {
            let request = Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .expect("request");
            counted
                .ready()
                .await
                .expect("ready")
                .call(request)
                .await
                .expect("answered");
        }
        let text = metrics.encode().expect("encodes");
        for line in [
            "kcp_operator_api_requests_total{verb=\"get\"} 2",
            "kcp_operator_api_requests_total{verb=\"patch\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
