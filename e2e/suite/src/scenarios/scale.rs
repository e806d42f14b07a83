//! Scenario 4: the root shard goes from one server replica to two (the servers elect which one
//! runs the controllers) and its managed etcd from one member to three (the operator adds members
//! one at a time); the data of scenario 2 is intact and new workspaces still become Ready.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::rootshard::{check_workspace_data, root_shard_manifest, wait_available};
use super::upgrade::NEXT_VERSION;
use super::{NAMESPACE, POLL, ROOT_SHARD, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

pub const SCALED_REPLICAS: u32 = 2;
pub const SCALED_MEMBERS: u32 = 3;

const LEASE: &str = "kcp-controllers";

pub fn scale_out(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let kubeconfig = suite
        .kcp_kubeconfig
        .clone()
        .ok_or("scenario 2 left no kubeconfig")?;
    let kcp = Cluster::new(&kubeconfig);
    suite.narrator.step(&format!(
        "RootShard replicas 1 -> {SCALED_REPLICAS}, managed etcd 1 -> {SCALED_MEMBERS} members"
    ));
    let began = Instant::now();
    admin.apply(&root_shard_manifest(
        NEXT_VERSION,
        SCALED_REPLICAS,
        SCALED_MEMBERS,
    ))?;
    let deployment = format!("{ROOT_SHARD}-rootshard");
    let etcd = format!("{ROOT_SHARD}-rootshard-etcd");
    eventually("scaled out", Duration::from_secs(300), POLL, || {
        let servers = ready(&admin, "deployment", &deployment)?;
        let members = ready(&admin, "statefulset", &etcd)?;
        if servers == SCALED_REPLICAS as i64 && members == SCALED_MEMBERS as i64 {
            Ok(())
        } else {
            Err(format!(
                "servers ready {servers}, etcd members ready {members}"
            ))
        }
    })?;
    wait_available(suite, Duration::from_secs(120))?;
    suite.narrator.step(&format!(
        "{SCALED_REPLICAS} servers and {SCALED_MEMBERS} etcd members ready after {:.1}s",
        began.elapsed().as_secs_f64()
    ));

    let holder = eventually(
        "one server holds the controllers' lease",
        Duration::from_secs(60),
        POLL,
        || {
            let lease = controllers_lease(&kcp)?.ok_or("no lease yet")?;
            lease["spec"]["holderIdentity"]
                .as_str()
                .filter(|h| h.starts_with(&deployment))
                .map(str::to_owned)
                .ok_or_else(|| lease["spec"].to_string())
        },
    )?;
    suite.narrator.step(&format!("controllers run in {holder}"));

    check_workspace_data(&kubeconfig, suite.dir.path())?;
    suite
        .narrator
        .step("a new workspace becomes Ready with the elected controllers");
    kcp.apply(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: after-scale\n",
    )?;
    eventually(
        "workspace after-scale Ready",
        Duration::from_secs(60),
        POLL,
        || {
            let ws = kcp
                .get(&["workspace", "after-scale"])?
                .ok_or("no workspace")?;
            if ws["status"]["phase"] == "Ready" {
                Ok(())
            } else {
                Err(ws["status"].to_string())
            }
        },
    )?;
    suite.narrator.step("data of scenario 2 intact");
    Ok(())
}

/// The controllers' Lease, read where the servers keep it: `kube-system` of `system:admin` (as
/// upstream's leader election; `root` is a workspace of the root shard, not a place every server
/// has), at the same server as `kcp`'s kubeconfig.
fn controllers_lease(kcp: &Cluster) -> Result<Option<Value>, String> {
    let cluster = kcp.run(&[
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server} {.clusters[0].cluster.tls-server-name}",
    ])?;
    let mut fields = cluster.split_whitespace();
    let server = fields.next().ok_or("no server in the kubeconfig")?;
    let base = server.split("/clusters/").next().unwrap_or_default();
    let server = format!("--server={base}/clusters/system:admin");
    // kubectl forgets the kubeconfig's tls-server-name when --server is given: pass it again.
    let server_name = fields
        .next()
        .map(|name| format!("--tls-server-name={name}"));
    let mut args = vec!["lease", "-n", "kube-system", LEASE, &server];
    args.extend(server_name.as_deref());
    kcp.get(&args)
}

/// `status.readyReplicas` of a workload that has caught up with its spec (0 otherwise).
fn ready(admin: &Cluster, kind: &str, name: &str) -> Result<i64, String> {
    let object: Value = admin
        .get(&[kind, "-n", NAMESPACE, name])?
        .ok_or_else(|| format!("no {kind} {name}"))?;
    let status = &object["status"];
    if status["observedGeneration"] != object["metadata"]["generation"] {
        return Ok(0);
    }
    Ok(status["readyReplicas"].as_i64().unwrap_or(0))
}
