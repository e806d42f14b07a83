//! The limit's decisions (which objects, which clusters, which limit) and its admission of
//! writes against a store in memory: refusals past the limit with upstream's message, deletes
//! freeing capacity, dry runs, exempt objects and clusters that are not Ready.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kcp_registry::store::UpdateFn;
use serde_json::json;

use super::*;
use crate::object_count::tests::{cluster, logical_cluster, store};

fn ready(annotations: Value) -> Value {
    json!({"metadata": {"name": "cluster", "annotations": annotations}, "status": {"phase": "Ready"}})
}

#[test]
fn events_logical_clusters_and_the_workspace_admin_binding_are_exempt() {
    for (group, resource, name) in [
        ("", "events", "e"),
        ("events.k8s.io", "events", "e"),
        ("core", "events", "e"),
        ("core.kcp.io", "logicalclusters", "cluster"),
        (
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "workspace-admin",
        ),
    ] {
        assert!(
            is_exempt(group, resource, name),
            "{group}/{resource} {name}"
        );
    }
    for (group, resource, name) in [
        ("", "configmaps", "workspace-admin"),
        ("rbac.authorization.k8s.io", "clusterrolebindings", "other"),
        (
            "rbac.authorization.k8s.io",
            "rolebindings",
            "workspace-admin",
        ),
        ("example.com", "events", "e"),
    ] {
        assert!(
            !is_exempt(group, resource, name),
            "{group}/{resource} {name}"
        );
    }
}

#[test]
fn the_default_limits_every_ready_cluster_but_root_and_system_ones() {
    let team = cluster("team");
    assert_eq!(limit_for(&team, &ready(json!({})), 5), Some(5));
    assert_eq!(limit_for(&team, &ready(json!({})), 0), None);
    for exempt in ["root", "system:admin"] {
        assert_eq!(
            limit_for(&cluster(exempt), &ready(json!({})), 5),
            None,
            "{exempt}"
        );
    }
    for phase in [json!("Initializing"), json!("Scheduling"), json!(null)] {
        let mut lc = ready(json!({}));
        lc["status"]["phase"] = phase.clone();
        assert_eq!(limit_for(&team, &lc, 5), None, "{phase}");
    }
}

#[test]
fn the_annotation_overrides_the_default_and_can_turn_it_off() {
    let annotated = |value: &str| ready(json!({MAX_OBJECTS_ANNOTATION: value}));
    let team = cluster("team");
    assert_eq!(limit_for(&team, &annotated("3"), 5), Some(3));
    assert_eq!(limit_for(&team, &annotated("30"), 0), Some(30));
    assert_eq!(limit_for(&cluster("root"), &annotated("3"), 5), Some(3));
    assert_eq!(
        limit_for(&cluster("system:admin"), &annotated("3"), 0),
        Some(3)
    );
    for off in ["0", "-1", "many", ""] {
        assert_eq!(limit_for(&team, &annotated(off), 5), None, "{off:?}");
    }
}

/// A write of a built-in type in `cluster`.
fn write<'a>(
    rt: &'a ResourceType,
    cluster: &'a LogicalClusterName,
    name: &'a str,
    operation: Operation,
) -> Write<'a> {
    Write {
        rt,
        cluster,
        namespace: Some("ns"),
        name,
        subresource: None,
        operation,
        dry_run: false,
    }
}

async fn make_ready(store: &RestStore, cluster: &LogicalClusterName) {
    let rt = logical_cluster_type(store).unwrap();
    let at = Location {
        cluster,
        namespace: None,
    };
    let update: &UpdateFn<'_> = &|old| {
        let mut new = old.clone();
        new["status"] = json!({"phase": "Ready"});
        Ok(new)
    };
    store
        .update(&rt, at, "cluster", update, Some("status"), false)
        .await
        .unwrap();
}

#[tokio::test]
async fn creates_past_the_limit_are_refused_until_a_delete_frees_capacity() {
    let store = store().await;
    let team = cluster("team");
    logical_cluster(&store, &team, json!({MAX_OBJECTS_ANNOTATION: "2"})).await;
    make_ready(&store, &team).await;
    let counts = ObjectCounts::new(0, Duration::from_secs(60));
    counts.scan(&store).await.unwrap();
    let config_maps = store
        .registry()
        .builtin_type("", "v1", "configmaps")
        .unwrap();
    for name in ["a", "b"] {
        admit(
            &counts,
            &store,
            &write(&config_maps, &team, name, Operation::Create),
        )
        .await
        .unwrap();
    }
    let mut dry = write(&config_maps, &team, "c", Operation::Create);
    let refused = admit(&counts, &store, &dry).await.unwrap_err();
    assert_eq!(
        (refused.code, refused.reason),
        (403, kcp_apimachinery::StatusReason::Forbidden)
    );
    assert_eq!(
        refused.message,
        "configmaps \"c\" is forbidden: logical cluster \"team\" has reached its total object count limit (2/2 objects); delete objects to free up capacity"
    );
    dry.dry_run = true;
    assert_eq!(admit(&counts, &store, &dry).await.unwrap_err(), refused);
    // Updates, subresources and exempt objects pass.
    let update = write(&config_maps, &team, "a", Operation::Update);
    admit(&counts, &store, &update).await.unwrap();
    let mut subresource = write(&config_maps, &team, "c", Operation::Create);
    subresource.subresource = Some("status");
    admit(&counts, &store, &subresource).await.unwrap();
    let events = store
        .registry()
        .builtin_type("events.k8s.io", "v1", "events")
        .unwrap();
    admit(
        &counts,
        &store,
        &write(&events, &team, "e", Operation::Create),
    )
    .await
    .unwrap();
    // A dry-run delete frees nothing, a delete frees one, which a dry-run create does not use.
    let mut delete = write(&config_maps, &team, "a", Operation::Delete);
    delete.dry_run = true;
    admit(&counts, &store, &delete).await.unwrap();
    assert_eq!(counts.count(&team), 2);
    delete.dry_run = false;
    admit(&counts, &store, &delete).await.unwrap();
    admit(&counts, &store, &dry).await.unwrap();
    admit(
        &counts,
        &store,
        &write(&config_maps, &team, "c", Operation::Create),
    )
    .await
    .unwrap();
    assert_eq!(counts.count(&team), 2);
}

#[tokio::test]
async fn clusters_not_ready_or_without_a_logical_cluster_are_not_limited() {
    let store = store().await;
    let (initializing, missing) = (cluster("initializing"), cluster("missing"));
    logical_cluster(&store, &initializing, json!({MAX_OBJECTS_ANNOTATION: "1"})).await;
    let counts = ObjectCounts::new(1, Duration::from_secs(60));
    counts.scan(&store).await.unwrap();
    let config_maps = store
        .registry()
        .builtin_type("", "v1", "configmaps")
        .unwrap();
    for cluster in [&initializing, &missing] {
        for name in ["a", "b"] {
            admit(
                &counts,
                &store,
                &write(&config_maps, cluster, name, Operation::Create),
            )
            .await
            .unwrap();
        }
        // Counted all the same, for when the cluster becomes Ready.
        assert_eq!(counts.count(cluster), 2);
    }
    make_ready(&store, &initializing).await;
    let refused = admit(
        &counts,
        &store,
        &write(&config_maps, &initializing, "c", Operation::Create),
    )
    .await
    .unwrap_err();
    assert!(
        refused.message.contains("(2/1 objects)"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn nothing_is_checked_or_counted_while_no_cluster_is_limited() {
    let store = store().await;
    let team = cluster("team");
    let counts = ObjectCounts::new(0, Duration::from_secs(60));
    counts.scan(&store).await.unwrap();
    let config_maps = store
        .registry()
        .builtin_type("", "v1", "configmaps")
        .unwrap();
    admit(
        &counts,
        &store,
        &write(&config_maps, &team, "a", Operation::Create),
    )
    .await
    .unwrap();
    assert_eq!(counts.count(&team), 0);
}
