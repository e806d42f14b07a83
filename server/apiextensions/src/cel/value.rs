//! JSON values as the typed CEL values a rule sees as `self`.
//!
//! Declared properties are CEL fields, so names that are not CEL identifiers are escaped the way
//! Kubernetes documents (`foo-bar` is `foo__dash__bar`); map keys stay raw; integers and numbers
//! follow the schema type rather than the JSON spelling.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use crate::schema::node::{Additional, Node, Type};

/// CEL's reserved words: Kubernetes escapes a property of one of these names as `__<word>__`.
pub const RESERVED_WORDS: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL field name of property `name`, or `None` when Kubernetes makes it inaccessible.
pub(crate) fn escape(name: &str) -> Option<String> {
    if RESERVED_WORDS.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '.' | '-' | '/'));
    if !first_ok
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    Some(
        name.replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__"),
    )
}

fn string(s: &str) -> cel::Value {
    cel::Value::String(Arc::new(s.to_string()))
}

fn map(entries: HashMap<Key, cel::Value>) -> cel::Value {
    cel::Value::Map(Map {
        map: Arc::new(entries),
    })
}

/// Converts `value` described by `node` (`None`: no schema, e.g. under preserve-unknown-fields).
/// `resource_root` exposes `apiVersion`, `kind` and `metadata.name`/`generateName`.
pub(crate) fn to_cel(node: Option<&Node>, value: &Value, resource_root: bool) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (node.and_then(|n| n.ty), n.as_i64()) {
            (Some(Type::Number), _) | (_, None) => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
            (_, Some(i)) => cel::Value::Int(i),
        },
        Value::String(s) => string(s),
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            cel::Value::List(Arc::new(
                items.iter().map(|i| to_cel(item_node, i, false)).collect(),
            ))
        }
        Value::Object(obj) => {
            let Some(node) = node else {
                return map(obj
                    .iter()
                    .map(|(k, v)| (Key::from(k.clone()), to_cel(None, v, false)))
                    .collect());
            };
            let resource = resource_root || node.embedded;
            let mut entries = HashMap::new();
            if node.properties.is_empty() && !resource {
                let additional = match &node.additional {
                    Additional::Schema(schema) => Some(schema.as_ref()),
                    _ => None,
                };
                for (k, v) in obj {
                    entries.insert(Key::from(k.clone()), to_cel(additional, v, false));
                }
                return map(entries);
            }
            for (name, prop) in &node.properties {
                if let (Some(v), Some(field)) = (obj.get(name), escape(name)) {
                    entries.insert(Key::from(field), to_cel(Some(prop), v, false));
                }
            }
            if resource {
                for field in ["apiVersion", "kind"] {
                    if let Some(Value::String(s)) = obj.get(field) {
                        entries.insert(Key::from(field.to_string()), string(s));
                    }
                }
                if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
                    let mut fields = HashMap::new();
                    for field in ["name", "generateName"] {
                        if let Some(Value::String(s)) = meta.get(field) {
                            fields.insert(Key::from(field.to_string()), string(s));
                        }
                    }
                    entries.insert(Key::from("metadata".to_string()), map(fields));
                }
            }
            map(entries)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_kubernetes() {
        assert_eq!(escape("replicas").as_deref(), Some("replicas"));
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("x__y").as_deref(), Some("x__underscores__y"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("9lives"), None);
        assert_eq!(escape("a b"), None);
    }
}
