//! API errors as Kubernetes `Status` objects.
//!
//! Every failed request ends as a `metav1.Status` body with an HTTP code, a machine-readable
//! reason and a human message. Clients branch on the reason (`IsNotFound`, `IsConflict`, ...)
//! and tests and users compare the message text, so the constructors here reproduce the codes,
//! reasons and message formats of Kubernetes' `api/errors` package exactly; the rest of the
//! server builds errors only through them.

mod field;

pub use field::{FieldError, FieldErrorKind, aggregate};

use std::fmt;

use serde_json::{Map, Value, json};

use crate::gofmt;
use crate::meta::GroupResource;

/// The message Kubernetes uses for a failed optimistic-concurrency check (resourceVersion
/// precondition), passed as `err` to [`ApiError::conflict`].
pub const OPTIMISTIC_LOCK_ERROR_MSG: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// `metav1.StatusReason`: why a request failed, for clients to act on without parsing messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusReason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    AlreadyExists,
    Conflict,
    Gone,
    Invalid,
    ServerTimeout,
    Timeout,
    TooManyRequests,
    MethodNotAllowed,
    NotAcceptable,
    RequestEntityTooLarge,
    UnsupportedMediaType,
    InternalError,
    Expired,
    ServiceUnavailable,
}

impl StatusReason {
    /// The reason as it appears in the `reason` field of a Status.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::BadRequest => "BadRequest",
            StatusReason::Unauthorized => "Unauthorized",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::NotFound => "NotFound",
            StatusReason::AlreadyExists => "AlreadyExists",
            StatusReason::Conflict => "Conflict",
            StatusReason::Gone => "Gone",
            StatusReason::Invalid => "Invalid",
            StatusReason::ServerTimeout => "ServerTimeout",
            StatusReason::Timeout => "Timeout",
            StatusReason::TooManyRequests => "TooManyRequests",
            StatusReason::MethodNotAllowed => "MethodNotAllowed",
            StatusReason::NotAcceptable => "NotAcceptable",
            StatusReason::RequestEntityTooLarge => "RequestEntityTooLarge",
            StatusReason::UnsupportedMediaType => "UnsupportedMediaType",
            StatusReason::InternalError => "InternalError",
            StatusReason::Expired => "Expired",
            StatusReason::ServiceUnavailable => "ServiceUnavailable",
        }
    }
}

impl StatusReason {
    /// The reason a `reason` field names; `None` for one this crate does not know.
    pub fn parse(reason: &str) -> Option<StatusReason> {
        use StatusReason::*;
        [
            BadRequest,
            Unauthorized,
            Forbidden,
            NotFound,
            AlreadyExists,
            Conflict,
            Gone,
            Invalid,
            ServerTimeout,
            Timeout,
            TooManyRequests,
            MethodNotAllowed,
            NotAcceptable,
            RequestEntityTooLarge,
            UnsupportedMediaType,
            InternalError,
            Expired,
            ServiceUnavailable,
        ]
        .into_iter()
        .find(|known| known.as_str() == reason)
    }
}

impl fmt::Display for StatusReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metav1.StatusDetails`: which object the error is about and, for validation errors, one
/// cause per offending field. Empty fields are omitted from the JSON form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusDetails {
    pub name: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub causes: Vec<StatusCause>,
    pub retry_after_seconds: Option<u32>,
}

/// `metav1.StatusCause`; `reason` is the cause type (e.g. `FieldValueInvalid`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// A failed API request, convertible to the `Status` body the server returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: StatusReason,
    pub message: String,
    /// Boxed: most errors carry none, and a small `ApiError` keeps every `Result` cheap.
    pub details: Option<Box<StatusDetails>>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

/// Details naming an object by group, resource (Kubernetes puts the resource in `kind`) and name.
fn object_details(group: &str, resource: &str, name: &str) -> StatusDetails {
    StatusDetails {
        name: non_empty(name),
        group: non_empty(group),
        kind: non_empty(resource),
        ..StatusDetails::default()
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// `Kind.group` (or just `Kind` for the core group), as Go's `GroupKind.String()` prints it.
fn qualified_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: StatusReason, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// 404: `configmaps "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let gr = GroupResource::new(group, resource);
        ApiError::new(
            404,
            StatusReason::NotFound,
            format!("{gr} {} not found", gofmt::quote(name)),
        )
        .with_details(object_details(group, resource, name))
    }

    /// 409: `configmaps "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let gr = GroupResource::new(group, resource);
        ApiError::new(
            409,
            StatusReason::AlreadyExists,
            format!("{gr} {} already exists", gofmt::quote(name)),
        )
        .with_details(object_details(group, resource, name))
    }

    /// 409: `Operation cannot be fulfilled on configmaps "x": <err>`; for a stale resourceVersion
    /// pass [`OPTIMISTIC_LOCK_ERROR_MSG`].
    pub fn conflict(group: &str, resource: &str, name: &str, err: &str) -> Self {
        let gr = GroupResource::new(group, resource);
        ApiError::new(
            409,
            StatusReason::Conflict,
            format!(
                "Operation cannot be fulfilled on {gr} {}: {err}",
                gofmt::quote(name)
            ),
        )
        .with_details(object_details(group, resource, name))
    }

    /// 422: `ConfigMap "x" is invalid: <errors>`, one cause per field error. Like Kubernetes'
    /// aggregate, a single error is printed bare, several in brackets, duplicates once.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: Vec<FieldError>) -> Self {
        let causes = errors
            .iter()
            .map(|e| StatusCause {
                reason: e.kind.cause_reason().to_string(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect();
        let qualified = format!("{} {}", qualified_kind(group, kind), gofmt::quote(name));
        let message = match aggregate(&errors) {
            Some(aggregated) => format!("{qualified} is invalid: {aggregated}"),
            None => format!("{qualified} is invalid"),
        };
        ApiError::new(422, StatusReason::Invalid, message).with_details(StatusDetails {
            name: non_empty(name),
            group: non_empty(group),
            kind: non_empty(kind),
            causes,
            retry_after_seconds: None,
        })
    }

    /// 400 with the given message.
    pub fn bad_request(msg: &str) -> Self {
        ApiError::new(400, StatusReason::BadRequest, msg)
    }

    /// 401; an empty message becomes `not authorized`.
    pub fn unauthorized(msg: &str) -> Self {
        let message = if msg.is_empty() {
            "not authorized"
        } else {
            msg
        };
        ApiError::new(401, StatusReason::Unauthorized, message)
    }

    /// 403: `configmaps "x" is forbidden: <reason>`, `configmaps is forbidden: <reason>` without a
    /// name, and `forbidden: <reason>` without a resource either.
    pub fn forbidden(group: &str, resource: &str, name: &str, reason: &str) -> Self {
        let gr = GroupResource::new(group, resource);
        let message = match (resource.is_empty() && group.is_empty(), name.is_empty()) {
            (true, true) => format!("forbidden: {reason}"),
            (false, true) => format!("{gr} is forbidden: {reason}"),
            _ => format!("{gr} {} is forbidden: {reason}", gofmt::quote(name)),
        };
        ApiError::new(403, StatusReason::Forbidden, message)
            .with_details(object_details(group, resource, name))
    }

    /// 405: `<verb> is not supported on resources of kind "configmaps"`.
    pub fn method_not_supported(group: &str, resource: &str, verb: &str) -> Self {
        let gr = GroupResource::new(group, resource).to_string();
        ApiError::new(
            405,
            StatusReason::MethodNotAllowed,
            format!(
                "{verb} is not supported on resources of kind {}",
                gofmt::quote(&gr)
            ),
        )
        .with_details(object_details(group, resource, ""))
    }

    /// 406 with the given message.
    pub fn not_acceptable(msg: &str) -> Self {
        ApiError::new(406, StatusReason::NotAcceptable, msg)
    }

    /// 406 as content negotiation reports it: `only the following media types are accepted: ...`.
    pub fn not_acceptable_media_types(accepted: &[&str]) -> Self {
        ApiError::not_acceptable(&format!(
            "only the following media types are accepted: {}",
            accepted.join(", ")
        ))
    }

    /// 415 naming the rejected content type: `unsupported media type "text/plain"`. Kubernetes
    /// itself lists what it accepts instead; prefer [`Self::unsupported_media_type_accepting`].
    pub fn unsupported_media_type(content_type: &str) -> Self {
        ApiError::new(
            415,
            StatusReason::UnsupportedMediaType,
            format!("unsupported media type {}", gofmt::quote(content_type)),
        )
    }

    /// 415 exactly as Kubernetes reports an unusable request body type: `the body of the request
    /// was in an unknown format - accepted media types include: <accepted, comma-separated>`.
    pub fn unsupported_media_type_accepting(accepted: &[&str]) -> Self {
        ApiError::new(
            415,
            StatusReason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 413: `Request entity too large: <msg>`.
    pub fn request_entity_too_large(msg: &str) -> Self {
        ApiError::new(
            413,
            StatusReason::RequestEntityTooLarge,
            format!("Request entity too large: {msg}"),
        )
    }

    /// 410 Expired, e.g. `too old resource version: 5 (10)` for a compacted revision.
    pub fn resource_expired(msg: &str) -> Self {
        ApiError::new(410, StatusReason::Expired, msg)
    }

    /// 410 Gone with the given message.
    pub fn gone(msg: &str) -> Self {
        ApiError::new(410, StatusReason::Gone, msg)
    }

    /// 500: `Internal error occurred: <msg>`, with the message repeated as the only cause.
    pub fn internal_error(msg: &str) -> Self {
        ApiError::new(
            500,
            StatusReason::InternalError,
            format!("Internal error occurred: {msg}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                message: msg.to_string(),
                ..StatusCause::default()
            }],
            ..StatusDetails::default()
        })
    }

    /// 500 ServerTimeout: `The <operation> operation against <resource> could not be completed at
    /// this time, please try again.`
    pub fn server_timeout(
        group: &str,
        resource: &str,
        operation: &str,
        retry_after_seconds: u32,
    ) -> Self {
        let gr = GroupResource::new(group, resource);
        ApiError::new(
            500,
            StatusReason::ServerTimeout,
            format!("The {operation} operation against {gr} could not be completed at this time, please try again."),
        )
        .with_details(object_details(group, resource, operation))
        .with_retry_after(retry_after_seconds)
    }

    /// 503 with the given message.
    pub fn service_unavailable(msg: &str) -> Self {
        ApiError::new(503, StatusReason::ServiceUnavailable, msg)
    }

    /// 504: `Timeout: <msg>`, telling the client when to retry.
    pub fn timeout(msg: &str, retry_after_seconds: u32) -> Self {
        ApiError::new(504, StatusReason::Timeout, format!("Timeout: {msg}"))
            .with_details(StatusDetails::default())
            .with_retry_after(retry_after_seconds)
    }

    /// 504 for a read at a resourceVersion the server has not reached yet, with the
    /// `ResourceVersionTooLarge` cause clients look for.
    pub fn too_large_resource_version(
        requested: u64,
        current: u64,
        retry_after_seconds: u32,
    ) -> Self {
        let mut err = ApiError::timeout(
            &format!("Too large resource version: {requested}, current: {current}"),
            retry_after_seconds,
        );
        if let Some(details) = err.details.as_mut() {
            details.causes.push(StatusCause {
                reason: "ResourceVersionTooLarge".to_string(),
                message: "Too large resource version".to_string(),
                field: String::new(),
            });
        }
        err
    }

    /// 429 with the given message, telling the client when to retry.
    pub fn too_many_requests(msg: &str, retry_after_seconds: u32) -> Self {
        ApiError::new(429, StatusReason::TooManyRequests, msg)
            .with_details(StatusDetails::default())
            .with_retry_after(retry_after_seconds)
    }

    /// Sets `details.retryAfterSeconds` (omitted when zero, as in Kubernetes).
    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        let details = self.details.get_or_insert_with(Box::default);
        details.retry_after_seconds = (seconds > 0).then_some(seconds);
        self
    }

    /// A failed answer of another server back into an error, as client-go reads it: the code is
    /// the HTTP status, reason and message come from its `Status` body when it sent one (an
    /// unknown or missing reason is an InternalError). Details are not kept.
    pub fn from_answer(code: u16, body: &Value) -> ApiError {
        let reason = body
            .get("reason")
            .and_then(Value::as_str)
            .and_then(StatusReason::parse)
            .unwrap_or(StatusReason::InternalError);
        let message = body
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| format!("the server answered {code}"), str::to_owned);
        ApiError::new(code, reason, message)
    }

    /// The `metav1.Status` JSON body, fields in Kubernetes' order, empty ones omitted.
    pub fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), json!("Failure"));
        if !self.message.is_empty() {
            status.insert("message".into(), json!(self.message));
        }
        status.insert("reason".into(), json!(self.reason.as_str()));
        if let Some(details) = &self.details {
            status.insert("details".into(), details_json(details));
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }
}

fn details_json(details: &StatusDetails) -> Value {
    let mut out = Map::new();
    for (key, value) in [
        ("name", &details.name),
        ("group", &details.group),
        ("kind", &details.kind),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            out.insert(key.into(), json!(v));
        }
    }
    if !details.causes.is_empty() {
        let causes = details
            .causes
            .iter()
            .map(|c| {
                let mut cause = Map::new();
                for (key, value) in [
                    ("reason", &c.reason),
                    ("message", &c.message),
                    ("field", &c.field),
                ] {
                    if !value.is_empty() {
                        cause.insert(key.into(), json!(value));
                    }
                }
                Value::Object(cause)
            })
            .collect();
        out.insert("causes".into(), Value::Array(causes));
    }
    if let Some(seconds) = details.retry_after_seconds.filter(|s| *s > 0) {
        out.insert("retryAfterSeconds".into(), json!(seconds));
    }
    Value::Object(out)
}

/// The `Status` body of a successful delete that returns no object.
pub fn status_success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_becomes_the_error_it_reports() {
        let sent = ApiError::conflict("g", "things", "x", OPTIMISTIC_LOCK_ERROR_MSG);
        let read = ApiError::from_answer(409, &sent.to_status());
        assert_eq!(
            (read.code, read.reason, &read.message),
            (409, StatusReason::Conflict, &sent.message)
        );
        let read = ApiError::from_answer(502, &Value::Null);
        assert_eq!((read.code, read.reason), (502, StatusReason::InternalError));
        for reason in [
            StatusReason::Expired,
            StatusReason::MethodNotAllowed,
            StatusReason::Gone,
        ] {
            assert_eq!(StatusReason::parse(reason.as_str()), Some(reason));
        }
    }

    #[test]
    fn not_found_matches_kubernetes() {
        let err = ApiError::not_found("", "configmaps", "x");
        assert_eq!(err.code, 404);
        assert_eq!(err.to_string(), "configmaps \"x\" not found");
        assert_eq!(
            serde_json::to_string(&err.to_status()).unwrap_or_default(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"configmaps"},"code":404}"#
        );
        let apps = ApiError::not_found("apps", "deployments", "d");
        assert_eq!(apps.message, "deployments.apps \"d\" not found");
        assert_eq!(
            apps.to_status()["details"],
            json!({"name": "d", "group": "apps", "kind": "deployments"})
        );
    }

    #[test]
    fn conflict_and_already_exists() {
        let err = ApiError::conflict("", "configmaps", "x", OPTIMISTIC_LOCK_ERROR_MSG);
        assert_eq!(err.code, 409);
        assert_eq!(err.reason, StatusReason::Conflict);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let exists = ApiError::already_exists("", "namespaces", "default");
        assert_eq!(exists.message, "namespaces \"default\" already exists");
        assert_eq!(exists.reason.as_str(), "AlreadyExists");
    }

    #[test]
    fn invalid_single_and_multiple() {
        let one = ApiError::invalid(
            "",
            "ConfigMap",
            "x",
            vec![FieldError::invalid("data[a b]", json!("a b"), "bad key")],
        );
        assert_eq!(one.code, 422);
        assert_eq!(
            one.message,
            "ConfigMap \"x\" is invalid: data[a b]: Invalid value: \"a b\": bad key"
        );
        let status = one.to_status();
        assert_eq!(
            status["details"],
            json!({"name": "x", "kind": "ConfigMap", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value: \"a b\": bad key", "field": "data[a b]"}
            ]})
        );
        let two = ApiError::invalid(
            "apps",
            "Deployment",
            "d",
            vec![
                FieldError::required("metadata.name", "name or generateName is required"),
                FieldError::forbidden("spec.x", "not allowed"),
                FieldError::forbidden("spec.x", "not allowed"),
            ],
        );
        assert_eq!(
            two.message,
            "Deployment.apps \"d\" is invalid: [metadata.name: Required value: name or generateName is required, spec.x: Forbidden: not allowed]"
        );
        assert_eq!(two.details.map(|d| d.causes.len()), Some(3));
        assert_eq!(
            ApiError::invalid("", "Pod", "p", vec![]).message,
            "Pod \"p\" is invalid"
        );
    }

    #[test]
    fn forbidden_variants() {
        assert_eq!(
            ApiError::forbidden("", "configmaps", "x", "no").message,
            "configmaps \"x\" is forbidden: no"
        );
        assert_eq!(
            ApiError::forbidden("", "configmaps", "", "no").message,
            "configmaps is forbidden: no"
        );
        assert_eq!(
            ApiError::forbidden("", "", "", "no").message,
            "forbidden: no"
        );
        assert_eq!(ApiError::forbidden("", "", "", "no").code, 403);
    }

    #[test]
    fn simple_constructors() {
        let cases = [
            (ApiError::bad_request("b"), 400, "BadRequest", "b"),
            (
                ApiError::unauthorized(""),
                401,
                "Unauthorized",
                "not authorized",
            ),
            (
                ApiError::method_not_supported("", "configmaps", "watch"),
                405,
                "MethodNotAllowed",
                "watch is not supported on resources of kind \"configmaps\"",
            ),
            (ApiError::not_acceptable("n"), 406, "NotAcceptable", "n"),
            (
                ApiError::not_acceptable_media_types(&["application/json", "application/yaml"]),
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, application/yaml",
            ),
            (
                ApiError::unsupported_media_type("text/plain"),
                415,
                "UnsupportedMediaType",
                "unsupported media type \"text/plain\"",
            ),
            (
                ApiError::unsupported_media_type_accepting(&["application/json"]),
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json",
            ),
            (
                ApiError::request_entity_too_large("big"),
                413,
                "RequestEntityTooLarge",
                "Request entity too large: big",
            ),
            (
                ApiError::resource_expired("too old resource version: 5 (10)"),
                410,
                "Expired",
                "too old resource version: 5 (10)",
            ),
            (ApiError::gone("g"), 410, "Gone", "g"),
            (
                ApiError::internal_error("boom"),
                500,
                "InternalError",
                "Internal error occurred: boom",
            ),
            (
                ApiError::service_unavailable("s"),
                503,
                "ServiceUnavailable",
                "s",
            ),
            (
                ApiError::timeout("slow", 1),
                504,
                "Timeout",
                "Timeout: slow",
            ),
            (
                ApiError::too_many_requests("t", 2),
                429,
                "TooManyRequests",
                "t",
            ),
            (
                ApiError::server_timeout("", "pods", "list", 2),
                500,
                "ServerTimeout",
                "The list operation against pods could not be completed at this time, please try again.",
            ),
        ];
        for (err, code, reason, message) in cases {
            assert_eq!(
                (err.code, err.reason.as_str(), err.message.as_str()),
                (code, reason, message)
            );
            assert_eq!(err.to_status()["code"], json!(code));
        }
    }

    #[test]
    fn retry_after_and_causes_in_status() {
        let status = ApiError::timeout("slow", 3).to_status();
        assert_eq!(status["details"], json!({"retryAfterSeconds": 3}));
        let status = ApiError::bad_request("x").with_retry_after(0).to_status();
        assert_eq!(status["details"], json!({}));
        let status = ApiError::internal_error("boom").to_status();
        assert_eq!(status["details"], json!({"causes": [{"message": "boom"}]}));
        let status = ApiError::too_large_resource_version(9, 5, 1).to_status();
        assert_eq!(
            status["message"],
            json!("Timeout: Too large resource version: 9, current: 5")
        );
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            json!("ResourceVersionTooLarge")
        );
        assert!(
            ApiError::bad_request("x")
                .to_status()
                .get("details")
                .is_none()
        );
    }

    #[test]
    fn success_status() {
        assert_eq!(status_success()["status"], json!("Success"));
        assert!(status_success().get("code").is_none());
    }
}
