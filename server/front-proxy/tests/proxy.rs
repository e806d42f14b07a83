//! The proxy in-process over real sockets: `FrontProxy` on kcp-apiserver's TLS listener, a table
//! in place of the index, and a plain HTTP backend that answers with what it received (path,
//! query, headers), streams on request, or is not there at all. Covers what the proxy itself
//! decides: the forwarded URL (`/clusters/<logical cluster>`, the query, `~`), the identity
//! headers (forged ones removed, groups filtered, `Authorization` consumed), its own answers
//! (401, 403 "workspace access not permitted", 503, 404) as `Status` objects, virtual-workspace
//! routing (a named cluster's shard, the `/shards/<shard>` marker, `*` to the mapping), readiness,
//! unbuffered streaming and backend errors in `/metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kcp_apiserver::TlsMaterial;
use kcp_apiserver::listener::TlsListener;
use kcp_authn::{Authenticators, TokenFile};
use kcp_front_proxy::groups::{DEFAULT_DROP_GROUPS, GroupFilter};
use kcp_front_proxy::mapping::{Mappings, PathMapping};
use kcp_front_proxy::metrics_access::MetricsAccess;
use kcp_front_proxy::route::{Resolve, Route, Unroutable};
use kcp_front_proxy::{FrontProxy, ProxyConfig};
use kcp_testing::write_tls_files;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "alice-token";
const WITHIN: Duration = Duration::from_secs(10);

/// Routes by a table; ready when told. Its one shard, `alpha`, serves virtual workspaces under
/// `/vw-alpha` of the backend (so the backend's echo tells them from the mapping's backend).
struct Table {
    routes: HashMap<&'static str, Result<Route, Unroutable>>,
    alpha_virtual_workspaces: String,
    ready: AtomicBool,
}

impl Resolve for Table {
    fn resolve(&self, path: &str) -> Result<Route, Unroutable> {
        self.routes
            .get(path)
            .cloned()
            .unwrap_or(Err(Unroutable::Unknown))
    }

    fn virtual_workspaces(&self, shard: &str) -> Option<Arc<str>> {
        (shard == "alpha").then(|| self.alpha_virtual_workspaces.as_str().into())
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

fn route(base_url: &str, cluster: &str) -> Result<Route, Unroutable> {
    Ok(Route {
        shard: "alpha".into(),
        base_url: base_url.into(),
        virtual_workspaces_url: virtual_workspaces_of(base_url).into(),
        cluster: cluster.into(),
    })
}

fn virtual_workspaces_of(base_url: &str) -> String {
    format!("{base_url}/vw-alpha")
}

type BackendBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The backend: `/services/stream` sends `one`, waits for `go`, then sends `two`; everything
/// else answers JSON with the request's path and query and headers.
async fn backend(go: Arc<Notify>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let go = go.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let go = go.clone();
                async move { Ok::<_, Infallible>(answer(request, go)) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    address
}

fn answer(request: Request<Incoming>, go: Arc<Notify>) -> Response<BackendBody> {
    if request.uri().path().ends_with("/subjectaccessreviews") {
        let allowed = json!({"status": {"allowed": true}}).to_string();
        return Response::new(Full::new(Bytes::from(allowed)).boxed());
    }
    if request.uri().path() == "/services/stream" {
        let chunks = futures_stream(go);
        return Response::new(StreamBody::new(chunks).boxed());
    }
    let mut headers: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in request.headers() {
        headers
            .entry(name.as_str().to_owned())
            .or_default()
            .push(value.to_str().unwrap().to_owned());
    }
    let body = json!({
        "path": request.uri().path_and_query().map(|p| p.as_str()),
        "headers": headers,
    });
    Response::new(Full::new(Bytes::from(body.to_string())).boxed())
}

/// `one`, then (once `go` is notified) `two`.
fn futures_stream(
    go: Arc<Notify>,
) -> impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel(2);
    tokio::spawn(async move {
        let _ = sender
            .send(Ok(Frame::data(Bytes::from_static(b"one"))))
            .await;
        go.notified().await;
        let _ = sender
            .send(Ok(Frame::data(Bytes::from_static(b"two"))))
            .await;
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

/// A running proxy and what the test needs to talk to it.
struct Setup {
    url: String,
    client: reqwest::Client,
    table: Arc<Table>,
    go: Arc<Notify>,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let tls = write_tls_files(dir.path());
    let go = Arc::new(Notify::new());
    let backend = format!("http://{}", backend(go.clone()).await);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let entry = |path: &str, backend: &str| PathMapping {
        path: path.into(),
        backend: backend.into(),
        backend_server_ca: tls.ca.clone(),
        proxy_client_cert: tls.client_cert.clone(),
        proxy_client_key: tls.client_key.clone(),
        user_header: None,
        group_header: None,
        extra_header_prefix: None,
    };
    let mappings = Mappings::new(vec![
        entry("/clusters/", ""),
        entry("/services/", &backend),
        entry("/down/", &closed),
    ])
    .unwrap();
    let table = Arc::new(Table {
        routes: HashMap::from([
            ("root:org", route(&backend, "c-org")),
            ("user:alice", route(&backend, "c-home")),
            (
                "root:sleepy",
                Err(Unroutable::Unavailable {
                    path: "root:sleepy".into(),
                }),
            ),
            (
                "root:moved",
                Err(Unroutable::ShardGone {
                    path: "root:moved".into(),
                    shard: "beta".into(),
                }),
            ),
        ]),
        alpha_virtual_workspaces: virtual_workspaces_of(&backend),
        ready: AtomicBool::new(false),
    });
    let defaults: Vec<String> = DEFAULT_DROP_GROUPS.iter().map(|g| g.to_string()).collect();
    let proxy = FrontProxy::new(ProxyConfig {
        mappings,
        authenticators: Authenticators {
            token_file: Some(
                TokenFile::parse(&format!(
                    "{TOKEN},alice,alice-uid,\"devs,system:masters\"\n"
                ))
                .unwrap(),
            ),
            anonymous: true,
            ..Authenticators::default()
        },
        service_account_lookup: None,
        groups: GroupFilter::new(&defaults, &[]),
        resolver: table.clone(),
        index_counts: None,
        // The backend allows every review.
        metrics_access: MetricsAccess::new(reqwest::Client::new(), &backend),
    })
    .unwrap();
    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap();
    let listener = TlsListener::bind(
        "127.0.0.1:0".parse().unwrap(),
        TlsMaterial {
            serving_cert_chain_pem: &read(&tls.server_cert),
            serving_key_pem: &read(&tls.server_key),
            client_ca_pems: &[],
        },
    )
    .await
    .unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let stopping = CancellationToken::new();
        listener
            .serve(
                Arc::new(proxy),
                shutdown.cancelled_owned(),
                &stopping,
                Duration::from_secs(1),
            )
            .await;
    });
    let ca = reqwest::Certificate::from_pem(read(&tls.ca).as_bytes()).unwrap();
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .timeout(WITHIN)
        .build()
        .unwrap();
    Setup {
        url,
        client,
        table,
        go,
        stop,
        _dir: dir,
    }
}

impl Setup {
    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.url))
    }

    async fn json(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }
}

/// The proxy's 403 for a workspace it does not route to.
fn assert_not_permitted(status: &Value) {
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("workspace access not permitted"),
        "{status}"
    );
}

fn forged(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request
        .header("X-Remote-User", "admin")
        .header("X-Remote-Group", "system:masters")
        .header("X-Remote-Extra-Scopes", "all")
}

#[tokio::test]
async fn forwards_with_the_logical_cluster_and_the_identity_it_vouches_for() {
    let setup = setup().await;
    let (status, seen) = setup
        .json(forged(
            setup
                .get("/clusters/root:org/api/v1/namespaces?limit=1&watch=false")
                .bearer_auth(TOKEN),
        ))
        .await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(
        seen["path"],
        "/clusters/c-org/api/v1/namespaces?limit=1&watch=false"
    );
    let headers = &seen["headers"];
    assert_eq!(headers["x-remote-user"], json!(["alice"]));
    assert_eq!(
        headers["x-remote-group"],
        json!(["devs", "system:authenticated"])
    );
    assert!(headers.get("authorization").is_none(), "{headers}");
    assert!(headers.get("x-remote-extra-scopes").is_none(), "{headers}");

    // `~` is the user's home.
    let (status, seen) = setup
        .json(setup.get("/clusters/~/api").bearer_auth(TOKEN))
        .await;
    assert_eq!(
        (status, &seen["path"]),
        (200, &json!("/clusters/c-home/api"))
    );

    // No credentials: forwarded with no identity, forged headers gone.
    let (status, seen) = setup
        .json(forged(setup.get("/services/x/clusters/*/api")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(seen["path"], "/services/x/clusters/*/api");
    for header in ["x-remote-user", "x-remote-group", "x-remote-extra-scopes"] {
        assert!(seen["headers"].get(header).is_none(), "{seen}");
    }
    setup.stop.cancel();
}

#[tokio::test]
async fn answers_of_its_own_are_status_objects() {
    let setup = setup().await;
    let cases = [
        ("/clusters/root:nope/api", Some(TOKEN), 403, "Forbidden"),
        (
            "/clusters/root:org:deeper/api",
            Some(TOKEN),
            403,
            "Forbidden",
        ),
        ("/clusters/~/api", None, 403, "Forbidden"),
        (
            "/clusters/root:sleepy/api",
            Some(TOKEN),
            503,
            "ServiceUnavailable",
        ),
        (
            "/clusters/root:moved/api",
            Some(TOKEN),
            503,
            "ServiceUnavailable",
        ),
        ("/nowhere", Some(TOKEN), 404, "NotFound"),
        (
            "/clusters/root:org/api",
            Some("wrong-token"),
            401,
            "Unauthorized",
        ),
        ("/down/x", None, 503, "ServiceUnavailable"),
    ];
    for (path, token, code, reason) in cases {
        let mut request = setup.get(path);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let (status, body) = setup.json(request).await;
        assert_eq!(
            (status, body["kind"].as_str()),
            (code, Some("Status")),
            "{path}: {body}"
        );
        assert_eq!(body["reason"], reason, "{path}: {body}");
    }
    let (_, forbidden) = setup.json(setup.get("/clusters/root:nope/api")).await;
    assert_not_permitted(&forbidden);
    let metrics = setup
        .get("/metrics")
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kcp_front_proxy_backend_errors_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kcp_front_proxy_requests_total{verb="GET",code="403"} 4"#),
        "{metrics}"
    );
    setup.stop.cancel();
}

#[tokio::test]
async fn readiness_follows_the_index() {
    let setup = setup().await;
    let status = |path: &'static str| {
        let request = setup.get(path);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("/readyz").await, 500);
    assert_eq!(status("/livez").await, 200);
    setup.table.ready.store(true, Ordering::SeqCst);
    assert_eq!(status("/readyz").await, 200);
    assert_eq!(status("/metrics").await, 401);
    setup.stop.cancel();
}

#[tokio::test]
async fn bodies_stream_through_unbuffered() {
    let setup = setup().await;
    let mut response = setup.get("/services/stream").send().await.unwrap();
    assert_eq!(response.status(), 200);
    // The backend sends `two` only after the client has read `one` through the proxy.
    let first = tokio::time::timeout(WITHIN, response.chunk())
        .await
        .unwrap();
    assert_eq!(first.unwrap().unwrap(), Bytes::from_static(b"one"));
    setup.go.notify_one();
    let second = tokio::time::timeout(WITHIN, response.chunk())
        .await
        .unwrap();
    assert_eq!(second.unwrap().unwrap(), Bytes::from_static(b"two"));
    setup.stop.cancel();
}

#[tokio::test]
async fn virtual_workspace_requests_go_to_the_shard_of_their_cluster_or_of_their_marker() {
    let setup = setup().await;
    let vw = "/services/apiexport/2abc/widgets/clusters";
    let cases = [
        // A named cluster: its shard's virtual workspaces, the cluster's name in place of the path.
        (
            format!("{vw}/root:org/apis/g/v1/widgets?watch=true"),
            format!("/vw-alpha{vw}/c-org/apis/g/v1/widgets?watch=true"),
        ),
        // `*` names no cluster: the mapping's backend, as upstream.
        (
            format!("{vw}/*/apis/g/v1/widgets"),
            format!("{vw}/*/apis/g/v1/widgets"),
        ),
        // The shard marker: stripped, that shard's virtual workspaces, whatever the path names.
        (
            format!("/shards/alpha{vw}/*/apis/g/v1/widgets?watch=1"),
            format!("/vw-alpha{vw}/*/apis/g/v1/widgets?watch=1"),
        ),
    ];
    for (path, forwarded) in cases {
        let (status, seen) = setup
            .json(forged(setup.get(&path).bearer_auth(TOKEN)))
            .await;
        assert_eq!(
            (status, seen["path"].as_str()),
            (200, Some(forwarded.as_str())),
            "{path}"
        );
        assert_eq!(seen["headers"]["x-remote-user"], json!(["alice"]), "{path}");
        assert!(
            seen["headers"].get("x-remote-extra-scopes").is_none(),
            "{path}"
        );
    }
    let refused = [
        (format!("{vw}/root:nope/apis"), 403, "Forbidden"),
        (format!("{vw}/root:sleepy/apis"), 503, "ServiceUnavailable"),
        (
            format!("/shards/gone{vw}/*/apis"),
            503,
            "ServiceUnavailable",
        ),
        (
            "/shards/alpha/clusters/root:org/api".to_owned(),
            404,
            "NotFound",
        ),
        ("/shards/alpha".to_owned(), 404, "NotFound"),
    ];
    for (path, code, reason) in refused {
        let (status, body) = setup.json(setup.get(&path).bearer_auth(TOKEN)).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (code, Some(reason)),
            "{path}: {body}"
        );
    }
    let (_, forbidden) = setup.json(setup.get(&format!("{vw}/root:nope/apis"))).await;
    assert_not_permitted(&forbidden);
    setup.stop.cancel();
}
