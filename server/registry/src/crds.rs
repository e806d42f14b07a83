//! apiextensions.k8s.io/v1 CustomResourceDefinition, an object of its logical cluster.
//!
//! Admission (names, versions, structural schemas, CEL rules that compile) is the pure
//! `kcp-apiextensions` crate's; this strategy adds what the server owns: defaults, the cleanup
//! finalizer that lets the CRD controller delete the CRD's resources before the CRD goes, and a status
//! that only the status subresource (the controller) writes.

use kcp_apiextensions::crd::apply_crd_defaults;
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy};

/// Held by every CRD until its custom resources are deleted.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        Box::new(Definitions),
    );
    t.categories = vec!["api-extensions".into()];
    t.subresources = vec!["status".into()];
    t
}

struct Definitions;

impl Strategy for Definitions {
    fn prepare_for_create(&self, object: &mut Value) {
        apply_crd_defaults(object);
        object["status"] = json!({});
        let mut finalizers = meta::finalizers(object);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
            meta::set_finalizers(object, finalizers);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        apply_crd_defaults(new);
        if subresource.is_none() {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
        }
        let spec_changed = new.get("spec") != old.get("spec");
        let generation = meta::generation(old).unwrap_or(1);
        meta::set_generation(
            new,
            if spec_changed {
                generation + 1
            } else {
                generation
            },
        );
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        kcp_apiextensions::validate_crd(object)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        kcp_apiextensions::validate_crd_update(new, old)
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Group",
            "string",
            "The API group of the defined resources.",
        )]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![object.pointer("/spec/group").cloned().unwrap_or(json!(""))]
    }
}
