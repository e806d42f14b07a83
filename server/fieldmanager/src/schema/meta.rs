//! The rules every object shares, whatever its schema says: `apiVersion`, `kind` and
//! `metadata` are declared fields of the root, and `metadata` is ObjectMeta.
//!
//! CRD schemas usually describe `metadata` as a bare object and untyped objects have no schema
//! at all, yet Kubernetes merges labels and annotations key by key, finalizers as a set and
//! owner references by `uid` (each reference atomic) for every object, because its type
//! converter always uses ObjectMeta's own schema. `managedFields` is declared but never walked:
//! the field manager strips it before merging.

use std::collections::BTreeMap;

use super::{Atom, FieldType, ListKind, ListType, MapType, SCALAR, TypeId, UNTYPED};

/// The fields of ObjectMeta that hold scalars or untyped values.
const SCALAR_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Adds the object rules on top of `root`, returning the new root type.
pub(super) fn object_root(types: &mut Vec<Atom>, root: TypeId) -> TypeId {
    let meta = object_meta(types);
    let mut map = match types.get(root) {
        Some(Atom::Map(map)) => map.clone(),
        _ => MapType {
            elements: Some(UNTYPED),
            ..MapType::default()
        },
    };
    map.atomic = false;
    map.fields.insert("apiVersion".into(), declared(SCALAR));
    map.fields.insert("kind".into(), declared(SCALAR));
    map.fields.insert("metadata".into(), declared(meta));
    push(types, Atom::Map(map))
}

fn object_meta(types: &mut Vec<Atom>) -> TypeId {
    let string_map = push(
        types,
        Atom::Map(MapType {
            elements: Some(SCALAR),
            ..MapType::default()
        }),
    );
    let finalizers = push(
        types,
        Atom::List(ListType {
            items: SCALAR,
            kind: ListKind::Set,
        }),
    );
    let owner_reference = push(
        types,
        Atom::Map(MapType {
            elements: Some(UNTYPED),
            atomic: true,
            ..MapType::default()
        }),
    );
    let owner_references = push(
        types,
        Atom::List(ListType {
            items: owner_reference,
            kind: ListKind::Map(vec!["uid".into()]),
        }),
    );
    let managed_fields = push(
        types,
        Atom::List(ListType {
            items: UNTYPED,
            kind: ListKind::Atomic,
        }),
    );
    let mut fields: BTreeMap<String, FieldType> = SCALAR_FIELDS
        .iter()
        .map(|name| (name.to_string(), declared(SCALAR)))
        .collect();
    fields.insert("labels".into(), declared(string_map));
    fields.insert("annotations".into(), declared(string_map));
    fields.insert("finalizers".into(), declared(finalizers));
    fields.insert("ownerReferences".into(), declared(owner_references));
    fields.insert("managedFields".into(), declared(managed_fields));
    push(
        types,
        Atom::Map(MapType {
            fields,
            elements: Some(UNTYPED),
            atomic: false,
        }),
    )
}

fn declared(ty: TypeId) -> FieldType {
    FieldType { ty, default: None }
}

pub(super) fn push(types: &mut Vec<Atom>, atom: Atom) -> TypeId {
    types.push(atom);
    types.len() - 1
}
