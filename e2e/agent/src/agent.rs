//! `kcp-node-agent run`: start-up, the reconcile loop and the orderly shutdown.
//!
//! One loop owns all mutable state (address table, workers, proxies, expectations) and runs a
//! *pass* whenever a watch reports a change or a pod's state changes, and at least every
//! `--resync`. A pass runs the controllers, binds claims, starts and stops pod workers, brings the
//! Services in line and publishes pod status. Keeping this in one place (rather than a task per
//! controller) makes the order of effects explicit: e.g. a pod is removed from the Service proxies
//! before it is signalled.
//!
//! Start-up removes whatever a previous run of the same bridge left (processes, namespaces,
//! veths, virtual IPs) and deletes the Pod objects it ran, so their workloads start them afresh;
//! addresses, StatefulSet revisions and claim data persist in the state directory.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::cli::RunArgs;
use crate::container_input::ContainerInputs;
use crate::context::{Cache, Ctx, Settings};
use crate::error::{Error, Result, io};
use crate::events::Events;
use crate::images::ImageMap;
use crate::ipam::{Ipam, Subnet};
use crate::kubelet::Kubelet;
use crate::network::Network;
use crate::node_registration::{self, NodeRecord};
use crate::service_sync::ServiceSync;
use crate::statefulset::Revisions;
use crate::workloads::Workloads;
use crate::{claims, kubelet_server, names, probes};

/// How long pods get to stop when the agent shuts down (beyond that they are killed).
const SHUTDOWN_BOUND: Duration = Duration::from_secs(90);
/// Coalesces bursts of watch events into one pass.
const DEBOUNCE: Duration = Duration::from_millis(20);

/// What the state directory remembers about the network between runs.
#[derive(Debug, Default, Serialize, Deserialize)]
struct NetworkState {
    /// The agent created the bridge (so it removes it on exit).
    created_bridge: bool,
}

fn reflect<K>(api: Api<K>, wake: Arc<Notify>) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => wake.notify_one(),
                Err(error) => tracing::warn!(kind, %error, "watch error (retrying)"),
            }
        }
    });
    (reader, task)
}

/// PEM of the DER certificates kube read from the kubeconfig.
fn pem(certificates: &[Vec<u8>]) -> Vec<u8> {
    use base64::Engine;
    let mut out = String::new();
    for der in certificates {
        let encoded = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for chunk in encoded.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out.into_bytes()
}

async fn client(args: &RunArgs) -> Result<(kube::Client, Vec<u8>, Option<u16>)> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let ca = config.root_cert.as_deref().map(pem).unwrap_or_default();
    let port = config
        .cluster_url
        .port_u16()
        .or(match config.cluster_url.scheme_str() {
            Some("https") => Some(443),
            _ => None,
        });
    let client = kube::Client::try_from(config)?;
    Ok((client, ca, port))
}

struct State {
    /// Pods this agent bound to its node (until the cache shows the binding).
    scheduled: HashSet<String>,
    ipam: Ipam,
    kubelet: Kubelet,
    services: ServiceSync,
    workloads: Workloads,
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(args: RunArgs) -> Result<()> {
    let state_dir = args.state_dir.clone();
    for dir in ["pods", "volumes"] {
        std::fs::create_dir_all(state_dir.join(dir))
            .map_err(io(format!("creating {}", state_dir.join(dir).display())))?;
    }
    let state_dir = std::fs::canonicalize(&state_dir)
        .map_err(io(format!("resolving {}", state_dir.display())))?;
    let images_text = std::fs::read_to_string(&args.images)
        .map_err(io(format!("reading {}", args.images.display())))?;
    let images = ImageMap::parse(&images_text).map_err(|source| Error::ImageMap {
        path: args.images.display().to_string(),
        source,
    })?;
    for (repository, entry) in images.entries() {
        for path in std::iter::once(&entry.entrypoint).chain(entry.commands.values()) {
            if !path.is_file() {
                tracing::warn!(image = %repository, path = %path.display(), "image map names a binary that does not exist");
            }
        }
    }
    let subnet = Subnet::parse(&args.subnet)?;
    let network = Network::new(&args.bridge, subnet)?;
    let (client, kubeconfig_ca, kubeconfig_port) = client(&args).await?;
    let ca_pem = match &args.api_ca_file {
        Some(path) => std::fs::read(path).map_err(io(format!("reading {}", path.display())))?,
        None => kubeconfig_ca,
    };
    let api_port = args.api_server_port.or(kubeconfig_port).ok_or_else(|| {
        Error::Config("--api-server-port is needed (the kubeconfig names no port)".into())
    })?;
    let agent_exe = std::env::current_exe().map_err(io("locating the agent binary"))?;

    // The network: leftovers of an earlier run first, then the bridge.
    let network_file = state_dir.join("network.json");
    let previous: NetworkState = std::fs::read(&network_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let setup = network.clone();
    let created = tokio::task::spawn_blocking(move || {
        setup.cleanup(false)?;
        setup.bridge_up()
    })
    .await
    .map_err(|e| Error::Config(format!("network set-up task: {e}")))??;
    let network_state = NetworkState {
        created_bridge: created || previous.created_bridge,
    };
    std::fs::write(&network_file, serde_json::to_vec(&network_state)?)
        .map_err(io(format!("writing {}", network_file.display())))?;
    tracing::info!(bridge = %network.bridge, %subnet, gateway = %subnet.gateway(), created, "pod network ready");

    let wake = Arc::new(Notify::new());
    let (deployments, t1) = reflect(Api::<Deployment>::all(client.clone()), wake.clone());
    let (statefulsets, t2) = reflect(Api::<StatefulSet>::all(client.clone()), wake.clone());
    let (services, t3) = reflect(Api::<Service>::all(client.clone()), wake.clone());
    let (pods, t4) = reflect(Api::<Pod>::all(client.clone()), wake.clone());
    let (secrets, t5) = reflect(Api::<Secret>::all(client.clone()), wake.clone());
    let (config_maps, t6) = reflect(Api::<ConfigMap>::all(client.clone()), wake.clone());
    let (claims, t7) = reflect(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        wake.clone(),
    );
    let watches = [t1, t2, t3, t4, t5, t6, t7];
    let cache = Cache {
        deployments,
        statefulsets,
        services,
        pods,
        secrets,
        config_maps,
        claims,
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io("installing the SIGTERM handler"))?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(io("installing the SIGINT handler"))?;
    tracing::info!("waiting for the watch caches");
    let ready = async {
        let _ = cache.deployments.wait_until_ready().await;
        let _ = cache.statefulsets.wait_until_ready().await;
        let _ = cache.services.wait_until_ready().await;
        let _ = cache.pods.wait_until_ready().await;
        let _ = cache.secrets.wait_until_ready().await;
        let _ = cache.config_maps.wait_until_ready().await;
        let _ = cache.claims.wait_until_ready().await;
    };
    let mut stopped_early = false;
    tokio::select! {
        () = ready => {}
        _ = terminate.recv() => stopped_early = true,
        _ = interrupt.recv() => stopped_early = true,
    }
    let settings = Settings {
        agent_exe,
        state_dir: state_dir.clone(),
        images,
        network: network.clone(),
        node_name: args.node_name.clone(),
        host_ip: subnet.gateway(),
        api_host: args.api_server_host.unwrap_or_else(|| subnet.gateway()),
        api_port,
        ca_pem,
        cluster_domain: args.cluster_domain.clone(),
        max_backoff: args.max_backoff,
    };
    let probe_http =
        probes::http_client().map_err(|e| Error::Config(format!("probe HTTP client: {e}")))?;
    let ctx = Arc::new(Ctx {
        settings,
        events: Events::new(client.clone(), &args.node_name),
        client,
        cache,
        wake: wake.clone(),
        probe_http,
        container_inputs: ContainerInputs::default(),
    });
    let mut state = State {
        scheduled: HashSet::new(),
        ipam: Ipam::load(subnet, &state_dir.join("ipam.json")),
        kubelet: Kubelet::default(),
        services: ServiceSync::default(),
        workloads: Workloads::new(Revisions::load(state_dir.join("revisions.json"))),
    };
    let node = NodeRecord {
        name: args.node_name.clone(),
        internal_ip: subnet.gateway(),
        port: if args.kubelet_tls().is_some() {
            args.port
        } else {
            0
        },
        since: jiff::Timestamp::now(),
    };
    let kubelet_port = match args.kubelet_tls() {
        Some(tls) if !stopped_early => {
            let address = std::net::SocketAddr::from((subnet.gateway(), args.port));
            Some(kubelet_server::start(ctx.clone(), address, &tls).await?)
        }
        _ => None,
    };
    let mut heartbeat = None;
    if !stopped_early {
        node_registration::register(&ctx.client, &node).await?;
        heartbeat = Some(node_registration::heartbeat(
            ctx.client.clone(),
            node.clone(),
        ));
        start_fresh(&ctx, &mut state).await;
        tracing::info!(node = %args.node_name, api = %format!("{}:{}", ctx.settings.api_host, api_port), "agent running");
        loop {
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(args.resync) => {}
                _ = terminate.recv() => break,
                _ = interrupt.recv() => break,
            }
            tokio::time::sleep(DEBOUNCE).await;
            pass(&ctx, &mut state).await;
        }
    }
    tracing::info!("shutting down: stopping every pod");
    if let Some(heartbeat) = heartbeat {
        heartbeat.abort();
        node_registration::unregister(&ctx.client, node).await;
    }
    state.kubelet.begin_shutdown();
    state
        .services
        .sync(&ctx, &mut state.ipam, &state.kubelet)
        .await;
    state
        .kubelet
        .finish_shutdown(&ctx, &mut state.ipam, SHUTDOWN_BOUND)
        .await;
    state.services.proxies.shutdown(&ctx.settings.network).await;
    if let Some(kubelet_port) = kubelet_port {
        kubelet_port.abort();
    }
    save_ipam(&state.ipam, &state_dir);
    for watch in watches {
        watch.abort();
    }
    let teardown = network.clone();
    let remove_bridge = network_state.created_bridge;
    tokio::task::spawn_blocking(move || teardown.cleanup(remove_bridge))
        .await
        .map_err(|e| Error::Config(format!("network teardown task: {e}")))??;
    if remove_bridge {
        let _ = std::fs::remove_file(&network_file);
    }
    tracing::info!(
        bridge_removed = remove_bridge,
        "agent stopped; network removed"
    );
    Ok(())
}

fn save_ipam(ipam: &Ipam, state_dir: &Path) {
    if let Err(error) = ipam.save(&state_dir.join("ipam.json")) {
        tracing::warn!(%error, "saving the address table");
    }
}

/// Deletes the workload pods a previous run left on this node: nothing of them runs any more,
/// and their status is stale. Their Deployments and StatefulSets create them again.
async fn start_fresh(ctx: &Arc<Ctx>, state: &mut State) {
    for pod in ctx.cache.pods.state() {
        let ours = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            == Some(ctx.settings.node_name.as_str());
        let workload = pod.metadata.owner_references.iter().flatten().any(|o| {
            o.controller == Some(true) && matches!(o.kind.as_str(), "Deployment" | "StatefulSet")
        });
        if ours && workload {
            tracing::info!(pod = ?pod.metadata.name, "removing a pod of an earlier run");
            if let Err(error) = state
                .workloads
                .expectations
                .delete_pod(&ctx.client, &pod)
                .await
            {
                tracing::warn!(%error, "removing a pod of an earlier run");
            }
        }
    }
}

/// One reconcile pass.
async fn pass(ctx: &Arc<Ctx>, state: &mut State) {
    let before = state.ipam.table().clone();
    let stopping = state.kubelet.stopping();
    state.workloads.sync(ctx, &stopping).await;
    schedule(ctx, &mut state.scheduled).await;
    claims::sync(ctx, &state.kubelet.claims_in_use()).await;
    let expectations = &state.workloads.expectations;
    state
        .kubelet
        .sync(ctx, &mut state.ipam, |uid| expectations.deleting(uid));
    state
        .services
        .sync(ctx, &mut state.ipam, &state.kubelet)
        .await;
    state.kubelet.signal_and_reap(&mut state.ipam);
    state.kubelet.write_statuses(ctx).await;
    release_stateful_addresses(ctx, state);
    if state.ipam.table() != &before {
        save_ipam(&state.ipam, &ctx.settings.state_dir);
    }
}

/// Plays the scheduler: pods that name no node are bound to this one (`spec.nodeName`), so a
/// plain `kubectl run` works too.
async fn schedule(ctx: &Arc<Ctx>, scheduled: &mut HashSet<String>) {
    let pods = ctx.cache.pods.state();
    scheduled.retain(|uid| {
        pods.iter().any(|p| {
            p.metadata.uid.as_deref() == Some(uid.as_str())
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_none_or(str::is_empty)
        })
    });
    for pod in pods {
        let spec = pod.spec.as_ref();
        let unbound = spec
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty);
        let gated = spec
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        let terminal = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let Some(uid) = pod.metadata.uid.clone() else {
            continue;
        };
        if !unbound
            || gated
            || terminal
            || pod.metadata.deletion_timestamp.is_some()
            || scheduled.contains(&uid)
        {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
        let patch = serde_json::json!({ "spec": { "nodeName": ctx.settings.node_name } });
        match api
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(pod = %format!("{namespace}/{name}"), "scheduled pod to this node");
                scheduled.insert(uid);
            }
            Err(error) => {
                tracing::warn!(pod = %format!("{namespace}/{name}"), %error, "scheduling pod")
            }
        }
    }
}

/// Frees the addresses kept for StatefulSet pods whose ordinal is no longer wanted.
fn release_stateful_addresses(ctx: &Arc<Ctx>, state: &mut State) {
    let running: HashSet<String> = state.kubelet.all().map(|w| w.shared.key()).collect();
    let sets = ctx.cache.statefulsets.state();
    let unwanted: Vec<String> = state
        .ipam
        .table()
        .pods
        .keys()
        .filter(|key| !running.contains(*key))
        .filter(|key| {
            let Some((namespace, pod)) = key.split_once('/') else {
                return true;
            };
            !sets.iter().any(|sts| {
                sts.metadata.namespace.as_deref() == Some(namespace)
                    && sts
                        .metadata
                        .name
                        .as_deref()
                        .and_then(|name| names::ordinal_of(name, pod))
                        .is_some_and(|ordinal| ordinal < crate::statefulset::replicas(sts))
            })
        })
        .cloned()
        .collect();
    for key in unwanted {
        state.ipam.release_pod(&key);
    }
}

/// `kcp-node-agent cleanup`: what a crashed run left, found from the bridge name alone.
pub fn cleanup(bridge: &str, state_dir: Option<&Path>, keep_bridge: bool) -> Result<()> {
    let any_subnet = Subnet::parse("10.0.0.0/8")?;
    let network = Network::new(bridge, any_subnet)?;
    network.cleanup(!keep_bridge)?;
    if let Some(dir) = state_dir {
        let _ = std::fs::remove_file(dir.join("network.json"));
        if let Ok(entries) = std::fs::read_dir(dir.join("pods")) {
            for entry in entries.flatten() {
                for sub in ["volumes", "serviceaccount", "specs"] {
                    let _ = std::fs::remove_dir_all(entry.path().join(sub));
                }
            }
        }
    }
    tracing::info!(bridge, "cleanup done");
    Ok(())
}

/// `kcp-node-agent network up`: the bridge alone, so a server can bind its address first.
pub fn network_up(bridge: &str, subnet: &str) -> Result<Ipv4Addr> {
    let subnet = Subnet::parse(subnet)?;
    let network = Network::new(bridge, subnet)?;
    network.bridge_up()?;
    Ok(subnet.gateway())
}

pub fn network_down(bridge: &str) -> Result<()> {
    let network = Network::new(bridge, Subnet::parse("10.0.0.0/8")?)?;
    network.cleanup(true)
}
