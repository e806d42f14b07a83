//! The front-proxy (issue 20) as real processes: one `kcp start` shard that trusts identity
//! headers only from a client certificate with CN `kcp-front-proxy` signed by a request-header CA
//! the test makes, and `kcp front-proxy` in front of it with that certificate, the shard's client
//! CA and a token file. Through the proxy only: kubectl creates, lists and watches; forged
//! `X-Remote-*` headers are ignored; a `system:masters` certificate loses the group (403 where
//! the shard itself says 200); a certificate of another CA is refused; a workspace the user may
//! not access and one that does not exist are both 403; the same token gets the same user,
//! groups and access decisions directly and through the proxy; a watch stays open while objects
//! are created; `/metrics` of the proxy answers a user a SubjectAccessReview in root allows
//! (403 for others, 401 without credentials); an upgrade request reaches a backend (a tiny HTTP server that switches protocols
//! and echoes) and bytes flow both ways. A shard that goes away (killed): requests for its
//! workspaces fail at once with a 503 `Status` and open watches end; once it is back on its
//! address, its workspaces answer again and a workspace created after the restart becomes
//! routable (the index listed the shard again). A service-account token works directly and
//! through the proxy (with and without `/clusters/` in the path) until its ServiceAccount is
//! deleted, then it is refused both ways (`--service-account-lookup`). A token only the shard
//! knows authenticates at the proxy through its token webhook (the shard's TokenReview endpoint)
//! as the same user as directly; a token nobody knows is 401 through the proxy.
//! The initializingworkspaces virtual workspace's
//! synthetic group `system:kcp:initializer:<name>` opens a workspace still Initializing at the
//! shard, and a client certificate claiming it through the proxy loses it (403).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use kcp_testing::identities::{
    CertificateAuthority, ClientIdentity, KubeconfigUser, write_kubeconfig,
};
use kcp_testing::{
    AdminCredentials, Caller, ChildGuard, KcpProcess, Kubectl, Patience, WatchStream, free_port,
    temp_dir,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));

const ALICE_TOKEN: &str = "alice-token-0123456789";
/// Known to the shard only: the proxy learns who it is from the shard's TokenReview endpoint,
/// its token webhook.
const CAROL_TOKEN: &str = "carol-token-0123456789";
const TEAM: &str = "root:team";
const WORKSPACES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

/// A shard, a front-proxy before it, and what the test needs to be its users.
struct Topology {
    shard: KcpProcess,
    proxy: ChildGuard,
    /// `https://127.0.0.1:<port>` of the proxy.
    proxy_url: String,
    client_ca: CertificateAuthority,
    dir: tempfile::TempDir,
    /// The echo server behind `/upgrade/`.
    _echo: tokio::task::JoinHandle<()>,
}

impl Topology {
    async fn start() -> Topology {
        let dir = temp_dir("front-proxy");
        let write = |name: &str, text: &str| -> PathBuf {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let requestheader_ca = CertificateAuthority::generate("requestheader-ca");
        let proxy_client = requestheader_ca.client("kcp-front-proxy", &[]);
        let requestheader_ca_file = write("requestheader-ca.crt", &requestheader_ca.cert_pem);
        let alice = format!("{ALICE_TOKEN},alice,alice-uid,\"devs,ops\"\n");
        let tokens = write("tokens.csv", &alice);
        let shard_tokens = write(
            "shard-tokens.csv",
            &format!("{alice}{CAROL_TOKEN},carol,carol-uid,\"testers\"\n"),
        );
        let shard = KcpProcess::start(
            binary(),
            "front-proxy-shard",
            &[
                format!(
                    "--requestheader-client-ca-file={}",
                    requestheader_ca_file.display()
                ),
                "--requestheader-allowed-names=kcp-front-proxy".into(),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--token-auth-file={}", shard_tokens.display()),
                // A port of its own, so that a restarted shard comes back where it was.
                format!("--secure-port={}", free_port()),
            ],
        )
        .await;
        let server_ca = write(
            "server-ca.crt",
            std::str::from_utf8(&shard.admin().ca_pem).unwrap(),
        );
        let proxy_cert = write("proxy-client.crt", &proxy_client.cert_pem);
        let proxy_key = write("proxy-client.key", &proxy_client.key_pem);
        // The proxy's token webhook: the shard's own TokenReview endpoint in root.
        let webhook = dir.path().join("token-webhook.kubeconfig");
        write_kubeconfig(
            &webhook,
            &shard.url("/clusters/root/apis/authentication.k8s.io/v1/tokenreviews"),
            &shard.admin().ca_pem,
            KubeconfigUser::Certificate(
                &shard
                    .client_ca()
                    .client("token-reviewer", &["system:masters"]),
            ),
        );
        let (echo_port, echo) = echo_server().await;
        let entry = |path: &str, backend: &str| {
            json!({"path": path, "backend": backend,
                "backend_server_ca": server_ca, "proxy_client_cert": proxy_cert,
                "proxy_client_key": proxy_key})
        };
        let mapping = json!([
            entry("/clusters/", shard.base_url()),
            entry("/services/", shard.base_url()),
            entry("/upgrade/", &format!("http://127.0.0.1:{echo_port}")),
        ]);
        // JSON is YAML.
        let mapping_file = write("mapping.yaml", &mapping.to_string());
        let port = free_port();
        let mut command = Command::new(binary());
        command
            .args(shard.front_proxy_args(&dir.path().join("proxy"), port, &mapping_file))
            .arg(format!("--token-auth-file={}", tokens.display()))
            .arg(format!(
                "--authentication-token-webhook-config-file={}",
                webhook.display()
            ))
            .arg("--authentication-token-webhook-version=v1")
            // The shard's generated signing key verifies its service-account tokens.
            .arg(format!(
                "--service-account-key-file={}",
                shard.root_directory().join("sa.key").display()
            ));
        let proxy = ChildGuard::spawn(
            "kcp front-proxy",
            &mut command,
            &dir.path().join("front-proxy.log"),
        );
        let topology = Topology {
            client_ca: shard.client_ca(),
            shard,
            proxy,
            proxy_url: format!("https://127.0.0.1:{port}"),
            dir,
            _echo: echo,
        };
        let client = topology
            .credentials(&topology.proxy_url, None)
            .anonymous_client();
        let readyz = format!("{}/readyz", topology.proxy_url);
        PATIENCE
            .eventually("the front-proxy is ready", || async {
                match client.get(&readyz).send().await {
                    Ok(response) if response.status() == 200 => Ok(()),
                    Ok(response) => Err(format!("{}", response.status())),
                    Err(error) => Err(format!("{error}; log: {}", topology.proxy_log())),
                }
            })
            .await;
        topology
    }

    /// The shard's CA with `identity` (or none) against `base`.
    fn credentials(&self, base: &str, identity: Option<&ClientIdentity>) -> AdminCredentials {
        AdminCredentials {
            server: base.to_owned(),
            ca_pem: self.shard.admin().ca_pem.clone(),
            identity_pem: identity.map(ClientIdentity::pem).unwrap_or_default(),
        }
    }

    fn caller(&self, base: &str, identity: Option<&ClientIdentity>, name: &str) -> Caller {
        let credentials = self.credentials(base, identity);
        let client = match identity {
            Some(_) => credentials.client(),
            None => credentials.anonymous_client(),
        };
        Caller::at(base, client, name)
    }

    fn proxy_caller(&self, identity: Option<&ClientIdentity>, name: &str) -> Caller {
        self.caller(&self.proxy_url, identity, name)
    }

    fn shard_caller(&self, identity: Option<&ClientIdentity>, name: &str) -> Caller {
        self.caller(self.shard.base_url(), identity, name)
    }

    fn proxy_log(&self) -> String {
        self.proxy.log_tail()
    }
}

/// A plain HTTP server that answers every request with 101 and then echoes what it reads.
async fn echo_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_lowercase();
                let upgrade =
                    head.contains("upgrade: echo") && head.contains("connection: upgrade");
                let answer: &[u8] = if upgrade {
                    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"
                } else {
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
                };
                if stream.write_all(answer).await.is_err() || !upgrade {
                    return;
                }
                let (mut reader, mut writer) = stream.split();
                let _ = tokio::io::copy(&mut reader, &mut writer).await;
            });
        }
    });
    (port, task)
}

fn workspace(name: &str) -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
        "metadata": {"name": name}, "spec": {}})
}

fn cluster_admin_binding(user: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{user}-cluster-admin")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
}

fn access_review(verb: &str, resource: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": "default"}}})
}

/// The workspace `root:team`, where alice is cluster-admin, routable through the proxy.
async fn team_workspace(topology: &Topology) {
    alices_workspace(topology, "team").await;
}

/// The workspace `root:<name>`, where alice is cluster-admin, routable through the proxy.
async fn alices_workspace(topology: &Topology, name: &str) {
    let admin = Caller::admin(&topology.shard);
    admin.create(WORKSPACES, &workspace(name)).await;
    topology
        .shard
        .wait_for(
            &format!("root:{name} Ready"),
            &format!("{WORKSPACES}/{name}"),
            |answer| answer.status == 200 && answer.json()["status"]["phase"] == "Ready",
        )
        .await;
    admin
        .create(
            &format!("/clusters/root:{name}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
            &cluster_admin_binding("alice"),
        )
        .await;
    let alice = topology.proxy_caller(None, "alice").bearer(ALICE_TOKEN);
    alice_gets(&alice, &format!("/clusters/root:{name}/api/v1/namespaces")).await;
}

/// Waits until `path` answers alice 200 through the proxy.
async fn alice_gets(alice: &Caller, path: &str) {
    PATIENCE
        .eventually(
            &format!("{path} answers alice through the proxy"),
            || async {
                let response = alice.get(path).await;
                (response.status == 200)
                    .then_some(())
                    .ok_or_else(|| format!("{} {}", response.status, response.text()))
            },
        )
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shard_that_goes_away_and_comes_back() {
    let mut topology = Topology::start().await;
    team_workspace(&topology).await;
    let alice = topology.proxy_caller(None, "alice").bearer(ALICE_TOKEN);
    let namespaces = format!("/clusters/{TEAM}/api/v1/namespaces");
    let watch = alice
        .request(
            reqwest::Method::GET,
            &format!("/clusters/{TEAM}/api/v1/namespaces/default/configmaps?watch=1"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    let mut watch = watch.bytes_stream();

    // A crash: no graceful end of anything.
    topology.shard.kill();
    // The open watch ends, here broken as its backend's was (the proxy neither keeps a client
    // hanging on a dead backend nor passes a cut stream off as complete).
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(_)) = watch.next().await {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "the watch through the proxy outlived its shard"
    );
    // New requests fail at once and clearly: a Status, 503, not a hang or a 500.
    let answer = alice.get(&namespaces).await;
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert_eq!(answer.json()["kind"], "Status", "{}", answer.text());
    assert_eq!(answer.json()["code"], 503, "{}", answer.text());

    topology.shard.start_again().await;
    alice_gets(&alice, &namespaces).await;
    // The index follows the shard again: a workspace created after the restart is routable.
    alices_workspace(&topology, "after-restart").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_front_proxy_routes_authenticates_and_streams() {
    let topology = Topology::start().await;
    team_workspace(&topology).await;
    let namespaces = format!("/clusters/{TEAM}/api/v1/namespaces");

    // A client certificate in system:masters: the shard itself says 200, the proxy drops the
    // group, so the same certificate through the proxy is just a user without access.
    let mallory = topology.client_ca.client("mallory", &["system:masters"]);
    let direct = topology.shard_caller(Some(&mallory), "mallory");
    assert_eq!(direct.get(&namespaces).await.status, 200);
    let proxied = topology.proxy_caller(Some(&mallory), "mallory");
    let answer = proxied.get(&namespaces).await;
    assert_eq!(answer.status, 403, "{}", answer.text());

    // Forged identity headers are removed before the proxy stamps its own.
    let bob = topology.client_ca.client("bob", &[]);
    let forger = topology
        .proxy_caller(Some(&bob), "bob")
        .header("X-Remote-User", "alice")
        .header("X-Remote-Group", "system:masters")
        .header("X-Remote-Extra-Scopes", "everything");
    assert_eq!(forger.get(&namespaces).await.status, 403);
    let anonymous_forger = topology
        .proxy_caller(None, "anonymous")
        .header("X-Remote-User", "alice")
        .header("X-Remote-Group", "system:masters");
    let answer = anonymous_forger.get(&namespaces).await;
    assert!(
        answer.status == 401 || answer.status == 403,
        "{} {}",
        answer.status,
        answer.text()
    );

    // A certificate of a CA the proxy does not trust is refused.
    let stranger = CertificateAuthority::generate("other-ca").client("eve", &["system:masters"]);
    let refused = topology
        .credentials(&topology.proxy_url, Some(&stranger))
        .client()
        .get(format!("{}{namespaces}", topology.proxy_url))
        .send()
        .await;
    match refused {
        Ok(response) => assert_eq!(response.status().as_u16(), 401),
        Err(error) => assert!(error.is_connect() || error.is_request(), "{error:?}"),
    }

    // No access and no such workspace look the same.
    let bob = topology.proxy_caller(Some(&bob), "bob");
    let forbidden = bob.get(&namespaces).await;
    let missing = bob
        .get("/clusters/root:no-such-team/api/v1/namespaces")
        .await;
    assert_eq!((forbidden.status, missing.status), (403, 403));
    assert_eq!(forbidden.json()["reason"], "Forbidden");
    assert_eq!(missing.json()["reason"], "Forbidden");
    assert!(missing.text().contains("workspace access not permitted"));

    // The same token asks the same questions directly and through the proxy.
    let alice_direct = topology.shard_caller(None, "alice").bearer(ALICE_TOKEN);
    let alice_proxied = topology.proxy_caller(None, "alice").bearer(ALICE_TOKEN);
    let who = |response: kcp_testing::Response| {
        assert_eq!(response.status, 201, "{}", response.text());
        let user = response.json()["status"]["userInfo"].clone();
        (user["username"].clone(), user["groups"].clone())
    };
    let direct_user = who(alice_direct.whoami_in(TEAM).await);
    assert_eq!(direct_user.0, "alice");
    assert_eq!(direct_user, who(alice_proxied.whoami_in(TEAM).await));
    for (cluster, verb, resource) in [
        (TEAM, "create", "configmaps"),
        (TEAM, "delete", "secrets"),
        ("root", "create", "namespaces"),
        ("root", "list", "workspaces"),
    ] {
        let path =
            format!("/clusters/{cluster}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews");
        let decide = |response: kcp_testing::Response| {
            (
                response.status,
                response.json()["status"]["allowed"].clone(),
            )
        };
        let review = access_review(verb, resource);
        assert_eq!(
            decide(alice_direct.post(&path, &review).await),
            decide(alice_proxied.post(&path, &review).await),
            "{verb} {resource} in {cluster}"
        );
    }

    // kubectl through the proxy only, with a watch that stays open while objects are created.
    let kubeconfig = topology.dir.path().join("alice.kubeconfig");
    write_kubeconfig(
        &kubeconfig,
        &format!("{}/clusters/{TEAM}", topology.proxy_url),
        &topology.shard.admin().ca_pem,
        KubeconfigUser::Token(ALICE_TOKEN),
    );
    let kubectl = Kubectl::new("1.33", &kubeconfig);
    kubectl.ok(&["create", "namespace", "proxied"]);
    kubectl.ok(&["create", "configmap", "first", "-n", "proxied"]);
    let mut watching = kubectl.background(&["get", "configmaps", "-n", "proxied", "-w"]);
    watching.wait_for_line("first", |line| line.starts_with("first"));
    let configmaps = format!("/clusters/{TEAM}/api/v1/namespaces/proxied/configmaps");
    let mut watch = WatchStream::open(alice_proxied.request(
        reqwest::Method::GET,
        &format!("{configmaps}?watch=1&resourceVersion=0"),
    ))
    .await;
    for name in ["second", "third"] {
        kubectl.ok(&["create", "configmap", name, "-n", "proxied"]);
        watching.wait_for_line(name, |line| line.starts_with(name));
    }
    // The namespace's kube-root-ca.crt comes too, in whatever order.
    let mut seen = std::collections::BTreeSet::new();
    while !["first", "second", "third"]
        .iter()
        .all(|name| seen.contains(*name))
    {
        let event = watch.expect_event().await;
        let name = event["object"]["metadata"]["name"].as_str().unwrap();
        seen.insert(name.to_owned());
        assert!(seen.len() <= 4, "{seen:?}");
    }
    let listed = kubectl.ok(&["get", "configmaps", "-n", "proxied", "-o", "name"]);
    for name in ["first", "second", "third"] {
        assert!(listed.contains(&format!("configmap/{name}")), "{listed}");
    }

    // An upgrade reaches the backend and bytes flow both ways.
    let upgrader = topology.client_ca.client("upgrader", &[]);
    let client = topology
        .credentials(&topology.proxy_url, Some(&upgrader))
        .client_builder()
        .http1_only()
        .build()
        .unwrap();
    let response = client
        .get(format!("{}/upgrade/echo", topology.proxy_url))
        .header("Connection", "Upgrade")
        .header("Upgrade", "echo")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 101, "{}", topology.proxy_log());
    let mut upgraded = response.upgrade().await.unwrap();
    upgraded.write_all(b"ping through the proxy").await.unwrap();
    let mut echoed = [0u8; 22];
    upgraded.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"ping through the proxy");

    // Health and metrics of the proxy itself; no workspace in any label. /metrics is for users
    // allowed `get` on the non-resource URL in root (a SubjectAccessReview there), so the
    // binding that lets a scraper read the shards' metrics lets it read the proxy's.
    let admin = Caller::admin(&topology.shard);
    admin
        .create(
            "/clusters/root/apis/rbac.authorization.k8s.io/v1/clusterroles",
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "metrics-reader"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        )
        .await;
    admin
        .create(
            "/clusters/root/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "scraper-metrics-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "scraper"}]}),
        )
        .await;
    let scraper = topology.client_ca.client("scraper", &[]);
    let scraper = topology.proxy_caller(Some(&scraper), "scraper");
    let metrics = scraper.get("/metrics").await;
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    let text = metrics.text();
    for needle in [
        "kcp_front_proxy_requests_total{verb=\"GET\",code=\"200\"}",
        "kcp_front_proxy_requests_total{verb=\"GET\",code=\"403\"}",
        "kcp_front_proxy_index_workspaces",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    assert!(!text.contains("team"), "{text}");
    // Authenticated but not allowed: alice (cluster-admin of root:team only), and a
    // system:masters certificate, whose group the proxy drops.
    for (caller, who) in [(&alice_proxied, "alice"), (&proxied, "mallory")] {
        let refused = caller.get("/metrics").await;
        assert_eq!(refused.status, 403, "{who}: {}", refused.text());
        assert_eq!(
            refused.json()["kind"],
            "Status",
            "{who}: {}",
            refused.text()
        );
    }
    let anonymous = topology.proxy_caller(None, "anonymous");
    assert_eq!(anonymous.get("/livez").await.status, 200);
    assert_eq!(anonymous.get("/metrics").await.status, 401);

    initializer_groups_cannot_be_forged_through_the_proxy(&topology).await;
}

/// The synthetic group the initializingworkspaces virtual workspace adds to the requests it
/// allowed (`system:kcp:initializer:<initializer>`) lets a request into a workspace still
/// Initializing at the shard (which trusts it, as upstream's), and is dropped by the proxy: a
/// client certificate claiming it is a user without access there.
async fn initializer_groups_cannot_be_forged_through_the_proxy(topology: &Topology) {
    let admin = Caller::admin(&topology.shard);
    admin
        .create(
            "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspacetypes",
            &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
                "metadata": {"name": "held"}, "spec": {"initializer": true}}),
        )
        .await;
    admin
        .create(
            WORKSPACES,
            &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
                "metadata": {"name": "held-ws"}, "spec": {"type": {"name": "held", "path": "root"}}}),
        )
        .await;
    topology
        .shard
        .wait_for(
            "root:held-ws Initializing",
            &format!("{WORKSPACES}/held-ws"),
            |answer| answer.status == 200 && answer.json()["status"]["phase"] == "Initializing",
        )
        .await;
    let forger = topology
        .client_ca
        .client("mallory", &["system:kcp:initializer:root:held"]);
    let namespaces = "/clusters/root:held-ws/api/v1/namespaces";
    let namespace =
        |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let direct = topology
        .shard_caller(Some(&forger), "mallory")
        .post(namespaces, &namespace("trusted"))
        .await;
    assert_eq!(direct.status, 201, "the shard trusts it: {}", direct.text());
    let proxied = topology
        .proxy_caller(Some(&forger), "mallory")
        .post(namespaces, &namespace("forged"))
        .await;
    assert_eq!(proxied.status, 403, "{}", proxied.text());
    let forged = admin.get(&format!("{namespaces}/forged")).await;
    assert_eq!(forged.status, 404, "{}", forged.text());
}

fn robot_binding() -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "robot-cluster-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_account_token_dies_with_its_service_account() {
    let topology = Topology::start().await;
    team_workspace(&topology).await;
    let admin = Caller::admin(&topology.shard);
    let token = admin.service_account_token(TEAM, "robot").await;
    let accounts = format!("/clusters/{TEAM}/api/v1/namespaces/default/serviceaccounts");
    admin
        .create(
            &format!("/clusters/{TEAM}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
            &robot_binding(),
        )
        .await;

    let namespaces = format!("/clusters/{TEAM}/api/v1/namespaces");
    let direct = topology.shard_caller(None, "robot").bearer(&token);
    let proxied = topology.proxy_caller(None, "robot").bearer(&token);
    let answer = direct.get(&namespaces).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answer = proxied.get(&namespaces).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // In-cluster form: no /clusters/ in the path, the token's cluster claim routes it.
    let answer = proxied.get("/api/v1/namespaces").await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let who = proxied.whoami_in(TEAM).await;
    assert_eq!(
        who.json()["status"]["userInfo"]["username"],
        "system:serviceaccount:default:robot",
        "{}",
        who.text()
    );

    a_service_account_is_foreign_in_another_workspace(&topology, &direct, &proxied).await;

    let deleted = admin.delete(&format!("{accounts}/robot")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    PATIENCE
        .eventually(
            "the deleted service account's token is refused both ways",
            || async {
                let answers = (
                    direct.get(&namespaces).await.status,
                    proxied.get(&namespaces).await.status,
                    proxied.get("/api/v1/namespaces").await.status,
                );
                (answers == (401, 401, 401))
                    .then_some(())
                    .ok_or_else(|| format!("{answers:?}"))
            },
        )
        .await;
}

/// Team's robot (cluster-admin in team) in `root:lab`, directly and through the proxy alike
/// (upstream kcp): authenticated, but lab's authorizers see only `system:anonymous` in
/// `system:authenticated` and `system:cluster:<team's cluster>`, so bindings in lab to the
/// service account or the service-account groups do not apply and one to that group does.
async fn a_service_account_is_foreign_in_another_workspace(
    topology: &Topology,
    direct: &Caller,
    proxied: &Caller,
) {
    alices_workspace(topology, "lab").await;
    let admin = Caller::admin(&topology.shard);
    let team = admin.get(&format!("{WORKSPACES}/team")).await;
    let team_cluster = team.json()["spec"]["cluster"]
        .as_str()
        .expect("team's spec.cluster")
        .to_owned();
    let lab_bindings = "/clusters/root:lab/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    let bind = |name: &str, role: &str, subject: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]})
    };
    let group = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name});
    let namespaces = "/clusters/root:lab/api/v1/namespaces";
    let both = || async {
        (
            direct.get(namespaces).await.status,
            proxied.get(namespaces).await.status,
        )
    };
    assert_eq!(both().await, (403, 403), "robot in lab before any binding");
    for (name, subject) in [
        (
            "robot-admin",
            json!({"kind": "ServiceAccount", "name": "robot", "namespace": "default"}),
        ),
        ("serviceaccounts-admin", group("system:serviceaccounts")),
    ] {
        admin
            .create(lab_bindings, &bind(name, "cluster-admin", subject))
            .await;
    }
    let from_team = group(&format!("system:cluster:{team_cluster}"));
    for (name, role) in [
        ("team-access", "system:kcp:workspace:access"),
        ("team-view", "view"),
    ] {
        admin
            .create(lab_bindings, &bind(name, role, from_team.clone()))
            .await;
    }
    PATIENCE
        .eventually("team's cluster group may view lab, both ways", || async {
            let answers = both().await;
            (answers == (200, 200))
                .then_some(())
                .ok_or_else(|| format!("{answers:?}"))
        })
        .await;
    // What only the bindings to the service account and its groups would allow: refused both
    // ways, naming the service account as kube-apiserver does.
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "robot"}});
    let configmaps = "/clusters/root:lab/api/v1/namespaces/default/configmaps";
    for caller in [direct, proxied] {
        let answer = caller.post(configmaps, &configmap).await;
        assert_eq!(answer.status, 403, "{}", answer.text());
        assert!(
            answer
                .text()
                .contains("system:serviceaccount:default:robot"),
            "{}",
            answer.text()
        );
    }
    let who = |response: kcp_testing::Response| {
        assert_eq!(response.status, 201, "{}", response.text());
        response.json()["status"]["userInfo"]["username"].clone()
    };
    let direct_user = who(direct.whoami_in("root:lab").await);
    assert_eq!(direct_user, "system:serviceaccount:default:robot");
    assert_eq!(direct_user, who(proxied.whoami_in("root:lab").await));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_the_proxy_does_not_know_is_reviewed_by_its_webhook() {
    let topology = Topology::start().await;
    let carol_direct = topology.shard_caller(None, "carol").bearer(CAROL_TOKEN);
    let carol_proxied = topology.proxy_caller(None, "carol").bearer(CAROL_TOKEN);
    let who = |response: kcp_testing::Response| {
        assert_eq!(response.status, 201, "{}", response.text());
        let user = response.json()["status"]["userInfo"].clone();
        (user["username"].clone(), user["groups"].clone())
    };
    let direct = who(carol_direct.whoami_in("root").await);
    assert_eq!(direct.0, "carol");
    assert_eq!(direct, who(carol_proxied.whoami_in("root").await));

    let stranger = topology
        .proxy_caller(None, "stranger")
        .bearer("nobody-knows-this-token");
    let answer = stranger.whoami_in("root").await;
    assert_eq!(answer.status, 401, "{}", answer.text());
}
