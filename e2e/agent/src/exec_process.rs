//! A command run inside a running container, as `kubectl exec` asks kubelet for one: started
//! through the agent's `exec` helper joining the namespaces of the container's main process
//! (as exec probes are, [`crate::probes`]), with that process's environment and working
//! directory (from `/proc/<pid>`), stdin, stdout and stderr as pipes or, with `tty`, one pseudo
//! terminal whose size follows the client's resize messages.
//!
//! [`Running`] delivers the output as [`Event`]s and then the exit code, once the process has
//! exited and its output is drained (bounded by [`DRAIN`]: a background child keeping the
//! output open does not hold the stream). Dropping a [`Running`] whose command has not exited
//! (the client went away) kills the command's process group, so nothing is left behind.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};

use crate::exec::ExecSpec;
use crate::process;
use crate::terminal::{self, TermSize};

/// How long output may still arrive after the process exited.
const DRAIN: Duration = Duration::from_secs(2);

/// What the command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Stdout(Bytes),
    Stderr(Bytes),
    /// The exit code (128 + N for death by signal N); always the last event.
    Exited(i32),
}

/// What to run.
pub struct Request {
    pub agent_exe: PathBuf,
    pub spec: ExecSpec,
    /// Where the spec is written for the helper (removed when the command ends).
    pub spec_file: PathBuf,
    pub stdin: bool,
    pub tty: bool,
}

/// A started command.
pub struct Running {
    pub events: mpsc::Receiver<Event>,
    /// Bytes for the command's stdin; dropping it closes stdin.
    pub stdin: Option<mpsc::Sender<Bytes>>,
    /// New terminal sizes (with `tty`).
    pub resize: Option<mpsc::Sender<TermSize>>,
    /// Dropped with the `Running`: kills the command if it still runs.
    _guard: oneshot::Sender<()>,
}

impl Running {
    /// Output that another source produces (attach: a container's log as it is written), and
    /// the container's own stdin and terminal when it has them; nothing to kill.
    pub fn attached(
        events: mpsc::Receiver<Event>,
        stdin: Option<mpsc::Sender<Bytes>>,
        resize: Option<mpsc::Sender<TermSize>>,
    ) -> Running {
        let (guard, _) = oneshot::channel();
        Running {
            events,
            stdin,
            resize,
            _guard: guard,
        }
    }
}

/// The environment of a process (`/proc/<pid>/environ`).
pub fn environment(pid: u32) -> Vec<(String, String)> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let text = String::from_utf8_lossy(entry);
            let (key, value) = text.split_once('=')?;
            Some((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The working directory of a process.
pub fn working_directory(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_else(|_| PathBuf::from("/"))
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid)
        && pid > 0
    {
        // SAFETY: the group was created for this command (setsid or process_group(0)).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// Starts the command.
pub fn start(request: Request) -> std::io::Result<Running> {
    let bytes = serde_json::to_vec(&request.spec).map_err(std::io::Error::other)?;
    std::fs::write(&request.spec_file, bytes)?;
    let mut command = tokio::process::Command::new(&request.agent_exe);
    command
        .arg("exec")
        .arg("--spec")
        .arg(&request.spec_file)
        .env_clear()
        .kill_on_drop(false);
    let (events_tx, events_rx) = mpsc::channel(64);
    let (guard, dropped) = oneshot::channel();
    let mut outputs = Vec::new();
    let (stdin, resize, child) = if request.tty {
        let terminal = terminal::attach_new(&mut command)?;
        let child = command.spawn()?;
        drop(command);
        outputs.push(read_terminal(
            terminal.master.try_clone()?,
            events_tx.clone(),
        ));
        let stdin = terminal.writer()?;
        let resize = terminal.resizer()?;
        (request.stdin.then_some(stdin), Some(resize), child)
    } else {
        let stdin_mode = if request.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        command
            .stdin(stdin_mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command.spawn()?;
        if let Some(stdout) = child.stdout.take() {
            outputs.push(tokio::spawn(copy_output(
                stdout,
                events_tx.clone(),
                Event::Stdout,
            )));
        }
        if let Some(stderr) = child.stderr.take() {
            outputs.push(tokio::spawn(copy_output(
                stderr,
                events_tx.clone(),
                Event::Stderr,
            )));
        }
        let stdin = child.stdin.take().map(process::keep_writing);
        (stdin, None, child)
    };
    tokio::spawn(supervise(
        child,
        outputs,
        events_tx,
        dropped,
        request.spec_file,
    ));
    Ok(Running {
        events: events_rx,
        stdin,
        resize,
        _guard: guard,
    })
}

async fn copy_output(
    mut output: impl AsyncRead + Unpin,
    events: mpsc::Sender<Event>,
    event: fn(Bytes) -> Event,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        match output.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                if events
                    .send(event(Bytes::copy_from_slice(&buffer[..read])))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// Reads the terminal until every process holding its other end closed it (EIO).
fn read_terminal(mut terminal: File, events: mpsc::Sender<Event>) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            match terminal.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(read) => {
                    let data = Bytes::copy_from_slice(&buffer[..read]);
                    if events.blocking_send(Event::Stdout(data)).is_err() {
                        return;
                    }
                }
            }
        }
    })
}

/// Waits for the command, then for its output, then reports the exit code; kills the group if
/// the [`Running`] is dropped first.
async fn supervise(
    mut child: Child,
    outputs: Vec<tokio::task::JoinHandle<()>>,
    events: mpsc::Sender<Event>,
    dropped: oneshot::Receiver<()>,
    spec_file: PathBuf,
) {
    let pid = child.id().unwrap_or(0);
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        _ = dropped => {
            kill_group(pid);
            let _ = child.wait().await;
            remove(&spec_file).await;
            return;
        }
    };
    remove(&spec_file).await;
    let drained = futures::future::join_all(outputs);
    if tokio::time::timeout(DRAIN, drained).await.is_err() {
        tracing::debug!(pid, "exec output still open after the command exited");
    }
    let code = status.map_or(255, |status| {
        use std::os::unix::process::ExitStatusExt as _;
        status
            .code()
            .or_else(|| status.signal().map(|signal| 128 + signal))
            .unwrap_or(255)
    });
    let _ = events.send(Event::Exited(code)).await;
}

async fn remove(path: &Path) {
    let _ = tokio::fs::remove_file(path).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(dir: &Path, argv: &[&str], stdin: bool, tty: bool) -> Request {
        // `sh` itself plays the helper here: `sh exec --spec FILE` would not work, so the test
        // helper is a script that ignores its arguments and runs the command.
        let script = dir.join("helper.sh");
        let body = format!("#!/bin/sh\nexec {}\n", argv.join(" "));
        std::fs::write(&script, body).unwrap();
        let mut permissions = std::fs::metadata(&script).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&script, permissions).unwrap();
        Request {
            agent_exe: script,
            spec: ExecSpec {
                program: PathBuf::from("/bin/sh"),
                argv: Vec::new(),
                env: Vec::new(),
                workdir: PathBuf::from("/"),
                netns: None,
                join_pid: None,
                hostname: None,
                mounts: Vec::new(),
            },
            spec_file: dir.join("spec.json"),
            stdin,
            tty,
        }
    }

    async fn collect(running: &mut Running) -> (Vec<u8>, Vec<u8>, i32) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(event) = running.events.recv().await {
            match event {
                Event::Stdout(data) => out.extend_from_slice(&data),
                Event::Stderr(data) => err.extend_from_slice(&data),
                Event::Exited(code) => return (out, err, code),
            }
        }
        panic!("no exit event");
    }

    #[tokio::test]
    async fn pipes_carry_stdin_stdout_stderr_and_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let mut running = start(request(
            dir.path(),
            &["sh", "-c", "'cat; echo oops >&2; exit 3'"],
            true,
            false,
        ))
        .unwrap();
        let stdin = running.stdin.take().unwrap();
        stdin.send(Bytes::from_static(b"hello\n")).await.unwrap();
        drop(stdin);
        let (out, err, code) = collect(&mut running).await;
        assert_eq!(out, b"hello\n");
        assert_eq!(err, b"oops\n");
        assert_eq!(code, 3);
        assert!(
            !dir.path().join("spec.json").exists(),
            "the spec file is removed"
        );
    }

    #[tokio::test]
    async fn a_terminal_is_the_commands_controlling_tty_and_follows_resizes() {
        let dir = tempfile::tempdir().unwrap();
        let mut running = start(request(
            dir.path(),
            &[
                "sh",
                "-c",
                "'read line; stty size; tty -s && echo on-a-tty'",
            ],
            true,
            true,
        ))
        .unwrap();
        running
            .resize
            .as_ref()
            .unwrap()
            .send(TermSize {
                width: 100,
                height: 30,
            })
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        running
            .stdin
            .as_ref()
            .unwrap()
            .send(Bytes::from_static(b"go\n"))
            .await
            .unwrap();
        let (out, _, code) = collect(&mut running).await;
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("30 100"), "{text}");
        assert!(text.contains("on-a-tty"), "{text}");
        assert_eq!(code, 0);
    }

    #[tokio::test]
    async fn dropping_a_running_command_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("pid");
        let mut running = start(request(
            dir.path(),
            &[
                "sh",
                "-c",
                &format!("'echo $$ > {}; sleep 30'", marker.display()),
            ],
            false,
            false,
        ))
        .unwrap();
        let mut pid = String::new();
        for _ in 0..100 {
            pid = std::fs::read_to_string(&marker).unwrap_or_default();
            if !pid.trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let pid: i32 = pid.trim().parse().unwrap();
        running.events.close();
        drop(running);
        let mut gone = false;
        for _ in 0..100 {
            // SAFETY: signal 0 only checks that the process exists.
            if unsafe { libc::kill(pid, 0) } == -1 {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "the command's process is killed");
    }
}
