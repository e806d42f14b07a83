//! Structural schemas: the per-version schema of a CRD, parsed once and applied to every object.
//!
//! The API server builds one [`StructuralSchema`] per CRD version when the CRD changes and shares
//! it (behind an `Arc`) across requests and logical clusters; each request then prunes, defaults
//! and validates its object without re-reading the schema JSON or recompiling CEL.

pub(crate) mod defaults;
pub(crate) mod fieldpath;
pub(crate) mod format;
pub(crate) mod node;
pub(crate) mod prune;
pub(crate) mod validate;

use kcp_apimachinery::FieldError;
use serde_json::Value;

pub use node::{ListType, Type};

use node::Node;

/// A validated, structural `openAPIV3Schema` with its CEL rules compiled.
#[derive(Debug)]
pub struct StructuralSchema {
    root: Node,
}

impl StructuralSchema {
    /// Parses `schema`, reporting structural violations at paths under `openAPIV3Schema`.
    pub fn new(schema: &Value) -> Result<StructuralSchema, Vec<FieldError>> {
        StructuralSchema::new_at(schema, "openAPIV3Schema")
    }

    /// Parses `schema` found at field path `at` (e.g. `spec.versions[0].schema.openAPIV3Schema`).
    pub fn new_at(schema: &Value, at: &str) -> Result<StructuralSchema, Vec<FieldError>> {
        let mut errors = Vec::new();
        let root = node::parse_root(schema, at, &mut errors);
        if errors.is_empty() {
            Ok(StructuralSchema { root })
        } else {
            Err(errors)
        }
    }

    /// Schema violations of `object` (type, format, enum, bounds, lengths, pattern, items,
    /// properties, required, list-type uniqueness, embedded resources, `allOf`/`anyOf`/`oneOf`/`not`).
    /// The root `metadata` is left to the API server's ObjectMeta validation.
    pub fn validate(&self, object: &Value) -> Vec<FieldError> {
        validate::validate_value(&self.root, object, "")
    }

    /// Removes fields the schema does not declare and returns their paths (`spec.foo`).
    /// `apiVersion`, `kind` and `metadata` of the object and of embedded resources are kept.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        prune::prune_value(&self.root, object, "", true)
    }

    /// Fills absent (and non-nullable `null`) fields from `default:`, including inside list items
    /// and map values; `null`s without a default where the schema is not nullable are removed.
    pub fn apply_defaults(&self, object: &mut Value) {
        defaults::apply(&self.root, object);
    }

    /// Evaluates `x-kubernetes-validations` rules; `old` is the stored object on update, which
    /// enables transition rules (`oldSelf`).
    pub fn validate_cel(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        crate::cel::eval::validate(&self.root, object, old)
    }

    /// The type of the field at `json_path` (`.spec.replicas`), if the schema declares it.
    pub fn field_type(&self, json_path: &str) -> Option<Type> {
        fieldpath::resolve(&self.root, json_path, false)
            .ok()
            .and_then(|r| r.node.ty)
    }

    pub(crate) fn root(&self) -> &Node {
        &self.root
    }
}
