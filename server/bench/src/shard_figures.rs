//! Per-process figures of a sharded run (issue 19): where placement put the workspaces, and what
//! each process (every shard and the cache server) weighs idle, after the creation and after the
//! deletion, with the growth of a shard divided by the workspaces it holds.
//!
//! For each shard also the Ready latency of the workspaces it holds (where a slow path shows
//! itself), and for each process its CPU time during the create phase.
//!
//! A Workspace's shard is the one its annotation `core.kcp.io/shard` names, as the scheduler
//! records it (its `spec.URL` names the shard's external URL, which is the front-proxy's in a
//! topology with one, so it tells nothing about placement).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::server::Memory;
use crate::sharded::{Process, Reading};
use crate::stats::Latency;

/// Workspaces whose shard annotation names no process of the topology (or that have none yet).
pub const UNPLACED: &str = "(no shard)";

/// The process holding each listed Workspace named `prefix…`, from a list of root's Workspaces;
/// those on no known process are on [`UNPLACED`].
pub fn placement(list: &Value, processes: &[Process], prefix: &str) -> HashMap<String, String> {
    let mut placed = HashMap::new();
    let items = list.get("items").and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        let name = item.pointer("/metadata/name").and_then(Value::as_str);
        let Some(name) = name.filter(|name| name.starts_with(prefix)) else {
            continue;
        };
        let scheduled_to = item
            .pointer(SHARD_ANNOTATION)
            .and_then(Value::as_str)
            .unwrap_or("");
        let shard = processes
            .iter()
            .find(|process| process.name == scheduled_to)
            .map_or(UNPLACED, |process| process.name.as_str());
        placed.insert(name.to_owned(), shard.to_owned());
    }
    placed
}

/// How many workspaces each process holds.
pub fn counts(placed: &HashMap<String, String>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for shard in placed.values() {
        *counts.entry(shard.clone()).or_insert(0) += 1;
    }
    counts
}

/// The Ready latency of the workspaces on `shard`: each workspace's due time (`created`) to when
/// the watch showed it Ready (`ready`).
pub fn ready_on(
    shard: &str,
    placed: &HashMap<String, String>,
    created: &[(String, Instant)],
    ready: &HashMap<String, Instant>,
) -> Option<Latency> {
    let latencies = created
        .iter()
        .filter(|(name, _)| placed.get(name).is_some_and(|on| on == shard))
        .filter_map(|(name, due)| Some(ready.get(name)?.saturating_duration_since(*due)))
        .collect();
    Latency::of(latencies)
}

/// Where a Workspace names the shard it was scheduled to (JSON pointer of `core.kcp.io/shard`).
const SHARD_ANNOTATION: &str = "/metadata/annotations/core.kcp.io~1shard";

/// One process of a sharded run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessFigures {
    pub name: String,
    /// Workspaces placed on it; `None` for a process that is not a shard (the cache server).
    pub workspaces: Option<u64>,
    pub idle: Option<Memory>,
    pub after_create: Option<Memory>,
    pub after_delete: Option<Memory>,
    pub after_delete_10s: Option<Memory>,
    /// (after_create - idle) / its workspaces, for a shard holding any.
    pub growth_kib_per_workspace: Option<f64>,
    /// Due time to Ready of the workspaces it holds.
    pub ready: Option<Latency>,
    /// Its CPU time over the create phase (until every workspace was Ready) per workspace
    /// created in the whole topology.
    pub create_cpu_ms_per_workspace: Option<f64>,
}

/// What a run saw of each process besides memory.
pub struct Seen<'a> {
    /// Workspace → the process holding it.
    pub placed: &'a HashMap<String, String>,
    /// Created workspaces with their due times, and when each was seen Ready.
    pub created: &'a [(String, Instant)],
    pub ready: &'a HashMap<String, Instant>,
    /// CPU time of each process over the create phase.
    pub create_cpu: &'a HashMap<String, Duration>,
}

/// The memory readings of one run, in order.
pub struct Stages<'a> {
    pub idle: &'a [Reading],
    pub after_create: &'a [Reading],
    pub after_delete: &'a [Reading],
    pub after_delete_10s: &'a [Reading],
}

/// Every process's figures, in the order of `processes`; `shards` names those that hold
/// workspaces.
pub fn per_process(
    processes: &[Process],
    shards: &[String],
    seen: &Seen<'_>,
    stages: &Stages<'_>,
) -> Vec<ProcessFigures> {
    let placed = counts(seen.placed);
    let created = seen.created.len().max(1) as f64;
    let of = |readings: &[Reading], name: &str| {
        readings
            .iter()
            .find(|reading| reading.name == name)
            .map(|reading| reading.memory)
    };
    processes
        .iter()
        .map(|process| {
            let name = process.name.as_str();
            let workspaces = shards
                .iter()
                .any(|shard| shard == name)
                .then(|| placed.get(name).copied().unwrap_or(0));
            let idle = of(stages.idle, name);
            let after_create = of(stages.after_create, name);
            let growth_kib_per_workspace = match (workspaces, idle, after_create) {
                (Some(count), Some(idle), Some(after)) if count > 0 => {
                    Some((after.rss_mib - idle.rss_mib) * 1024.0 / count as f64)
                }
                _ => None,
            };
            ProcessFigures {
                name: name.to_owned(),
                workspaces,
                idle,
                after_create,
                after_delete: of(stages.after_delete, name),
                after_delete_10s: of(stages.after_delete_10s, name),
                growth_kib_per_workspace,
                ready: workspaces
                    .and_then(|_| ready_on(name, seen.placed, seen.created, seen.ready)),
                create_cpu_ms_per_workspace: seen
                    .create_cpu
                    .get(name)
                    .map(|cpu| cpu.as_secs_f64() * 1e3 / created),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn process(name: &str, port: u16) -> Process {
        Process {
            name: name.into(),
            url: format!("https://127.0.0.1:{port}"),
            pid: u32::from(port),
        }
    }

    #[test]
    fn placement_counts_by_the_shard_annotation() {
        let processes = [process("root", 6443), process("shard-1", 6444)];
        // Every URL names the front-proxy: only the annotation tells the shard.
        let ws = |name: &str, shard: Option<&str>| match shard {
            Some(shard) => json!({"metadata": {"name": name,
                "annotations": {"core.kcp.io/shard": shard}},
                "spec": {"URL": format!("https://127.0.0.1:6446/clusters/root:{name}")}}),
            None => json!({"metadata": {"name": name}, "spec": {}}),
        };
        let list = json!({"items": [
            ws("ws-1", Some("root")),
            ws("ws-2", Some("shard-1")),
            ws("ws-3", Some("shard-1")),
            ws("ws-4", Some("shard-9")),
            ws("ws-5", None),
            ws("other", Some("root")),
        ]});
        let placed = placement(&list, &processes, "ws-");
        assert_eq!(placed["ws-2"], "shard-1");
        assert_eq!(placed["ws-5"], UNPLACED);
        assert_eq!(
            counts(&placed),
            BTreeMap::from([
                ("root".to_owned(), 1),
                ("shard-1".to_owned(), 2),
                (UNPLACED.to_owned(), 2),
            ])
        );
        assert!(placement(&json!({}), &processes, "ws-").is_empty());
    }

    #[test]
    fn growth_is_per_workspace_of_each_shard() {
        let processes = [
            process("cache", 1),
            process("root", 2),
            process("shard-1", 3),
        ];
        let shards = ["root".to_owned(), "shard-1".to_owned()];
        let reading = |name: &str, rss_mib| Reading {
            name: name.into(),
            memory: Memory {
                rss_mib,
                peak_rss_mib: rss_mib,
            },
        };
        let idle = [
            reading("cache", 10.0),
            reading("root", 50.0),
            reading("shard-1", 40.0),
        ];
        let grown = [
            reading("cache", 12.0),
            reading("root", 60.0),
            reading("shard-1", 40.0),
        ];
        let placed: HashMap<String, String> = (0..1024)
            .map(|i| (format!("ws-{i}"), "root".to_owned()))
            .collect();
        let began = Instant::now();
        let created: Vec<(String, Instant)> =
            placed.keys().map(|name| (name.clone(), began)).collect();
        let ready = HashMap::from([("ws-1".to_owned(), began + Duration::from_millis(30))]);
        let create_cpu = HashMap::from([("cache".to_owned(), Duration::from_millis(2048))]);
        let seen = Seen {
            placed: &placed,
            created: &created,
            ready: &ready,
            create_cpu: &create_cpu,
        };
        let stages = Stages {
            idle: &idle,
            after_create: &grown,
            after_delete: &idle,
            after_delete_10s: &[],
        };
        let figures = per_process(&processes, &shards, &seen, &stages);
        assert_eq!(figures[0].workspaces, None);
        assert_eq!(figures[0].growth_kib_per_workspace, None);
        assert_eq!(figures[1].workspaces, Some(1024));
        assert_eq!(figures[1].growth_kib_per_workspace, Some(10.0));
        assert_eq!(figures[2].workspaces, Some(0));
        assert_eq!(figures[2].growth_kib_per_workspace, None);
        assert_eq!(figures[2].after_delete_10s, None);
        assert_eq!(figures[1].after_delete.map(|m| m.rss_mib), Some(50.0));
        assert_eq!(figures[1].ready.map(|l| l.p99_ms), Some(30.0));
        assert_eq!(figures[2].ready, None);
        assert_eq!(figures[0].ready, None);
        assert_eq!(figures[0].create_cpu_ms_per_workspace, Some(2.0));
        assert_eq!(figures[1].create_cpu_ms_per_workspace, None);
    }
}
