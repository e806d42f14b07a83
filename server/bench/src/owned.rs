//! A process the bench started, in a temporary directory of its own with its output in a log
//! there: `kcp start` for most commands, `kcp sharded` for `workspaces --shards`. Stopping is
//! SIGTERM and a bounded wait for the exit (what a supervisor does); dropping it kills the
//! process if it still runs and removes the directory, so no run leaves anything behind.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use crate::server::{ServerError, Stopped, io};

const POLL: Duration = Duration::from_millis(5);

/// A running process and its directory.
pub struct OwnedProcess {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
}

impl OwnedProcess {
    /// A fresh directory `kcp-bench-<random>` in the temporary directory, for [`Self::spawn`].
    pub fn fresh_dir() -> Result<PathBuf, ServerError> {
        let dir = std::env::temp_dir().join(format!("kcp-bench-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        Ok(dir)
    }

    /// Spawns `command` with its stdout and stderr in `<dir>/<log_name>`; the process owns `dir`.
    pub fn spawn(command: &mut Command, dir: PathBuf, log_name: &str) -> Result<Self, ServerError> {
        let log = dir.join(log_name);
        let out = std::fs::File::create(&log).map_err(io(format!("creating {log_name}")))?;
        let err = out.try_clone().map_err(io(format!("opening {log_name}")))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io(format!("starting {:?}", command.get_program())))?;
        Ok(Self { child, dir, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Result<Option<ExitStatus>, ServerError> {
        self.child.try_wait().map_err(io("waiting for kcp"))
    }

    /// Everything the process printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of the output, for error messages.
    pub fn log_tail(&self) -> String {
        let text = self.output();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Sends SIGTERM and waits up to `within` for the exit (the process is killed after that).
    pub async fn stop(&mut self, within: Duration) -> Result<Stopped, ServerError> {
        let asked = Instant::now();
        let term = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .map_err(io("running kill -TERM"))?;
        if term.success() {
            while asked.elapsed() < within {
                if let Some(status) = self.exited()? {
                    return Ok(Stopped {
                        exit_code: status.code(),
                        shutdown_ms: asked.elapsed().as_secs_f64() * 1e3,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        tracing::warn!(log = %self.log_tail(), "kcp did not exit after SIGTERM; killing it");
        Ok(Stopped {
            exit_code: None,
            shutdown_ms: asked.elapsed().as_secs_f64() * 1e3,
        })
    }
}

impl Drop for OwnedProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
