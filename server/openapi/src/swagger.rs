//! OpenAPI v3 schemas → Swagger 2.0 schemas.
//!
//! Definitions are kept in the v3 flavour only; the v2 document is derived. The rules follow
//! what v2 consumers accept, most strictly kube-openapi's `proto` parser that kubectl (before
//! 1.29 unconditionally) runs over every v2 definition: a `$ref` may carry a description but no
//! type or properties, every schema has at most one type, and keywords Swagger 2.0 lacks
//! (`nullable`, `oneOf`, `anyOf`, `not`, ...) are dropped rather than passed on.

use serde_json::{Map, Value};

use crate::definitions::V3_REF_PREFIX;

pub(crate) const V2_REF_PREFIX: &str = "#/definitions/";

/// Keywords of the OpenAPI 3.0 schema object that a Swagger 2.0 schema object does not have.
const V3_ONLY: &[&str] = &[
    "nullable",
    "oneOf",
    "anyOf",
    "not",
    "writeOnly",
    "deprecated",
];

/// Converts one schema (recursively) to its Swagger 2.0 form.
pub(crate) fn schema_to_v2(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        if V3_ONLY.contains(&key.as_str()) {
            continue;
        }
        let converted = match key.as_str() {
            "$ref" => match value.as_str().and_then(|r| r.strip_prefix(V3_REF_PREFIX)) {
                Some(name) => Value::String(format!("{V2_REF_PREFIX}{name}")),
                None => value.clone(),
            },
            "type" => match value {
                Value::Array(types) => types
                    .iter()
                    .find(|t| t.as_str() != Some("null"))
                    .cloned()
                    .unwrap_or(Value::Null),
                _ => value.clone(),
            },
            "properties" | "patternProperties" => match value {
                Value::Object(properties) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, property)| (name.clone(), schema_to_v2(property)))
                        .collect(),
                ),
                _ => value.clone(),
            },
            "items" | "additionalProperties" => schema_to_v2(value),
            "allOf" => match value {
                Value::Array(schemas) => schemas.iter().map(schema_to_v2).collect(),
                _ => value.clone(),
            },
            _ => value.clone(),
        };
        if !converted.is_null() {
            out.insert(key.clone(), converted);
        }
    }
    unwrap_single_ref(&mut out);
    Value::Object(out)
}

/// `{description, allOf: [{$ref}]}` → `{description, $ref}`: the v2 idiom, and the only form the
/// proto parser follows (it ignores `allOf`).
fn unwrap_single_ref(schema: &mut Map<String, Value>) {
    if schema.contains_key("$ref")
        || schema.contains_key("type")
        || schema.contains_key("properties")
    {
        return;
    }
    let reference = match schema.get("allOf") {
        Some(Value::Array(all_of)) if all_of.len() == 1 => match &all_of[0] {
            Value::Object(only) if only.len() == 1 => only.get("$ref").cloned(),
            _ => None,
        },
        _ => None,
    };
    if let Some(reference) = reference {
        schema.remove("allOf");
        schema.insert("$ref".into(), reference);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_refs_nullable_and_type_arrays() {
        let v3 = json!({
            "type": "object",
            "properties": {
                "metadata": { "description": "meta", "allOf": [{ "$ref": "#/components/schemas/a.B" }] },
                "maybe": { "type": ["string", "null"], "nullable": true },
                "choice": { "anyOf": [{ "type": "integer" }, { "type": "string" }], "x-kubernetes-int-or-string": true },
                "list": { "type": "array", "items": { "$ref": "#/components/schemas/a.C" } },
            },
        });
        let v2 = schema_to_v2(&v3);
        assert_eq!(
            v2["properties"]["metadata"],
            json!({ "description": "meta", "$ref": "#/definitions/a.B" })
        );
        assert_eq!(v2["properties"]["maybe"], json!({ "type": "string" }));
        assert_eq!(
            v2["properties"]["choice"],
            json!({ "x-kubernetes-int-or-string": true })
        );
        assert_eq!(
            v2["properties"]["list"]["items"],
            json!({ "$ref": "#/definitions/a.C" })
        );
    }

    #[test]
    fn keeps_multi_element_all_of() {
        let v3 = json!({ "allOf": [{ "$ref": "#/components/schemas/a.B" }, { "type": "object" }] });
        let v2 = schema_to_v2(&v3);
        assert_eq!(v2["allOf"][0]["$ref"], json!("#/definitions/a.B"));
        assert!(v2.get("$ref").is_none());
    }
}
