//! Stopping and starting `kcp`: SIGTERM ends open watches cleanly and exits 0, and a restart on the
//! same root directory (embedded store) or the same etcd loses nothing: every object keeps its
//! content and resourceVersion, and a watch resumed from a resourceVersion handed out before the
//! restart gets exactly the changes made after it, from storage and, once the type has a watch
//! cache again, from the cache's history.
//!
//! Clients (controllers, kubectl) keep resourceVersions across server restarts and resume from
//! them, so a restart that renumbers, drops or replays anything breaks them silently. Every test
//! here owns its server, because it stops it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::{EtcdProcess, KcpProcess, Patience, WatchStream};
use reqwest::Method;
use serde_json::{Value, json};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

const NS: &str = "persist";
const CONFIGMAPS: &str = "/clusters/root/api/v1/namespaces/persist/configmaps";

/// The collections whose every item must survive a restart unchanged, in two logical clusters.
const SNAPSHOT: [&str; 7] = [
    "/clusters/root/api/v1/namespaces",
    "/clusters/root/api/v1/configmaps",
    "/clusters/root/api/v1/secrets",
    "/clusters/root/apis/coordination.k8s.io/v1/leases",
    "/clusters/persist-other/api/v1/namespaces",
    "/clusters/persist-other/api/v1/configmaps",
    "/clusters/*/api/v1/configmaps",
];

#[tokio::test]
async fn embedded_store_keeps_everything_across_a_restart() {
    let kcp = KcpProcess::start(binary(), "restart-embedded", &[]).await;
    assert!(kcp.root_directory().join("store.redb").is_file());
    survives_restart(kcp).await;
}

#[tokio::test]
async fn etcd_keeps_everything_across_a_restart() {
    let etcd = EtcdProcess::start(false).await;
    let kcp = KcpProcess::start(binary(), "restart-etcd", &etcd.kcp_flags()).await;
    assert!(
        !kcp.root_directory().join("store.redb").exists(),
        "with --etcd-servers the embedded store must not be used"
    );
    survives_restart(kcp).await;
}

async fn create(kcp: &KcpProcess, collection: &str, object: Value) -> Value {
    let response = kcp.send_json(Method::POST, collection, &object).await;
    assert_eq!(
        response.status,
        201,
        "POST {collection}: {}",
        response.text()
    );
    response.json()
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion: {object}"))
        .to_owned()
}

/// A merge patch of one ConfigMap's value; returns the patched object.
async fn set_value(kcp: &KcpProcess, name: &str, value: &str) -> Value {
    let response = kcp
        .send(
            Method::PATCH,
            &format!("{CONFIGMAPS}/{name}"),
            "application/merge-patch+json",
            json!({"data": {"v": value}}).to_string(),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

/// Deletes one ConfigMap.
async fn delete(kcp: &KcpProcess, name: &str) {
    let response = kcp
        .send(
            Method::DELETE,
            &format!("{CONFIGMAPS}/{name}"),
            "application/json",
            "",
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
}

/// Every item of every [`SNAPSHOT`] collection, as served.
async fn snapshot(kcp: &KcpProcess) -> Vec<(String, Value)> {
    let mut items = Vec::new();
    for collection in SNAPSHOT {
        let response = kcp.get(collection).await;
        assert_eq!(response.status, 200, "{collection}: {}", response.text());
        items.push((collection.to_owned(), response.json()["items"].clone()));
    }
    items
}

/// The type, name and resourceVersion of a watch event.
fn event_summary(event: &Value) -> (String, String, String) {
    (
        event["type"].as_str().unwrap_or_default().to_owned(),
        event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn expected(kind: &str, object: &Value) -> (String, String, String) {
    (
        kind.to_owned(),
        object["metadata"]["name"].as_str().unwrap().to_owned(),
        resource_version(object),
    )
}

/// Waits until the namespace-defaults controller has given namespace `persist` of `cluster` its
/// `kube-root-ca.crt` and `default` ServiceAccount, so that no write of it lands inside the
/// windows the test compares.
async fn defaults_made(kcp: &KcpProcess, cluster: &str) {
    let patience = Patience::new(Duration::from_secs(30), Duration::from_millis(100));
    for object in ["configmaps/kube-root-ca.crt", "serviceaccounts/default"] {
        let path = format!("/clusters/{cluster}/api/v1/namespaces/{NS}/{object}");
        patience
            .eventually(&format!("{path} exists"), || async {
                let response = kcp.get(&path).await;
                match response.status {
                    200 => Ok(()),
                    status => Err(format!("{status} {}", response.text())),
                }
            })
            .await;
    }
}

async fn survives_restart(mut kcp: KcpProcess) {
    create(&kcp, "/clusters/root/api/v1/namespaces", namespace(NS)).await;
    for name in ["keep", "change", "remove"] {
        create(&kcp, CONFIGMAPS, configmap(name, "before")).await;
    }
    create(
        &kcp,
        "/clusters/root/api/v1/namespaces/persist/secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
               "stringData": {"token": "abc"}}),
    )
    .await;
    create(
        &kcp,
        "/clusters/root/apis/coordination.k8s.io/v1/namespaces/persist/leases",
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "holder"},
               "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}),
    )
    .await;
    create(
        &kcp,
        "/clusters/persist-other/api/v1/namespaces",
        namespace(NS),
    )
    .await;
    create(
        &kcp,
        "/clusters/persist-other/api/v1/namespaces/persist/configmaps",
        configmap("keep", "other"),
    )
    .await;

    defaults_made(&kcp, "root").await;
    defaults_made(&kcp, "persist-other").await;

    // A watch open across the shutdown: it sees one more change, whose resourceVersion is the
    // last one a client would have recorded, and ends cleanly when the server stops.
    let list_rv = resource_version(&kcp.get(CONFIGMAPS).await.json());
    let mut watch = kcp
        .watch(&format!("{CONFIGMAPS}?watch=1&resourceVersion={list_rv}"))
        .await;
    let touched = set_value(&kcp, "keep", "touched").await;
    let event = watch.expect_event().await;
    assert_eq!(event_summary(&event), expected("MODIFIED", &touched));
    let last_rv = resource_version(&touched);

    let before = snapshot(&kcp).await;
    kcp.terminate();
    assert_eq!(
        watch.next().await,
        None,
        "the watch must end cleanly on SIGTERM"
    );
    kcp.wait_for_clean_exit().await;

    kcp.restart().await;
    let after = snapshot(&kcp).await;
    for ((collection, items_before), (_, items_after)) in before.iter().zip(&after) {
        assert_eq!(
            items_after, items_before,
            "{collection} changed across the restart"
        );
    }
    assert_eq!(before.len(), after.len());

    // Resume from before the restart: exactly the changes made after it, in order. The last
    // change is a sentinel: seeing it next proves nothing else came in between.
    let mut resumed = kcp
        .watch(&format!("{CONFIGMAPS}?watch=1&resourceVersion={last_rv}"))
        .await;
    let added = create(&kcp, CONFIGMAPS, configmap("added", "after")).await;
    let changed = set_value(&kcp, "change", "after").await;
    delete(&kcp, "remove").await;
    let sentinel = create(&kcp, CONFIGMAPS, configmap("sentinel", "last")).await;
    let events = collect(&mut resumed, 4).await;
    let summaries: Vec<_> = events.iter().map(event_summary).collect();
    assert_eq!(summaries[0], expected("ADDED", &added));
    assert_eq!(summaries[1], expected("MODIFIED", &changed));
    assert_eq!(
        (summaries[2].0.as_str(), summaries[2].1.as_str()),
        ("DELETED", "remove"),
        "{events:#?}"
    );
    assert_eq!(summaries[3], expected("ADDED", &sentinel));
    assert_eq!(events[1]["object"]["data"]["v"], "after");
    // Revisions strictly increase along the stream.
    let revisions: Vec<u64> = summaries
        .iter()
        .map(|(_, _, rv)| {
            rv.parse()
                .unwrap_or_else(|_| panic!("rv {rv:?} is not a number"))
        })
        .collect();
    assert!(
        revisions.windows(2).all(|pair| pair[0] < pair[1]),
        "{revisions:?}"
    );
    assert!(revisions[0] > last_rv.parse::<u64>().unwrap());

    // A second watch from the same point replays the same events.
    let mut replay = kcp
        .watch(&format!("{CONFIGMAPS}?watch=1&resourceVersion={last_rv}"))
        .await;
    let replayed: Vec<_> = collect(&mut replay, 4)
        .await
        .iter()
        .map(event_summary)
        .collect();
    assert_eq!(replayed, summaries);

    // The reads above gave ConfigMaps a watch cache: a watch resumed from the revision it holds
    // is served from its history, and sees exactly the changes after it.
    let series = |name: &str| format!("{name}{{group=\"core\",resource=\"configmaps\"}} ");
    let figure = |metrics: &str, name: &str| {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&series(name)))
            .map(|n| n.trim().parse::<u64>().unwrap())
    };
    let metrics = kcp
        .wait_for("the ConfigMaps watch cache", "/metrics", |metrics| {
            figure(&metrics.text(), "apiserver_watch_cache_resource_version")
                .is_some_and(|rv| rv > 0)
        })
        .await
        .text();
    let cached_at = figure(&metrics, "apiserver_watch_cache_resource_version").unwrap();
    let watchers = figure(&metrics, "kcp_watch_cache_watchers").unwrap();
    let mut from_history = kcp
        .watch(&format!("{CONFIGMAPS}?watch=1&resourceVersion={cached_at}"))
        .await;
    let watching = figure(
        &kcp.get("/metrics").await.text(),
        "kcp_watch_cache_watchers",
    );
    assert_eq!(watching, Some(watchers + 1), "served by the cache");
    let late = create(&kcp, CONFIGMAPS, configmap("late", "cached")).await;
    let event = from_history.expect_event().await;
    assert_eq!(event_summary(&event), expected("ADDED", &late));

    kcp.stop_cleanly().await;
}

async fn collect(watch: &mut WatchStream, n: usize) -> Vec<Value> {
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        events.push(watch.expect_event().await);
    }
    events
}

/// SIGTERM while watches are open, over HTTP/2 and HTTP/1.1, in one logical cluster and across
/// all: each stream ends cleanly (a complete last event, then the end of the body, no reset) and
/// the process exits 0.
#[tokio::test]
async fn sigterm_ends_open_watches_cleanly() {
    let mut kcp = KcpProcess::start(binary(), "sigterm", &[]).await;
    create(&kcp, "/clusters/root/api/v1/namespaces", namespace(NS)).await;
    // Every namespace gets its kube-root-ca.crt; the watches start after it.
    kcp.wait_for(
        "kube-root-ca.crt",
        &format!("{CONFIGMAPS}/kube-root-ca.crt"),
        |r| r.status == 200,
    )
    .await;
    let rv = resource_version(&kcp.get(CONFIGMAPS).await.json());
    let http1 = kcp.admin().client_builder().http1_only().build().unwrap();
    let mut watches = vec![
        (
            "HTTP/2",
            kcp.watch(&format!("{CONFIGMAPS}?watch=1&resourceVersion={rv}"))
                .await,
        ),
        (
            "HTTP/2 wildcard",
            kcp.watch(&format!(
                "/clusters/*/api/v1/configmaps?watch=1&resourceVersion={rv}"
            ))
            .await,
        ),
        (
            "HTTP/1.1",
            WatchStream::open(
                http1.get(kcp.url(&format!("{CONFIGMAPS}?watch=1&resourceVersion={rv}"))),
            )
            .await,
        ),
    ];
    let created = create(&kcp, CONFIGMAPS, configmap("seen", "x")).await;
    for (what, watch) in &mut watches {
        let event = watch.expect_event().await;
        assert_eq!(event_summary(&event), expected("ADDED", &created), "{what}");
    }

    kcp.terminate();
    for (what, watch) in &mut watches {
        // Bookmarks or a final event may come first; then the stream must end without error.
        while let Some(event) = watch.next().await {
            assert_ne!(event["type"], "ERROR", "{what}: {event}");
        }
    }
    kcp.wait_for_clean_exit().await;
}
