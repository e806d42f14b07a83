//! The admission rules of the apis.kcp.io types, with upstream's messages (`pkg/admission/
//! apiresourceschema`, `apiexport`, `apibinding`, `reservedcrdgroups`, `crdnooverlappinggvr`).
//!
//! Each rule returns the messages of what it refuses; the API server turns them into a 403
//! `Forbidden` Status, as upstream's `admission.NewForbidden` does.

use kcp_apiextensions::CrdInfo;
use serde_json::Value;

use crate::binding::ExportReference;
use crate::schema;

/// A new APIResourceSchema: its name fits its group and plural, its group is not `core`, and it
/// is a valid CRD (names, versions, structural schemas, CEL rules).
pub fn schema_errors(name: &str, schema: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(problem) = schema::name_error(name, schema) {
        errors.push(format!("metadata.name: Invalid value: {name:?}: {problem}"));
    }
    let (group, _) = schema::group_resource(schema);
    if group == "core" {
        errors.push(
            "spec.group: Invalid value: \"core\": must be empty string for the core group"
                .to_string(),
        );
    }
    if let Err(error) = CrdInfo::from_crd(&schema::to_crd(schema)) {
        errors.push(error.to_string());
    }
    errors
}

/// An updated APIResourceSchema: valid, and its spec unchanged.
pub fn schema_update_errors(name: &str, new: &Value, old: &Value) -> Vec<String> {
    let mut errors = schema_errors(name, new);
    if new.get("spec") != old.get("spec") {
        errors.push("spec: Invalid value: \"object\": is immutable".to_string());
    }
    errors
}

/// An updated APIExport: `status.identityHash` never changes once set.
pub fn export_update_errors(new: &Value, old: &Value) -> Vec<String> {
    let hash = |export: &Value| {
        export
            .pointer("/status/identityHash")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (new_hash, old_hash) = (hash(new), hash(old));
    if !old_hash.is_empty() && new_hash != old_hash {
        return vec![format!(
            "status.identityHash: Invalid value: {new_hash:?}: is immutable"
        )];
    }
    Vec::new()
}

/// A CRD of a reserved group (`*.apis.kcp.io`, served by kcp itself).
pub fn reserved_crd_group(group: &str) -> Option<String> {
    group
        .ends_with("apis.kcp.io")
        .then(|| format!("{group} is a reserved group"))
}

/// A CRD created over a group and resource an APIBinding serves.
pub fn crd_overlaps_binding(binding_name: &str) -> String {
    format!("cannot create because resource is bound by APIBinding {binding_name:?}")
}

/// Why creating (or changing the reference of) a binding is refused when the user may not `bind`
/// the export, or the export cannot be found (one message for both, so a workspace's existence
/// does not leak).
pub fn no_permission_to_bind(update: bool, reference: &ExportReference) -> String {
    let action = if update { "update" } else { "create" };
    format!(
        "unable to {action} APIBinding: no permission to bind to export {}",
        reference.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::widgets;
    use serde_json::json;

    #[test]
    fn schemas_are_checked_as_crds_and_never_change() {
        let schema = widgets("today.widgets.example.com");
        assert!(schema_errors("today.widgets.example.com", &schema).is_empty());
        assert_eq!(schema_errors("widgets.example.com", &schema).len(), 1);
        let mut broken = schema.clone();
        broken["spec"]["versions"][0]["storage"] = json!(false);
        assert!(!schema_errors("today.widgets.example.com", &broken).is_empty());
        let mut changed = schema.clone();
        changed["spec"]["names"]["singular"] = json!("gadget");
        let errors = schema_update_errors("today.widgets.example.com", &changed, &schema);
        assert!(
            errors.iter().any(|e| e.contains("is immutable")),
            "{errors:?}"
        );
        assert!(schema_update_errors("today.widgets.example.com", &schema, &schema).is_empty());
    }

    #[test]
    fn an_identity_hash_once_set_stays() {
        let old = json!({"status": {"identityHash": "a"}});
        assert!(export_update_errors(&old, &old).is_empty());
        assert!(!export_update_errors(&json!({"status": {"identityHash": "b"}}), &old).is_empty());
        assert!(export_update_errors(&old, &json!({})).is_empty());
    }

    #[test]
    fn messages_match_upstream() {
        assert_eq!(
            reserved_crd_group("apis.kcp.io").as_deref(),
            Some("apis.kcp.io is a reserved group")
        );
        assert_eq!(reserved_crd_group("example.com"), None);
        let reference = ExportReference {
            path: "root:org".into(),
            name: "widgets".into(),
        };
        assert_eq!(
            no_permission_to_bind(false, &reference),
            "unable to create APIBinding: no permission to bind to export root:org:widgets"
        );
    }
}
