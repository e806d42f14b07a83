//! `index-lag` (issue 20, "index lag with 10,000 workspaces over 3 shards: time from a workspace
//! turning Ready to being routable, p99 <= 1 s; proxy memory per indexed workspace <= 1 KiB"):
//! how soon the front-proxy's index resolves a new workspace, and what it costs per workspace.
//!
//! It starts `kcp sharded` (the [`Topology`] of `workspaces --shards`), starts the front-proxy's
//! index ([`kcp_front_proxy::index`]) in this process as `kcp sharded` starts the front-proxy
//! (`root.kubeconfig` of the topology as both `--root-kubeconfig` and `--shards-kubeconfig`),
//! waits until it is ready, then creates the
//! workspaces as `workspaces` does ([`create_until_ready`]: root's Workspaces at `--rate`, each
//! timed to the first event of one watch on root showing it Ready). Meanwhile a poller asks the
//! index every `--poll` to resolve `root:<name>` for every workspace whose create is due and that
//! does not resolve yet, and records when it first does.
//!
//! - **Lag**: resolvable − Ready (by name), 0 when the index resolved it before the watch showed
//!   it Ready (the index routes a workspace once it is past `Scheduling`, as upstream; the count
//!   of those is reported). The poll interval bounds the resolution of the figure.
//! - **Create → resolvable**: from the create's due time, for scale.
//! - **Memory**: the index's own estimate of its entries' heap
//!   ([`kcp_front_proxy::index::Index::heap_bytes`]: hash tables by capacity, names by malloc
//!   chunk) per indexed workspace, and the growth of this process's RSS from before the index
//!   started to after every workspace resolved, per workspace: an upper bound, since the watch
//!   of root and the bookkeeping of this command grow with the workspaces too.
//! - **Resync**: a second index started once every workspace exists (a proxy's restart), timed
//!   until it is ready (every shard listed), with the workspaces it then holds.
//! - **Through the proxy**: when `kcp sharded` runs its own `kcp front-proxy` (a build that has
//!   one), a second poller GETs `/clusters/root:<name>/api/v1/namespaces/default` through it every
//!   `--proxy-poll` (its `front-proxy` context's credentials) until it answers other than 403:
//!   Ready -> answered, and the proxy process's RSS growth per workspace.
//! - **Deletion** (`--delete-rate`, with the proxy): the workspaces are deleted again and each
//!   timed from its DELETE's response to the proxy's 403; with `--deregister-shard`, a shard's
//!   `Shard` object is deleted last and the proxy timed until it stops routing to it
//!   ([`deletion`]).

mod deletion;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::{Method, StatusCode};
use kcp_apimachinery::duration::parse_or_seconds;
use kcp_front_proxy::index::{self, Index, IndexCounts, IndexSources};
use kcp_front_proxy::route::Resolve;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{Client, Protocol};
use crate::kubeconfig::Target;
use crate::load::LoadError;
use crate::report::Table;
use crate::server::{ServerArgs, ServerError, Stopped, loadavg, memory_of};
use crate::sharded::{FRONT_PROXY, Process, Topology};
use crate::stats::{Latency, PhaseReport};
use crate::workspaces::{self, CreateSpec, Tracker, WorkspaceError, create_until_ready};

/// What `kcp sharded` hands its front-proxy as `--root-kubeconfig` and `--shards-kubeconfig`,
/// next to the admin kubeconfig.
const ROOT_KUBECONFIG: &str = "root.kubeconfig";

/// Options of the `index-lag` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct IndexLagArgs {
    /// Shards of the `kcp sharded` topology (2 or more).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..))]
    pub shards: u16,
    /// Workspaces to create in root (ws-00001 ...), placed by the scheduler.
    #[arg(long, default_value_t = 10_000)]
    pub workspaces: u64,
    /// Workspace creates per second (open loop).
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Creates in flight at once.
    #[arg(long, default_value_t = 128)]
    pub max_in_flight: usize,
    /// How often the index is asked about the workspaces that do not resolve yet.
    #[arg(long, default_value = "5ms", value_parser = parse_or_seconds)]
    pub poll: Duration,
    /// How often the front-proxy process (when `kcp sharded` runs one) is asked, by HTTP, about
    /// the workspaces it still answers 403 for.
    #[arg(long, default_value = "20ms", value_parser = parse_or_seconds)]
    pub proxy_poll: Duration,
    /// How long requests may still run after the last one is due.
    #[arg(long, default_value = "30s", value_parser = parse_or_seconds)]
    pub drain: Duration,
    /// Then delete the workspaces at this rate (per second) and time each from the DELETE's
    /// response to the proxy's 403 (needs `kcp sharded`'s front-proxy).
    #[arg(long)]
    pub delete_rate: Option<f64>,
    /// With --delete-rate: keep some workspaces of the last shard, then delete its `Shard` object
    /// and time until the proxy stops routing to them.
    #[arg(long)]
    pub deregister_shard: bool,
    /// How long after the create phase every workspace may take to become Ready.
    #[arg(long, default_value = "120s", value_parser = parse_or_seconds)]
    pub ready_timeout: Duration,
    /// How long the index may take to be ready, and a Ready workspace to resolve after the last
    /// one turned Ready.
    #[arg(long, default_value = "60s", value_parser = parse_or_seconds)]
    pub index_timeout: Duration,
}

/// Why the figures could not be produced (workspaces not resolved are figures, not errors).
#[derive(Debug, thiserror::Error)]
pub enum IndexLagError {
    #[error(transparent)]
    Workspaces(#[from] WorkspaceError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error("the index: {0}")]
    Index(#[from] index::IndexError),
    #[error("the index was not ready within {0:?} ({1:?})")]
    NotReady(Duration, IndexCounts),
}

/// What `index-lag` prints.
#[derive(Debug, Serialize)]
pub struct IndexLagReport {
    pub shards: u16,
    pub workspaces: u64,
    /// The creates (POST -> 201).
    pub create: PhaseReport,
    /// Created workspaces the watch of root showed Ready.
    pub ready: u64,
    /// Ready workspaces the index resolved.
    pub resolved: u64,
    /// Of those, resolved no later than the watch showed them Ready.
    pub resolved_before_ready: u64,
    /// Ready (seen by the watch of root) -> resolvable (0 when resolvable first).
    pub lag: Option<Latency>,
    /// Create due -> resolvable.
    pub create_to_resolvable: Option<Latency>,
    pub poll_ms: f64,
    pub counts: Counts,
    /// The index's estimate of its entries' heap.
    pub index_heap_mib: f64,
    pub index_heap_bytes_per_workspace: f64,
    /// This process's RSS growth from before the index to after the last resolution, per
    /// indexed workspace (an upper bound: see the module documentation).
    pub process_rss_kib_per_workspace: f64,
    /// Spawn of `kcp sharded` to its summary.
    pub startup_ms: f64,
    /// Index started -> ready.
    pub index_ready_ms: f64,
    /// A second index started after the creates (every workspace there) -> ready, and the
    /// workspaces it then held.
    pub resync_ms: f64,
    pub resync_workspaces: usize,
    /// The same through `kcp sharded`'s own `kcp front-proxy`, when it runs one.
    pub through_proxy: Option<ThroughProxy>,
    /// With --delete-rate: deletion -> 403 through the proxy, and a shard deregistered.
    pub deletion: Option<deletion::DeletionReport>,
    pub loadavg_at_start: String,
    pub loadavg: String,
    pub stopped: Stopped,
}

/// A GET of `/clusters/root:<name>/api/v1/namespaces/default` through the front-proxy process
/// (its `front-proxy` context's credentials), polled until it stops answering 403.
#[derive(Debug, Serialize)]
pub struct ThroughProxy {
    /// Ready workspaces it answered other than 403 for.
    pub answered: u64,
    pub answered_before_ready: u64,
    /// Ready -> first answer other than 403 (0 when first).
    pub lag: Option<Latency>,
    pub poll_ms: f64,
    /// The proxy process's RSS before the creates and once every workspace answered.
    pub rss_before_mib: f64,
    pub rss_after_mib: f64,
    /// (after - before) / Ready workspaces.
    pub rss_kib_per_workspace: f64,
}

/// [`IndexCounts`] as printed.
#[derive(Debug, Serialize)]
pub struct Counts {
    pub shards: usize,
    pub logical_clusters: usize,
    pub workspaces: usize,
}

/// What [`measure`] found, before the topology stops.
struct Measured {
    create: PhaseReport,
    ready: u64,
    resolved: u64,
    resolved_before_ready: u64,
    lag: Option<Latency>,
    create_to_resolvable: Option<Latency>,
    counts: IndexCounts,
    heap_bytes: usize,
    rss_growth_kib: f64,
    index_ready: Duration,
    resync: Duration,
    resync_counts: IndexCounts,
    through_proxy: Option<ThroughProxy>,
    deletion: Option<deletion::DeletionReport>,
}

/// Starts the topology, measures, stops it.
pub async fn run(
    server: &ServerArgs,
    args: &IndexLagArgs,
) -> Result<IndexLagReport, IndexLagError> {
    let topology = Topology::start(server, args.shards).await?;
    let loadavg_at_start = loadavg();
    let stop = CancellationToken::new();
    let measured = measure(&topology, args, &stop).await;
    stop.cancel();
    let startup_ms = topology.startup.as_secs_f64() * 1e3;
    let stopped = topology.stop().await?;
    let m = measured?;
    let indexed = m.counts.workspaces.max(1) as f64;
    Ok(IndexLagReport {
        shards: args.shards,
        workspaces: args.workspaces,
        create: m.create,
        ready: m.ready,
        resolved: m.resolved,
        resolved_before_ready: m.resolved_before_ready,
        lag: m.lag,
        create_to_resolvable: m.create_to_resolvable,
        poll_ms: args.poll.as_secs_f64() * 1e3,
        counts: Counts {
            shards: m.counts.shards,
            logical_clusters: m.counts.logical_clusters,
            workspaces: m.counts.workspaces,
        },
        index_heap_mib: m.heap_bytes as f64 / (1024.0 * 1024.0),
        index_heap_bytes_per_workspace: m.heap_bytes as f64 / indexed,
        process_rss_kib_per_workspace: m.rss_growth_kib / indexed,
        startup_ms,
        index_ready_ms: m.index_ready.as_secs_f64() * 1e3,
        resync_ms: m.resync.as_secs_f64() * 1e3,
        resync_workspaces: m.resync_counts.workspaces,
        through_proxy: m.through_proxy,
        deletion: m.deletion,
        loadavg_at_start,
        loadavg: loadavg(),
        stopped,
    })
}

fn own_rss_kib() -> Result<f64, ServerError> {
    Ok(memory_of(std::process::id())?.rss_mib * 1024.0)
}

async fn measure(
    topology: &Topology,
    args: &IndexLagArgs,
    stop: &CancellationToken,
) -> Result<Measured, IndexLagError> {
    let target =
        Target::from_file(&topology.kubeconfig, Some("root")).map_err(WorkspaceError::from)?;
    let client = Arc::new(
        Client::new(target, Protocol::Http2, 4)
            .map_err(LoadError::from)
            .map_err(WorkspaceError::from)?,
    );
    client.warm_up().await.map_err(WorkspaceError::from)?;
    let rss_before = own_rss_kib()?;
    let (index, index_ready) = ready_index(topology, args, stop.clone()).await?;
    tracing::info!(ready_ms = index_ready.as_secs_f64() * 1e3, counts = ?index.counts(), "index ready");

    let spec = CreateSpec {
        workspaces: args.workspaces,
        rate: args.rate,
        workspace_type: "universal",
        workspace_type_path: "root",
        max_in_flight: args.max_in_flight,
        drain: args.drain,
        ready_timeout: args.ready_timeout,
    };
    let limit = Duration::from_secs_f64(args.workspaces as f64 / args.rate)
        + args.drain
        + args.ready_timeout
        + Duration::from_secs(60);
    let tracker = Tracker::open(client.clone(), limit)
        .await
        .map_err(WorkspaceError::from)?;
    let proxy = front_proxy(topology)?;
    let proxy_rss_before = match &proxy {
        Some((process, _)) => Some(memory_of(process.pid)?.rss_mib),
        None => None,
    };
    let in_process = index.clone();
    let (resolved, poller) = spawn_poller(args, args.poll, move |path| {
        let routable = in_process.resolve(&path).is_ok();
        async move { routable }
    });
    let proxy_poller = proxy.as_ref().map(|(_, client)| {
        let client = client.clone();
        spawn_poller(args, args.proxy_poll, move |path| {
            let client = client.clone();
            async move {
                let answer = client
                    .request(
                        Method::GET,
                        &format!("/clusters/{path}/api/v1/namespaces/default"),
                        None,
                    )
                    .await;
                answer.is_ok_and(|reply| reply.status != StatusCode::FORBIDDEN)
            }
        })
    });
    let created = create_until_ready(&client, &tracker, &spec, &topology.pids()).await?;
    let ready_at = tracker.ready_times();
    // Until every Ready workspace passed both pollers, or the timeout.
    let deadline = Instant::now() + args.index_timeout;
    let all_passed = |seen: &Seen| ready_at.keys().all(|name| lock(seen).contains_key(name));
    while Instant::now() < deadline
        && !(all_passed(&resolved)
            && proxy_poller
                .as_ref()
                .is_none_or(|(seen, _)| all_passed(seen)))
    {
        tokio::time::sleep(args.poll).await;
    }
    poller.abort();
    let rss_growth_kib = own_rss_kib()? - rss_before;
    let through_proxy = match (proxy_poller, &proxy, proxy_rss_before) {
        (Some((seen, task)), Some((process, _)), Some(before)) => {
            task.abort();
            let after = memory_of(process.pid)?.rss_mib;
            let (lags, before_ready) = lags(&ready_at, &seen);
            Some(ThroughProxy {
                answered: lags.len() as u64,
                answered_before_ready: before_ready,
                lag: Latency::of(lags),
                poll_ms: args.proxy_poll.as_secs_f64() * 1e3,
                rss_before_mib: before,
                rss_after_mib: after,
                rss_kib_per_workspace: (after - before) * 1024.0 / ready_at.len().max(1) as f64,
            })
        }
        _ => None,
    };
    tracker.close().await;
    // A second index, started now that every workspace exists: a proxy's (re)start.
    let second = stop.child_token();
    let (resynced, resync) = ready_index(topology, args, second.clone()).await?;
    let resync_counts = resynced.counts();
    second.cancel();
    // Before the deletion empties it.
    let (counts, heap_bytes) = (index.counts(), index.heap_bytes());
    let deletion = match (args.delete_rate, &proxy) {
        (Some(rate), Some((_, proxy))) => {
            let mut ready: Vec<String> = ready_at.keys().cloned().collect();
            ready.sort();
            Some(deletion::measure(&client, proxy, &index, ready, rate, args).await?)
        }
        _ => None,
    };

    let (lags, before) = lags(&ready_at, &resolved);
    let resolved_at = lock(&resolved).clone();
    let from_create: Vec<Duration> = created
        .created
        .iter()
        .filter_map(|(name, due)| Some(resolved_at.get(name)?.saturating_duration_since(*due)))
        .collect();
    Ok(Measured {
        create: created.create,
        ready: ready_at.len() as u64,
        resolved: lags.len() as u64,
        resolved_before_ready: before,
        lag: Latency::of(lags),
        create_to_resolvable: Latency::of(from_create),
        counts,
        heap_bytes,
        rss_growth_kib,
        index_ready,
        resync,
        resync_counts,
        through_proxy,
        deletion,
    })
}

/// Starts an index on the topology as `kcp sharded` starts its front-proxy's, and waits until it
/// is ready; returns it and how long that took.
async fn ready_index(
    topology: &Topology,
    args: &IndexLagArgs,
    stop: CancellationToken,
) -> Result<(Arc<Index>, Duration), IndexLagError> {
    let started = Instant::now();
    let kubeconfig = topology.kubeconfig.with_file_name(ROOT_KUBECONFIG);
    let index = index::start(
        IndexSources {
            root_kubeconfig: kubeconfig.clone(),
            shards_kubeconfig: kubeconfig,
        },
        stop,
    )?;
    while !index.is_ready() {
        if started.elapsed() > args.index_timeout {
            return Err(IndexLagError::NotReady(args.index_timeout, index.counts()));
        }
        tokio::time::sleep(args.poll).await;
    }
    Ok((index, started.elapsed()))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When each workspace first passed a poller's check.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Every `every`, checks each workspace whose create is due (by the plan's rate, from now) and
/// that has not passed yet with `routable`; records when each first passes.
fn spawn_poller<F, Fut>(args: &IndexLagArgs, every: Duration, routable: F) -> (Seen, JoinHandle<()>)
where
    F: Fn(String) -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let seen: Seen = Arc::default();
    let (rate, count, began, record) = (args.rate, args.workspaces, Instant::now(), seen.clone());
    let task = tokio::spawn(async move {
        let mut pending: Vec<u64> = Vec::new();
        let mut next = 0;
        loop {
            let due = ((began.elapsed().as_secs_f64() * rate) as u64 + 1).min(count);
            pending.extend(next..due);
            next = next.max(due);
            let mut still = Vec::with_capacity(pending.len());
            for i in pending.drain(..) {
                let name = workspaces::name(i);
                if routable(format!("root:{name}")).await {
                    lock(&record).insert(name, Instant::now());
                } else {
                    still.push(i);
                }
            }
            pending = still;
            tokio::time::sleep(every).await;
        }
    });
    (seen, task)
}

/// Ready -> passed for each Ready workspace that passed (0 when it passed first), and how many
/// passed no later than Ready.
fn lags(ready_at: &HashMap<String, Instant>, seen: &Seen) -> (Vec<Duration>, u64) {
    let seen = lock(seen);
    let mut lags = Vec::new();
    let mut before = 0;
    for (name, ready) in ready_at {
        if let Some(at) = seen.get(name) {
            lags.push(at.saturating_duration_since(*ready));
            before += u64::from(at <= ready);
        }
    }
    (lags, before)
}

/// The front-proxy `kcp sharded` runs, and a client of it with the admin kubeconfig's
/// `front-proxy` context.
fn front_proxy(topology: &Topology) -> Result<Option<(Process, Arc<Client>)>, WorkspaceError> {
    let Some(process) = topology
        .summary
        .processes
        .iter()
        .find(|p| p.name == FRONT_PROXY)
    else {
        return Ok(None);
    };
    let target =
        Target::from_file(&topology.kubeconfig, Some(FRONT_PROXY))?.with_server(&process.url)?;
    let client = Client::new(target, Protocol::Http2, 2).map_err(LoadError::from)?;
    Ok(Some((process.clone(), Arc::new(client))))
}

fn ms(latency: &Option<Latency>, pick: fn(&Latency) -> f64) -> String {
    latency
        .as_ref()
        .map_or("-".to_owned(), |l| format!("{:.1}", pick(l)))
}

impl Table for IndexLagReport {
    fn table(&self) -> String {
        let line = |what: &str, l: &Option<Latency>| {
            format!(
                "{what}: p50 {} ms, p90 {} ms, p99 {} ms, max {} ms\n",
                ms(l, |l| l.p50_ms),
                ms(l, |l| l.p90_ms),
                ms(l, |l| l.p99_ms),
                ms(l, |l| l.max_ms)
            )
        };
        let mut out = format!(
            "kcp sharded: {} shards, ready in {:.0} ms; index ready in {:.0} ms; loadavg at start \
             {}, at the end {}\n",
            self.shards, self.startup_ms, self.index_ready_ms, self.loadavg_at_start, self.loadavg
        );
        out.push_str(&format!(
            "creates: {} of {} ok at {:.0}/s (p99 {} ms); Ready: {}; resolved: {} ({} no later \
             than Ready); poll every {:.0} ms\n",
            self.create.ok,
            self.workspaces,
            self.create.throughput,
            ms(&self.create.latency, |l| l.p99_ms),
            self.ready,
            self.resolved,
            self.resolved_before_ready,
            self.poll_ms
        ));
        out.push_str(&line("Ready -> resolvable", &self.lag));
        out.push_str(&line(
            "create due -> resolvable",
            &self.create_to_resolvable,
        ));
        out.push_str(&format!(
            "index: {} shards, {} logical clusters, {} workspaces; heap estimate {:.2} MiB = {:.0} \
             B per workspace; process RSS growth {:.2} KiB per workspace (upper bound)\n",
            self.counts.shards,
            self.counts.logical_clusters,
            self.counts.workspaces,
            self.index_heap_mib,
            self.index_heap_bytes_per_workspace,
            self.process_rss_kib_per_workspace
        ));
        out.push_str(&format!(
            "a second index started with every workspace there: ready in {:.0} ms with {} \
             workspaces\n",
            self.resync_ms, self.resync_workspaces
        ));
        if let Some(p) = &self.through_proxy {
            out.push_str(&format!(
                "through kcp front-proxy (GET every {:.0} ms until not 403): {} answered ({} no \
                 later than Ready); proxy RSS {:.1} -> {:.1} MiB = {:.2} KiB per workspace\n",
                p.poll_ms,
                p.answered,
                p.answered_before_ready,
                p.rss_before_mib,
                p.rss_after_mib,
                p.rss_kib_per_workspace
            ));
            out.push_str(&line("Ready -> answered through the proxy", &p.lag));
        }
        if let Some(d) = &self.deletion {
            out.push_str(&format!(
                "deletes: {} of {} ok at {:.0}/s (p99 {} ms); the proxy answered 403 for {}, the \
                 index stopped resolving {}\n",
                d.delete.ok,
                d.delete.requests,
                d.delete.throughput,
                ms(&d.delete.latency, |l| l.p99_ms),
                d.refused,
                d.unresolved
            ));
            out.push_str(&line("DELETE answered -> 403 through the proxy", &d.to_403));
            out.push_str(&line("DELETE answered -> unresolvable", &d.to_unresolvable));
            if let Some(r) = &d.deregistered {
                out.push_str(&format!(
                    "Shard {} deleted: {} of its {} workspaces refused by the proxy (answers {:?})\n",
                    r.shard, r.refused, r.workspaces, r.answers
                ));
                out.push_str(&line("Shard deleted -> refused", &r.to_refused));
            }
        }
        out.push_str(&self.stopped.line(1));
        out.push('\n');
        out
    }
}
