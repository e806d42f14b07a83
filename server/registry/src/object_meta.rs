//! Unknown fields inside `metadata`, pruned and reported as kube-apiserver does.
//!
//! kube-apiserver decodes built-in objects into typed structs, so a field `ObjectMeta` does not
//! declare (`metadata.unknownMeta`, `metadata.ownerReferences[0].foo`) is dropped, and with
//! `fieldValidation=Strict` the strict JSON decoder fails the request with
//! `strict decoding error: unknown field "metadata.unknownMeta"` (`Warn` turns it into a warning).
//! Custom resources get the same from apiextensions-apiserver's ObjectMeta coercion
//! (`GetObjectMetaWithOptions` with `ReturnUnknownFieldPaths`). The structural schemas of types
//! leave the root `metadata` to the server, so this module prunes it by the structural schema of
//! k8s-openapi's `ObjectMeta` definition (the Kubernetes version the workspace pins), not by a
//! hand-kept field list.

use std::sync::{Arc, OnceLock};

use kcp_apiextensions::StructuralSchema;
use serde_json::{Value, json};

/// The OpenAPI definition of `metav1.ObjectMeta`.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// The property the metadata is wrapped in while pruning (the pruner keeps a resource root's
/// `metadata` whatever the schema says, so the metadata is pruned as an ordinary property).
const WRAPPER: &str = "m";

/// The schema `{m: ObjectMeta}`, built once (None when k8s-openapi's definition is not structural,
/// which a test rules out).
fn wrapper_schema() -> Option<&'static Arc<StructuralSchema>> {
    static SCHEMA: OnceLock<Option<Arc<StructuralSchema>>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let (definitions, _) = kcp_openapi::builtin();
            let object_meta = kcp_openapi::structural_schema(&definitions, OBJECT_META);
            let schema = json!({"type": "object", "properties": {WRAPPER: object_meta}});
            match StructuralSchema::new(&schema) {
                Ok(schema) => Some(Arc::new(schema)),
                Err(errors) => {
                    tracing::warn!(
                        ?errors,
                        "ObjectMeta's schema is not structural; not pruning metadata"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Removes the fields of `object.metadata` that `ObjectMeta` does not declare and returns their
/// paths (`metadata.unknownMeta`, `metadata.ownerReferences[0].foo`).
pub(crate) fn prune_metadata(object: &mut Value) -> Vec<String> {
    let Some(schema) = wrapper_schema() else {
        return Vec::new();
    };
    let Some(metadata) = object.get_mut("metadata").filter(|m| m.is_object()) else {
        return Vec::new();
    };
    let mut wrapped = json!({WRAPPER: metadata.take()});
    let pruned = schema.prune(&mut wrapped);
    if let Some(pruned_metadata) = wrapped.get_mut(WRAPPER) {
        *metadata = pruned_metadata.take();
    }
    pruned
        .into_iter()
        .map(|path| match path.strip_prefix(WRAPPER) {
            Some(rest) => format!("metadata{rest}"),
            None => path,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_meta_schema_is_structural() {
        assert!(wrapper_schema().is_some());
    }

    #[test]
    fn unknown_metadata_fields_are_pruned_and_reported() {
        let mut object = json!({
            "metadata": {
                "name": "a",
                "unknownMeta": "x",
                "labels": {"app": "web"},
                "annotations": {"k": "v"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u", "foo": 1}],
                "managedFields": [{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]
            },
            "data": {"a": "b"}
        });
        let mut pruned = prune_metadata(&mut object);
        pruned.sort();
        assert_eq!(
            pruned,
            ["metadata.ownerReferences[0].foo", "metadata.unknownMeta"]
        );
        assert!(object["metadata"].get("unknownMeta").is_none());
        assert!(
            object["metadata"]["ownerReferences"][0]
                .get("foo")
                .is_none()
        );
        assert_eq!(object["metadata"]["labels"]["app"], "web");
        assert_eq!(
            object["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(object["data"]["a"], "b");
    }

    #[test]
    fn known_metadata_is_untouched() {
        let metadata = json!({
            "name": "a", "generateName": "a-", "namespace": "n", "uid": "u", "resourceVersion": "1",
            "generation": 2, "creationTimestamp": "2024-01-01T00:00:00Z", "deletionTimestamp": null,
            "deletionGracePeriodSeconds": 0, "finalizers": ["x/y"], "selfLink": ""
        });
        let mut object = json!({"metadata": metadata.clone()});
        assert!(prune_metadata(&mut object).is_empty());
        assert_eq!(object["metadata"], metadata);
    }
}
