//! Startup, readiness and liveness probes: parsed from the container spec with Kubernetes'
//! defaults, and run from the agent against the pod's address.
//!
//! HTTP(S) probes do not verify certificates (as kubelet), accept 200-399 and do not follow
//! redirects; named ports resolve through the container's ports; exec probes run in the
//! container's namespaces through the agent's `exec` helper. gRPC probes are not supported and
//! fail with a message saying so.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcp_apimachinery::gofmt::error_chain;

use crate::exec::ExecSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Http {
        https: bool,
        host: Option<String>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    Tcp {
        host: Option<String>,
        port: u16,
    },
    Exec {
        command: Vec<String>,
    },
}

/// A probe with every default applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

/// The container port called `name`, or the number itself.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    match port {
        IntOrString::Int(number) => {
            u16::try_from(*number).map_err(|_| format!("port {number} is out of range"))
        }
        IntOrString::String(name) => {
            if let Ok(number) = name.parse::<u16>() {
                return Ok(number);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| format!("container {:?} has no port named {name:?}", container.name))
        }
    }
}

fn seconds(value: Option<i32>, default: i32, minimum: i32) -> Duration {
    Duration::from_secs(u64::try_from(value.unwrap_or(default).max(minimum)).unwrap_or(0))
}

fn count(value: Option<i32>, default: i32) -> u32 {
    u32::try_from(value.unwrap_or(default).max(1)).unwrap_or(1)
}

impl ProbeSpec {
    pub fn parse(probe: &Probe, container: &Container) -> Result<ProbeSpec, String> {
        let action = if let Some(http) = &probe.http_get {
            let scheme = http.scheme.as_deref().unwrap_or("HTTP");
            let https = match scheme.to_ascii_uppercase().as_str() {
                "HTTP" => false,
                "HTTPS" => true,
                other => return Err(format!("unsupported probe scheme {other:?}")),
            };
            let mut path = http.path.clone().unwrap_or_else(|| "/".into());
            if !path.starts_with('/') {
                path.insert(0, '/');
            }
            Action::Http {
                https,
                host: http.host.clone().filter(|h| !h.is_empty()),
                port: resolve_port(&http.port, container)?,
                path,
                headers: http
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            }
        } else if let Some(tcp) = &probe.tcp_socket {
            Action::Tcp {
                host: tcp.host.clone().filter(|h| !h.is_empty()),
                port: resolve_port(&tcp.port, container)?,
            }
        } else if let Some(exec) = &probe.exec {
            let command = exec.command.clone().unwrap_or_default();
            if command.is_empty() {
                return Err("exec probe without a command".into());
            }
            Action::Exec { command }
        } else if probe.grpc.is_some() {
            return Err("gRPC probes are not supported by kcp-node-agent".into());
        } else {
            return Err("probe has no handler".into());
        };
        Ok(ProbeSpec {
            action,
            initial_delay: seconds(probe.initial_delay_seconds, 0, 0),
            period: seconds(probe.period_seconds, 10, 1),
            timeout: seconds(probe.timeout_seconds, 1, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        })
    }
}

/// How a probe is run: where the pod is and how to run an exec probe in it.
pub struct Target<'a> {
    pub pod_ip: Ipv4Addr,
    pub http: &'a reqwest::Client,
    pub agent_exe: &'a Path,
    /// The container's main process (exec probes join its namespaces).
    pub pid: Option<u32>,
    pub env: &'a [(String, String)],
    /// The image's command names (exec probes name programs as in the image).
    pub image_commands: &'a std::collections::BTreeMap<String, std::path::PathBuf>,
    pub workdir: PathBuf,
    pub spec_dir: PathBuf,
}

/// A client for HTTP probes: no certificate verification, no redirects, no pooling.
pub fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .user_agent("kube-probe/1.35")
        .build()
}

/// Runs `spec` once: Ok(()) is success, Err the reason of the failure.
pub async fn run(spec: &ProbeSpec, target: &Target<'_>) -> Result<(), String> {
    match tokio::time::timeout(spec.timeout, run_action(spec, target)).await {
        Ok(result) => result,
        Err(_) => Err(format!("probe timed out after {:?}", spec.timeout)),
    }
}

async fn run_action(spec: &ProbeSpec, target: &Target<'_>) -> Result<(), String> {
    match &spec.action {
        Action::Http {
            https,
            host,
            port,
            path,
            headers,
        } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.to_string());
            let scheme = if *https { "https" } else { "http" };
            let url = format!("{scheme}://{host}:{port}{path}");
            let mut request = target.http.get(&url).header("Accept", "*/*");
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let response = request
                .send()
                .await
                .map_err(|e| format!("Get {url:?}: {}", error_chain(&e)))?;
            let status = response.status().as_u16();
            if (200..400).contains(&status) {
                Ok(())
            } else {
                Err(format!("HTTP probe failed with statuscode: {status}"))
            }
        }
        Action::Tcp { host, port } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.to_string());
            let address = format!("{host}:{port}");
            let address: SocketAddr = match address.parse() {
                Ok(address) => address,
                Err(_) => tokio::net::lookup_host(&address)
                    .await
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| format!("cannot resolve {address}"))?,
            };
            tokio::net::TcpStream::connect(address)
                .await
                .map(drop)
                .map_err(|e| format!("dial tcp {address}: {e}"))
        }
        Action::Exec { command } => run_exec(command, target).await,
    }
}

async fn run_exec(command: &[String], target: &Target<'_>) -> Result<(), String> {
    let Some(pid) = target.pid else {
        return Err("container is not running".into());
    };
    let spec = ExecSpec {
        program: exec_program(&command[0], target.image_commands, target.env),
        argv: command.to_vec(),
        env: target.env.to_vec(),
        workdir: target.workdir.clone(),
        netns: None,
        join_pid: Some(pid),
        hostname: None,
        mounts: Vec::new(),
    };
    let file = target
        .spec_dir
        .join(format!("probe-{}.json", crate::names::random_suffix()));
    let bytes = serde_json::to_vec(&spec).map_err(|e| e.to_string())?;
    tokio::fs::write(&file, bytes)
        .await
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    let child = tokio::process::Command::new(target.agent_exe)
        .arg("exec")
        .arg("--spec")
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let result = match child {
        Ok(child) => match child.wait_with_output().await {
            Ok(output) if output.status.success() => Ok(()),
            Ok(output) => Err(format!(
                "command {command:?} exited with {}: {} {}",
                output.status,
                String::from_utf8_lossy(&output.stdout).trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Err(e) => Err(format!("waiting for exec probe: {e}")),
        },
        Err(e) => Err(format!("starting exec probe: {e}")),
    };
    let _ = tokio::fs::remove_file(&file).await;
    result
}

/// An exec probe's program: a command of the image (by basename), else an absolute path as it
/// is, else the name looked up in the container's PATH.
pub fn exec_program(
    name: &str,
    image_commands: &std::collections::BTreeMap<String, std::path::PathBuf>,
    env: &[(String, String)],
) -> std::path::PathBuf {
    let base = Path::new(name)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(path) = image_commands.get(&base) {
        return path.clone();
    }
    if name.contains('/') {
        return name.into();
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| crate::env::DEFAULT_PATH.to_owned());
    path.split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| name.into())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerPort, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, TCPSocketAction,
    };

    use super::*;

    fn container() -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort {
                name: Some("https".into()),
                container_port: 6443,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_kubernetes_defaults() {
        let probe = Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(80),
                ..Default::default()
            }),
            ..Default::default()
        };
        let spec = ProbeSpec::parse(&probe, &container()).expect("spec");
        assert_eq!(
            spec.action,
            Action::Tcp {
                host: None,
                port: 80
            }
        );
        assert_eq!(spec.initial_delay, Duration::ZERO);
        assert_eq!(spec.period, Duration::from_secs(10));
        assert_eq!(spec.timeout, Duration::from_secs(1));
        assert_eq!(spec.success_threshold, 1);
        assert_eq!(spec.failure_threshold, 3);
    }

    #[test]
    fn http_named_port_and_headers() {
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::String("https".into()),
                path: Some("livez".into()),
                scheme: Some("HTTPS".into()),
                http_headers: Some(vec![HTTPHeader {
                    name: "X-Probe".into(),
                    value: "1".into(),
                }]),
                ..Default::default()
            }),
            initial_delay_seconds: Some(5),
            period_seconds: Some(2),
            timeout_seconds: Some(3),
            failure_threshold: Some(6),
            success_threshold: Some(2),
            ..Default::default()
        };
        let spec = ProbeSpec::parse(&probe, &container()).expect("spec");
        assert_eq!(
            spec.action,
            Action::Http {
                https: true,
                host: None,
                port: 6443,
                path: "/livez".into(),
                headers: vec![("X-Probe".into(), "1".into())],
            }
        );
        assert_eq!(spec.initial_delay, Duration::from_secs(5));
        assert_eq!(spec.period, Duration::from_secs(2));
        assert_eq!(spec.timeout, Duration::from_secs(3));
        assert_eq!((spec.success_threshold, spec.failure_threshold), (2, 6));
    }

    #[test]
    fn unsupported_and_broken_probes() {
        let unknown_port = Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("metrics".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(ProbeSpec::parse(&unknown_port, &container()).is_err());
        let grpc = Probe {
            grpc: Some(GRPCAction {
                port: 9000,
                service: None,
            }),
            ..Default::default()
        };
        assert!(
            ProbeSpec::parse(&grpc, &container())
                .unwrap_err()
                .contains("gRPC")
        );
        let empty_exec = Probe {
            exec: Some(ExecAction { command: None }),
            ..Default::default()
        };
        assert!(ProbeSpec::parse(&empty_exec, &container()).is_err());
        assert!(ProbeSpec::parse(&Probe::default(), &container()).is_err());
    }

    #[test]
    fn exec_programs_search_the_path() {
        let env = vec![("PATH".to_owned(), "/nonexistent:/bin:/usr/bin".to_owned())];
        let mut commands = std::collections::BTreeMap::new();
        assert!(exec_program("sh", &commands, &env).is_absolute());
        assert_eq!(
            exec_program("/x/y", &commands, &env),
            std::path::PathBuf::from("/x/y")
        );
        commands.insert(
            "etcdctl".to_owned(),
            std::path::PathBuf::from("/opt/etcdctl"),
        );
        assert_eq!(
            exec_program("/usr/local/bin/etcdctl", &commands, &env),
            std::path::PathBuf::from("/opt/etcdctl")
        );
    }
}
