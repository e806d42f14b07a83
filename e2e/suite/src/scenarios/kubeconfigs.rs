//! Scenario 9: a `Kubeconfig` for every target kind (the RootShard, the Shard, the FrontProxy),
//! each for a user in no group of its own but `kubeconfig:<name>`, with
//! `authorization.clusterRoleBindings` binding `cluster-admin` in its workspace: root for the
//! RootShard and the FrontProxy, and for the Shard (which holds no `root`: only the root shard
//! does, as upstream) `targetWorkspace` naming a workspace scenario 8 placed on it. The operator
//! writes the ClusterRoleBindings inside kcp (through the target) and the user can then write
//! and read objects there. A control Kubeconfig without `authorization` is refused the same request, so
//! the bindings are what grants it. Deleting the Kubeconfigs removes their bindings (finalizer).

use std::time::Duration;

use super::rootshard::{Target, issue_kubeconfig, kubeconfig_manifest, wait_for};
use super::{FRONT_PROXY, NAMESPACE, POLL, ROOT_SHARD, SHARD, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

/// The label the operator puts on the ClusterRoleBindings it writes for a Kubeconfig.
const BINDING_LABEL: &str = "operator.kcp.io/kubeconfig";

pub fn every_target(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let on_shard = suite
        .placed
        .iter()
        .find(|(_, shard)| shard == SHARD)
        .map(|(workspace, _)| format!("root:{workspace}"))
        .ok_or("scenario 8 left no workspace on the Shard")?;
    let targets = [
        ("e2e-rbac-rootshard", Target::RootShard(ROOT_SHARD), "root"),
        ("e2e-rbac-shard", Target::Shard(SHARD), on_shard.as_str()),
        (
            "e2e-rbac-frontproxy",
            Target::FrontProxy(FRONT_PROXY),
            "root",
        ),
    ];
    for (name, target, workspace) in targets {
        suite.narrator.step(&format!(
            "Kubeconfig {name} for {target:?}, cluster-admin bound in {workspace} for kubeconfig:{name}"
        ));
        let manifest = kubeconfig_manifest(name, target, &[], &["cluster-admin"]).replacen(
            "\nspec:\n",
            &format!("\nspec:\n  targetWorkspace: {workspace}\n"),
            1,
        );
        let kcp = Cluster::new(&issue_kubeconfig(suite, &manifest, name)?);
        wait_for(
            &admin,
            "kubeconfig",
            name,
            Duration::from_secs(60),
            |object| {
                object["status"]["phase"] == "Ready"
                    && object["status"]["authorization"]["provisionedCluster"] == workspace
            },
        )?;
        let config_map = format!("{name}-was-here");
        eventually(
            &format!("{name} writes and reads a ConfigMap in {workspace}"),
            Duration::from_secs(60),
            POLL,
            || {
                kcp.run(&[
                    "create",
                    "configmap",
                    &config_map,
                    "-n",
                    "default",
                    "--dry-run=server",
                ])?;
                kcp.run(&["get", "configmaps", "-n", "default"]).map(|_| ())
            },
        )?;
    }

    let control = "e2e-no-rbac";
    suite.narrator.step(&format!(
        "control: Kubeconfig {control} for the FrontProxy without authorization is refused"
    ));
    let manifest = kubeconfig_manifest(control, Target::FrontProxy(FRONT_PROXY), &[], &[]);
    let kcp = Cluster::new(&issue_kubeconfig(suite, &manifest, control)?);
    let refused = eventually(
        &format!("{control} is answered"),
        Duration::from_secs(60),
        POLL,
        || match kcp.run(&["get", "configmaps", "-n", "default"]) {
            Ok(out) => Ok(Err(format!("allowed: {out}"))),
            Err(error) if error.contains("forbidden") || error.contains("Forbidden") => Ok(Ok(())),
            Err(error) => Err(error),
        },
    )?;
    refused.map_err(|e| format!("{control} without bindings: {e}"))?;

    suite
        .narrator
        .step("deleting the Kubeconfigs removes their bindings in kcp");
    let admin_kcp = Cluster::new(
        &suite
            .kcp_kubeconfig
            .clone()
            .ok_or("scenario 2 left no kubeconfig")?,
    );
    // The RootShard's and the FrontProxy's bindings are in root (the Shard's in its workspace).
    let bound = labelled_bindings(&admin_kcp)?;
    if bound != 2 {
        return Err(format!(
            "{bound} operator-made ClusterRoleBindings in root, expected 2"
        ));
    }
    for name in [
        "e2e-rbac-rootshard",
        "e2e-rbac-shard",
        "e2e-rbac-frontproxy",
        control,
    ] {
        admin.run(&[
            "delete",
            "kubeconfig",
            "-n",
            NAMESPACE,
            name,
            "--wait=true",
            "--timeout=60s",
        ])?;
    }
    eventually(
        "no operator-made ClusterRoleBinding left in root",
        Duration::from_secs(30),
        POLL,
        || match labelled_bindings(&admin_kcp)? {
            0 => Ok(()),
            n => Err(format!("{n} left")),
        },
    )
}

/// How many ClusterRoleBindings the operator made for Kubeconfigs (`kcp` points at a workspace).
fn labelled_bindings(kcp: &Cluster) -> Result<usize, String> {
    let list = kcp
        .get(&["clusterrolebindings", "-l", BINDING_LABEL])?
        .unwrap_or_default();
    Ok(list["items"].as_array().map(Vec::len).unwrap_or(0))
}
