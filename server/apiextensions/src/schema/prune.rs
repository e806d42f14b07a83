//! Pruning: dropping fields a structural schema does not declare.
//!
//! Kubernetes silently removes unknown fields from custom resources before storing them (unless
//! `x-kubernetes-preserve-unknown-fields` says otherwise) and, with `fieldValidation=Warn|Strict`,
//! reports them; returning the removed paths serves both.

use serde_json::Value;

use crate::path;
use crate::schema::node::{Additional, Node};

/// Fields the API server owns at a resource root (the object itself or an embedded resource).
const RESOURCE_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Removes undeclared fields from `value` (found at `at`) and returns their paths. At a resource
/// root `apiVersion`, `kind` and `metadata` are kept whatever the schema says.
pub(crate) fn prune_value(
    node: &Node,
    value: &mut Value,
    at: &str,
    resource_root: bool,
) -> Vec<String> {
    let mut pruned = Vec::new();
    walk(node, value, at, resource_root, &mut pruned);
    pruned
}

fn walk(node: &Node, value: &mut Value, at: &str, resource_root: bool, pruned: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let keep_resource_fields = resource_root || node.embedded;
            let mut unknown = Vec::new();
            for (key, child) in map.iter_mut() {
                let child_at = path::child(at, key);
                if keep_resource_fields && RESOURCE_FIELDS.contains(&key.as_str()) {
                    if key == "metadata" {
                        continue;
                    }
                } else if node.property(key).is_none() {
                    match &node.additional {
                        Additional::Schema(additional) => {
                            walk(additional, child, &child_at, false, pruned);
                        }
                        Additional::Allowed(true) => {}
                        _ if node.preserve_unknown => {}
                        _ => unknown.push(key.clone()),
                    }
                    continue;
                }
                if let Some(prop) = node.property(key) {
                    walk(prop, child, &child_at, false, pruned);
                }
            }
            for key in unknown {
                map.remove(&key);
                pruned.push(path::child(at, &key));
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item_node, item, &path::index(at, i), false, pruned);
                }
            }
        }
        _ => {}
    }
}
