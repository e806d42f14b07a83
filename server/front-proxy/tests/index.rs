//! The front-proxy's index against a real sharded kcp (`kcp sharded --shards=2`: root and
//! shard-1), started as `kcp sharded` starts the front-proxy: `DIR/root.kubeconfig` (the root
//! shard, a `system:masters` user, which wildcard requests need) as both `--root-kubeconfig` and
//! `--shards-kubeconfig`:
//!
//! - it becomes ready, and `root` resolves to the root shard at its Shard's base URL;
//! - workspaces created afterwards on both shards resolve to the shard and logical cluster they
//!   were scheduled to, including one nested across shards (parent on shard-1, child on root);
//! - unknown, invalid and wildcard paths never resolve;
//! - a deleted workspace stops resolving once its deletion is complete;
//! - its counts name both shards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kcp_front_proxy::index::{self, IndexSources};
use kcp_front_proxy::route::{Resolve, Route, Unroutable};
use kcp_testing::{Caller, Patience, ShardedKcp, binaries};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const PATIENCE: Patience = Patience::new(Duration::from_secs(90), Duration::from_millis(100));

fn workspaces(path: &str) -> String {
    format!("/clusters/{path}/apis/tenancy.kcp.io/v1alpha1/workspaces")
}

/// A workspace placed on `shard` (the Shard objects carry a `name` label).
fn pinned(name: &str, shard: &str) -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
        "metadata": {"name": name},
        "spec": {"location": {"selector": {"matchLabels": {"name": shard}}}}})
}

/// Waits until `index` resolves `path`; returns the route.
async fn routed(index: &index::Index, path: &str) -> Route {
    PATIENCE
        .eventually(&format!("{path} resolves"), || async {
            index.resolve(path).map_err(|e| format!("{e:?}"))
        })
        .await
}

/// Waits until the workspace at `parent`:`name` (read through `caller`) has a logical cluster
/// and is past scheduling; returns that logical cluster.
async fn scheduled(caller: &Caller, parent: &str, name: &str) -> String {
    let path = format!("{}/{name}", workspaces(parent));
    PATIENCE
        .eventually(&format!("{parent}:{name} scheduled"), || async {
            let answer = caller.get(&path).await;
            let body = answer.json();
            match body["spec"]["cluster"].as_str() {
                Some(cluster) if body["status"]["phase"] != "Scheduling" => Ok(cluster.to_owned()),
                _ => Err(answer.text()),
            }
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_follows_workspaces_across_shards() {
    let kcp = binaries::workspace_binary("kcp", "kcp");
    let sharded = ShardedKcp::start(&kcp, "front-proxy-index", 2, &[]).await;
    let kubeconfig = sharded.directory().join("root.kubeconfig");
    let stop = CancellationToken::new();
    let index = index::start(
        IndexSources {
            root_kubeconfig: kubeconfig.clone(),
            shards_kubeconfig: kubeconfig.clone(),
        },
        stop.clone(),
    )
    .unwrap();

    PATIENCE
        .eventually("the index is ready", || async {
            match index.is_ready() {
                true => Ok(()),
                false => Err(format!("{:?}", index.counts())),
            }
        })
        .await;
    let root_url = sharded.child("root").url;
    let shard_1_url = sharded.child("shard-1").url;
    assert_eq!(
        routed(&index, "root").await,
        Route {
            shard: "root".into(),
            base_url: root_url.trim_end_matches('/').into(),
            // Behind kcp sharded's proxy the root shard advertises the proxy's marker URL,
            // which means its own base URL.
            virtual_workspaces_url: root_url.trim_end_matches('/').into(),
            cluster: "root".into(),
        }
    );

    let root = Caller::admin_of(&sharded.admin("root"));
    let shard_1 = Caller::admin_of(&sharded.admin("shard-1"));
    root.create(&workspaces("root"), &pinned("on-root", "root"))
        .await;
    root.create(&workspaces("root"), &pinned("on-1", "shard-1"))
        .await;
    let on_root = scheduled(&root, "root", "on-root").await;
    let on_1 = scheduled(&root, "root", "on-1").await;
    // Nested across shards: its parent is on shard-1, it is on root. Root's view of `on-1` is
    // past scheduling before shard-1's own logical cluster may be Ready, and shard-1 refuses
    // workspaces in it until then (403): create once shard-1 accepts.
    PATIENCE
        .eventually("root:on-1:back created at shard-1", || async {
            let answer = shard_1
                .post(&workspaces("root:on-1"), &pinned("back", "root"))
                .await;
            if answer.status == 201 {
                Ok(())
            } else {
                Err(answer.text())
            }
        })
        .await;
    let back = scheduled(&shard_1, "root:on-1", "back").await;

    for (path, shard, url, cluster) in [
        ("root:on-root", "root", &root_url, &on_root),
        ("root:on-1", "shard-1", &shard_1_url, &on_1),
        ("root:on-1:back", "root", &root_url, &back),
        (on_1.as_str(), "shard-1", &shard_1_url, &on_1),
    ] {
        let route = routed(&index, path).await;
        assert_eq!(
            (&*route.shard, &*route.base_url, &*route.cluster),
            (shard, url.trim_end_matches('/'), cluster.as_str()),
            "{path}"
        );
    }
    for path in [
        "*",
        "root:*",
        "root:nope",
        "root:on-1:nope",
        "Root",
        "user:nobody",
    ] {
        assert_eq!(index.resolve(path), Err(Unroutable::Unknown), "{path}");
    }
    let counts = index.counts();
    assert_eq!(counts.shards, 2);
    assert!(counts.workspaces >= 3, "{counts:?}");

    // Deleted: unknown once the Workspace is gone from its parent's shard.
    let deleted = shard_1
        .delete(&format!("{}/back", workspaces("root:on-1")))
        .await;
    assert!(deleted.status < 300, "{}", deleted.text());
    PATIENCE
        .eventually("root:on-1:back unknown after its deletion", || async {
            match index.resolve("root:on-1:back") {
                Err(Unroutable::Unknown) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    assert!(index.resolve("root:on-1").is_ok());
    stop.cancel();
}
