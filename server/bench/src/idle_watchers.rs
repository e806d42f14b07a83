//! What mostly idle watchers cost the server (issue 17): one watch per workspace, as an informer
//! per workspace would hold it, and whether a write reaches exactly its own workspace's watcher.
//!
//! Issue 17 asks that 1,000 mostly idle watchers across 1,000 workspaces cost at most 5 KiB each.
//! kube-apiserver serves a watch from its watch cache, where an idle watcher is a registration and
//! a buffered channel; upstream kcp, sharing one cache per resource across logical clusters, the
//! same. This command measures it on a server of its own:
//!
//! 1. **Workspaces.** N workspaces `ws-00001`... created in root at `--rate` and waited for until
//!    Ready, exactly as the `workspaces` command creates them (the same function).
//! 2. **Informer lists.** Each workspace's ConfigMaps are listed once (`/clusters/root:<ws>/api/v1/
//!    configmaps?limit=500`), for the resourceVersion its watch starts from.
//! 3. **Memory before.** After `--idle-seconds`, server CPU over `--idle` (the idle cost of the
//!    workspaces alone), then `VmRSS`.
//! 4. **Watchers.** One watch per workspace on the same collection, `?watch=true&resourceVersion=
//!    <the list's>&allowWatchBookmarks=true`, as HTTP/2 streams spread round-robin over
//!    `--concurrency` connections (kcp allows 200 streams per connection; more watchers than
//!    that are refused before starting). After `--idle-seconds`, `VmRSS` again, then server CPU
//!    over `--idle` with every watcher open and nothing written, and `VmRSS` at its end. KiB per
//!    watcher = (RSS at the end of the idle period − RSS before) / watchers.
//! 5. **Delivery.** One ConfigMap `idle-probe` is created in namespace `default` of K workspaces
//!    (`--writes`, spread evenly over the workspaces) at `--write-rate`. Each create's response
//!    carries the resourceVersion its event must carry; the event must arrive on that workspace's
//!    watcher and on no other. Latency is create acknowledged → event read (0 when the event
//!    overtook the response). After the last expected event (or `--drain`) the watchers stay open
//!    `--grace` longer to catch strays.
//! 6. **Memory after close.** Every watch is closed (the client resets its stream), and after
//!    `--idle-seconds` `VmRSS` once more: what the watchers left behind.
//!
//! RSS is the kernel's count of resident pages: allocator caching makes it move in steps, so a
//! per-watcher figure is only meaningful for hundreds of watchers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use http::Method;
use kcp_apimachinery::duration::parse_or_seconds;
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use crate::client::{Client, ClientError, Protocol};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{LoadError, outcome, resource_version, to_bytes};
use crate::report::IdleWatchersReport;
use crate::schedule::{self, Failure, Plan};
use crate::server::{self, Memory, Server, ServerArgs, ServerError};
use crate::stats::{Latency, PhaseReport};
use crate::watchers::{EventHead, Streams, Watchers};
use crate::workspaces::{CreateSpec, Tracker, WorkspaceError, create_until_ready};

/// The most concurrent streams kcp (like kube-apiserver's Go default of 250, rounded down) lets
/// one HTTP/2 connection carry.
const MAX_STREAMS_PER_CONNECTION: usize = 200;
/// The ConfigMap each write creates.
const PROBE: &str = "idle-probe";
/// How often the wait for deliveries looks at the watchers.
const POLL: Duration = Duration::from_millis(5);

/// Options of the `idle-watchers` command (besides the server options).
#[derive(Debug, Clone, Args)]
pub struct IdleWatchersArgs {
    /// Workspaces to create, one watcher each (ws-00001 ...).
    #[arg(long, default_value_t = 1_000)]
    pub workspaces: u64,
    /// Workspace creates (and informer lists) per second, open loop.
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// The WorkspaceType of every workspace (`universal`: an empty workspace).
    #[arg(long, default_value = "universal")]
    pub workspace_type: String,
    /// The path of the WorkspaceType's workspace.
    #[arg(long, default_value = "root")]
    pub workspace_type_path: String,
    /// HTTP/2 connections the watches are spread over (at most 200 watches each).
    #[arg(long, default_value_t = 10)]
    pub concurrency: usize,
    /// Creates in flight at once; later ones wait, and the wait counts.
    #[arg(long, default_value_t = 128)]
    pub max_in_flight: usize,
    /// How long, with every watcher open and nothing written, server CPU is measured.
    #[arg(long, default_value = "30s", value_parser = parse_or_seconds)]
    pub idle: Duration,
    /// Workspaces that get one ConfigMap written (spread evenly).
    #[arg(long, default_value_t = 50)]
    pub writes: u64,
    /// ConfigMap creates per second.
    #[arg(long, default_value_t = 10.0)]
    pub write_rate: f64,
    /// The namespace of the written ConfigMaps (it exists in every empty workspace).
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// How long requests may still run after the last one is due, and events after the last
    /// write.
    #[arg(long, default_value = "30s", value_parser = parse_or_seconds)]
    pub drain: Duration,
    /// How long the watchers stay open after the last expected event, to catch strays.
    #[arg(long, default_value = "2s", value_parser = parse_or_seconds)]
    pub grace: Duration,
    /// How long after the create phase every workspace may take to become Ready.
    #[arg(long, default_value = "60s", value_parser = parse_or_seconds)]
    pub ready_timeout: Duration,
}

/// Why the figures could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum IdleWatchersError {
    #[error(transparent)]
    Workspaces(#[from] WorkspaceError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(
        "{watchers} watches over {connections} connections is more than \
         {MAX_STREAMS_PER_CONNECTION} streams per connection: raise --concurrency"
    )]
    TooManyStreams { watchers: u64, connections: usize },
    #[error("no workspace became Ready, so there is nothing to watch")]
    NoWorkspaces,
}

/// How the probe writes reached the watchers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// Creates acknowledged with a resourceVersion.
    pub acknowledged: u64,
    /// Their events on their own workspace's watcher.
    pub delivered: u64,
    /// Acknowledged creates whose event never reached their watcher.
    pub missing: u64,
    /// Probe events on a watcher that should not have had them (another workspace's write, or a
    /// revision other than the acknowledged one).
    pub stray: u64,
    /// Events about other objects (not the probe, not bookmarks) during the whole watch.
    pub other_events: u64,
    pub bookmarks: u64,
    /// ERROR events (a watch ended by the server, e.g. 410 Gone).
    pub errors: u64,
    /// Delivered events that arrived before the create's response was read (latency 0).
    pub before_ack: u64,
    /// Create acknowledged → event read on its watcher.
    pub latency: Option<Latency>,
}

/// Starts a server, runs the measurement, stops the server.
pub async fn run(
    server: &ServerArgs,
    args: &IdleWatchersArgs,
) -> Result<IdleWatchersReport, IdleWatchersError> {
    let connections = args.concurrency.max(1);
    if args.workspaces > (MAX_STREAMS_PER_CONNECTION * connections) as u64 {
        return Err(IdleWatchersError::TooManyStreams {
            watchers: args.workspaces,
            connections,
        });
    }
    // Fail on a bad rate before starting anything.
    Plan::exactly(args.rate, args.workspaces).map_err(LoadError::from)?;
    Plan::exactly(args.write_rate, args.writes).map_err(LoadError::from)?;
    let (mut report, startup, stopped) =
        Server::measured(server, async |started| measure(started, server, args).await).await?;
    report.startup_ms = startup.as_secs_f64() * 1e3;
    report.stopped = Some(stopped);
    Ok(report)
}

/// Everything between start and stop.
async fn measure(
    started: &Server,
    server: &ServerArgs,
    args: &IdleWatchersArgs,
) -> Result<IdleWatchersReport, IdleWatchersError> {
    let settle = Duration::from_secs(server.idle_seconds);
    let pid = started.pid();
    let target = Target::from_file(&started.kubeconfig, Some("base"))?;
    // Creates, lists and writes on their own connections, so no request waits behind a
    // connection full of watch streams.
    let client = Arc::new(Client::new(target.clone(), Protocol::Http2, 4)?);
    let watch_client = Client::new(target, Protocol::Http2, args.concurrency.max(1))?;
    client.warm_up().await?;
    watch_client.warm_up().await?;
    tokio::time::sleep(settle).await;
    let idle = started.memory()?;

    let spec = CreateSpec {
        workspaces: args.workspaces,
        rate: args.rate,
        workspace_type: &args.workspace_type,
        workspace_type_path: &args.workspace_type_path,
        max_in_flight: args.max_in_flight,
        drain: args.drain,
        ready_timeout: args.ready_timeout,
    };
    let create_span = Plan::exactly(args.rate, args.workspaces)
        .map_err(LoadError::from)?
        .span();
    let tracker_limit = create_span + args.drain + args.ready_timeout + Duration::from_secs(60);
    let tracker = Tracker::open(client.clone(), tracker_limit).await?;
    let created = create_until_ready(&client, &tracker, &spec, &[pid]).await?;
    let workspaces = created.ready_names(&tracker);
    let tracker_summary = tracker.close().await;
    if workspaces.is_empty() {
        return Err(IdleWatchersError::NoWorkspaces);
    }
    let collections: Arc<Vec<String>> = Arc::new(
        workspaces
            .iter()
            .map(|ws| format!("/clusters/root:{ws}/api/v1/configmaps"))
            .collect(),
    );

    // An informer's first list, for the revision its watch starts from.
    let list_plan = Plan::exactly(args.rate, collections.len() as u64).map_err(LoadError::from)?;
    let lists = schedule::drive(&list_plan, args.drain, |i| {
        let (client, collections) = (client.clone(), collections.clone());
        async move {
            let collection = collections
                .get(i as usize)
                .ok_or(Failure::Transport("no such workspace"))?;
            let path = format!("{collection}?limit=500");
            let body = outcome(client.request(Method::GET, &path, None).await)?;
            resource_version(&body).ok_or(Failure::Transport("no resourceVersion"))
        }
    })
    .await;
    let list = PhaseReport::of("list (informer, limit=500)", list_plan.rate(), &lists);
    let revisions: Vec<Option<String>> = lists
        .samples
        .iter()
        .map(|s| s.result.as_ref().ok().cloned())
        .collect();

    // The same idle period without watchers, for the CPU the workspaces cost alone (CPU time
    // comes in 10 ms ticks, so a short pause would mostly measure the rounding).
    tokio::time::sleep(settle).await;
    let cpu_before = server::cpu_time(pid);
    tokio::time::sleep(args.idle).await;
    let cpu_without = cpu_rate(pid, cpu_before, args.idle);
    let before_watchers = started.memory()?;

    // The watches outlive every later step with a minute to spare.
    let write_plan = Plan::exactly(args.write_rate, args.writes).map_err(LoadError::from)?;
    let watch_limit = settle
        + args.idle
        + write_plan.span()
        + args.drain * 2
        + args.grace
        + Duration::from_secs(60);
    let paths: Vec<(usize, String)> = revisions
        .iter()
        .enumerate()
        .filter_map(|(i, rv)| {
            let rv = rv.as_ref()?;
            Some((
                i,
                format!(
                    "{}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={}",
                    collections[i],
                    watch_limit.as_secs()
                ),
            ))
        })
        .collect();
    // Watcher j watches workspace watched[j].
    let watched: Vec<usize> = paths.iter().map(|(i, _)| *i).collect();
    tracing::info!(
        watchers = paths.len(),
        connections = args.concurrency.max(1),
        "opening the watches"
    );
    let opening = Instant::now();
    let watchers = Watchers::start(
        &watch_client,
        paths.into_iter().map(|(_, path)| path),
        Streams::Pooled,
        event_summary,
    )
    .await?;
    let open_s = opening.elapsed().as_secs_f64();
    tokio::time::sleep(settle).await;
    let after_open = started.memory()?;
    tracing::info!(idle_s = args.idle.as_secs_f64(), "watchers open; idling");
    let cpu_before = server::cpu_time(pid);
    tokio::time::sleep(args.idle).await;
    let cpu_with = cpu_rate(pid, cpu_before, args.idle);
    let after_idle = started.memory()?;

    // One write in each of K workspaces that have a watcher, spread evenly.
    let targets: Arc<Vec<usize>> = Arc::new(spread(watched.len(), args.writes));
    let seen_before = watchers.seen();
    let body = to_bytes(&json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PROBE, "namespace": args.namespace},
        "data": {"written-by": "kcp-bench idle-watchers"},
    }));
    let write_plan =
        Plan::exactly(args.write_rate, targets.len() as u64).map_err(LoadError::from)?;
    let write_collections: Arc<Vec<String>> = Arc::new(
        targets
            .iter()
            .map(|&j| {
                format!(
                    "/clusters/root:{}/api/v1/namespaces/{}/configmaps",
                    workspaces[watched[j]], args.namespace
                )
            })
            .collect(),
    );
    let run = schedule::drive(&write_plan, args.drain, |i| {
        let (client, collections, body) = (client.clone(), write_collections.clone(), body.clone());
        async move {
            let path = collections
                .get(i as usize)
                .ok_or(Failure::Transport("no such workspace"))?;
            let reply = outcome(client.request(Method::POST, path, Some(body)).await)?;
            let acked = Instant::now();
            let rv = resource_version(&reply).ok_or(Failure::Transport("no resourceVersion"))?;
            Ok((rv, acked))
        }
    })
    .await;
    let writes = PhaseReport::of("write (ConfigMap create)", write_plan.rate(), &run);
    // Watcher index -> (revision, acknowledged at) of the write in its workspace.
    let expected: HashMap<usize, (String, Instant)> = targets
        .iter()
        .zip(&run.samples)
        .filter_map(|(&j, sample)| Some((j, sample.result.as_ref().ok()?.clone())))
        .collect();
    let deadline = Instant::now() + args.drain;
    while Instant::now() < deadline {
        let seen = watchers.seen();
        let arrived = expected.keys().all(|&j| seen.get(j) > seen_before.get(j));
        if arrived {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    tokio::time::sleep(args.grace).await;
    let received = watchers.close().await;
    let delivery = deliveries(&expected, &received);
    tokio::time::sleep(settle).await;
    let after_close = started.memory()?;

    let watcher_count = watched.len();
    Ok(IdleWatchersReport {
        backend: server.backend,
        workspaces: args.workspaces,
        ready_workspaces: workspaces.len() as u64,
        workspace_type: format!("{}:{}", args.workspace_type_path, args.workspace_type),
        connections: args.concurrency.max(1),
        loadavg: crate::server::loadavg(),
        startup_ms: 0.0,
        idle,
        create: created.create,
        ready: created.ready,
        create_failure: created.failure,
        tracker: tracker_summary,
        list,
        before_watchers,
        watchers: watcher_count,
        open_s,
        after_open,
        idle_s: args.idle.as_secs_f64(),
        after_idle,
        kib_per_watcher: kib_per(&before_watchers, &after_idle, watcher_count),
        cpu_ms_per_s_without_watchers: cpu_without,
        cpu_ms_per_s_with_watchers: cpu_with,
        writes,
        delivery,
        after_close,
        kib_per_watcher_after_close: kib_per(&before_watchers, &after_close, watcher_count),
        stopped: None,
    })
}

/// What [`Watchers`] records of every event: `<type>/<name>/<resourceVersion>` (empty parts for
/// what the event lacks), so every bookmark and every write is one distinct key.
fn event_summary(line: &[u8]) -> Option<String> {
    let event = EventHead::parse(line)?;
    let metadata = event.object.metadata;
    Some(format!(
        "{}/{}/{}",
        event.kind,
        metadata.name.unwrap_or_default(),
        metadata.resource_version.unwrap_or_default()
    ))
}

/// Matches what each watcher received (as [`event_summary`] keys, by watcher index) with the
/// write expected on it (revision and acknowledgement time, by watcher index).
fn deliveries(
    expected: &HashMap<usize, (String, Instant)>,
    received: &[Vec<(String, Instant)>],
) -> Delivery {
    let mut delivery = Delivery {
        acknowledged: expected.len() as u64,
        delivered: 0,
        missing: 0,
        stray: 0,
        other_events: 0,
        bookmarks: 0,
        errors: 0,
        before_ack: 0,
        latency: None,
    };
    let mut latencies = Vec::new();
    for (j, events) in received.iter().enumerate() {
        let wanted = expected.get(&j);
        let mut found = false;
        for (key, arrived) in events {
            let mut parts = key.splitn(3, '/');
            let (kind, name, rv) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            match kind {
                "BOOKMARK" => delivery.bookmarks += 1,
                "ERROR" => delivery.errors += 1,
                _ if name != PROBE => delivery.other_events += 1,
                _ => match wanted {
                    Some((want, acked)) if want == rv && !found => {
                        found = true;
                        if arrived < acked {
                            delivery.before_ack += 1;
                        }
                        latencies.push(arrived.saturating_duration_since(*acked));
                    }
                    _ => delivery.stray += 1,
                },
            }
        }
        if found {
            delivery.delivered += 1;
        }
    }
    delivery.missing = delivery.acknowledged - delivery.delivered;
    delivery.latency = Latency::of(latencies);
    delivery
}

/// `count` indexes spread evenly over `0..len` (all of them if `count >= len`).
fn spread(len: usize, count: u64) -> Vec<usize> {
    let count = (count as usize).min(len);
    (0..count).map(|k| k * len / count).collect()
}

/// Server CPU milliseconds per second of `span`, since `before`.
fn cpu_rate(pid: u32, before: Option<Duration>, span: Duration) -> Option<f64> {
    let used = server::cpu_time(pid)?.checked_sub(before?)?;
    (!span.is_zero()).then(|| used.as_secs_f64() * 1e3 / span.as_secs_f64())
}

/// Growth of resident memory from `before` to `after`, in KiB per watcher.
fn kib_per(before: &Memory, after: &Memory, watchers: usize) -> f64 {
    (after.rss_mib - before.rss_mib) * 1024.0 / watchers.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_spread_evenly() {
        assert_eq!(spread(1_000, 4), vec![0, 250, 500, 750]);
        assert_eq!(spread(3, 10), vec![0, 1, 2]);
        assert_eq!(spread(10, 0), Vec::<usize>::new());
        assert_eq!(spread(0, 5), Vec::<usize>::new());
    }

    #[test]
    fn summaries_of_events() {
        let line = |v: serde_json::Value| v.to_string().into_bytes();
        assert_eq!(
            event_summary(&line(
                json!({"type": "ADDED", "object": {"kind": "ConfigMap",
                "metadata": {"name": "idle-probe", "resourceVersion": "42"}, "data": {}}})
            )),
            Some("ADDED/idle-probe/42".into())
        );
        assert_eq!(
            event_summary(&line(
                json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap",
                "metadata": {"resourceVersion": "50"}}})
            )),
            Some("BOOKMARK//50".into())
        );
        assert_eq!(event_summary(b"{}"), None);
    }

    #[test]
    fn deliveries_are_matched_to_their_own_watcher() {
        let base = Instant::now();
        let at = |ms| base + Duration::from_millis(ms);
        let expected = HashMap::from([
            (0, ("10".to_owned(), at(100))),
            (2, ("12".to_owned(), at(200))),
            (3, ("13".to_owned(), at(300))),
        ]);
        let received = vec![
            vec![
                ("BOOKMARK//5".to_owned(), at(50)),
                ("ADDED/idle-probe/10".to_owned(), at(104)),
            ],
            // Watcher 1 had no write: workspace 2's event here is a stray.
            vec![("ADDED/idle-probe/12".to_owned(), at(201))],
            vec![
                ("ADDED/idle-probe/12".to_owned(), at(190)),
                ("ADDED/kube-root-ca.crt/3".to_owned(), at(10)),
            ],
            // Watcher 3's event never came; an ERROR did.
            vec![("ERROR//".to_owned(), at(400))],
        ];
        let delivery = deliveries(&expected, &received);
        assert_eq!(
            (
                delivery.acknowledged,
                delivery.delivered,
                delivery.missing,
                delivery.stray
            ),
            (3, 2, 1, 1)
        );
        assert_eq!(
            (delivery.other_events, delivery.bookmarks, delivery.errors),
            (1, 1, 1)
        );
        assert_eq!(delivery.before_ack, 1);
        let latency = delivery.latency.unwrap();
        assert_eq!((latency.p50_ms, latency.max_ms), (0.0, 4.0));
    }

    #[test]
    fn memory_and_cpu_per_watcher() {
        let mib = |rss_mib| Memory {
            rss_mib,
            peak_rss_mib: rss_mib,
        };
        assert_eq!(kib_per(&mib(100.0), &mib(105.0), 1_024), 5.0);
        assert_eq!(kib_per(&mib(100.0), &mib(99.0), 0), -1024.0);
    }
}
