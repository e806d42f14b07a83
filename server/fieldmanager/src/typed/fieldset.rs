//! The fields an object specifies, and the struct fields a set implies.
//!
//! An applied configuration owns exactly the fields it specifies: leaves, atomic nodes and
//! list elements (so that a list-map element stays owned as a whole, `"."` in FieldsV1), never
//! the granular maps around them. Pruning, though, must also treat a declared struct field as
//! owned when something below it is, so that a struct a manager stops applying disappears as a
//! whole; [`ensure_named_fields_are_members`] adds those.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Node, TypeError, item_key, node, show};
use crate::fieldpath::{FieldSet, PathElement};
use crate::schema::{Atom, TypeId, TypeSchema, UNTYPED};

/// The fields `value` specifies; elements that cannot be keyed are skipped. For objects
/// already checked, or whose problems the caller tolerates.
pub(crate) fn field_set(schema: &TypeSchema, value: &Value) -> FieldSet {
    Walker::run(schema, value, true).out
}

/// The fields `value` specifies, or the first reason it does not fit the schema: an element of
/// a map or set list that cannot be keyed, or (unless `allow_duplicates`, which Kubernetes
/// grants live objects but not applied ones) two elements with the same key.
pub(crate) fn field_set_checked(
    schema: &TypeSchema,
    value: &Value,
    allow_duplicates: bool,
) -> Result<FieldSet, TypeError> {
    let walker = Walker::run(schema, value, allow_duplicates);
    match walker.error {
        Some(error) => Err(error),
        None => Ok(walker.out),
    }
}

struct Walker<'s> {
    schema: &'s TypeSchema,
    allow_duplicates: bool,
    out: FieldSet,
    error: Option<TypeError>,
}

impl<'s> Walker<'s> {
    fn run(schema: &'s TypeSchema, value: &Value, allow_duplicates: bool) -> Self {
        let mut walker = Walker {
            schema,
            allow_duplicates,
            out: FieldSet::new(),
            error: None,
        };
        walker.walk(schema.root(), value, &mut Vec::new());
        walker
    }

    fn fail(&mut self, path: &[PathElement], message: String) {
        self.error.get_or_insert_with(|| TypeError {
            path: show(path),
            message,
        });
    }

    fn walk(&mut self, ty: TypeId, value: &Value, path: &mut Vec<PathElement>) {
        match node(self.schema, ty, Some(value)) {
            Node::Leaf => self.out.insert(path),
            Node::Map(map) => {
                for (name, child) in value.as_object().into_iter().flatten() {
                    path.push(PathElement::Field(name.clone()));
                    self.walk(TypeSchema::field_type(map, name), child, path);
                    path.pop();
                }
            }
            Node::List(list) => {
                let mut seen = BTreeSet::new();
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    let pe = match item_key(self.schema, list, item) {
                        Ok(pe) => pe,
                        Err(message) => {
                            self.fail(path, format!("element {i}: {message}"));
                            continue;
                        }
                    };
                    if !seen.insert(pe.clone()) && !self.allow_duplicates {
                        self.fail(path, format!("duplicate entries for key {pe}"));
                    }
                    path.push(pe);
                    self.walk(list.items, item, path);
                    self.out.insert(path);
                    path.pop();
                }
            }
        }
    }
}

/// `set` plus, at every level, the declared struct fields it has paths below.
pub(crate) fn ensure_named_fields_are_members(schema: &TypeSchema, set: &FieldSet) -> FieldSet {
    ensure(schema, Some(schema.root()), set)
}

fn ensure(schema: &TypeSchema, ty: Option<TypeId>, set: &FieldSet) -> FieldSet {
    let atom = ty.map(|ty| schema.atom(ty));
    let mut out = FieldSet::new();
    for pe in set.members_iter() {
        out.insert(std::slice::from_ref(pe));
    }
    for (pe, child) in set.children_iter() {
        let child_ty = match (pe, atom) {
            (PathElement::Field(name), Some(Atom::Map(map))) => {
                if map.fields.contains_key(name) {
                    out.insert(std::slice::from_ref(pe));
                }
                Some(TypeSchema::field_type(map, name))
            }
            (PathElement::Field(_), Some(Atom::Untyped)) => Some(UNTYPED),
            (PathElement::Key(_), Some(Atom::List(list))) => Some(list.items),
            _ => None,
        };
        out.insert_child(pe, ensure(schema, child_ty, child));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(set: &FieldSet) -> Vec<String> {
        set.paths().iter().map(ToString::to_string).collect()
    }

    fn pod_schema() -> TypeSchema {
        TypeSchema::from_openapi(
            &json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer"},
                    "containers": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "args": {"type": "array", "items": {"type": "string"}}
                        }}}
                }}
            }}),
            |_| None,
        )
    }

    #[test]
    fn leaves_atomics_and_list_elements() {
        let schema = pod_schema();
        let object = json!({
            "apiVersion": "v1",
            "metadata": {"labels": {"a": "1"}, "annotations": {}, "finalizers": ["f"]},
            "spec": {"containers": [{"name": "c", "args": ["x"]}], "empty": {}, "nil": null}
        });
        assert_eq!(
            shown(&field_set(&schema, &object)),
            [
                ".apiVersion",
                ".metadata.finalizers[=\"f\"]",
                ".metadata.labels.a",
                ".spec.containers[name=\"c\"]",
                ".spec.containers[name=\"c\"].args",
                ".spec.containers[name=\"c\"].name",
            ]
        );
    }

    #[test]
    fn checked_reports_kubernetes_errors() {
        let schema = pod_schema();
        let missing = json!({"spec": {"containers": [{"name": "a"}, {"args": []}]}});
        assert_eq!(
            field_set_checked(&schema, &missing, false).map_err(|e| e.to_string()),
            Err(".spec.containers: element 1: associative list with keys has an element that \
                 omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
                .to_string())
        );
        let duplicate = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
        assert_eq!(
            field_set_checked(&schema, &duplicate, false).map_err(|e| e.to_string()),
            Err(".spec.containers: duplicate entries for key [name=\"a\"]".to_string())
        );
        assert!(field_set_checked(&schema, &duplicate, true).is_ok());
    }

    #[test]
    fn named_fields_become_members() {
        let schema = pod_schema();
        let set = field_set(
            &schema,
            &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}, "data": {"k": "v"}}),
        );
        assert_eq!(
            shown(&ensure_named_fields_are_members(&schema, &set)),
            [
                ".metadata",
                ".spec",
                ".data.k",
                ".metadata.labels",
                ".metadata.labels.a",
                ".spec.replicas",
            ]
        );
    }
}
