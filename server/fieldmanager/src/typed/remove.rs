//! Removing fields from an object: how apply deletes what a manager stopped applying.
//!
//! A member of the set removes the node and everything under it (a field, a list element);
//! paths below a node only descend. A map or list emptied by removal disappears from its
//! parent, as Kubernetes' typed and structural-schema decoding drop the `null` that
//! structured-merge-diff leaves behind; containers that were empty before stay.

use serde_json::{Map, Value};

use super::{Node, item_key, node};
use crate::fieldpath::{FieldSet, PathElement};
use crate::schema::{TypeId, TypeSchema};

/// `object` without the fields in `set`.
pub(crate) fn remove_items(schema: &TypeSchema, object: &Value, set: &FieldSet) -> Value {
    remove(schema, schema.root(), object, set).unwrap_or_else(|| Value::Object(Map::new()))
}

/// `value` without `set`; `None` when removal emptied it.
fn remove(schema: &TypeSchema, ty: TypeId, value: &Value, set: &FieldSet) -> Option<Value> {
    match node(schema, ty, Some(value)) {
        Node::Leaf => Some(value.clone()),
        Node::Map(map) => {
            let Some(fields) = value.as_object() else {
                return Some(value.clone());
            };
            let mut out = Map::new();
            for (name, child) in fields {
                let pe = PathElement::Field(name.clone());
                let kept = prune_child(schema, TypeSchema::field_type(map, name), child, set, &pe);
                if let Some(kept) = kept {
                    out.insert(name.clone(), kept);
                }
            }
            (out.len() == fields.len() || !out.is_empty()).then_some(Value::Object(out))
        }
        Node::List(list) => {
            let Some(items) = value.as_array() else {
                return Some(value.clone());
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let kept = match item_key(schema, list, item) {
                    Ok(pe) => prune_child(schema, list.items, item, set, &pe),
                    Err(_) => Some(item.clone()),
                };
                out.extend(kept);
            }
            (out.len() == items.len() || !out.is_empty()).then_some(Value::Array(out))
        }
    }
}

/// A child named `pe` after removing `set` from it.
fn prune_child(
    schema: &TypeSchema,
    ty: TypeId,
    child: &Value,
    set: &FieldSet,
    pe: &PathElement,
) -> Option<Value> {
    if set.has_member(pe) {
        return None;
    }
    match set.child(pe) {
        Some(below) => remove(schema, ty, child, below),
        None => Some(child.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_members_and_emptied_containers() {
        let schema = TypeSchema::deduced();
        let object = json!({
            "metadata": {"name": "x", "labels": {"a": "1"}, "finalizers": ["f", "g"]},
            "data": {"k": "v", "other": "o"},
            "spec": {"empty": {}}
        });
        let mut set = FieldSet::new();
        set.insert(&[
            PathElement::field("metadata"),
            PathElement::field("labels"),
            PathElement::field("a"),
        ]);
        set.insert(&[
            PathElement::field("metadata"),
            PathElement::field("finalizers"),
            PathElement::Value(json!("f")),
        ]);
        set.insert(&[PathElement::field("data"), PathElement::field("k")]);
        set.insert(&[
            PathElement::field("spec"),
            PathElement::field("empty"),
            PathElement::field("nothing"),
        ]);
        assert_eq!(
            remove_items(&schema, &object, &set),
            json!({
                "metadata": {"name": "x", "finalizers": ["g"]},
                "data": {"other": "o"},
                "spec": {"empty": {}}
            })
        );
        let mut whole = FieldSet::new();
        whole.insert(&[PathElement::field("data")]);
        assert!(remove_items(&schema, &object, &whole).get("data").is_none());
    }
}
