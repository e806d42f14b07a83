//! Workspaces across a whole sharded topology (issue 19's topology tests): `kcp sharded` with
//! root, shard-1 and shard-2 and its cache (standalone with embedded stores, standalone on one
//! etcd, or the root shard's in-process cache), one topology per test reused for every check:
//!
//! - workspaces created in root land on every shard (pinned by `spec.location.selector`), each
//!   serves objects through the shard that owns it, and another shard answers 429 for it;
//! - what a shard writes on another (a LogicalCluster it schedules, its `Shard` in root) is
//!   managed by `kcp`, upstream's field manager for it, never `unknown`;
//! - shards read back from the cache what they do not own: a WorkspaceType created in
//!   `root:on-root` (a workspace on the root shard) is usable for a workspace created through
//!   shard-1, which finds the type's path through the LogicalCluster routing data replicated by
//!   root; a change of the type reaches shard-1's admission, and so does its deletion; the path
//!   `root:on-root` itself is still no request shard-1 serves; and the other way round, a type
//!   of `root:on-1` (shard-1) is usable through the root shard;
//! - a nested workspace whose parent is on shard-1, created through shard-1 with the default type,
//!   is scheduled (by shard-1, over the Shards it read from the cache) and becomes Ready;
//! - a restart of the whole topology on its directories loses nothing, and replication and
//!   read-back resume (a type created after it reaches shard-1);
//! - deleting a tree spanning the shards completes: no LogicalCluster of it is left anywhere.
//!
//! And only the root shard holds `root`, as upstream ("the root ws is only present on the root
//! shard"), on a topology of root and shard-1 of its own:
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

use kcp_testing::{Caller, EtcdProcess, Patience, ShardedKcp};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));
const SHARDS: [&str; 3] = ["root", "shard-1", "shard-2"];
const WORKSPACES: &str = "apis/tenancy.kcp.io/v1alpha1/workspaces";
const WORKSPACE_TYPES: &str = "apis/tenancy.kcp.io/v1alpha1/workspacetypes";

async fn start(label: &str, flags: &[String]) -> ShardedKcp {
    ShardedKcp::start(Path::new(env!("CARGO_BIN_EXE_kcp")), label, 3, flags).await
}

fn admin(sharded: &ShardedKcp, shard: &str) -> Caller {
    Caller::admin_of(&sharded.admin(shard))
}

fn workspaces(path: &str) -> String {
    format!("/clusters/{path}/{WORKSPACES}")
}

fn workspace(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
        "metadata": {"name": name}, "spec": spec})
}

fn pinned(shard: &str) -> Value {
    json!({"location": {"selector": {"matchLabels": {"name": shard}}}})
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

/// A ConfigMap named `name` in `default` of `path`, created through the shard that owns it.
async fn create_config_map(owner: &Caller, path: &str, name: &str) {
    owner
        .create(
            &format!("/clusters/{path}/api/v1/namespaces/default/configmaps"),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
        )
        .await;
}

/// Posts workspaces of type `root:on-root:special` in `root:on-1` through shard-1 until the
/// answer satisfies `done` (another name each time); returns that answer's status and body.
async fn special_through_shard_1(
    shard_1: &Caller,
    what: &str,
    done: impl Fn(u16, &str) -> bool,
) -> (u16, String) {
    let attempt = std::sync::atomic::AtomicUsize::new(0);
    PATIENCE
        .eventually(what, || async {
            let n = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let body = workspace(
                &format!("special-{what}-{n}").replace(' ', "-"),
                json!({"type": {"name": "special", "path": "root:on-root"}}),
            );
            let answer = shard_1.post(&workspaces("root:on-1"), &body).await;
            let text = answer.text();
            match done(answer.status, &text) {
                true => Ok((answer.status, text)),
                false => Err(format!("{} {text}", answer.status)),
            }
        })
        .await
}

/// WorkspaceType `special`: it extends `root:universal`, so organizations (like `root:on-1`)
/// may have it as a child.
fn special_type() -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
        "metadata": {"name": "special"},
        "spec": {"extend": {"with": [{"name": "universal", "path": "root"}]}}})
}

/// The paths of the LogicalClusters `caller`'s shard holds.
async fn logical_cluster_paths(caller: &Caller) -> Vec<String> {
    let answer = caller
        .get("/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters")
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|lc| lc["metadata"]["annotations"]["kcp.io/path"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The field managers of `object`'s `managedFields`, once each.
fn managers(object: &Value) -> Vec<String> {
    let mut managers: Vec<String> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["manager"].as_str())
        .map(str::to_owned)
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

/// The whole scenario on one topology started with `flags`.
async fn workspaces_across_the_topology(label: &str, flags: &[String]) {
    let mut sharded = start(label, flags).await;
    let root = admin(&sharded, "root");

    // One workspace per shard, created in root and pinned to it.
    for shard in SHARDS {
        root.create(
            &workspaces("root"),
            &workspace(
                &format!("on-{}", shard.trim_start_matches("shard-")),
                pinned(shard),
            ),
        )
        .await;
    }
    let names = ["on-root", "on-1", "on-2"];
    for (name, shard) in names.iter().zip(SHARDS) {
        let ready = wait_ready(&root, "root", name).await;
        assert_eq!(ready["metadata"]["annotations"]["core.kcp.io/shard"], shard);
        create_config_map(&admin(&sharded, shard), &format!("root:{name}"), "kept").await;
    }
    // Written across shards with upstream's user agents: managed by `kcp`, as upstream's
    // shards record them, never by `unknown`.
    let scheduled = "/clusters/root:on-1/apis/core.kcp.io/v1alpha1/logicalclusters/cluster";
    let registered = "/clusters/root/apis/core.kcp.io/v1alpha1/shards/shard-1";
    let shard_1 = admin(&sharded, "shard-1");
    for (caller, path) in [(&shard_1, scheduled), (&root, registered)] {
        let object = caller.get(path).await.json();
        assert_eq!(managers(&object), ["kcp"], "{path}: {object}");
    }
    let elsewhere = root.get("/clusters/root:on-1/api/v1/namespaces").await;
    assert_eq!(elsewhere.status, 429, "{}", elsewhere.text());

    // A type in root:on-root (root shard), used through shard-1.
    root.create(
        &format!("/clusters/root:on-root/{WORKSPACE_TYPES}"),
        &special_type(),
    )
    .await;
    let (_, created) =
        special_through_shard_1(&shard_1, "type created", |status, _| status == 201).await;
    let created: Value = serde_json::from_str(&created).unwrap();
    let name = created["metadata"]["name"].as_str().unwrap().to_owned();
    wait_ready(&shard_1, "root:on-1", &name).await;
    // The copies resolve types only: root:on-root is still no path shard-1 serves.
    let not_here = shard_1
        .get("/clusters/root:on-root/api/v1/namespaces")
        .await;
    assert_eq!(not_here.status, 404, "{}", not_here.text());

    // Changed in root: no parent may have it any more, and shard-1 learns so.
    let path = format!("/clusters/root:on-root/{WORKSPACE_TYPES}/special");
    let mut changed = root.get(&path).await.json();
    changed["spec"]["limitAllowedParents"] = json!({"none": true});
    let answer = root.put(&path, &changed).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    special_through_shard_1(&shard_1, "type changed", |status, text| {
        status == 403 && !text.contains("cannot be resolved")
    })
    .await;

    // The other way round: a type in root:on-1 (shard-1) used in root through the root shard
    // (which reads the cache back in the same process with `--cache in-process`).
    let mut from_1 = special_type();
    from_1["metadata"]["name"] = json!("from-1");
    shard_1
        .create(&format!("/clusters/root:on-1/{WORKSPACE_TYPES}"), &from_1)
        .await;
    let of_from_1 = workspace(
        "of-from-1",
        json!({"type": {"name": "from-1", "path": "root:on-1"}}),
    );
    PATIENCE
        .wait_created(
            "root:on-1:from-1 usable through root",
            &root,
            &workspaces("root"),
            &of_from_1,
        )
        .await;

    // A nested workspace in on-1 (shard-1), through shard-1, default type, placed on shard-2.
    shard_1
        .create(
            &workspaces("root:on-1"),
            &workspace("nested", pinned("shard-2")),
        )
        .await;
    let nested = wait_ready(&shard_1, "root:on-1", "nested").await;
    assert_eq!(nested["spec"]["type"]["name"], "universal");
    create_config_map(&admin(&sharded, "shard-2"), "root:on-1:nested", "kept").await;

    // Everything survives a restart of the topology; replication and read-back resume.
    sharded.restart().await;
    for (name, shard) in names.iter().zip(SHARDS) {
        wait_ready(&admin(&sharded, "root"), "root", name).await;
        let kept = admin(&sharded, shard)
            .get(&format!(
                "/clusters/root:{name}/api/v1/namespaces/default/configmaps/kept"
            ))
            .await;
        assert_eq!(kept.status, 200, "{name}: {}", kept.text());
    }
    let shard_1 = admin(&sharded, "shard-1");
    wait_ready(&shard_1, "root:on-1", "nested").await;
    let root = admin(&sharded, "root");
    let answer = root.delete(&path).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    special_through_shard_1(&shard_1, "type deleted", |status, text| {
        status == 403 && text.contains("cannot be resolved")
    })
    .await;
    root.create(
        &format!("/clusters/root:on-root/{WORKSPACE_TYPES}"),
        &special_type(),
    )
    .await;
    special_through_shard_1(&shard_1, "type created again", |status, _| status == 201).await;

    // Deleting on-1 deletes the tree below it, on every shard.
    let answer = root.delete(&format!("{}/on-1", workspaces("root"))).await;
    assert!([200, 202].contains(&answer.status), "{}", answer.text());
    PATIENCE
        .wait_status(
            "on-1 gone",
            &root,
            &format!("{}/on-1", workspaces("root")),
            404,
        )
        .await;
    for shard in SHARDS {
        let caller = admin(&sharded, shard);
        PATIENCE
            .eventually(
                &format!("no LogicalCluster of root:on-1 on {shard}"),
                || async {
                    let left: Vec<String> = logical_cluster_paths(&caller)
                        .await
                        .into_iter()
                        .filter(|path| path.starts_with("root:on-1"))
                        .collect();
                    match left.is_empty() {
                        true => Ok(()),
                        false => Err(format!("{left:?}")),
                    }
                },
            )
            .await;
    }
    let status = sharded.stop().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_standalone_cache_and_embedded_stores() {
    workspaces_across_the_topology("sharded-workspaces", &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_standalone_cache_on_etcd() {
    let etcd = EtcdProcess::start(false).await;
    workspaces_across_the_topology(
        "sharded-workspaces-etcd",
        &[format!("--etcd-servers={}", etcd.client_url())],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_in_process_cache() {
    workspaces_across_the_topology(
        "sharded-workspaces-in-process",
        &["--cache=in-process".to_owned()],
    )
    .await;
}

fn universal_on(shard: &str) -> Value {
    json!({"type": {"name": "universal", "path": "root"},
        "location": {"selector": {"matchLabels": {"name": shard}}}})
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
