//! Walkers that read objects through a [`TypeSchema`]: field sets, merge, comparison, removal.
//!
//! They share one decision, made here: at a given type and value, is this node a leaf (a
//! scalar, an atomic map or list, or a value whose shape the schema does not expect) or a
//! granular map or list to descend into? Untyped nodes decide by the value: objects are
//! granular maps, everything else a leaf. `null` counts as an empty granular map or list,
//! as in structured-merge-diff, so applying `labels: null` neither owns nor clears labels.

mod compare;
mod fieldset;
mod merge;
mod remove;

use serde_json::Value;
use thiserror::Error;

use crate::fieldpath::{FieldPath, PathElement};
use crate::schema::{Atom, ListKind, ListType, MapType, TypeId, TypeSchema, UNTYPED_MAP};

pub(crate) use compare::{Comparison, compare};
pub(crate) use fieldset::{ensure_named_fields_are_members, field_set, field_set_checked};
pub(crate) use merge::merge;
pub(crate) use remove::remove_items;

/// An object that does not fit its schema the way server-side apply needs (printed as
/// structured-merge-diff prints validation errors: `<path>: <message>`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct TypeError {
    pub path: String,
    pub message: String,
}

/// How a node is walked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node<'s> {
    Leaf,
    Map(&'s MapType),
    List(&'s ListType),
}

impl Node<'_> {
    fn same_kind(&self, other: &Node<'_>) -> bool {
        matches!(
            (self, other),
            (Node::Leaf, Node::Leaf)
                | (Node::Map(_), Node::Map(_))
                | (Node::List(_), Node::List(_))
        )
    }
}

/// How `value` (absent: either shape) is walked at type `ty`.
pub(crate) fn node<'s>(schema: &'s TypeSchema, ty: TypeId, value: Option<&Value>) -> Node<'s> {
    let map_like = matches!(value, None | Some(Value::Null | Value::Object(_)));
    let list_like = matches!(value, None | Some(Value::Null | Value::Array(_)));
    match schema.atom(ty) {
        Atom::Scalar => Node::Leaf,
        Atom::Untyped if map_like => Node::Map(&UNTYPED_MAP),
        Atom::Untyped => Node::Leaf,
        Atom::Map(map) if !map.atomic && map_like => Node::Map(map),
        Atom::List(list) if list.kind != ListKind::Atomic && list_like => Node::List(list),
        Atom::Map(_) | Atom::List(_) => Node::Leaf,
    }
}

/// How a node present on both sides of a merge or comparison is walked: `Ok` when both sides
/// agree (or one is absent), `Err((lhs, rhs))` when their shapes differ.
pub(crate) fn node_pair<'s>(
    schema: &'s TypeSchema,
    ty: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
) -> Result<Node<'s>, (Node<'s>, Node<'s>)> {
    match (lhs, rhs) {
        (_, None) => Ok(node(schema, ty, lhs)),
        (None, _) => Ok(node(schema, ty, rhs)),
        (Some(_), Some(_)) => {
            let (l, r) = (node(schema, ty, lhs), node(schema, ty, rhs));
            if l.same_kind(&r) { Ok(r) } else { Err((l, r)) }
        }
    }
}

/// `null`, `{}` and `[]`: granular nodes that are empty on both sides are compared and merged
/// as leaves, which keeps `{}` and `null` distinct.
pub(crate) fn is_empty(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

/// The path element naming `item` in a set or map list, or why there is none.
pub(crate) fn item_key(
    schema: &TypeSchema,
    list: &ListType,
    item: &Value,
) -> Result<PathElement, String> {
    match &list.kind {
        ListKind::Map(keys) => {
            let fields = match item {
                Value::Null => {
                    return Err("associative list with keys may not have a null element".into());
                }
                Value::Object(fields) => fields,
                _ => {
                    return Err("associative list with keys may not have non-map elements".into());
                }
            };
            let declared = match schema.atom(list.items) {
                Atom::Map(map) => Some(map),
                _ => None,
            };
            let key: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|name| {
                    let value = fields.get(name).cloned().or_else(|| {
                        declared
                            .and_then(|m| m.fields.get(name))
                            .and_then(|f| f.default.clone())
                    })?;
                    Some((name.clone(), value))
                })
                .collect();
            if key.is_empty() {
                let quoted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
                return Err(format!(
                    "associative list with keys has an element that omits all key fields [{}] \
                     (and doesn't have default values for any key fields)",
                    quoted.join(" ")
                ));
            }
            Ok(PathElement::key(key))
        }
        ListKind::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            scalar => Ok(PathElement::Value(scalar.clone())),
        },
        ListKind::Atomic => Err("invalid indexing of non-associative list".into()),
    }
}

/// `path` as printed in errors and conflicts.
pub(crate) fn show(path: &[PathElement]) -> String {
    FieldPath(path.to_vec()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::UNTYPED;
    use serde_json::json;

    #[test]
    fn keys_and_their_errors() {
        let list = ListType {
            items: UNTYPED,
            kind: ListKind::Map(vec!["containerPort".into(), "protocol".into()]),
        };
        let schema = TypeSchema::deduced();
        let key = item_key(
            &schema,
            &list,
            &json!({"protocol": "UDP", "containerPort": 53}),
        );
        assert_eq!(
            key.map(|k| k.to_string()),
            Ok("[containerPort=53,protocol=\"UDP\"]".to_string())
        );
        assert_eq!(
            item_key(&schema, &list, &json!({"name": "x"})),
            Err("associative list with keys has an element that omits all key fields \
                 [\"containerPort\" \"protocol\"] (and doesn't have default values for any key fields)"
                .to_string())
        );
        let set = ListType {
            items: UNTYPED,
            kind: ListKind::Set,
        };
        assert!(item_key(&schema, &set, &json!({})).is_err());
        assert_eq!(
            item_key(&schema, &set, &json!("a")),
            Ok(PathElement::Value(json!("a")))
        );
    }
}
