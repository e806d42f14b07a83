//! Container processes: started through the agent's `exec` helper in their own process group,
//! stopped like a runtime stops a container.
//!
//! A container's PID is the helper's PID (it `execve`s the program). Stopping sends SIGTERM to
//! that process only, as a runtime signals PID 1 of the container, waits for the grace period and
//! then SIGKILLs the whole process group; when the main process exits, whatever it left in its
//! group is killed too (a container's PID namespace would take them down with PID 1).
//!
//! A container's stdin is `/dev/null` unless its spec says `stdin: true` (then a pipe the agent
//! keeps open for `kubectl attach`, [`crate::container_input`]); with `tty: true` its stdin,
//! stdout and stderr are one pseudo terminal, its controlling terminal, whose output is the log's
//! stdout, as a CRI runtime's.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::container_input::{ContainerInput, InputSpec};

use crate::container_log::{self, LogFiles, Stream};
use crate::error::{Result, io};
use crate::exec::ExecSpec;
use crate::terminal;

/// How a container process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    pub signal: Option<i32>,
}

impl Exit {
    fn from_status(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit { code, signal: None },
            // A runtime reports death by signal N as exit code 128 + N.
            (None, Some(signal)) => Exit {
                code: 128 + signal,
                signal: Some(signal),
            },
            (None, None) => Exit {
                code: 255,
                signal: None,
            },
        }
    }

    pub fn success(&self) -> bool {
        self.code == 0
    }
}

pub struct Process {
    child: Child,
    pid: u32,
    input: Option<ContainerInput>,
}

/// A channel whose bytes are written to a container's stdin pipe, until every sender is dropped
/// (then the pipe is closed: the container reads the end of its input).
pub fn keep_writing(mut pipe: ChildStdin) -> mpsc::Sender<Bytes> {
    let (sender, mut input) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        while let Some(data) = input.recv().await {
            if pipe.write_all(&data).await.is_err() {
                return;
            }
        }
    });
    sender
}

impl Process {
    /// Writes `spec` to `spec_file` and starts `agent_exe exec --spec spec_file`; its stdout and
    /// stderr are copied into `logs` (see [`container_log`]) until the container's processes
    /// have all closed them. `input` says whether its stdin stays open (a pipe kept in
    /// [`Process::input`]) and whether stdout and stderr are one pseudo terminal instead.
    pub fn spawn(
        agent_exe: &Path,
        spec: &ExecSpec,
        spec_file: &Path,
        logs: &LogFiles,
        input: InputSpec,
    ) -> Result<Process> {
        let bytes = serde_json::to_vec_pretty(spec)?;
        std::fs::write(spec_file, bytes).map_err(io(format!("writing {}", spec_file.display())))?;
        if let Some(dir) = logs.run.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        let starting = format!("starting {}", agent_exe.display());
        let mut command = Command::new(agent_exe);
        command
            .arg("exec")
            .arg("--spec")
            .arg(spec_file)
            .env_clear()
            .kill_on_drop(false);
        let (child, container_input) = if input.tty {
            let terminal = terminal::attach_new(&mut command).map_err(io(starting.clone()))?;
            let child = command.spawn().map_err(io(starting.clone()))?;
            drop(command);
            let output = terminal.master.try_clone().map_err(io(starting.clone()))?;
            tokio::spawn(container_log::copy(
                tokio::fs::File::from_std(output),
                Stream::Stdout,
                logs.clone(),
            ));
            let stdin = if input.stdin {
                Some(terminal.writer().map_err(io(starting.clone()))?)
            } else {
                None
            };
            let resize = terminal.resizer().map_err(io(starting))?;
            (child, ContainerInput::new(input, stdin, Some(resize)))
        } else {
            let stdin = if input.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            };
            let mut child = command
                .stdin(stdin)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
                .map_err(io(starting))?;
            if let Some(stdout) = child.stdout.take() {
                tokio::spawn(container_log::copy(stdout, Stream::Stdout, logs.clone()));
            }
            if let Some(stderr) = child.stderr.take() {
                tokio::spawn(container_log::copy(stderr, Stream::Stderr, logs.clone()));
            }
            let stdin = child.stdin.take().map(keep_writing);
            (child, ContainerInput::new(input, stdin, None))
        };
        let pid = child.id().unwrap_or(0);
        Ok(Process {
            child,
            pid,
            input: Some(container_input),
        })
    }

    /// The container's stdin and terminal, for attach sessions (taken once, to register them).
    pub fn input(&mut self) -> Option<ContainerInput> {
        self.input.take()
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn signal(&self, signal: i32) {
        if let Ok(pid) = i32::try_from(self.pid)
            && pid > 0
        {
            // SAFETY: kill(2) on the PID of a child we have not reaped yet.
            unsafe { libc::kill(pid, signal) };
        }
    }

    fn kill_group(&self) {
        if let Ok(pid) = i32::try_from(self.pid)
            && pid > 0
        {
            // SAFETY: the group was created for this child (process_group(0)).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }

    /// Waits for the main process to exit, then kills what it left in its group.
    pub async fn wait(&mut self) -> Exit {
        let exit = match self.child.wait().await {
            Ok(status) => Exit::from_status(status),
            Err(_) => Exit {
                code: 255,
                signal: None,
            },
        };
        self.kill_group();
        exit
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL to the group.
    pub async fn stop(&mut self, grace: Duration) -> Exit {
        self.signal(libc::SIGTERM);
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => {
                self.kill_group();
                Exit::from_status(status)
            }
            _ => {
                self.kill_group();
                self.wait().await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_like_a_runtime() {
        assert_eq!(
            Exit::from_status(ExitStatus::from_raw(3 << 8)),
            Exit {
                code: 3,
                signal: None
            }
        );
        assert_eq!(
            Exit::from_status(ExitStatus::from_raw(libc::SIGKILL)),
            Exit {
                code: 137,
                signal: Some(9)
            }
        );
        assert!(
            Exit {
                code: 0,
                signal: None
            }
            .success()
        );
    }
}
