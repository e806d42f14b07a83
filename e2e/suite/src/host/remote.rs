//! A real cluster named by `E2E_KUBECONFIG` (kind, or any other), with this repo's images already
//! loaded (`e2e/kind.sh` does that). In-cluster service addresses are reached through
//! `kubectl port-forward`, one per service port, stopped when the host is dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::rewrite::{rewrite_servers, service_of};
use crate::cluster::KUBECTL_VERSION;

pub struct RemoteHost {
    kubeconfig: PathBuf,
    forwards: Vec<Child>,
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
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
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

    /// `127.0.0.1:<port>` forwarded to `port` of Service `namespace/service`.
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
        Ok(format!(
            "127.0.0.1:{}",
            self.forward_to(&format!("pod/{pod}"), namespace, port)?
        ))
    }

    /// Starts `kubectl port-forward svc/<service> :<port>` and returns the local port.
    fn forward(&mut self, service: &str, namespace: &str, port: u16) -> Result<u16, String> {
        self.forward_to(&format!("svc/{service}"), namespace, port)
    }

    /// Starts `kubectl port-forward <target> :<port>` and returns the local port.
    fn forward_to(&mut self, target: &str, namespace: &str, port: u16) -> Result<u16, String> {
        let kubectl = std::env::var("KUBECTL")
            .unwrap_or_else(|_| format!("/usr/lib/google-cloud-sdk/bin/kubectl.{KUBECTL_VERSION}"));
        let mut child = Command::new(&kubectl)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(["-n", namespace, "port-forward", target, &format!(":{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {kubectl} port-forward: {e}"))?;
        let stdout = child.stdout.take().ok_or("port-forward without stdout")?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .map_err(|e| format!("reading port-forward: {e}"))?;
        // kubectl goes on writing (the IPv6 listener, "Handling connection for ..."): its output
        // is drained for as long as it runs, or its next line would kill it with SIGPIPE.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        self.forwards.push(child);
        // "Forwarding from 127.0.0.1:41234 -> 6443"
        line.split_whitespace()
            .nth(2)
            .and_then(|address| address.rsplit(':').next())
            .and_then(|port| port.parse().ok())
            .ok_or_else(|| format!("port-forward said {line:?}"))
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
