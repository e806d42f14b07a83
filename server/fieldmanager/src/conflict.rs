//! Apply conflicts and the 409 Kubernetes answers them with.
//!
//! kubectl prints the message verbatim and users act on it (`--force-conflicts`, dropping a
//! field), so the text follows Kubernetes exactly: one conflict on one line, several grouped
//! by manager (sorted by manager identifier) with one `- <path>` line each, and one
//! `FieldManagerConflict` cause per field.

use std::fmt;

use kcp_apimachinery::ApiError;
use kcp_apimachinery::status::{StatusCause, StatusDetails, StatusReason};

use crate::fieldpath::FieldPath;
use crate::managed::ManagedEntry;

/// A field the applier would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The owning entry (its fields are not carried).
    pub owner: ManagedEntry,
    pub path: FieldPath,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conflict with {}: {}", self.owner.describe(), self.path)
    }
}

/// All conflicts of one apply, sorted by owner identifier, then path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Conflicts(pub Vec<Conflict>);

impl fmt::Display for Conflicts {
    /// `Apply failed with 1 conflict: conflict with "m" using v1: .data.key`, or the grouped
    /// form for several.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.0.as_slice() {
            return write!(f, "Apply failed with 1 conflict: {only}");
        }
        let mut lines = Vec::new();
        let mut owner: Option<String> = None;
        for conflict in &self.0 {
            let id = conflict.owner.identifier();
            if owner.as_ref() != Some(&id) {
                lines.push(format!("conflicts with {}:", conflict.owner.describe()));
                owner = Some(id);
            }
            lines.push(format!("- {}", conflict.path));
        }
        write!(
            f,
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }
}

impl Conflicts {
    /// The 409 Conflict Status: the message above, one cause per conflicting field.
    pub fn to_api_error(&self) -> ApiError {
        let causes = self
            .0
            .iter()
            .map(|c| StatusCause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {}", c.owner.describe()),
                field: c.path.to_string(),
            })
            .collect();
        ApiError {
            code: 409,
            reason: StatusReason::Conflict,
            message: self.to_string(),
            details: Some(Box::new(StatusDetails {
                causes,
                ..StatusDetails::default()
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fieldpath::PathElement;
    use crate::managed::Operation;

    fn conflict(manager: &str, operation: Operation, path: &[&str]) -> Conflict {
        Conflict {
            owner: ManagedEntry::new(manager, operation, "v1", ""),
            path: FieldPath(path.iter().map(|n| PathElement::field(n)).collect()),
        }
    }

    #[test]
    fn messages_like_kubernetes() {
        let one = Conflicts(vec![conflict(
            "kubectl-client-side-apply",
            Operation::Update,
            &["data", "key"],
        )]);
        assert_eq!(
            one.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.key"
        );
        let error = one.to_api_error();
        assert_eq!(error.code, 409);
        assert_eq!(error.reason, StatusReason::Conflict);
        let cause = &error.details.as_ref().unwrap().causes[0];
        assert_eq!(cause.reason, "FieldManagerConflict");
        assert_eq!(
            cause.message,
            "conflict with \"kubectl-client-side-apply\" using v1"
        );
        assert_eq!(cause.field, ".data.key");

        let several = Conflicts(vec![
            conflict("a", Operation::Apply, &["spec", "x"]),
            conflict("a", Operation::Apply, &["spec", "y"]),
            conflict("b", Operation::Update, &["data"]),
        ]);
        assert_eq!(
            several.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.x\n- .spec.y\n\
             conflicts with \"b\" using v1:\n- .data"
        );
    }
}
