//! The workspace plugins (`kubectl-ws`, `kubectl-create-workspace`, crate `kcp-kubectl-plugins`)
//! driven through the installed kubectl releases, as users run them: `kubectl ws …` and
//! `kubectl create workspace …` find the plugins on `PATH`.
//!
//! The server's tests cannot name the plugin binaries with `env!("CARGO_BIN_EXE_…")` (they belong
//! to another package), so [`plugin_dir`] finds them next to the `kcp` binary Cargo built for the
//! test and builds them there (`cargo build -p kcp-kubectl-plugins`, same target directory and
//! profile) once per test process. The plugins rewrite the kubeconfig (`kubectl ws use`), so each
//! [`PluginKubectl`] works on its own copy, named by `KUBECONFIG`: kubectl looks plugins up only
//! when the plugin name comes before any flag, so `--kubeconfig` cannot be the first argument.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::dir::temp_dir;
use crate::kubectl::Run;

/// Bounds one kubectl (or plugin) command; only a guard against a hung command.
const RUN_WITHIN: Duration = Duration::from_secs(120);

/// Bounds building the plugins (a cold build of a small crate on a loaded machine).
const BUILD_WITHIN: Duration = Duration::from_secs(900);

const PLUGINS: [&str; 2] = ["kubectl-ws", "kubectl-create-workspace"];

static BUILT: OnceLock<PathBuf> = OnceLock::new();

/// The directory holding `kubectl-ws` and `kubectl-create-workspace`: the directory of
/// `kcp_binary` (`env!("CARGO_BIN_EXE_kcp")`), where they are built (once per process) from the
/// current tree. When that build fails (someone's edit in progress) binaries already there are
/// used; with none there the test fails with Cargo's output.
pub fn plugin_dir(kcp_binary: &Path) -> PathBuf {
    BUILT
        .get_or_init(|| {
            let dir = kcp_binary
                .parent()
                .expect("the kcp binary has a directory")
                .to_owned();
            build(&dir);
            dir
        })
        .clone()
}

fn present(dir: &Path) -> bool {
    PLUGINS.iter().all(|name| dir.join(name).is_file())
}

fn build(dir: &Path) {
    // <target>/<profile>/kcp
    let profile = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("debug")
        .to_owned();
    let target = dir.parent().expect("a target directory").to_owned();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(cargo);
    command
        .args(["build", "--quiet", "-p", "kcp-kubectl-plugins", "--bins"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match profile.as_str() {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let child = command
        .spawn()
        .unwrap_or_else(|error| panic!("starting cargo to build the kubectl plugins: {error}"));
    let pid = child.id();
    let (sender, receiver) = channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    let output = match receiver.recv_timeout(BUILD_WITHIN) {
        Ok(output) => output.expect("waiting for cargo"),
        Err(_) => {
            // Only this PID (cargo itself), still running, so not reaped yet.
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("building the kubectl plugins took longer than {BUILD_WITHIN:?}")
        }
    };
    if output.status.success() && present(dir) {
        return;
    }
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        present(dir),
        "building the kubectl plugins into {} failed ({}):\n{log}",
        dir.display(),
        output.status
    );
    eprintln!(
        "building the kubectl plugins failed ({}); using the binaries in {}:\n{log}",
        output.status,
        dir.display()
    );
}

/// One kubectl release with the workspace plugins on its `PATH`, on its own copy of a kubeconfig.
pub struct PluginKubectl {
    binary: PathBuf,
    version: String,
    plugins: PathBuf,
    kubeconfig: PathBuf,
    home: TempDir,
}

impl PluginKubectl {
    /// kubectl `version` (e.g. `"1.33"`, from `$KUBECTL_DIR` or the Cloud SDK) with the plugins
    /// in `plugins` ([`plugin_dir`]), using a copy of `kubeconfig`.
    pub fn new(version: &str, kubeconfig: &Path, plugins: &Path) -> PluginKubectl {
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
        let home = temp_dir(&format!("kubectl-ws-{version}"));
        let copy = home.path().join("kubeconfig");
        std::fs::copy(kubeconfig, &copy)
            .unwrap_or_else(|error| panic!("copying {}: {error}", kubeconfig.display()));
        PluginKubectl {
            binary,
            version: version.to_owned(),
            plugins: plugins.to_owned(),
            kubeconfig: copy,
            home,
        }
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// This kubectl's kubeconfig (the copy the plugins rewrite).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A directory private to this kubectl (its `HOME`), for files a test hands to it.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Runs `kubectl args…` (plugins included) to completion.
    pub fn run(&self, args: &[&str]) -> Run {
        let mut path = OsString::from(self.plugins.as_os_str());
        if let Some(rest) = std::env::var_os("PATH") {
            path.push(":");
            path.push(rest);
        }
        let child = Command::new(&self.binary)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", self.binary.display()));
        let pid = child.id();
        let (sender, receiver) = channel();
        std::thread::spawn(move || sender.send(child.wait_with_output()));
        let started = Instant::now();
        match receiver.recv_timeout(RUN_WITHIN) {
            Ok(output) => {
                let output = output.expect("waiting for kubectl");
                Run {
                    status: output.status,
                    stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                }
            }
            Err(_) => {
                // Only this PID, which the waiting thread has not reaped yet (it is still running).
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                panic!(
                    "kubectl {} {args:?} did not finish within {:?}",
                    self.version,
                    started.elapsed()
                )
            }
        }
    }

    /// Runs a command that must succeed and returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args).success(&self.version, args)
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
}
