//! certificates.k8s.io/v1 CertificateSigningRequest, with the `status` and `approval`
//! subresources, as kube-apiserver's CSR strategies and `ValidateCertificateSigningRequest*`.
//!
//! The spec never changes after create; the object endpoint keeps the status too. `approval`
//! writes only the Approved and Denied conditions, `status` everything else (the issued
//! `certificate` included, but not the approval conditions, which it keeps as stored). Once
//! set, Approved, Denied and Failed conditions stay, and Approved and Denied exclude each other.
//! What needs the requester or X.509 parsing (`spec.username`, the request's signature, the
//! subject restriction, who may approve or sign) is kcp-admission's.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_apimachinery::validation::{
    DNS1123_LABEL_MAX_LENGTH, DNS1123_SUBDOMAIN_MAX_LENGTH, NameRule, is_dns1123_label,
    is_dns1123_subdomain,
};
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Value, json};

use super::table::{self, AGE};
use super::{Column, ResourceType, Strategy};

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        false,
        &["csr"],
        Box::new(Requests),
    );
    t.subresources = vec!["status".into(), "approval".into()];
    t
}

/// The signer name v1 refuses (v1beta1's default).
const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// Conditions only the `approval` subresource writes.
const APPROVAL_CONDITIONS: [&str; 2] = ["Approved", "Denied"];

/// Key usages a request may ask for (`certificates.KeyUsage`).
const USAGES: [&str; 23] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

struct Requests;

impl Strategy for Requests {
    /// Any name that can be a path segment (kube validates nothing more).
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    /// Requests are never created approved or issued.
    fn prepare_for_create(&self, object: &mut Value) {
        if let Some(fields) = object.as_object_mut() {
            fields.insert("status".into(), json!({}));
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        let old_status = old.get("status").cloned().unwrap_or_else(|| json!({}));
        new["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
        match subresource {
            None => new["status"] = old_status,
            Some("approval") => {
                let approvals = conditions_where(new, is_approval);
                let mut status = old_status;
                if approvals != conditions_where(old, is_approval) {
                    let mut conditions = conditions_where(old, |c| !is_approval(c));
                    conditions.extend(approvals);
                    status["conditions"] = Value::Array(conditions);
                }
                new["status"] = status;
                stamp_conditions(new, old);
            }
            Some(_) => {
                keep_approvals(new, old);
                stamp_conditions(new, old);
            }
        }
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        validate(object, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate(new, Some(old));
        for kind in ["Approved", "Denied", "Failed"] {
            let count = |csr: &Value| conditions_where(csr, |c| condition_type(c) == kind).len();
            if count(new) < count(old) {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not remove a condition of type {kind:?}"),
                ));
            }
        }
        let certificate = |csr: &Value| {
            csr.pointer("/status/certificate")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if certificate(new) != certificate(old) && !certificate(old).is_empty() {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            AGE,
            Column::new(
                "SignerName",
                "string",
                "signerName indicates the requested signer, and is a qualified name.",
            ),
            Column::new(
                "Requestor",
                "string",
                "username contains the name of the user that created the CertificateSigningRequest.",
            ),
            Column::new(
                "RequestedDuration",
                "string",
                "expirationSeconds is the requested duration of validity of the issued certificate.",
            ),
            Column::new(
                "Condition",
                "string",
                "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\".",
            ),
        ]
    }

    fn age_column(&self) -> bool {
        false
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        let spec_text = |field: &str| {
            object
                .pointer(&format!("/spec/{field}"))
                .and_then(Value::as_str)
        };
        let duration = object
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .map_or_else(|| "<none>".to_string(), table::human_duration);
        vec![
            json!(table::age(meta::creation_timestamp(object))),
            json!(spec_text("signerName").unwrap_or("")),
            json!(spec_text("username").unwrap_or("")),
            json!(duration),
            json!(condition_summary(object)),
        ]
    }
}

/// `Approved`, `Denied` or `Pending`, then `,Failed` and `,Issued` where they apply (kubectl's
/// CONDITION column).
fn condition_summary(csr: &Value) -> String {
    let has = |kind: &str| !conditions_where(csr, |c| condition_type(c) == kind).is_empty();
    let mut summary = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        summary.push_str(",Failed");
    }
    if csr
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        summary.push_str(",Issued");
    }
    summary
}

fn condition_type(condition: &Value) -> &str {
    condition.get("type").and_then(Value::as_str).unwrap_or("")
}

fn is_approval(condition: &Value) -> bool {
    APPROVAL_CONDITIONS.contains(&condition_type(condition))
}

fn conditions_where(csr: &Value, keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| keep(c))
        .cloned()
        .collect()
}

/// A `status` write keeps the stored Approved and Denied conditions: changed instances go
/// back to their stored values, added or removed ones are undone.
fn keep_approvals(new: &mut Value, old: &Value) {
    let stored = conditions_where(old, is_approval);
    let Some(conditions) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        if !stored.is_empty() {
            new["status"]["conditions"] = Value::Array(stored);
        }
        return;
    };
    let positions: Vec<usize> = (0..conditions.len())
        .filter(|&i| is_approval(&conditions[i]))
        .collect();
    if positions.len() == stored.len() {
        for (position, condition) in positions.into_iter().zip(stored) {
            conditions[position] = condition;
        }
    } else {
        conditions.retain(|c| !is_approval(c));
        conditions.splice(0..0, stored);
    }
}

/// Conditions without times get now, or for an unchanged type and status the stored
/// transition time (kube's `populateConditionTimestamps`).
fn stamp_conditions(new: &mut Value, old: &Value) {
    let stored = conditions_where(old, |_| true);
    let now = kcp_apimachinery::time::now_rfc3339();
    let Some(conditions) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for condition in conditions.iter_mut().filter(|c| c.is_object()) {
        let unset = |c: &Value, field: &str| c.get(field).is_none_or(|t| t.is_null() || t == "");
        if unset(condition, "lastUpdateTime") {
            condition["lastUpdateTime"] = json!(now);
        }
        if unset(condition, "lastTransitionTime") {
            let same = stored.iter().find(|s| {
                s.get("type") == condition.get("type")
                    && s.get("status") == condition.get("status")
                    && !unset(s, "lastTransitionTime")
            });
            condition["lastTransitionTime"] =
                same.map_or_else(|| json!(now), |s| s["lastTransitionTime"].clone());
        }
    }
}

/// kube's `validateCertificateSigningRequest`, tolerating on updates what the stored object
/// already has (kube's `getValidationOptions`).
fn validate(csr: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = csr.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(error) = request_error(spec.get("request")) {
        errors.push(FieldError::invalid(
            "spec.request",
            spec.get("request").cloned().unwrap_or(Value::Null),
            error,
        ));
    }
    let usages: Vec<&str> = spec
        .get("usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if usages.is_empty() {
        errors.push(FieldError::required("spec.usages", ""));
    }
    let tolerated = |check: fn(&Value) -> bool| old.is_some_and(check);
    if !tolerated(has_unknown_usages) {
        for (i, usage) in usages.iter().enumerate() {
            if !USAGES.contains(usage) {
                let mut valid = USAGES.to_vec();
                valid.sort_unstable();
                errors.push(FieldError::not_supported(
                    &format!("spec.usages[{i}]"),
                    json!(usage),
                    &valid,
                ));
            }
        }
    }
    if !tolerated(has_duplicate_usages) {
        for (i, usage) in usages.iter().enumerate() {
            if usages[..i].contains(usage) {
                errors.push(FieldError::duplicate(
                    &format!("spec.usages[{i}]"),
                    json!(usage),
                ));
            }
        }
    }
    let signer = spec.get("signerName").and_then(Value::as_str).unwrap_or("");
    let legacy_stored = old.is_some_and(|o| {
        o.pointer("/spec/signerName").and_then(Value::as_str) == Some(LEGACY_UNKNOWN_SIGNER)
    });
    if signer == LEGACY_UNKNOWN_SIGNER && !legacy_stored {
        errors.push(FieldError::invalid(
            "spec.signerName",
            json!(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    } else if signer != LEGACY_UNKNOWN_SIGNER {
        errors.extend(validate_signer_name("spec.signerName", signer));
    }
    if let Some(seconds) = spec.get("expirationSeconds").and_then(Value::as_i64)
        && seconds < 600
    {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            json!(seconds),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errors.extend(validate_conditions(csr, old));
    let certificate = csr.pointer("/status/certificate").and_then(Value::as_str);
    let unchanged = old
        .is_some_and(|o| o.pointer("/status/certificate").and_then(Value::as_str) == certificate);
    if !unchanged && let Some(error) = certificate.and_then(certificate_error) {
        errors.push(FieldError::invalid(
            "status.certificate",
            json!("<certificate data>"),
            &error,
        ));
    }
    errors
}

fn has_unknown_usages(csr: &Value) -> bool {
    usages_of(csr).iter().any(|u| !USAGES.contains(&u.as_str()))
}

fn has_duplicate_usages(csr: &Value) -> bool {
    let usages = usages_of(csr);
    usages
        .iter()
        .enumerate()
        .any(|(i, u)| usages[..i].contains(u))
}

fn usages_of(csr: &Value) -> Vec<String> {
    csr.pointer("/spec/usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Condition types present, statuses allowed (`True` only for Approved, Denied and Failed),
/// Approved and Denied exclusive, types unique (each tolerated when the stored object has it).
fn validate_conditions(csr: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let conditions = conditions_where(csr, |_| true);
    let stored = old
        .map(|o| conditions_where(o, |_| true))
        .unwrap_or_default();
    let stored_has = |kind: &str| stored.iter().any(|c| condition_type(c) == kind);
    let stored_duplicates = stored.iter().enumerate().any(|(i, c)| {
        stored[..i]
            .iter()
            .any(|s| condition_type(s) == condition_type(c))
    });
    let both_tolerated = stored_has("Approved") && stored_has("Denied");
    let (mut approved, mut denied) = (false, false);
    for (i, condition) in conditions.iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let kind = condition_type(condition);
        if kind.is_empty() && !stored_has("") {
            errors.push(FieldError::required(&format!("{path}.type"), ""));
        }
        let status = condition
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("");
        let allowed: &[&str] = if matches!(kind, "Approved" | "Denied" | "Failed") {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errors.push(FieldError::required(&format!("{path}.status"), ""));
        } else if !allowed.contains(&status) {
            errors.push(FieldError::not_supported(
                &format!("{path}.status"),
                json!(status),
                allowed,
            ));
        }
        approved |= kind == "Approved";
        denied |= kind == "Denied";
        if matches!(kind, "Approved" | "Denied") && approved && denied && !both_tolerated {
            errors.push(FieldError::invalid(
                "status.conditions",
                json!(kind),
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        let repeated = conditions[..i].iter().any(|c| condition_type(c) == kind);
        if repeated && !stored_duplicates {
            errors.push(FieldError::duplicate(&format!("{path}.type"), json!(kind)));
        }
    }
    errors
}

/// Why `spec.request` is not a PEM certificate request, as far as text can tell (the DER and
/// its signature are checked by admission).
fn request_error(request: Option<&Value>) -> Option<&'static str> {
    const NOT_A_REQUEST: &str = "PEM block type must be CERTIFICATE REQUEST";
    let Some(encoded) = request.and_then(Value::as_str).filter(|r| !r.is_empty()) else {
        return Some(NOT_A_REQUEST);
    };
    let Ok(pem) = STANDARD.decode(encoded) else {
        return Some("must be base64-encoded PEM data");
    };
    let text = String::from_utf8_lossy(&pem);
    match pem_blocks(&text).first() {
        Some(block) if block.label == "CERTIFICATE REQUEST" => None,
        _ => Some(NOT_A_REQUEST),
    }
}

/// Why `status.certificate` is not a chain of PEM certificates (kube's `validateCertificate`).
fn certificate_error(encoded: &str) -> Option<String> {
    if encoded.is_empty() {
        return None;
    }
    let Ok(pem) = STANDARD.decode(encoded) else {
        return Some("must be base64-encoded PEM data".into());
    };
    let blocks = pem_blocks(&String::from_utf8_lossy(&pem));
    if blocks.is_empty() {
        return Some("must contain at least one CERTIFICATE PEM block".into());
    }
    for block in blocks {
        if block.label != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        if block.has_headers {
            return Some("no PEM block headers are permitted".into());
        }
        if block.der.is_empty() {
            return Some("found CERTIFICATE PEM block containing 0 certificates".into());
        }
    }
    None
}

/// One PEM block: its label, whether it has headers, and its decoded content.
struct PemBlock {
    label: String,
    has_headers: bool,
    der: Vec<u8>,
}

/// The well-formed PEM blocks of a text, in order (text around them is ignored, as Go's
/// `pem.Decode` skips it).
fn pem_blocks(text: &str) -> Vec<PemBlock> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body.find(&end_marker) else {
            break;
        };
        let lines: Vec<&str> = body[..end].lines().map(str::trim).collect();
        let has_headers = lines.iter().any(|l| l.contains(':'));
        let base64: String = lines.iter().filter(|l| !l.contains(':')).copied().collect();
        if let Ok(der) = STANDARD.decode(base64) {
            blocks.push(PemBlock {
                label: label.to_string(),
                has_headers,
                der,
            });
        }
        rest = &body[end + end_marker.len()..];
    }
    blocks
}

/// kube's `ValidateSignerName`: `<domain>/<path>`, the domain DNS labels with at least one dot,
/// the path a DNS subdomain.
fn validate_signer_name(path: &str, signer: &str) -> Vec<FieldError> {
    if signer.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((domain, name)) = signer.split_once('/').filter(|(_, n)| !n.contains('/')) else {
        return vec![FieldError::invalid(
            path,
            json!(signer),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errors = Vec::new();
    if domain.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(FieldError::too_long(path, DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some((label, messages)) = labels
        .iter()
        .map(|l| (l, is_dns1123_label(l)))
        .find(|(_, m)| !m.is_empty())
    {
        for message in messages {
            errors.push(FieldError::invalid(
                path,
                json!(domain),
                &format!("validating label {label:?}: {message}"),
            ));
        }
    }
    if labels.len() < 2 {
        errors.push(FieldError::invalid(
            path,
            json!(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    let longest_path = DNS1123_SUBDOMAIN_MAX_LENGTH + DNS1123_LABEL_MAX_LENGTH + 1;
    if name.len() > longest_path {
        errors.push(FieldError::too_long(path, longest_path));
    }
    for message in is_dns1123_subdomain(name) {
        errors.push(FieldError::invalid(path, json!(name), &message));
    }
    errors
}

#[cfg(test)]
mod tests;
