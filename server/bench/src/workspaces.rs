//! Workspace figures (issue 7): how fast one shard creates and deletes workspaces, and what an
//! empty workspace costs in memory.
//!
//! Upstream kcp measured 7.4–9.8 MiB per empty workspace, 8 workspaces/s and about an hour to
//! delete 10,000; issue 7 asks for 200/s with p99 create-to-Ready ≤ 250 ms, ≤ 100 KiB per empty
//! workspace and 10,000 deleted in ≤ 60 s. This command produces those figures on a server of its
//! own:
//!
//! - **Create.** N Workspaces `ws-00001`… of type `universal` (path `root`, named explicitly so
//!   each is an "empty workspace": namespaces `default` and `kube-system` and their defaults) are
//!   POSTed into `root` at a fixed open-loop rate, at most `--max-in-flight` at once over
//!   `--concurrency` HTTP/2 connections. A create succeeds on 201 only. Each workspace is timed
//!   from when its request was dispatched (its due time; a wait for an in-flight slot is counted)
//!   to the first event of one watch on root's Workspaces showing `status.phase: Ready`, so the
//!   figure covers scheduling, the LogicalCluster, its initialization and the status update — not
//!   just the write, and without polling every workspace (which would load the server as much as
//!   the creates do).
//! - **Memory.** `VmRSS` idle before the first create, after every workspace is Ready (and an idle
//!   pause), and after the deletion (after the idle pause and again 10 s after the last deletion);
//!   growth per workspace is (after creation − idle) / workspaces created.
//! - **Delete.** Every workspace that exists is DELETEd at `--delete-rate` (open loop), or with one
//!   DELETE of the collection (`--delete-collection`); a workspace counts as deleted when the watch
//!   reports its DELETED event, which the server sends once the LogicalCluster and its content are
//!   gone and the Workspace's finalizer is removed.
//!
//! - **Sharded** (`--shards N`, issue 19). `kcp sharded --shards N` instead of `kcp start`: the
//!   workspaces are still created in (and timed Ready through) root, whose Workspaces carry the
//!   phase mirrored from their shards; after the creation root's list says, by each `spec.URL`,
//!   how many landed on each shard. Memory is read for every process (each shard and the cache
//!   server); the report's totals are their sums, and a per-process section gives each one's
//!   readings and its growth per workspace it holds. Server CPU is that of all the processes.
//!
//! Every wait is bounded (`--drain`, `--ready-timeout`, `--delete-timeout`); what did not finish
//! in time is reported as missing, never asserted. The watch reconnects from the last
//! resourceVersion it saw if the server ends it early.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use kcp_apimachinery::duration::parse_or_seconds;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::{Client, ClientError, Protocol};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{LoadError, check, resource_version, to_bytes};
use crate::report::WorkspacesReport;
use crate::schedule::{self, Failure, Plan};
use crate::server::{self, Server, ServerArgs, ServerError};
use crate::shard_figures::{self, Stages};
use crate::sharded::{self, Reading, Topology};
use crate::stats::{Latency, PhaseReport, micros_per};
use crate::watchers::take_lines;

/// Root's Workspaces (below the server URL, without a cluster prefix).
const COLLECTION: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
/// Every workspace this command creates is named `ws-<number>`.
const PREFIX: &str = "ws-";
/// A create succeeds with this status only.
const CREATED: &[StatusCode] = &[StatusCode::CREATED];
/// A delete succeeds with either (202 while the finalizer is still on).
const ACCEPTED: &[StatusCode] = &[StatusCode::OK, StatusCode::ACCEPTED];
/// How often a progress line is logged.
const PROGRESS: Duration = Duration::from_secs(5);
/// How often the waits for Ready and DELETED look at what the watch has seen.
const POLL: Duration = Duration::from_millis(20);
/// The second memory reading after the deletion, counted from the last DELETED event.
const AFTER_DELETE: Duration = Duration::from_secs(10);

/// Options of the `workspaces` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct WorkspaceArgs {
    /// Workspaces to create (ws-00001 ...).
    #[arg(long, default_value_t = 10_000)]
    pub workspaces: u64,
    /// Workspace creates per second, scheduled on a clock (open loop).
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// Workspace deletes per second (open loop), unless --delete-collection.
    #[arg(long, default_value_t = 500.0)]
    pub delete_rate: f64,
    /// Delete every workspace with one DELETE of the collection instead.
    #[arg(long)]
    pub delete_collection: bool,
    /// The WorkspaceType of every workspace (`universal`: an empty workspace).
    #[arg(long, default_value = "universal")]
    pub workspace_type: String,
    /// The path of the WorkspaceType's workspace.
    #[arg(long, default_value = "root")]
    pub workspace_type_path: String,
    /// HTTP/2 connections for the creates and deletes (the watch has its own).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Creates (or deletes) in flight at once; later ones wait, and the wait counts.
    #[arg(long, default_value_t = 128)]
    pub max_in_flight: usize,
    /// How long requests may still run after the last one is due.
    #[arg(long, default_value = "30s", value_parser = parse_or_seconds)]
    pub drain: Duration,
    /// How long after the create phase every workspace may take to become Ready.
    #[arg(long, default_value = "60s", value_parser = parse_or_seconds)]
    pub ready_timeout: Duration,
    /// How long after the delete phase the last workspace may take to disappear.
    #[arg(long, default_value = "120s", value_parser = parse_or_seconds)]
    pub delete_timeout: Duration,
    /// Run `kcp sharded` with this many shards (2 or more) instead of `kcp start`.
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..))]
    pub shards: Option<u16>,
    /// Read memory once more this long after the last deletion (0: not at all). Deleted objects
    /// stay in the store's watch history until compaction (`--etcd-compaction-interval`, 5 min by
    /// default, compacting to one interval back): two intervals and a little show the memory once
    /// that history is gone too.
    #[arg(long, default_value = "0s", value_parser = parse_or_seconds)]
    pub history_settle: Duration,
}

/// Why the workspace figures could not be produced (failed workspaces are figures, not errors).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
}

/// How many workspaces reached a state (Ready, or gone) and how long it took them.
#[derive(Debug, Clone, Serialize)]
pub struct Settled {
    /// Workspaces that should have got there.
    pub expected: u64,
    /// Those the watch showed there in time.
    pub observed: u64,
    /// Dispatch of the workspace's request → the watch event; `None` without any.
    pub latency: Option<Latency>,
    /// Start of the phase → the last event seen.
    pub last_event_s: f64,
    /// `observed` per second of `last_event_s`.
    pub rate: f64,
    /// Server CPU time (all threads) over the phase and the wait, per observed workspace.
    pub server_cpu_ms_per_workspace: Option<f64>,
}

impl Settled {
    /// Matches each dispatch time (by name) with when the watch showed the name there.
    fn of(
        dispatched: &[(String, Instant)],
        seen: &HashMap<String, Instant>,
        began: Instant,
        cpu: Option<Duration>,
    ) -> Self {
        let mut latencies = Vec::with_capacity(dispatched.len());
        let mut last = began;
        for (name, sent) in dispatched {
            if let Some(&at) = seen.get(name) {
                latencies.push(at.saturating_duration_since(*sent));
                last = last.max(at);
            }
        }
        let observed = latencies.len() as u64;
        let last_event_s = last.saturating_duration_since(began).as_secs_f64();
        Self {
            expected: dispatched.len() as u64,
            observed,
            latency: Latency::of(latencies),
            last_event_s,
            rate: if last_event_s > 0.0 {
                observed as f64 / last_event_s
            } else {
                0.0
            },
            server_cpu_ms_per_workspace: cpu
                .filter(|_| observed > 0)
                .map(|cpu| cpu.as_secs_f64() * 1e3 / observed as f64),
        }
    }
}

/// Starts a server, creates the workspaces, deletes them, reads memory along the way.
pub async fn run(
    server: &ServerArgs,
    args: &WorkspaceArgs,
) -> Result<WorkspacesReport, WorkspaceError> {
    // Fail on a bad rate before starting anything.
    Plan::exactly(args.rate, args.workspaces).map_err(LoadError::from)?;
    Plan::exactly(args.delete_rate, args.workspaces).map_err(LoadError::from)?;
    let Some(shards) = args.shards else {
        let (mut report, startup, stopped) = Server::measured(server, async |started| {
            measure(Subject::Single(started), server, args).await
        })
        .await?;
        report.startup_ms = startup.as_secs_f64() * 1e3;
        report.stopped = Some(stopped);
        return Ok(report);
    };
    let topology = Topology::start(server, shards).await?;
    let measured = measure(Subject::Sharded(&topology), server, args).await;
    let startup = topology.startup;
    let stopped = topology.stop().await?;
    let mut report = measured?;
    report.startup_ms = startup.as_secs_f64() * 1e3;
    report.stopped = Some(stopped);
    Ok(report)
}

/// What is measured: one `kcp start`, or a `kcp sharded` topology.
#[derive(Clone, Copy)]
enum Subject<'a> {
    Single(&'a Server),
    Sharded(&'a Topology),
}

impl Subject<'_> {
    /// The server the workspaces are created in (root).
    fn target(self) -> Result<Target, KubeconfigError> {
        match self {
            Subject::Single(server) => Target::from_file(&server.kubeconfig, Some("base")),
            Subject::Sharded(topology) => Target::from_file(&topology.kubeconfig, Some("root")),
        }
    }

    fn pids(self) -> Vec<u32> {
        match self {
            Subject::Single(server) => vec![server.pid()],
            Subject::Sharded(topology) => topology.pids(),
        }
    }

    /// Every process's memory now.
    fn readings(self) -> Result<Vec<Reading>, ServerError> {
        match self {
            Subject::Single(server) => Ok(vec![Reading {
                name: "kcp".to_owned(),
                memory: server.memory()?,
            }]),
            Subject::Sharded(topology) => topology.memory(),
        }
    }
}

/// The shard holding each of our workspaces, from root's list (empty when it fails: the figure
/// is informative, the run goes on).
async fn placement(client: &Client, topology: &Topology) -> HashMap<String, String> {
    let listed = client
        .request(Method::GET, COLLECTION, None)
        .await
        .map_err(LoadError::from)
        .and_then(|reply| check("listing root's Workspaces", reply));
    let list = match listed {
        Ok(body) => serde_json::from_slice::<Value>(&body).unwrap_or_default(),
        Err(error) => {
            tracing::warn!(%error, "could not list the workspaces for their placement");
            Value::Null
        }
    };
    shard_figures::placement(&list, &topology.summary.processes, PREFIX)
}

/// Everything between start and stop.
async fn measure(
    subject: Subject<'_>,
    server: &ServerArgs,
    args: &WorkspaceArgs,
) -> Result<WorkspacesReport, WorkspaceError> {
    let loadavg_at_start = server::loadavg();
    let settle = Duration::from_secs(server.idle_seconds);
    let target = subject.target()?;
    let connections = args.concurrency.max(1);
    let client = Arc::new(Client::new(target, Protocol::Http2, connections)?);
    client.warm_up().await?;
    tokio::time::sleep(settle).await;
    let idle_readings = subject.readings()?;
    let idle = sharded::total(&idle_readings);
    let pids = subject.pids();
    let cpu_before_create = cpu_of(subject);

    let create_plan = Plan::exactly(args.rate, args.workspaces).map_err(LoadError::from)?;
    let delete_plan = Plan::exactly(args.delete_rate, args.workspaces).map_err(LoadError::from)?;
    // The watch outlives both phases and every wait, with a minute to spare.
    let watch_limit = create_plan.span()
        + delete_plan.span()
        + args.drain * 2
        + args.ready_timeout
        + args.delete_timeout
        + settle * 2
        + AFTER_DELETE
        + args.history_settle
        + Duration::from_secs(60);
    let tracker = Tracker::open(client.clone(), watch_limit).await?;

    let Created {
        create,
        ready,
        created,
        failure: create_failure,
    } = create_until_ready(&client, &tracker, &args.create_spec(), &pids).await?;
    let create_cpu: HashMap<String, Duration> = cpu_of(subject)
        .into_iter()
        .filter_map(|(name, after)| {
            let before = cpu_before_create.get(&name)?;
            Some((name, after.checked_sub(*before)?))
        })
        .collect();
    let ready_at = tracker.snapshot(State::Ready);
    let created_names: Vec<String> = created.iter().map(|(n, _)| n.clone()).collect();
    let placed = match subject {
        Subject::Single(_) => HashMap::new(),
        Subject::Sharded(topology) => placement(&client, topology).await,
    };
    tokio::time::sleep(settle).await;
    let after_create_readings = subject.readings()?;
    let after_create = sharded::total(&after_create_readings);
    let growth_kib_per_workspace =
        (after_create.rss_mib - idle.rss_mib) * 1024.0 / (created.len().max(1) as f64);

    // Delete every workspace that exists: the 201s, and any the watch saw whose create's answer
    // was lost.
    let mut existing: Vec<String> = created_names.clone();
    let known: HashSet<&String> = created_names.iter().collect();
    let mut extra: Vec<String> = tracker
        .snapshot(State::Added)
        .into_keys()
        .filter(|n| !known.contains(n))
        .collect();
    extra.sort_unstable();
    existing.extend(extra);
    tracing::info!(
        workspaces = existing.len(),
        collection = args.delete_collection,
        "delete phase starting"
    );
    let cpu_before = server::cpu_time_all(&pids);
    let began = Instant::now();
    let counters = Arc::new(Counters::default());
    let progress = spawn_progress("delete", began, counters.clone(), tracker.seen.clone());
    let in_flight = Arc::new(Semaphore::new(args.max_in_flight.max(1)));
    let (delete, dispatched) = if args.delete_collection {
        let plan = Plan::exactly(1.0, 1).map_err(LoadError::from)?;
        let run = schedule::drive(&plan, args.drain, |_| {
            let request = (Method::DELETE, COLLECTION.to_owned(), None);
            send(&client, &in_flight, &counters, request, ACCEPTED)
        })
        .await;
        let dispatched = existing.iter().map(|n| (n.clone(), began)).collect();
        (
            PhaseReport::of("delete (collection)", plan.rate(), &run),
            dispatched,
        )
    } else {
        let plan =
            Plan::exactly(args.delete_rate, existing.len() as u64).map_err(LoadError::from)?;
        let names = Arc::new(existing.clone());
        let run = schedule::drive(&plan, args.drain, |i| {
            let path = names
                .get(i as usize)
                .map(|n| format!("{COLLECTION}/{n}"))
                .unwrap_or_default();
            send(
                &client,
                &in_flight,
                &counters,
                (Method::DELETE, path, None),
                ACCEPTED,
            )
        })
        .await;
        // Even a delete whose answer was lost may have worked: wait for all of them.
        let dispatched = due_times(&existing, &plan, began);
        (
            PhaseReport::of("delete (DELETE -> 200/202)", plan.rate(), &run),
            dispatched,
        )
    };
    let names: Vec<String> = existing.clone();
    let gone_by = Instant::now() + args.delete_timeout;
    tracker.wait(&names, State::Deleted, gone_by).await;
    let cpu_delete = cpu_since(&pids, cpu_before);
    progress.abort();
    let delete_failure = counters.first_failure();
    let deleted = Settled::of(
        &dispatched,
        &tracker.snapshot(State::Deleted),
        began,
        cpu_delete,
    );
    tracing::info!(
        elapsed_s = began.elapsed().as_secs_f64(),
        deleted = deleted.observed,
        "delete phase done"
    );
    let last_deleted = began + Duration::from_secs_f64(deleted.last_event_s);
    tokio::time::sleep(settle).await;
    let after_delete_readings = subject.readings()?;
    tokio::time::sleep_until(last_deleted + AFTER_DELETE).await;
    let after_delete_10s_readings = subject.readings()?;
    let after_history = if args.history_settle.is_zero() {
        None
    } else {
        tokio::time::sleep_until(last_deleted + args.history_settle.max(AFTER_DELETE)).await;
        Some((
            args.history_settle.as_secs_f64(),
            sharded::total(&subject.readings()?),
        ))
    };
    let watch = tracker.close().await;
    let (shards, processes) = match subject {
        Subject::Single(_) => (None, Vec::new()),
        Subject::Sharded(topology) => {
            let stages = Stages {
                idle: &idle_readings,
                after_create: &after_create_readings,
                after_delete: &after_delete_readings,
                after_delete_10s: &after_delete_10s_readings,
            };
            let seen = shard_figures::Seen {
                placed: &placed,
                created: &created,
                ready: &ready_at,
                create_cpu: &create_cpu,
            };
            let figures = shard_figures::per_process(
                &topology.summary.processes,
                &topology.summary.shards,
                &seen,
                &stages,
            );
            (Some(topology.summary.shards.len()), figures)
        }
    };
    Ok(WorkspacesReport {
        backend: server.backend,
        workspaces: args.workspaces,
        workspace_type: format!("{}:{}", args.workspace_type_path, args.workspace_type),
        protocol: "HTTP/2",
        concurrency: connections,
        max_in_flight: args.max_in_flight.max(1),
        loadavg_at_start,
        loadavg: server::loadavg(),
        startup_ms: 0.0,
        idle,
        create,
        ready,
        after_create,
        growth_kib_per_workspace,
        delete,
        deleted,
        after_delete: sharded::total(&after_delete_readings),
        after_delete_10s: sharded::total(&after_delete_10s_readings),
        after_history,
        shards,
        unplaced: shard_figures::counts(&placed)
            .get(shard_figures::UNPLACED)
            .copied(),
        processes,
        watch,
        create_failure,
        delete_failure,
        stopped: None,
    })
}

/// How to create workspaces and wait until they are Ready (shared by `workspaces` and
/// `idle-watchers`).
#[derive(Debug, Clone)]
pub struct CreateSpec<'a> {
    pub workspaces: u64,
    /// Creates per second (open loop).
    pub rate: f64,
    pub workspace_type: &'a str,
    pub workspace_type_path: &'a str,
    pub max_in_flight: usize,
    pub drain: Duration,
    pub ready_timeout: Duration,
}

impl WorkspaceArgs {
    fn create_spec(&self) -> CreateSpec<'_> {
        CreateSpec {
            workspaces: self.workspaces,
            rate: self.rate,
            workspace_type: &self.workspace_type,
            workspace_type_path: &self.workspace_type_path,
            max_in_flight: self.max_in_flight,
            drain: self.drain,
            ready_timeout: self.ready_timeout,
        }
    }
}

/// What [`create_until_ready`] did.
pub struct Created {
    /// The creates themselves (due time -> 201), with server CPU per create up to Ready.
    pub create: PhaseReport,
    /// Created workspaces until the watch showed them Ready.
    pub ready: Settled,
    /// The workspaces that were created (201), each with its request's due time.
    pub created: Vec<(String, Instant)>,
    /// The first failed create, request and answer in full.
    pub failure: Option<String>,
}

impl Created {
    /// The created workspaces `tracker` has seen Ready, in creation order.
    pub fn ready_names(&self, tracker: &Tracker) -> Vec<String> {
        let ready = tracker.snapshot(State::Ready);
        self.created
            .iter()
            .filter(|(name, _)| ready.contains_key(name))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// POSTs `spec.workspaces` Workspaces `ws-00001`... into root at the rate and waits (up to
/// `spec.ready_timeout`) until `tracker` has seen each created one Ready; `pid` is the server's,
/// for its CPU time.
pub async fn create_until_ready(
    client: &Arc<Client>,
    tracker: &Tracker,
    spec: &CreateSpec<'_>,
    pids: &[u32],
) -> Result<Created, WorkspaceError> {
    let create_plan = Plan::exactly(spec.rate, spec.workspaces).map_err(LoadError::from)?;
    tracing::info!(
        workspaces = spec.workspaces,
        rate = spec.rate,
        "create phase starting"
    );
    let cpu_before = server::cpu_time_all(pids);
    let began = Instant::now();
    let counters = Arc::new(Counters::default());
    let progress = spawn_progress("create", began, counters.clone(), tracker.seen.clone());
    let in_flight = Arc::new(Semaphore::new(spec.max_in_flight.max(1)));
    let body = |name: &str| {
        to_bytes(&json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": name},
            "spec": {"type": {"name": spec.workspace_type, "path": spec.workspace_type_path}},
        }))
    };
    let create_run = schedule::drive(&create_plan, spec.drain, |i| {
        let request = (Method::POST, COLLECTION.to_owned(), Some(body(&name(i))));
        send(client, &in_flight, &counters, request, CREATED)
    })
    .await;
    let created: Vec<(String, Instant)> =
        due_times(&create_names(spec.workspaces), &create_plan, began)
            .into_iter()
            .zip(&create_run.samples)
            .filter(|(_, sample)| sample.result.is_ok())
            .map(|(due, _)| due)
            .collect();
    let created_names: Vec<String> = created.iter().map(|(n, _)| n.clone()).collect();
    let ready_by = Instant::now() + spec.ready_timeout;
    tracker.wait(&created_names, State::Ready, ready_by).await;
    let cpu_create = cpu_since(pids, cpu_before);
    explain_missing(client, &created_names, tracker).await;
    progress.abort();
    let mut create = PhaseReport::of("create (POST -> 201)", create_plan.rate(), &create_run);
    create.server_cpu_us_per_request = cpu_create.and_then(|cpu| micros_per(cpu, create.ok));
    let ready = Settled::of(&created, &tracker.snapshot(State::Ready), began, cpu_create);
    tracing::info!(
        elapsed_s = began.elapsed().as_secs_f64(),
        created = create.ok,
        ready = ready.observed,
        "create phase done"
    );
    Ok(Created {
        create,
        ready,
        created,
        failure: counters.first_failure(),
    })
}

/// Each process's CPU time now (those that cannot be read are left out).
fn cpu_of(subject: Subject<'_>) -> HashMap<String, Duration> {
    match subject {
        Subject::Single(_) => HashMap::new(),
        Subject::Sharded(topology) => topology
            .summary
            .processes
            .iter()
            .filter_map(|p| Some((p.name.clone(), server::cpu_time(p.pid)?)))
            .collect(),
    }
}

/// The name of the i-th workspace (from 0): `ws-00001`, ...
pub fn name(i: u64) -> String {
    format!("{PREFIX}{:05}", i + 1)
}

fn create_names(count: u64) -> Vec<String> {
    (0..count).map(name).collect()
}

/// Each name with the due time of its request (request `i` is `names[i]`) in a phase that began
/// at `began`.
fn due_times(names: &[String], plan: &Plan, began: Instant) -> Vec<(String, Instant)> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.clone(), began + plan.offset(i as u64)))
        .collect()
}

/// Server CPU time (every process of `pids`) since `before`.
fn cpu_since(pids: &[u32], before: Option<Duration>) -> Option<Duration> {
    server::cpu_time_all(pids)?.checked_sub(before?)
}

/// Requests of a phase so far, for the progress lines, and the first failure in full (a bug
/// report needs the request and the answer, not just the status).
#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl Counters {
    fn failed(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut first = self
            .first_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if first.is_none() {
            tracing::warn!(failure = %what, "first failed request");
            *first = Some(what);
        }
    }

    fn first_failure(&self) -> Option<String> {
        self.first_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One request of a phase: waits for an in-flight slot, sends, succeeds on one of `expected`.
fn send(
    client: &Arc<Client>,
    in_flight: &Arc<Semaphore>,
    counters: &Arc<Counters>,
    (method, path, body): (Method, String, Option<Bytes>),
    expected: &'static [StatusCode],
) -> impl Future<Output = Result<(), Failure>> + Send + 'static {
    let (client, in_flight, counters) = (client.clone(), in_flight.clone(), counters.clone());
    async move {
        let _slot = in_flight
            .acquire_owned()
            .await
            .map_err(|_| Failure::Transport("closed"))?;
        counters.sent.fetch_add(1, Ordering::Relaxed);
        match client.request(method.clone(), &path, body).await {
            Ok(reply) if expected.contains(&reply.status) => {
                counters.ok.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(reply) => {
                let text = String::from_utf8_lossy(&reply.body);
                counters.failed(format!("{method} {path} -> {}: {text}", reply.status));
                Err(Failure::Status(reply.status.as_u16()))
            }
            Err(error) => {
                counters.failed(format!("{method} {path} -> {error}"));
                Err(Failure::Transport(error.kind()))
            }
        }
    }
}

/// How many workspaces never seen Ready are looked up, so a run that misses some says whether
/// they are stuck (the store has them in another phase) or their Ready event was lost (the store
/// has them Ready).
const EXPLAIN_AT_MOST: usize = 20;

/// Logs, for the first workspaces the watch never showed Ready, what the server has stored.
async fn explain_missing(client: &Client, names: &[String], tracker: &Tracker) {
    let ready = tracker.snapshot(State::Ready);
    let added = tracker.snapshot(State::Added);
    let missing: Vec<&String> = names.iter().filter(|n| !ready.contains_key(*n)).collect();
    for name in missing.iter().take(EXPLAIN_AT_MOST) {
        let path = format!("{COLLECTION}/{name}");
        let stored = match client.request(Method::GET, &path, None).await {
            Ok(reply) => String::from_utf8_lossy(&reply.body).into_owned(),
            Err(error) => format!("GET failed: {error}"),
        };
        let object: Value = serde_json::from_str(&stored).unwrap_or(Value::Null);
        let field = |pointer: &str| object.pointer(pointer).cloned().unwrap_or(Value::Null);
        let (phase, cluster, conditions) = (
            field("/status/phase"),
            field("/spec/cluster"),
            field("/status/conditions"),
        );
        tracing::warn!(
            workspace = %name,
            watch_saw_it = added.contains_key(*name),
            %phase,
            %cluster,
            %conditions,
            "never seen Ready"
        );
    }
}

/// Logs a progress line every [`PROGRESS`] until aborted.
fn spawn_progress(
    phase: &'static str,
    began: Instant,
    counters: Arc<Counters>,
    seen: Arc<Mutex<Seen>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(began + PROGRESS, PROGRESS);
        loop {
            ticks.tick().await;
            let (ready, deleted) = {
                let seen = lock(&seen);
                (seen.ready.len(), seen.deleted.len())
            };
            tracing::info!(
                phase,
                elapsed_s = %format!("{:.1}", began.elapsed().as_secs_f64()),
                sent = counters.sent.load(Ordering::Relaxed),
                ok = counters.ok.load(Ordering::Relaxed),
                failed = counters.failed.load(Ordering::Relaxed),
                ready,
                deleted,
                "progress"
            );
        }
    })
}

/// What the watch reported about a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// It exists (any ADDED or MODIFIED event).
    Added,
    /// An event showed `status.phase: Ready`.
    Ready,
    /// Its DELETED event.
    Deleted,
}

/// When the watch first showed each workspace in each [`State`], and how the watch went.
#[derive(Default)]
struct Seen {
    added: HashMap<String, Instant>,
    ready: HashMap<String, Instant>,
    deleted: HashMap<String, Instant>,
    events: u64,
    reconnects: u64,
    /// Why the watch gave up before it was closed.
    ended: Option<String>,
}

impl Seen {
    fn of(&self, state: State) -> &HashMap<String, Instant> {
        match state {
            State::Added => &self.added,
            State::Ready => &self.ready,
            State::Deleted => &self.deleted,
        }
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How the watch on root's Workspaces went (a short or broken watch makes the figures suspect).
#[derive(Debug, Clone, Serialize)]
pub struct WatchSummary {
    pub events: u64,
    /// Times the server ended the stream and it was reopened from the last resourceVersion.
    pub reconnects: u64,
    /// Why it gave up early, if it did (then later events are missing from the figures).
    pub ended_early: Option<String>,
}

/// The one watch on root's Workspaces, read by a task of its own.
pub struct Tracker {
    seen: Arc<Mutex<Seen>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Tracker {
    /// Lists root's Workspaces for a revision and watches from there for at most `limit`.
    pub async fn open(client: Arc<Client>, limit: Duration) -> Result<Self, LoadError> {
        let list = client
            .request(Method::GET, &format!("{COLLECTION}?limit=1"), None)
            .await?;
        let list = check("listing root's Workspaces before the watch", list)?;
        let revision = resource_version(&list).ok_or(LoadError::NoResourceVersion)?;
        let deadline = Instant::now() + limit;
        let response = open_stream(&client, &revision, limit).await?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(follow(
            client,
            response,
            revision,
            deadline,
            seen.clone(),
            stop_rx,
        ));
        Ok(Self { seen, stop, task })
    }

    fn snapshot(&self, state: State) -> HashMap<String, Instant> {
        lock(&self.seen).of(state).clone()
    }

    /// When the watch first showed each workspace Ready.
    pub fn ready_times(&self) -> HashMap<String, Instant> {
        self.snapshot(State::Ready)
    }

    /// Waits until the watch has shown every one of `names` in `state`, the deadline passes or
    /// the watch gives up.
    async fn wait(&self, names: &[String], state: State, deadline: Instant) {
        loop {
            let done = {
                let seen = lock(&self.seen);
                let map = seen.of(state);
                names.iter().all(|name| map.contains_key(name))
            };
            if done || self.task.is_finished() {
                return;
            }
            if Instant::now() >= deadline {
                tracing::warn!(?state, "deadline passed; the rest counts as missing");
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    pub async fn close(self) -> WatchSummary {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let seen = lock(&self.seen);
        WatchSummary {
            events: seen.events,
            reconnects: seen.reconnects,
            ended_early: seen.ended.clone(),
        }
    }
}

/// Starts a watch of root's Workspaces from `revision`; fails unless the server answers 200.
async fn open_stream(
    client: &Client,
    revision: &str,
    limit: Duration,
) -> Result<http::Response<hyper::body::Incoming>, LoadError> {
    let path = format!(
        "{COLLECTION}?watch=true&resourceVersion={revision}&allowWatchBookmarks=true&timeoutSeconds={}",
        limit.as_secs() + 1
    );
    let response = client.stream(&path).await?;
    if response.status() == StatusCode::OK {
        return Ok(response);
    }
    let status = response.status();
    let body = response.into_body().collect().await.map(|b| b.to_bytes());
    Err(LoadError::Unexpected {
        what: format!("opening a watch on {COLLECTION}"),
        status,
        body: String::from_utf8_lossy(&body.unwrap_or_default()).into_owned(),
    })
}

/// Reads the watch until told to stop, recording what each event shows; reopens it from the last
/// revision when the server ends it before the deadline.
async fn follow(
    client: Arc<Client>,
    mut response: http::Response<hyper::body::Incoming>,
    mut revision: String,
    deadline: Instant,
    seen: Arc<Mutex<Seen>>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let mut body = response.into_body();
        let mut buffer: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::select! {
                frame = body.frame() => frame,
                _ = stop.changed() => return,
            };
            let Some(Ok(frame)) = frame else { break };
            let arrived = Instant::now();
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            let lines = take_lines(&mut buffer);
            let mut seen = lock(&seen);
            for line in lines {
                let Some(event) = observe(&line) else {
                    continue;
                };
                seen.events += 1;
                if let Some(rv) = event.revision {
                    revision = rv;
                }
                match event.what {
                    What::Error(message) => {
                        seen.ended = Some(message);
                        return;
                    }
                    What::Exists { name, ready } => {
                        if ready {
                            seen.ready.entry(name.clone()).or_insert(arrived);
                        }
                        seen.added.entry(name).or_insert(arrived);
                    }
                    What::Deleted(name) => {
                        seen.deleted.entry(name).or_insert(arrived);
                    }
                    What::Other => {}
                }
            }
        }
        let now = Instant::now();
        if *stop.borrow() || now >= deadline {
            return;
        }
        lock(&seen).reconnects += 1;
        tracing::info!(%revision, "the server ended the watch; reopening it");
        match open_stream(&client, &revision, deadline - now).await {
            Ok(next) => response = next,
            Err(error) => {
                lock(&seen).ended = Some(error.to_string());
                return;
            }
        }
    }
}

/// The parts of a watch event this command reads (a Workspace, or a Status for ERROR).
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    object: EventObject,
}

#[derive(Deserialize, Default)]
struct EventObject {
    #[serde(default)]
    metadata: EventMetadata,
    /// An object for a Workspace, a string for a Status.
    #[serde(default)]
    status: serde_json::Value,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Default)]
struct EventMetadata {
    name: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// What one watch event means here.
#[derive(Debug, PartialEq)]
struct Observed {
    revision: Option<String>,
    what: What,
}

#[derive(Debug, PartialEq)]
enum What {
    /// One of ours exists (ADDED or MODIFIED), and whether its phase is Ready.
    Exists {
        name: String,
        ready: bool,
    },
    Deleted(String),
    /// An ERROR event (e.g. 410 Gone): the watch cannot go on.
    Error(String),
    /// A bookmark, or a workspace this command did not create.
    Other,
}

/// Reads one line of a watch stream; `None` if it is not a JSON event.
fn observe(line: &[u8]) -> Option<Observed> {
    let event: Event = serde_json::from_slice(line).ok()?;
    let object = event.object;
    let ours = object.metadata.name.filter(|name| name.starts_with(PREFIX));
    let what = match (event.kind.as_str(), ours) {
        ("ERROR", _) => What::Error(
            object
                .message
                .unwrap_or_else(|| "an ERROR event".to_owned()),
        ),
        ("ADDED" | "MODIFIED", Some(name)) => What::Exists {
            name,
            ready: object.status.get("phase").and_then(|p| p.as_str()) == Some("Ready"),
        },
        ("DELETED", Some(name)) => What::Deleted(name),
        _ => What::Other,
    };
    Some(Observed {
        revision: object.metadata.resource_version,
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_from_one() {
        assert_eq!(name(0), "ws-00001");
        assert_eq!(name(9_999), "ws-10000");
        assert_eq!(create_names(2), vec!["ws-00001", "ws-00002"]);
    }

    #[test]
    fn events() {
        let line = |kind: &str, name: &str, phase: &str| {
            json!({"type": kind, "object": {"kind": "Workspace",
                "metadata": {"name": name, "resourceVersion": "12"},
                "status": {"phase": phase}}})
            .to_string()
        };
        let exists = |ready| What::Exists {
            name: "ws-00001".into(),
            ready,
        };
        let what = |l: String| observe(l.as_bytes()).map(|o| o.what);
        assert_eq!(
            observe(line("ADDED", "ws-00001", "Scheduling").as_bytes()),
            Some(Observed {
                revision: Some("12".into()),
                what: exists(false)
            })
        );
        assert_eq!(
            what(line("MODIFIED", "ws-00001", "Ready")),
            Some(exists(true))
        );
        assert_eq!(
            what(line("DELETED", "ws-00001", "Ready")),
            Some(What::Deleted("ws-00001".into()))
        );
        assert_eq!(what(line("MODIFIED", "other", "Ready")), Some(What::Other));
        let bookmark = json!({"type": "BOOKMARK", "object": {"kind": "Workspace",
            "metadata": {"resourceVersion": "99"}}});
        assert_eq!(
            observe(bookmark.to_string().as_bytes()),
            Some(Observed {
                revision: Some("99".into()),
                what: What::Other
            })
        );
        let gone = json!({"type": "ERROR", "object": {"kind": "Status", "status": "Failure",
            "message": "too old resource version", "code": 410}});
        assert_eq!(
            what(gone.to_string()),
            Some(What::Error("too old resource version".into()))
        );
        assert_eq!(observe(b"not json"), None);
    }

    #[test]
    fn settled_matches_by_name() {
        let began = Instant::now();
        let at = |ms| began + Duration::from_millis(ms);
        let dispatched = vec![
            ("a".to_owned(), at(0)),
            ("b".to_owned(), at(10)),
            ("c".to_owned(), at(20)),
        ];
        let seen = HashMap::from([
            ("a".to_owned(), at(100)),
            ("b".to_owned(), at(2_000)),
            ("z".to_owned(), at(5_000)),
        ]);
        let settled = Settled::of(&dispatched, &seen, began, Some(Duration::from_millis(50)));
        assert_eq!((settled.expected, settled.observed), (3, 2));
        assert_eq!(settled.last_event_s, 2.0);
        assert_eq!(settled.rate, 1.0);
        assert_eq!(settled.server_cpu_ms_per_workspace, Some(25.0));
        let latency = settled.latency.unwrap();
        assert_eq!((latency.p50_ms, latency.max_ms), (100.0, 1_990.0));
    }

    #[test]
    fn due_times_follow_the_plan() {
        let began = Instant::now();
        let plan = Plan::exactly(100.0, 3).unwrap();
        let due = due_times(&create_names(3), &plan, began);
        assert_eq!(
            due[2],
            ("ws-00003".to_owned(), began + Duration::from_millis(20))
        );
    }
}
