//! What admission of one request returns besides its verdict: warnings for the client (the
//! `Warning` header, from webhooks and `Warn` policy actions) and audit annotations.

use std::collections::BTreeMap;

/// Warnings and audit annotations gathered while admitting one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
}

impl Outcome {
    /// Adds a warning once (kube deduplicates warnings of one request).
    pub fn warn(&mut self, warning: impl Into<String>) {
        let warning = warning.into();
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }
}
