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
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kcp_testing::identities::{CertificateAuthority, KubeconfigUser, write_kubeconfig};
use kcp_testing::plugins::plugin_dir;
use kcp_testing::{
    Caller, KcpProcess, Kubectl, Patience, Response, SharedKcp, expect_status, item_names, strings,
};
use serde_json::{Value, json};

mod access;
mod isolation;
mod kubectl;
mod lifecycle;

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "workspaces");

/// How long scheduling, initialization, deletion and RBAC changes may take.
const SETTLED_WITHIN: Duration = Duration::from_secs(90);

/// [`SETTLED_WITHIN`], looking every 200 ms.
const SETTLED: Patience = Patience::new(SETTLED_WITHIN, Duration::from_millis(200));

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

/// An object `{apiVersion, kind, metadata: {name}}` with the further top-level `fields`.
fn object(api_version: &str, kind: &str, name: &str, fields: Value) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let (Some(object), Value::Object(fields)) = (object.as_object_mut(), fields) {
        object.extend(fields);
    }
    object
}

fn workspace(name: &str, type_ref: Option<(&str, &str)>) -> Value {
    let mut workspace = object(
        "tenancy.kcp.io/v1alpha1",
        "Workspace",
        name,
        json!({"spec": {}}),
    );
    if let Some((path, type_name)) = type_ref {
        workspace["spec"]["type"] = json!({"path": path, "name": type_name});
    }
    workspace
}

fn namespace(name: &str) -> Value {
    object("v1", "Namespace", name, json!({}))
}

fn config_map(name: &str) -> Value {
    object("v1", "ConfigMap", name, json!({"data": {"k": "v"}}))
}

fn binding(kind: &str, name: &str, role: &str, user: &str) -> Value {
    let fields = json!({
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
    });
    object("rbac.authorization.k8s.io/v1", kind, name, fields)
}

/// The ClusterRoleBinding `<user>-access` to `system:kcp:workspace:access`: `user` may enter the
/// workspace it is made in.
fn access_binding(user: &str) -> Value {
    binding(
        "ClusterRoleBinding",
        &format!("{user}-access"),
        "system:kcp:workspace:access",
        user,
    )
}

/// Ensures the ClusterRole `role` in root, allowing `verbs` on Workspaces, and binds it to `user`
/// (ClusterRoleBinding `<user>-<role>`).
async fn allow_workspaces_in_root(admin: &Caller, role: &str, verbs: &[&str], user: &str) {
    let rules =
        json!([{"apiGroups": ["tenancy.kcp.io"], "resources": ["workspaces"], "verbs": verbs}]);
    let cluster_role = object(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        role,
        json!({"rules": rules}),
    );
    let root_rbac = format!("{}{RBAC_V1}", at("root"));
    admin
        .ensure(&format!("{root_rbac}/clusterroles"), &cluster_role)
        .await;
    let name = format!("{user}-{role}");
    admin
        .ensure(
            &format!("{root_rbac}/clusterrolebindings"),
            &binding("ClusterRoleBinding", &name, role, user),
        )
        .await;
}

/// A WorkspaceType in root.
fn workspace_type(name: &str, spec: Value) -> Value {
    object(
        "tenancy.kcp.io/v1alpha1",
        "WorkspaceType",
        name,
        json!({"spec": spec}),
    )
}

/// A CustomResourceDefinition of `group` (version v1) and `scope` for kind `kind` (plural: the
/// lower-case kind and `s`), its objects checked against `schema`.
fn crd(group: &str, kind: &str, scope: &str, schema: Value) -> Value {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    let fields = json!({
        "spec": {
            "group": group,
            "names": {"plural": plural, "singular": singular, "kind": kind, "listKind": format!("{kind}List")},
            "scope": scope,
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    });
    object(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &format!("{plural}.{group}"),
        fields,
    )
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

/// Waits until the Workspace `name` in `parent` is in `phase`; returns it.
async fn wait_phase(admin: &Caller, parent: &str, name: &str, phase: &str) -> Value {
    let path = workspace_url(parent, name);
    SETTLED
        .eventually(&format!("workspace {parent}:{name} {phase}"), || async {
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

/// `response` is a 403 Forbidden Status; returns its message.
fn expect_forbidden(what: &str, response: &Response) -> String {
    expect_status(what, response, 403, "Forbidden")
}
