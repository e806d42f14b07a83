//! The quota controller: keys located without decoding, usage summed over covered objects,
//! and the controller itself on a real store in memory, converging after creates and deletes,
//! counting custom resources only where they are served and never another cluster's objects.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kcp_registry::Registry;
use kcp_registry::storage::ObjectStore;
use kcp_registry::store::DeleteOptions;

use super::*;

#[test]
fn keys_locate_objects() {
    let root = "/registry/";
    let cm = KeyLocation::parse(root, "/registry/core/configmaps/abc/default/x").unwrap();
    assert_eq!(
        (cm.group, cm.resource, cm.cluster, cm.namespace),
        ("core", "configmaps", "abc", Some("default"))
    );
    let custom = KeyLocation::parse(
        root,
        "/registry/example.com/widgets/customresources/abc/ns/w",
    )
    .unwrap();
    assert_eq!(
        (custom.group, custom.cluster, custom.namespace),
        ("example.com", "abc", Some("ns"))
    );
    let cluster_scoped = KeyLocation::parse(root, "/registry/core/namespaces/abc/ns").unwrap();
    assert_eq!(cluster_scoped.namespace, None);
    let crd_cluster_scoped =
        KeyLocation::parse(root, "/registry/example.com/things/customresources/abc/t").unwrap();
    assert_eq!(
        (crd_cluster_scoped.cluster, crd_cluster_scoped.namespace),
        ("abc", None)
    );
}

#[test]
fn usage_counts_only_covered_objects() {
    let quota = json!({"spec": {"hard": {"count/configmaps": "5", "pods": "3",
        "requests.cpu": "2"}, "scopes": []}});
    let hard = resource_list(quota.pointer("/spec/hard"));
    let measured = vec![
        MeasuredType {
            group: String::new(),
            plural: "configmaps".into(),
            objects: vec![json!({}), json!({})],
        },
        MeasuredType {
            group: String::new(),
            plural: "pods".into(),
            objects: vec![
                json!({"spec": {"containers": [{"name": "a",
                    "resources": {"requests": {"cpu": "500m"}}}]}}),
                json!({"spec": {"containers": []}, "status": {"phase": "Failed"}}),
            ],
        },
    ];
    let used = usage_under(&quota, &hard, &measured, 0);
    let printed: Vec<String> = used.iter().map(|(r, q)| format!("{r}={q}")).collect();
    assert_eq!(
        printed,
        vec!["count/configmaps=2", "pods=1", "requests.cpu=500m"]
    );
}

#[test]
fn watched_namespaces_come_and_go() {
    let mut watched = Watched::new();
    let cluster = LogicalClusterName::parse("abc").unwrap();
    remember(&mut watched, &cluster, "ns", "q1");
    remember(&mut watched, &cluster, "ns", "q2");
    forget(&mut watched, &cluster, "ns", "q1");
    assert_eq!(watched_keys(&watched), vec![(cluster.clone(), "ns".into())]);
    forget(&mut watched, &cluster, "ns", "q2");
    assert!(watched.is_empty());
}

async fn memory_store() -> RestStore {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    RestStore::new(
        ObjectStore::new(storage, "/registry"),
        Arc::new(Registry::new()),
    )
}

/// Polls the quota's `status.used` until it is `expected` (10 s at most).
async fn used_becomes(store: &RestStore, cluster: &LogicalClusterName, expected: Value) {
    let quotas = store
        .registry()
        .builtin_type("", "v1", "resourcequotas")
        .unwrap();
    let at = Location {
        cluster,
        namespace: Some("ns"),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let quota = store.get(&quotas, at, "q").await.unwrap().object;
        if quota.pointer("/status/used") == Some(&expected) {
            assert_eq!(quota["status"]["hard"], quota["spec"]["hard"]);
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "status.used stayed {:?}, wanted {expected}",
            quota.pointer("/status/used")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn usage_converges_after_creates_and_deletes() {
    let store = memory_store().await;
    let stop = CancellationToken::new();
    tokio::spawn(run(store.clone(), stop.clone()));
    let registry = store.registry().clone();
    let namespaces = registry.builtin_type("", "v1", "namespaces").unwrap();
    let config_maps = registry.builtin_type("", "v1", "configmaps").unwrap();
    let quotas = registry.builtin_type("", "v1", "resourcequotas").unwrap();
    let (one, other) = (
        LogicalClusterName::parse("one").unwrap(),
        LogicalClusterName::parse("other").unwrap(),
    );
    for cluster in [&one, &other] {
        let scope = Location {
            cluster,
            namespace: None,
        };
        store
            .create(
                &namespaces,
                scope,
                json!({"metadata": {"name": "ns"}}),
                false,
            )
            .await
            .unwrap();
        let at = Location {
            cluster,
            namespace: Some("ns"),
        };
        store
            .create(
                &config_maps,
                at,
                json!({"metadata": {"name": "before"}}),
                false,
            )
            .await
            .unwrap();
    }
    let at = Location {
        cluster: &one,
        namespace: Some("ns"),
    };
    let hard = json!({"configmaps": "10", "count/configmaps": "10", "resourcequotas": "1",
        "count/widgets.example.com": "3", "pods": "4", "requests.cpu": "2"});
    store
        .create(
            &quotas,
            at,
            json!({"metadata": {"name": "q"}, "spec": {"hard": hard}}),
            false,
        )
        .await
        .unwrap();
    used_becomes(
        &store,
        &one,
        json!({"configmaps": "1", "count/configmaps": "1",
        "resourcequotas": "1", "count/widgets.example.com": "0", "pods": "0",
        "requests.cpu": "0"}),
    )
    .await;
    for name in ["a", "b"] {
        store
            .create(&config_maps, at, json!({"metadata": {"name": name}}), false)
            .await
            .unwrap();
    }
    let elsewhere = Location {
        cluster: &other,
        namespace: Some("ns"),
    };
    store
        .create(
            &config_maps,
            elsewhere,
            json!({"metadata": {"name": "c"}}),
            false,
        )
        .await
        .unwrap();
    used_becomes(
        &store,
        &one,
        json!({"configmaps": "3", "count/configmaps": "3",
        "resourcequotas": "1", "count/widgets.example.com": "0", "pods": "0",
        "requests.cpu": "0"}),
    )
    .await;
    for name in ["a", "before"] {
        store
            .delete(&config_maps, at, name, &DeleteOptions::default())
            .await
            .unwrap();
    }
    used_becomes(
        &store,
        &one,
        json!({"configmaps": "1", "count/configmaps": "1",
        "resourcequotas": "1", "count/widgets.example.com": "0", "pods": "0",
        "requests.cpu": "0"}),
    )
    .await;
    stop.cancel();
}
