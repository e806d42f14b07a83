//! admissionregistration.k8s.io ValidatingAdmissionPolicy and its Binding (v1), and
//! MutatingAdmissionPolicy and its Binding (v1beta1, the version Kubernetes 1.35 serves): objects
//! of their logical cluster, evaluated by kcp-admission on writes in that cluster only.

use serde_json::{Value, json};

use super::{ResourceType, Strategy};

const GROUP: &str = "admissionregistration.k8s.io";

pub fn resources() -> Vec<ResourceType> {
    let mut validating = super::resource(
        GROUP,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
        &[],
        Box::new(Policies),
    );
    validating.subresources = vec!["status".into()];
    let validating_binding = super::resource(
        GROUP,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
        &[],
        Box::new(Unchecked),
    );
    let mut mutating = super::resource(
        GROUP,
        "MutatingAdmissionPolicy",
        "mutatingadmissionpolicies",
        false,
        &[],
        Box::new(Unchecked),
    );
    mutating.version = "v1beta1".into();
    let mut mutating_binding = super::resource(
        GROUP,
        "MutatingAdmissionPolicyBinding",
        "mutatingadmissionpolicybindings",
        false,
        &[],
        Box::new(Unchecked),
    );
    mutating_binding.version = "v1beta1".into();
    vec![validating, validating_binding, mutating, mutating_binding]
}

/// ValidatingAdmissionPolicy: its status (type checking) is written through `status` only.
struct Policies;

impl Strategy for Policies {
    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        if subresource.is_none() {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
        }
    }
}

/// Bindings and MutatingAdmissionPolicies (which have no status).
struct Unchecked;

impl Strategy for Unchecked {}
