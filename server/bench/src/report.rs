//! Rendering results: an aligned text table for people, JSON (`--output json`) for scripts.

use std::fmt::Write;

use serde::Serialize;

use crate::admission::AdmissionReport;
use crate::authz;
use crate::crds::MemoryRow;
use crate::front_proxy::FrontProxyReport;
use crate::idle_watchers::Delivery;
use crate::server::{Backend, Memory, Stopped};
use crate::shard_figures::ProcessFigures;
use crate::stats::PhaseReport;
use crate::type_replication::TypeReplicationReport;
use crate::workspaces::{Settled, WatchSummary};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// What `load` and `run` print.
#[derive(Debug, Serialize)]
pub struct LoadReport {
    pub protocol: &'static str,
    pub concurrency: usize,
    /// /proc/loadavg (1, 5, 15 min) at the end: other work on the machine skews latency.
    pub loadavg: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerReport>,
    pub phases: Vec<PhaseReport>,
}

/// The server `run` started: how fast it came up and how much memory it used.
#[derive(Debug, Serialize)]
pub struct ServerReport {
    pub backend: Backend,
    pub startup_ms: f64,
    pub idle: Memory,
    pub after_load: Option<Memory>,
    pub after_cleanup: Option<Memory>,
    pub stopped: Option<Stopped>,
}

/// One `startup` run.
#[derive(Debug, Serialize)]
pub struct StartupRun {
    pub startup_ms: f64,
    pub idle: Memory,
    pub stopped: Stopped,
}

/// What `startup` prints.
#[derive(Debug, Serialize)]
pub struct StartupReport {
    pub backend: Backend,
    pub idle_seconds: u64,
    pub runs: Vec<StartupRun>,
}

/// What `crds` prints: the phases on one server (time to Established, custom resource load) and
/// the memory scenarios, each on a fresh server.
#[derive(Debug, Serialize)]
pub struct CrdsReport {
    pub load: LoadReport,
    pub memory: Vec<MemoryRow>,
}

/// What `authz` prints: the phases (admin, `bench-user` allowed, `bench-user` refused) on a server
/// holding the policy, the overhead derived from them, and the index rebuild samples.
#[derive(Debug, Serialize)]
pub struct AuthzReport {
    pub load: LoadReport,
    pub policy: PolicySetup,
    pub overhead: Overhead,
    pub rebuilds: Rebuilds,
}

/// The RBAC objects `authz` created in logical cluster `root`.
#[derive(Debug, Serialize)]
pub struct PolicySetup {
    pub roles: u64,
    pub bindings: u64,
    pub namespaces: u64,
    /// Bindings naming `bench-group` (besides `bench-user`'s own RoleBinding).
    pub group_bindings: u64,
    /// Creating the namespaces, the two ConfigMaps, the roles and the bindings.
    pub setup_s: f64,
}

/// The authorization overhead per request: `bench-user` (RBAC evaluated) minus the admin
/// (`system:masters`, allowed before RBAC), for the same GET.
#[derive(Debug, Default, Serialize)]
pub struct Overhead {
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Server CPU time per request, which queueing on a busy machine does not inflate.
    pub server_cpu_us: Option<f64>,
}

impl Overhead {
    /// `measured` minus the mean of `before` and `after` (phases without what is measured).
    pub fn against_mean(before: &PhaseReport, after: &PhaseReport, measured: &PhaseReport) -> Self {
        let mean = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a + b) / 2.0);
        let diff = |base: Option<f64>, m: Option<f64>| base.zip(m).map(|(b, m)| m - b);
        let (b, a, m) = (before.latency, after.latency, measured.latency);
        Self {
            p50_ms: diff(
                mean(b.map(|l| l.p50_ms), a.map(|l| l.p50_ms)),
                m.map(|l| l.p50_ms),
            ),
            p99_ms: diff(
                mean(b.map(|l| l.p99_ms), a.map(|l| l.p99_ms)),
                m.map(|l| l.p99_ms),
            ),
            server_cpu_us: diff(
                mean(
                    before.server_cpu_us_per_request,
                    after.server_cpu_us_per_request,
                ),
                measured.server_cpu_us_per_request,
            ),
        }
    }

    pub fn of(admin: &PhaseReport, user: &PhaseReport) -> Self {
        let diff = |a: Option<f64>, u: Option<f64>| a.zip(u).map(|(a, u)| u - a);
        let (a, u) = (admin.latency, user.latency);
        Self {
            p50_ms: diff(a.map(|l| l.p50_ms), u.map(|l| l.p50_ms)),
            p99_ms: diff(a.map(|l| l.p99_ms), u.map(|l| l.p99_ms)),
            server_cpu_us: diff(
                admin.server_cpu_us_per_request,
                user.server_cpu_us_per_request,
            ),
        }
    }
}

/// The first `bench-user` request after each policy change (it rebuilds the cluster's index) and,
/// for comparison, one against the rebuilt index; milliseconds, one request at a time.
#[derive(Debug, Default, Serialize)]
pub struct Rebuilds {
    pub first_ms: Vec<f64>,
    pub cached_ms: Vec<f64>,
}

/// What `workspaces` prints: creation to Ready, memory per workspace, deletion and the memory
/// left afterwards, on one server.
#[derive(Debug, Serialize)]
pub struct WorkspacesReport {
    pub backend: Backend,
    /// Workspaces asked for.
    pub workspaces: u64,
    /// `<path>:<name>` of their WorkspaceType.
    pub workspace_type: String,
    pub protocol: &'static str,
    pub concurrency: usize,
    pub max_in_flight: usize,
    /// /proc/loadavg (1, 5, 15 min) when the server was ready, before the first create.
    pub loadavg_at_start: String,
    /// /proc/loadavg (1, 5, 15 min) at the end: other work on the machine skews latency.
    pub loadavg: String,
    pub startup_ms: f64,
    /// Memory figures are the sums over every process of a sharded topology.
    pub idle: Memory,
    /// The creates themselves (due time -> 201).
    pub create: PhaseReport,
    /// Created workspaces until the watch showed them Ready.
    pub ready: Settled,
    /// After every workspace was Ready (or the deadline) and an idle pause.
    pub after_create: Memory,
    /// (after_create - idle) / workspaces created.
    pub growth_kib_per_workspace: f64,
    /// The deletes themselves (due time -> 200/202), or the one deletecollection.
    pub delete: PhaseReport,
    /// Deleted workspaces until the watch reported them DELETED.
    pub deleted: Settled,
    /// An idle pause after the last DELETED event.
    pub after_delete: Memory,
    /// 10 s after the last DELETED event.
    pub after_delete_10s: Memory,
    /// `--history-settle` after the last DELETED event (seconds, memory), when asked for.
    pub after_history: Option<(f64, Memory)>,
    /// Shards of a `kcp sharded` run (root included); `None` for one `kcp start`.
    pub shards: Option<usize>,
    /// Workspaces root listed after the creation whose `spec.URL` named no shard.
    pub unplaced: Option<u64>,
    /// Every process of a sharded run (empty for one `kcp start`).
    pub processes: Vec<ProcessFigures>,
    pub watch: WatchSummary,
    /// The first failed create and delete, request and answer in full.
    pub create_failure: Option<String>,
    pub delete_failure: Option<String>,
    pub stopped: Option<Stopped>,
}

/// What `idle-watchers` prints: memory and CPU of one mostly idle watcher per workspace, and
/// whether writes reach exactly their own workspace's watcher.
#[derive(Debug, Serialize)]
pub struct IdleWatchersReport {
    pub backend: Backend,
    /// Workspaces asked for.
    pub workspaces: u64,
    /// Those that became Ready (each gets a watcher).
    pub ready_workspaces: u64,
    /// `<path>:<name>` of their WorkspaceType.
    pub workspace_type: String,
    /// HTTP/2 connections the watches share.
    pub connections: usize,
    /// /proc/loadavg (1, 5, 15 min) at the end.
    pub loadavg: String,
    pub startup_ms: f64,
    /// Before the first workspace.
    pub idle: Memory,
    pub create: PhaseReport,
    pub ready: Settled,
    pub create_failure: Option<String>,
    /// How the watch on root's Workspaces (waiting for Ready) went.
    pub tracker: WatchSummary,
    /// One informer list per workspace.
    pub list: PhaseReport,
    /// After the lists and an idle pause, before any watcher.
    pub before_watchers: Memory,
    /// Watches opened (one per workspace whose list answered).
    pub watchers: usize,
    /// Seconds to open them all (one after the other, each until its headers).
    pub open_s: f64,
    /// An idle pause after opening them.
    pub after_open: Memory,
    /// Seconds every watcher stayed open with nothing written.
    pub idle_s: f64,
    /// At the end of that period.
    pub after_idle: Memory,
    /// (after_idle - before_watchers) / watchers.
    pub kib_per_watcher: f64,
    /// Server CPU per second of an idle period as long as `idle_s` before the watchers
    /// (workspaces alone).
    pub cpu_ms_per_s_without_watchers: Option<f64>,
    /// Server CPU per second of the idle period with every watcher open.
    pub cpu_ms_per_s_with_watchers: Option<f64>,
    /// The probe ConfigMap creates.
    pub writes: PhaseReport,
    pub delivery: Delivery,
    /// An idle pause after every watch was closed.
    pub after_close: Memory,
    /// (after_close - before_watchers) / watchers: what closed watchers left behind.
    pub kib_per_watcher_after_close: f64,
    pub stopped: Option<Stopped>,
}

/// Serialises `value` as pretty JSON, or renders it as a table.
pub fn render<T: Serialize + Table>(
    value: &T,
    output: Output,
) -> Result<String, serde_json::Error> {
    match output {
        Output::Json => serde_json::to_string_pretty(value),
        Output::Table => Ok(value.table()),
    }
}

/// A human-readable rendering.
pub trait Table {
    fn table(&self) -> String;
}

fn ms(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.2}"))
}

fn memory(m: &Memory) -> String {
    format!("{:.1} MiB (peak {:.1} MiB)", m.rss_mib, m.peak_rss_mib)
}

/// The column titles of [`request_row`].
fn request_header() -> Vec<String> {
    [
        "phase",
        "requests",
        "ok",
        "errors",
        "rate/s",
        "achieved/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "lag p99 ms",
    ]
    .map(String::from)
    .to_vec()
}

/// A phase of requests as table cells: counts, errors by cause, rates, latency, dispatch lag.
fn request_row(phase: &PhaseReport) -> Vec<String> {
    let errors = if phase.errors.is_empty() {
        "-".to_owned()
    } else {
        phase
            .errors
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let latency = phase.latency;
    vec![
        phase.phase.clone(),
        phase.requests.to_string(),
        phase.ok.to_string(),
        errors,
        format!("{:.0}", phase.target_rate),
        format!("{:.1}", phase.throughput),
        ms(latency.map(|l| l.p50_ms)),
        ms(latency.map(|l| l.p90_ms)),
        ms(latency.map(|l| l.p99_ms)),
        ms(latency.map(|l| l.max_ms)),
        format!("{:.2}", phase.dispatch_lag_p99_ms),
    ]
}

/// Left-aligned first column, right-aligned others, two spaces apart.
fn grid(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, width))| {
                if c == 0 {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

impl Table for LoadReport {
    fn table(&self) -> String {
        let mut out = String::new();
        if let Some(server) = &self.server {
            let _ = writeln!(out, "server: {:?} backend", server.backend);
            let _ = writeln!(out, "  start to /readyz: {:.1} ms", server.startup_ms);
            let _ = writeln!(out, "  idle:             {}", memory(&server.idle));
            for (label, m) in [
                ("after load", &server.after_load),
                ("after cleanup", &server.after_cleanup),
            ] {
                if let Some(m) = m {
                    let _ = writeln!(out, "  {:<17} {}", format!("{label}:"), memory(m));
                }
            }
            if let Some(stopped) = &server.stopped {
                let _ = writeln!(out, "  {}", stopped.line(2));
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{} x {} connections; load average at the end: {}",
            self.protocol, self.concurrency, self.loadavg
        );
        let mut header = request_header();
        header.extend(["server CPU us/req", "us/event"].map(String::from));
        let mut rows = vec![header];
        for phase in &self.phases {
            let mut row = request_row(phase);
            row.push(
                phase
                    .server_cpu_us_per_request
                    .map_or("-".into(), |us| format!("{us:.0}")),
            );
            row.push(
                phase
                    .watch
                    .as_ref()
                    .and_then(|w| w.server_cpu_us_per_event)
                    .map_or("-".into(), |us| format!("{us:.1}")),
            );
            rows.push(row);
        }
        out.push_str(&grid(&rows));
        out.push_str(
            "latency: due time -> response read (open loop); lag: due time -> request sent; \
             us/event: server CPU per delivered event (per event per watcher, writes included)\n",
        );
        for phase in &self.phases {
            if let Some(watch) = &phase.watch {
                let write = watch.write_latency;
                let _ = writeln!(
                    out,
                    "{}: {} watchers, {}/{} events delivered ({} before the write's response); \
                     latency above is write ack -> event; the writes themselves: p50 {} ms, p99 {} ms; \
                     server CPU {} us per delivered event net of the writes (create phase's cost \
                     per write taken off); client CPU {} us per delivered event",
                    phase.phase,
                    watch.watchers,
                    watch.delivered_events,
                    watch.expected_events,
                    watch.before_ack,
                    ms(write.map(|l| l.p50_ms)),
                    ms(write.map(|l| l.p99_ms)),
                    watch
                        .server_cpu_us_per_event_net
                        .map_or("-".into(), |us| format!("{us:.1}")),
                    watch
                        .client_cpu_us_per_event
                        .map_or("-".into(), |us| format!("{us:.1}")),
                );
            }
        }
        out
    }
}

impl Table for CrdsReport {
    fn table(&self) -> String {
        let mut out = self.load.table();
        if self.memory.is_empty() {
            return out;
        }
        let mut rows = vec![
            [
                "CRDs",
                "K",
                "M",
                "idle MiB",
                "M namespaces MiB",
                "+ K*M CRDs MiB",
                "+ OpenAPI MiB",
                "KiB/empty cluster",
                "KiB/CRD/cluster",
                "KiB/cluster",
                "OpenAPI KiB/cluster",
                "install s",
                "Established p50 ms",
                "p99 ms",
                "server CPU us/CRD",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for row in &self.memory {
            let mib = |m: &Memory| format!("{:.1}", m.rss_mib);
            let costs = row.costs;
            let latency = row.established.latency;
            rows.push(vec![
                format!("{:?}", row.sharing).to_lowercase(),
                row.crds_per_cluster.to_string(),
                row.clusters.to_string(),
                mib(&row.idle),
                mib(&row.empty_clusters),
                mib(&row.with_crds),
                row.with_openapi.as_ref().map_or("-".into(), mib),
                format!("{:.0}", costs.per_empty_cluster_kib),
                format!("{:.0}", costs.per_crd_per_cluster_kib),
                format!("{:.0}", costs.crds_per_cluster_kib),
                costs
                    .openapi_per_cluster_kib
                    .map_or("-".into(), |k| format!("{k:.0}")),
                format!("{:.1}", row.install_s),
                ms(latency.map(|l| l.p50_ms)),
                ms(latency.map(|l| l.p99_ms)),
                row.established
                    .server_cpu_us_per_request
                    .map_or("-".into(), |us| format!("{us:.0}")),
            ]);
        }
        out.push_str("\nmemory (fresh server per row; RSS after each step and an idle pause):\n");
        out.push_str(&grid(&rows));
        out
    }
}

impl Table for AuthzReport {
    fn table(&self) -> String {
        let mut out = self.load.table();
        let policy = &self.policy;
        let _ = writeln!(
            out,
            "\npolicy in root: {} roles, {} bindings over {} namespaces ({} naming bench-group), \
             created in {:.1} s",
            policy.roles, policy.bindings, policy.namespaces, policy.group_bindings, policy.setup_s
        );
        let overhead = &self.overhead;
        let _ = writeln!(
            out,
            "authorization overhead per request (bench-user - admin): p99 {} ms, p50 {} ms, \
             server CPU {} us",
            ms(overhead.p99_ms),
            ms(overhead.p50_ms),
            overhead
                .server_cpu_us
                .map_or("-".into(), |us| format!("{us:.0}"))
        );
        let samples = |values: &[f64]| {
            values
                .iter()
                .map(|v| format!("{v:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rebuilds = &self.rebuilds;
        let _ = writeln!(
            out,
            "index rebuild (first bench-user GET after a new RoleBinding): median {} ms [{}]",
            ms(authz::median(&rebuilds.first_ms)),
            samples(&rebuilds.first_ms)
        );
        let _ = writeln!(
            out,
            "  the same GET with the index built:                        median {} ms [{}]",
            ms(authz::median(&rebuilds.cached_ms)),
            samples(&rebuilds.cached_ms)
        );
        out
    }
}

impl Table for AdmissionReport {
    fn table(&self) -> String {
        let mut out = self.load.table();
        let cpu = |overhead: &Overhead| {
            overhead
                .server_cpu_us
                .map_or("-".into(), |us| format!("{us:.0}"))
        };
        let _ = writeln!(
            out,
            "\nvalidating webhook, added per create (less its own {} us per review, {} reviews): \
             p50 {} ms, p99 {} ms, server CPU {} us",
            self.webhook_handler_us
                .map_or("-".into(), |us| format!("{us:.1}")),
            self.webhook_reviews,
            ms(self.webhook.p50_ms),
            ms(self.webhook.p99_ms),
            cpu(&self.webhook)
        );
        let _ = writeln!(
            out,
            "ValidatingAdmissionPolicy (3 CEL rules), added per create: p50 {} ms, p99 {} ms, \
             server CPU {} us",
            ms(self.policy.p50_ms),
            ms(self.policy.p99_ms),
            cpu(&self.policy)
        );
        out
    }
}

impl Table for FrontProxyReport {
    fn table(&self) -> String {
        let mut out = format!(
            "kcp sharded --shards=1 ready in {:.0} ms; loadavg at start {}, at the end {}\n\n",
            self.startup_ms, self.loadavg_at_start, self.loadavg
        );
        for (title, phases) in [
            (
                "straight at the root shard (server CPU: the shard's)",
                &self.direct,
            ),
            (
                "through the front-proxy (server CPU: the proxy's)",
                &self.proxied,
            ),
        ] {
            let _ = writeln!(out, "{title}:");
            let mut rows = vec![request_header()];
            rows.extend(phases.iter().map(request_row));
            out.push_str(&grid(&rows));
            out.push('\n');
        }
        for c in &self.comparisons {
            let _ = writeln!(
                out,
                "{}: added p50 {} ms, added p99 {} ms, proxy CPU {} µs per request",
                c.phase,
                ms(c.added_p50_ms),
                ms(c.added_p99_ms),
                c.proxy_cpu_us_per_request
                    .map_or("-".into(), |us| format!("{us:.0}"))
            );
        }
        let _ = writeln!(out, "{}", self.stopped.line(1));
        out
    }
}

impl Table for TypeReplicationReport {
    fn table(&self) -> String {
        let mut out = format!(
            "kcp sharded: {} shards, ready in {:.0} ms; cache {}; loadavg at start {}, at the end {}\n\n",
            self.shards, self.startup_ms, self.cache_url, self.loadavg_at_start, self.loadavg
        );
        out.push_str(&grid(&[request_header(), request_row(&self.writes)]));
        let v = &self.visibility;
        let lag = v.lag;
        let _ = writeln!(
            out,
            "\nwrite response on root -> visible in the cache's watch (what each shard's read-back \
             receives), {} acknowledged changes:\n  p50 {} ms, p90 {} ms, p99 {} ms, max {} ms; \
             seen {} ({} before the write's response), not seen within {:.1} s: {}; \
             {} arrived as an event of their own",
            v.acknowledged,
            ms(lag.map(|l| l.p50_ms)),
            ms(lag.map(|l| l.p90_ms)),
            ms(lag.map(|l| l.p99_ms)),
            ms(lag.map(|l| l.max_ms)),
            v.seen,
            v.before_ack,
            self.timeout_s,
            v.not_seen_within_timeout,
            v.own_events
        );
        let _ = writeln!(out, "{}", self.stopped.line(1));
        out
    }
}

impl Table for WorkspacesReport {
    fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "server: {:?} backend{}, start to /readyz {:.1} ms; {} workspaces of type {}; {} x {} \
             connections, {} in flight; load average at the start: {}, at the end: {}",
            self.backend,
            self.shards
                .map_or(String::new(), |n| format!(", kcp sharded with {n} shards")),
            self.startup_ms,
            self.workspaces,
            self.workspace_type,
            self.protocol,
            self.concurrency,
            self.max_in_flight,
            self.loadavg_at_start,
            self.loadavg
        );
        let mut rows = vec![request_header()];
        for phase in [&self.create, &self.delete] {
            rows.push(request_row(phase));
        }
        out.push_str(&grid(&rows));
        let mut rows = vec![
            [
                "watch shows",
                "expected",
                "seen",
                "missing",
                "per s",
                "last at s",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "max ms",
                "server CPU ms/ws",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for (label, settled) in [("Ready", &self.ready), ("DELETED", &self.deleted)] {
            let latency = settled.latency;
            rows.push(vec![
                label.to_owned(),
                settled.expected.to_string(),
                settled.observed.to_string(),
                settled
                    .expected
                    .saturating_sub(settled.observed)
                    .to_string(),
                format!("{:.1}", settled.rate),
                format!("{:.1}", settled.last_event_s),
                ms(latency.map(|l| l.p50_ms)),
                ms(latency.map(|l| l.p90_ms)),
                ms(latency.map(|l| l.p99_ms)),
                ms(latency.map(|l| l.max_ms)),
                settled
                    .server_cpu_ms_per_workspace
                    .map_or("-".into(), |v| format!("{v:.2}")),
            ]);
        }
        out.push('\n');
        out.push_str(&grid(&rows));
        out.push_str(
            "latency: request due time -> first watch event showing it (phase Ready / DELETED)\n",
        );
        let watch = &self.watch;
        let _ = writeln!(
            out,
            "watch: {} events, {} reopened{}",
            watch.events,
            watch.reconnects,
            watch
                .ended_early
                .as_ref()
                .map_or(String::new(), |why| format!(", gave up early: {why}"))
        );
        let _ = writeln!(out, "\nmemory:");
        let _ = writeln!(out, "  idle:                 {}", memory(&self.idle));
        let _ = writeln!(
            out,
            "  after creation:       {} = {:.1} KiB per workspace",
            memory(&self.after_create),
            self.growth_kib_per_workspace
        );
        let later = self
            .after_history
            .as_ref()
            .map(|(seconds, m)| (format!("{seconds:.0} s after deletion:"), m));
        for (label, m) in [
            ("after deletion:".to_string(), &self.after_delete),
            ("10 s after deletion:".to_string(), &self.after_delete_10s),
        ]
        .into_iter()
        .chain(later)
        {
            let _ = writeln!(
                out,
                "  {label:<21} {} = {:+.1}% of idle",
                memory(m),
                (m.rss_mib / self.idle.rss_mib.max(f64::MIN_POSITIVE) - 1.0) * 100.0
            );
        }
        if !self.processes.is_empty() {
            out.push_str(&processes_table(&self.processes, self.unplaced));
        }
        if let Some(stopped) = &self.stopped {
            let _ = writeln!(out, "{}", stopped.line(1));
        }
        for (label, failure) in [
            ("first failed create", &self.create_failure),
            ("first failed delete", &self.delete_failure),
        ] {
            if let Some(failure) = failure {
                let _ = writeln!(out, "{label}: {failure}");
            }
        }
        out
    }
}

/// The per-process section of a sharded `workspaces` run: RSS in MiB at each reading.
fn processes_table(processes: &[ProcessFigures], unplaced: Option<u64>) -> String {
    let mut out = String::from(
        "\nper process (RSS MiB; KiB per workspace it holds; Ready of the workspaces it holds; \
         its CPU over the create phase per workspace created):\n",
    );
    let mut rows = vec![
        [
            "process",
            "workspaces",
            "idle",
            "after creation",
            "KiB/ws",
            "after deletion",
            "10 s after deletion",
            "Ready p50 ms",
            "Ready p99 ms",
            "create CPU ms/ws",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let rss = |m: Option<Memory>| m.map_or("-".into(), |m| format!("{:.1}", m.rss_mib));
    for process in processes {
        rows.push(vec![
            process.name.clone(),
            process.workspaces.map_or("-".into(), |n| n.to_string()),
            rss(process.idle),
            rss(process.after_create),
            process
                .growth_kib_per_workspace
                .map_or("-".into(), |v| format!("{v:.1}")),
            rss(process.after_delete),
            rss(process.after_delete_10s),
            ms(process.ready.map(|l| l.p50_ms)),
            ms(process.ready.map(|l| l.p99_ms)),
            process
                .create_cpu_ms_per_workspace
                .map_or("-".into(), |v| format!("{v:.2}")),
        ]);
    }
    out.push_str(&grid(&rows));
    if let Some(count) = unplaced {
        let _ = writeln!(
            out,
            "workspaces on no shard (no or unknown spec.URL): {count}"
        );
    }
    out
}

impl Table for IdleWatchersReport {
    fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "server: {:?} backend, start to /readyz {:.1} ms; {} of {} workspaces of type {} \
             Ready; watches over {} HTTP/2 connections; load average at the end: {}",
            self.backend,
            self.startup_ms,
            self.ready_workspaces,
            self.workspaces,
            self.workspace_type,
            self.connections,
            self.loadavg
        );
        let mut rows = vec![request_header()];
        for phase in [&self.create, &self.list, &self.writes] {
            rows.push(request_row(phase));
        }
        out.push_str(&grid(&rows));
        let ready = &self.ready;
        let _ = writeln!(
            out,
            "workspaces Ready: {}/{}, p99 {} ms after their create was due; tracker watch: {} \
             events, {} reopened",
            ready.observed,
            ready.expected,
            ms(ready.latency.map(|l| l.p99_ms)),
            self.tracker.events,
            self.tracker.reconnects
        );
        let _ = writeln!(
            out,
            "\n{} watchers (one per workspace, ConfigMaps, allowWatchBookmarks), opened in {:.1} s",
            self.watchers, self.open_s
        );
        let _ = writeln!(out, "memory:");
        let _ = writeln!(out, "  idle, no workspaces:   {}", memory(&self.idle));
        let _ = writeln!(
            out,
            "  before the watchers:   {}",
            memory(&self.before_watchers)
        );
        let _ = writeln!(out, "  watchers just opened:  {}", memory(&self.after_open));
        let _ = writeln!(
            out,
            "  after {:.0} s idle:       {} = {:.2} KiB per watcher",
            self.idle_s,
            memory(&self.after_idle),
            self.kib_per_watcher
        );
        let _ = writeln!(
            out,
            "  watchers closed:       {} = {:.2} KiB per watcher left",
            memory(&self.after_close),
            self.kib_per_watcher_after_close
        );
        let cpu = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let per_watcher = match (
            self.cpu_ms_per_s_with_watchers,
            self.cpu_ms_per_s_without_watchers,
        ) {
            (Some(with), Some(without)) if self.watchers > 0 => {
                format!("{:.2}", (with - without) * 1e3 / self.watchers as f64)
            }
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "server CPU idle: {} ms/s without watchers, {} ms/s with them = {} us/s per watcher",
            cpu(self.cpu_ms_per_s_without_watchers),
            cpu(self.cpu_ms_per_s_with_watchers),
            per_watcher
        );
        let d = &self.delivery;
        let _ = writeln!(
            out,
            "delivery: {}/{} writes on their own watcher ({} missing, {} on a wrong watcher, {} \
             before the write's response); p50 {} ms, p99 {} ms, max {} ms (write ack -> event)",
            d.delivered,
            d.acknowledged,
            d.missing,
            d.stray,
            d.before_ack,
            ms(d.latency.map(|l| l.p50_ms)),
            ms(d.latency.map(|l| l.p99_ms)),
            ms(d.latency.map(|l| l.max_ms)),
        );
        let _ = writeln!(
            out,
            "other events on the watchers: {} (other objects), {} bookmarks, {} ERROR",
            d.other_events, d.bookmarks, d.errors
        );
        if let Some(stopped) = &self.stopped {
            let _ = writeln!(out, "{}", stopped.line(1));
        }
        if let Some(failure) = &self.create_failure {
            let _ = writeln!(out, "first failed create: {failure}");
        }
        out
    }
}

impl Table for StartupReport {
    fn table(&self) -> String {
        let mut rows = vec![
            [
                "run",
                "start to /readyz ms",
                "idle RSS MiB",
                "peak RSS MiB",
                "SIGTERM to exit ms",
                "exit code",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for (i, run) in self.runs.iter().enumerate() {
            rows.push(vec![
                (i + 1).to_string(),
                format!("{:.1}", run.startup_ms),
                format!("{:.1}", run.idle.rss_mib),
                format!("{:.1}", run.idle.peak_rss_mib),
                format!("{:.1}", run.stopped.shutdown_ms),
                run.stopped.exit_code.map_or("-".into(), |c| c.to_string()),
            ]);
        }
        format!(
            "{:?} backend, RSS read after {} s idle\n{}",
            self.backend,
            self.idle_seconds,
            grid(&rows)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_table_has_a_row_per_process() {
        let memory = |rss_mib| {
            Some(Memory {
                rss_mib,
                peak_rss_mib: rss_mib,
            })
        };
        let process = |name: &str, workspaces, growth| ProcessFigures {
            name: name.into(),
            workspaces,
            idle: memory(40.0),
            after_create: memory(80.0),
            after_delete: memory(50.0),
            after_delete_10s: None,
            growth_kib_per_workspace: growth,
            ready: None,
            create_cpu_ms_per_workspace: Some(1.5),
        };
        let table = processes_table(
            &[
                process("cache", None, None),
                process("root", Some(3334), Some(12.25)),
            ],
            Some(2),
        );
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[2].starts_with("process"), "{table}");
        assert!(
            lines[3].starts_with("cache") && lines[3].contains(" - "),
            "{table}"
        );
        assert!(
            lines[4].contains("3334") && lines[4].contains("12.2"),
            "{table}"
        );
        assert!(lines[5].ends_with(": 2"), "{table}");
        assert_eq!(processes_table(&[], None).lines().count(), 3);
    }

    #[test]
    fn grid_aligns_columns() {
        let rows = vec![
            vec!["phase".to_owned(), "n".to_owned()],
            vec!["get".to_owned(), "1000".to_owned()],
        ];
        assert_eq!(grid(&rows), "phase     n\nget    1000\n");
    }

    #[test]
    fn watch_phases_show_cpu_per_write_and_per_event() {
        let run = crate::schedule::Run::<()> {
            samples: Vec::new(),
            elapsed: std::time::Duration::from_secs(10),
        };
        let mut watch = PhaseReport::of("watch", 500.0, &run);
        watch.server_cpu_us_per_request = Some(1_500.0);
        watch.watch = Some(crate::stats::WatchReport {
            watchers: 100,
            expected_events: 500_000,
            delivered_events: 500_000,
            before_ack: 0,
            write_latency: None,
            server_cpu_us_per_event: Some(15.0),
            server_cpu_us_per_event_net: Some(8.5),
            client_cpu_us_per_event: Some(4.25),
        });
        let report = LoadReport {
            protocol: "HTTP/2",
            concurrency: 8,
            loadavg: String::new(),
            server: None,
            phases: vec![watch],
        };
        let table = report.table();
        let row = table.lines().find(|l| l.starts_with("watch ")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 2..], ["1500", "15.0"], "{row}");
        assert!(
            table.contains("client CPU 4.2 us per delivered event"),
            "{table}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["phases"][0]["watch"]["server_cpu_us_per_event"], 15.0);
        assert_eq!(
            json["phases"][0]["watch"]["server_cpu_us_per_event_net"],
            8.5
        );
        assert_eq!(json["phases"][0]["server_cpu_us_per_request"], 1_500.0);
    }
}
