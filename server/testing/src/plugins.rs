//! The workspace plugins (`kubectl-ws`, `kubectl-create-workspace`, crate `kcp-kubectl-plugins`)
//! driven through the installed kubectl releases, as users run them: `kubectl ws …` and
//! `kubectl create workspace …` find the plugins on `PATH`.
//!
//! The server's tests cannot name the plugin binaries with `env!("CARGO_BIN_EXE_…")` (they belong
//! to another package), so [`plugin_dir`] finds them next to the `kcp` binary Cargo built for the
//! test and builds them there ([`crate::binaries`]) once per test process. The plugins rewrite the kubeconfig (`kubectl ws use`), so each
//! [`Kubectl::with_plugins`] works on its own copy, named by `KUBECONFIG`: kubectl looks plugins
//! up only when the plugin name comes before any flag, so `--kubeconfig` cannot be the first
//! argument.

use std::path::{Path, PathBuf};

use crate::binaries::workspace_binary;
use crate::dir::temp_dir;
use crate::kubectl::Kubectl;

/// The directory holding `kubectl-ws` and `kubectl-create-workspace`, built from the current tree
/// next to the test's other binaries ([`workspace_binary`]). `kcp_binary` is kept so that callers
/// name the build whose plugins they want; it is the same directory.
pub fn plugin_dir(kcp_binary: &Path) -> PathBuf {
    let plugin = workspace_binary("kcp-kubectl-plugins", "kubectl-ws");
    let dir = plugin
        .parent()
        .expect("the plugin has a directory")
        .to_owned();
    debug_assert_eq!(Some(dir.as_path()), kcp_binary.parent());
    assert!(
        dir.join("kubectl-create-workspace").is_file(),
        "no kubectl-create-workspace in {}",
        dir.display()
    );
    dir
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
