//! The workspace plugins (`kubectl-ws`, `kubectl-create-workspace`, crate `kcp-kubectl-plugins`)
//! driven through the installed kubectl releases, as users run them: `kubectl ws …` and
//! `kubectl create workspace …` find the plugins on `PATH`.
//!
//! The server's tests cannot name the plugin binaries with `env!("CARGO_BIN_EXE_…")` (they belong
//! to another package), so [`plugin_dir`] finds them next to the `kcp` binary Cargo built for the
//! test and builds them there (`cargo build -p kcp-kubectl-plugins`, same target directory and
//! profile) once per test process. The plugins rewrite the kubeconfig (`kubectl ws use`), so each
//! [`Kubectl::with_plugins`] works on its own copy, named by `KUBECONFIG`: kubectl looks plugins
//! up only when the plugin name comes before any flag, so `--kubeconfig` cannot be the first
//! argument.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::dir::temp_dir;
use crate::kubectl::Kubectl;
use crate::process::output_within;

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
    // On timeout only cargo itself is killed, by its PID.
    let Some(output) = output_within(child, BUILD_WITHIN) else {
        panic!("building the kubectl plugins took longer than {BUILD_WITHIN:?}")
    };
    let output = output.expect("waiting for cargo");
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

impl Kubectl {
    /// kubectl `version` (e.g. `"1.33"`, from `$KUBECTL_DIR` or the Cloud SDK) with the plugins
    /// in `plugins` ([`plugin_dir`]) first on its `PATH`, using a copy of `kubeconfig` (named by
    /// `KUBECONFIG`) that the plugins may rewrite.
    pub fn with_plugins(version: &str, kubeconfig: &Path, plugins: &Path) -> Kubectl {
        let home = temp_dir(&format!("kubectl-ws-{version}"));
        let copy = home.path().join("kubeconfig");
        std::fs::copy(kubeconfig, &copy)
            .unwrap_or_else(|error| panic!("copying {}: {error}", kubeconfig.display()));
        Kubectl::installed(version, copy, home, Some(plugins.to_owned()))
    }
}
