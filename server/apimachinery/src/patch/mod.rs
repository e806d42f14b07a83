//! The three patch formats of a Kubernetes PATCH request.
//!
//! `application/json-patch+json` (RFC 6902), `application/merge-patch+json` (RFC 7386) and
//! `application/strategic-merge-patch+json` all turn the stored object and a request body into a
//! new object, with no I/O. Errors carry the HTTP semantics Kubernetes gives them (a malformed
//! patch is a 400, a JSON patch that cannot apply is a 422, too many operations a 413), so the
//! server maps them with [`PatchError::to_api_error`].

mod schema;
mod strategic;

pub use schema::{FieldPatch, PatchSchema};
pub use strategic::apply_strategic_merge_patch;

use serde_json::Value;
use thiserror::Error;

use crate::status::{ApiError, StatusReason};

/// Kubernetes' cap on the number of operations in one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The message Kubernetes returns when a JSON patch (or a few strategic merge patch shapes)
/// cannot be applied to the object.
pub const UNPROCESSABLE_PATCH_MSG: &str =
    "the server rejected our request due to an error in our request";

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatchError {
    /// The patch is malformed (bad JSON, bad directive format): 400 with this message.
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well-formed but cannot apply to this object: 422. Kubernetes does not
    /// show the reason to the client; it is kept here for logs.
    #[error("{0}")]
    Unprocessable(String),
    /// A JSON patch with more than [`MAX_JSON_PATCH_OPERATIONS`] operations: 413.
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations { max: usize, got: usize },
}

impl PatchError {
    /// The Status error Kubernetes answers with.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            PatchError::BadRequest(message) => ApiError::bad_request(message),
            PatchError::Unprocessable(_) => ApiError {
                code: 422,
                reason: StatusReason::Invalid,
                message: UNPROCESSABLE_PATCH_MSG.to_string(),
                details: Some(Default::default()),
            },
            PatchError::TooManyOperations { .. } => {
                ApiError::request_entity_too_large(&self.to_string())
            }
        }
    }
}

impl From<PatchError> for ApiError {
    fn from(err: PatchError) -> Self {
        err.to_api_error()
    }
}

/// Applies an RFC 6902 JSON patch (including `test`); the target is left untouched on failure.
pub fn apply_json_patch(target: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let operations: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|e| PatchError::BadRequest(e.to_string()))?;
    if operations.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_JSON_PATCH_OPERATIONS,
            got: operations.0.len(),
        });
    }
    let mut out = target.clone();
    json_patch::patch(&mut out, &operations)
        .map_err(|e| PatchError::Unprocessable(e.to_string()))?;
    Ok(out)
}

/// Applies an RFC 7386 JSON merge patch: maps merge recursively, `null` deletes, everything
/// else (lists included) replaces.
pub fn apply_merge_patch(target: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch)
        .map_err(|_| PatchError::BadRequest("Invalid JSON Patch".into()))?;
    if patch.is_null() {
        return Err(PatchError::BadRequest("Invalid JSON Patch".into()));
    }
    let mut out = target.clone();
    json_patch::merge(&mut out, &patch);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm() -> Value {
        json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v", "list": "x"}})
    }

    #[test]
    fn json_patch_ops() {
        let patch = br#"[
            {"op": "test", "path": "/data/k", "value": "v"},
            {"op": "add", "path": "/data/n", "value": "new"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "remove", "path": "/data/list"},
            {"op": "copy", "from": "/data/n", "path": "/data/c"},
            {"op": "move", "from": "/data/c", "path": "/data/m"}
        ]"#;
        assert_eq!(
            apply_json_patch(&cm(), patch).unwrap(),
            json!({"metadata": {"name": "x", "labels": {"a": "2"}}, "data": {"k": "v", "n": "new", "m": "new"}})
        );
    }

    #[test]
    fn json_patch_failures() {
        let failed = apply_json_patch(
            &cm(),
            br#"[{"op": "test", "path": "/data/k", "value": "other"}]"#,
        )
        .unwrap_err();
        assert!(matches!(failed, PatchError::Unprocessable(_)));
        let status = failed.to_api_error();
        assert_eq!(
            (status.code, status.message.as_str()),
            (422, UNPROCESSABLE_PATCH_MSG)
        );
        assert_eq!(status.to_status()["reason"], json!("Invalid"));

        let missing =
            apply_json_patch(&cm(), br#"[{"op": "remove", "path": "/nope"}]"#).unwrap_err();
        assert!(matches!(missing, PatchError::Unprocessable(_)));

        let bad = apply_json_patch(&cm(), br#"{"op": "add"}"#).unwrap_err();
        assert_eq!(bad.to_api_error().code, 400);
        let bad_op = apply_json_patch(&cm(), br#"[{"op": "frob", "path": "/a"}]"#).unwrap_err();
        assert_eq!(bad_op.to_api_error().code, 400);

        let many: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/metadata/name", "value": "x"}))
            .collect();
        let too_many = apply_json_patch(&cm(), &serde_json::to_vec(&many).unwrap()).unwrap_err();
        let status = too_many.to_api_error();
        assert_eq!(status.code, 413);
        assert_eq!(
            status.message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }

    #[test]
    fn merge_patch() {
        let patched = apply_merge_patch(
            &cm(),
            br#"{"metadata": {"labels": {"a": null, "b": "2"}}, "data": {"k": "w"}}"#,
        );
        assert_eq!(
            patched.unwrap(),
            json!({"metadata": {"name": "x", "labels": {"b": "2"}}, "data": {"k": "w", "list": "x"}})
        );
        let lists = apply_merge_patch(&json!({"a": [1, 2]}), br#"{"a": [3]}"#).unwrap();
        assert_eq!(lists, json!({"a": [3]}));
        assert_eq!(
            apply_merge_patch(&cm(), b"{").unwrap_err().to_string(),
            "Invalid JSON Patch"
        );
        assert_eq!(
            apply_merge_patch(&cm(), b"null")
                .unwrap_err()
                .to_api_error()
                .code,
            400
        );
    }

    #[test]
    fn api_error_conversion() {
        let err: ApiError = PatchError::BadRequest("nope".into()).into();
        assert_eq!((err.code, err.message.as_str()), (400, "nope"));
    }
}
