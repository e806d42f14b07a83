//! `$ref` and `allOf` in OpenAPI schemas (v2 definitions, v3 components, CRD `openAPIV3Schema`):
//! which definition a schema is, and one schema with its `allOf` parts folded in.
//!
//! Kubernetes documents reference definitions in two spellings: `{"$ref": ...}`, and, in v3
//! documents, `{"allOf": [{"$ref": ...}], "description": ...}`, because a v3 `$ref` cannot carry
//! sibling keywords (kube-openapi wraps every reference that has a description or default). Every
//! reader of schemas (strategic merge patch's merge keys, server-side apply's types) must treat
//! both as the same reference, and fold a general `allOf` the same way, so the rules live here
//! once. Resolving a reference string to its schema is the caller's (it owns the document); the
//! callers also decide how to stop on recursive definitions (a memo of built types, or the set of
//! references on the current path).

use serde_json::{Map, Value};

/// The `$ref` of a schema that is only a reference: `{"$ref": ...}` or `{"allOf": [{"$ref":
/// ...}]}` (extra keywords such as `description` or `default` allowed).
pub fn reference(schema: &Value) -> Option<&str> {
    schema.get("$ref").and_then(Value::as_str).or_else(|| {
        match schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([only]) => only.get("$ref").and_then(Value::as_str),
            _ => None,
        }
    })
}

/// `schema` with its `allOf` entries folded in (references resolved with `resolve`, nested
/// `allOf`s folded first): properties merge, every other keyword keeps the first value seen, the
/// outer schema's before its parts'. A reference `resolve` does not know contributes nothing.
pub fn flatten_all_of(schema: &Value, resolve: &dyn Fn(&str) -> Option<Value>) -> Value {
    let Some(parts) = schema.get("allOf").and_then(Value::as_array) else {
        return schema.clone();
    };
    let mut out: Map<String, Value> = schema.as_object().cloned().unwrap_or_default();
    out.remove("allOf");
    for part in parts {
        let part = match part.get("$ref").and_then(Value::as_str) {
            Some(reference) => resolve(reference).unwrap_or(Value::Null),
            None => part.clone(),
        };
        let Value::Object(part) = flatten_all_of(&part, resolve) else {
            continue;
        };
        for (key, value) in part {
            match (out.get_mut(&key), value) {
                (Some(Value::Object(mine)), Value::Object(theirs)) if key == "properties" => {
                    for (name, property) in theirs {
                        mine.entry(name).or_insert(property);
                    }
                }
                (None, value) => {
                    out.insert(key, value);
                }
                _ => {}
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_in_both_spellings() {
        assert_eq!(
            reference(&json!({"$ref": "#/definitions/A"})),
            Some("#/definitions/A")
        );
        assert_eq!(
            reference(&json!({"allOf": [{"$ref": "#/components/schemas/A"}], "description": "d"})),
            Some("#/components/schemas/A")
        );
        assert_eq!(
            reference(&json!({"allOf": [{"$ref": "#/a"}, {"$ref": "#/b"}]})),
            None
        );
        assert_eq!(reference(&json!({"type": "object"})), None);
    }

    #[test]
    fn all_of_folds_properties_and_keeps_the_outer_keywords() {
        let definitions = json!({
            "Base": {"type": "object", "description": "base",
                     "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
            "Nested": {"allOf": [{"$ref": "#/definitions/Base"}], "properties": {"c": {"type": "boolean"}}}
        });
        let resolve = |r: &str| {
            definitions
                .get(r.trim_start_matches("#/definitions/"))
                .cloned()
        };
        let schema = json!({
            "description": "outer",
            "properties": {"b": {"type": "string"}},
            "allOf": [{"$ref": "#/definitions/Nested"}, {"$ref": "#/definitions/Missing"},
                      {"required": ["a"]}]
        });
        assert_eq!(
            flatten_all_of(&schema, &resolve),
            json!({
                "description": "outer",
                "properties": {"b": {"type": "string"}, "c": {"type": "boolean"},
                               "a": {"type": "string"}},
                "type": "object",
                "required": ["a"]
            })
        );
        let plain = json!({"type": "string"});
        assert_eq!(flatten_all_of(&plain, &resolve), plain);
    }
}
