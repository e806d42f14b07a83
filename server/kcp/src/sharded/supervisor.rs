//! The processes of a `kcp sharded` topology while they run: started from this executable, known
//! by their PIDs, ready when `/readyz` answers 200 over HTTPS (the shared CA, the admin's client
//! certificate), watched until one exits, and stopped by PID: SIGTERM, then SIGKILL after a grace
//! period (upstream's `sharded-test-server` likewise owns its children and stops them with it).
//!
//! Each child runs in its own process group, so a Ctrl-C in the terminal reaches only this
//! process, which then stops the children in reverse start order (shards before the root shard,
//! which they tell that they stop, and the cache server last). On Linux a child also gets SIGTERM
//! if this process dies without stopping it (`PR_SET_PDEATHSIG`); the signal is tied to the thread
//! that forked, which is why `kcp sharded` runs on a single-threaded runtime.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::pki::shared::SharedPki;

use super::plan::Process;

/// How often exits and readiness are looked at.
const POLL: Duration = Duration::from_millis(200);
/// How long one process may take to become ready.
pub const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long one `/readyz` request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a process may take to stop after SIGTERM before it gets SIGKILL (a shard drains
/// in-flight requests for up to 30 s).
pub const STOP_GRACE: Duration = Duration::from_secs(45);
/// How much of a log a failure quotes.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: u64 = 16 * 1024;

/// Why a topology could not be started or kept running.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("opening the log {}: {source}", path.display())]
    Log { path: PathBuf, source: io::Error },
    #[error("starting {name}: {source}")]
    Spawn { name: String, source: io::Error },
    #[error("waiting for {name}: {source}")]
    Wait { name: String, source: io::Error },
    #[error("building the readiness client: {0}")]
    Client(reqwest::Error),
    #[error(transparent)]
    Failed(Box<Failure>),
}

/// A process that exited on its own or did not become ready.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name} (pid {pid}) {what}; the other processes were stopped. Last lines of {}:\n{tail}",
    log.display()
)]
pub struct Failure {
    pub name: String,
    pub pid: u32,
    /// `exited (...)` or `was not ready ...`.
    pub what: String,
    pub log: PathBuf,
    pub tail: String,
}

/// A started process.
#[derive(Debug)]
pub struct Running {
    pub name: String,
    pub url: String,
    pub log: PathBuf,
    child: Child,
    /// Set once the process has exited and been reaped (its PID is then no longer ours).
    status: Option<ExitStatus>,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, once the process has exited.
    fn poll_exit(&mut self) -> Result<Option<ExitStatus>, SupervisorError> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .map_err(|source| SupervisorError::Wait {
                    name: self.name.clone(),
                    source,
                })?;
        }
        Ok(self.status)
    }

    fn failed(&self, what: String) -> SupervisorError {
        SupervisorError::Failed(Box::new(Failure {
            name: self.name.clone(),
            pid: self.pid(),
            what,
            log: self.log.clone(),
            tail: log_tail(&self.log),
        }))
    }
}

/// The processes of one topology.
pub struct Supervisor {
    running: Vec<Running>,
    probe: reqwest::Client,
}

impl Supervisor {
    /// A supervisor whose readiness probes trust the shared CA and present the admin certificate.
    pub fn new(pki: &SharedPki) -> Result<Supervisor, SupervisorError> {
        let ca = reqwest::Certificate::from_pem(pki.server_ca_pem.as_bytes())
            .map_err(SupervisorError::Client)?;
        let identity = format!("{}\n{}", pki.admin.cert_pem, pki.admin.key_pem);
        let identity =
            reqwest::Identity::from_pem(identity.as_bytes()).map_err(SupervisorError::Client)?;
        let probe = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(ca)
            .identity(identity)
            .timeout(PROBE_TIMEOUT)
            .build()
            .map_err(SupervisorError::Client)?;
        Ok(Supervisor {
            running: Vec::new(),
            probe,
        })
    }

    /// The started processes, in start order.
    pub fn running(&self) -> &[Running] {
        &self.running
    }

    /// Starts `process` from `program`, its output appended to its log.
    pub fn spawn(&mut self, program: &Path, process: &Process) -> Result<(), SupervisorError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&process.log)
            .map_err(|source| SupervisorError::Log {
                path: process.log.clone(),
                source,
            })?;
        let log_err = log.try_clone().map_err(|source| SupervisorError::Log {
            path: process.log.clone(),
            source,
        })?;
        let mut command = Command::new(program);
        command
            .args(&process.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        die_with_parent(&mut command);
        let child = command.spawn().map_err(|source| SupervisorError::Spawn {
            name: process.name.clone(),
            source,
        })?;
        self.running.push(Running {
            name: process.name.clone(),
            url: process.url.clone(),
            log: process.log.clone(),
            child,
            status: None,
        });
        Ok(())
    }

    /// The first process found to have exited, as an error.
    fn check_exits(&mut self) -> Result<(), SupervisorError> {
        for running in &mut self.running {
            if let Some(status) = running.poll_exit()? {
                return Err(running.failed(format!("exited ({status})")));
            }
        }
        Ok(())
    }

    /// Waits until every started process answers `/readyz` with 200; fails when one exits first
    /// or is not ready within [`READY_WITHIN`].
    pub async fn wait_ready(&mut self) -> Result<(), SupervisorError> {
        let deadline = Instant::now() + READY_WITHIN;
        let mut last: Vec<Option<String>> =
            vec![Some("no answer yet".to_owned()); self.running.len()];
        loop {
            self.check_exits()?;
            for (running, last) in self.running.iter().zip(last.iter_mut()) {
                if last.is_some() {
                    *last = self.probe_once(&running.url).await.err();
                }
            }
            let Some(waiting) = last.iter().position(Option::is_some) else {
                return Ok(());
            };
            if Instant::now() > deadline {
                let running = &self.running[waiting];
                return Err(running.failed(format!(
                    "was not ready at {}/readyz within {READY_WITHIN:?} (last: {})",
                    running.url,
                    last[waiting].as_deref().unwrap_or_default()
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `Ok` when `url` answers `/readyz` with 200, else what it answered.
    async fn probe_once(&self, url: &str) -> Result<(), String> {
        match self.probe.get(format!("{url}/readyz")).send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(format!("HTTP {}", response.status())),
            Err(err) => Err(err.to_string()),
        }
    }

    /// Returns when a process exits, as the error naming it.
    pub async fn watch(&mut self) -> SupervisorError {
        loop {
            if let Err(err) = self.check_exits() {
                return err;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops every process still running, in reverse start order: SIGTERM, then SIGKILL after
    /// [`STOP_GRACE`]. Returns what did not go cleanly, one line each.
    pub async fn stop(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for running in self.running.iter_mut().rev() {
            if let Some(problem) = stop_one(running).await {
                problems.push(problem);
            }
        }
        problems
    }
}

/// Stops one process; `Some` says what went wrong.
async fn stop_one(running: &mut Running) -> Option<String> {
    let pid = running.pid();
    let name = running.name.clone();
    match running.poll_exit() {
        Ok(Some(_)) => return None,
        Ok(None) => {}
        Err(err) => return Some(err.to_string()),
    }
    if let Err(err) = terminate(pid) {
        return Some(format!("SIGTERM to {name} (pid {pid}): {err}"));
    }
    let deadline = Instant::now() + STOP_GRACE;
    loop {
        match running.poll_exit() {
            Ok(Some(status)) if status.success() => return None,
            Ok(Some(status)) => return Some(format!("{name} (pid {pid}) stopped with {status}")),
            Ok(None) if Instant::now() > deadline => break,
            Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(err) => return Some(err.to_string()),
        }
    }
    // The child is not reaped yet, so the PID is still this process.
    let killed = running.child.kill().and_then(|()| running.child.wait());
    running.status = killed.as_ref().ok().copied();
    Some(match killed {
        Ok(_) => format!("{name} (pid {pid}) did not stop within {STOP_GRACE:?}: killed"),
        Err(err) => format!("killing {name} (pid {pid}): {err}"),
    })
}

/// SIGTERM to `pid`.
fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: kill(2) only sends a signal; `pid` is a child of ours that has not been reaped, so
    // it cannot name another process.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to send the child SIGTERM when this process (its forking thread) dies.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe
    // functions may be called: prctl(2) is a plain system call that touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// The last lines of a log, for failure messages; what cannot be read is said so.
pub fn log_tail(path: &Path) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
        }
        Err(err) => format!("(cannot read {}: {err})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let tail = log_tail(&path);
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.starts_with("line 11\n"), "{tail}");
        assert!(tail.ends_with("line 30"), "{tail}");
        assert!(log_tail(&dir.path().join("none")).contains("cannot read"));
    }
}
