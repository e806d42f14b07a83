//! The `system:apibindings` initializer's rules (upstream's APIBinder,
//! `pkg/reconciler/tenancy/initialization`): a workspace whose type (or any type it extends) lists
//! `spec.defaultAPIBindings` gets one APIBinding per export while it initializes, named
//! `<export>-<hash>`, with every permission claim of the export accepted (its
//! `defaultSelector`, else all objects); the initializer is removed once each of those bindings
//! has completed its initial binding (and applied its accepted claims).
//!
//! kcp's own exports (`root:tenancy.kcp.io`, `root:topology.kcp.io`, ...) are served in every
//! logical cluster here without a binding, so no binding is made for them: a workspace whose
//! types bind only those is initialized at once, with nothing written.

use std::collections::BTreeMap;

use kcp_tenancy::names::api_binding_name;
use kcp_tenancy::types::DefaultApiBinding;
use serde_json::{Value, json};

use crate::binding::ExportReference;
use crate::conditions::{self, Condition, Severity};

/// The LogicalCluster condition this initializer reports on.
pub const API_BINDINGS_INITIALIZED: &str = "APIBindingsInitialized";
/// A type of the workspace could not be resolved.
pub const WORKSPACE_TYPES_INVALID: &str = "WorkspaceTypesInvalid";
/// An export is missing (or a binding could not be made).
pub const API_BINDING_ERRORS: &str = "APIBindingErrors";
/// Bindings exist but are not bound yet.
pub const WAITING_ON_API_BINDINGS: &str = "WaitingOnAPIBindings";
/// The condition of a binding whose accepted claims are in effect.
pub const PERMISSION_CLAIMS_APPLIED: &str = "PermissionClaimsApplied";

/// The default bindings this server has to make: those not naming one of kcp's own exports.
pub fn to_make(defaults: Vec<DefaultApiBinding>) -> Vec<DefaultApiBinding> {
    defaults
        .into_iter()
        .filter(|d| !reference(d).is_built_in())
        .collect()
}

fn reference(default: &DefaultApiBinding) -> ExportReference {
    ExportReference {
        path: default.path.clone(),
        name: default.export.clone(),
    }
}

/// The APIBinding made in `cluster` for `default`, given its export.
pub fn binding_for(cluster: &str, default: &DefaultApiBinding, export: &Value) -> Value {
    let claims: Vec<Value> = export
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .map(|claims| {
            claims
                .iter()
                .map(|claim| {
                    let mut accepted = claim.clone();
                    let selector = accepted
                        .as_object_mut()
                        .and_then(|c| c.remove("defaultSelector"))
                        .unwrap_or_else(|| json!({"matchAll": true}));
                    accepted["selector"] = selector;
                    accepted["state"] = json!("Accepted");
                    accepted
                })
                .collect()
        })
        .unwrap_or_default();
    let mut spec = json!({"reference": {"export": {"path": default.path, "name": default.export}}});
    if !claims.is_empty() {
        spec["permissionClaims"] = Value::Array(claims);
    }
    json!({
        "apiVersion": format!("{}/{}", crate::GROUP, crate::STORAGE_VERSION),
        "kind": "APIBinding",
        "metadata": {"name": api_binding_name(cluster, &default.path, &default.export)},
        "spec": spec,
    })
}

/// Where a workspace's default bindings stand.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// An export is missing: nothing can be completed yet (upstream retries: it may arrive).
    ExportsMissing(Condition),
    /// Every binding exists; these are not bound yet.
    Waiting(Condition),
    /// Every binding is bound: the initializer goes.
    Done,
}

/// Decides the progress of `defaults` (those [`to_make`]) given the exports found by
/// reference (`None`: not found) and the cluster's bindings by export reference.
pub fn progress(
    defaults: &[DefaultApiBinding],
    exports: &BTreeMap<DefaultApiBinding, Option<Value>>,
    bindings: &BTreeMap<(String, String), Value>,
) -> Progress {
    if defaults
        .iter()
        .any(|d| exports.get(d).is_none_or(Option::is_none))
    {
        return Progress::ExportsMissing(Condition::fails(
            API_BINDINGS_INITIALIZED,
            API_BINDING_ERRORS,
            Severity::Error,
            "encountered errors: unable to complete initialization: unable to find at least 1 APIExport".into(),
        ));
    }
    let mut incomplete: Vec<String> = Vec::new();
    for default in defaults {
        let Some(binding) = bindings.get(&(default.path.clone(), default.export.clone())) else {
            incomplete.push(format!("for APIExport {}|{}", default.path, default.export));
            continue;
        };
        let name = binding
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !conditions::is_true(binding, conditions::INITIAL_BINDING_COMPLETED) {
            incomplete.push(name.to_string());
        } else if accepts_claims(binding)
            && !conditions::is_true(binding, PERMISSION_CLAIMS_APPLIED)
        {
            incomplete.push(format!(
                "{name} waiting for permission claims to be applied"
            ));
        }
    }
    if incomplete.is_empty() {
        return Progress::Done;
    }
    incomplete.sort();
    Progress::Waiting(Condition::fails(
        API_BINDINGS_INITIALIZED,
        WAITING_ON_API_BINDINGS,
        Severity::Info,
        format!(
            "APIBinding(s) not yet fully bound: {}",
            incomplete.join(", ")
        ),
    ))
}

/// The condition of a workspace whose types cannot be resolved.
pub fn types_invalid(error: &str) -> Condition {
    Condition::fails(
        API_BINDINGS_INITIALIZED,
        WORKSPACE_TYPES_INVALID,
        Severity::Error,
        format!("error resolving transitive set of workspace types: {error}"),
    )
}

/// Whether a binding accepts any permission claim.
fn accepts_claims(binding: &Value) -> bool {
    binding
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .is_some_and(|claims| claims.iter().any(|c| c["state"] == "Accepted"))
}

/// A binding's export reference `(path, name)`, to match it with a default binding.
pub fn export_of(binding: &Value) -> Option<(String, String)> {
    let export = binding.pointer("/spec/reference/export")?;
    Some((
        export.get("path")?.as_str()?.to_string(),
        export.get("name")?.as_str()?.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default(path: &str, export: &str) -> DefaultApiBinding {
        DefaultApiBinding {
            path: path.into(),
            export: export.into(),
        }
    }

    fn bound(binding: &mut Value, kinds: &[&str]) {
        binding["status"]["conditions"] = kinds
            .iter()
            .map(|k| json!({"type": k, "status": "True"}))
            .collect();
    }

    #[test]
    fn kcps_own_exports_need_no_binding() {
        let made = to_make(vec![
            default("root", "tenancy.kcp.io"),
            default("root", "topology.kcp.io"),
            default("root:provider", "widgets"),
        ]);
        assert_eq!(made, [default("root:provider", "widgets")]);
    }

    #[test]
    fn bindings_accept_every_claim_with_its_default_selector() {
        let export = json!({"spec": {"permissionClaims": [
            {"group": "", "resource": "configmaps", "verbs": ["get"], "defaultSelector": {"matchLabels": {"a": "b"}}},
            {"group": "", "resource": "secrets", "verbs": ["*"]},
        ]}});
        let binding = binding_for("c1", &default("root:provider", "widgets"), &export);
        assert_eq!(binding["apiVersion"], "apis.kcp.io/v1alpha2");
        assert_eq!(
            binding["metadata"]["name"],
            api_binding_name("c1", "root:provider", "widgets")
        );
        assert_eq!(
            binding["spec"]["reference"]["export"],
            json!({"path": "root:provider", "name": "widgets"})
        );
        let claims = &binding["spec"]["permissionClaims"];
        assert_eq!(
            claims[0],
            json!({"group": "", "resource": "configmaps", "verbs": ["get"], "selector": {"matchLabels": {"a": "b"}}, "state": "Accepted"})
        );
        assert_eq!(claims[1]["selector"], json!({"matchAll": true}));
        let plain = binding_for("c1", &default("root:p", "w"), &json!({"spec": {}}));
        assert!(plain["spec"].get("permissionClaims").is_none());
    }

    #[test]
    fn progress_waits_for_exports_then_bindings_then_claims() {
        let d = default("root:provider", "widgets");
        let defaults = [d.clone()];
        let mut exports = BTreeMap::from([(d.clone(), None)]);
        let mut bindings = BTreeMap::new();
        let Progress::ExportsMissing(missing) = progress(&defaults, &exports, &bindings) else {
            panic!("a missing export is reported");
        };
        assert_eq!(missing.failure.unwrap().0, API_BINDING_ERRORS);

        exports.insert(d.clone(), Some(json!({})));
        let Progress::Waiting(waiting) = progress(&defaults, &exports, &bindings) else {
            panic!("an absent binding is waited for");
        };
        assert_eq!(
            waiting.failure.unwrap().2,
            "APIBinding(s) not yet fully bound: for APIExport root:provider|widgets"
        );

        let mut binding = json!({"metadata": {"name": "widgets-abcde"}, "spec": {"reference": {"export": {"path": "root:provider", "name": "widgets"}}}});
        let key = export_of(&binding).unwrap();
        bindings.insert(key.clone(), binding.clone());
        let Progress::Waiting(waiting) = progress(&defaults, &exports, &bindings) else {
            panic!("an unbound binding is waited for");
        };
        assert!(waiting.failure.unwrap().2.ends_with("widgets-abcde"));

        bound(&mut binding, &[conditions::INITIAL_BINDING_COMPLETED]);
        bindings.insert(key.clone(), binding.clone());
        assert_eq!(progress(&defaults, &exports, &bindings), Progress::Done);

        binding["spec"]["permissionClaims"] =
            json!([{"resource": "configmaps", "state": "Accepted"}]);
        bindings.insert(key.clone(), binding.clone());
        let Progress::Waiting(waiting) = progress(&defaults, &exports, &bindings) else {
            panic!("accepted claims are waited for");
        };
        assert!(
            waiting
                .failure
                .unwrap()
                .2
                .contains("waiting for permission claims")
        );
        bound(
            &mut binding,
            &[
                conditions::INITIAL_BINDING_COMPLETED,
                PERMISSION_CLAIMS_APPLIED,
            ],
        );
        bindings.insert(key, binding);
        assert_eq!(progress(&defaults, &exports, &bindings), Progress::Done);
    }
}
