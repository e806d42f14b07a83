//! The garbage collector: dependents go with their owner (background), lose their reference to
//! it (orphan), or hold it until they are gone (foreground). The collector's module is private, so
//! it runs as the shard runs it, among all controllers (`run_all`).

use std::sync::Arc;

use kcp_controllers::{Context, TenancyIndex};
use kcp_registry::store::{DeleteOptions, Deleted, Propagation, RestStore};
use serde_json::{Value, json};

use crate::support::*;

/// Runs every controller of a shard on `store` until the test ends.
fn run_all(store: &RestStore, controllers: &Controllers) {
    let context = Context {
        store: store.clone(),
        tenancy: Arc::new(TenancyIndex::default()),
        external_url: "https://kcp.test:6443".to_string(),
        root_ca_pem: String::new(),
    };
    controllers.start(|stop| kcp_controllers::run_all(context, stop));
}

fn reference(owner: &Value, block: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block})
}

/// A ConfigMap owner and a Secret depending on it, in namespace `default` of a new cluster.
async fn owner_and_dependent(store: &RestStore, block: bool) -> kcp_registry::LogicalClusterName {
    let c = cluster("gc");
    create_namespace(store, &c, "default").await;
    let configmaps = builtin(store, "", "v1", "configmaps");
    let secrets = builtin(store, "", "v1", "secrets");
    let owner = store
        .create(
            &configmaps,
            at(&c, Some("default")),
            json!({"metadata": {"name": "owner"}}),
            false,
        )
        .await
        .unwrap();
    store
        .create(
            &secrets,
            at(&c, Some("default")),
            json!({"metadata": {"name": "dependent", "ownerReferences": [reference(&owner, block)]}}),
            false,
        )
        .await
        .unwrap();
    c
}

async fn delete_owner(
    store: &RestStore,
    c: &kcp_registry::LogicalClusterName,
    propagation: Propagation,
) -> Deleted {
    let configmaps = builtin(store, "", "v1", "configmaps");
    let options = DeleteOptions {
        propagation,
        ..DeleteOptions::default()
    };
    store
        .delete(&configmaps, at(c, Some("default")), "owner", &options)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_goes_with_its_owner() {
    let store = store().await;
    let controllers = Controllers::new();
    run_all(&store, &controllers);
    let c = owner_and_dependent(&store, false).await;
    let secrets = builtin(&store, "", "v1", "secrets");

    let deleted = delete_owner(&store, &c, Propagation::Background).await;
    assert!(matches!(deleted, Deleted::Gone(_)), "{deleted:?}");
    eventually("dependent collected", || {
        absent(&store, &secrets, at(&c, Some("default")), "dependent")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaned_dependent_stays_without_its_reference() {
    let store = store().await;
    let controllers = Controllers::new();
    run_all(&store, &controllers);
    let c = owner_and_dependent(&store, false).await;
    let configmaps = builtin(&store, "", "v1", "configmaps");
    let secrets = builtin(&store, "", "v1", "secrets");

    let deleted = delete_owner(&store, &c, Propagation::Orphan).await;
    assert!(matches!(deleted, Deleted::Pending(_)), "{deleted:?}");
    eventually("owner gone", || {
        absent(&store, &configmaps, at(&c, Some("default")), "owner")
    })
    .await;
    let dependent = get(&store, &secrets, at(&c, Some("default")), "dependent")
        .await
        .unwrap();
    assert!(
        dependent["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{dependent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_dependent_holds_a_foreground_deletion() {
    let store = store().await;
    let controllers = Controllers::new();
    run_all(&store, &controllers);
    let c = owner_and_dependent(&store, true).await;
    let configmaps = builtin(&store, "", "v1", "configmaps");
    let secrets = builtin(&store, "", "v1", "secrets");

    let deleted = delete_owner(&store, &c, Propagation::Foreground).await;
    let Deleted::Pending(owner) = deleted else {
        panic!("foreground deletion finished at once: {deleted:?}");
    };
    assert_eq!(
        owner["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    eventually("dependent collected, then owner", || async {
        absent(&store, &secrets, at(&c, Some("default")), "dependent").await?;
        absent(&store, &configmaps, at(&c, Some("default")), "owner").await
    })
    .await;
}
