//! Reading and rewriting the kubeconfig the way upstream `kubectl ws` does
//! (`cli/pkg/workspace/plugin/use.go` `commitConfig`/`swapContexts`, `context.go`).
//!
//! The file's model, lookups and reading rules are kcp-kubeconfig's, which keeps the fields it does
//! not model (extensions, exec plugins, preferences; comments aside), so they survive a rewrite
//! untouched; only the named cluster/context entries the plugin owns are replaced. What is the
//! plugin's own is here: the `workspace.kcp.io/current` and `workspace.kcp.io/previous` entries,
//! switching to a workspace, going back, and `create-context`, with upstream's messages.

use std::path::{Path, PathBuf};

pub use kcp_kubeconfig::Selected;
use kcp_kubeconfig::{Cluster, Context, KubeconfigError, SelectError};

use crate::error::Error;

/// The context and cluster that always hold the workspace `kubectl ws` switched to.
pub const CURRENT: &str = "workspace.kcp.io/current";
/// The context (and, when it pointed at [`CURRENT`], cluster) remembered for `kubectl ws -`.
pub const PREVIOUS: &str = "workspace.kcp.io/previous";

/// A kubeconfig file and where it was read from.
#[derive(Debug, Clone)]
pub struct Kubeconfig {
    path: PathBuf,
    doc: kcp_kubeconfig::Kubeconfig,
}

/// Which file to use: `--kubeconfig`, else the first entry of `KUBECONFIG`, else `~/.kube/config`.
pub fn locate(
    explicit: Option<&Path>,
    env: Option<&str>,
    home: Option<&Path>,
) -> Result<PathBuf, Error> {
    kcp_kubeconfig::locate(explicit, env, home)
        .ok_or_else(|| Error::msg("no kubeconfig: set --kubeconfig, KUBECONFIG or HOME"))
}

impl Kubeconfig {
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, Error> {
        let doc = kcp_kubeconfig::Kubeconfig::from_yaml(text).map_err(|error| match error {
            KubeconfigError::Parse(source) => Error::KubeconfigSyntax {
                path: path.to_path_buf(),
                source,
            },
            other => Error::msg(other.to_string()),
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            doc,
        })
    }

    /// Directory relative file references (`certificate-authority`, `tokenFile`...) resolve against.
    pub fn dir(&self) -> &Path {
        kcp_kubeconfig::dir_of(&self.path)
    }

    pub fn to_yaml(&self) -> Result<String, Error> {
        self.doc
            .to_yaml()
            .map_err(|e| Error::msg(format!("encoding kubeconfig {}: {e}", self.path.display())))
    }

    /// Writes in place: truncating the existing file keeps its owner and permissions.
    pub fn save(&self) -> Result<(), Error> {
        std::fs::write(&self.path, self.to_yaml()?).map_err(|e| Error::io(&self.path, e))
    }

    pub fn current_context(&self) -> &str {
        &self.doc.current_context
    }

    fn set_current_context(&mut self, name: &str) {
        self.doc.current_context = name.to_owned();
    }

    pub fn context(&self, name: &str) -> Option<&Context> {
        self.doc.context(name)
    }

    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.doc.cluster(name)
    }

    pub fn user(&self, name: &str) -> Option<&kcp_kubeconfig::User> {
        self.doc.user(name)
    }

    /// The context to use (`--context` or `current-context`) with its cluster and user.
    pub fn select(&self, context_override: Option<&str>) -> Result<Selected, Error> {
        self.doc
            .select(context_override)
            .map_err(|error| match error {
                SelectError::NoContext => Error::msg(format!(
                    "no current context is set in kubeconfig {}",
                    self.path.display()
                )),
                SelectError::UnknownContext(name) => {
                    Error::msg(format!("current {name:?} context not found"))
                }
                SelectError::UnknownCluster(name) => {
                    Error::msg(format!("cluster {name:?} not found in kubeconfig"))
                }
            })
    }

    /// Upstream `commitConfig`: point [`CURRENT`] at `server` (copying the current cluster's
    /// other settings and the current context's user), and remember the current context as
    /// [`PREVIOUS`] (moving its cluster to [`PREVIOUS`] too when it was [`CURRENT`]).
    pub fn switch_to(&mut self, current: &Selected, server: &str) -> Result<(), Error> {
        let old_cluster = current.cluster.clone();
        let mut new_cluster = old_cluster.clone();
        new_cluster.server = server.to_owned();
        self.doc.set_cluster(CURRENT, new_cluster);

        let mut new_context = current.context.clone();
        new_context.cluster = CURRENT.to_owned();
        self.doc.set_context(CURRENT, new_context);

        let mut previous = current.context.clone();
        if current.cluster_name == CURRENT {
            previous.cluster = PREVIOUS.to_owned();
            self.doc.set_cluster(PREVIOUS, old_cluster);
        }
        self.doc.set_context(PREVIOUS, previous);
        self.set_current_context(CURRENT);
        Ok(())
    }

    /// Upstream `swapContexts` (`kubectl ws -`): exchange [`CURRENT`] and [`PREVIOUS`].
    /// Returns the server URL now current.
    pub fn swap_previous(&mut self, current: &Selected) -> Result<String, Error> {
        let mut current_context = current.context.clone();
        let mut previous = self
            .context(PREVIOUS)
            .cloned()
            .ok_or_else(|| Error::msg("no previous workspace found in kubeconfig"))?;
        let starting = self.clone();

        if current.cluster_name == CURRENT {
            let old = starting.cluster(CURRENT).cloned().ok_or_else(|| {
                Error::msg(format!("cluster {CURRENT:?} not found in kubeconfig"))
            })?;
            current_context.cluster = PREVIOUS.to_owned();
            self.doc.set_cluster(PREVIOUS, old);
        }
        if previous.cluster == PREVIOUS {
            let prev_cluster = starting.cluster(PREVIOUS).cloned().ok_or_else(|| {
                Error::msg(format!("cluster {PREVIOUS:?} not found in kubeconfig"))
            })?;
            previous.cluster = CURRENT.to_owned();
            self.doc.set_cluster(CURRENT, prev_cluster);
        }
        let new_cluster_name = previous.cluster.clone();
        self.doc.set_context(CURRENT, previous);
        self.doc.set_context(PREVIOUS, current_context);
        self.set_current_context(CURRENT);

        Ok(self
            .cluster(&new_cluster_name)
            .map(|c| c.server.clone())
            .unwrap_or_default())
    }

    /// Upstream `create-context`: a context and cluster named `name` copying the current ones,
    /// optionally with another server. Returns whether it existed before.
    pub fn create_context(
        &mut self,
        current: &Selected,
        name: &str,
        server: Option<&str>,
        overwrite: bool,
        keep_current: bool,
    ) -> Result<bool, Error> {
        let existed = self.context(name).is_some();
        if existed && !overwrite {
            return Err(Error::msg(format!(
                "context {name:?} already exists in kubeconfig, use --overwrite to update it"
            )));
        }
        let mut cluster = current.cluster.clone();
        if let Some(server) = server.filter(|s| !s.is_empty()) {
            cluster.server = server.to_owned();
        }
        self.doc.set_cluster(name, cluster);
        let mut context = current.context.clone();
        context.cluster = name.to_owned();
        self.doc.set_context(name, context);
        if !keep_current {
            self.set_current_context(name);
        }
        Ok(existed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
apiVersion: v1
kind: Config
preferences: {colors: true}
extensions:
- name: my-extension
  extension: {answer: 42}
clusters:
- name: base
  cluster:
    server: https://kcp.example:6443/clusters/root:org
    certificate-authority-data: Q0E=
    tls-server-name: kcp.example
    extensions:
    - name: keep-me
      extension: {x: 1}
- name: other
  cluster: {server: "https://other/"}
contexts:
- name: admin
  context: {cluster: base, user: admin, namespace: ns1}
- name: other
  context: {cluster: other, user: admin}
current-context: admin
users:
- name: admin
  user: {token: secret, exec-like-unknown: {foo: bar}}
"#;

    fn load() -> Kubeconfig {
        match Kubeconfig::parse(Path::new("/tmp/config"), CONFIG) {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    fn server_of(k: &Kubeconfig, cluster: &str) -> String {
        k.cluster(cluster)
            .map(|c| c.server.clone())
            .unwrap_or_default()
    }

    fn context_cluster(k: &Kubeconfig, context: &str) -> String {
        k.context(context)
            .map(|c| c.cluster.clone())
            .unwrap_or_default()
    }

    fn reparse(k: &Kubeconfig) -> Kubeconfig {
        let yaml = k.to_yaml().unwrap_or_default();
        match Kubeconfig::parse(Path::new("/tmp/config"), &yaml) {
            Ok(k) => k,
            Err(e) => panic!("{e}: {yaml}"),
        }
    }

    #[test]
    fn locate_prefers_flag_then_env_then_home() {
        let home = Path::new("/home/u");
        let flag = locate(Some(Path::new("/x")), Some("/a:/b"), Some(home)).ok();
        assert_eq!(flag, Some(PathBuf::from("/x")));
        let env = locate(None, Some(":/a:/b"), Some(home)).ok();
        assert_eq!(env, Some(PathBuf::from("/a")));
        let default = locate(None, Some(""), Some(home)).ok();
        assert_eq!(default, Some(PathBuf::from("/home/u/.kube/config")));
    }

    #[test]
    fn round_trip_keeps_unknown_fields() {
        let mut k = load();
        let Ok(selected) = k.select(None) else {
            panic!("select")
        };
        assert!(
            k.switch_to(&selected, "https://kcp.example:6443/clusters/root:org:team")
                .is_ok()
        );
        let k = reparse(&k);
        let doc = &k.doc;
        assert_eq!(
            doc.other["preferences"]["colors"],
            serde_json::Value::Bool(true)
        );
        assert_eq!(doc.other["extensions"][0]["extension"]["answer"], 42);
        assert_eq!(doc.users[0].user.other["exec-like-unknown"]["foo"], "bar");
        // the original entries are untouched, the new cluster copies every field but the server
        assert_eq!(
            server_of(&k, "base"),
            "https://kcp.example:6443/clusters/root:org"
        );
        let Some(current) = k.cluster(CURRENT) else {
            panic!("no current cluster")
        };
        assert_eq!(
            current.server,
            "https://kcp.example:6443/clusters/root:org:team"
        );
        assert_eq!(current.tls_server_name.as_deref(), Some("kcp.example"));
        assert_eq!(current.other["extensions"][0]["name"], "keep-me");
        let Some(ctx) = k.context(CURRENT) else {
            panic!("no current context")
        };
        assert_eq!(ctx.user, "admin");
        assert_eq!(ctx.namespace.as_deref(), Some("ns1"));
        assert_eq!(k.current_context(), CURRENT);
        // the previous context is the old one, still pointing at its own cluster
        assert_eq!(context_cluster(&k, PREVIOUS), "base");
        assert!(k.cluster(PREVIOUS).is_none());
    }

    #[test]
    fn second_switch_moves_current_cluster_to_previous() {
        let mut k = load();
        let Ok(first) = k.select(None) else {
            panic!("select")
        };
        assert!(k.switch_to(&first, "https://h/clusters/root:a").is_ok());
        let Ok(second) = k.select(None) else {
            panic!("select")
        };
        assert_eq!(second.cluster_name, CURRENT);
        assert!(k.switch_to(&second, "https://h/clusters/root:b").is_ok());
        assert_eq!(server_of(&k, CURRENT), "https://h/clusters/root:b");
        assert_eq!(server_of(&k, PREVIOUS), "https://h/clusters/root:a");
        assert_eq!(context_cluster(&k, PREVIOUS), PREVIOUS);
        assert_eq!(context_cluster(&k, CURRENT), CURRENT);
        // one entry per name, never duplicates
        assert_eq!(k.doc.clusters.len(), 4);
    }

    #[test]
    fn swap_previous_goes_back_and_forth() {
        let mut k = load();
        let Ok(first) = k.select(None) else {
            panic!("select")
        };
        assert!(k.switch_to(&first, "https://h/clusters/root:a").is_ok());
        let Ok(second) = k.select(None) else {
            panic!("select")
        };
        assert!(k.switch_to(&second, "https://h/clusters/root:b").is_ok());

        let Ok(now) = k.select(None) else {
            panic!("select")
        };
        assert_eq!(
            k.swap_previous(&now).ok().as_deref(),
            Some("https://h/clusters/root:a")
        );
        assert_eq!(server_of(&k, CURRENT), "https://h/clusters/root:a");
        assert_eq!(server_of(&k, PREVIOUS), "https://h/clusters/root:b");

        let Ok(now) = k.select(None) else {
            panic!("select")
        };
        assert_eq!(
            k.swap_previous(&now).ok().as_deref(),
            Some("https://h/clusters/root:b")
        );
        assert_eq!(server_of(&k, CURRENT), "https://h/clusters/root:b");
    }

    #[test]
    fn swap_back_to_a_non_workspace_context() {
        let mut k = load();
        let Ok(first) = k.select(None) else {
            panic!("select")
        };
        assert!(k.switch_to(&first, "https://h/clusters/root:a").is_ok());
        // previous is `admin`'s context (cluster base); swapping returns to base's server
        let Ok(now) = k.select(None) else {
            panic!("select")
        };
        let server = k.swap_previous(&now).ok();
        assert_eq!(
            server.as_deref(),
            Some("https://kcp.example:6443/clusters/root:org")
        );
        assert_eq!(context_cluster(&k, CURRENT), "base");
        assert_eq!(context_cluster(&k, PREVIOUS), PREVIOUS);
        assert_eq!(server_of(&k, PREVIOUS), "https://h/clusters/root:a");
    }

    #[test]
    fn swap_without_previous_fails() {
        let mut k = load();
        let Ok(now) = k.select(None) else {
            panic!("select")
        };
        let err = k.swap_previous(&now).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("no previous workspace found in kubeconfig")
        );
    }

    #[test]
    fn context_override_and_missing_entries() {
        let k = load();
        let Ok(other) = k.select(Some("other")) else {
            panic!("select")
        };
        assert_eq!(other.server(), "https://other/");
        let err = k.select(Some("nope")).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("current \"nope\" context not found"));
    }

    #[test]
    fn create_context_refuses_to_overwrite() {
        let mut k = load();
        let Ok(now) = k.select(None) else {
            panic!("select")
        };
        let created = k.create_context(&now, "root:org", None, false, false).ok();
        assert_eq!(created, Some(false));
        assert_eq!(k.current_context(), "root:org");
        assert_eq!(
            server_of(&k, "root:org"),
            "https://kcp.example:6443/clusters/root:org"
        );
        assert!(
            k.create_context(&now, "root:org", None, false, false)
                .is_err()
        );
        let updated = k.create_context(
            &now,
            "root:org",
            Some("https://h/clusters/root:x"),
            true,
            true,
        );
        assert_eq!(updated.ok(), Some(true));
        assert_eq!(server_of(&k, "root:org"), "https://h/clusters/root:x");
        assert_eq!(k.current_context(), "root:org");
    }
}
