//! CSR admission with real PKCS#10 requests (made with rcgen) and a fake authorizer: the
//! requester recorded, bad requests refused, the subject restriction, and who may approve and
//! sign, with kube's messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::future::BoxFuture;
use kcp_authn::UserInfo;
use kcp_registry::LogicalClusterName;
use kcp_registry::admission::Operation;
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::{Value, json};

use super::*;

/// Allows exactly the (verb, signer name) pairs it was given.
struct Grants(Vec<(&'static str, &'static str)>);

impl Authorizer for Grants {
    fn allowed<'a>(&'a self, _user: &'a UserInfo, access: Access<'a>) -> BoxFuture<'a, bool> {
        let allowed = access.group == GROUP
            && access.resource == "signers"
            && self
                .0
                .iter()
                .any(|(verb, name)| *verb == access.verb && *name == access.name);
        Box::pin(async move { allowed })
    }
}

fn request_pem(organization: &str) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "alice");
    params
        .distinguished_name
        .push(DnType::OrganizationName, organization);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// The same request with the last byte of its signature changed.
fn with_broken_signature(pem: &str) -> String {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let mut der = STANDARD.decode(body).unwrap();
    if let Some(last) = der.last_mut() {
        *last ^= 0x01;
    }
    format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        STANDARD.encode(der)
    )
}

fn csr(signer: &str, pem: &str) -> Value {
    json!({"metadata": {"name": "req"}, "spec": {"signerName": signer,
        "request": STANDARD.encode(pem), "usages": ["client auth"]}})
}

fn attrs(operation: Operation, subresource: Option<&str>) -> Attributes {
    Attributes {
        cluster: LogicalClusterName::parse("csr-test").unwrap(),
        group: GROUP.into(),
        version: "v1".into(),
        kind: "CertificateSigningRequest".into(),
        resource: RESOURCE.into(),
        subresource: subresource.map(str::to_string),
        namespace: None,
        name: "req".into(),
        operation,
        user: UserInfo {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
        },
        dry_run: false,
        options: None,
    }
}

#[test]
fn the_requester_is_whoever_created_it() {
    let mut object = csr("example.com/s", "");
    object["spec"]["username"] = json!("root");
    object["spec"]["groups"] = json!(["system:masters"]);
    set_requester(&attrs(Operation::Create, None), &mut object);
    assert_eq!(object["spec"]["username"], "alice");
    assert_eq!(object["spec"]["uid"], "u-1");
    assert_eq!(
        object["spec"]["groups"],
        json!(["dev", "system:authenticated"])
    );
    assert_eq!(object["spec"]["extra"], json!({"scopes": ["a"]}));
}

#[tokio::test]
async fn creates_need_a_valid_request() {
    let none = Grants(Vec::new());
    let create = attrs(Operation::Create, None);
    let good = csr("example.com/s", &request_pem("dev"));
    admit(&none, &create, Some(&good), None).await.unwrap();

    let tampered = with_broken_signature(&request_pem("dev"));
    let error = admit(&none, &create, Some(&csr("example.com/s", &tampered)), None)
        .await
        .unwrap_err();
    assert_eq!(error.code, 422);
    assert!(
        error.message.contains("spec.request: Invalid value"),
        "{}",
        error.message
    );

    let certificate = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let error = admit(
        &none,
        &create,
        Some(&csr("example.com/s", certificate)),
        None,
    )
    .await
    .unwrap_err();
    assert!(
        error
            .message
            .contains("PEM block type must be CERTIFICATE REQUEST")
    );
}

#[tokio::test]
async fn no_system_masters_from_the_apiserver_client_signer() {
    let none = Grants(Vec::new());
    let create = attrs(Operation::Create, None);
    let masters = request_pem("system:masters");
    let error = admit(
        &none,
        &create,
        Some(&csr(KUBE_APISERVER_CLIENT_SIGNER, &masters)),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(error.code, 403);
    assert_eq!(
        error.message,
        "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    );
    admit(&none, &create, Some(&csr("example.com/s", &masters)), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn approving_needs_approve_on_the_signer_or_its_domain() {
    let approval = attrs(Operation::Update, Some("approval"));
    let object = csr("example.com/s", "");
    let error = admit(
        &Grants(vec![("sign", "example.com/s")]),
        &approval,
        Some(&object),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.message,
        "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to approve requests with signerName \"example.com/s\""
    );
    for grant in ["example.com/s", "example.com/*"] {
        admit(
            &Grants(vec![("approve", grant)]),
            &approval,
            Some(&object),
            None,
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn issuing_needs_sign() {
    let status = attrs(Operation::Update, Some("status"));
    let old = csr("example.com/s", "");
    let mut issued = old.clone();
    issued["status"] = json!({"certificate": "Y2VydA=="});
    let none = Grants(Vec::new());
    let error = admit(&none, &status, Some(&issued), Some(&old))
        .await
        .unwrap_err();
    assert!(
        error
            .message
            .ends_with("user not permitted to sign requests with signerName \"example.com/s\"")
    );
    admit(
        &Grants(vec![("sign", "example.com/*")]),
        &status,
        Some(&issued),
        Some(&old),
    )
    .await
    .unwrap();
    let mut failed = old.clone();
    failed["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}]});
    admit(&none, &status, Some(&failed), Some(&old))
        .await
        .unwrap();
}
