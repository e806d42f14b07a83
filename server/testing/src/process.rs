//! A child process that is stopped by its PID when its guard goes away.
//!
//! Tests start servers that would otherwise outlive a panicking test and keep ports, files and CPU
//! busy for every later test. The guard owns the `Child`, so it signals exactly the process it
//! started (never by name), and its output goes to a log file that failures quote.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// How often to look whether a process has exited.
const POLL: Duration = Duration::from_millis(50);

/// How much of a log a failure message quotes.
const LOG_TAIL: usize = 8_000;

/// A running child process whose stdout and stderr append to a log file. Dropping the guard kills
/// the process (SIGKILL) if it still runs and reaps it.
pub struct ChildGuard {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ChildGuard {
    /// Starts `command` with stdin closed and its output appended to `log`.
    pub fn spawn(name: &str, command: &mut Command, log: &Path) -> ChildGuard {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|error| panic!("opening {}: {error}", log.display()));
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("duplicating a log file handle"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|error| panic!("starting {name} ({command:?}): {error}"));
        ChildGuard {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended (and reaps it), else `None`.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|error| panic!("waiting for {}: {error}", self.name))
    }

    /// Asks the process to shut down: SIGTERM to its PID. `kill(1)` from procps sends it, which
    /// keeps this crate free of `unsafe` and of a libc binding.
    pub fn terminate(&mut self) {
        if self.exited().is_some() {
            return;
        }
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("running kill(1)");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Waits for the process to exit, at most `within`; past that it is killed and the test fails.
    pub async fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            if Instant::now() > deadline {
                self.kill();
                panic!(
                    "{} (pid {}) did not exit within {within:?}\n{}",
                    self.name,
                    self.pid(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// SIGTERM, then waits for the exit status (at most `within`).
    pub async fn stop(&mut self, within: Duration) -> ExitStatus {
        self.terminate();
        self.wait(within).await
    }

    /// SIGKILL by PID and reap; a process that already exited is left alone.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            // The process may exit between the check and the signal; either way it is gone after.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Everything the process (and earlier runs logging to the same file) wrote.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The end of the log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = self.log();
        let mut start = log.len().saturating_sub(LOG_TAIL);
        while !log.is_char_boundary(start) {
            start += 1;
        }
        format!(
            "--- {} log ({}) ---\n{}",
            self.name,
            self.log.display(),
            &log[start..]
        )
    }
}

/// Waits at most `within` for `child` (stdout and stderr piped) and collects its output; `None`
/// when it is still running then, after killing it by its PID.
pub(crate) fn output_within(child: Child, within: Duration) -> Option<std::io::Result<Output>> {
    let pid = child.id();
    let (sender, receiver) = channel();
    // wait_with_output drains both pipes, so a chatty command cannot block on a full pipe.
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(within) {
        Ok(output) => Some(output),
        Err(_) => {
            // Only this PID, which the waiting thread has not reaped yet (it is still running).
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            None
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard's whole point: a process it started does not outlive it.
    #[test]
    fn dropping_the_guard_kills_the_process() {
        let dir = crate::temp_dir("guard");
        let guard = ChildGuard::spawn(
            "sleep",
            Command::new("sleep").arg("600"),
            &dir.path().join("sleep.log"),
        );
        let proc_entry = PathBuf::from(format!("/proc/{}", guard.pid()));
        assert!(proc_entry.exists());
        drop(guard);
        // Killed and reaped, so not even a zombie entry is left.
        assert!(!proc_entry.exists());
    }

    #[tokio::test]
    async fn stop_reports_the_exit_status_after_sigterm() {
        let dir = crate::temp_dir("guard");
        let script = "trap 'exit 7' TERM; echo ready; while :; do sleep 0.1; done";
        let mut guard = ChildGuard::spawn(
            "sh",
            Command::new("sh").args(["-c", script]),
            &dir.path().join("sh.log"),
        );
        // The trap is installed once the shell says so; a signal before that would kill it.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !guard.log().contains("ready") {
            assert!(Instant::now() < deadline, "the shell never got ready");
            tokio::time::sleep(POLL).await;
        }
        let status = guard.stop(Duration::from_secs(60)).await;
        assert_eq!(status.code(), Some(7));
    }
}
