//! The registry: one entry per resource type the server serves, each with its strategy.
//!
//! A strategy is everything that differs between resource types: defaulting, validation, which fields
//! a field selector may use, the columns `kubectl get` prints, and which subresources exist. Everything
//! else (storage, metadata rules, verbs, media types) is shared by all types in the handlers, so a new
//! built-in type is one small module and CRDs (a later issue) are one more strategy.

mod configmaps;
mod events;
mod leases;
pub mod namespaces;
mod secrets;
mod serviceaccounts;
pub mod store;
pub mod table;

use std::sync::Arc;

use kcp_apimachinery::validation::NameRule;
use kcp_apimachinery::{FieldError, meta};

use crate::storage::KeyLayout;
use serde_json::Value;

pub use table::Column;

/// How one resource type behaves beyond what all types share.
pub trait Strategy: Send + Sync {
    /// Which rule the object's name must satisfy.
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Subdomain
    }

    /// Defaults a new object (after metadata was filled in, before validation).
    fn prepare_for_create(&self, _object: &mut Value) {}

    /// Defaults an updated object and carries over what clients may not change through this endpoint.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Type-specific validation of an object about to be created.
    fn validate(&self, _object: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Type-specific validation of an update; defaults to validating the new object.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Fields beyond `metadata.name`/`metadata.namespace` that field selectors may use.
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// The value of a selectable field (absent fields select as "").
    fn field_value(&self, _object: &Value, _field: &str) -> Option<String> {
        None
    }

    /// Converts an object of this API version to the shape it is stored in (identity unless several
    /// APIs share one storage, like the two Event APIs).
    fn api_to_storage(&self, object: Value) -> Value {
        object
    }

    /// Converts a stored object to this API version.
    fn storage_to_api(&self, object: Value) -> Value {
        object
    }

    /// The columns of `kubectl get` (after the always-present name column).
    fn columns(&self) -> Vec<Column> {
        Vec::new()
    }

    /// The cells of [`columns`](Self::columns) for one object.
    fn cells(&self, _object: &Value) -> Vec<Value> {
        Vec::new()
    }
}

/// A served resource type.
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Subresources served besides the object itself (`status`, `finalize`).
    pub subresources: Vec<String>,
    /// The group whose storage holds the objects (differs from `group` only when APIs share storage).
    pub storage_group: String,
    /// Built-in or defined by a CRD, which decides where its objects are stored.
    pub layout: KeyLayout,
    pub strategy: Box<dyn Strategy>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Every field a field selector may name for this type.
    pub fn supports_field(&self, field: &str) -> bool {
        field == "metadata.name"
            || (self.namespaced && field == "metadata.namespace")
            || self.strategy.selectable_fields().contains(&field)
    }

    /// The value of a selectable field of an object.
    pub fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        match field {
            "metadata.name" => meta::name(object).map(str::to_string),
            "metadata.namespace" => meta::namespace(object).map(str::to_string),
            _ => self.strategy.field_value(object, field),
        }
    }

    pub fn has_subresource(&self, subresource: &str) -> bool {
        self.subresources.iter().any(|s| s == subresource)
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Every resource type of the server; shared by all logical clusters.
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Registry {
    /// The built-in types served in every logical cluster.
    pub fn builtin() -> Registry {
        Registry {
            types: vec![
                Arc::new(namespaces::resource()),
                Arc::new(configmaps::resource()),
                Arc::new(secrets::resource()),
                Arc::new(serviceaccounts::resource()),
                Arc::new(events::core_resource()),
                Arc::new(events::events_k8s_io_resource()),
                Arc::new(leases::resource()),
            ],
        }
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    pub fn types(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// Group versions in discovery order: the legacy core group first, then groups by name.
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut gvs: Vec<(String, String)> = Vec::new();
        for t in &self.types {
            let gv = (t.group.clone(), t.version.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
        gvs.sort_by(|a, b| (!a.0.is_empty(), &a.0).cmp(&(!b.0.is_empty(), &b.0)));
        gvs
    }
}

/// Builds a `ResourceType` with Kubernetes' naming conventions; the fields that vary are arguments.
pub(crate) fn resource(
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short_names: &[&str],
    strategy: Box<dyn Strategy>,
) -> ResourceType {
    ResourceType {
        group: group.to_string(),
        version: "v1".to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        namespaced,
        subresources: Vec::new(),
        storage_group: group.to_string(),
        layout: KeyLayout::BuiltIn,
        strategy,
    }
}

/// Number of entries of a map field (`data` of ConfigMaps and Secrets), for table cells.
pub(crate) fn map_len(object: &Value, field: &str) -> usize {
    object
        .get(field)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_types_are_found_and_ordered() {
        let registry = Registry::builtin();
        assert!(registry.lookup("", "v1", "configmaps").is_some());
        assert!(
            registry
                .lookup("coordination.k8s.io", "v1", "leases")
                .is_some()
        );
        assert!(registry.lookup("", "v1", "pods").is_none());
        let gvs = registry.group_versions();
        assert_eq!(gvs[0], ("".to_string(), "v1".to_string()));
        assert!(gvs.contains(&("events.k8s.io".to_string(), "v1".to_string())));
    }

    #[test]
    fn field_support() {
        let registry = Registry::builtin();
        let secrets = registry.lookup("", "v1", "secrets").unwrap();
        assert!(secrets.supports_field("type"));
        assert!(secrets.supports_field("metadata.namespace"));
        assert!(!secrets.supports_field("data"));
        let namespaces = registry.lookup("", "v1", "namespaces").unwrap();
        assert!(!namespaces.supports_field("metadata.namespace"));
    }
}
