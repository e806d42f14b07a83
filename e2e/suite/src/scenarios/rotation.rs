//! Scenario 5: shortening the server certificate's validity (a `certificateTemplates` entry)
//! makes the operator issue a new certificate at once; the pods roll to it (their
//! `operator.kcp.io/mounted-content-revision` changes) and a client with a newly issued kubeconfig
//! works, as do the data of scenario 2.

use std::time::Duration;

use super::rootshard::{Target, admin_kubeconfig, check_workspace_data, wait_available};
use super::scale::{SCALED_MEMBERS, SCALED_REPLICAS};
use super::served::CertificateFacts;
use super::upgrade::NEXT_VERSION;
use super::{NAMESPACE, POLL, ROOT_SHARD, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

const REVISION: &str = "operator.kcp.io/mounted-content-revision";
/// The validity the scenario shortens the server certificate to.
pub const SHORT_HOURS: i64 = 2;

pub fn rotate(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let deployment = format!("{ROOT_SHARD}-rootshard");
    let secret = format!("{ROOT_SHARD}-rootshard-server");
    let before = revision(&admin, &deployment)?;
    suite.narrator.step(&format!(
        "server certificate validity shortened to {SHORT_HOURS}h"
    ));
    let mut manifest =
        super::rootshard::root_shard_manifest(NEXT_VERSION, SCALED_REPLICAS, SCALED_MEMBERS);
    manifest.push_str(&format!(
        "  certificateTemplates:\n    server:\n      spec:\n        duration: {SHORT_HOURS}h\n"
    ));
    admin.apply(&manifest)?;
    let after = wait_rolled(&admin, &deployment, &before, Duration::from_secs(180))?;
    wait_available(suite, Duration::from_secs(60))?;
    suite
        .narrator
        .step(&format!("pods rolled: revision {before} -> {after}"));
    let hours = CertificateFacts::of_secret(&admin, &secret)?.remaining_hours()?;
    if hours > (SHORT_HOURS as f64) + 1.5 {
        return Err(format!(
            "the server certificate is still valid for {hours:.1}h"
        ));
    }
    suite
        .narrator
        .step(&format!("server certificate now valid for {hours:.2}h"));
    let kubeconfig = admin_kubeconfig(suite, "e2e-rotated", Target::RootShard(ROOT_SHARD))?;
    check_workspace_data(&kubeconfig, suite.dir.path())?;
    suite.narrator.step("a new kubeconfig works; data intact");
    admin.run(&[
        "delete",
        "kubeconfig",
        "-n",
        NAMESPACE,
        "e2e-rotated",
        "--wait=false",
    ])?;
    Ok(())
}

/// Waits until Deployment `deployment` has rolled all its replicas to a pod template whose
/// content revision is no longer `before`; the new revision.
pub fn wait_rolled(
    admin: &Cluster,
    deployment: &str,
    before: &str,
    within: Duration,
) -> Result<String, String> {
    eventually("pods rolled to a new revision", within, POLL, || {
        let now = revision(admin, deployment)?;
        let object = admin
            .get(&["deployment", "-n", NAMESPACE, deployment])?
            .ok_or("no Deployment")?;
        let status = &object["status"];
        let rolled = now != before
            && status["observedGeneration"] == object["metadata"]["generation"]
            && status["updatedReplicas"] == object["spec"]["replicas"]
            && status["availableReplicas"] == object["spec"]["replicas"]
            && status["replicas"] == object["spec"]["replicas"];
        if rolled {
            Ok(now)
        } else {
            Err(format!("revision {now}, status {status}"))
        }
    })
}

/// Waits until every Deployment of the kcp namespace has finished rolling out (all replicas
/// updated and available, none left over) and no pod there is still being stopped: a scenario
/// that measures requests during one roll must not start while an earlier scenario's roll is
/// still replacing pods behind it.
pub fn wait_settled(admin: &Cluster, within: Duration) -> Outcome {
    eventually(
        "every Deployment rolled out and no pod stopping",
        within,
        POLL,
        || {
            let deployments = admin
                .get(&["deployments", "-n", NAMESPACE])?
                .ok_or("no Deployment list")?;
            for deployment in deployments["items"].as_array().into_iter().flatten() {
                let (spec, status) = (&deployment["spec"], &deployment["status"]);
                let done = status["observedGeneration"] == deployment["metadata"]["generation"]
                    && status["updatedReplicas"] == spec["replicas"]
                    && status["availableReplicas"] == spec["replicas"]
                    && status["replicas"] == spec["replicas"];
                if !done {
                    return Err(format!(
                        "Deployment {} is rolling: {status}",
                        deployment["metadata"]["name"]
                    ));
                }
            }
            let pods = admin
                .get(&["pods", "-n", NAMESPACE])?
                .ok_or("no Pod list")?;
            let stopping: Vec<&str> = pods["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|pod| !pod["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|pod| pod["metadata"]["name"].as_str())
                .collect();
            if stopping.is_empty() {
                Ok(())
            } else {
                Err(format!("pods still stopping: {}", stopping.join(", ")))
            }
        },
    )
}

/// The content revision of the pods of Deployment `deployment`.
pub fn revision(admin: &Cluster, deployment: &str) -> Result<String, String> {
    let object = admin
        .get(&["deployment", "-n", NAMESPACE, deployment])?
        .ok_or_else(|| format!("no Deployment {deployment}"))?;
    object
        .pointer(&format!(
            "/spec/template/metadata/annotations/{}",
            REVISION.replace('/', "~1")
        ))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{deployment} has no {REVISION}"))
}
