//! Scenario 3: a new version (image tag) of the RootShard rolls out while a client keeps reading
//! the workspace of scenario 2; every request of that client is counted (target: no failures),
//! and the data is still there afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::rootshard::{WORKSPACE, check_data, in_workspace, root_shard_manifest, wait_available};
use super::{NAMESPACE, POLL, ROOT_SHARD, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

/// The version scenario 3 upgrades to (any tag maps to this build's binary on the local host).
pub const NEXT_VERSION: &str = "v0.1.1";

pub fn roll_out(suite: &mut Suite) -> Outcome {
    let kubeconfig = suite
        .kcp_kubeconfig
        .clone()
        .ok_or("scenario 2 left no kubeconfig")?;
    let inside_path = in_workspace(&kubeconfig, &format!("root:{WORKSPACE}"), suite.dir.path())?;
    let admin = suite.host.admin();

    suite
        .narrator
        .step("a client polls the workspace (kubectl get widgets) during the rollout");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let poller = {
        let (stop, sent, failed) = (stop.clone(), sent.clone(), failed.clone());
        let path = inside_path.clone();
        std::thread::spawn(move || {
            let inside = Cluster::new(&path);
            let mut first_failure = None;
            while !stop.load(Ordering::SeqCst) {
                sent.fetch_add(1, Ordering::SeqCst);
                if let Err(error) =
                    inside.run(&["get", "widgets", "-n", "default", "--request-timeout=10s"])
                {
                    failed.fetch_add(1, Ordering::SeqCst);
                    first_failure.get_or_insert(error);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            first_failure
        })
    };

    suite
        .narrator
        .step(&format!("RootShard image tag v0.1.0 -> {NEXT_VERSION}"));
    let began = Instant::now();
    admin.apply(&root_shard_manifest(NEXT_VERSION, 1, 1))?;
    let outcome = eventually("upgrade finished", Duration::from_secs(240), POLL, || {
        let root = admin
            .get(&["rootshard", "-n", NAMESPACE, ROOT_SHARD])?
            .ok_or("no RootShard")?;
        let status = &root["status"];
        if status["currentVersion"] == NEXT_VERSION
            && super::super::cluster::is_true(&root, "Available")
        {
            Ok(())
        } else {
            Err(status.to_string())
        }
    });
    let took = began.elapsed();
    stop.store(true, Ordering::SeqCst);
    let first_failure = poller.join().map_err(|_| "the polling client panicked")?;
    outcome?;
    wait_available(suite, Duration::from_secs(60))?;
    let (sent, failed) = (sent.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    suite.figures.upgrade = Some(took);
    suite.figures.upgrade_requests = Some((sent, failed));
    suite.narrator.step(&format!(
        "upgraded in {:.1}s; client: {sent} requests, {failed} failed",
        took.as_secs_f64()
    ));
    let deployment = admin
        .get(&[
            "deployment",
            "-n",
            NAMESPACE,
            &format!("{ROOT_SHARD}-rootshard"),
        ])?
        .ok_or("the root shard Deployment is gone")?;
    let image = deployment
        .pointer("/spec/template/spec/containers/0/image")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned();
    if !image.ends_with(&format!(":{NEXT_VERSION}")) {
        return Err(format!("the Deployment runs {image}, not {NEXT_VERSION}"));
    }
    check_data(&Cluster::new(&inside_path))?;
    suite.narrator.step("data of scenario 2 intact");
    if failed > 0 {
        return Err(format!(
            "{failed} of {sent} requests failed during the upgrade; first: {}",
            first_failure.unwrap_or_default()
        ));
    }
    Ok(())
}
