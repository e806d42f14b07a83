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
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kcp_testing::identities::{
    CertificateAuthority, KubeconfigUser, decode_jwt, sign_es256, write_kubeconfig,
};
use kcp_testing::oidc::OidcIssuer;
use kcp_testing::{
    Caller, KcpProcess, Kubectl, Patience, Response, SharedKcp, cluster_prefix, strings, temp_dir,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod authentication;
mod authorization;
mod kubectl;
mod namespaces;
mod rbac_matrix;

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "auth");

/// How long RBAC changes, controllers and lazily started authenticators may take to take effect,
/// and how often a test looks meanwhile.
const SETTLED: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(100));

const RBAC_V1: &str = "/apis/rbac.authorization.k8s.io/v1";
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

/// `response` is a failure Status (`status: Failure`) with `code` and `reason`; returns its
/// message.
fn expect_status(what: &str, response: &Response, code: u16, reason: &str) -> String {
    let message = kcp_testing::expect_status(what, response, code, reason);
    let status = response.json();
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    message
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

async fn ensure_namespace(admin: &Caller, cluster: &str, name: &str) {
    ensure_logical_cluster(admin, cluster).await;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let prefix = cluster_prefix(cluster);
    admin
        .ensure(&format!("{prefix}/api/v1/namespaces"), &namespace)
        .await;
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
    admin
        .ensure(
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
    admin
        .ensure(&format!("{prefix}{RBAC_V1}/clusterrolebindings"), &access)
        .await;
    let path = format!("{prefix}/apis/core.kcp.io/v1alpha1/logicalclusters/cluster");
    SETTLED
        .eventually(&format!("{cluster} Ready"), || async {
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
    admin.ensure(&path, &body).await;
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
    admin
        .ensure(&format!("{prefix}{RBAC_V1}/clusterrolebindings"), &body)
        .await;
}

/// A token file with user tina (uid tina-uid, groups devs and ops); returns the flag.
fn token_file(dir: &Path) -> String {
    let path = dir.join("tokens.csv");
    std::fs::write(&path, "tina-token-123,tina,tina-uid,\"devs,ops\"\n").unwrap();
    format!("--token-auth-file={}", path.display())
}
