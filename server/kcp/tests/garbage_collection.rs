//! Garbage collection by owner references, through the HTTP API as controllers use it: a
//! dependent goes with its owner (background), stays without the reference (orphan), or holds its
//! owner until it is gone (foreground); a dependent whose owner is another object of the same name
//! (a different UID) is collected too, and owners never reach across logical clusters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kcp_testing::{Caller, Patience, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "gc");

const PATIENCE: Patience = Patience::new(Duration::from_secs(30), Duration::from_millis(100));

fn configmaps(cluster: &str) -> String {
    format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps")
}

fn secrets(cluster: &str) -> String {
    format!("/clusters/{cluster}/api/v1/namespaces/default/secrets")
}

async fn owner(caller: &Caller, cluster: &str, name: &str) -> Value {
    caller
        .create(&configmaps(cluster), &json!({"metadata": {"name": name}}))
        .await
}

fn reference(owner: &Value, block: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block})
}

async fn dependent(caller: &Caller, cluster: &str, name: &str, owners: Vec<Value>) -> Value {
    caller
        .create(
            &secrets(cluster),
            &json!({"metadata": {"name": name, "ownerReferences": owners}}),
        )
        .await
}

async fn gone(caller: &Caller, path: &str) {
    PATIENCE
        .wait_status(&format!("{path} collected"), caller, path, 404)
        .await;
}

async fn delete_with(caller: &Caller, path: &str, policy: &str) {
    let response = caller
        .send(
            Method::DELETE,
            path,
            Some(
                &json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}),
            ),
        )
        .await;
    assert!(
        matches!(response.status, 200 | 202),
        "DELETE {path} ({policy}): {} {}",
        response.status,
        response.text()
    );
}

#[tokio::test]
async fn background_deletes_dependents_after_their_owner() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let parent = owner(&admin, "root", "gc-bg-owner").await;
    dependent(
        &admin,
        "root",
        "gc-bg-child",
        vec![reference(&parent, false)],
    )
    .await;
    admin
        .delete(&format!("{}/gc-bg-owner", configmaps("root")))
        .await;
    gone(&admin, &format!("{}/gc-bg-child", secrets("root"))).await;
}

#[tokio::test]
async fn a_dependent_keeps_living_while_one_owner_remains() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let first = owner(&admin, "root", "gc-two-a").await;
    let second = owner(&admin, "root", "gc-two-b").await;
    dependent(
        &admin,
        "root",
        "gc-two-child",
        vec![reference(&first, false), reference(&second, false)],
    )
    .await;
    admin
        .delete(&format!("{}/gc-two-a", configmaps("root")))
        .await;
    let path = format!("{}/gc-two-child", secrets("root"));
    let left = PATIENCE
        .eventually("the reference to the deleted owner dropped", || async {
            let child = admin.get(&path).await;
            if child.status != 200 {
                return Err(format!("{} {}", child.status, child.text()));
            }
            let child = child.json();
            let owners = child["metadata"]["ownerReferences"].clone();
            if owners.as_array().map(Vec::len) == Some(1) {
                Ok(owners)
            } else {
                Err(owners.to_string())
            }
        })
        .await;
    assert_eq!(left[0]["name"], "gc-two-b");
}

#[tokio::test]
async fn orphan_keeps_dependents_without_the_reference() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let parent = owner(&admin, "root", "gc-orphan-owner").await;
    dependent(
        &admin,
        "root",
        "gc-orphan-child",
        vec![reference(&parent, true)],
    )
    .await;
    let owner_path = format!("{}/gc-orphan-owner", configmaps("root"));
    delete_with(&admin, &owner_path, "Orphan").await;
    gone(&admin, &owner_path).await;
    let child = admin
        .get(&format!("{}/gc-orphan-child", secrets("root")))
        .await;
    assert_eq!(child.status, 200, "{}", child.text());
    assert!(
        child.json()["metadata"]["ownerReferences"].is_null(),
        "{}",
        child.text()
    );
}

#[tokio::test]
async fn foreground_holds_the_owner_until_blocking_dependents_are_gone() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let parent = owner(&admin, "root", "gc-fg-owner").await;
    let child = dependent(
        &admin,
        "root",
        "gc-fg-child",
        vec![reference(&parent, true)],
    )
    .await;
    // A finalizer of someone else's holds the dependent, so the owner must wait for it.
    let child_path = format!("{}/gc-fg-child", secrets("root"));
    let mut held = child.clone();
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let response = admin.put(&child_path, &held).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let owner_path = format!("{}/gc-fg-owner", configmaps("root"));
    delete_with(&admin, &owner_path, "Foreground").await;
    let waiting = PATIENCE
        .eventually("the dependent marked for deletion", || async {
            let child = admin.get(&child_path).await.json();
            if child["metadata"]["deletionTimestamp"].is_string() {
                Ok(child)
            } else {
                Err(child.to_string())
            }
        })
        .await;
    let owner_now = admin.get(&owner_path).await;
    assert_eq!(owner_now.status, 200, "the owner went before its dependent");
    assert!(
        owner_now.json()["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion")),
        "{}",
        owner_now.text()
    );
    let mut released = waiting.clone();
    released["metadata"]["finalizers"] = json!([]);
    let response = admin.put(&child_path, &released).await;
    assert_eq!(response.status, 200, "{}", response.text());
    gone(&admin, &child_path).await;
    gone(&admin, &owner_path).await;
}

#[tokio::test]
async fn an_owner_of_the_same_name_but_another_uid_does_not_count() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    owner(&admin, "root", "gc-uid-owner").await;
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-uid-owner",
        "uid": "00000000-0000-0000-0000-00000000dead"});
    dependent(&admin, "root", "gc-uid-child", vec![stale]).await;
    gone(&admin, &format!("{}/gc-uid-child", secrets("root"))).await;
}

#[tokio::test]
async fn owners_are_looked_up_in_the_dependents_logical_cluster_only() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    // The owner exists in root; a dependent in another logical cluster naming it has no owner.
    let parent = owner(&admin, "root", "gc-cross-owner").await;
    admin
        .ensure(
            "/clusters/gc-other/api/v1/namespaces",
            &json!({"metadata": {"name": "default"}}),
        )
        .await;
    dependent(
        &admin,
        "gc-other",
        "gc-cross-child",
        vec![reference(&parent, false)],
    )
    .await;
    gone(&admin, &format!("{}/gc-cross-child", secrets("gc-other"))).await;
    let still = admin
        .get(&format!("{}/gc-cross-owner", configmaps("root")))
        .await;
    assert_eq!(still.status, 200);
}
