//! A real cluster named by `E2E_KUBECONFIG` (kind, or any other), with this repo's images already
//! loaded (`e2e/kind.sh` does that). In-cluster service addresses are reached through a local
//! stand-in for each Service port that follows its Endpoints and forwards to every ready pod
//! ([`super::balancer`]); one pod alone through `kubectl port-forward pod/...`. All are stopped
//! when the host is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::balancer::{ServiceForward, port_forward};
use super::rewrite::{rewrite_servers, service_of};

pub struct RemoteHost {
    kubeconfig: PathBuf,
    /// Forwards to single pods.
    forwards: Vec<Child>,
    /// A stand-in per Service port, by (namespace, service, port).
    services: BTreeMap<(String, String, u16), ServiceForward>,
    /// Connections a Service stand-in sent again to another pod (the first closed them unanswered).
    failed_over: Arc<AtomicUsize>,
}

impl RemoteHost {
    pub fn from_env() -> Result<RemoteHost, String> {
        let kubeconfig = std::env::var_os("E2E_KUBECONFIG")
            .map(PathBuf::from)
            .ok_or("E2E_HOST=kubeconfig needs E2E_KUBECONFIG")?;
        RemoteHost::new(kubeconfig)
    }

    /// The cluster `kubeconfig` names.
    pub fn new(kubeconfig: PathBuf) -> Result<RemoteHost, String> {
        if !kubeconfig.is_file() {
            return Err(format!("kubeconfig {} is not a file", kubeconfig.display()));
        }
        Ok(RemoteHost {
            kubeconfig,
            forwards: Vec::new(),
            services: BTreeMap::new(),
            failed_over: Arc::default(),
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Connections sent again to another pod of their Service because the first closed them
    /// before answering (see [`super::balancer`]).
    pub fn connections_failed_over(&self) -> usize {
        self.failed_over.load(Ordering::SeqCst)
    }

    /// `kubeconfig` with its in-cluster servers made reachable from here.
    pub fn reachable(&mut self, kubeconfig: &str) -> Result<String, String> {
        rewrite_servers(kubeconfig, |host, port| match service_of(host) {
            Some((service, namespace)) => Ok((
                "127.0.0.1".to_owned(),
                self.forward(&service, &namespace, port)?,
            )),
            None => Ok((host.to_owned(), port)),
        })
    }

    /// `127.0.0.1:<port>` standing for `port` of Service `namespace/service`.
    pub fn service_address(
        &mut self,
        namespace: &str,
        service: &str,
        port: u16,
    ) -> Result<String, String> {
        Ok(format!(
            "127.0.0.1:{}",
            self.forward(service, namespace, port)?
        ))
    }

    /// `127.0.0.1:<port>` forwarded to `port` of pod `namespace/pod` (that pod alone).
    pub fn pod_address(&mut self, namespace: &str, pod: &str, port: u16) -> Result<String, String> {
        let (child, local) =
            port_forward(&self.kubeconfig, namespace, &format!("pod/{pod}"), port)?;
        self.forwards.push(child);
        Ok(format!("127.0.0.1:{local}"))
    }

    /// The local port standing for `port` of Service `namespace/service` (started once).
    fn forward(&mut self, service: &str, namespace: &str, port: u16) -> Result<u16, String> {
        let key = (namespace.to_owned(), service.to_owned(), port);
        if let Some(forward) = self.services.get(&key) {
            return Ok(forward.port());
        }
        let forward = ServiceForward::start(
            &self.kubeconfig,
            namespace,
            service,
            port,
            self.failed_over.clone(),
        )?;
        let local = forward.port();
        self.services.insert(key, forward);
        Ok(local)
    }
}

impl Drop for RemoteHost {
    fn drop(&mut self) {
        for child in &mut self.forwards {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
