//! One pod's life on this node: network namespace, volumes, init containers in order, then all
//! containers; on stop, graceful termination and removal of everything the pod had.
//!
//! The worker is a task of its own; it reports through [`PodShared`] (its state, read by the
//! status writer, the Service proxies and the hosts files) and wakes the reconcile loop on every
//! change. A worker is stopped by the reconcile loop when its Pod object is gone; it then runs
//! preStop hooks, SIGTERMs, waits for the grace period, SIGKILLs, and tears the sandbox down.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, ServiceAccount};
use kube::Api;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::container::{self, Outcome, Slot};
use crate::context::Ctx;
use crate::error::{Error, Result, io};
use crate::events::Regarding;
use crate::fieldref::{self, PodFacts};
use crate::podstatus::{ContainerPhase, ContainerState, Phase, PodState};
use crate::token::Tokens;
use crate::volumes::{PodVolumes, Sources};

/// How often Secret, ConfigMap and token volumes are brought up to date.
const VOLUME_REFRESH: Duration = Duration::from_secs(5);
/// How long a pod that cannot start yet waits before trying again.
const SETUP_RETRY: Duration = Duration::from_secs(2);

/// What the rest of the agent sees of a running pod.
pub struct PodShared {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub ip: Ipv4Addr,
    pub labels: BTreeMap<String, String>,
    /// The pod's containers (named ports for Service target ports).
    pub containers: Vec<Container>,
    /// `spec.hostname` / `spec.subdomain` (headless Service names).
    pub hostname: String,
    pub subdomain: Option<String>,
    /// `spec.hostAliases`: address and names.
    pub host_aliases: Vec<(String, Vec<String>)>,
    pub hosts_file: PathBuf,
    state: Mutex<PodState>,
    terminating: AtomicBool,
    wake: Arc<tokio::sync::Notify>,
}

impl PodShared {
    pub fn new(
        pod: &Pod,
        ip: Ipv4Addr,
        hosts_file: PathBuf,
        wake: Arc<tokio::sync::Notify>,
    ) -> PodShared {
        let spec = pod.spec.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let state = PodState::new(
            spec.init_containers
                .iter()
                .flatten()
                .map(|c| ContainerState::new(&c.name, c.image.as_deref().unwrap_or_default()))
                .collect(),
            spec.containers
                .iter()
                .map(|c| ContainerState::new(&c.name, c.image.as_deref().unwrap_or_default()))
                .collect(),
        );
        let mut hostname = spec
            .hostname
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| name.clone());
        hostname.truncate(63);
        PodShared {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name,
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            ip,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            containers: spec.containers.clone(),
            hostname,
            subdomain: spec.subdomain.clone().filter(|s| !s.is_empty()),
            host_aliases: spec
                .host_aliases
                .iter()
                .flatten()
                .map(|a| (a.ip.clone(), a.hostnames.clone().unwrap_or_default()))
                .collect(),
            hosts_file,
            state: Mutex::new(state),
            terminating: AtomicBool::new(false),
            wake,
        }
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn snapshot(&self) -> PodState {
        match self.state.lock() {
            Ok(state) => state.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Changes the state, records condition transitions and wakes the reconcile loop.
    pub fn update(&self, change: impl FnOnce(&mut PodState)) {
        {
            let mut state = match self.state.lock() {
                Ok(state) => state,
                Err(poisoned) => poisoned.into_inner(),
            };
            change(&mut state);
            state.refresh_conditions();
        }
        self.wake.notify_one();
    }

    pub fn mark_terminating(&self) {
        self.terminating.store(true, Ordering::SeqCst);
    }

    pub fn is_terminating(&self) -> bool {
        self.terminating.load(Ordering::SeqCst)
    }

    /// Ready and not being stopped: may receive Service traffic.
    pub fn serving(&self) -> bool {
        !self.is_terminating() && self.snapshot().ready()
    }

    /// Has its network and is not being stopped (published by headless Services that publish
    /// not-ready addresses).
    pub fn alive(&self) -> bool {
        !self.is_terminating() && self.snapshot().sandbox_ready
    }

    pub fn regarding(&self, field_path: Option<String>) -> Regarding {
        Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            field_path,
        }
    }
}

/// Everything a pod's containers need while they run.
pub struct PodRun {
    pub ctx: Arc<Ctx>,
    pub pod: Pod,
    pub shared: Arc<PodShared>,
    pub pod_dir: PathBuf,
    pub netns: PathBuf,
    pub volumes: PodVolumes,
    pub grace: Duration,
}

impl PodRun {
    pub fn facts(&self) -> PodFacts<'_> {
        PodFacts {
            pod: &self.pod,
            pod_ip: Some(self.shared.ip),
            host_ip: self.ctx.settings.host_ip,
            node_name: &self.ctx.settings.node_name,
        }
    }

    pub fn restart_policy(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always")
    }
}

/// Sleeps `duration` unless `stop` fires first (then returns true).
pub async fn sleep_or_stop(duration: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(duration) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// Whether the service account token is mounted: the pod's field, else the ServiceAccount's.
async fn automount(ctx: &Ctx, pod: &Pod) -> Result<bool> {
    if let Some(value) = pod
        .spec
        .as_ref()
        .and_then(|s| s.automount_service_account_token)
    {
        return Ok(value);
    }
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = fieldref::service_account(pod);
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &namespace);
    match api.get_opt(&name).await? {
        Some(sa) => Ok(sa.automount_service_account_token.unwrap_or(true)),
        None => Err(Error::Pod(format!("service account {name:?} not found"))),
    }
}

fn set_waiting_all(state: &mut PodState, reason: &str, message: Option<String>) {
    for c in state
        .init_containers
        .iter_mut()
        .chain(state.containers.iter_mut())
    {
        if matches!(c.state, ContainerPhase::Waiting { .. }) {
            c.state = ContainerPhase::Waiting {
                reason: reason.to_owned(),
                message: message.clone(),
            };
        }
    }
}

/// Brings the sandbox up: network namespace and volumes. Retries (reporting why) until it works
/// or the pod is stopped (None).
async fn set_up(
    ctx: &Arc<Ctx>,
    pod: &Pod,
    shared: &Arc<PodShared>,
    pod_dir: &std::path::Path,
    tokens: &Tokens,
    stop: &mut watch::Receiver<bool>,
) -> Option<(PathBuf, PodVolumes)> {
    let network = ctx.settings.network.clone();
    let ip = shared.ip;
    let netns = loop {
        let network = network.clone();
        match tokio::task::spawn_blocking(move || network.pod_up(ip)).await {
            Ok(Ok(netns)) => break netns,
            Ok(Err(error)) => {
                tracing::warn!(pod = %shared.key(), %error, "setting up the pod network");
                shared.update(|s| s.message = Some(format!("network: {error}")));
            }
            Err(error) => tracing::warn!(%error, "network task"),
        }
        if sleep_or_stop(SETUP_RETRY, stop).await {
            return None;
        }
    };
    shared.update(|s| {
        s.sandbox_ready = true;
        s.message = None;
    });
    let mut reported = None;
    loop {
        let result = async {
            let automount = automount(ctx, pod).await?;
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let claim_dir = |name: &str| crate::claims::live_dir(ctx, namespace, name);
            let volumes = PodVolumes::prepare(pod, pod_dir, &claim_dir, automount)?;
            let facts = PodFacts {
                pod,
                pod_ip: Some(ip),
                host_ip: ctx.settings.host_ip,
                node_name: &ctx.settings.node_name,
            };
            volumes
                .refresh(&Sources {
                    objects: &ctx.cache,
                    tokens,
                    facts,
                    ca_pem: &ctx.settings.ca_pem,
                })
                .await?;
            Ok::<_, Error>(volumes)
        }
        .await;
        match result {
            Ok(volumes) => return Some((netns, volumes)),
            Err(error) => {
                let message = error.to_string();
                if reported.as_deref() != Some(message.as_str()) {
                    tracing::warn!(pod = %shared.key(), %message, "pod cannot start yet");
                    ctx.events
                        .emit(&shared.regarding(None), true, "FailedMount", &message);
                    shared
                        .update(|s| set_waiting_all(s, "ContainerCreating", Some(message.clone())));
                    reported = Some(message);
                }
            }
        }
        if sleep_or_stop(SETUP_RETRY, stop).await {
            return None;
        }
    }
}

/// Runs the pod until `stop` turns true, then stops it and removes its sandbox.
pub async fn run(ctx: Arc<Ctx>, pod: Pod, shared: Arc<PodShared>, mut stop: watch::Receiver<bool>) {
    let pod_dir = ctx.settings.pod_dir(&shared.namespace, &shared.name);
    if let Err(error) =
        std::fs::create_dir_all(pod_dir.join("specs")).map_err(io("creating the pod directory"))
    {
        tracing::error!(pod = %shared.key(), %error, "pod cannot start");
    }
    tracing::info!(pod = %shared.key(), ip = %shared.ip, dir = %pod_dir.display(), "starting pod");
    let tokens = Arc::new(Tokens::new(
        ctx.client.clone(),
        &shared.namespace,
        &fieldref::service_account(&pod),
    ));
    let Some((netns, volumes)) = set_up(&ctx, &pod, &shared, &pod_dir, &tokens, &mut stop).await
    else {
        tear_down(&ctx, &shared, &pod_dir).await;
        return;
    };
    let grace = Duration::from_secs(
        pod.spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .map_or(30, |g| u64::try_from(g).unwrap_or(0)),
    );
    let run = Arc::new(PodRun {
        ctx: ctx.clone(),
        pod,
        shared: shared.clone(),
        pod_dir: pod_dir.clone(),
        netns,
        volumes,
        grace,
    });
    let refresher = tokio::spawn(refresh_volumes(run.clone(), tokens.clone()));
    run_containers(&run, &mut stop).await;
    refresher.abort();
    tear_down(&ctx, &shared, &pod_dir).await;
}

/// Keeps Secret, ConfigMap, downward API and token volumes current.
async fn refresh_volumes(run: Arc<PodRun>, tokens: Arc<Tokens>) {
    loop {
        tokio::time::sleep(VOLUME_REFRESH).await;
        let sources = Sources {
            objects: &run.ctx.cache,
            tokens: &tokens,
            facts: run.facts(),
            ca_pem: &run.ctx.settings.ca_pem,
        };
        if let Err(error) = run.volumes.refresh(&sources).await {
            tracing::warn!(pod = %run.shared.key(), %error, "refreshing volumes");
        }
    }
}

async fn run_containers(run: &Arc<PodRun>, stop: &mut watch::Receiver<bool>) {
    let spec = run.pod.spec.clone().unwrap_or_default();
    if spec.init_containers.as_ref().is_some_and(|i| !i.is_empty()) {
        run.shared.update(|s| {
            for c in &mut s.containers {
                c.state = ContainerPhase::Waiting {
                    reason: "PodInitializing".into(),
                    message: None,
                };
            }
        });
    }
    let mut sidecars = JoinSet::new();
    // Init containers, one after the other; sidecars (restartPolicy Always) keep running.
    for (index, init) in spec.init_containers.iter().flatten().enumerate() {
        let slot = Slot { init: true, index };
        if init.restart_policy.as_deref() == Some("Always") {
            let (started_tx, mut started_rx) = watch::channel(false);
            sidecars.spawn(container::run(
                run.clone(),
                slot,
                stop.clone(),
                Some(started_tx),
            ));
            loop {
                if *started_rx.borrow() {
                    break;
                }
                tokio::select! {
                    changed = started_rx.changed() => if changed.is_err() { break },
                    _ = stop.changed() => break,
                }
            }
            if *stop.borrow() {
                sidecars.join_all().await;
                return;
            }
            continue;
        }
        match container::run(run.clone(), slot, stop.clone(), None).await {
            Outcome::Succeeded => {}
            Outcome::Failed => {
                run.shared.update(|s| s.phase = Phase::Failed);
                let _ = stop.changed().await;
                sidecars.join_all().await;
                return;
            }
            Outcome::Stopped => {
                sidecars.join_all().await;
                return;
            }
        }
    }
    run.shared.update(|s| {
        s.initialized = true;
        s.phase = Phase::Running;
    });
    let mut containers = JoinSet::new();
    for index in 0..spec.containers.len() {
        let slot = Slot { init: false, index };
        containers.spawn(container::run(run.clone(), slot, stop.clone(), None));
    }
    let mut outcomes = Vec::new();
    while let Some(result) = containers.join_next().await {
        outcomes.push(result.unwrap_or(Outcome::Failed));
    }
    if !*stop.borrow() {
        // Every container ended for good (restartPolicy Never or OnFailure).
        let failed = outcomes.contains(&Outcome::Failed);
        run.shared.update(|s| {
            s.phase = if failed {
                Phase::Failed
            } else {
                Phase::Succeeded
            };
            for c in &mut s.containers {
                c.ready = false;
            }
        });
        let _ = stop.changed().await;
    }
    sidecars.join_all().await;
}

/// Removes the pod's network namespace (killing anything left in it) and its volumes; logs and
/// claims stay.
async fn tear_down(ctx: &Arc<Ctx>, shared: &Arc<PodShared>, pod_dir: &std::path::Path) {
    let network = ctx.settings.network.clone();
    let ip = shared.ip;
    let _ = tokio::task::spawn_blocking(move || network.pod_down(ip)).await;
    for dir in ["volumes", "serviceaccount", "specs"] {
        let path = pod_dir.join(dir);
        if path.exists()
            && let Err(error) = tokio::fs::remove_dir_all(&path).await
        {
            tracing::warn!(path = %path.display(), %error, "removing pod files");
        }
    }
    tracing::info!(pod = %shared.key(), "pod stopped and removed");
}
