//! CertificateSigningRequest admission: what the CSR strategy cannot decide because it needs the
//! requester, X.509 parsing or the authorizer, as kube-apiserver's CSR strategy and its
//! `certificates/approval`, `certificates/signing` and `certificatesubjectrestriction` plugins.
//!
//! - On create the requester is recorded in `spec.username`, `uid`, `groups` and `extra`
//!   ([`set_requester`], mutating), whatever the body said; the request must be a PKCS#10
//!   request whose signature verifies; and a request to the
//!   `kubernetes.io/kube-apiserver-client` signer may not ask for the `system:masters` group.
//! - Writing `approval` needs the verb `approve` on `signers` (group `certificates.k8s.io`) named
//!   after the request's signer or its domain (`example.com/*`); setting or changing
//!   `status.certificate` needs `sign` likewise.

use kcp_apimachinery::{ApiError, FieldError};
use kcp_registry::admission::Operation;
use serde_json::{Value, json};
use x509_parser::prelude::{FromDer, X509CertificationRequest};

use crate::Attributes;
use crate::sources::{Access, Authorizer};

const GROUP: &str = "certificates.k8s.io";
const RESOURCE: &str = "certificatesigningrequests";
/// The signer of client certificates kube-apiserver trusts.
const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
const MASTERS_GROUP: &str = "system:masters";

/// Records the requesting user in a new request's spec (kube's CSR `PrepareForCreate`).
pub fn set_requester(attrs: &Attributes, object: &mut Value) {
    if !object.get("spec").is_some_and(Value::is_object) {
        object["spec"] = json!({});
    }
    let Some(spec) = object["spec"].as_object_mut() else {
        return;
    };
    let user = &attrs.user;
    for field in ["username", "uid", "groups", "extra"] {
        spec.remove(field);
    }
    if !user.name.is_empty() {
        spec.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}

/// Validating admission of a CertificateSigningRequest write.
pub async fn admit(
    authorizer: &dyn Authorizer,
    attrs: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(csr) = object else {
        return Ok(());
    };
    let signer = csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    match (attrs.operation, attrs.subresource.as_deref()) {
        (Operation::Create, None) => {
            let organizations = parse_request(csr).map_err(|message| {
                ApiError::invalid(
                    GROUP,
                    "CertificateSigningRequest",
                    &attrs.name,
                    vec![FieldError::invalid(
                        "spec.request",
                        csr.pointer("/spec/request").cloned().unwrap_or(Value::Null),
                        &message,
                    )],
                )
            })?;
            if signer == KUBE_APISERVER_CLIENT_SIGNER
                && organizations.iter().any(|o| o == MASTERS_GROUP)
            {
                return Err(forbidden(
                    attrs,
                    &format!("use of {signer} signer with {MASTERS_GROUP} group is not allowed"),
                ));
            }
            Ok(())
        }
        (Operation::Update, Some("approval")) => {
            require(authorizer, attrs, "approve", signer).await
        }
        (Operation::Update, Some("status")) => {
            let certificate = |csr: Option<&Value>| {
                csr.and_then(|c| c.pointer("/status/certificate"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            if certificate(Some(csr)) == certificate(old) {
                return Ok(());
            }
            require(authorizer, attrs, "sign", signer).await
        }
        _ => Ok(()),
    }
}

/// Refuses unless the user may `verb` the signer, by name or by its domain's wildcard (kube's
/// `IsAuthorizedForSignerName`).
async fn require(
    authorizer: &dyn Authorizer,
    attrs: &Attributes,
    verb: &str,
    signer: &str,
) -> Result<(), ApiError> {
    let domain = signer.split('/').next().unwrap_or_default();
    let wildcard = format!("{domain}/*");
    for name in [signer, wildcard.as_str()] {
        let access = Access {
            verb,
            group: GROUP,
            resource: "signers",
            name,
        };
        if authorizer.allowed(&attrs.user, access).await {
            return Ok(());
        }
    }
    Err(forbidden(
        attrs,
        &format!("user not permitted to {verb} requests with signerName {signer:?}"),
    ))
}

fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    ApiError::forbidden(GROUP, RESOURCE, &attrs.name, reason)
}

/// The organizations (requested groups) of a request whose PEM, DER and signature are valid,
/// or why it is not one.
fn parse_request(csr: &Value) -> Result<Vec<String>, String> {
    use base64::Engine;
    let encoded = csr
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .unwrap_or("");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| "must be base64-encoded PEM data".to_string())?;
    let not_a_request = || "PEM block type must be CERTIFICATE REQUEST".to_string();
    let start = find(&pem, b"-----BEGIN ").ok_or_else(not_a_request)?;
    let (_, block) =
        x509_parser::pem::parse_x509_pem(&pem[start..]).map_err(|_| not_a_request())?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(not_a_request());
    }
    let (_, request) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    request
        .verify_signature()
        .map_err(|e| format!("x509: {e}"))?;
    Ok(request
        .certification_request_info
        .subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests;
