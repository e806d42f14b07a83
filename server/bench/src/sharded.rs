//! A `kcp sharded` topology of our own (issue 19): the cache server, the root shard and further
//! shards, started as people start them, so `workspaces --shards N` can measure every process.
//!
//! `kcp sharded` prints a summary once every process is ready and the admin kubeconfig is
//! written: one line per process (`  <name>  <url>  pid=<pid>  log=<file>`) and then
//! `admin kubeconfig: <file> (contexts root, shard-1, ...; current context root)`. That summary
//! is how this module learns the processes' names, URLs and PIDs and which of them are shards
//! (the kubeconfig's contexts). Stopping is upstream's `sharded-test-server` way: SIGTERM to
//! `kcp sharded`, which stops its children; SIGKILL after a bounded wait.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::owned::OwnedProcess;
use crate::server::{Memory, ServerArgs, ServerError, Stopped, memory_of};

/// Every process is waited for in turn (`kcp sharded` allows each 120 s).
const STARTED_WITHIN: Duration = Duration::from_secs(300);
/// Every child may take `kcp sharded`'s grace period (45 s) to stop.
const STOP_WITHIN: Duration = Duration::from_secs(150);
const POLL: Duration = Duration::from_millis(100);
const SUMMARY_START: &str = "kcp sharded is running:";
const KUBECONFIG_LINE: &str = "admin kubeconfig: ";
/// The front-proxy's process and context (not a shard), when `kcp sharded` runs one.
pub const FRONT_PROXY: &str = "front-proxy";

/// One process of the topology as the summary printed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Process {
    pub name: String,
    pub url: String,
    pub pid: u32,
}

/// What the bench reads from the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The processes with a PID of their own, in start order.
    pub processes: Vec<Process>,
    /// The shards' names (the admin kubeconfig's contexts but `front-proxy`), root first.
    pub shards: Vec<String>,
}

impl Summary {
    /// The URL of the cache the shards replicate into and read back from: the standalone cache
    /// server's (the process `cache`), else the root shard's (`--cache in-process`, which prints
    /// the cache without a PID). The client adds `/services/cache`.
    pub fn cache_url(&self) -> Option<&str> {
        let named = |name: &str| self.processes.iter().find(|p| p.name == name);
        named("cache")
            .or_else(|| named("root"))
            .map(|p| p.url.as_str())
    }
}

/// Reads the last complete summary in `output`; `None` until the kubeconfig line is printed.
pub fn parse_summary(output: &str) -> Option<Summary> {
    let summary = &output[output.rfind(SUMMARY_START)?..];
    let mut processes = Vec::new();
    for line in summary.lines().skip(1) {
        if let Some(rest) = line.strip_prefix(KUBECONFIG_LINE) {
            let contexts = rest.split_once("(contexts ")?.1.split_once(';')?.0;
            let shards = contexts
                .split(", ")
                .filter(|context| *context != FRONT_PROXY)
                .map(str::to_owned)
                .collect();
            return Some(Summary { processes, shards });
        }
        let mut fields = line.split_whitespace();
        let (Some(name), Some(url), Some(pid)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        // A process without a PID (an in-process cache) has a note instead.
        if let Some(Ok(pid)) = pid.strip_prefix("pid=").map(str::parse) {
            processes.push(Process {
                name: name.to_owned(),
                url: url.to_owned(),
                pid,
            });
        }
    }
    None
}

/// The resident memory of one process at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    pub name: String,
    pub memory: Memory,
}

/// The sum of several readings (peaks summed too: an upper bound of the topology's peak).
pub fn total(readings: &[Reading]) -> Memory {
    readings.iter().fold(
        Memory {
            rss_mib: 0.0,
            peak_rss_mib: 0.0,
        },
        |sum, reading| Memory {
            rss_mib: sum.rss_mib + reading.memory.rss_mib,
            peak_rss_mib: sum.peak_rss_mib + reading.memory.peak_rss_mib,
        },
    )
}

/// A running `kcp sharded` we started. Dropping it kills `kcp sharded` (its children get SIGTERM
/// when it dies) and removes its directory.
pub struct Topology {
    process: OwnedProcess,
    pub kubeconfig: PathBuf,
    pub summary: Summary,
    /// Spawn to the summary (every process ready).
    pub startup: Duration,
}

impl Topology {
    /// Runs `kcp sharded --shards=<shards> --secure-port=0 --root-directory=<fresh dir>` (with
    /// `--etcd-servers` for `--backend etcd`, then the extra arguments), waits for its summary and
    /// logs it.
    pub async fn start(args: &ServerArgs, shards: u16) -> Result<Self, ServerError> {
        let etcd = args.etcd()?.map(|url| format!("--etcd-servers={url}"));
        let dir = OwnedProcess::fresh_dir()?;
        let root = dir.join("topology");
        let mut command = Command::new(&args.kcp_binary);
        command
            .arg("sharded")
            .arg(format!("--shards={shards}"))
            .arg("--secure-port=0")
            .arg(format!("--root-directory={}", root.display()))
            .args(etcd)
            .args(&args.kcp_args);
        let spawned = Instant::now();
        let mut process = OwnedProcess::spawn(&mut command, dir, "sharded.log")?;
        while spawned.elapsed() < STARTED_WITHIN {
            if let Some(status) = process.exited()? {
                return Err(ServerError::Exited {
                    status,
                    log: process.log_tail(),
                });
            }
            if let Some(summary) = parse_summary(&process.output()) {
                tracing::info!(
                    startup_ms = spawned.elapsed().as_secs_f64() * 1e3,
                    processes = ?summary.processes,
                    "kcp sharded ready"
                );
                return Ok(Self {
                    process,
                    kubeconfig: root.join("admin.kubeconfig"),
                    summary,
                    startup: spawned.elapsed(),
                });
            }
            tokio::time::sleep(POLL).await;
        }
        Err(ServerError::NotReady(STARTED_WITHIN, process.log_tail()))
    }

    /// Every process's PID.
    pub fn pids(&self) -> Vec<u32> {
        self.summary.processes.iter().map(|p| p.pid).collect()
    }

    /// Every process's resident memory now.
    pub fn memory(&self) -> Result<Vec<Reading>, ServerError> {
        self.summary
            .processes
            .iter()
            .map(|process| {
                Ok(Reading {
                    name: process.name.clone(),
                    memory: memory_of(process.pid)?,
                })
            })
            .collect()
    }

    /// SIGTERM to `kcp sharded`, which stops every process, then its exit (SIGKILL after a
    /// bounded wait).
    pub async fn stop(mut self) -> Result<Stopped, ServerError> {
        self.process.stop(STOP_WITHIN).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRINTED: &str = "\
starting...
kcp sharded is running:
  cache    https://127.0.0.1:40001  pid=11  log=/t/cache.log
  root     https://127.0.0.1:40002  pid=12  log=/t/root.log
  shard-1  https://127.0.0.1:40003  pid=13  log=/t/shard-1.log
admin kubeconfig: /t/admin.kubeconfig (contexts root, shard-1; current context root)
try:
  export KUBECONFIG=/t/admin.kubeconfig
";

    #[test]
    fn the_summary_names_processes_and_shards() {
        let summary = parse_summary(PRINTED).unwrap();
        assert_eq!(summary.shards, vec!["root", "shard-1"]);
        assert_eq!(
            summary.processes[2],
            Process {
                name: "shard-1".into(),
                url: "https://127.0.0.1:40003".into(),
                pid: 13
            }
        );
        assert_eq!(summary.processes.len(), 3);
        assert_eq!(summary.cache_url(), Some("https://127.0.0.1:40001"));
    }

    #[test]
    fn the_front_proxy_is_a_process_and_no_shard() {
        let printed = PRINTED
            .replace(
                "admin kubeconfig: /t/admin.kubeconfig (contexts root",
                "  front-proxy  https://127.0.0.1:40004  pid=14  log=/t/fp.log\n\
                 admin kubeconfig: /t/admin.kubeconfig (contexts front-proxy, root",
            )
            .replace("current context root", "current context front-proxy");
        let summary = parse_summary(&printed).unwrap();
        assert_eq!(summary.shards, vec!["root", "shard-1"]);
        assert_eq!(summary.processes[3].name, FRONT_PROXY);
    }

    #[test]
    fn an_unfinished_summary_is_none_and_the_last_one_counts() {
        let cut = &PRINTED[..PRINTED.find("admin kubeconfig").unwrap()];
        assert_eq!(parse_summary(cut), None);
        assert_eq!(parse_summary("starting...\n"), None);
        let again = format!("{PRINTED}{}", PRINTED.replace("pid=13", "pid=23"));
        assert_eq!(parse_summary(&again).unwrap().processes[2].pid, 23);
    }

    #[test]
    fn a_process_without_pid_is_left_out() {
        let printed = PRINTED.replace(
            "pid=11  log=/t/cache.log",
            "in the root shard (/services/cache)",
        );
        let summary = parse_summary(&printed).unwrap();
        assert_eq!(summary.processes.len(), 2);
        assert_eq!(summary.processes[0].name, "root");
        assert_eq!(summary.cache_url(), Some("https://127.0.0.1:40002"));
    }

    #[test]
    fn totals_add_every_process() {
        let reading = |name: &str, rss_mib, peak_rss_mib| Reading {
            name: name.into(),
            memory: Memory {
                rss_mib,
                peak_rss_mib,
            },
        };
        let sum = total(&[reading("a", 10.0, 12.0), reading("b", 5.0, 6.0)]);
        assert_eq!((sum.rss_mib, sum.peak_rss_mib), (15.0, 18.0));
    }
}
