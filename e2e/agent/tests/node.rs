//! The node agent against this repo's server: the server listens on the bridge address, the
//! workload CRDs are installed, and the agent runs real workloads whose image is python3.
//!
//! One test drives one host through everything, because starting a server and an agent costs
//! more than the checks themselves: a Deployment and its status, env/fieldRef/secretKeyRef and
//! `$(VAR)`, Secret and ConfigMap volumes, the service-account token against the host API from
//! inside a pod, Service names and virtual IPs, a StatefulSet keeping its data and addresses
//! across a rolling update, readiness gating, crash back-off, a zero-failure rolling update behind
//! a Service, deletion, restart of the agent, and cleanup (graceful and after SIGKILL).
//!
//! Needs root (network namespaces, bridge, mounts), python3 and iproute2. Names derive from the
//! PID so parallel runs do not collide; every wait is bounded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kcp_testing::{ChildGuard, KcpProcess, Patience, TlsFiles, write_tls_files_for};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const AGENT: &str = env!("CARGO_BIN_EXE_kcp-node-agent");
const ROOT: &str = "/clusters/root";
const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(100));
const NS: &str = "apps";
const FAULTS: &str = "faults";

#[path = "node/attach.rs"]
mod attach;
#[path = "node/front_proxy.rs"]
mod front_proxy;
#[path = "node/streaming.rs"]
mod streaming;
#[path = "node/terminal.rs"]
mod terminal;
#[path = "node/wire.rs"]
mod wire;

fn python() -> PathBuf {
    let debian = PathBuf::from("/usr/bin/python3");
    if debian.is_file() {
        return debian;
    }
    let found = Command::new("sh")
        .args(["-c", "command -v python3"])
        .output()
        .expect("looking for python3");
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    assert!(!path.is_empty(), "python3 is needed as the test image");
    PathBuf::from(path)
}

fn agent_command(args: &[&str]) -> std::process::Output {
    Command::new(AGENT)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kcp-node-agent {args:?}: {e}"))
}

fn ip(args: &[&str]) -> String {
    let output = Command::new("ip").args(args).output().expect("running ip");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Network namespaces of pods of `bridge`.
fn pod_namespaces(bridge: &str) -> Vec<String> {
    ip(&["netns", "list"])
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(&format!("{bridge}-p")))
        .map(str::to_owned)
        .collect()
}

/// Ports attached to the bridge (the host ends of pod veths).
fn bridge_ports(bridge: &str) -> Vec<String> {
    ip(&["-o", "link", "show", "master", bridge])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// /32 addresses (Service virtual IPs) on the bridge.
fn virtual_ips(bridge: &str) -> Vec<String> {
    ip(&["-o", "-4", "addr", "show", "dev", bridge])
        .split_whitespace()
        .filter(|w| w.ends_with("/32"))
        .map(str::to_owned)
        .collect()
}

/// No pod namespace, veth or Service virtual IP of `bridge` is left.
fn assert_no_pod_network(bridge: &str) {
    let namespaces = pod_namespaces(bridge);
    assert!(namespaces.is_empty(), "{namespaces:?}");
    let ports = bridge_ports(bridge);
    assert!(ports.is_empty(), "{ports:?}");
    let vips = virtual_ips(bridge);
    assert!(vips.is_empty(), "{vips:?}");
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// The PID of a pod's first container, from its `containerID`.
fn container_pid(pod: &Value) -> Option<u32> {
    pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.rsplit('/').next())
        .and_then(|p| p.parse().ok())
}

/// How many of `pods` have their first container ready.
fn ready_count(pods: &[Value]) -> usize {
    pods.iter()
        .filter(|p| p["status"]["containerStatuses"][0]["ready"] == true)
        .count()
}

/// The condition of type `kind` in a workload status (null when absent).
fn condition(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or_default()
}

struct Host {
    bridge: String,
    subnet: String,
    gateway: Ipv4Addr,
    dir: tempfile::TempDir,
    /// The kubelet port's CA, serving certificate (the agent's) and client certificate (the
    /// server's `--kubelet-client-certificate`).
    kubelet_tls: TlsFiles,
    kcp: Option<KcpProcess>,
    agent: Option<ChildGuard>,
}

impl Host {
    /// A host of its own: `slot` keeps the bridges and subnets of the tests of this binary apart.
    async fn start(slot: u32) -> Host {
        Host::start_with(slot, &[]).await
    }

    /// A host whose server gets `server_flags` too.
    async fn start_with(slot: u32, server_flags: &[String]) -> Host {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "the node agent test needs root"
        );
        let pid = std::process::id();
        let bridge = format!("kna{slot}{}", pid % 100_000);
        let subnet = format!(
            "10.{}.{}.0/24",
            150 + ((pid >> 8) + slot * 33) % 100,
            pid & 255
        );
        let _ = agent_command(&["cleanup", "--bridge", &bridge]);
        let up = agent_command(&["network", "up", "--bridge", &bridge, "--subnet", &subnet]);
        assert!(
            up.status.success(),
            "network up: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let gateway: Ipv4Addr = String::from_utf8_lossy(&up.stdout)
            .trim()
            .parse()
            .expect("gateway address");
        let dir = tempfile::Builder::new()
            .prefix("kcp-test-node-agent-")
            .tempdir()
            .expect("temp dir");
        let kubelet_tls = write_tls_files_for(dir.path(), &[&gateway.to_string()]);
        let binary = kcp_testing::binaries::workspace_binary("kcp", "kcp");
        let kcp = KcpProcess::start(
            &binary,
            "node-agent",
            &[
                vec![format!("--bind-address={gateway}")],
                kubelet_tls.kubelet_client_flags(),
                server_flags.to_vec(),
            ]
            .concat(),
        )
        .await;
        assert!(
            kcp.base_url().contains(&gateway.to_string()),
            "kcp serves at {}",
            kcp.base_url()
        );
        for entry in
            std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../workload-crds"))
                .expect("CRD dir")
        {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let crd: Value =
                    yaml_serde::from_str(&std::fs::read_to_string(&path).expect("read CRD"))
                        .expect("CRD YAML");
                kcp.install_crd("root", &crd).await;
            }
        }
        let images = dir.path().join("images.yaml");
        std::fs::write(
            &images,
            format!(
                "e2e.test/python:\n  entrypoint: {py}\n  commands: {{python3: {py}, sh: /bin/sh, test: /usr/bin/test}}\n",
                py = python().display()
            ),
        )
        .expect("image map");
        Host {
            bridge,
            subnet,
            gateway,
            dir,
            kubelet_tls,
            kcp: Some(kcp),
            agent: None,
        }
    }

    fn kcp(&self) -> &KcpProcess {
        self.kcp.as_ref().expect("kcp runs")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn mnt(&self, name: &str) -> String {
        self.dir.path().join("mnt").join(name).display().to_string()
    }

    fn start_agent(&mut self) {
        let port = self
            .kcp()
            .base_url()
            .rsplit(':')
            .next()
            .expect("port")
            .to_owned();
        let mut command = Command::new(AGENT);
        command
            .arg("run")
            .arg("--kubeconfig")
            .arg(self.kcp().kubeconfig())
            .arg("--state-dir")
            .arg(self.state())
            .arg("--images")
            .arg(self.dir.path().join("images.yaml"))
            .args(["--bridge", &self.bridge, "--subnet", &self.subnet])
            .args([
                "--api-server-host",
                &self.gateway.to_string(),
                "--api-server-port",
                &port,
            ])
            .args(["--max-backoff", "1s", "--resync", "1s"])
            .args(self.kubelet_tls.kubelet_serving_flags())
            .env("RUST_BACKTRACE", "1");
        self.agent = Some(ChildGuard::spawn(
            "kcp-node-agent",
            &mut command,
            &self.dir.path().join("agent.log"),
        ));
    }

    /// Stops the agent with SIGTERM; it must exit 0.
    async fn stop_agent(&mut self) {
        let mut agent = self.agent.take().expect("agent");
        let status = agent.stop(Duration::from_secs(120)).await;
        assert!(
            status.success(),
            "agent exit {status}\n{}",
            agent.log_tail()
        );
    }

    /// Everything the agent logged (of its latest run).
    fn agent_log_file(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    /// How many exec sessions reached the agent as WebSockets.
    fn websocket_execs(&self) -> usize {
        self.agent_log_file()
            .lines()
            .filter(|l| l.contains(" exec ") && l.contains("transport=websocket"))
            .count()
    }

    fn agent_log(&self) -> String {
        self.agent
            .as_ref()
            .map(|a| a.log_tail())
            .unwrap_or_default()
    }

    async fn get(&self, path: &str) -> Value {
        let response = self.kcp().get(&format!("{ROOT}{path}")).await;
        if response.status == 404 {
            return Value::Null;
        }
        assert_eq!(response.status, 200, "GET {path}: {}", response.text());
        response.json()
    }

    async fn create(&self, collection: &str, object: Value) {
        let response = self
            .kcp()
            .send_json(
                reqwest::Method::POST,
                &format!("{ROOT}{collection}"),
                &object,
            )
            .await;
        assert_eq!(
            response.status,
            201,
            "POST {collection}: {}",
            response.text()
        );
    }

    async fn strategic_patch(&self, path: &str, patch: Value) {
        let response = self
            .kcp()
            .send(
                reqwest::Method::PATCH,
                &format!("{ROOT}{path}"),
                "application/strategic-merge-patch+json",
                patch.to_string(),
            )
            .await;
        assert_eq!(response.status, 200, "PATCH {path}: {}", response.text());
    }

    async fn delete(&self, path: &str) {
        let response = self
            .kcp()
            .send_json(
                reqwest::Method::DELETE,
                &format!("{ROOT}{path}"),
                &json!({}),
            )
            .await;
        assert!(
            response.status == 200 || response.status == 202,
            "DELETE {path}: {}",
            response.text()
        );
    }

    async fn pods(&self, namespace: &str, selector: &str) -> Vec<Value> {
        let list = self
            .get(&format!(
                "/api/v1/namespaces/{namespace}/pods?labelSelector={}",
                selector.replace('=', "%3D")
            ))
            .await;
        list["items"].as_array().cloned().unwrap_or_default()
    }

    fn log_of(&self, namespace: &str, pod: &str, container: &str) -> String {
        std::fs::read_to_string(
            self.state()
                .join("pods")
                .join(format!("{namespace}_{pod}"))
                .join(format!("{container}.log")),
        )
        .unwrap_or_default()
    }

    /// Waits until `check` holds, quoting the agent's log on failure.
    async fn eventually<T, F, Fut>(&self, what: &str, check: F) -> T
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + PATIENCE.within;
        loop {
            match check().await {
                Ok(value) => return value,
                Err(last) => assert!(
                    Instant::now() < deadline,
                    "{what}: not within {:?}; last: {last}\n{}",
                    PATIENCE.within,
                    self.agent_log()
                ),
            }
            tokio::time::sleep(PATIENCE.every).await;
        }
    }

    /// Waits until the Deployment has rolled out `replicas` ready, available, updated pods.
    async fn rolled_out(&self, name: &str, replicas: i64) -> Value {
        self.eventually(&format!("deployment {name} rolled out"), || async {
            let d = self
                .get(&format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}"))
                .await;
            let s = &d["status"];
            let done = s["observedGeneration"] == d["metadata"]["generation"]
                && s["replicas"] == replicas
                && s["updatedReplicas"] == replicas
                && s["readyReplicas"] == replicas
                && s["availableReplicas"] == replicas;
            if done { Ok(d) } else { Err(s.to_string()) }
        })
        .await
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            agent.kill();
        }
        let _ = agent_command(&["cleanup", "--bridge", &self.bridge]);
    }
}

fn env_var(name: &str, value: &str) -> Value {
    json!({ "name": name, "value": value })
}

fn field(name: &str, path: &str) -> Value {
    json!({ "name": name, "valueFrom": { "fieldRef": { "fieldPath": path } } })
}

fn python_image() -> &'static str {
    "e2e.test/python:3"
}

async fn create_workloads(host: &Host) {
    for namespace in [NS, FAULTS] {
        host.create(
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
    }
    host.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
            "data": {"password": "czNjcmV0"}
        }),
    )
    .await;
    host.create(
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
            "data": {"mode": "fast", "app.conf": "color=blue"}
        }),
    )
    .await;
    let web_script = "echo \"env pod=$POD_NAME ns=$POD_NAMESPACE ip=$POD_IP greeting=$GREETING password=$PASSWORD mode=$MODE\"; \
        echo \"file password=`cat CREDS/password` conf=`cat APP/app.conf`\"; \
        echo \"hostname=`cat /proc/sys/kernel/hostname`\"; \
        echo '$(POD_NAME) version $(VERSION) $(UNDEFINED) $$(POD_NAME)' > index.html; \
        exec python3 -m http.server 8080"
        .replace("CREDS", &host.mnt("creds"))
        .replace("APP", &host.mnt("app"));
    host.create(&format!("/apis/apps/v1/namespaces/{NS}/deployments"), json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "web", "image": python_image(),
                        "command": ["sh", "-c"], "args": [web_script],
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "env": [
                            field("POD_NAME", "metadata.name"),
                            field("POD_NAMESPACE", "metadata.namespace"),
                            field("POD_IP", "status.podIP"),
                            env_var("GREETING", "hello-$(POD_NAME)"),
                            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                            env_var("VERSION", "1"),
                        ],
                        "volumeMounts": [
                            {"name": "creds", "mountPath": host.mnt("creds"), "readOnly": true},
                            {"name": "app", "mountPath": host.mnt("app")},
                        ],
                        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                        "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
                    }],
                    "volumes": [
                        {"name": "creds", "secret": {"secretName": "creds"}},
                        {"name": "app", "configMap": {"name": "settings", "items": [{"key": "app.conf", "path": "app.conf", "mode": 0o400}]}},
                    ],
                },
            },
        },
    })).await;
    host.create(&format!("/api/v1/namespaces/{NS}/services"), json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    })).await;
    let shared = host.mnt("shared");
    host.create(&format!("/apis/apps/v1/namespaces/{NS}/deployments"), json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gate"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "gate"}},
            "template": {
                "metadata": {"labels": {"app": "gate"}},
                "spec": {
                    "initContainers": [
                        {"name": "one", "image": python_image(), "command": ["sh", "-c", format!("echo one > {shared}/order")],
                         "volumeMounts": [{"name": "shared", "mountPath": shared}]},
                        {"name": "two", "image": python_image(), "command": ["sh", "-c", format!("echo two >> {shared}/order")],
                         "volumeMounts": [{"name": "shared", "mountPath": shared}]},
                    ],
                    "containers": [{
                        "name": "gate", "image": python_image(),
                        "args": ["-m", "http.server", "8081", "--directory", shared],
                        "volumeMounts": [{"name": "shared", "mountPath": shared}],
                        "readinessProbe": {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 1},
                    }],
                    "volumes": [{"name": "shared", "emptyDir": {}}],
                },
            },
        },
    })).await;
    host.create(&format!("/api/v1/namespaces/{NS}/services"), json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "gate"},
        "spec": {"clusterIP": "10.96.0.10", "selector": {"app": "gate"}, "ports": [{"port": 8081}]},
    })).await;
    host.create(&format!("/api/v1/namespaces/{NS}/services"), json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
        "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"name": "http", "port": 8080}]},
    })).await;
    let data = host.mnt("data");
    host.create(&format!("/apis/apps/v1/namespaces/{NS}/statefulsets"), json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{
                    "name": "db", "image": python_image(),
                    "command": ["sh", "-c", format!("echo \"$(POD_NAME) $(VERSION)\" >> {data}/log; exec python3 -m http.server 8080 --directory {data}")],
                    "env": [field("POD_NAME", "metadata.name"), env_var("VERSION", "1")],
                    "volumeMounts": [{"name": "data", "mountPath": data}],
                    "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                }]},
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    })).await;
    host.create(&format!("/apis/apps/v1/namespaces/{FAULTS}/deployments"), json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "crash"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "crash"}},
            "template": {
                "metadata": {"labels": {"app": "crash"}},
                "spec": {"containers": [{"name": "crash", "image": python_image(), "command": ["sh", "-c", "echo crashing; exit 3"]}]},
            },
        },
    })).await;
    host.create(
        &format!("/api/v1/namespaces/{FAULTS}/pods"),
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lost"},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/nothing:1"}]},
        }),
    )
    .await;
}

/// The Deployment `web`: status as the real controller writes it, pods, env, volumes, hostname.
async fn check_web(host: &Host) -> Vec<u32> {
    let d = host.rolled_out("web", 2).await;
    let status = &d["status"];
    assert_eq!(status["labelSelector"], "app=web", "{status}");
    assert!(status.get("unavailableReplicas").is_none(), "{status}");
    let pods = host.pods(NS, "app=web").await;
    assert_eq!(pods.len(), 2);
    let hash = pods[0]["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .expect("hash")
        .to_owned();
    assert_eq!(condition(status, "Available")["status"], "True");
    assert_eq!(
        condition(status, "Available")["reason"],
        "MinimumReplicasAvailable"
    );
    assert_eq!(
        condition(status, "Progressing")["reason"],
        "NewReplicaSetAvailable"
    );
    assert_eq!(
        condition(status, "Progressing")["message"],
        format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
    );
    let mut pids = Vec::new();
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().expect("name");
        assert!(name.starts_with(&format!("web-{hash}-")), "{name}");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "Deployment");
        assert_eq!(pod["status"]["phase"], "Running");
        let ip = pod["status"]["podIP"].as_str().expect("pod IP");
        assert_eq!(pod["status"]["hostIP"], host.gateway.to_string());
        assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
        pids.push(container_pid(pod).expect("pid"));
        let log = host.log_of(NS, name, "web");
        assert!(
            log.contains(&format!(
                "env pod={name} ns={NS} ip={ip} greeting=hello-{name} password=s3cret mode=fast"
            )),
            "env of {name}: {log}"
        );
        assert!(
            log.contains("file password=s3cret conf=color=blue"),
            "volumes of {name}: {log}"
        );
        assert!(
            log.contains(&format!("hostname={name}")),
            "hostname of {name}: {log}"
        );
    }
    let file = Path::new(&host.mnt("app")).to_owned();
    assert!(file.is_dir(), "mount points are created on the host");
    pids
}

/// Raw HTTP/1.0 GET through `address`; the body, or why not.
async fn http_get(address: std::net::SocketAddr) -> Result<String, String> {
    http_get_path(address, "/").await
}

/// Raw HTTP/1.0 GET of `path` through `address`.
async fn http_get_path(address: std::net::SocketAddr, path: &str) -> Result<String, String> {
    let mut stream = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect(address),
    )
    .await
    .map_err(|_| "connect timed out".to_owned())?
    .map_err(|e| format!("connect: {e}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response))
        .await
        .map_err(|_| "read timed out".to_owned())?
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&response).into_owned();
    if !text.starts_with("HTTP/1.0 200") {
        return Err(format!("answer: {text:?}"));
    }
    Ok(text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_owned())
}

/// The gate Deployment: not ready (and no endpoint, no availability) until the exec probe passes.
async fn check_readiness_gate(host: &Host) {
    let pod = host
        .eventually("gate pod running", || async {
            let pods = host.pods(NS, "app=gate").await;
            match pods.first() {
                Some(p) if p["status"]["phase"] == "Running" => Ok(p.clone()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let name = pod["metadata"]["name"].as_str().expect("name").to_owned();
    // Several probe periods pass without the file: still not ready.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pod = host
        .get(&format!("/api/v1/namespaces/{NS}/pods/{name}"))
        .await;
    assert_eq!(
        pod["status"]["containerStatuses"][0]["ready"], false,
        "{pod}"
    );
    let d = host
        .get(&format!("/apis/apps/v1/namespaces/{NS}/deployments/gate"))
        .await;
    assert!(
        d["status"].get("availableReplicas").is_none(),
        "{}",
        d["status"]
    );
    let endpoints = host
        .get(&format!("/api/v1/namespaces/{NS}/endpoints/gate"))
        .await;
    assert!(
        endpoints["subsets"][0].get("addresses").is_none(),
        "{endpoints}"
    );
    assert_eq!(
        endpoints["subsets"][0]["notReadyAddresses"][0]["targetRef"]["name"],
        name.as_str()
    );
    // A Service whose clusterIP is outside the subnet gets an address recorded in an annotation.
    let service = host
        .get(&format!("/api/v1/namespaces/{NS}/services/gate"))
        .await;
    let vip = service["metadata"]["annotations"]["e2e.kcp.io/virtual-ip"]
        .as_str()
        .expect("virtual IP annotation")
        .to_owned();
    std::fs::write(
        host.state()
            .join("pods")
            .join(format!("{NS}_{name}"))
            .join("work")
            .join("gate")
            .join("ready"),
        "",
    )
    .expect("touching the readiness file");
    host.rolled_out("gate", 1).await;
    let vip: Ipv4Addr = vip.parse().expect("vip");
    // Init containers ran in order before the container, sharing an emptyDir with it.
    let order = host
        .eventually("gate reachable through its virtual IP", || async {
            http_get_path((vip, 8081).into(), "/order").await
        })
        .await;
    assert_eq!(order, "one\ntwo");
    let statuses = &pod["status"]["initContainerStatuses"];
    assert_eq!(statuses[0]["name"], "one");
    assert_eq!(
        statuses[1]["state"]["terminated"]["reason"], "Completed",
        "{statuses}"
    );
}

/// A bare pod (scheduled by the agent) that uses Service names, the StatefulSet's per-pod names and
/// its service-account token against the host API.
async fn check_client_pod(host: &Host) {
    let script = r#"
import json, os, socket, ssl, urllib.request
print("resolve", socket.gethostbyname("web"), socket.gethostbyname("db-1.db"))
print("web", urllib.request.urlopen("http://web/", timeout=5).read().decode().strip())
print("db", urllib.request.urlopen("http://db-0.db.apps.svc.cluster.local:8080/log", timeout=5).read().decode().split())
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
url = "https://%s:%s/apis/authentication.k8s.io/v1/selfsubjectreviews" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
request = urllib.request.Request(url, data=body, method="POST", headers={"Authorization": "Bearer " + open(sa + "/token").read(), "Content-Type": "application/json"})
print("user", json.load(urllib.request.urlopen(request, context=ctx, timeout=5))["status"]["userInfo"]["username"])
print("namespace", open(sa + "/namespace").read())
"#;
    host.create(&format!("/api/v1/namespaces/{NS}/pods"), json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "client", "image": python_image(), "command": ["python3", "-c", script]}]},
    })).await;
    let pod = host
        .eventually("client pod finished", || async {
            let pod = host
                .get(&format!("/api/v1/namespaces/{NS}/pods/client"))
                .await;
            match pod["status"]["phase"].as_str() {
                Some("Succeeded") => Ok(pod),
                Some("Failed") => panic!(
                    "client pod failed: {}\n{}",
                    pod["status"],
                    host.log_of(NS, "client", "client")
                ),
                _ => Err(pod["status"].to_string()),
            }
        })
        .await;
    assert_eq!(pod["spec"]["nodeName"], "kcp-node-agent");
    let log = host.log_of(NS, "client", "client");
    let web = host
        .get(&format!("/api/v1/namespaces/{NS}/services/web"))
        .await;
    let vip = web["spec"]["clusterIP"].as_str().expect("clusterIP");
    assert_eq!(web["spec"]["clusterIPs"][0], vip);
    assert!(log.contains(&format!("resolve {vip} ")), "{log}");
    assert!(log.contains("version 1 $(UNDEFINED) $(POD_NAME)"), "{log}");
    assert!(log.contains("db ['db-0', '1', 'db-0', '2']"), "{log}");
    assert!(
        log.contains(&format!("user system:serviceaccount:{NS}:default")),
        "{log}"
    );
    assert!(log.contains(&format!("namespace {NS}")), "{log}");
}

/// The StatefulSet: ordered pods, bound claims, status; a rolling update keeps data and addresses.
async fn check_statefulset(host: &Host) {
    let path = format!("/apis/apps/v1/namespaces/{NS}/statefulsets/db");
    let sts = host
        .eventually("statefulset ready", || async {
            let sts = host.get(&path).await;
            let s = &sts["status"];
            if s["readyReplicas"] == 2 && s["availableReplicas"] == 2 {
                Ok(sts)
            } else {
                Err(s.to_string())
            }
        })
        .await;
    let status = &sts["status"];
    let revision = status["updateRevision"]
        .as_str()
        .expect("revision")
        .to_owned();
    assert!(revision.starts_with("db-"), "{status}");
    assert_eq!(status["currentRevision"], revision.as_str());
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["currentReplicas"], 2);
    assert_eq!(status["updatedReplicas"], 2);
    assert_eq!(status["collisionCount"], 0);
    assert_eq!(status["labelSelector"], "app=db");
    for ordinal in 0..2 {
        let claim = host
            .get(&format!(
                "/api/v1/namespaces/{NS}/persistentvolumeclaims/data-db-{ordinal}"
            ))
            .await;
        assert_eq!(claim["status"]["phase"], "Bound", "{claim}");
    }
    let addresses = |pods: &[Value]| {
        let mut list: Vec<(String, String)> = pods
            .iter()
            .map(|p| {
                (
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    p["status"]["podIP"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        list.sort();
        list
    };
    let before = addresses(&host.pods(NS, "app=db").await);
    assert_eq!(
        before.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        vec!["db-0", "db-1"]
    );
    host.strategic_patch(
        &path,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "env": [{"name": "VERSION", "value": "2"}]}]}}}}),
    )
    .await;
    host.eventually("statefulset rolled", || async {
        let sts = host.get(&path).await;
        let s = &sts["status"];
        let done = s["observedGeneration"] == sts["metadata"]["generation"]
            && s["updateRevision"] != revision.as_str()
            && s["currentRevision"] == s["updateRevision"]
            && s["updatedReplicas"] == 2
            && s["readyReplicas"] == 2;
        if done { Ok(()) } else { Err(s.to_string()) }
    })
    .await;
    let after = addresses(&host.pods(NS, "app=db").await);
    assert_eq!(before, after, "StatefulSet pods keep their addresses");
    let claim = host
        .get(&format!(
            "/api/v1/namespaces/{NS}/persistentvolumeclaims/data-db-0"
        ))
        .await;
    let uid = claim["metadata"]["uid"].as_str().expect("claim uid");
    let log = std::fs::read_to_string(
        host.state()
            .join("volumes")
            .join(format!("{NS}_data-db-0_{uid}"))
            .join("log"),
    )
    .expect("claim data");
    assert_eq!(log, "db-0 1\ndb-0 2\n", "data survives the update");
}

/// A rolling update of `web` while a client polls through the Service: no request fails.
async fn check_rolling_update(host: &Host) {
    let web = host
        .get(&format!("/api/v1/namespaces/{NS}/services/web"))
        .await;
    let vip: Ipv4Addr = web["spec"]["clusterIP"]
        .as_str()
        .expect("vip")
        .parse()
        .expect("ip");
    let address = std::net::SocketAddr::from((vip, 80));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let done = done.clone();
        tokio::spawn(async move {
            let (mut ok, mut failures, mut saw_new) = (0u32, Vec::new(), false);
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                match http_get(address).await {
                    Ok(body) => {
                        ok += 1;
                        saw_new |= body.contains("version 2");
                    }
                    Err(error) => failures.push(error),
                }
            }
            (ok, failures, saw_new)
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    host.strategic_patch(
        &format!("/apis/apps/v1/namespaces/{NS}/deployments/web"),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "VERSION", "value": "2"}]}]}}}}),
    )
    .await;
    let d = host.rolled_out("web", 2).await;
    let hash = host
        .eventually("only new pods left", || async {
            let pods = host.pods(NS, "app=web").await;
            let hashes: std::collections::BTreeSet<String> = pods
                .iter()
                .filter_map(|p| {
                    p["metadata"]["labels"]["pod-template-hash"]
                        .as_str()
                        .map(str::to_owned)
                })
                .collect();
            if pods.len() == 2 && hashes.len() == 1 {
                Ok(hashes.into_iter().next().unwrap_or_default())
            } else {
                Err(format!("{hashes:?}"))
            }
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, failures, saw_new) = poller.await.expect("poller");
    assert!(
        failures.is_empty(),
        "{} of {} requests failed during the rollout: {failures:?}",
        failures.len(),
        ok as usize + failures.len()
    );
    assert!(
        ok > 20 && saw_new,
        "{ok} requests, new version seen: {saw_new}"
    );
    let progressing = condition(&d["status"], "Progressing");
    assert_eq!(
        progressing["message"],
        format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
    );
}

/// A crashing container restarts with back-off; an unknown image is a clear pod error.
async fn check_faults(host: &Host) {
    let saw_backoff = std::sync::atomic::AtomicBool::new(false);
    let pod = host
        .eventually("crash restarts", || async {
            let pods = host.pods(FAULTS, "app=crash").await;
            let Some(pod) = pods.first() else {
                return Err("no pod".to_owned());
            };
            let container = &pod["status"]["containerStatuses"][0];
            if container["state"]["waiting"]["reason"] == "CrashLoopBackOff" {
                saw_backoff.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if container["restartCount"].as_i64().unwrap_or(0) >= 2 {
                Ok(pod.clone())
            } else {
                Err(container.to_string())
            }
        })
        .await;
    let saw_backoff = saw_backoff.load(std::sync::atomic::Ordering::SeqCst);
    let container = &pod["status"]["containerStatuses"][0];
    assert_eq!(
        container["lastState"]["terminated"]["exitCode"], 3,
        "{container}"
    );
    assert_eq!(
        container["lastState"]["terminated"]["reason"], "Error",
        "{container}"
    );
    assert_eq!(container["ready"], false);
    assert!(saw_backoff, "CrashLoopBackOff shown between restarts");
    let name = pod["metadata"]["name"].as_str().expect("name");
    assert!(
        host.log_of(FAULTS, name, "crash")
            .matches("crashing")
            .count()
            >= 2
    );
    let lost = host
        .eventually("unknown image reported", || async {
            let pod = host
                .get(&format!("/api/v1/namespaces/{FAULTS}/pods/lost"))
                .await;
            let waiting = &pod["status"]["containerStatuses"][0]["state"]["waiting"];
            if waiting["reason"] == "ErrImagePull" {
                Ok(waiting.clone())
            } else {
                Err(pod["status"].to_string())
            }
        })
        .await;
    assert!(
        lost["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not in the node agent's image map"),
        "{lost}"
    );
    let log = host.log_of(FAULTS, "lost", "c");
    assert!(
        log.contains("ErrImagePull: image \"registry.invalid/nothing:1\" is not in the node agent's image map"),
        "{log}"
    );
}

/// Deleting a Deployment stops its pods (the host has no garbage collector: the agent does it).
async fn check_deletion(host: &Host) {
    let pid = container_pid(&host.pods(NS, "app=gate").await[0]).expect("pid");
    host.delete(&format!("/apis/apps/v1/namespaces/{NS}/deployments/gate"))
        .await;
    host.eventually("gate pods gone", || async {
        let pods = host.pods(NS, "app=gate").await;
        if pods.is_empty() && !alive(pid) {
            Ok(())
        } else {
            Err(format!("{} pods, pid alive: {}", pods.len(), alive(pid)))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_runs_workloads_on_the_host() {
    let began = Instant::now();
    let phase = |name: &str| eprintln!("[{:>6.1}s] {name}", began.elapsed().as_secs_f64());
    let mut host = Host::start(0).await;
    phase("server up, CRDs installed");
    host.start_agent();
    create_workloads(&host).await;
    let web_pids = check_web(&host).await;
    phase("deployment available");
    check_readiness_gate(&host).await;
    phase("readiness gate");
    check_faults(&host).await;
    phase("faults");
    check_statefulset(&host).await;
    phase("statefulset rolled");
    check_client_pod(&host).await;
    phase("client pod");
    check_rolling_update(&host).await;
    phase("rolling update");
    check_deletion(&host).await;
    phase("deletion");

    // SIGTERM: every pod stops, every namespace, veth and virtual IP goes, mirrors are deleted.
    let pids: Vec<u32> = {
        let mut pids = web_pids;
        pids.extend(
            host.pods(NS, "app=db")
                .await
                .iter()
                .filter_map(container_pid),
        );
        pids
    };
    let db_addresses: Vec<String> = host
        .pods(NS, "app=db")
        .await
        .iter()
        .map(|p| p["status"]["podIP"].to_string())
        .collect();
    host.stop_agent().await;
    assert_no_pod_network(&host.bridge);
    assert!(
        pids.iter().all(|pid| !alive(*pid)),
        "container processes left: {pids:?}"
    );
    assert!(
        host.pods(NS, "app=web").await.is_empty(),
        "pod mirrors are deleted"
    );
    phase("graceful stop");

    // A new run picks the workloads up again; StatefulSet pods get their addresses back.
    host.start_agent();
    host.eventually("deployment pods back", || async {
        let pods = host.pods(NS, "app=web").await;
        let ready = ready_count(&pods);
        if ready == 2 {
            Ok(())
        } else {
            Err(format!("{} pods, {ready} ready", pods.len()))
        }
    })
    .await;
    host.eventually("statefulset back", || async {
        let pods = host.pods(NS, "app=db").await;
        let ready = ready_count(&pods);
        let addresses: Vec<String> = pods
            .iter()
            .map(|p| p["status"]["podIP"].to_string())
            .collect();
        if ready == 2 && addresses == db_addresses {
            Ok(())
        } else {
            Err(format!("{addresses:?} vs {db_addresses:?}"))
        }
    })
    .await;
    let pids: Vec<u32> = host
        .pods(NS, "app=web")
        .await
        .iter()
        .filter_map(container_pid)
        .collect();

    phase("restarted");

    // SIGKILL leaves everything behind; `cleanup` removes it.
    let mut agent = host.agent.take().expect("agent");
    agent.kill();
    assert!(!pod_namespaces(&host.bridge).is_empty());
    assert!(
        pids.iter().all(|pid| alive(*pid)),
        "containers outlive a killed agent"
    );
    let state = host.state().display().to_string();
    let cleanup = agent_command(&[
        "cleanup",
        "--bridge",
        &host.bridge,
        "--state-dir",
        &state,
        "--keep-bridge",
    ]);
    assert!(
        cleanup.status.success(),
        "{}",
        String::from_utf8_lossy(&cleanup.stderr)
    );
    assert_no_pod_network(&host.bridge);
    assert!(
        pids.iter().all(|pid| !alive(*pid)),
        "cleanup kills what a crashed run left"
    );

    phase("cleanup after SIGKILL");
    let mut kcp = host.kcp.take().expect("kcp");
    kcp.stop_cleanly().await;
    let down = agent_command(&["network", "down", "--bridge", &host.bridge]);
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert!(
        ip(&["link", "show", "dev", &host.bridge]).is_empty(),
        "bridge removed"
    );
}

/// The kubelet endpoints through the server, with kubectl 1.27 (SPDY) and 1.33 (WebSockets):
/// logs, exec, port-forward, their errors, and that nothing is left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_serves_pod_streams_through_the_server() {
    let mut host = Host::start(1).await;
    host.start_agent();
    streaming::check(&host).await;
    host.stop_agent().await;
    let mut kcp = host.kcp.take().expect("kcp");
    kcp.stop_cleanly().await;
    let _ = agent_command(&["network", "down", "--bridge", &host.bridge]);
}

/// `kubectl attach -i`/`-it` to containers started with `stdin`/`tty`, with kubectl 1.27 and
/// 1.33, every WebSocket variant of exec on the wire, and the streams through a front-proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_attaches_to_stdin_and_streams_every_protocol_and_through_a_front_proxy() {
    let identity = front_proxy::ProxyIdentity::new();
    let mut host = Host::start_with(2, &identity.server_flags()).await;
    host.start_agent();
    attach::check(&host).await;
    wire::check(&host, &attach::Pods::of("1.27").plain).await;
    front_proxy::check(&host, &identity, &attach::Pods::of("1.27").reader).await;
    host.stop_agent().await;
    let mut kcp = host.kcp.take().expect("kcp");
    kcp.stop_cleanly().await;
    let _ = agent_command(&["network", "down", "--bridge", &host.bridge]);
}
