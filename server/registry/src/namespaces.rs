//! core/v1 Namespace: cluster-scoped, with the `status` and `finalize` subresources and the
//! `kubernetes` finalizer that the namespace controller removes once the namespace is empty.

use kcp_apimachinery::validation::NameRule;
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy};

/// The finalizer in `spec.finalizers` that keeps a namespace until its content is gone.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";
/// The label every namespace carries with its own name (so selectors can pick namespaces by name).
pub(crate) const NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        Box::new(Namespaces),
    );
    t.subresources = vec!["status".into(), "finalize".into()];
    t
}

struct Namespaces;

fn set_name_label(object: &mut Value) {
    if let Some(name) = meta::name(object).map(str::to_string) {
        meta::set_label(object, NAME_LABEL, &name);
    }
}

impl Strategy for Namespaces {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Label
    }

    fn prepare_for_create(&self, object: &mut Value) {
        object["status"] = json!({"phase": "Active"});
        let finalizers = &mut object["spec"]["finalizers"];
        match finalizers.as_array_mut() {
            Some(list) if !list.iter().any(|f| f == KUBERNETES_FINALIZER) => {
                list.push(json!(KUBERNETES_FINALIZER))
            }
            Some(_) => {}
            None => *finalizers = json!([KUBERNETES_FINALIZER]),
        }
        set_name_label(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        // Status changes go through /status, spec.finalizers through /finalize; both keep the
        // request's metadata (kube's namespaceStatusStrategy resets only spec, the finalize
        // strategy only status), and the name label is canonicalized on every write.
        if subresource.is_some() {
            set_name_label(new);
            return;
        }
        new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
        new["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
        set_name_label(new);
    }

    fn subresource_writes_metadata(&self, subresource: &str) -> bool {
        matches!(subresource, "status" | "finalize")
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(finalizers) = object.pointer("/spec/finalizers").and_then(Value::as_array) {
            for (i, f) in finalizers.iter().enumerate() {
                let valid = f.as_str().is_some_and(|f| {
                    f == KUBERNETES_FINALIZER
                        || kcp_apimachinery::validation::is_qualified_name(f).is_empty()
                });
                if !valid {
                    errors.push(FieldError::invalid(
                        &format!("spec.finalizers[{i}]"),
                        f.clone(),
                        "name is neither a standard finalizer name nor is it fully qualified",
                    ));
                }
            }
        }
        errors
    }

    fn supports_field(&self, field: &str) -> bool {
        field == "status.phase"
    }

    fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        (field == "status.phase").then(|| {
            object
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Status",
            "string",
            "The status of the namespace",
        )]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![
            object
                .pointer("/status/phase")
                .cloned()
                .unwrap_or(json!("")),
        ]
    }
}

/// Whether a namespace is being deleted (its content may no longer grow).
pub(crate) fn is_terminating(namespace: &Value) -> bool {
    meta::deletion_timestamp(namespace).is_some()
        || namespace.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_are_standard_or_qualified_names() {
        let ok = json!({"spec": {"finalizers": ["kubernetes", "example.com/cleanup"]}});
        assert!(Namespaces.validate(&ok).is_empty());
        let bad = json!({"spec": {"finalizers": ["not a name"]}});
        let found: Vec<String> = Namespaces
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "spec.finalizers[0]: Invalid value: \"not a name\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
    }

    #[test]
    fn status_and_finalize_write_metadata_and_keep_the_name_label() {
        assert!(Namespaces.subresource_writes_metadata("status"));
        assert!(Namespaces.subresource_writes_metadata("finalize"));
        let old = json!({"metadata": {"name": "n", "labels": {NAME_LABEL: "n"}}});
        let mut new = json!({"metadata": {"name": "n", "labels": {}}});
        Namespaces.prepare_for_update(&mut new, &old, Some("status"));
        assert_eq!(new["metadata"]["labels"][NAME_LABEL], "n");
    }
}
