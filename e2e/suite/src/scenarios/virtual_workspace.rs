//! Scenario 14: a `VirtualWorkspace` (a standalone virtual-workspace server, upstream
//! kcp-operator's sixth kind) for the Shard of scenario 8. The Shard names it in
//! `spec.kcpVirtualWorkspace`, so it stops serving `/services/` itself and advertises the
//! server's URL in its `Shard` object inside kcp; a `system:masters` client of the root shard's
//! client CA then lists the LogicalClusters waiting for an initializer through the server, which
//! reaches its shard with the kubeconfig the operator wrote. Taking the reference away and
//! deleting the VirtualWorkspace puts the Shard back as it was.

use std::time::Duration;

use serde_json::Value;

use super::rootshard::{
    Target, kubeconfig_manifest, kubeconfig_text, wait_for, wait_kind_available,
};
use super::rotation::wait_settled;
use super::{NAMESPACE, POLL, SHARD, SHARD_KIND, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

/// Name of the VirtualWorkspace.
const VIRTUAL_WORKSPACE: &str = "vw";
/// The Kubeconfig (and Secret) whose server this scenario points at the VirtualWorkspace.
const VW_KUBECONFIG: &str = "e2e-vw";
/// A virtual workspace every shard serves: the LogicalClusters waiting for the initializer of
/// default API bindings, across all logical clusters of the shard.
const INITIALIZING: &str = "/services/initializingworkspaces/system:apibindings/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters";

/// Where clients (and the Shard's `--shard-virtual-workspace-url`) reach the server: its own
/// Service, so the URL works inside the host cluster and, rewritten, from here.
fn external_url() -> String {
    format!("https://{VIRTUAL_WORKSPACE}-virtualworkspace.{NAMESPACE}.svc.cluster.local:6443")
}

fn manifest() -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: VirtualWorkspace
metadata:
  name: {VIRTUAL_WORKSPACE}
  namespace: {NAMESPACE}
spec:
  target:
    shardRef:
      name: {SHARD}
  replicas: 1
  external:
    hostname: {VIRTUAL_WORKSPACE}-virtualworkspace.{NAMESPACE}.svc.cluster.local
    port: 6443
"#
    )
}

pub fn serve_a_shard(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    suite.narrator.step(&format!(
        "kubectl apply VirtualWorkspace {VIRTUAL_WORKSPACE} for Shard {SHARD}; the Shard names it in kcpVirtualWorkspace"
    ));
    admin.apply(&manifest())?;
    let within = Duration::from_secs(180);
    wait_kind_available(&admin, "virtualworkspace", VIRTUAL_WORKSPACE, within)?;
    set_reference(&admin, Some(VIRTUAL_WORKSPACE))?;
    wait_rolled_out(&admin, within, |args| {
        args.iter().any(|a| a == "--run-virtual-workspaces=false")
            && args
                .iter()
                .any(|a| *a == format!("--shard-virtual-workspace-url={}", external_url()))
    })?;

    suite
        .narrator
        .step("the Shard object inside kcp advertises the VirtualWorkspace's URL");
    let kcp_kubeconfig = suite
        .kcp_kubeconfig
        .clone()
        .ok_or("no admin kubeconfig of the RootShard (scenario 2)")?;
    let kcp = Cluster::new(&kcp_kubeconfig);
    eventually(
        "Shard shard-1's spec.virtualWorkspaceURL",
        within,
        POLL,
        || {
            let shard = kcp
                .get(&["shards.core.kcp.io", SHARD])?
                .ok_or("no Shard shard-1 in root")?;
            let url = shard["spec"]["virtualWorkspaceURL"].as_str().unwrap_or("");
            if url == external_url() {
                Ok(())
            } else {
                Err(format!("virtualWorkspaceURL is {url:?}"))
            }
        },
    )?;

    suite.narrator.step(&format!(
        "a system:masters client lists {INITIALIZING} through the VirtualWorkspace"
    ));
    let text = kubeconfig_text(
        suite,
        &kubeconfig_manifest(
            VW_KUBECONFIG,
            Target::Shard(SHARD),
            &["system:masters"],
            &[],
        ),
        VW_KUBECONFIG,
    )?;
    let dir = suite.dir.path().to_owned();
    let kubeconfig = suite.host.reachable(
        &with_server(&text, &external_url()),
        &dir,
        &format!("{VW_KUBECONFIG}.kubeconfig"),
    )?;
    let vw = Cluster::new(&kubeconfig);
    let list = eventually("the virtual workspace answers", within, POLL, || {
        vw.run(&["get", "--raw", INITIALIZING])
    })?;
    let list: Value = serde_json::from_str(&list).map_err(|e| format!("{e}: {list}"))?;
    if list["kind"] != "LogicalClusterList" {
        return Err(format!("not a LogicalClusterList: {list}"));
    }
    if vw.run(&["get", "--raw", "/clusters/root/api"]).is_ok() {
        return Err("the virtual-workspace server answers a workspace request".into());
    }

    suite.narrator.step(&format!(
        "kcpVirtualWorkspace removed and VirtualWorkspace {VIRTUAL_WORKSPACE} deleted: the Shard serves /services/ again"
    ));
    set_reference(&admin, None)?;
    wait_rolled_out(&admin, within, |args| {
        !args
            .iter()
            .any(|a| a.starts_with("--run-virtual-workspaces"))
    })?;
    admin.run(&[
        "delete",
        "virtualworkspace",
        "-n",
        NAMESPACE,
        VIRTUAL_WORKSPACE,
        "--wait=true",
        "--timeout=60s",
    ])?;
    admin.run(&["delete", "kubeconfig", "-n", NAMESPACE, VW_KUBECONFIG])?;
    eventually(
        "the VirtualWorkspace's Deployment is gone",
        within,
        POLL,
        || match admin.get(&[
            "deployment",
            "-n",
            NAMESPACE,
            &format!("{VIRTUAL_WORKSPACE}-virtualworkspace"),
        ])? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        },
    )?;
    // The Shard and the FrontProxy roll once more without the VirtualWorkspace; the next
    // scenario starts on a settled deployment.
    wait_settled(&admin, within)
}

/// Sets or removes the Shard's `spec.kcpVirtualWorkspace`.
fn set_reference(admin: &Cluster, name: Option<&str>) -> Outcome {
    let patch = match name {
        Some(name) => format!(r#"{{"spec":{{"kcpVirtualWorkspace":{{"name":"{name}"}}}}}}"#),
        None => r#"{"spec":{"kcpVirtualWorkspace":null}}"#.to_owned(),
    };
    admin
        .run(&[
            "patch",
            SHARD_KIND,
            "-n",
            NAMESPACE,
            SHARD,
            "--type=merge",
            "-p",
            &patch,
        ])
        .map(|_| ())
}

/// Waits until the Shard describes its latest spec, is Available, and its Deployment's
/// arguments satisfy `rendered`.
fn wait_rolled_out(
    admin: &Cluster,
    within: Duration,
    rendered: impl Fn(&[String]) -> bool,
) -> Outcome {
    wait_for(admin, SHARD_KIND, SHARD, within, |object| {
        let generation = &object["metadata"]["generation"];
        object["status"]["observedGeneration"] == *generation
            && crate::cluster::is_true(object, "Available")
            && deployment_args(admin).is_some_and(|args| rendered(&args))
    })
    .map(|_| ())
}

/// The arguments of the Shard's kcp container.
fn deployment_args(admin: &Cluster) -> Option<Vec<String>> {
    let deployment = admin
        .get(&["deployment", "-n", NAMESPACE, &format!("{SHARD}-shard")])
        .ok()??;
    let containers = deployment
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    let kcp = containers.first()?;
    let mut args: Vec<String> = Vec::new();
    for field in ["command", "args"] {
        if let Some(values) = kcp[field].as_array() {
            args.extend(values.iter().filter_map(|v| v.as_str().map(str::to_owned)));
        }
    }
    Some(args)
}

/// `kubeconfig` with every cluster's server replaced by `server`.
fn with_server(kubeconfig: &str, server: &str) -> String {
    kubeconfig
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("server:") {
                let indent = &line[..line.len() - trimmed.len()];
                format!("{indent}server: {server}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
