//! Scenario 6: deleting the RootShard (and the Kubeconfig objects the suite made) removes every
//! object the operator created for it from the host: garbage collection by owner references,
//! as on any Kubernetes cluster. The etcd volumes stay, as the operator documents
//! (`whenDeleted: Retain`: deleting the owner keeps the data).

use std::time::Duration;

use super::rootshard::ADMIN_KUBECONFIG;
use super::{NAMESPACE, POLL, ROOT_SHARD, Suite};
use crate::Outcome;
use crate::cluster::eventually;

/// The kinds the operator creates for a RootShard (and the pods the workloads run).
const KINDS: &[&str] = &[
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
    suite.narrator.step("kubectl delete kubeconfig, rootshard");
    admin.run(&[
        "delete",
        "kubeconfig",
        "-n",
        NAMESPACE,
        ADMIN_KUBECONFIG,
        "--ignore-not-found",
        "--wait=false",
    ])?;
    admin.run(&[
        "delete",
        "rootshard",
        "-n",
        NAMESPACE,
        ROOT_SHARD,
        "--wait=false",
    ])?;
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
