//! The installed kubectl releases as test clients.
//!
//! Compatibility means "the kubectl people have works", so the acceptance tests drive the real
//! binaries (`/usr/lib/google-cloud-sdk/bin/kubectl.1.XX`, or `$KUBECTL_DIR/kubectl.1.XX`), each
//! with its own `HOME` so discovery caches never leak between tests or versions.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::dir::temp_dir;
use crate::process::output_within;

/// Bounds one kubectl command; only a guard against a hung command.
const RUN_WITHIN: Duration = Duration::from_secs(120);

/// How long a background kubectl may stay silent while a test waits for a line.
const LINE_WITHIN: Duration = Duration::from_secs(60);

/// One kubectl release pointed at one kubeconfig.
pub struct Kubectl {
    binary: PathBuf,
    version: String,
    kubeconfig: PathBuf,
    home: TempDir,
    /// A directory of kubectl plugins put first on `PATH`. With it the kubeconfig is named by
    /// `KUBECONFIG`, not `--kubeconfig`: kubectl looks plugins up only when the plugin name comes
    /// before any flag.
    plugins: Option<PathBuf>,
}

/// The outcome of one kubectl command.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    /// kubectl `version` (e.g. `"1.27"`) using `kubeconfig`; a missing binary fails the test.
    pub fn new(version: &str, kubeconfig: &Path) -> Kubectl {
        let home = temp_dir(&format!("kubectl-{version}"));
        Kubectl::installed(version, kubeconfig.to_owned(), home, None)
    }

    /// kubectl `version` (`/usr/lib/google-cloud-sdk/bin/kubectl.<version>`, or in `$KUBECTL_DIR`)
    /// with `HOME` `home` and, given `plugins`, that plugin directory (see `plugins` of [`Kubectl`]); a
    /// missing binary fails the test.
    pub(crate) fn installed(
        version: &str,
        kubeconfig: PathBuf,
        home: TempDir,
        plugins: Option<PathBuf>,
    ) -> Kubectl {
        let dir = std::env::var_os("KUBECTL_DIR").map_or_else(
            || PathBuf::from("/usr/lib/google-cloud-sdk/bin"),
            PathBuf::from,
        );
        let binary = dir.join(format!("kubectl.{version}"));
        assert!(
            binary.is_file(),
            "kubectl {version} not found at {}",
            binary.display()
        );
        Kubectl {
            binary,
            version: version.to_owned(),
            kubeconfig,
            home,
            plugins,
        }
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// The kubectl binary itself (for a test that puts it on a shell's `PATH` as `kubectl`).
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// This kubectl's kubeconfig (with plugins, the copy they may rewrite).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A directory private to this kubectl (its `HOME`), for files a test hands to it.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The command `kubectl --kubeconfig=… args…` with this kubectl's `HOME`, stdin null and
    /// stdout/stderr piped, for a test that drives it itself (a terminal, stdin, its exit).
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(&self.binary);
        match &self.plugins {
            None => {
                command
                    .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
                    .env_remove("KUBECONFIG");
            }
            Some(plugins) => {
                let mut path = OsString::from(plugins.as_os_str());
                if let Some(rest) = std::env::var_os("PATH") {
                    path.push(":");
                    path.push(rest);
                }
                command
                    .env("KUBECONFIG", &self.kubeconfig)
                    .env("PATH", path);
            }
        }
        command
            .args(args)
            .env("HOME", self.home.path())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs `kubectl --kubeconfig=… args…` (with plugins: `kubectl args…`, plugins included) to
    /// completion.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_env(args, &[])
    }

    /// Like [`Self::run`] with extra environment variables (e.g. `EDITOR`).
    pub fn run_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let child = self
            .command(args, env)
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", self.binary.display()));
        let Some(output) = output_within(child, RUN_WITHIN) else {
            panic!(
                "kubectl {} {args:?} did not finish within {RUN_WITHIN:?}",
                self.version
            )
        };
        let output = output.expect("waiting for kubectl");
        Run {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `args` (e.g. `edit configmap x`) with `EDITOR` set to a shell script whose body is
    /// `script` (it gets the file to edit as `$1`).
    pub fn run_with_editor(&self, args: &[&str], script: &str) -> Run {
        let editor = self.home.path().join("editor.sh");
        std::fs::write(&editor, format!("#!/bin/sh\n{script}\n")).expect("writing the editor");
        std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755))
            .expect("making the editor executable");
        let editor = editor.to_str().expect("a UTF-8 path");
        self.run_with_env(args, &[("EDITOR", editor), ("KUBE_EDITOR", "")])
    }

    /// Runs a command that must succeed and returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args).success(&self.version, args)
    }

    /// Runs `args` until it succeeds with `want` as its stdout (trimmed), within `within`.
    pub fn wait_for_output(&self, args: &[&str], want: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let run = self.run(args);
            if run.status.success() && run.stdout.trim() == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl {} {args:?}: not {want:?} within {within:?}; last: {run:?}",
                self.version
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Runs a command that must fail and returns its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert!(
            !run.status.success(),
            "kubectl {} {args:?} should have failed:\n{}",
            self.version,
            run.stdout
        );
        run.stderr
    }

    /// Starts a long-running command (e.g. `get -w`) whose stdout lines a test reads while it
    /// acts; dropping the handle kills it.
    pub fn background(&self, args: &[&str]) -> BackgroundKubectl {
        self.spawn_background(args, Stdio::null())
    }

    /// As [`Kubectl::background`], with a stdin the test writes ([`BackgroundKubectl::send`])
    /// and closes ([`BackgroundKubectl::close_stdin`]): `attach -i`, `exec -i`.
    pub fn interactive(&self, args: &[&str]) -> BackgroundKubectl {
        self.spawn_background(args, Stdio::piped())
    }

    fn spawn_background(&self, args: &[&str], stdin: Stdio) -> BackgroundKubectl {
        let mut child = self
            .command(args, &[])
            .stdin(stdin)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", self.binary.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        BackgroundKubectl {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }
}

impl Run {
    /// The stdout of a command that must have succeeded.
    pub fn success(self, version: &str, args: &[&str]) -> String {
        assert!(
            self.status.success(),
            "kubectl {version} {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout,
            self.stderr
        );
        self.stdout
    }
}

/// A kubectl command running in the background, its stdout read line by line.
pub struct BackgroundKubectl {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl BackgroundKubectl {
    /// Writes to the stdin of a command started with [`Kubectl::interactive`].
    pub fn send(&mut self, text: &str) {
        let stdin = self
            .stdin
            .as_mut()
            .expect("an interactive kubectl with stdin open");
        stdin
            .write_all(text.as_bytes())
            .expect("writing kubectl's stdin");
        stdin.flush().expect("flushing kubectl's stdin");
    }

    /// Closes the command's stdin (it reads end of file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Reads lines until one matches `wanted` and returns it; the output ending or staying silent
    /// for long fails the test (quoting everything read so far).
    pub fn wait_for_line(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + LINE_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no line with {what} within {LINE_WITHIN:?}; read: {:#?}",
                        self.seen
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "output ended before a line with {what}; read: {:#?}",
                        self.seen
                    )
                }
            }
        }
    }
}

impl Drop for BackgroundKubectl {
    fn drop(&mut self) {
        // Kills this child by its PID; it may have exited already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
