//! Workspaces and LogicalClusters: a Workspace in root is scheduled, its LogicalCluster initialized
//! and the Workspace Ready; deleting the Workspace removes its LogicalCluster and everything in it.

use std::sync::Arc;

use kcp_controllers::TenancyIndex;
use kcp_registry::LogicalClusterName;
use kcp_registry::store::{DeleteOptions, Deleted, RestStore};
use kcp_tenancy::workspace::{Creator, OWNER_ANNOTATION};
use serde_json::{Value, json};

use crate::support::*;

const EXTERNAL_URL: &str = "https://kcp.test:6443";

/// Bootstraps root as `kcp start` does and runs the tenancy controllers (and the index's watch).
async fn tenancy(store: &RestStore, controllers: &Controllers) -> Arc<TenancyIndex> {
    let index = Arc::new(TenancyIndex::default());
    kcp_controllers::bootstrap::before_serving(store, &index, &Default::default())
        .await
        .unwrap();
    let [logical_clusters, workspace_types] = TenancyIndex::types(store).unwrap();
    controllers.start(|stop| {
        index
            .clone()
            .run(store.clone(), logical_clusters, workspace_types, stop)
    });
    controllers.start(|stop| {
        kcp_controllers::logical_clusters::run(
            store.clone(),
            index.clone(),
            EXTERNAL_URL.to_string(),
            stop,
        )
    });
    controllers.start(|stop| {
        kcp_controllers::workspaces::run(
            store.clone(),
            index.clone(),
            EXTERNAL_URL.to_string(),
            stop,
        )
    });
    index
}

/// A Workspace as admission leaves it: typed `root:universal`, its creator recorded.
fn workspace(name: &str) -> Value {
    let creator = Creator {
        username: "alice".to_string(),
        ..Creator::default()
    };
    json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": name, "annotations": {OWNER_ANNOTATION: creator.owner_annotation()}},
        "spec": {"type": {"name": "universal", "path": "root"}},
    })
}

/// Waits until the Workspace's `status.phase` is `phase` and its phase label caught up (the
/// controller writes the label after the status).
async fn wait_phase(store: &RestStore, name: &str, phase: &str) -> Value {
    let workspaces = builtin(store, "tenancy.kcp.io", "v1alpha1", "workspaces");
    let root = LogicalClusterName::root();
    eventually(&format!("workspace {name} {phase}"), || async {
        let object = get(store, &workspaces, at(&root, None), name)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let labelled = object["metadata"]["labels"]["tenancy.kcp.io/phase"] == phase;
        match object["status"]["phase"] == phase && labelled {
            true => Ok(object),
            false => Err(object.to_string()),
        }
    })
    .await
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_in_root_is_scheduled_initialized_and_ready() {
    let store = store().await;
    let controllers = Controllers::new();
    let index = tenancy(&store, &controllers).await;
    let root = LogicalClusterName::root();
    let workspaces = builtin(&store, "tenancy.kcp.io", "v1alpha1", "workspaces");
    let logical_clusters = builtin(&store, "core.kcp.io", "v1alpha1", "logicalclusters");
    let namespaces = builtin(&store, "", "v1", "namespaces");
    let bindings = builtin(
        &store,
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
    );

    store
        .create(&workspaces, at(&root, None), workspace("team-a"), false)
        .await
        .unwrap();
    let ready = wait_phase(&store, "team-a", "Ready").await;

    // Scheduled: a cluster of its own, the URL of its path, held until that cluster is gone.
    let scheduled = ready["spec"]["cluster"].as_str().unwrap().to_string();
    assert_eq!(scheduled.len(), 16, "{ready}");
    assert_eq!(
        ready["spec"]["URL"],
        format!("{EXTERNAL_URL}/clusters/root:team-a")
    );
    assert!(
        strings(&ready["metadata"]["finalizers"]).contains(&"core.kcp.io/logicalcluster".into()),
        "{ready}"
    );
    assert_eq!(ready["metadata"]["labels"]["tenancy.kcp.io/phase"], "Ready");
    assert!(
        strings(&ready["status"]["initializers"]).is_empty(),
        "{ready}"
    );

    // Its LogicalCluster went through initialization and is Ready.
    let target = cluster(&scheduled);
    let logical_cluster = get(&store, &logical_clusters, at(&target, None), "cluster")
        .await
        .unwrap();
    assert_eq!(
        logical_cluster["status"]["phase"], "Ready",
        "{logical_cluster}"
    );
    assert_eq!(
        logical_cluster["metadata"]["annotations"]["kcp.io/path"],
        "root:team-a"
    );
    assert_eq!(logical_cluster["spec"]["owner"]["name"], "team-a");
    assert_eq!(logical_cluster["spec"]["owner"]["cluster"], "root");
    assert!(
        strings(&logical_cluster["spec"]["initializers"]).contains(&"root:universal".into()),
        "the type's initializers: {logical_cluster}"
    );
    assert!(
        strings(&logical_cluster["status"]["initializers"]).is_empty(),
        "{logical_cluster}"
    );
    assert!(
        strings(&logical_cluster["metadata"]["finalizers"])
            .contains(&"core.kcp.io/logicalcluster-deletion".into()),
        "{logical_cluster}"
    );
    assert_eq!(
        logical_cluster["status"]["URL"],
        format!("{EXTERNAL_URL}/clusters/root:team-a")
    );
    // root:universal's initializer made the namespaces; the creator is admin there.
    let mut made = names(&store, &namespaces, &target, None).await;
    made.sort();
    assert_eq!(made, ["default", "kube-system"]);
    let admin = get(&store, &bindings, at(&target, None), "workspace-admin")
        .await
        .unwrap();
    assert_eq!(admin["roleRef"]["name"], "cluster-admin");
    assert_eq!(admin["subjects"][0]["name"], "alice");
    // The path resolves to the new cluster.
    assert_eq!(index.resolve("root:team-a"), Ok(target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_workspace_takes_its_logical_cluster_and_content() {
    let store = store().await;
    let controllers = Controllers::new();
    tenancy(&store, &controllers).await;
    let root = LogicalClusterName::root();
    let workspaces = builtin(&store, "tenancy.kcp.io", "v1alpha1", "workspaces");
    let logical_clusters = builtin(&store, "core.kcp.io", "v1alpha1", "logicalclusters");
    let namespaces = builtin(&store, "", "v1", "namespaces");
    let configmaps = builtin(&store, "", "v1", "configmaps");

    store
        .create(
            &workspaces,
            at(&root, None),
            workspace("short-lived"),
            false,
        )
        .await
        .unwrap();
    let ready = wait_phase(&store, "short-lived", "Ready").await;
    let target = cluster(ready["spec"]["cluster"].as_str().unwrap());
    store
        .create(
            &configmaps,
            at(&target, Some("default")),
            json!({"metadata": {"name": "data"}}),
            false,
        )
        .await
        .unwrap();

    let deleted = store
        .delete(
            &workspaces,
            at(&root, None),
            "short-lived",
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
    assert!(matches!(deleted, Deleted::Pending(_)), "{deleted:?}");
    eventually("workspace gone", || {
        absent(&store, &workspaces, at(&root, None), "short-lived")
    })
    .await;
    absent(&store, &logical_clusters, at(&target, None), "cluster")
        .await
        .unwrap();
    assert!(names(&store, &namespaces, &target, None).await.is_empty());
    assert!(names(&store, &configmaps, &target, None).await.is_empty());
    // Root itself is untouched.
    get(&store, &logical_clusters, at(&root, None), "cluster")
        .await
        .unwrap();
}
