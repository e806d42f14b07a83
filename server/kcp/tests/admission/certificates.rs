//! CertificateSigningRequests end to end: the requester recorded on create, approval through
//! the `approval` subresource only for users allowed to `approve` the signer and certificates
//! through `status` only for those allowed to `sign` it (the 403 names what is missing),
//! `kubectl certificate approve`, and no `system:masters` client certificates.
//!
//! Requests are real PKCS#10 requests, made with rcgen.

use std::time::Duration;

use k8s_openapi::ByteString;
use kcp_testing::{Caller, Kubectl, Patience, cluster_prefix};
use serde_json::{Value, json};

use super::SERVER;
use super::quota::ready_workspace;

/// How long RBAC changes may take to reach the authorizer.
const SETTLED: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(100));

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// A PEM certificate signing request for a new P-256 key, with this subject (`/CN=a/O=b`).
fn request_pem(subject: &str) -> Vec<u8> {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = distinguished_name(subject);
    let key = rcgen::KeyPair::generate().unwrap();
    let request = params.serialize_request(&key).unwrap();
    request.pem().unwrap().into_bytes()
}

/// A self-signed PEM certificate, standing in for what a signer would issue.
fn certificate_pem() -> Vec<u8> {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = distinguished_name("/CN=issued");
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem().into_bytes()
}

/// An OpenSSL-style subject (`/CN=a/O=b/O=c`) as a distinguished name.
fn distinguished_name(subject: &str) -> rcgen::DistinguishedName {
    let mut name = rcgen::DistinguishedName::new();
    for part in subject.split('/').filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').unwrap();
        let kind = match key {
            "CN" => rcgen::DnType::CommonName,
            "O" => rcgen::DnType::OrganizationName,
            other => panic!("subject part {other} is not used by these tests"),
        };
        name.push(kind, value);
    }
    name
}

fn csr(name: &str, signer: &str, subject: &str) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"signerName": signer, "usages": ["client auth"],
            "request": serde_json::to_value(ByteString(request_pem(subject))).unwrap(),
            "username": "somebody-else", "groups": ["system:masters"]}})
}

/// The CSR with an Approved condition added, as `kubectl certificate approve` sends it.
fn approved(current: &Value) -> Value {
    let mut approved = current.clone();
    let condition = json!({"type": "Approved", "status": "True", "reason": "Test",
        "message": "approved by the test"});
    match approved["status"]["conditions"].as_array_mut() {
        Some(conditions) => conditions.push(condition),
        None => approved["status"]["conditions"] = json!([condition]),
    }
    approved
}

async fn grant(admin: &Caller, prefix: &str, name: &str, user: &str, rules: Value) {
    let role = json!({"metadata": {"name": name}, "rules": rules});
    admin
        .create(&format!("{prefix}{RBAC}/clusterroles"), &role)
        .await;
    let binding = json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]});
    admin
        .create(&format!("{prefix}{RBAC}/clusterrolebindings"), &binding)
        .await;
}

#[tokio::test]
async fn approval_needs_approve_on_the_signer() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "csr-approval").await;
    let prefix = cluster_prefix(&cluster);
    let created = admin
        .create(
            &format!("{prefix}{CSRS}"),
            &csr("req", "example.com/signer", "/CN=alice/O=dev"),
        )
        .await;
    let whoami = admin.whoami_in(&cluster).await.json();
    let me = &whoami["status"]["userInfo"];
    assert_eq!(created["spec"]["username"], me["username"], "{created}");
    assert_eq!(created["spec"]["groups"], me["groups"], "{created}");
    assert_eq!(created["status"], json!({}), "{created}");

    grant(
        &admin,
        &prefix,
        "bob-enters",
        "bob",
        json!([
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                "verbs": ["get", "list"]},
            {"apiGroups": ["certificates.k8s.io"],
                "resources": ["certificatesigningrequests/approval",
                    "certificatesigningrequests/status"], "verbs": ["update"]}
        ]),
    )
    .await;
    let access = json!({"metadata": {"name": "bob-access"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "system:kcp:workspace:access"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]});
    admin
        .create(&format!("{prefix}{RBAC}/clusterrolebindings"), &access)
        .await;
    let bob = Caller::user(&server, &server.client_ca(), "bob");
    let path = format!("{prefix}{CSRS}/req");
    let refused = SETTLED
        .eventually("bob reaches the approval check", || async {
            let current = bob.get(&path).await;
            if current.status != 200 {
                return Err(format!("get answered {}", current.status));
            }
            let response = bob
                .put(&format!("{path}/approval"), &approved(&current.json()))
                .await;
            match response.status {
                403 if response.text().contains("signerName") => Ok(response),
                other => Err(format!("{other}: {}", response.text())),
            }
        })
        .await;
    let message =
        kcp_testing::expect_status("approval without approve", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to approve requests with signerName \"example.com/signer\""
    );

    grant(
        &admin,
        &prefix,
        "bob-approves",
        "bob",
        json!([
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                "resourceNames": ["example.com/*"], "verbs": ["approve"]}
        ]),
    )
    .await;
    let approved_csr = SETTLED
        .eventually("bob approves", || async {
            let current = bob.get(&path).await.json();
            let response = bob
                .put(&format!("{path}/approval"), &approved(&current))
                .await;
            match response.status {
                200 => Ok(response.json()),
                other => Err(format!("{other}: {}", response.text())),
            }
        })
        .await;
    let conditions = &approved_csr["status"]["conditions"];
    assert_eq!(conditions[0]["type"], "Approved", "{approved_csr}");
    assert!(
        conditions[0]["lastUpdateTime"].is_string(),
        "{approved_csr}"
    );
    assert_eq!(approved_csr["spec"], created["spec"]);

    let mut issued = approved_csr.clone();
    issued["status"]["certificate"] = serde_json::to_value(ByteString(certificate_pem())).unwrap();
    let refused = bob.put(&format!("{path}/status"), &issued).await;
    let message = kcp_testing::expect_status("issuing without sign", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to sign requests with signerName \"example.com/signer\""
    );
    let signed = admin.put(&format!("{path}/status"), &issued).await;
    assert_eq!(signed.status, 200, "{}", signed.text());
    assert_eq!(signed.json()["status"]["conditions"], conditions.clone());
}

#[tokio::test]
async fn kubectl_certificate_approve_works() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "csr-kubectl").await;
    let prefix = cluster_prefix(&cluster);
    admin
        .create(
            &format!("{prefix}{CSRS}"),
            &csr("kubectl-req", "example.com/signer", "/CN=carol"),
        )
        .await;
    let server_url = format!("{}{prefix}", server.base_url());
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let listed = kubectl.ok(&["--server", &server_url, "get", "csr"]);
    assert!(listed.contains("Pending"), "{listed}");
    let output = kubectl.ok(&[
        "--server",
        &server_url,
        "certificate",
        "approve",
        "kubectl-req",
    ]);
    assert!(output.contains("approved"), "{output}");
    let listed = kubectl.ok(&["--server", &server_url, "get", "csr", "kubectl-req"]);
    let row = listed.lines().nth(1).unwrap_or_default();
    assert!(
        row.contains("example.com/signer") && row.ends_with("Approved"),
        "{listed}"
    );
}

#[tokio::test]
async fn no_system_masters_client_certificates() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "csr-masters").await;
    let prefix = cluster_prefix(&cluster);
    let masters = csr(
        "masters",
        "kubernetes.io/kube-apiserver-client",
        "/CN=mallory/O=system:masters",
    );
    let response = admin.post(&format!("{prefix}{CSRS}"), &masters).await;
    let message =
        kcp_testing::expect_status("a system:masters request", &response, 403, "Forbidden");
    assert_eq!(
        message,
        "certificatesigningrequests.certificates.k8s.io \"masters\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    );
    let mut garbage = csr("garbage", "example.com/signer", "/CN=x");
    garbage["spec"]["request"] = serde_json::to_value(ByteString(b"hello".to_vec())).unwrap();
    let response = admin.post(&format!("{prefix}{CSRS}"), &garbage).await;
    let message = kcp_testing::expect_status("a request that is no CSR", &response, 422, "Invalid");
    assert!(
        message.contains("PEM block type must be CERTIFICATE REQUEST"),
        "{message}"
    );
}
