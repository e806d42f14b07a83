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
//!   lists it and the other workspaces still answer through it.

use std::time::Duration;

use serde_json::Value;

use super::full::{
    check_workspace, front_proxy_manifest, place_until, registered_shards, shard_manifest,
    through_proxy, use_workspace,
};
use super::rootshard::{FIRST_VERSION, wait_for, wait_kind_available};
use super::{FRONT_PROXY, NAMESPACE, POLL, ROOT_SHARD, SECOND_SHARD, SHARD, SHARD_KIND, Suite};
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
    suite.placed.retain(|(_, shard)| shard != SECOND_SHARD);
    for (workspace, shard) in &suite.placed {
        check_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    suite.narrator.step(&format!(
        "deregistered ({shards:?} remain); the other workspaces answer through the FrontProxy"
    ));
    Ok(())
}
