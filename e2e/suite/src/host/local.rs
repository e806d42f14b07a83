//! The local host: this repo's server is the host API, listening on the address of a bridge the
//! node agent owns, with the Kubernetes workload kinds installed as CRDs (`e2e/workload-crds/`);
//! the agent runs each pod as a process of the binary its image maps to (this build's `kcp` and
//! `kcp-operator`, Debian's etcd) in its own network and mount namespaces.
//!
//! Each run picks its own bridge and /24 from its PID, so runs never share addresses, and removes
//! everything it made when it stops (the agent's `cleanup` also after a crash).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kcp_testing::binaries::workspace_binary;
use kcp_testing::{ChildGuard, KcpProcess};
use tempfile::TempDir;

use super::rewrite::{rewrite_servers, service_of};
use crate::Narrator;
use crate::cluster::{Cluster, eventually};

/// The repository root (`e2e/suite/../..`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// Where Debian's etcd lives (the managed etcd image maps to it).
const ETCD: &str = "/usr/bin/etcd";
const ETCDCTL: &str = "/usr/bin/etcdctl";

/// The number of the bridge and /24 of the run in process `pid`.
fn network_id(pid: u32) -> u32 {
    pid % 200 + 20
}

/// The bridge of the run in process `pid`: every namespace, link and address the agent makes
/// for it derives from this name (`kcp-node-agent cleanup --bridge` finds them by it).
pub fn bridge_name(pid: u32) -> String {
    format!("kcpe2e{}", network_id(pid))
}

/// Removes what a run whose process is gone left on bridge `bridge`: pod processes, network
/// namespaces, links and addresses, the bridge.
pub fn clean_up_bridge(bridge: &str) -> Result<(), String> {
    let agent = workspace_binary("kcp-node-agent", "kcp-node-agent");
    run(&agent, &["cleanup", "--bridge", bridge]).map(|_| ())
}

pub struct LocalHost {
    dir: TempDir,
    bridge: String,
    agent_binary: PathBuf,
    operator_binary: PathBuf,
    server: KcpProcess,
    kubeconfig: PathBuf,
    agent: Option<ChildGuard>,
}

impl LocalHost {
    pub async fn start(narrator: &Narrator) -> Result<LocalHost, String> {
        let id = network_id(std::process::id());
        let bridge = bridge_name(std::process::id());
        let subnet = format!("10.214.{id}.0/24");
        let address = format!("10.214.{id}.1");
        let dir = tempfile::Builder::new()
            .prefix("kcp-e2e-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;

        narrator.step("building (if needed) kcp, kcp-operator and kcp-node-agent");
        let kcp_binary = workspace_binary("kcp", "kcp");
        let operator_binary = workspace_binary("kcp-operator", "kcp-operator");
        let agent_binary = workspace_binary("kcp-node-agent", "kcp-node-agent");

        narrator.step(&format!("pod network: bridge {bridge} {subnet}"));
        let _ = run(&agent_binary, &["cleanup", "--bridge", &bridge]);
        run(
            &agent_binary,
            &["network", "up", "--bridge", &bridge, "--subnet", &subnet],
        )?;

        narrator.step(&format!("host API: this repo's server on {address}"));
        // The agent's kubelet port: its serving certificate, and the client certificate the
        // server presents to it (pods/log, exec, port-forward), both of one CA.
        let kubelet_tls = kcp_testing::write_tls_files_for(dir.path(), &[&address]);
        let server = KcpProcess::start(
            &kcp_binary,
            "e2e-host",
            &[
                vec![format!("--bind-address={address}")],
                kubelet_tls.kubelet_client_flags(),
            ]
            .concat(),
        )
        .await;
        let admin = Cluster::new(&server.kubeconfig());

        narrator.step("host API: workload kinds as CRDs (e2e/workload-crds)");
        let crds = repo_root().join("e2e/workload-crds");
        admin.run(&["apply", "--server-side", "-f", &crds.display().to_string()])?;
        eventually(
            "workload CRDs established",
            Duration::from_secs(60),
            Duration::from_millis(500),
            || {
                admin
                    .run(&[
                        "wait",
                        "--for=condition=Established",
                        "crd",
                        "--all",
                        "--timeout=5s",
                    ])
                    .map(|_| ())
            },
        )?;

        let images = dir.path().join("images.yaml");
        std::fs::write(
            &images,
            format!(
                "ghcr.io/kcp-rs/kcp:\n  entrypoint: {kcp}\n  commands:\n    kcp: {kcp}\n    kcp-front-proxy: {kcp}\n    cache-server: {kcp}\n    virtual-workspaces: {kcp}\n\
                 ghcr.io/kcp-rs/kcp-operator:\n  entrypoint: {operator}\n  commands:\n    kcp-operator: {operator}\n\
                 quay.io/coreos/etcd:\n  entrypoint: {ETCD}\n  commands:\n    etcd: {ETCD}\n    etcdctl: {ETCDCTL}\n",
                kcp = kcp_binary.display(),
                operator = operator_binary.display(),
            ),
        )
        .map_err(|e| format!("writing {}: {e}", images.display()))?;

        narrator.step("node agent: running pods as local processes");
        let state = dir.path().join("agent");
        let agent = ChildGuard::spawn(
            "kcp-node-agent",
            Command::new(&agent_binary)
                .args([
                    "run",
                    &format!("--kubeconfig={}", server.kubeconfig().display()),
                    &format!("--state-dir={}", state.display()),
                    &format!("--images={}", images.display()),
                    &format!("--bridge={bridge}"),
                    &format!("--subnet={subnet}"),
                    "--max-backoff=10s",
                    "--resync=1s",
                ])
                .args(kubelet_tls.kubelet_serving_flags()),
            &dir.path().join("agent.log"),
        );
        Ok(LocalHost {
            dir,
            bridge,
            agent_binary,
            operator_binary,
            kubeconfig: server.kubeconfig(),
            server,
            agent: Some(agent),
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `kubeconfig` with its in-cluster servers made reachable from here.
    pub fn reachable(&mut self, kubeconfig: &str) -> Result<String, String> {
        rewrite_servers(kubeconfig, |host, port| {
            let Some((service, namespace)) = service_of(host) else {
                return Ok((host.to_owned(), port));
            };
            Ok((self.virtual_ip(&namespace, &service)?, port))
        })
    }

    /// `address:port` where this machine reaches `port` of Service `namespace/service`: its
    /// virtual IP on the agent's bridge.
    pub fn service_address(
        &self,
        namespace: &str,
        service: &str,
        port: u16,
    ) -> Result<String, String> {
        Ok(format!("{}:{port}", self.virtual_ip(namespace, service)?))
    }

    /// `address:port` where this machine reaches `port` of pod `namespace/pod`: its IP on the
    /// agent's bridge.
    pub fn pod_address(&self, namespace: &str, pod: &str, port: u16) -> Result<String, String> {
        let object = Cluster::new(self.kubeconfig())
            .get(&["pod", "-n", namespace, pod])?
            .ok_or_else(|| format!("no pod {namespace}/{pod}"))?;
        let ip = object
            .pointer("/status/podIP")
            .and_then(|v| v.as_str())
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| format!("pod {namespace}/{pod} has no IP yet"))?;
        Ok(format!("{ip}:{port}"))
    }

    fn virtual_ip(&self, namespace: &str, service: &str) -> Result<String, String> {
        let object = Cluster::new(self.kubeconfig())
            .get(&["service", "-n", namespace, service])?
            .ok_or_else(|| format!("no service {namespace}/{service}"))?;
        object
            .pointer("/metadata/annotations/e2e.kcp.io~1virtual-ip")
            .or_else(|| object.pointer("/spec/clusterIP"))
            .and_then(|v| v.as_str())
            .filter(|ip| !ip.is_empty() && *ip != "None")
            .map(str::to_owned)
            .ok_or_else(|| format!("service {namespace}/{service} has no virtual IP yet"))
    }

    /// Resident memory of the operator process the agent runs (the chart's pod).
    pub fn operator_memory_mib(&self) -> Option<f64> {
        let mut total = None;
        for process in self.operator_processes() {
            let status = std::fs::read_to_string(process.join("status")).ok()?;
            let kib: f64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            *total.get_or_insert(0.0) += kib / 1024.0;
        }
        total
    }

    /// The CPU time (user + system, seconds) the operator's processes have used so far.
    pub fn operator_cpu_seconds(&self) -> Option<f64> {
        let ticks_per_second: f64 = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())?;
        let mut total = None;
        for process in self.operator_processes() {
            let stat = std::fs::read_to_string(process.join("stat")).ok()?;
            // After the command name in parentheses: state is field 3, utime 14, stime 15.
            let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
            let ticks: f64 =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            *total.get_or_insert(0.0) += ticks / ticks_per_second;
        }
        total
    }

    /// `/proc/<pid>` of every process of the operator's binary.
    fn operator_processes(&self) -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|entry| {
                std::fs::read_link(entry.path().join("exe"))
                    .is_ok_and(|exe| exe == self.operator_binary)
            })
            .map(|entry| entry.path())
            .collect()
    }

    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        if let Some(agent) = &self.agent {
            out.push_str(&format!("node agent log (tail):\n{}\n", agent.log_tail()));
        }
        out.push_str(&format!(
            "host server log (tail):\n{}\n",
            self.server.log_tail()
        ));
        let pods = self.dir.path().join("agent/pods");
        if let Ok(entries) = std::fs::read_dir(&pods) {
            for pod in entries.flatten() {
                for log in std::fs::read_dir(pod.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if log.path().extension().is_some_and(|e| e == "log") {
                        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
                        let tail: Vec<&str> = text.lines().rev().take(15).collect();
                        out.push_str(&format!(
                            "--- {} (last lines)\n{}\n",
                            log.path().display(),
                            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                        ));
                    }
                }
            }
        }
        out
    }

    pub async fn stop(mut self) {
        if let Some(mut agent) = self.agent.take() {
            agent.stop(Duration::from_secs(90)).await;
        }
        self.server.stop().await;
        let _ = run(&self.agent_binary, &["cleanup", "--bridge", &self.bridge]);
    }
}

/// Runs a short command to completion; its stdout, or an error with stderr.
fn run(binary: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("starting {}: {e}", binary.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{} {}: {}",
            binary.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}
