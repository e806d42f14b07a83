//! Starting a kcp server of our own, timing it to `/readyz`, reading its memory, stopping it.
//!
//! Startup time is from `spawn` to the first 200 on `/readyz` (over TLS, verified with the CA from
//! the admin kubeconfig the server writes once it serves). Memory is the kernel's view of the
//! process, `VmRSS` (resident now) and `VmHWM` (peak resident) from `/proc/<pid>/status`, which is
//! what a container limit counts. Each server gets a fresh temporary root directory and a free
//! loopback port, so every start is a cold start (certificates generated, store created).

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::ValueEnum;
use http::{Method, StatusCode};
use serde::Serialize;
use tokio::time::Instant;

use crate::client::{Client, Protocol};
use crate::kubeconfig::Target;
use crate::owned::OwnedProcess;

/// How long a server may take to become ready before we give up.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(2);

/// The storage a started server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Embedded,
    Etcd,
}

/// How to start a server.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The kcp binary (e.g. target/release/kcp).
    #[arg(long)]
    pub kcp_binary: PathBuf,
    /// Storage backend of the started server.
    #[arg(long, value_enum, default_value = "embedded")]
    pub backend: Backend,
    /// etcd URL for --backend etcd (loopback only); each server gets its own --etcd-prefix.
    #[arg(long)]
    pub etcd_servers: Option<String>,
    /// Seconds to let the server idle after it is ready before its memory is read.
    #[arg(long, default_value_t = 5)]
    pub idle_seconds: u64,
    /// Extra `kcp start` arguments (after `--`).
    #[arg(last = true)]
    pub kcp_args: Vec<String>,
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages (empty when unreadable): other work on the
/// machine skews latency.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Why a server could not be started, read or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("--backend etcd needs --etcd-servers")]
    NoEtcd,
    #[error("--etcd-servers {0:?} is not http://127.0.0.1:PORT or http://localhost:PORT")]
    EtcdNotLoopback(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("kcp exited before it was ready ({status}); its log:\n{log}")]
    Exited {
        status: std::process::ExitStatus,
        log: String,
    },
    #[error("kcp was not ready after {0:?}; its log:\n{1}")]
    NotReady(Duration, String),
    #[error("no {0} in /proc/<pid>/status")]
    NoRss(&'static str),
}

pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

/// Resident memory of a process.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Memory {
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
}

/// How a server ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stopped {
    /// The exit code, or `None` if it died of a signal (or had to be killed).
    pub exit_code: Option<i32>,
    pub shutdown_ms: f64,
}

impl Stopped {
    /// `SIGTERM to exit: <ms> ms, exit code <code>` as the reports print it (after `gap` spaces).
    pub fn line(&self, gap: usize) -> String {
        let code = self
            .exit_code
            .map_or("none (signal)".into(), |c| c.to_string());
        format!(
            "SIGTERM to exit:{:gap$}{:.1} ms, exit code {code}",
            "", self.shutdown_ms
        )
    }
}

/// A running kcp we started. Dropping it kills the process and removes its directory.
pub struct Server {
    process: OwnedProcess,
    pub kubeconfig: PathBuf,
    /// Spawn to first 200 on `/readyz`.
    pub startup: Duration,
}

impl Server {
    /// Starts kcp and waits until `/readyz` answers 200.
    pub async fn start(args: &ServerArgs) -> Result<Self, ServerError> {
        let dir = OwnedProcess::fresh_dir()?;
        let mut backend_args = Vec::new();
        if let Some(url) = args.etcd()? {
            // The directory's random name keeps runs on one etcd apart.
            let prefix = dir.file_name().unwrap_or_default().to_string_lossy();
            backend_args.push(format!("--etcd-servers={url}"));
            backend_args.push(format!("--etcd-prefix=/{prefix}"));
        }
        let root = dir.join("root");
        let port = free_port()?;
        let mut command = Command::new(&args.kcp_binary);
        command
            .arg("start")
            .arg(format!("--root-directory={}", root.display()))
            .arg(format!("--secure-port={port}"))
            .arg("--bind-address=127.0.0.1")
            .args(&backend_args)
            .args(&args.kcp_args);
        let spawned = Instant::now();
        let mut server = Self {
            process: OwnedProcess::spawn(&mut command, dir, "kcp.log")?,
            kubeconfig: root.join("admin.kubeconfig"),
            startup: Duration::ZERO,
        };
        server.wait_ready(spawned).await?;
        Ok(server)
    }

    async fn wait_ready(&mut self, spawned: Instant) -> Result<(), ServerError> {
        let mut client: Option<Client> = None;
        while spawned.elapsed() < READY_TIMEOUT {
            if let Some(status) = self.process.exited()? {
                return Err(ServerError::Exited {
                    status,
                    log: self.process.log_tail(),
                });
            }
            if client.is_none() {
                // The kubeconfig appears once the server serves; a half-written file fails to
                // parse and is read again next round.
                client = Target::from_file(&self.kubeconfig, Some("base"))
                    .ok()
                    .and_then(|target| Client::new(target, Protocol::Http1, 1).ok());
            }
            if let Some(client) = &client
                && let Ok(reply) = client.request(Method::GET, "/readyz", None).await
                && reply.status == StatusCode::OK
            {
                self.startup = spawned.elapsed();
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
        Err(ServerError::NotReady(
            READY_TIMEOUT,
            self.process.log_tail(),
        ))
    }

    /// Starts a server, runs `measure` against it and stops it whatever `measure` found: what it
    /// found, the time to `/readyz` and how the server stopped.
    pub async fn measured<T, E: From<ServerError>>(
        args: &ServerArgs,
        measure: impl AsyncFnOnce(&Server) -> Result<T, E>,
    ) -> Result<(T, Duration, Stopped), E> {
        let started = Server::start(args).await?;
        tracing::info!(
            startup_ms = started.startup.as_secs_f64() * 1e3,
            "server ready"
        );
        let result = measure(&started).await;
        let startup = started.startup;
        let stopped = started.stop().await?;
        Ok((result?, startup, stopped))
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Current and peak resident memory.
    pub fn memory(&self) -> Result<Memory, ServerError> {
        memory_of(self.process.pid())
    }

    /// Sends SIGTERM and waits for the exit (killing the process after a timeout).
    pub async fn stop(mut self) -> Result<Stopped, ServerError> {
        self.process.stop(STOP_TIMEOUT).await
    }
}

impl ServerArgs {
    /// The etcd URL for `--backend etcd` (loopback only), `None` for the embedded store.
    pub fn etcd(&self) -> Result<Option<&str>, ServerError> {
        if self.backend != Backend::Etcd {
            return Ok(None);
        }
        let url = self.etcd_servers.as_deref().ok_or(ServerError::NoEtcd)?;
        if !is_loopback_http(url) {
            return Err(ServerError::EtcdNotLoopback(url.to_owned()));
        }
        Ok(Some(url))
    }
}

/// Current and peak resident memory of process `pid`.
pub fn memory_of(pid: u32) -> Result<Memory, ServerError> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(io(format!("reading {path}")))?;
    let mib = |field| {
        status_kib(&status, field)
            .map(|kib| kib as f64 / 1024.0)
            .ok_or(ServerError::NoRss(field))
    };
    Ok(Memory {
        rss_mib: mib("VmRSS")?,
        peak_rss_mib: mib("VmHWM")?,
    })
}

/// A port the kernel just had free on 127.0.0.1.
fn free_port() -> Result<u16, ServerError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("finding a free port"))
}

/// CPU time (user + system, all threads) a process has used, from `/proc/<pid>/stat`.
///
/// Under contention from other processes wall-clock latency is noisy; CPU time per request is
/// not, so reports carry both. Ticks are USER_HZ, 100 on every Linux architecture we run on.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_cpu_ticks(&stat).map(|ticks| Duration::from_millis(ticks * 10))
}

/// CPU time of several processes together (`None` if any cannot be read).
pub fn cpu_time_all(pids: &[u32]) -> Option<Duration> {
    pids.iter().map(|&pid| cpu_time(pid)).sum()
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line; the command name may hold
/// spaces and parentheses, so fields are counted after its last `)`.
fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A `Key:   1234 kB` value from `/proc/<pid>/status`.
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

fn is_loopback_http(url: &str) -> bool {
    url.split(',').all(|url| {
        ["http://127.0.0.1:", "http://localhost:"]
            .iter()
            .any(|prefix| {
                url.strip_prefix(prefix)
                    .is_some_and(|port| port.parse::<u16>().is_ok())
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_fields() {
        let status = "Name:\tkcp\nVmPeak:\t  123456 kB\nVmHWM:\t   40000 kB\nVmRSS:\t   31744 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(31744));
        assert_eq!(status_kib(status, "VmHWM"), Some(40000));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib("VmRSSx:\t1 kB\n", "VmRSS"), None);
    }

    #[test]
    fn proc_stat_cpu() {
        let stat = "42 (kcp (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 3 0 100";
        assert_eq!(stat_cpu_ticks(stat), Some(280));
        assert_eq!(stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn etcd_urls_must_be_loopback() {
        assert!(is_loopback_http("http://127.0.0.1:2379"));
        assert!(is_loopback_http(
            "http://localhost:2379,http://127.0.0.1:2380"
        ));
        assert!(!is_loopback_http("http://10.0.0.1:2379"));
        assert!(!is_loopback_http("https://127.0.0.1:2379"));
        assert!(!is_loopback_http("http://127.0.0.1:2379/x"));
    }
}
