//! OpenAPI v2 and v3 documents for the set of kinds a logical cluster serves.
//!
//! kubectl depends on these documents more than on anything else the server publishes besides
//! discovery: `explain` renders v3 schemas, `apply`/`create` decide from them whether to
//! validate client-side, and client-side `apply` computes strategic merge patches from their
//! `x-kubernetes-patch-*` extensions. The documents are a pure function of the served kinds and
//! their schemas, so this crate has no I/O: [`builtin`] yields the built-in kinds and schemas,
//! callers add custom resources, and [`OpenApiDocuments`] renders every document once, with
//! hashes, for all logical clusters that serve the same set.

mod definitions;
mod documents;
mod operations;
mod proto;
mod swagger;

pub mod crdgen;

pub use definitions::{
    Definitions, ServedKind, builtin, custom_resource_definition_name, custom_resource_schema,
};
pub use documents::OpenApiDocuments;

/// The self-contained structural schema (no `$ref`, a type on every node, as CRDs require) of one
/// of `definitions`. The API server prunes and checks built-in objects by it, exactly as it does
/// custom resources by their CRD's schema.
pub fn structural_schema(definitions: &Definitions, definition: &str) -> serde_json::Value {
    let map: serde_json::Map<String, serde_json::Value> = definitions
        .iter()
        .map(|(name, schema)| (name.clone(), schema.clone()))
        .collect();
    serde_json::Value::Object(crdgen::structural::structural(&map, definition))
}
