//! Where the scenarios run: a host cluster with admin rights, a way to reach addresses inside it,
//! and the images made available.
//!
//! - [`local`]: this repo's server is the host API, the workload kinds are CRDs, and the node agent
//!   (`e2e/agent`) runs every pod as a local process of the binary its image maps to. Services
//!   get virtual IPs on the agent's bridge, so in-cluster URLs are reached by rewriting the host
//!   name to that address (keeping it as the TLS server name).
//! - [`remote`]: any cluster named by `E2E_KUBECONFIG` (e.g. kind with the archives of
//!   `cargo xtask images` loaded, see `e2e/kind.sh`); in-cluster URLs are reached through a local
//!   stand-in per Service port that forwards to every ready pod ([`balancer`]).
//!
//! - `local-kubeconfig`: the local host, used the way the suite uses a real cluster (through its
//!   kubeconfig, in-cluster URLs through `kubectl port-forward` served by the local host's pods/
//!   portforward), so the `kubeconfig` host's own code runs in CI and the only difference left on
//!   kind is the cluster itself.
//!
//! `E2E_HOST=local|kubeconfig|local-kubeconfig` chooses; `local` is the default.

pub mod balancer;
pub mod local;
pub mod remote;
pub mod rewrite;

use std::path::Path;

use crate::cluster::Cluster;

pub enum Host {
    Local(Box<local::LocalHost>),
    Remote(remote::RemoteHost),
    /// The local host reached as a remote one (the local host is kept to be stopped).
    LocalAsRemote(Box<local::LocalHost>, remote::RemoteHost),
}

/// Which host to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Local,
    Kubeconfig,
    LocalAsKubeconfig,
}

impl Choice {
    /// The host `E2E_HOST` names.
    pub fn from_env() -> Result<Choice, String> {
        match std::env::var("E2E_HOST").as_deref() {
            Ok("kubeconfig") => Ok(Choice::Kubeconfig),
            Ok("local-kubeconfig") => Ok(Choice::LocalAsKubeconfig),
            Ok("local") | Err(_) => Ok(Choice::Local),
            Ok(other) => Err(format!(
                "E2E_HOST={other}: use local, kubeconfig or local-kubeconfig"
            )),
        }
    }
}

impl Host {
    /// The host `choice` names, started (local) or checked (kubeconfig).
    pub async fn start(choice: Choice, narrator: &crate::Narrator) -> Result<Host, String> {
        match choice {
            Choice::Kubeconfig => Ok(Host::Remote(remote::RemoteHost::from_env()?)),
            Choice::Local => Ok(Host::Local(Box::new(
                local::LocalHost::start(narrator).await?,
            ))),
            Choice::LocalAsKubeconfig => {
                let local = local::LocalHost::start(narrator).await?;
                let remote = remote::RemoteHost::new(local.kubeconfig().to_path_buf())?;
                Ok(Host::LocalAsRemote(Box::new(local), remote))
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Host::Local(_) => "local (this repo's server + node agent)",
            Host::Remote(_) => "kubeconfig (E2E_KUBECONFIG)",
            Host::LocalAsRemote(..) => {
                "local-kubeconfig (the local host through its kubeconfig and port-forward)"
            }
        }
    }

    /// The host's admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        match self {
            Host::Local(host) => host.kubeconfig(),
            Host::Remote(host) | Host::LocalAsRemote(_, host) => host.kubeconfig(),
        }
    }

    /// kubectl as the host's admin.
    pub fn admin(&self) -> Cluster {
        Cluster::new(self.kubeconfig())
    }

    /// Helm against the host.
    pub fn helm(&self, args: &[&str]) -> Result<String, String> {
        let helm = std::env::var("HELM").unwrap_or_else(|_| "helm".to_owned());
        let output = std::process::Command::new(&helm)
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                format!("running {helm} (install it: bash e2e/tools/install-helm.sh): {e}")
            })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "helm {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim(),
                String::from_utf8_lossy(&output.stdout).trim()
            ))
        }
    }

    /// A kubeconfig file usable from this machine for `kubeconfig` (as the operator writes it,
    /// naming in-cluster service addresses), written into `dir`.
    pub fn reachable(
        &mut self,
        kubeconfig: &str,
        dir: &Path,
        name: &str,
    ) -> Result<std::path::PathBuf, String> {
        let rewritten = match self {
            Host::Local(host) => host.reachable(kubeconfig)?,
            Host::Remote(host) | Host::LocalAsRemote(_, host) => host.reachable(kubeconfig)?,
        };
        let path = dir.join(name);
        std::fs::write(&path, rewritten).map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(path)
    }

    /// `address:port` where this machine reaches `port` of Service `namespace/service` (its
    /// virtual IP on the local host, a port-forward on a real cluster).
    pub fn service_address(
        &mut self,
        namespace: &str,
        service: &str,
        port: u16,
    ) -> Result<String, String> {
        match self {
            Host::Local(host) => host.service_address(namespace, service, port),
            Host::Remote(host) | Host::LocalAsRemote(_, host) => {
                host.service_address(namespace, service, port)
            }
        }
    }

    /// `address:port` where this machine reaches `port` of one pod (its IP on the local host, a
    /// port-forward to that pod on a real cluster).
    pub fn pod_address(&mut self, namespace: &str, pod: &str, port: u16) -> Result<String, String> {
        match self {
            Host::Local(host) => host.pod_address(namespace, pod, port),
            Host::Remote(host) | Host::LocalAsRemote(_, host) => {
                host.pod_address(namespace, pod, port)
            }
        }
    }

    /// The operator's resident memory (MiB), when the host lets the suite see it.
    pub fn operator_memory_mib(&self) -> Option<f64> {
        match self {
            Host::Local(host) | Host::LocalAsRemote(host, _) => host.operator_memory_mib(),
            Host::Remote(_) => None,
        }
    }

    /// Connections to a Service sent again to another of its pods because the first closed them
    /// before answering (the kubeconfig hosts' Service stand-ins; `None` on the local host, whose
    /// Services are the agent's virtual IPs).
    pub fn connections_failed_over(&self) -> Option<usize> {
        match self {
            Host::Local(_) => None,
            Host::Remote(host) | Host::LocalAsRemote(_, host) => {
                Some(host.connections_failed_over())
            }
        }
    }

    /// The CPU time (seconds) the operator has used so far, when the host lets the suite see it.
    pub fn operator_cpu_seconds(&self) -> Option<f64> {
        match self {
            Host::Local(host) | Host::LocalAsRemote(host, _) => host.operator_cpu_seconds(),
            Host::Remote(_) => None,
        }
    }

    /// What helps to understand a failure: logs of the host's pieces, pods.
    pub fn diagnostics(&self) -> String {
        let pods = self
            .admin()
            .run(&["get", "pods", "-A", "-o", "wide"])
            .unwrap_or_else(|e| e);
        let own = match self {
            Host::Local(host) | Host::LocalAsRemote(host, _) => host.diagnostics(),
            Host::Remote(_) => String::new(),
        };
        format!("pods:\n{pods}\n{own}")
    }

    /// Stops what the host started (local) and removes what it made.
    pub async fn stop(self) {
        match self {
            Host::Local(host) => host.stop().await,
            Host::LocalAsRemote(host, remote) => {
                drop(remote);
                host.stop().await;
            }
            Host::Remote(_) => {}
        }
    }
}
