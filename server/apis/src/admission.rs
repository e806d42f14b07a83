//! The admission rules of the apis.kcp.io types, with upstream's messages (`pkg/admission/
//! apiresourceschema`, `apiexport`, `apibinding`, `reservedcrdgroups`, `crdnooverlappinggvr`).
//!
//! Each rule returns the messages of what it refuses; the API server turns them into a 403
//! `Forbidden` Status, as upstream's `admission.NewForbidden` does. APIBinding admission also
//! mutates: every binding carries the `internal.apis.kcp.io/export` label naming its export, and
//! the finalizer of the APIBinding controller's deletion flow (upstream's
//! `apis.kcp.io/APIBindingDeletionFinalizer`), so the controller need not write it.

use kcp_apiextensions::CrdInfo;
use kcp_apimachinery::meta;
use serde_json::Value;

use crate::binding::{self, ExportReference};
use crate::claims::{self, EXPORT_LABEL};
use crate::{GROUP, schema};

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

/// An APIExport's permission claims: a claim on a resource that is not built in (served in every
/// logical cluster without a binding, `built_in(group, resource)`) must name the identity of the
/// export that serves it; kcp's own `apis.kcp.io` types need none. As upstream, the first such
/// claim is reported.
pub fn export_claim_errors(export: &Value, built_in: impl Fn(&str, &str) -> bool) -> Vec<String> {
    claims::exported_claims(export)
        .iter()
        .position(|claim| {
            let claimed = &claim.resource;
            claimed.identity_hash.is_empty()
                && claimed.group != GROUP
                && !built_in(&claimed.group, &claimed.resource)
        })
        .map(|index| {
            format!(
                "spec.permissionClaims[{index}].identityHash: Invalid value: \"\": identityHash is required for API types that are not built-in"
            )
        })
        .into_iter()
        .collect()
}

/// A new binding of an export of `export_cluster`: labeled with the export's hash, whatever the
/// writer put there (upstream's admission overwrites it too).
pub fn label_new_binding(binding: &mut Value, export_cluster: &str) {
    if let Some(reference) = ExportReference::of(binding) {
        let hash = claims::export_hash(export_cluster, &reference.name);
        meta::set_label(binding, EXPORT_LABEL, &hash);
    }
}

/// An updated binding keeps its export label: its reference is immutable, so the label stays what
/// it was, or (for a binding written before the label existed) is derived from the export's
/// cluster the binding's status records.
pub fn keep_binding_label(new: &mut Value, old: &Value) {
    if let Some(label) = meta::labels(old).get(EXPORT_LABEL) {
        meta::set_label(new, EXPORT_LABEL, label);
        return;
    }
    if let Some(export_cluster) = recorded_export_cluster(old) {
        label_new_binding(new, export_cluster);
    }
}

/// The export label a stored binding lacks (it was written before the label existed), with the
/// export cluster to derive it from: the one a pass just resolved, else the one its status
/// records. The APIBinding controller writes it, so such bindings are found by label without
/// waiting for their next update.
pub fn missing_export_label<'a>(
    binding: &'a Value,
    resolved_export_cluster: Option<&'a str>,
) -> Option<&'a str> {
    if meta::labels(binding).contains_key(EXPORT_LABEL) {
        return None;
    }
    resolved_export_cluster
        .filter(|cluster| !cluster.is_empty())
        .or_else(|| recorded_export_cluster(binding))
}

fn recorded_export_cluster(binding: &Value) -> Option<&str> {
    binding
        .pointer("/status/apiExportClusterName")
        .and_then(Value::as_str)
        .filter(|cluster| !cluster.is_empty())
}

/// A binding written while not being deleted carries [`binding::FINALIZER`], as upstream's
/// `apis.kcp.io/APIBindingDeletionFinalizer` admission adds it on create and update.
pub fn add_binding_finalizer(binding: &mut Value) {
    let mut finalizers = meta::finalizers(binding);
    if meta::deletion_timestamp(binding).is_none()
        && !finalizers.iter().any(|f| f == binding::FINALIZER)
    {
        finalizers.push(binding::FINALIZER.to_string());
        meta::set_finalizers(binding, finalizers);
    }
}

/// Why an update of a binding is refused for its finalizer: while the binding is being deleted,
/// only `system:masters` (`privileged`) may remove [`binding::FINALIZER`], which keeps the binding
/// until the controller has deleted its objects (upstream's `apis.kcp.io/APIBindingDeletionFinalizer`
/// validation). Outside a deletion a removed finalizer is put back by [`add_binding_finalizer`].
pub fn binding_finalizer_errors(new: &Value, old: &Value, privileged: bool) -> Vec<String> {
    let has = |binding: &Value| {
        meta::finalizers(binding)
            .iter()
            .any(|f| f == binding::FINALIZER)
    };
    let removing = has(old) && !has(new);
    if removing && !privileged && meta::deletion_timestamp(new).is_some() {
        return vec![format!(
            "removing the finalizer {} is forbidden",
            binding::FINALIZER
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
    fn only_the_system_removes_the_finalizer_of_a_binding_being_deleted() {
        let deleting = json!({"metadata": {
            "deletionTimestamp": "2026-11-26T00:00:00Z",
            "finalizers": ["other", binding::FINALIZER],
        }});
        let mut removed = deleting.clone();
        removed["metadata"]["finalizers"] = json!(["other"]);
        assert_eq!(
            binding_finalizer_errors(&removed, &deleting, false),
            ["removing the finalizer apis.kcp.io/apibinding-finalizer is forbidden"]
        );
        assert!(binding_finalizer_errors(&removed, &deleting, true).is_empty());
        let mut other_removed = deleting.clone();
        other_removed["metadata"]["finalizers"] = json!([binding::FINALIZER]);
        assert!(binding_finalizer_errors(&other_removed, &deleting, false).is_empty());
        let live = json!({"metadata": {"finalizers": [binding::FINALIZER]}});
        let mut live_removed = live.clone();
        live_removed["metadata"]["finalizers"] = json!([]);
        assert!(binding_finalizer_errors(&live_removed, &live, false).is_empty());
    }

    #[test]
    fn an_identity_hash_once_set_stays() {
        let old = json!({"status": {"identityHash": "a"}});
        assert!(export_update_errors(&old, &old).is_empty());
        assert!(!export_update_errors(&json!({"status": {"identityHash": "b"}}), &old).is_empty());
        assert!(export_update_errors(&old, &json!({})).is_empty());
    }

    #[test]
    fn claims_on_resources_not_built_in_need_an_identity() {
        let built_in = |group: &str, resource: &str| group.is_empty() && resource == "configmaps";
        let export = |claims: Value| json!({"spec": {"permissionClaims": claims}});
        let fine = export(json!([
            {"group": "", "resource": "configmaps", "verbs": ["*"]},
            {"group": "apis.kcp.io", "resource": "apibindings", "verbs": ["get"]},
            {"group": "example.com", "resource": "widgets", "identityHash": "abc", "verbs": ["*"]},
        ]));
        assert!(export_claim_errors(&fine, built_in).is_empty());
        let missing = export(json!([
            {"group": "", "resource": "configmaps", "verbs": ["*"]},
            {"group": "example.com", "resource": "widgets", "verbs": ["*"]},
            {"group": "example.com", "resource": "gadgets", "verbs": ["*"]},
        ]));
        assert_eq!(
            export_claim_errors(&missing, built_in),
            [
                "spec.permissionClaims[1].identityHash: Invalid value: \"\": identityHash is required for API types that are not built-in"
            ]
        );
    }

    #[test]
    fn bindings_carry_their_exports_label() {
        let reference = json!({"export": {"path": "root:org", "name": "widgets"}});
        let mut binding = json!({
            "metadata": {"name": "b", "labels": {EXPORT_LABEL: "forged", "keep": "me"}},
            "spec": {"reference": reference},
        });
        label_new_binding(&mut binding, "2x4k");
        let labels = meta::labels(&binding);
        assert_eq!(labels[EXPORT_LABEL], claims::export_hash("2x4k", "widgets"));
        assert_eq!(labels["keep"], "me");

        let mut changed = json!({"metadata": {"name": "b"}, "spec": {"reference": reference}});
        keep_binding_label(&mut changed, &binding);
        assert_eq!(meta::labels(&changed)[EXPORT_LABEL], labels[EXPORT_LABEL]);

        let unlabeled = json!({
            "metadata": {"name": "b"},
            "spec": {"reference": reference},
            "status": {"apiExportClusterName": "2x4k"},
        });
        let mut update = unlabeled.clone();
        keep_binding_label(&mut update, &unlabeled);
        assert_eq!(meta::labels(&update)[EXPORT_LABEL], labels[EXPORT_LABEL]);
        let pending = json!({"metadata": {"name": "b"}, "spec": {"reference": reference}});
        let mut update = pending.clone();
        keep_binding_label(&mut update, &pending);
        assert!(meta::labels(&update).is_empty());

        // What the binding controller writes on bindings stored before the label existed.
        assert_eq!(missing_export_label(&binding, Some("2x4k")), None);
        assert_eq!(missing_export_label(&unlabeled, None), Some("2x4k"));
        assert_eq!(missing_export_label(&unlabeled, Some("9z")), Some("9z"));
        assert_eq!(missing_export_label(&pending, None), None);
    }

    #[test]
    fn bindings_get_the_deletion_finalizer_unless_deleted() {
        let mut binding = json!({"metadata": {"name": "b", "finalizers": ["other"]}});
        add_binding_finalizer(&mut binding);
        add_binding_finalizer(&mut binding);
        assert_eq!(meta::finalizers(&binding), ["other", binding::FINALIZER]);
        let mut deleting =
            json!({"metadata": {"name": "b", "deletionTimestamp": "2026-11-26T00:00:00Z"}});
        add_binding_finalizer(&mut deleting);
        assert!(meta::finalizers(&deleting).is_empty());
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
