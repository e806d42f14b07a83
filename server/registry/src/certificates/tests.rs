//! The CSR strategy: kube's validation messages, what each endpoint may change, and the
//! columns of `kubectl get csr`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::*;

/// A PEM block of `label` around some bytes, base64-encoded as JSON carries `[]byte`.
fn pem(label: &str) -> String {
    let body = STANDARD.encode(b"not really DER");
    STANDARD.encode(format!(
        "-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"
    ))
}

fn csr() -> Value {
    json!({"metadata": {"name": "req"}, "spec": {
        "request": pem("CERTIFICATE REQUEST"),
        "signerName": "example.com/signer",
        "usages": ["client auth"],
        "username": "alice"
    }})
}

fn messages(errors: Vec<FieldError>) -> Vec<String> {
    errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.detail))
        .collect()
}

#[test]
fn accepts_a_well_formed_request() {
    assert_eq!(messages(Requests.validate(&csr())), Vec::<String>::new());
}

#[test]
fn refuses_what_kube_refuses() {
    let mut bad = csr();
    bad["spec"]["request"] = json!(pem("CERTIFICATE"));
    bad["spec"]["usages"] = json!(["client auth", "flying", "client auth"]);
    bad["spec"]["signerName"] = json!("signer");
    bad["spec"]["expirationSeconds"] = json!(60);
    let errors = messages(Requests.validate(&bad));
    assert!(errors.contains(&"spec.request: PEM block type must be CERTIFICATE REQUEST".into()));
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("spec.usages[1]: supported values: \"any\""))
    );
    assert!(errors.contains(&"spec.usages[2]: ".into()), "{errors:?}");
    assert!(errors.contains(&"spec.signerName: must be a fully qualified domain and path of the form 'example.com/signer-name'".into()));
    assert!(errors.contains(&"spec.expirationSeconds: may not specify a duration less than 600 seconds (10 minutes)".into()));
    let mut legacy = csr();
    legacy["spec"]["signerName"] = json!("kubernetes.io/legacy-unknown");
    legacy["spec"]["usages"] = json!([]);
    let errors = messages(Requests.validate(&legacy));
    assert!(errors.contains(
        &"spec.signerName: the legacy signerName is not allowed via this API version".into()
    ));
    assert!(errors.contains(&"spec.usages: ".into()));
    let mut short_domain = csr();
    short_domain["spec"]["signerName"] = json!("example/signer");
    assert_eq!(
        messages(Requests.validate(&short_domain)),
        vec!["spec.signerName: should be a domain with at least two segments separated by dots"]
    );
}

#[test]
fn approval_changes_only_approval_conditions() {
    let mut old = csr();
    Requests.prepare_for_create(&mut old);
    let mut new = old.clone();
    new["spec"]["username"] = json!("mallory");
    new["status"] = json!({"certificate": pem("CERTIFICATE"), "conditions": [
        {"type": "Approved", "status": "True", "reason": "KubectlApprove"},
        {"type": "Failed", "status": "True"}
    ]});
    Requests.prepare_for_update(&mut new, &old, Some("approval"));
    assert_eq!(new["spec"]["username"], "alice");
    assert_eq!(new["status"].get("certificate"), None);
    let conditions = new["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0]["type"], "Approved");
    assert!(conditions[0]["lastUpdateTime"].is_string());
    assert!(conditions[0]["lastTransitionTime"].is_string());
    assert_eq!(
        messages(Requests.validate_update(&new, &old)),
        Vec::<String>::new()
    );
    assert_eq!(Requests.cells(&new)[4], json!("Approved"));
}

#[test]
fn status_writes_keep_approvals_and_certificates_once_issued() {
    let mut approved = csr();
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let mut new = approved.clone();
    new["status"] = json!({"certificate": pem("CERTIFICATE"), "conditions": [
        {"type": "Denied", "status": "True"}]});
    Requests.prepare_for_update(&mut new, &approved, Some("status"));
    assert_eq!(new["status"]["conditions"][0]["type"], "Approved");
    assert_eq!(new["status"]["conditions"].as_array().unwrap().len(), 1);
    assert_eq!(
        messages(Requests.validate_update(&new, &approved)),
        Vec::<String>::new()
    );
    assert_eq!(Requests.cells(&new)[4], json!("Approved,Issued"));

    let mut reissued = new.clone();
    reissued["status"]["certificate"] = json!(pem("CERTIFICATE").replace('L', "M"));
    Requests.prepare_for_update(&mut reissued, &new, Some("status"));
    let errors = messages(Requests.validate_update(&reissued, &new));
    assert!(
        errors.contains(
            &"status.certificate: updates may not modify existing certificate content".into()
        ),
        "{errors:?}"
    );

    let mut main = new.clone();
    main["status"] = json!({});
    Requests.prepare_for_update(&mut main, &new, None);
    assert_eq!(main["status"], new["status"]);
}

#[test]
fn approvals_stay_and_exclude_each_other() {
    let mut approved = csr();
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let mut withdrawn = approved.clone();
    withdrawn["status"] = json!({"conditions": []});
    Requests.prepare_for_update(&mut withdrawn, &approved, Some("approval"));
    assert_eq!(
        messages(Requests.validate_update(&withdrawn, &approved)),
        vec!["status.conditions: updates may not remove a condition of type \"Approved\""]
    );
    let mut both = approved.clone();
    both["status"] = json!({"conditions": [{"type": "Approved", "status": "True"},
        {"type": "Denied", "status": "False"}]});
    Requests.prepare_for_update(&mut both, &approved, Some("approval"));
    let errors = messages(Requests.validate_update(&both, &approved));
    assert!(errors.contains(
        &"status.conditions: Approved and Denied conditions are mutually exclusive".into()
    ));
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("status.conditions[1].status: supported values: \"True\""))
    );
}

#[test]
fn status_certificates_must_be_pem_certificates() {
    let mut issued = csr();
    issued["status"] = json!({"certificate": pem("RSA PRIVATE KEY")});
    assert_eq!(
        messages(Requests.validate_update(&issued, &csr())),
        vec![
            "status.certificate: only CERTIFICATE PEM blocks are allowed, found \"RSA PRIVATE KEY\""
        ]
    );
}

#[test]
fn columns_show_signer_requestor_and_duration() {
    let mut request = csr();
    request["spec"]["expirationSeconds"] = json!(3600);
    let cells = Requests.cells(&request);
    assert_eq!(
        cells[1..],
        [
            json!("example.com/signer"),
            json!("alice"),
            json!("60m"),
            json!("Pending")
        ]
    );
}
