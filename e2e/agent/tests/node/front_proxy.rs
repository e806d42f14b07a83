//! Pod streams through `kcp front-proxy`: kubectl 1.27 (SPDY) and 1.33 (WebSockets) talk to a
//! front-proxy in front of the server whose pods the agent runs, and `logs -f`, `exec`,
//! `attach -i` and `port-forward` work as against the server itself: the proxy passes the
//! upgrades through (the agent's log shows 1.33's exec arrived as a WebSocket, not as a SPDY
//! fallback). The server trusts the proxy's identity headers from a client certificate with CN
//! `kcp-front-proxy` of a request-header CA made here; the user is a certificate of the
//! server's client CA bound to `cluster-admin`.

use std::path::PathBuf;
use std::process::Command;

use kcp_testing::identities::{CertificateAuthority, KubeconfigUser, write_kubeconfig};
use kcp_testing::{ChildGuard, Kubectl, free_port};
use serde_json::json;

use super::streaming::local_port;
use super::{Host, NS, python_image};

const VERSIONS: [&str; 2] = ["1.27", "1.33"];
const USER: &str = "streamer";

/// The request-header CA and the proxy's client certificate, made before the server starts.
pub struct ProxyIdentity {
    dir: tempfile::TempDir,
}

impl ProxyIdentity {
    pub fn new() -> ProxyIdentity {
        let dir = kcp_testing::temp_dir("front-proxy-identity");
        let ca = CertificateAuthority::generate("requestheader-ca");
        let client = ca.client("kcp-front-proxy", &[]);
        for (name, text) in [
            ("requestheader-ca.crt", &ca.cert_pem),
            ("proxy-client.crt", &client.cert_pem),
            ("proxy-client.key", &client.key_pem),
        ] {
            std::fs::write(dir.path().join(name), text).expect("writing the proxy's identity");
        }
        ProxyIdentity { dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// What the server needs to trust the proxy's identity headers.
    pub fn server_flags(&self) -> Vec<String> {
        vec![
            format!(
                "--requestheader-client-ca-file={}",
                self.file("requestheader-ca.crt").display()
            ),
            "--requestheader-allowed-names=kcp-front-proxy".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        ]
    }
}

/// A running front-proxy and a kubeconfig of the user through it.
struct FrontProxy {
    _process: ChildGuard,
    kubeconfig: PathBuf,
}

impl FrontProxy {
    async fn start(host: &Host, identity: &ProxyIdentity) -> FrontProxy {
        let kcp = host.kcp();
        let dir = identity.dir.path();
        let server_ca = dir.join("server-ca.crt");
        std::fs::write(&server_ca, &kcp.admin().ca_pem).expect("writing the server CA");
        let mapping = json!([{
            "path": "/clusters/", "backend": kcp.base_url(), "backend_server_ca": server_ca,
            "proxy_client_cert": identity.file("proxy-client.crt"),
            "proxy_client_key": identity.file("proxy-client.key"),
        }]);
        let mapping_file = dir.join("mapping.yaml");
        // JSON is YAML.
        std::fs::write(&mapping_file, mapping.to_string()).expect("writing the mapping");
        let port = free_port();
        let mut command = Command::new(kcp_testing::binaries::workspace_binary("kcp", "kcp"));
        command.args(kcp.front_proxy_args(&dir.join("proxy"), port, &mapping_file));
        let process = ChildGuard::spawn(
            "kcp front-proxy",
            &mut command,
            &dir.join("front-proxy.log"),
        );
        host.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": { "name": USER },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
                "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER }],
            }),
        )
        .await;
        let user = kcp.client_ca().client(USER, &[]);
        let kubeconfig = dir.join("through-proxy.kubeconfig");
        write_kubeconfig(
            &kubeconfig,
            &format!("https://127.0.0.1:{port}/clusters/root"),
            &kcp.admin().ca_pem,
            KubeconfigUser::Certificate(&user),
        );
        let proxy = FrontProxy {
            _process: process,
            kubeconfig,
        };
        // Ready once its index has listed the shard and the user is authorized.
        let kubectl = Kubectl::new(VERSIONS[0], &proxy.kubeconfig);
        kubectl.wait_for_output(
            &["auth", "can-i", "create", "pods/exec", "-n", NS],
            "yes",
            std::time::Duration::from_secs(60),
        );
        proxy
    }
}

async fn create_web_pod(host: &Host) {
    host.create(
        &format!("/api/v1/namespaces/{NS}/pods"),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web", "namespace": NS },
            "spec": { "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "main", "image": python_image(),
                "args": ["-m", "http.server", "8080", "--bind", "127.0.0.1"] }] },
        }),
    )
    .await;
    host.eventually("the web pod ready", || async {
        let pod = host.get(&format!("/api/v1/namespaces/{NS}/pods/web")).await;
        if pod["status"]["containerStatuses"][0]["ready"] == true {
            Ok(())
        } else {
            Err(pod["status"].to_string())
        }
    })
    .await;
}

async fn check_version(host: &Host, kubectl: &Kubectl, reader: &str) {
    let version = kubectl.version();
    let mut follow = kubectl.background(&["logs", "-f", "-n", NS, reader, "--tail=1"]);
    follow.wait_for_line("a tick", |line| line == "tick");
    follow.wait_for_line("a later tick", |line| line == "tick");
    drop(follow);

    let before = host.websocket_execs();
    let run = kubectl.run(&[
        "exec",
        "-n",
        NS,
        reader,
        "--",
        "sh",
        "-c",
        "echo via-proxy; exit 3",
    ]);
    assert_eq!(run.stdout, "via-proxy\n", "{version}: {run:?}");
    assert_eq!(run.status.code(), Some(3), "{version}: {run:?}");
    assert_eq!(
        host.websocket_execs() > before,
        version != "1.27",
        "{version}: the WebSocket upgrade passed through the proxy"
    );

    let mut attach = kubectl.interactive(&["attach", "-i", "-n", NS, reader]);
    attach.wait_for_line("a tick (attached)", |line| line == "tick");
    attach.send("proxied\n");
    attach.wait_for_line("the answer", |line| line == "got proxied");
    drop(attach);

    let mut forward = kubectl.background(&["port-forward", "-n", NS, "pod/web", ":8080"]);
    let port = local_port(&mut forward);
    let response = reqwest::get(format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap_or_else(|e| panic!("{version}: a request through port-forward: {e}"));
    assert_eq!(response.status(), 200, "{version}");
}

/// `logs -f`, `exec`, `attach -i` and `port-forward` through the front-proxy, against the
/// stdin-reading pod `reader`.
pub async fn check(host: &Host, identity: &ProxyIdentity, reader: &str) {
    create_web_pod(host).await;
    let proxy = FrontProxy::start(host, identity).await;
    for version in VERSIONS {
        let kubectl = Kubectl::new(version, &proxy.kubeconfig);
        check_version(host, &kubectl, reader).await;
    }
}
