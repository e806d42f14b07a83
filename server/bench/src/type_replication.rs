//! `type-replication` (issue 19, "cache replication lag p99 for a WorkspaceType change to reach
//! every shard, goal <= 1 s"): how long a WorkspaceType change on the root shard takes to be
//! readable by the other shards.
//!
//! It starts `kcp sharded` (the [`Topology`] of `workspaces --shards`), creates the WorkspaceType
//! [`OBJECT_NAME`] in `root`, and changes it `--changes` times at `--rate` (an open-loop PUT on
//! the root shard setting the annotation [`SEQUENCE_ANNOTATION`] to the change's number). Every
//! shard reads other shards' types back through a watch on the cache (`shards/*`, upstream's
//! global informers; docs/server.md "Cache server"), so one more watch of that cache, on the root
//! shard's copies of this type, receives what each shard's read-back receives: a change is timed
//! from the write's response on root to the first event on that watch carrying its number or a
//! later one (see [`crate::visibility`]). It does not include what a shard does after receiving
//! the event (putting it into its index), which is in-memory work.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use kcp_apimachinery::duration::parse_or_seconds;
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use crate::client::{Client, Protocol};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{LoadError, check, outcome};
use crate::schedule::{self, Plan};
use crate::server::{ServerArgs, ServerError, Stopped, loadavg};
use crate::sharded::Topology;
use crate::stats::PhaseReport;
use crate::visibility::{self, OBJECT_NAME, SEQUENCE_ANNOTATION, Visibility};
use crate::watchers::{Streams, Watchers};

/// Root's WorkspaceTypes on the root shard (below the server URL).
const TYPES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspacetypes";
/// The root shard's copies of root's WorkspaceTypes in the cache (below the cache's URL).
const COPIES: &str =
    "/services/cache/shards/root/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspacetypes";
const POLL: Duration = Duration::from_millis(5);

/// Options of the `type-replication` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct TypeReplicationArgs {
    /// Shards of the `kcp sharded` topology (2 or more).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..))]
    pub shards: u16,
    /// Changes to make to the WorkspaceType.
    #[arg(long, default_value_t = 200)]
    pub changes: u64,
    /// Changes per second, scheduled on a clock (open loop).
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// A change not seen in the cache's watch this long after its write's response counts as
    /// not seen (it is left out of the lag figures).
    #[arg(long, default_value = "5s", value_parser = parse_or_seconds)]
    pub timeout: Duration,
    /// How long the created type may take to appear in the cache before the changes start.
    #[arg(long, default_value = "60s", value_parser = parse_or_seconds)]
    pub ready_timeout: Duration,
}

/// Why the figures could not be produced (changes not seen are figures, not errors).
#[derive(Debug, thiserror::Error)]
pub enum TypeReplicationError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("kcp sharded printed no cache or root shard URL")]
    NoCache,
    #[error("the WorkspaceType's copy did not appear in the cache's watch within {0:?}")]
    NeverReplicated(Duration),
}

/// What `type-replication` prints.
#[derive(Debug, Serialize)]
pub struct TypeReplicationReport {
    pub shards: u16,
    /// The cache watched (standalone cache server, or the root shard's in-process cache).
    pub cache_url: String,
    /// The PUTs on the root shard.
    pub writes: PhaseReport,
    /// Write response → visible in the cache's watch stream.
    pub visibility: Visibility,
    pub timeout_s: f64,
    /// Spawn of `kcp sharded` to its summary.
    pub startup_ms: f64,
    /// /proc/loadavg (1, 5, 15 min) once the topology was ready.
    pub loadavg_at_start: String,
    /// /proc/loadavg at the end.
    pub loadavg: String,
    pub stopped: Stopped,
}

/// Starts the topology, measures, stops it.
pub async fn run(
    server: &ServerArgs,
    args: &TypeReplicationArgs,
) -> Result<TypeReplicationReport, TypeReplicationError> {
    let plan = Plan::exactly(args.rate, args.changes).map_err(LoadError::from)?;
    let topology = Topology::start(server, args.shards).await?;
    let loadavg_at_start = loadavg();
    let measured = measure(&topology, &plan, args).await;
    let startup_ms = topology.startup.as_secs_f64() * 1e3;
    let stopped = topology.stop().await?;
    let (cache_url, writes, visibility) = measured?;
    Ok(TypeReplicationReport {
        shards: args.shards,
        cache_url,
        writes,
        visibility,
        timeout_s: args.timeout.as_secs_f64(),
        startup_ms,
        loadavg_at_start,
        loadavg: loadavg(),
        stopped,
    })
}

/// The type, numbered `sequence`, as PUT and POST send it.
fn workspace_type(sequence: u64) -> Bytes {
    Bytes::from(
        json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "WorkspaceType",
            "metadata": {
                "name": OBJECT_NAME,
                "annotations": { SEQUENCE_ANNOTATION: sequence.to_string() },
            },
            "spec": {},
        })
        .to_string(),
    )
}

async fn measure(
    topology: &Topology,
    plan: &Plan,
    args: &TypeReplicationArgs,
) -> Result<(String, PhaseReport, Visibility), TypeReplicationError> {
    let root = Target::from_file(&topology.kubeconfig, Some("root"))?;
    let cache_url = topology
        .summary
        .cache_url()
        .ok_or(TypeReplicationError::NoCache)?
        .to_owned();
    let cache =
        Client::new(root.with_server(&cache_url)?, Protocol::Http2, 1).map_err(LoadError::from)?;
    let root = std::sync::Arc::new(Client::new(root, Protocol::Http2, 2).map_err(LoadError::from)?);
    let created = root
        .request(Method::POST, TYPES, Some(workspace_type(0)))
        .await
        .map_err(LoadError::from)?;
    check("creating the WorkspaceType", created)?;
    // From now, without resourceVersion: the copy as ADDED (once replicated), then every change.
    let watch = format!(
        "{COPIES}?watch=1&timeoutSeconds={}",
        (args.ready_timeout + plan.span() + args.timeout).as_secs() + 60
    );
    let watchers = Watchers::start(
        &cache,
        [watch],
        Streams::OwnConnection,
        visibility::sequence_of,
    )
    .await?;
    let deadline = Instant::now() + args.ready_timeout;
    while watchers.seen().iter().all(|&n| n == 0) {
        if Instant::now() >= deadline {
            watchers.close().await;
            return Err(TypeReplicationError::NeverReplicated(args.ready_timeout));
        }
        tokio::time::sleep(POLL).await;
    }
    tracing::info!(%cache_url, "the type's copy is in the cache; changing it");
    let path = format!("{TYPES}/{OBJECT_NAME}");
    let run = schedule::drive(plan, args.timeout, |i| {
        let (root, path) = (root.clone(), path.clone());
        async move {
            let sequence = i + 1;
            // Without resourceVersion: an unconditional update, as the only writer.
            let reply = root
                .request(Method::PUT, &path, Some(workspace_type(sequence)))
                .await;
            outcome(reply).map(|_| (sequence, Instant::now()))
        }
    })
    .await;
    let writes = PhaseReport::of("change", plan.rate(), &run);
    let acks: Vec<(u64, Instant)> = run
        .samples
        .iter()
        .filter_map(|s| s.result.as_ref().ok().copied())
        .collect();
    // Until every number 0..=last arrived on its own, at most the timeout after the last ack
    // (changes merged by replication never arrive on their own: then the whole timeout).
    let last = acks.iter().map(|&(n, _)| n).max().unwrap_or(0);
    let until = acks
        .iter()
        .map(|&(_, at)| at)
        .max()
        .unwrap_or_else(Instant::now)
        + args.timeout;
    let every_number_seen = |watchers: &Watchers| watchers.seen().iter().any(|&n| n > last);
    while Instant::now() < until && !every_number_seen(&watchers) {
        tokio::time::sleep(POLL).await;
    }
    let arrivals: Vec<(u64, Instant)> = watchers
        .close()
        .await
        .into_iter()
        .flatten()
        .filter_map(|(key, at)| key.parse().ok().map(|n| (n, at)))
        .collect();
    Ok((
        cache_url,
        writes,
        visibility::visibility(&acks, &arrivals, args.timeout),
    ))
}
