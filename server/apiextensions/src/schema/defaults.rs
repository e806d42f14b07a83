//! Defaulting: filling absent fields from `default:` and dropping nulls nobody asked for.
//!
//! Kubernetes defaults custom resources when it decodes them (create, update and read from
//! storage), top-down so that defaults nested inside a defaulted value apply too. A `null` where
//! the schema is not nullable is replaced by the default, or removed when there is none, so that
//! validation sees the same object kube-apiserver would.

use serde_json::Value;

use crate::schema::node::{Additional, Node};

/// Applies the defaults of `node` to `value` in place.
pub(crate) fn apply(node: &Node, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, prop) in &node.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                match map.get(name) {
                    None => {
                        map.insert(name.clone(), default.clone());
                    }
                    Some(Value::Null) if !prop.nullable => {
                        map.insert(name.clone(), default.clone());
                    }
                    Some(_) => {}
                }
            }
            let additional = match &node.additional {
                Additional::Schema(schema) => Some(schema.as_ref()),
                _ => None,
            };
            let mut drop = Vec::new();
            for (key, child) in map.iter_mut() {
                let Some(schema) = node.property(key).or(additional) else {
                    continue;
                };
                if child.is_null() && !schema.nullable {
                    match &schema.default {
                        Some(default) => *child = default.clone(),
                        None => {
                            drop.push(key.clone());
                            continue;
                        }
                    }
                }
                apply(schema, child);
            }
            for key in drop {
                map.remove(&key);
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for item in items.iter_mut() {
                    if item.is_null()
                        && !item_node.nullable
                        && let Some(default) = &item_node.default
                    {
                        *item = default.clone();
                    }
                    apply(item_node, item);
                }
            }
        }
        _ => {}
    }
}
