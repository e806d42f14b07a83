//! Only the root shard holds `root`, as upstream ("the root ws is only present on the root
//! shard"): `kcp sharded` with root and shard-1 and a standalone cache server.
//!
//! - shard-1 holds no `root`: `/clusters/root` there is a logical-cluster name with nothing in
//!   it (no LogicalCluster, no WorkspaceTypes, no workspaces can be created in it), its `Shard`
//!   counts none of root's, and it lists no LogicalCluster of path `root`;
//! - a workspace of the built-in type `root:universal`, created through shard-1 and scheduled
//!   by shard-1 to the root shard, becomes Ready (root's types come from the cache);
//! - a change of `root:universal` on the root shard (its `defaultChildWorkspaceType`) is what a
//!   workspace created through shard-1 gets, polled: there is no local copy of root to win.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::{Caller, Patience, ShardedKcp};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));
const WORKSPACE_TYPES: &str = "apis/tenancy.kcp.io/v1alpha1/workspacetypes";

fn admin(sharded: &ShardedKcp, shard: &str) -> Caller {
    Caller::admin_of(&sharded.admin(shard))
}

fn workspaces(path: &str) -> String {
    format!("/clusters/{path}/apis/tenancy.kcp.io/v1alpha1/workspaces")
}

fn workspace(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
        "metadata": {"name": name}, "spec": spec})
}

fn universal_on(shard: &str) -> Value {
    json!({"type": {"name": "universal", "path": "root"},
        "location": {"selector": {"matchLabels": {"name": shard}}}})
}

/// Waits until workspace `name` in `parent` is Ready (read through `caller`) and returns it.
async fn wait_ready(caller: &Caller, parent: &str, name: &str) -> Value {
    let path = format!("{}/{name}", workspaces(parent));
    PATIENCE
        .eventually(&format!("{parent}:{name} Ready"), || async {
            let answer = caller.get(&path).await;
            match answer.status == 200 && answer.json()["status"]["phase"] == "Ready" {
                true => Ok(answer.json()),
                false => Err(answer.text()),
            }
        })
        .await
}

/// Creates workspaces without a type in `parent` through `caller` (another name each time)
/// until one is given type `root:<wanted>`; returns its name.
async fn default_child_becomes(caller: &Caller, parent: &str, wanted: &str) -> String {
    let attempt = std::sync::atomic::AtomicUsize::new(0);
    PATIENCE
        .eventually(
            &format!("a child of {parent} defaults to {wanted}"),
            || async {
                let n = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let name = format!("probe-{n}");
                let answer = caller
                    .post(&workspaces(parent), &workspace(&name, json!({})))
                    .await;
                let created = answer.json();
                match answer.status == 201
                    && created["spec"]["type"] == json!({"name": wanted, "path": "root"})
                {
                    true => Ok(name),
                    false => Err(format!("{} {}", answer.status, answer.text())),
                }
            },
        )
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_root_shard_holds_root() {
    let binary = Path::new(env!("CARGO_BIN_EXE_kcp"));
    let mut sharded = ShardedKcp::start(binary, "sharded-root", 2, &[]).await;
    let (root, shard_1) = (admin(&sharded, "root"), admin(&sharded, "shard-1"));

    // shard-1's `root` is a name with nothing behind it.
    let logical_cluster = shard_1
        .get("/clusters/root/apis/core.kcp.io/v1alpha1/logicalclusters/cluster")
        .await;
    assert_eq!(logical_cluster.status, 404, "{}", logical_cluster.text());
    let types = shard_1
        .get(&format!("/clusters/root/{WORKSPACE_TYPES}"))
        .await;
    assert_eq!(types.status, 200, "{}", types.text());
    assert_eq!(types.json()["items"], json!([]), "{}", types.text());
    let refused = shard_1
        .post(&workspaces("root"), &workspace("nowhere", json!({})))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("has no LogicalCluster"),
        "{}",
        refused.text()
    );
    let paths = shard_1
        .get("/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters")
        .await
        .json();
    assert!(
        !paths["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|lc| lc["metadata"]["annotations"]["kcp.io/path"] == "root"),
        "{paths}"
    );
    let registration = root
        .get("/clusters/root/apis/core.kcp.io/v1alpha1/shards/shard-1")
        .await
        .json();
    assert_eq!(
        registration["status"]["capacity"]["logicalClusters"], 0,
        "{registration}"
    );
    let in_root = root.get(&format!("/clusters/root/{WORKSPACE_TYPES}")).await;
    assert!(
        in_root.text().contains("\"universal\""),
        "{}",
        in_root.text()
    );

    // A workspace of a built-in type, created through shard-1 and scheduled by it to root.
    root.create(
        &workspaces("root"),
        &workspace("a", universal_on("shard-1")),
    )
    .await;
    wait_ready(&root, "root", "a").await;
    shard_1
        .create(&workspaces("root:a"), &workspace("b", universal_on("root")))
        .await;
    let b = wait_ready(&shard_1, "root:a", "b").await;
    assert_eq!(b["metadata"]["annotations"]["core.kcp.io/shard"], "root");
    assert_eq!(b["spec"]["type"]["name"], "universal");

    // root:universal's default child type, changed on the root shard, is what shard-1 uses.
    default_child_becomes(&shard_1, "root:a", "universal").await;
    root.create(
        &format!("/clusters/root/{WORKSPACE_TYPES}"),
        &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
            "metadata": {"name": "custom"}, "spec": {}}),
    )
    .await;
    let universal = format!("/clusters/root/{WORKSPACE_TYPES}/universal");
    let mut changed = root.get(&universal).await.json();
    changed["spec"]["defaultChildWorkspaceType"] = json!({"name": "custom", "path": "root"});
    let answer = root.put(&universal, &changed).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let custom = default_child_becomes(&shard_1, "root:a", "custom").await;
    wait_ready(&shard_1, "root:a", &custom).await;

    let status = sharded.stop().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
}
