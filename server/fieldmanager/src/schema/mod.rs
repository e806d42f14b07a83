//! How the objects of one resource merge: the type information server-side apply needs.
//!
//! structured-merge-diff needs to know, at every path, whether a map merges key by key or is
//! replaced whole, and whether a list is replaced whole (atomic), merged as a set of scalars,
//! or merged as a map keyed by some of its elements' fields. [`TypeSchema`] holds exactly
//! that, as a table of types that may refer to each other (OpenAPI `$ref`s, including
//! recursive ones). It is built from OpenAPI ([`TypeSchema::from_openapi`]) or, for objects
//! without a schema, deduced from the values themselves ([`TypeSchema::deduced`]); either way
//! the ObjectMeta rules every Kubernetes object shares are applied on top (`meta`).

mod meta;
mod openapi;

use std::collections::BTreeMap;

use serde_json::Value;

/// Index of a type in [`TypeSchema::types`].
pub(crate) type TypeId = usize;

/// A scalar: strings, numbers, booleans, int-or-string.
pub(crate) const SCALAR: TypeId = 0;
/// Nothing known: maps merge key by key, lists are atomic, as structured-merge-diff's
/// "deduced" type.
pub(crate) const UNTYPED: TypeId = 1;

/// What one type is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Atom {
    Scalar,
    Untyped,
    Map(MapType),
    List(ListType),
}

/// A struct (declared `fields`) and/or a map (`elements` for any other key).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct MapType {
    pub fields: BTreeMap<String, FieldType>,
    pub elements: Option<TypeId>,
    /// `x-kubernetes-map-type: atomic`: replaced and owned as a whole.
    pub atomic: bool,
}

/// A declared field of a struct.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldType {
    pub ty: TypeId,
    /// The schema default; list-map keys fall back to it when an element omits them.
    pub default: Option<Value>,
}

/// A list and how it merges.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ListType {
    pub items: TypeId,
    pub kind: ListKind,
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// The map type of untyped objects: any key, untyped values.
pub(crate) static UNTYPED_MAP: MapType = MapType {
    fields: BTreeMap::new(),
    elements: Some(UNTYPED),
    atomic: false,
};

/// The merge rules of one resource's objects.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSchema {
    types: Vec<Atom>,
    root: TypeId,
    status_subresource: bool,
}

impl TypeSchema {
    /// The rules for objects without a schema (CRDs that preserve unknown fields, types this
    /// server has no OpenAPI for): every map merges key by key, every list is atomic, plus the
    /// ObjectMeta rules.
    pub fn deduced() -> Self {
        let mut types = base_types();
        let root = meta::object_root(&mut types, UNTYPED);
        TypeSchema {
            types,
            root,
            status_subresource: false,
        }
    }

    /// The rules of an OpenAPI (v2 definition or v3 component) object schema, with the
    /// ObjectMeta rules applied on top. `resolve` maps a `$ref` string (e.g.
    /// `#/definitions/io.k8s.api.core.v1.Container`) to its schema; refs it cannot resolve are
    /// untyped.
    ///
    /// Read: `type`, `properties` (with `default`), `additionalProperties`, `items`, `$ref`,
    /// `allOf`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
    /// `x-kubernetes-map-type`, `x-kubernetes-preserve-unknown-fields`,
    /// `x-kubernetes-int-or-string`, and, for lists without a list type,
    /// `x-kubernetes-patch-strategy: merge` (a map keyed by `x-kubernetes-patch-merge-key`,
    /// or a set without one), as Kubernetes converts its built-in types.
    pub fn from_openapi(schema: &Value, resolve: impl Fn(&str) -> Option<Value>) -> Self {
        let mut types = base_types();
        let root = openapi::read(&mut types, schema, &resolve);
        let root = meta::object_root(&mut types, root);
        TypeSchema {
            types,
            root,
            status_subresource: false,
        }
    }

    /// Declares whether the resource has a `status` subresource. When it does, writes to the
    /// main resource neither change nor own `status`, and writes to `status` touch nothing
    /// else (Kubernetes' reset fields of both strategies).
    pub fn with_status_subresource(mut self, enabled: bool) -> Self {
        self.status_subresource = enabled;
        self
    }

    /// Whether a request on `subresource` writes the top-level field `name`.
    pub(crate) fn writes(&self, subresource: Option<&str>, name: &str) -> bool {
        match subresource {
            Some("status") => name == "status",
            _ => !self.status_subresource || name != "status",
        }
    }

    pub(crate) fn root(&self) -> TypeId {
        self.root
    }

    pub(crate) fn atom(&self, ty: TypeId) -> &Atom {
        self.types.get(ty).unwrap_or(&Atom::Untyped)
    }

    /// The type of field `name` of `map`: declared, else the element type, else untyped.
    pub(crate) fn field_type(map: &MapType, name: &str) -> TypeId {
        map.fields
            .get(name)
            .map(|f| f.ty)
            .or(map.elements)
            .unwrap_or(UNTYPED)
    }
}

fn base_types() -> Vec<Atom> {
    vec![Atom::Scalar, Atom::Untyped]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_split() {
        let plain = TypeSchema::deduced();
        assert!(plain.writes(None, "status"));
        assert!(plain.writes(None, "spec"));
        let split = TypeSchema::deduced().with_status_subresource(true);
        assert!(!split.writes(None, "status"));
        assert!(split.writes(None, "spec"));
        assert!(split.writes(Some("status"), "status"));
        assert!(!split.writes(Some("status"), "metadata"));
    }
}
