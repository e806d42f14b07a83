//! Scenario 1: `helm install` of `charts/kcp-operator`; the operator's Deployment becomes
//! Available (its pod passes the chart's readiness probe on `/readyz`) and the CRDs are served.

use std::time::{Duration, Instant};

use super::{POLL, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually, is_true};
use crate::host::local::repo_root;

pub const RELEASE: &str = "kcp-operator";
pub const OPERATOR_NAMESPACE: &str = "kcp-operator";

pub fn install(suite: &mut Suite) -> Outcome {
    let chart = repo_root().join("charts/kcp-operator");
    suite.narrator.step("helm lint charts/kcp-operator");
    suite.host.helm(&["lint", &chart.display().to_string()])?;
    suite
        .narrator
        .step("helm install kcp-operator -n kcp-operator --create-namespace");
    let began = Instant::now();
    suite.host.helm(&[
        "upgrade",
        "--install",
        RELEASE,
        &chart.display().to_string(),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--create-namespace",
    ])?;
    let admin = suite.host.admin();
    suite.narrator.step("CRDs of operator.kcp.io are served");
    for crd in [
        "rootshards",
        "shards",
        "frontproxies",
        "cacheservers",
        "kubeconfigs",
    ] {
        let name = format!("{crd}.operator.kcp.io");
        eventually(
            &format!("CRD {name} established"),
            Duration::from_secs(60),
            POLL,
            || match admin.get(&["crd", &name])? {
                Some(object) if is_true(&object, "Established") => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )?;
    }
    suite
        .narrator
        .step("operator Deployment Available (readiness probe /readyz)");
    deployment_available(&admin, OPERATOR_NAMESPACE, RELEASE)?;
    suite.figures.operator_ready = Some(began.elapsed());
    suite.narrator.step(&format!(
        "operator ready {:.1}s after helm install",
        began.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Waits (2 minutes at most) until Deployment `namespace/name` is Available with a ready replica.
pub fn deployment_available(admin: &Cluster, namespace: &str, name: &str) -> Outcome {
    eventually(
        &format!("Deployment {namespace}/{name} Available"),
        Duration::from_secs(120),
        POLL,
        || {
            let deployment = admin
                .get(&["deployment", "-n", namespace, name])?
                .ok_or("no Deployment yet")?;
            if is_true(&deployment, "Available")
                && deployment["status"]["readyReplicas"].as_i64() >= Some(1)
            {
                Ok(())
            } else {
                Err(deployment["status"].to_string())
            }
        },
    )
}
