//! Workspaces against a started `kcp` (issue 7): the tree of logical clusters users build with
//! Workspace objects, `kubectl ws` and `kubectl create workspace`; what the creator of a workspace
//! may do there and what everybody else may not; initializers holding a workspace back; deletion
//! of a whole subtree with its content; home workspaces; the type constraints and the answers to
//! bad input; and isolation between sibling workspaces.
//!
//! The scenarios share one server and keep to their own workspace names, so they can run side by
//! side. Users are client certificates signed with the server's generated client CA. Every wait
//! has a deadline: a server that never gets a workspace Ready (or never deletes one) fails the
//! test with the last answer it gave.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kcp_testing::identities::{CertificateAuthority, KubeconfigUser, write_kubeconfig};
use kcp_testing::plugins::{PluginKubectl, plugin_dir};
use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

mod access;
mod isolation;
mod kubectl;
mod lifecycle;

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "workspaces");

/// How long scheduling, initialization, deletion and RBAC changes may take.
const SETTLED_WITHIN: Duration = Duration::from_secs(90);

const TENANCY_V1: &str = "/apis/tenancy.kcp.io/v1alpha1";
const CORE_KCP_V1: &str = "/apis/core.kcp.io/v1alpha1";
const RBAC_V1: &str = "/apis/rbac.authorization.k8s.io/v1";
const OWNER_ANNOTATION: &str = "experimental.tenancy.kcp.io/owner";

fn kcp_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

/// The directory with the `kubectl-ws` and `kubectl-create-workspace` plugins (built on demand).
fn plugins() -> PathBuf {
    plugin_dir(kcp_binary())
}

/// The server's generated client CA: certificates it signs authenticate as CN / O.
fn client_ca(server: &KcpProcess) -> CertificateAuthority {
    let root = server.root_directory();
    CertificateAuthority::read(&root.join("client-ca.crt"), &root.join("client-ca.key"))
}

/// A kubeconfig at `path` for `user` (client certificate of the server's client CA), pointing at
/// `root`.
fn user_kubeconfig(server: &KcpProcess, ca: &CertificateAuthority, user: &str, path: &Path) {
    let identity = ca.client(user, &[]);
    let url = format!("{}/clusters/root", server.base_url());
    write_kubeconfig(
        path,
        &url,
        &server.admin().ca_pem,
        KubeconfigUser::Certificate(&identity),
    );
}

/// One client identity against the server.
struct Caller {
    base: String,
    client: reqwest::Client,
    name: String,
}

impl Caller {
    fn admin(server: &KcpProcess) -> Caller {
        Caller {
            base: server.base_url().to_owned(),
            client: server.admin().client(),
            name: "admin".to_owned(),
        }
    }

    /// A client certificate of the server's client CA with CN `user` and no further groups.
    fn user(server: &KcpProcess, ca: &CertificateAuthority, user: &str) -> Caller {
        let client = ca.client(user, &[]).credentials(server.admin()).client();
        Caller {
            base: server.base_url().to_owned(),
            client,
            name: user.to_owned(),
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Response {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.base));
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

    async fn put(&self, path: &str, body: &Value) -> Response {
        self.send(Method::PUT, path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> Response {
        self.send(Method::DELETE, path, None).await
    }

    /// POSTs `body` to `path`, which must create it (201).
    async fn create(&self, path: &str, body: &Value) -> Value {
        let response = self.post(path, body).await;
        assert_eq!(
            response.status,
            201,
            "{} creating {} at {path}: {}",
            self.name,
            body["metadata"]["name"],
            response.text()
        );
        response.json()
    }

    /// POSTs `body` to `path`; an object that exists already (409) is fine.
    async fn ensure(&self, path: &str, body: &Value) {
        let response = self.post(path, body).await;
        assert!(
            response.status == 201 || response.status == 409,
            "{} creating {} at {path}: {} {}",
            self.name,
            body["metadata"]["name"],
            response.status,
            response.text()
        );
    }
}

/// `/clusters/<path>`.
fn at(path: &str) -> String {
    format!("/clusters/{path}")
}

fn workspaces_in(parent: &str) -> String {
    format!("{}{TENANCY_V1}/workspaces", at(parent))
}

fn workspace_url(parent: &str, name: &str) -> String {
    format!("{}/{name}", workspaces_in(parent))
}

fn logical_cluster_url(path: &str) -> String {
    format!("{}{CORE_KCP_V1}/logicalclusters/cluster", at(path))
}

fn workspace(name: &str, type_ref: Option<(&str, &str)>) -> Value {
    let mut object = json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": name},
        "spec": {},
    });
    if let Some((path, type_name)) = type_ref {
        object["spec"]["type"] = json!({"path": path, "name": type_name});
    }
    object
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": "v"},
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    })
}

fn binding(kind: &str, name: &str, role: &str, user: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
    })
}

/// A WorkspaceType in root.
fn workspace_type(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "WorkspaceType",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// `gated`: extends `root:universal` and has its own initializer `root:gated`, so workspaces of
/// this type stay Initializing until somebody removes it.
async fn ensure_gated_type(admin: &Caller) {
    let gated = workspace_type(
        "gated",
        json!({"initializer": true, "extend": {"with": [{"name": "universal", "path": "root"}]}}),
    );
    admin
        .ensure(
            &format!("{}{TENANCY_V1}/workspacetypes", at("root")),
            &gated,
        )
        .await;
}

/// Polls `check` until it returns `Some`; a server that does not get there within
/// [`SETTLED_WITHIN`] fails the test with `what` and the last answer.
async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + SETTLED_WITHIN;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) => assert!(
                Instant::now() < deadline,
                "{what}: not within {SETTLED_WITHIN:?}; last: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `caller` gets `want` for GET `path`; returns that answer.
async fn wait_status(what: &str, caller: &Caller, path: &str, want: u16) -> Response {
    eventually(what, || async {
        let response = caller.get(path).await;
        if response.status == want {
            Ok(response)
        } else {
            Err(format!(
                "GET {path}: {} {}",
                response.status,
                response.text()
            ))
        }
    })
    .await
}

/// Waits until the Workspace `name` in `parent` is in `phase`; returns it.
async fn wait_phase(admin: &Caller, parent: &str, name: &str, phase: &str) -> Value {
    let path = workspace_url(parent, name);
    eventually(&format!("workspace {parent}:{name} {phase}"), || async {
        let response = admin.get(&path).await;
        let object = (response.status == 200).then(|| response.json());
        match object {
            Some(object) if object["status"]["phase"] == phase => Ok(object),
            _ => Err(format!("{} {}", response.status, response.text())),
        }
    })
    .await
}

/// Creates the Workspace `name` (of `type_ref`, else the parent's default child type) in `parent`
/// as `caller` and waits until it is Ready; returns it.
async fn create_ready(
    caller: &Caller,
    admin: &Caller,
    parent: &str,
    name: &str,
    type_ref: Option<(&str, &str)>,
) -> Value {
    caller
        .create(&workspaces_in(parent), &workspace(name, type_ref))
        .await;
    wait_phase(admin, parent, name, "Ready").await
}

/// `response` is a failure Status with `code` (and `reason`); returns its message.
fn expect_status(what: &str, response: &Response, code: u16, reason: &str) -> String {
    assert_eq!(response.status, code, "{what}: {}", response.text());
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    status["message"].as_str().unwrap_or_default().to_owned()
}

/// The names of the items of a list answer.
fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
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
