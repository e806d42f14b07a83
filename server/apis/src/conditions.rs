//! Conditions of the apis.kcp.io types: upstream's condition types and reasons, and how one is
//! written (kcp's conditions carry a severity when not True).

use serde_json::{Value, json};

pub const IDENTITY_VALID: &str = "IdentityValid";
pub const IDENTITY_VERIFICATION_FAILED: &str = "IdentityVerificationFailed";
pub const IDENTITY_GENERATION_FAILED: &str = "IdentityGenerationFailed";

pub const READY: &str = "Ready";
pub const API_EXPORT_VALID: &str = "APIExportValid";
pub const INITIAL_BINDING_COMPLETED: &str = "InitialBindingCompleted";
pub const BINDING_UP_TO_DATE: &str = "BindingUpToDate";
pub const API_EXPORT_NOT_FOUND: &str = "APIExportNotFound";
pub const API_EXPORT_INVALID_REFERENCE: &str = "APIExportInvalidReference";
pub const MISSING_IDENTITY_HASH: &str = "MissingIdentityHash";
pub const API_RESOURCE_SCHEMA_INVALID: &str = "APIResourceSchemaInvalid";
pub const INTERNAL_ERROR: &str = "InternalError";
pub const NAMING_CONFLICTS: &str = "NamingConflicts";
pub const WAITING_FOR_ESTABLISHED: &str = "WaitingForEstablished";
pub const PERMISSION_CLAIMS_VALID: &str = "PermissionClaimsValid";
pub const INVALID_PERMISSION_CLAIMS: &str = "InvalidPermissionClaims";
pub const PERMISSION_CLAIMS_MISMATCH: &str = "PermissionClaimsMismatch";

/// How bad a False condition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// A condition of type `kind`: True, or False with a reason, severity and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: &'static str,
    pub failure: Option<(String, Severity, String)>,
}

impl Condition {
    pub fn holds(kind: &'static str) -> Condition {
        Condition {
            kind,
            failure: None,
        }
    }

    pub fn fails(
        kind: &'static str,
        reason: &str,
        severity: Severity,
        message: String,
    ) -> Condition {
        Condition {
            kind,
            failure: Some((reason.to_string(), severity, message)),
        }
    }

    pub fn is_true(&self) -> bool {
        self.failure.is_none()
    }

    /// Sets this condition on `object` (an unchanged condition keeps its `lastTransitionTime`);
    /// returns whether anything but the time changed.
    pub fn set_on(&self, object: &mut Value, now: &str) -> bool {
        let mut condition = json!({"type": self.kind, "lastTransitionTime": now});
        match &self.failure {
            None => condition["status"] = json!("True"),
            Some((reason, severity, message)) => {
                condition["status"] = json!("False");
                condition["reason"] = json!(reason);
                condition["severity"] = json!(match severity {
                    Severity::Error => "Error",
                    Severity::Warning => "Warning",
                    Severity::Info => "Info",
                });
                condition["message"] = json!(message);
            }
        }
        kcp_tenancy::shard::set_condition(object, condition)
    }
}

/// Whether `object` has condition `kind` with status True.
pub fn is_true(object: &Value, kind: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|all| {
            all.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_condition_keeps_its_time() {
        let mut object = json!({});
        assert!(Condition::holds(READY).set_on(&mut object, "t1"));
        assert!(!Condition::holds(READY).set_on(&mut object, "t2"));
        assert_eq!(
            object["status"]["conditions"][0]["lastTransitionTime"],
            "t1"
        );
        assert!(is_true(&object, READY));
        let failed = Condition::fails(READY, "R", Severity::Error, "m".into());
        assert!(failed.set_on(&mut object, "t3"));
        assert!(!is_true(&object, READY));
        assert_eq!(object["status"]["conditions"][0]["severity"], "Error");
    }
}
