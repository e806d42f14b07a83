//! The cache's verbs through `CacheService::answer`, over a real in-memory store: what each verb
//! answers, the wildcards, the annotations reads carry, the watch stream and the errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use http::Method;
use http_body_util::BodyExt;
use kcp_apiserver::services::ServiceRequest;
use kcp_authn::UserInfo;
use kcp_cache::CacheService;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BASE: &str = "/services/cache/shards";

fn masters() -> UserInfo {
    UserInfo {
        name: "admin".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        ..UserInfo::default()
    }
}

async fn service() -> CacheService {
    CacheService::new(kcp_storage::open_in_memory().await.unwrap(), "/cache")
}

async fn call(
    cache: &CacheService,
    user: UserInfo,
    method: Method,
    path_and_query: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q.to_owned())),
        None => (path_and_query, None),
    };
    let response = cache
        .answer(ServiceRequest {
            user,
            method,
            path: path.to_owned(),
            query,
            headers: http::HeaderMap::new(),
            body: body.map_or_else(Bytes::new, |b| Bytes::from(serde_json::to_vec(&b).unwrap())),
            shutdown: CancellationToken::new(),
        })
        .await;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn widget(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"name": name, "labels": labels}, "spec": {"size": 1}})
}

fn widgets(shard: &str, cluster: &str) -> String {
    format!("{BASE}/{shard}/clusters/{cluster}/apis/example.io/v1/widgets")
}

#[tokio::test]
async fn every_verb_keeps_the_json_and_names_shard_and_cluster() {
    let cache = service().await;
    let (code, created) = call(
        &cache,
        masters(),
        Method::POST,
        &widgets("amber", "abc"),
        Some(widget("w1", json!({"tier": "gold"}))),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"], json!({"size": 1}));
    assert_eq!(created["metadata"]["annotations"]["kcp.io/shard"], "amber");
    assert_eq!(created["metadata"]["annotations"]["kcp.io/cluster"], "abc");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, again) = call(
        &cache,
        masters(),
        Method::POST,
        &widgets("amber", "abc"),
        Some(widget("w1", json!({}))),
    )
    .await;
    assert_eq!(
        (code, again["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );

    let item = format!("{}/w1", widgets("amber", "abc"));
    let (code, got) = call(&cache, masters(), Method::GET, &item, None).await;
    assert_eq!((code, &got), (200, &created));

    let mut changed = got.clone();
    changed["spec"]["size"] = json!(2);
    let (code, updated) = call(&cache, masters(), Method::PUT, &item, Some(changed.clone())).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["size"], 2);
    let (code, stale) = call(&cache, masters(), Method::PUT, &item, Some(changed)).await;
    assert_eq!((code, stale["reason"].as_str()), (409, Some("Conflict")));
    assert_ne!(updated["metadata"]["resourceVersion"].as_str().unwrap(), rv);

    let (code, deleted) = call(&cache, masters(), Method::DELETE, &item, None).await;
    assert_eq!((code, deleted["spec"]["size"].as_i64()), (200, Some(2)));
    let (code, gone) = call(&cache, masters(), Method::GET, &item, None).await;
    assert_eq!((code, gone["reason"].as_str()), (404, Some("NotFound")));
}

#[tokio::test]
async fn lists_cross_shards_and_clusters_and_select_labels() {
    let cache = service().await;
    for (shard, cluster, name, tier) in [
        ("amber", "abc", "a", "gold"),
        ("amber", "def", "b", "silver"),
        ("sapphire", "abc", "c", "gold"),
    ] {
        let (code, body) = call(
            &cache,
            masters(),
            Method::POST,
            &widgets(shard, cluster),
            Some(widget(name, json!({"tier": tier}))),
        )
        .await;
        assert_eq!(code, 201, "{body}");
    }
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for (shard, cluster, query, expected) in [
        ("*", "*", "", vec!["a", "b", "c"]),
        ("amber", "*", "", vec!["a", "b"]),
        ("*", "abc", "", vec!["a", "c"]),
        ("amber", "abc", "", vec!["a"]),
        ("*", "*", "?labelSelector=tier%3Dgold", vec!["a", "c"]),
        ("sapphire", "def", "", vec![]),
    ] {
        let (code, list) = call(
            &cache,
            masters(),
            Method::GET,
            &format!("{}{query}", widgets(shard, cluster)),
            None,
        )
        .await;
        assert_eq!(code, 200, "{list}");
        assert_eq!(names(&list), expected, "{shard}/{cluster}{query}");
        assert!(list["metadata"]["resourceVersion"].as_str().is_some());
    }
}

#[tokio::test]
async fn refuses_what_it_does_not_serve() {
    let cache = service().await;
    let user = UserInfo {
        name: "alice".into(),
        groups: vec!["system:authenticated".into()],
        ..UserInfo::default()
    };
    let (code, _) = call(&cache, user, Method::GET, &widgets("amber", "abc"), None).await;
    assert_eq!(code, 403);
    for (method, path, body, expected) in [
        (
            Method::GET,
            format!("{BASE}/Amber/clusters/abc/api/v1/configmaps"),
            None,
            400,
        ),
        (
            Method::GET,
            "/services/cache/clusters/abc/api/v1/configmaps".to_owned(),
            None,
            400,
        ),
        (
            Method::GET,
            format!("{BASE}/a/clusters/abc/api/v1"),
            None,
            404,
        ),
        (Method::GET, format!("{}/x", widgets("*", "abc")), None, 400),
        (
            Method::PATCH,
            format!("{}/x", widgets("a", "abc")),
            None,
            405,
        ),
        (Method::DELETE, widgets("a", "abc"), None, 405),
        (
            Method::POST,
            widgets("a", "abc"),
            Some(json!({"kind": "Widget", "apiVersion": "example.io/v1"})),
            400,
        ),
        (
            Method::POST,
            widgets("a", "abc"),
            Some(json!({"kind": "Widget", "apiVersion": "other/v1", "metadata": {"name": "x"}})),
            400,
        ),
        (Method::POST, widgets("a", "abc"), Some(json!([1])), 400),
        (
            Method::PUT,
            format!("{}/y", widgets("a", "abc")),
            Some(widget("x", json!({}))),
            400,
        ),
    ] {
        let (code, status) = call(&cache, masters(), method.clone(), &path, body).await;
        assert_eq!(code, expected, "{method} {path}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {path}");
    }
}

/// Reads the next event of a watch body.
async fn next_event(body: &mut kcp_apiserver::response::Body) -> Value {
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(10), body.frame())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            return serde_json::from_slice(&data).unwrap();
        }
    }
}

fn watch_request(path: &str, query: &str) -> ServiceRequest {
    ServiceRequest {
        user: masters(),
        method: Method::GET,
        path: path.to_owned(),
        query: Some(query.to_owned()),
        headers: http::HeaderMap::new(),
        body: Bytes::new(),
        shutdown: CancellationToken::new(),
    }
}

#[tokio::test]
async fn watches_see_every_change_in_scope_and_refuse_compacted_revisions() {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    let cache = CacheService::new(storage.clone(), "/cache");
    let (_, first) = call(
        &cache,
        masters(),
        Method::POST,
        &widgets("amber", "abc"),
        Some(widget("old", json!({}))),
    )
    .await;
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    let response = cache
        .answer(watch_request(
            &widgets("*", "abc"),
            &format!("watch=1&resourceVersion={rv}"),
        ))
        .await;
    assert_eq!(response.status(), 200);
    let mut events = response.into_body();
    // Another cluster's object is not in scope; this cluster's on another shard is.
    call(
        &cache,
        masters(),
        Method::POST,
        &widgets("amber", "def"),
        Some(widget("other", json!({}))),
    )
    .await;
    let (_, created) = call(
        &cache,
        masters(),
        Method::POST,
        &widgets("sapphire", "abc"),
        Some(widget("w", json!({}))),
    )
    .await;
    let event = next_event(&mut events).await;
    assert_eq!(
        (event["type"].as_str(), &event["object"]),
        (Some("ADDED"), &created)
    );
    let item = format!("{}/w", widgets("sapphire", "abc"));
    let (_, updated) = call(&cache, masters(), Method::PUT, &item, Some(created)).await;
    let event = next_event(&mut events).await;
    assert_eq!(
        (event["type"].as_str(), &event["object"]),
        (Some("MODIFIED"), &updated)
    );
    call(&cache, masters(), Method::DELETE, &item, None).await;
    let event = next_event(&mut events).await;
    assert_eq!(event["type"], "DELETED");
    assert_eq!(
        event["object"]["metadata"]["annotations"]["kcp.io/shard"],
        "sapphire"
    );

    // Without a resourceVersion the current state comes first.
    let response = cache
        .answer(watch_request(&widgets("amber", "*"), "watch=true"))
        .await;
    let mut events = response.into_body();
    let mut initial: Vec<String> = Vec::new();
    for _ in 0..2 {
        let event = next_event(&mut events).await;
        assert_eq!(event["type"], "ADDED");
        initial.push(
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    initial.sort();
    assert_eq!(initial, ["old", "other"]);

    let current = storage.current_revision().await.unwrap();
    storage.compact(current).await.unwrap();
    let (code, status) = call(
        &cache,
        masters(),
        Method::GET,
        &format!("{}?watch=1&resourceVersion={rv}", widgets("*", "*")),
        None,
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (410, Some("Expired")),
        "{status}"
    );
}
