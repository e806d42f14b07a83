//! Scenario 3: one version change (image tag) on every custom resource of the deployment
//! (CacheServer, RootShard, Shard, FrontProxy) rolls out in the operator's order: CacheServer,
//! then RootShard, then Shards, then FrontProxies (the moment each reports the new
//! `currentVersion` is recorded and must follow that order), while two clients keep reading
//! every 100 ms: one the root shard's workspace of scenario 2 directly, one a workspace on the
//! Shard through the FrontProxy. Every request is counted; none of either client's may fail, and
//! the data is still there afterwards. A third client watches that workspace's ConfigMaps through
//! the FrontProxy, resuming from its last resourceVersion whenever a watch ends, while a fourth
//! creates one every second: the watch must see every one (`resumed_watch`).

use std::time::{Duration, Instant};

use super::full::{
    check_workspace, front_proxy_manifest, shard_manifest, shard_workspace_through_proxy,
    through_proxy,
};
use super::poller::{Poller, READ_CONFIG_MAPS};
use super::resumed_watch::ResumedWatch;
use super::rootshard::{
    WORKSPACE, cache_server_manifest, check_data, in_workspace, root_shard_manifest, wait_available,
};
use super::{CACHE_SERVER, FRONT_PROXY, NAMESPACE, POLL, ROOT_SHARD, SHARD, SHARD_KIND, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually, is_true};

/// The version scenario 3 upgrades to (any tag maps to this build's binary on the local host).
pub const NEXT_VERSION: &str = "v0.1.1";

/// The custom resources in the order the operator upgrades them.
const ORDER: [(&str, &str); 4] = [
    ("cacheserver", CACHE_SERVER),
    ("rootshard", ROOT_SHARD),
    (SHARD_KIND, SHARD),
    ("frontproxy", FRONT_PROXY),
];

pub fn roll_out(suite: &mut Suite) -> Outcome {
    let kubeconfig = suite
        .kcp_kubeconfig
        .clone()
        .ok_or("scenario 2 left no kubeconfig")?;
    let inside_path = in_workspace(&kubeconfig, &format!("root:{WORKSPACE}"), suite.dir.path())?;
    let (proxy_kubeconfig, _) = through_proxy(suite)?;
    let (on_shard, through_proxy_path) = shard_workspace_through_proxy(suite)?;
    let admin = suite.host.admin();

    suite.narrator.step(&format!(
        "clients poll root:{WORKSPACE} on the root shard and root:{on_shard} on {SHARD} through the FrontProxy"
    ));
    let direct = Poller::start(
        inside_path.clone(),
        &["get", "widgets", "-n", "default", "--request-timeout=10s"],
    );
    let proxied = Poller::start(through_proxy_path.clone(), READ_CONFIG_MAPS);
    suite.narrator.step(&format!(
        "a client watches root:{on_shard}'s ConfigMaps through the FrontProxy, resuming from its last resourceVersion, while another creates one every second"
    ));
    let watch = ResumedWatch::start(through_proxy_path, &format!("root:{on_shard}"))?;

    suite.narrator.step(&format!(
        "image tag v0.1.0 -> {NEXT_VERSION} on the CacheServer, RootShard, Shard and FrontProxy at once"
    ));
    let began = Instant::now();
    admin.apply(&cache_server_manifest(NEXT_VERSION))?;
    admin.apply(&root_shard_manifest(NEXT_VERSION, 1, 1))?;
    admin.apply(&shard_manifest(SHARD, NEXT_VERSION))?;
    admin.apply(&front_proxy_manifest(NEXT_VERSION, 2))?;
    let mut reached: [Option<Duration>; 4] = [None; 4];
    let outcome = eventually(
        "every component at the new version",
        Duration::from_secs(300),
        POLL,
        || {
            let mut waiting = Vec::new();
            for (at, (kind, name)) in reached.iter_mut().zip(ORDER) {
                let object = admin
                    .get(&[kind, "-n", NAMESPACE, name])?
                    .ok_or_else(|| format!("no {kind} {name}"))?;
                if object["status"]["currentVersion"] == NEXT_VERSION
                    && is_true(&object, "Available")
                {
                    at.get_or_insert_with(|| began.elapsed());
                } else {
                    waiting.push(format!("{kind} {name}: {}", object["status"]));
                }
            }
            if waiting.is_empty() {
                Ok(())
            } else {
                Err(waiting.join("; "))
            }
        },
    );
    let took = began.elapsed();
    let direct = direct.finish()?;
    let proxied = proxied.finish()?;
    let watched = watch.finish();
    let (sent, failed) = (direct.sent, direct.failed());
    let (proxied_sent, proxied_failed) = (proxied.sent, proxied.failed());
    outcome?;
    wait_available(suite, Duration::from_secs(60))?;
    let reached: Vec<Duration> = reached.iter().flatten().copied().collect();
    suite.figures.upgrade = Some(took);
    suite.figures.upgrade_requests = Some((sent, failed));
    suite.figures.upgrade_proxied_requests = Some((proxied_sent, proxied_failed));
    suite.narrator.step(&format!(
        "upgraded in {:.1}s (at the new version after {}); clients: {sent} requests direct, {failed} failed; {proxied_sent} through the FrontProxy, {proxied_failed} failed",
        took.as_secs_f64(),
        ORDER
            .iter()
            .zip(&reached)
            .map(|((kind, _), at)| format!("{kind} {:.1}s", at.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if reached.windows(2).any(|pair| pair[0] > pair[1]) {
        return Err(format!(
            "not upgraded in the order CacheServer, RootShard, Shard, FrontProxy: {reached:?}"
        ));
    }
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
    let (written, watched) = watched?;
    suite.narrator.step(&format!(
        "the watch through the FrontProxy saw all {} ConfigMaps created during the upgrade ({} watches, {} of them ended by a broken connection and resumed)",
        written.len(),
        watched.watches,
        watched.broken
    ));
    check_data(&Cluster::new(&inside_path))?;
    check_workspace(&proxy_kubeconfig, &on_shard, SHARD, suite.dir.path())?;
    suite.narrator.step("data of scenarios 2 and 8 intact");
    if failed > 0 {
        return Err(format!(
            "{failed} of {sent} requests to the root shard failed during the upgrade:{}",
            direct.describe_failures()
        ));
    }
    if proxied_failed > 0 {
        return Err(format!(
            "{proxied_failed} of {proxied_sent} requests through the FrontProxy failed during the upgrade:{}",
            proxied.describe_failures()
        ));
    }
    Ok(())
}
