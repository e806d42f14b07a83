//! Scenarios 10 and 11: the deployment of scenario 8 grows and shrinks.
//!
//! - 10: a second Shard CR registers, new workspaces land on it (created through the FrontProxy
//!   until one does) while the workspaces of scenario 8 stay where they were with their objects;
//!   the FrontProxy goes from one replica to two and gets a PodDisruptionBudget and pod
//!   anti-affinity. The RootShard lists both Shards in its status, the FrontProxy the shards it
//!   routes to (the root shard too).
//! - 11: deleting that Shard CR while it still holds workspaces: its finalizer waits, with a
//!   `Deleting` condition naming how many logical clusters remain; once they are deleted (through
//!   the FrontProxy) it deregisters the shard from root and the CR goes; the FrontProxy no longer
//!   lists it and the other workspaces still answer through it. Each proxy pod stops watching
//!   it within 30 s (its own `kcp_front_proxy_index_shards`, read from that pod: upstream
//!   kcp-operator#125 was a proxy retrying a deleted shard forever), and logs nothing about it
//!   from then on.

use std::time::Duration;

use serde_json::Value;

use super::full::{
    check_workspace, front_proxy_manifest, place_until, registered_shards, shard_manifest,
    through_proxy, use_workspace,
};
use super::rootshard::{FIRST_VERSION, wait_for, wait_kind_available};
use super::{
    FRONT_PROXY, NAMESPACE, POLL, PROXY_PORT, ROOT_SHARD, SECOND_SHARD, SHARD, SHARD_KIND, Suite,
};
use crate::Outcome;
use crate::cluster::{Cluster, condition, eventually};

/// The names in a status list such as `status.shards` (`[{name: ...}, ...]`).
fn listed(object: &Value, field: &str) -> Vec<String> {
    object["status"][field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["name"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until the status list `field` of `kind`/`name` holds exactly `names` (any order).
fn lists_exactly(admin: &Cluster, kind: &str, name: &str, field: &str, names: &[&str]) -> Outcome {
    wait_for(admin, kind, name, Duration::from_secs(60), |object| {
        let mut seen = listed(object, field);
        seen.sort();
        let mut wanted: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        wanted.sort();
        seen == wanted
    })
    .map(|_| ())
}

pub fn scale_out(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let (kubeconfig, kcp) = through_proxy(suite)?;
    suite
        .narrator
        .step(&format!("kubectl apply Shard {SECOND_SHARD}"));
    admin.apply(&shard_manifest(SECOND_SHARD, FIRST_VERSION))?;
    wait_kind_available(&admin, SHARD_KIND, SECOND_SHARD, Duration::from_secs(300))?;
    eventually(
        "the new shard registered in root",
        Duration::from_secs(60),
        POLL,
        || {
            let shards = registered_shards(&kcp)?;
            if shards.iter().any(|s| s == SECOND_SHARD) {
                Ok(())
            } else {
                Err(format!("{shards:?}"))
            }
        },
    )?;
    let every_shard = [ROOT_SHARD, SHARD, SECOND_SHARD];
    lists_exactly(
        &admin,
        "rootshard",
        ROOT_SHARD,
        "shards",
        &[SHARD, SECOND_SHARD],
    )?;
    lists_exactly(&admin, "frontproxy", FRONT_PROXY, "shards", &every_shard)?;
    suite.narrator.step(&format!(
        "{SECOND_SHARD} Available and registered; the RootShard lists its Shards, the FrontProxy routes to {every_shard:?}"
    ));

    let placed = place_until(suite, &kcp, "more", &[SECOND_SHARD])?;
    for (workspace, shard) in &placed {
        use_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    suite
        .narrator
        .step("the workspaces of scenario 8 are where they were, objects included");
    for (workspace, shard) in &suite.placed {
        let ws = kcp
            .get(&["workspace", workspace])?
            .ok_or_else(|| format!("workspace {workspace} is gone"))?;
        if ws["metadata"]["annotations"]["core.kcp.io/shard"] != shard.as_str() {
            return Err(format!("workspace {workspace} moved from {shard}: {ws}"));
        }
        check_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    suite.placed.extend(placed);

    suite.narrator.step("FrontProxy replicas 1 -> 2");
    admin.apply(&front_proxy_manifest(FIRST_VERSION, 2))?;
    let deployment = format!("{FRONT_PROXY}-frontproxy");
    eventually(
        "two front-proxy replicas ready",
        Duration::from_secs(180),
        POLL,
        || {
            let object = admin
                .get(&["deployment", "-n", NAMESPACE, &deployment])?
                .ok_or("no front-proxy Deployment")?;
            let status = &object["status"];
            if status["observedGeneration"] == object["metadata"]["generation"]
                && status["readyReplicas"] == 2
                && status["updatedReplicas"] == 2
            {
                Ok(object)
            } else {
                Err(status.to_string())
            }
        },
    )
    .and_then(|object| {
        object
            .pointer("/spec/template/spec/affinity/podAntiAffinity")
            .map(|_| ())
            .ok_or_else(|| format!("no pod anti-affinity: {}", object["spec"]["template"]))
    })?;
    let pdb = admin
        .get(&["pdb", "-n", NAMESPACE, &deployment])?
        .ok_or("no PodDisruptionBudget for two front-proxy replicas")?;
    if pdb["spec"]["maxUnavailable"] != 1 {
        return Err(format!("PodDisruptionBudget: {}", pdb["spec"]));
    }
    wait_kind_available(&admin, "frontproxy", FRONT_PROXY, Duration::from_secs(60))?;
    for (workspace, shard) in &suite.placed {
        check_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    suite.narrator.step(
        "two replicas with a PodDisruptionBudget (maxUnavailable 1) and anti-affinity; every workspace answers",
    );
    Ok(())
}

pub fn delete_second(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let (kubeconfig, kcp) = through_proxy(suite)?;
    let on_second: Vec<String> = suite
        .placed
        .iter()
        .filter(|(_, shard)| shard == SECOND_SHARD)
        .map(|(workspace, _)| workspace.clone())
        .collect();
    suite.narrator.step(&format!(
        "kubectl delete Shard {SECOND_SHARD} while it holds {on_second:?}"
    ));
    admin.run(&[
        "delete",
        SHARD_KIND,
        "-n",
        NAMESPACE,
        SECOND_SHARD,
        "--wait=false",
    ])?;
    let count = on_second.len();
    let waiting = wait_for(
        &admin,
        SHARD_KIND,
        SECOND_SHARD,
        Duration::from_secs(60),
        |shard| {
            condition(shard, "Deleting").is_some_and(|c| {
                c["status"] == "True"
                    && c["reason"] == "LogicalClustersRemain"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&format!("{count} logical cluster")))
            })
        },
    )?;
    suite.narrator.step(&format!(
        "the finalizer waits: {}",
        condition(&waiting, "Deleting").map_or(String::new(), |c| c["message"].to_string())
    ));
    if !registered_shards(&kcp)?.iter().any(|s| s == SECOND_SHARD) {
        return Err(format!(
            "{SECOND_SHARD} was deregistered while it held workspaces"
        ));
    }

    suite
        .narrator
        .step("its workspaces are deleted through the FrontProxy");
    for workspace in &on_second {
        kcp.run(&["delete", "workspace", workspace, "--wait=false"])?;
    }
    eventually(
        "Shard CR gone",
        Duration::from_secs(120),
        POLL,
        || match admin.get(&[SHARD_KIND, "-n", NAMESPACE, SECOND_SHARD])? {
            None => Ok(()),
            Some(shard) => Err(shard["status"].to_string()),
        },
    )?;
    let shards = registered_shards(&kcp)?;
    if shards.iter().any(|s| s == SECOND_SHARD) {
        return Err(format!("{SECOND_SHARD} still registered: {shards:?}"));
    }
    lists_exactly(
        &admin,
        "frontproxy",
        FRONT_PROXY,
        "shards",
        &[ROOT_SHARD, SHARD],
    )?;
    lists_exactly(&admin, "rootshard", ROOT_SHARD, "shards", &[SHARD])?;
    let pods = front_proxy_pods(&admin)?;
    let watched = SHARDS_LEFT.len();
    // Per pod: where it is reached, and how many lines its log had once it watched one shard less.
    let mut seen = Vec::new();
    for pod in &pods {
        let address = suite.host.pod_address(NAMESPACE, pod, PROXY_PORT)?;
        eventually(
            &format!("front-proxy pod {pod} watches {watched} shards"),
            Duration::from_secs(30),
            POLL,
            || match index_shards(&kcp, &address)? {
                count if count == watched => Ok(()),
                count => Err(format!("it watches {count}")),
            },
        )?;
        let lines = pod_log(&admin, pod)?.lines().count();
        seen.push((pod, address, lines));
    }
    suite.narrator.step(&format!(
        "deregistered ({shards:?} remain); each front-proxy pod ({}) watches {watched} shards",
        pods.join(", ")
    ));
    suite.placed.retain(|(_, shard)| shard != SECOND_SHARD);
    for (workspace, shard) in &suite.placed {
        check_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    for (pod, address, lines) in seen {
        let log = pod_log(&admin, pod)?;
        let about: Vec<&str> = log
            .lines()
            .skip(lines)
            .filter(|line| line.contains(SECOND_SHARD))
            .collect();
        if !about.is_empty() {
            return Err(format!(
                "front-proxy pod {pod} logged about {SECOND_SHARD} after it stopped watching it:\n{}",
                about.join("\n")
            ));
        }
        let count = index_shards(&kcp, &address)?;
        if count != watched {
            return Err(format!(
                "front-proxy pod {pod} watches {count} shards again"
            ));
        }
    }
    suite.narrator.step(
        "the other workspaces answer through the FrontProxy; its pods logged nothing about the deleted shard since",
    );
    Ok(())
}

/// The shards the FrontProxy watches once the second one is gone.
const SHARDS_LEFT: &[&str] = &[ROOT_SHARD, SHARD];

/// The names of the FrontProxy's running pods (its Deployment's selector).
fn front_proxy_pods(admin: &Cluster) -> Result<Vec<String>, String> {
    let deployment = format!("{FRONT_PROXY}-frontproxy");
    let object = admin
        .get(&["deployment", "-n", NAMESPACE, &deployment])?
        .ok_or("no front-proxy Deployment")?;
    let selector = object["spec"]["selector"]["matchLabels"]
        .as_object()
        .ok_or("the front-proxy Deployment has no matchLabels")?
        .iter()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",");
    let list = admin
        .get(&["pods", "-n", NAMESPACE, "-l", &selector])?
        .ok_or("no pods list")?;
    let pods: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|pod| pod["status"]["phase"] == "Running")
        .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|pod| pod["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    if pods.is_empty() {
        return Err("no running front-proxy pod".into());
    }
    Ok(pods)
}

/// `kcp_front_proxy_index_shards` of the proxy pod at `address`, read with the admin credentials
/// of `kcp` (a client of the proxy), the pod's certificate verified for its Service's name.
fn index_shards(kcp: &Cluster, address: &str) -> Result<usize, String> {
    let metrics = kcp.run(&[
        "get",
        "--raw",
        "/metrics",
        &format!("--server=https://{address}"),
        &format!("--tls-server-name={FRONT_PROXY}-frontproxy.{NAMESPACE}.svc.cluster.local"),
    ])?;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("kcp_front_proxy_index_shards "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as usize)
        .ok_or_else(|| "no kcp_front_proxy_index_shards in its /metrics".into())
}

/// The log of pod `pod` (all of it).
fn pod_log(admin: &Cluster, pod: &str) -> Result<String, String> {
    admin.run(&["logs", "-n", NAMESPACE, pod])
}
