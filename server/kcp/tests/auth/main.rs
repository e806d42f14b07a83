//! Authentication and authorization against a started `kcp` (issue 6): every way of saying who
//! you are (client certificates, static tokens, service-account tokens, front-proxy headers, OIDC,
//! anonymous), and what each logical cluster's RBAC, the authorization webhook, impersonation and
//! the review APIs then allow.
//!
//! Users are client certificates signed with the server's generated client CA (CN = user, O =
//! groups), bearer tokens, or headers from a front proxy, so every scenario can be as many users
//! as it needs. Scenarios that need no special flags share one server and use their own
//! namespaces and logical clusters; the others start a server with the flags they test. Every
//! denial is checked to be the Status Kubernetes answers with (401 Unauthorized, 403 Forbidden
//! naming the user, verb and resource), because clients and people act on those.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kcp_testing::identities::{
    CertificateAuthority, KubeconfigUser, decode_jwt, sign_es256, write_kubeconfig,
};
use kcp_testing::oidc::OidcIssuer;
use kcp_testing::{KcpProcess, Kubectl, Response, SharedKcp, temp_dir};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod authentication;
mod authorization;
mod kubectl;
mod namespaces;
mod rbac_matrix;

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "auth");

/// How long RBAC changes, controllers and lazily started authenticators may take to take effect.
const SETTLED_WITHIN: Duration = Duration::from_secs(60);

const RBAC_V1: &str = "/apis/rbac.authorization.k8s.io/v1";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const KUBECTL_VERSIONS: [&str; 2] = ["1.33", "1.27"];

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The server's generated client CA: certificates it signs authenticate as CN / O.
fn client_ca(server: &KcpProcess) -> CertificateAuthority {
    let root = server.root_directory();
    CertificateAuthority::read(&root.join("client-ca.crt"), &root.join("client-ca.key"))
}

/// One client identity against one server: a certificate, a bearer token or nothing.
struct Caller {
    base: String,
    client: reqwest::Client,
    token: Option<String>,
    /// Extra headers sent with every request (front-proxy identity).
    headers: Vec<(String, String)>,
}

impl Caller {
    fn admin(server: &KcpProcess) -> Caller {
        Caller::with_client(server, server.admin().client())
    }

    /// A client certificate of the server's client CA with CN `user` and O `groups`.
    fn cert(server: &KcpProcess, ca: &CertificateAuthority, user: &str, groups: &[&str]) -> Caller {
        let client = ca.client(user, groups).credentials(server.admin()).client();
        Caller::with_client(server, client)
    }

    fn token(server: &KcpProcess, token: &str) -> Caller {
        let mut caller = Caller::anonymous(server);
        caller.token = Some(token.to_owned());
        caller
    }

    fn anonymous(server: &KcpProcess) -> Caller {
        Caller::with_client(server, server.admin().anonymous_client())
    }

    fn with_client(server: &KcpProcess, client: reqwest::Client) -> Caller {
        Caller {
            base: server.base_url().to_owned(),
            client,
            token: None,
            headers: Vec::new(),
        }
    }

    fn header(mut self, name: &str, value: &str) -> Caller {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Response {
        let mut request = self.request(method.clone(), path);
        if let Some(body) = body {
            let content_type = if method == Method::PATCH {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            request = request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.to_string());
        }
        Response::send(request).await
    }

    async fn get(&self, path: &str) -> Response {
        self.send(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Response {
        self.send(Method::POST, path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> Response {
        self.send(Method::DELETE, path, None).await
    }

    /// Only the status (and the body of a failure): for watches, whose bodies do not end soon.
    async fn status_of(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, String) {
        let mut request = self.request(method.clone(), path);
        if let Some(body) = body {
            let content_type = if method == Method::PATCH {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            request = request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.to_string());
        }
        let response = request
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap_or_else(|error| panic!("{method} {path} failed: {error:?}"));
        let status = response.status().as_u16();
        if status < 300 {
            return (status, String::new());
        }
        (status, response.text().await.unwrap_or_default())
    }

    /// POSTs a SelfSubjectReview in logical cluster `cluster` (`""` for the default one).
    async fn whoami_in(&self, cluster: &str) -> Response {
        let prefix = cluster_prefix(cluster);
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
        self.post(&format!("{prefix}{WHOAMI}"), &review).await
    }

    /// `status.userInfo` of a SelfSubjectReview in `root`, which must succeed.
    async fn user_info(&self) -> Value {
        let response = self.whoami_in("").await;
        assert_eq!(response.status, 201, "whoami: {}", response.text());
        response.json()["status"]["userInfo"].clone()
    }
}

fn cluster_prefix(cluster: &str) -> String {
    if cluster.is_empty() {
        String::new()
    } else {
        format!("/clusters/{cluster}")
    }
}

/// The strings of a JSON array (empty when absent).
fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn assert_user(info: &Value, username: &str, groups: &[&str]) {
    assert_eq!(info["username"], username, "userInfo {info}");
    let have = strings(&info["groups"]);
    for group in groups {
        assert!(
            have.iter().any(|have| have == group),
            "{username}: group {group:?} missing from {info}"
        );
    }
}

/// `response` is a failure Status with `code` and `reason`; returns its message.
fn expect_status(what: &str, response: &Response, code: u16, reason: &str) -> String {
    assert_eq!(response.status, code, "{what}: {}", response.text());
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    status["message"].as_str().unwrap_or_default().to_owned()
}

fn expect_unauthorized(what: &str, response: &Response) {
    expect_status(what, response, 401, "Unauthorized");
}

/// A 403 Status whose message names `user` (and any further `fragments`).
fn expect_forbidden(what: &str, response: &Response, user: &str, fragments: &[&str]) -> String {
    let message = expect_status(what, response, 403, "Forbidden");
    let who = format!("User \"{user}\"");
    assert!(
        message.contains(&who) || message.contains(&format!("user \"{user}\"")),
        "{what}: message does not name {user}: {message}"
    );
    for fragment in fragments {
        assert!(
            message.contains(fragment),
            "{what}: message lacks {fragment:?}: {message}"
        );
    }
    message
}

/// Polls `check` until it holds; a server that does not get there fails the test with `what` and
/// the last answer.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + SETTLED_WITHIN;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) => assert!(
                Instant::now() < deadline,
                "{what}: not within {SETTLED_WITHIN:?}; last: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `caller` gets `want` for GET `path`.
async fn wait_status(what: &str, caller: &Caller, path: &str, want: u16) {
    eventually(what, || async {
        let response = caller.get(path).await;
        if response.status == want {
            Ok(())
        } else {
            Err(format!(
                "GET {path}: {} {}",
                response.status,
                response.text()
            ))
        }
    })
    .await;
}

/// POSTs `body` to `collection` as the admin; an object that exists already is fine.
async fn ensure(admin: &Caller, collection: &str, body: &Value) {
    let response = admin.post(collection, body).await;
    assert!(
        response.status == 201 || response.status == 409,
        "creating {} in {collection}: {} {}",
        body["metadata"]["name"],
        response.status,
        response.text()
    );
}

async fn ensure_namespace(admin: &Caller, cluster: &str, name: &str) {
    ensure_logical_cluster(admin, cluster).await;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let prefix = cluster_prefix(cluster);
    ensure(admin, &format!("{prefix}/api/v1/namespaces"), &namespace).await;
}

/// Makes a logical cluster other than root enterable, as a workspace would be: its
/// LogicalCluster (Ready once the server has initialized it) and `access` for everybody
/// authenticated (the workspace content authorizer refuses everyone else whatever RBAC says).
async fn ensure_logical_cluster(admin: &Caller, cluster: &str) {
    if cluster.is_empty() || cluster == "root" {
        return;
    }
    let prefix = cluster_prefix(cluster);
    let logical_cluster = json!({"apiVersion": "core.kcp.io/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "cluster"}});
    ensure(
        admin,
        &format!("{prefix}/apis/core.kcp.io/v1alpha1/logicalclusters"),
        &logical_cluster,
    )
    .await;
    let access = binding(
        "ClusterRoleBinding",
        "authenticated-access",
        "ClusterRole",
        "system:kcp:workspace:access",
        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}),
    );
    ensure(
        admin,
        &format!("{prefix}{RBAC_V1}/clusterrolebindings"),
        &access,
    )
    .await;
    let path = format!("{prefix}/apis/core.kcp.io/v1alpha1/logicalclusters/cluster");
    eventually(&format!("{cluster} Ready"), || async {
        let response = admin.get(&path).await;
        match response.json()["status"]["phase"].as_str() {
            Some("Ready") => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
}

fn user_subject(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

fn binding(kind: &str, name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [subject],
    })
}

/// Binds ClusterRole `role` to `user` in namespace `namespace` of `cluster` (RoleBinding).
async fn bind_in_namespace(admin: &Caller, cluster: &str, namespace: &str, role: &str, user: &str) {
    let prefix = cluster_prefix(cluster);
    let name = format!("{user}-{role}");
    let body = binding(
        "RoleBinding",
        &name,
        "ClusterRole",
        role,
        user_subject(user),
    );
    let path = format!("{prefix}{RBAC_V1}/namespaces/{namespace}/rolebindings");
    ensure(admin, &path, &body).await;
}

/// Binds ClusterRole `role` to `user` across `cluster` (ClusterRoleBinding).
async fn bind_cluster_wide(admin: &Caller, cluster: &str, role: &str, user: &str) {
    let prefix = cluster_prefix(cluster);
    let name = format!("{user}-{role}");
    let body = binding(
        "ClusterRoleBinding",
        &name,
        "ClusterRole",
        role,
        user_subject(user),
    );
    ensure(
        admin,
        &format!("{prefix}{RBAC_V1}/clusterrolebindings"),
        &body,
    )
    .await;
}

/// A token file with user tina (uid tina-uid, groups devs and ops); returns the flag.
fn token_file(dir: &Path) -> String {
    let path = dir.join("tokens.csv");
    std::fs::write(&path, "tina-token-123,tina,tina-uid,\"devs,ops\"\n").unwrap();
    format!("--token-auth-file={}", path.display())
}
