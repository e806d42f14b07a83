//! Scenario 6: deleting the whole deployment (the Kubeconfig objects the suite made, the Shard,
//! the FrontProxy, the RootShard and the CacheServer) removes every object the operator created
//! for it from the host: garbage collection by owner references, as on any Kubernetes cluster.
//! The Shard still holds workspaces, so it goes with `operator.kcp.io/force-delete: "true"`,
//! which deregisters it at once. The etcd volumes stay, as the operator documents
//! (`whenDeleted: Retain`: deleting the owner keeps the data).

use std::time::Duration;

use super::full::{PROXY_KUBECONFIG, registered_shards};
use super::rootshard::ADMIN_KUBECONFIG;
use super::{CACHE_SERVER, FRONT_PROXY, NAMESPACE, POLL, ROOT_SHARD, SHARD_KIND, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

/// The kinds the operator creates for a RootShard (and the pods the workloads run).
pub const KINDS: &[&str] = &[
    "deployments",
    "statefulsets",
    "services",
    "secrets",
    "configmaps",
    "poddisruptionbudgets",
    "pods",
];

pub fn delete_everything(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let shards = admin
        .get(&[SHARD_KIND, "-n", NAMESPACE])?
        .unwrap_or_default();
    for shard in shards["items"].as_array().into_iter().flatten() {
        if let Some(name) = shard["metadata"]["name"].as_str() {
            force_delete_shard(suite, &admin, name)?;
        }
    }
    suite
        .narrator
        .step("kubectl delete kubeconfig, frontproxy, rootshard, cacheserver");
    for (kind, name) in [
        ("kubeconfig", ADMIN_KUBECONFIG),
        ("kubeconfig", PROXY_KUBECONFIG),
        ("frontproxy", FRONT_PROXY),
        ("rootshard", ROOT_SHARD),
        ("cacheserver", CACHE_SERVER),
    ] {
        admin.run(&[
            "delete",
            kind,
            "-n",
            NAMESPACE,
            name,
            "--ignore-not-found",
            "--wait=false",
        ])?;
    }
    eventually(
        "RootShard gone",
        Duration::from_secs(120),
        POLL,
        || match admin.get(&["rootshard", "-n", NAMESPACE, ROOT_SHARD])? {
            None => Ok(()),
            Some(root) => Err(format!("still there: {}", root["metadata"])),
        },
    )?;
    suite
        .narrator
        .step("everything it made is garbage-collected");
    eventually("no objects left", Duration::from_secs(120), POLL, || {
        let mut left = Vec::new();
        for kind in KINDS {
            let list = admin.get(&[kind, "-n", NAMESPACE])?.unwrap_or_default();
            for item in list["items"].as_array().into_iter().flatten() {
                let name = item["metadata"]["name"].as_str().unwrap_or_default();
                // Every namespace has these, made by the host itself.
                if (*kind == "configmaps" && name == "kube-root-ca.crt")
                    || (*kind == "secrets" && name.starts_with("default-token"))
                {
                    continue;
                }
                left.push(format!("{kind}/{name}"));
            }
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.join(", "))
        }
    })?;
    suite
        .narrator
        .step("namespace empty (but for the etcd volumes, kept by design)");
    admin.run(&["delete", "namespace", NAMESPACE, "--wait=false"])?;
    Ok(())
}

/// Deletes Shard `name` (scenario 8's still holds workspaces) with the force-delete annotation:
/// it is deregistered from root at once and goes.
fn force_delete_shard(suite: &mut Suite, admin: &Cluster, name: &str) -> Outcome {
    suite.narrator.step(&format!(
        "kubectl annotate shard {name} operator.kcp.io/force-delete=true; kubectl delete shard {name}"
    ));
    admin.run(&[
        "annotate",
        SHARD_KIND,
        "-n",
        NAMESPACE,
        name,
        "operator.kcp.io/force-delete=true",
    ])?;
    admin.run(&["delete", SHARD_KIND, "-n", NAMESPACE, name, "--wait=false"])?;
    eventually(
        &format!("Shard {name} gone although it holds workspaces"),
        Duration::from_secs(120),
        POLL,
        || match admin.get(&[SHARD_KIND, "-n", NAMESPACE, name])? {
            None => Ok(()),
            Some(shard) => Err(shard["status"].to_string()),
        },
    )?;
    let Some(kubeconfig) = suite.kcp_kubeconfig.clone() else {
        return Ok(());
    };
    let shards = registered_shards(&Cluster::new(&kubeconfig))?;
    if shards.iter().any(|s| s == name) {
        return Err(format!("{name} still registered: {shards:?}"));
    }
    Ok(())
}
