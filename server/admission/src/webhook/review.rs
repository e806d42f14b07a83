//! The AdmissionReview exchange with one webhook: the `admission.k8s.io/v1` review sent, the
//! checks kube-apiserver makes on the answer (`request.VerifyAdmissionResponse`: a v1
//! AdmissionReview, a response, the request's uid, patches only from mutating webhooks and only
//! with a patch type), and a denial turned into the Status the client gets
//! (`errors.ToStatusErr`: `admission webhook "<name>" denied the request: <message>`, the
//! webhook's code if it is an error code, else 400).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_apimachinery::{ApiError, StatusReason};
use serde::Deserialize;
use serde_json::{Value, json};

use super::CallError;

/// The AdmissionReview sent for `request` (an AdmissionRequest).
pub(crate) fn review(request: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// A webhook's answer, checked.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    pub allowed: bool,
    pub status: Option<AnswerStatus>,
    /// A decoded JSONPatch (mutating webhooks only).
    pub patch: Option<Vec<u8>>,
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
}

/// The `response.status` of a denial.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct AnswerStatus {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    status: Option<AnswerStatus>,
    patch: Option<String>,
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    audit_annotations: BTreeMap<String, String>,
}

/// Parses and checks the body a webhook answered with to the review of `uid`.
pub(crate) fn parse_answer(body: &[u8], uid: &str, mutating: bool) -> Result<Answer, CallError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|err| CallError::Transport(err.to_string()))?;
    if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
        return Err(CallError::InvalidResponse(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            review.api_version, review.kind
        )));
    }
    let Some(response) = review.response else {
        return Err(CallError::InvalidResponse(
            "webhook response was absent".into(),
        ));
    };
    if response.uid != uid {
        return Err(CallError::InvalidResponse(format!(
            "expected response.uid=\"{uid}\", got \"{}\"",
            response.uid
        )));
    }
    let patch = match &response.patch {
        Some(encoded) if !encoded.is_empty() => Some(
            STANDARD
                .decode(encoded)
                .map_err(|err| CallError::Transport(format!("illegal base64 patch: {err}")))?,
        ),
        _ => None,
    };
    check_patch_fields(patch.is_some(), response.patch_type.as_deref(), mutating)?;
    Ok(Answer {
        allowed: response.allowed,
        status: response.status,
        patch,
        warnings: response.warnings,
        audit_annotations: response.audit_annotations,
    })
}

/// A mutating webhook sends a patch and its type together (and only `JSONPatch` exists); a
/// validating webhook sends neither.
fn check_patch_fields(
    has_patch: bool,
    patch_type: Option<&str>,
    mutating: bool,
) -> Result<(), CallError> {
    let invalid = |message: &str| Err(CallError::InvalidResponse(message.to_string()));
    match (mutating, has_patch, patch_type) {
        (false, true, _) => invalid("validating webhook may not return response.patch"),
        (false, false, Some(_)) => invalid("validating webhook may not return response.patchType"),
        (true, true, None) => invalid("webhook returned response.patch but not response.patchType"),
        (true, false, Some(_)) => {
            invalid("webhook returned response.patchType but not response.patch")
        }
        (true, true, Some("")) => invalid("webhook returned invalid response.patchType of \"\""),
        (true, true, Some(kind)) if kind != "JSONPatch" => {
            Err(CallError::UnsupportedPatchType(kind.to_string()))
        }
        _ => Ok(()),
    }
}

/// The Status error of a webhook's denial: its code when that is an error code (else 400), its
/// reason, and its message (or reason) after `admission webhook "<name>" denied the request`.
pub(crate) fn denial(name: &str, status: Option<&AnswerStatus>) -> ApiError {
    let status = status.cloned().unwrap_or_default();
    let denied_by = format!("admission webhook \"{name}\" denied the request");
    let message = if !status.message.is_empty() {
        format!("{denied_by}: {}", status.message)
    } else if !status.reason.is_empty() {
        format!("{denied_by}: {}", status.reason)
    } else {
        format!("{denied_by} without explanation")
    };
    let code = u16::try_from(status.code)
        .ok()
        .filter(|code| (400..600).contains(code))
        .unwrap_or(400);
    ApiError {
        code,
        reason: reason_of(&status.reason, code),
        message,
        details: None,
    }
}

/// The Status reason a webhook named, or the one its code implies.
fn reason_of(reason: &str, code: u16) -> StatusReason {
    let known = [
        StatusReason::BadRequest,
        StatusReason::Unauthorized,
        StatusReason::Forbidden,
        StatusReason::NotFound,
        StatusReason::AlreadyExists,
        StatusReason::Conflict,
        StatusReason::Gone,
        StatusReason::Invalid,
        StatusReason::ServerTimeout,
        StatusReason::Timeout,
        StatusReason::TooManyRequests,
        StatusReason::MethodNotAllowed,
        StatusReason::NotAcceptable,
        StatusReason::RequestEntityTooLarge,
        StatusReason::UnsupportedMediaType,
        StatusReason::InternalError,
        StatusReason::Expired,
        StatusReason::ServiceUnavailable,
    ];
    if let Some(named) = known.into_iter().find(|r| r.as_str() == reason) {
        return named;
    }
    match code {
        401 => StatusReason::Unauthorized,
        403 => StatusReason::Forbidden,
        404 => StatusReason::NotFound,
        409 => StatusReason::Conflict,
        422 => StatusReason::Invalid,
        429 => StatusReason::TooManyRequests,
        503 => StatusReason::ServiceUnavailable,
        500..=599 => StatusReason::InternalError,
        _ => StatusReason::BadRequest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(response: Value) -> Vec<u8> {
        review_with(response).to_string().into_bytes()
    }

    fn review_with(response: Value) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
    }

    #[test]
    fn an_answer_carries_warnings_annotations_and_a_decoded_patch() {
        let patch = STANDARD.encode(br#"[{"op":"add","path":"/a","value":1}]"#);
        let answer = parse_answer(
            &body(
                json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch",
                "warnings": ["w"], "auditAnnotations": {"k": "v"}}),
            ),
            "u",
            true,
        )
        .unwrap();
        assert!(answer.allowed);
        assert_eq!(answer.warnings, ["w"]);
        assert_eq!(answer.audit_annotations["k"], "v");
        assert_eq!(
            answer.patch.as_deref(),
            Some(&br#"[{"op":"add","path":"/a","value":1}]"#[..])
        );
    }

    #[test]
    fn malformed_answers_are_errors() {
        let patch = STANDARD.encode(b"[]");
        for (answer, mutating, want) in [
            (
                body(json!({"uid": "other", "allowed": true})),
                false,
                "expected response.uid=\"u\", got \"other\"",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Status"})
                    .to_string()
                    .into_bytes(),
                false,
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status",
            ),
            (
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
                    .to_string()
                    .into_bytes(),
                false,
                "webhook response was absent",
            ),
            (
                body(
                    json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch"}),
                ),
                false,
                "validating webhook may not return response.patch",
            ),
            (
                body(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"})),
                false,
                "validating webhook may not return response.patchType",
            ),
            (
                body(json!({"uid": "u", "allowed": true, "patch": patch})),
                true,
                "webhook returned response.patch but not response.patchType",
            ),
            (
                body(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"})),
                true,
                "webhook returned response.patchType but not response.patch",
            ),
            (
                body(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "Merge"})),
                true,
                "unsupported patch type \"Merge\"",
            ),
        ] {
            let err = parse_answer(&answer, "u", mutating).unwrap_err();
            assert!(
                err.to_string().contains(want),
                "{err} should contain {want}"
            );
        }
        assert!(matches!(
            parse_answer(b"garbage", "u", false),
            Err(CallError::Transport(_))
        ));
    }

    #[test]
    fn denials_read_as_kube_writes_them() {
        let err = denial("w.example.com", None);
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "admission webhook \"w.example.com\" denied the request without explanation"
        );
        let status = AnswerStatus {
            code: 403,
            message: "no".into(),
            reason: "Forbidden".into(),
        };
        let err = denial("w.example.com", Some(&status));
        assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
        assert_eq!(
            err.message,
            "admission webhook \"w.example.com\" denied the request: no"
        );
        let status = AnswerStatus {
            code: 200,
            message: String::new(),
            reason: "Custom".into(),
        };
        let err = denial("w", Some(&status));
        assert_eq!((err.code, err.reason), (400, StatusReason::BadRequest));
        assert_eq!(
            err.message,
            "admission webhook \"w\" denied the request: Custom"
        );
        let status = AnswerStatus {
            code: 429,
            ..AnswerStatus::default()
        };
        assert_eq!(
            denial("w", Some(&status)).reason,
            StatusReason::TooManyRequests
        );
    }
}
