//! The counter against a real store in memory: what a scan counts (every object once, exempt
//! ones never, per logical cluster), when it reads nothing, and how admitted changes add to it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use kcp_registry::storage::ObjectStore;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, Registry};
use serde_json::{Value, json};

use super::*;

pub(crate) async fn store() -> RestStore {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    RestStore::new(
        ObjectStore::new(storage, "/registry"),
        Arc::new(Registry::new()),
    )
}

pub(crate) fn cluster(name: &str) -> LogicalClusterName {
    LogicalClusterName::parse(name).unwrap()
}

/// Creates `object` of the built-in type `(group, version, plural)` in `cluster`.
pub(crate) async fn create(
    store: &RestStore,
    cluster: &LogicalClusterName,
    (group, version, plural): (&str, &str, &str),
    namespace: Option<&str>,
    object: Value,
) {
    let rt = store
        .registry()
        .builtin_type(group, version, plural)
        .unwrap();
    let at = Location { cluster, namespace };
    store.create(&rt, at, object, false).await.unwrap();
}

const NAMESPACES: (&str, &str, &str) = ("", "v1", "namespaces");
const CONFIG_MAPS: (&str, &str, &str) = ("", "v1", "configmaps");
const LOGICAL_CLUSTERS: (&str, &str, &str) = ("core.kcp.io", "v1alpha1", "logicalclusters");

/// A LogicalCluster (phase as created: not Ready) with `annotations`.
pub(crate) async fn logical_cluster(
    store: &RestStore,
    cluster: &LogicalClusterName,
    annotations: Value,
) {
    let object = json!({
        "apiVersion": "core.kcp.io/v1alpha1",
        "kind": "LogicalCluster",
        "metadata": {"name": "cluster", "annotations": annotations},
    });
    create(store, cluster, LOGICAL_CLUSTERS, None, object).await;
}

/// A namespace `ns` holding `config_maps` ConfigMaps, and exempt objects beside them.
async fn fill(store: &RestStore, cluster: &LogicalClusterName, config_maps: usize) {
    create(
        store,
        cluster,
        NAMESPACES,
        None,
        json!({"metadata": {"name": "ns"}}),
    )
    .await;
    for i in 0..config_maps {
        let object = json!({"metadata": {"name": format!("cm-{i}")}});
        create(store, cluster, CONFIG_MAPS, Some("ns"), object).await;
    }
    let event = json!({
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "ConfigMap", "namespace": "ns", "name": "cm-0"},
    });
    create(store, cluster, ("", "v1", "events"), Some("ns"), event).await;
    let binding = |name: &str| {
        json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
        })
    };
    let bindings = ("rbac.authorization.k8s.io", "v1", "clusterrolebindings");
    create(store, cluster, bindings, None, binding("workspace-admin")).await;
    create(store, cluster, bindings, None, binding("other")).await;
}

#[tokio::test]
async fn nothing_is_counted_without_a_default_or_an_annotation() {
    let store = store().await;
    let a = cluster("a-cluster");
    fill(&store, &a, 3).await;
    logical_cluster(&store, &a, json!({"other": "x"})).await;
    let counts = ObjectCounts::new(0, Duration::from_secs(60));
    let scan = counts.scan(&store).await.unwrap();
    assert!(!scan.active);
    assert_eq!((scan.objects, scan.keys), (0, 0));
    assert!(!counts.is_active());
    assert_eq!(counts.count(&a), 0);
}

#[tokio::test]
async fn a_scan_counts_every_object_of_each_cluster_but_exempt_ones() {
    let store = store().await;
    let (a, b) = (cluster("a-cluster"), cluster("b-cluster"));
    fill(&store, &a, 3).await;
    fill(&store, &b, 1).await;
    logical_cluster(&store, &a, json!({})).await;
    let counts = ObjectCounts::new(100, Duration::from_secs(60));
    let scan = counts.scan(&store).await.unwrap();
    assert!(scan.active && counts.is_active());
    // The namespace, its ConfigMaps and the ClusterRoleBinding "other"; not the event, the
    // LogicalCluster nor the workspace-admin binding.
    assert_eq!(counts.count(&a), 1 + 3 + 1);
    assert_eq!(counts.count(&b), 1 + 1 + 1);
    assert_eq!(scan.objects, 8);
    assert_eq!(scan.keys, 8 + 2 * 2 + 1);
    assert_eq!(counts.count(&cluster("c-cluster")), 0);
}

#[tokio::test]
async fn an_annotated_logical_cluster_turns_counting_on() {
    let store = store().await;
    let a = cluster("a-cluster");
    fill(&store, &a, 2).await;
    logical_cluster(&store, &a, json!({"core.kcp.io/max-total-objects": "10"})).await;
    let counts = ObjectCounts::new(0, Duration::from_secs(60));
    assert!(counts.scan(&store).await.unwrap().active);
    assert_eq!(counts.count(&a), 4);
}

#[tokio::test]
async fn admitted_changes_count_until_the_next_scan_replaces_them() {
    let store = store().await;
    let a = cluster("a-cluster");
    fill(&store, &a, 1).await;
    let counts = ObjectCounts::new(100, Duration::from_secs(60));
    counts.scan(&store).await.unwrap();
    assert_eq!(counts.count(&a), 3);
    counts.added(&a);
    counts.added(&a);
    counts.removed(&a);
    assert_eq!(counts.count(&a), 4);
    // The admitted create never reached storage: the scan corrects the drift.
    counts.scan(&store).await.unwrap();
    assert_eq!(counts.count(&a), 3);
    // A new cluster starts from its admitted creates.
    let new = cluster("new-cluster");
    counts.added(&new);
    assert_eq!(counts.count(&new), 1);
    counts.removed(&new);
    counts.removed(&new);
    assert_eq!(counts.count(&new), 0);
}

#[test]
fn reserve_counts_only_what_fits() {
    let counts = ObjectCounts::new(0, Duration::from_secs(60));
    let a = cluster("a-cluster");
    assert_eq!(counts.check(&a, 2), Ok(()));
    assert_eq!(counts.reserve(&a, 2), Ok(()));
    assert_eq!(counts.reserve(&a, 2), Ok(()));
    let full = Full { count: 2, limit: 2 };
    assert_eq!(counts.check(&a, 2), Err(full));
    assert_eq!(counts.reserve(&a, 2), Err(full));
    assert_eq!(counts.count(&a), 2);
    assert_eq!(counts.reserve(&a, 3), Ok(()));
}

#[test]
fn keys_are_counted_by_their_cluster_segment() {
    let root = "/registry/";
    assert_eq!(
        cluster_of_key(root, "/registry/core/configmaps/abc/ns/x"),
        Some(("abc", false))
    );
    assert_eq!(
        cluster_of_key(root, "/registry/core/namespaces/abc/ns"),
        Some(("abc", false))
    );
    assert_eq!(
        cluster_of_key(
            root,
            "/registry/example.com/widgets/customresources/abc/ns/w"
        ),
        Some(("abc", false))
    );
    assert_eq!(
        cluster_of_key(root, "/registry/example.com/widgets/customresources/abc/w"),
        Some(("abc", false))
    );
    assert_eq!(
        cluster_of_key(root, "/registry/core/events/abc/ns/e"),
        Some(("abc", true))
    );
    assert_eq!(
        cluster_of_key(
            root,
            "/registry/rbac.authorization.k8s.io/clusterrolebindings/abc/workspace-admin"
        ),
        Some(("abc", true))
    );
    assert_eq!(cluster_of_key(root, "/registry/core/configmaps"), None);
    assert_eq!(
        cluster_of_key(root, "/other/core/configmaps/abc/ns/x"),
        None
    );
}
