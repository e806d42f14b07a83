//! Field-level validation errors (`field.Error` in Kubernetes).
//!
//! A 422 response lists every offending field with a typed cause; clients show the text and
//! some tools key on the cause reason. The kinds, their cause reasons and the `Error()`
//! rendering (`metadata.name: Invalid value: "Foo": ...`) follow Kubernetes exactly.

use std::fmt;

use serde_json::Value;

use crate::gofmt;

/// The kind of a field error (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    Duplicate,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    TypeInvalid,
    NotFound,
    InternalError,
}

impl FieldErrorKind {
    /// The `reason` of the `StatusCause` this kind becomes.
    pub fn cause_reason(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::InternalError => "InternalError",
        }
    }

    /// The human label that starts the error body.
    pub fn label(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::InternalError => "Internal error",
        }
    }

    /// Kinds whose body never shows the bad value.
    fn hides_value(self) -> bool {
        matches!(
            self,
            FieldErrorKind::Required
                | FieldErrorKind::Forbidden
                | FieldErrorKind::TooLong
                | FieldErrorKind::InternalError
        )
    }
}

/// One invalid field: where (`metadata.labels`, `data[a b]`), what kind of problem, the bad
/// value when it is worth showing, and a detail sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    pub field: String,
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    fn new(kind: FieldErrorKind, field: &str, value: Option<Value>, detail: &str) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.to_string(),
        }
    }

    /// A required field is missing.
    pub fn required(field: &str, detail: &str) -> Self {
        FieldError::new(FieldErrorKind::Required, field, None, detail)
    }

    /// The value is malformed.
    pub fn invalid(field: &str, value: Value, detail: &str) -> Self {
        FieldError::new(FieldErrorKind::Invalid, field, Some(value), detail)
    }

    /// The field may not be set (or changed) here.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        FieldError::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// The value repeats one that must be unique.
    pub fn duplicate(field: &str, value: Value) -> Self {
        FieldError::new(FieldErrorKind::Duplicate, field, Some(value), "")
    }

    /// A referenced value does not exist.
    pub fn not_found(field: &str, value: Value) -> Self {
        FieldError::new(FieldErrorKind::NotFound, field, Some(value), "")
    }

    /// The value is not one of `valid` (listed quoted, as Kubernetes does).
    pub fn not_supported(field: &str, value: Value, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| gofmt::quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        FieldError::new(FieldErrorKind::NotSupported, field, Some(value), &detail)
    }

    /// The value exceeds `max` bytes.
    pub fn too_long(field: &str, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        FieldError::new(
            FieldErrorKind::TooLong,
            field,
            None,
            &format!("may not be more than {max} {unit}"),
        )
    }

    /// The list has `actual` items where at most `max` are allowed.
    pub fn too_many(field: &str, actual: usize, max: usize) -> Self {
        FieldError::new(
            FieldErrorKind::TooMany,
            field,
            Some(Value::from(actual)),
            &format!("must have at most {max} items"),
        )
    }

    /// The value has the wrong JSON type.
    pub fn type_invalid(field: &str, value: Value, detail: &str) -> Self {
        FieldError::new(FieldErrorKind::TypeInvalid, field, Some(value), detail)
    }

    /// The server failed while validating the field.
    pub fn internal(field: &str, detail: &str) -> Self {
        FieldError::new(FieldErrorKind::InternalError, field, None, detail)
    }

    /// The message without the field path (`ErrorBody()`), used as a Status cause message.
    pub fn body(&self) -> String {
        let mut body = self.kind.label().to_string();
        if let Some(value) = self.value.as_ref().filter(|_| !self.kind.hides_value()) {
            body.push_str(": ");
            body.push_str(&gofmt::bad_value(value));
        }
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

/// Kubernetes' aggregate error text for a list of field errors: `None` for no errors, the
/// message itself for one, `[a, b]` for several, each distinct message once.
pub fn aggregate(errors: &[FieldError]) -> Option<String> {
    let mut distinct: Vec<String> = Vec::new();
    for message in errors.iter().map(ToString::to_string) {
        if !distinct.contains(&message) {
            distinct.push(message);
        }
    }
    match distinct.len() {
        0 => None,
        1 => distinct.pop(),
        _ => Some(format!("[{}]", distinct.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_kubernetes() {
        assert_eq!(
            FieldError::invalid(
                "metadata.name",
                json!("Foo"),
                "a lowercase RFC 1123 subdomain"
            )
            .to_string(),
            "metadata.name: Invalid value: \"Foo\": a lowercase RFC 1123 subdomain"
        );
        assert_eq!(
            FieldError::required("metadata.name", "name or generateName is required").to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(
            FieldError::required("metadata.namespace", "").to_string(),
            "metadata.namespace: Required value"
        );
        assert_eq!(
            FieldError::forbidden("metadata.namespace", "not allowed on this type").to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        assert_eq!(
            FieldError::too_long("metadata.annotations", 262144).to_string(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        assert_eq!(
            FieldError::not_supported("spec.op", json!("X"), &["In", "NotIn"]).to_string(),
            "spec.op: Unsupported value: \"X\": supported values: \"In\", \"NotIn\""
        );
        assert_eq!(
            FieldError::duplicate("items[1]", json!("a")).to_string(),
            "items[1]: Duplicate value: \"a\""
        );
        assert_eq!(
            FieldError::not_found("ref", json!("x")).to_string(),
            "ref: Not found: \"x\""
        );
        assert_eq!(
            FieldError::too_many("items", 5, 3).to_string(),
            "items: Too many: 5: must have at most 3 items"
        );
        assert_eq!(
            FieldError::type_invalid("spec.replicas", json!("x"), "must be an integer").to_string(),
            "spec.replicas: Invalid value: \"x\": must be an integer"
        );
        assert_eq!(
            FieldError::internal("spec", "boom").to_string(),
            "spec: Internal error: boom"
        );
        assert_eq!(
            FieldError::invalid(
                "metadata.generation",
                json!(-1),
                "must be greater than or equal to 0"
            )
            .to_string(),
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn cause_reasons() {
        assert_eq!(
            FieldErrorKind::Required.cause_reason(),
            "FieldValueRequired"
        );
        assert_eq!(
            FieldErrorKind::TypeInvalid.cause_reason(),
            "FieldValueTypeInvalid"
        );
        assert_eq!(
            FieldErrorKind::InternalError.cause_reason(),
            "InternalError"
        );
    }
}
