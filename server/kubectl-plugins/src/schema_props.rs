//! A CRD version's `openAPIV3Schema` as upstream's snapshot carries it: decoded into
//! apiextensions' typed `JSONSchemaProps` and encoded again. That round trip keeps every
//! keyword of the structural-schema vocabulary with its value, and only:
//!
//! - orders each schema's keywords as the Go struct declares them (`properties`,
//!   `patternProperties`, `definitions` and `dependencies` by name, as Go encodes maps);
//! - drops what the struct would omit: keywords it does not know, `false` for plain booleans
//!   (`nullable`, `uniqueItems`, `x-kubernetes-int-or-string`...), empty strings, lists and maps,
//!   and `null`;
//! - writes whole-number `maximum`, `minimum` and `multipleOf` without a fraction (Go prints the
//!   float `5.0` as `5`).
//!
//! `default`, `example` and `enum` values are raw JSON in Go and pass untouched.

use serde_json::{Map, Value};

/// How the typed struct holds a keyword, which decides what survives its round trip.
#[derive(Clone, Copy)]
enum Slot {
    /// `string` with omitempty: dropped when empty.
    Text,
    /// `bool` with omitempty: dropped when false.
    Flag,
    /// A pointer or raw JSON: dropped only when null.
    Value,
    /// `*float64`: dropped when null, whole numbers without a fraction.
    Float,
    /// A slice with omitempty: dropped when empty.
    List,
    /// A nested schema (`not`).
    Schema,
    /// `[]JSONSchemaProps`.
    Schemas,
    /// `map[string]JSONSchemaProps`, encoded with sorted keys.
    SchemaMap,
    /// `JSONSchemaPropsOrArray` (`items`): a schema or a list of schemas.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool`: a boolean or a schema.
    SchemaOrBool,
    /// `JSONSchemaDependencies`: by name, a schema or a list of property names.
    Dependencies,
}

/// `JSONSchemaProps`' fields in declaration order.
const FIELDS: &[(&str, Slot)] = &[
    ("id", Slot::Text),
    ("$schema", Slot::Text),
    ("$ref", Slot::Value),
    ("description", Slot::Text),
    ("type", Slot::Text),
    ("format", Slot::Text),
    ("title", Slot::Text),
    ("default", Slot::Value),
    ("maximum", Slot::Float),
    ("exclusiveMaximum", Slot::Flag),
    ("minimum", Slot::Float),
    ("exclusiveMinimum", Slot::Flag),
    ("maxLength", Slot::Value),
    ("minLength", Slot::Value),
    ("pattern", Slot::Text),
    ("maxItems", Slot::Value),
    ("minItems", Slot::Value),
    ("uniqueItems", Slot::Flag),
    ("multipleOf", Slot::Float),
    ("enum", Slot::List),
    ("maxProperties", Slot::Value),
    ("minProperties", Slot::Value),
    ("required", Slot::List),
    ("items", Slot::SchemaOrArray),
    ("allOf", Slot::Schemas),
    ("oneOf", Slot::Schemas),
    ("anyOf", Slot::Schemas),
    ("not", Slot::Schema),
    ("properties", Slot::SchemaMap),
    ("additionalProperties", Slot::SchemaOrBool),
    ("patternProperties", Slot::SchemaMap),
    ("dependencies", Slot::Dependencies),
    ("additionalItems", Slot::SchemaOrBool),
    ("definitions", Slot::SchemaMap),
    ("externalDocs", Slot::Value),
    ("example", Slot::Value),
    ("nullable", Slot::Flag),
    ("x-kubernetes-preserve-unknown-fields", Slot::Value),
    ("x-kubernetes-embedded-resource", Slot::Flag),
    ("x-kubernetes-int-or-string", Slot::Flag),
    ("x-kubernetes-list-map-keys", Slot::List),
    ("x-kubernetes-list-type", Slot::Value),
    ("x-kubernetes-map-type", Slot::Value),
    ("x-kubernetes-validations", Slot::List),
];

/// The schema as the typed round trip leaves it.
pub fn normalize(schema: &Value) -> Value {
    let Some(props) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, slot) in FIELDS {
        let Some(value) = props.get(*key) else {
            continue;
        };
        if let Some(kept) = keep(value, *slot) {
            out.insert((*key).to_owned(), kept);
        }
    }
    Value::Object(out)
}

fn keep(value: &Value, slot: Slot) -> Option<Value> {
    if value.is_null() {
        return None;
    }
    match slot {
        Slot::Text => value
            .as_str()
            .is_none_or(|s| !s.is_empty())
            .then(|| value.clone()),
        Slot::Flag => (value != &Value::Bool(false)).then(|| value.clone()),
        Slot::Value => Some(value.clone()),
        Slot::Float => Some(whole_number(value)),
        Slot::List => value
            .as_array()
            .is_none_or(|a| !a.is_empty())
            .then(|| value.clone()),
        Slot::Schema => Some(normalize(value)),
        Slot::Schemas => value
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|items| Value::Array(items.iter().map(normalize).collect())),
        Slot::SchemaMap => sorted_map(value, normalize),
        Slot::SchemaOrArray => Some(match value {
            Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
            schema => normalize(schema),
        }),
        Slot::SchemaOrBool => Some(match value {
            Value::Bool(_) => value.clone(),
            schema => normalize(schema),
        }),
        Slot::Dependencies => sorted_map(value, |dependency| match dependency {
            Value::Array(_) => dependency.clone(),
            schema => normalize(schema),
        }),
    }
}

/// A Go map: keys sorted, each value converted; empty maps are omitted.
fn sorted_map(value: &Value, convert: impl Fn(&Value) -> Value) -> Option<Value> {
    let map = value.as_object().filter(|m| !m.is_empty())?;
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    Some(Value::Object(
        keys.into_iter()
            .map(|k| (k.clone(), convert(&map[k.as_str()])))
            .collect(),
    ))
}

/// Go's float formatting of a whole number has no fraction.
fn whole_number(value: &Value) -> Value {
    match value.as_f64() {
        Some(f) if value.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_vocabulary_in_struct_order() {
        let input = json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": false,
            "properties": {
                "z": {"type": "integer", "maximum": 5.0, "minimum": 0.5, "nullable": false},
                "a": {"enum": ["x", null], "type": "string", "default": {"b": 1, "a": null}, "description": ""},
            },
            "required": [],
            "description": "d",
            "x-unknown-keyword": 1,
            "items": [{"type": "string", "uniqueItems": false}],
            "additionalProperties": false,
            "dependencies": {"b": ["a"], "a": {"type": "object", "properties": {}}},
        });
        let out = normalize(&input);
        assert_eq!(
            serde_json::to_string(&out).ok(),
            Some(
                concat!(
                    r#"{"description":"d","type":"object","items":[{"type":"string"}],"#,
                    r#""properties":{"a":{"type":"string","default":{"b":1,"a":null},"enum":["x",null]},"#,
                    r#""z":{"type":"integer","maximum":5,"minimum":0.5}},"#,
                    r#""additionalProperties":false,"dependencies":{"a":{"type":"object"},"b":["a"]},"#,
                    r#""x-kubernetes-preserve-unknown-fields":false}"#
                )
                .to_owned()
            )
        );
    }

    #[test]
    fn nested_schemas_in_every_position() {
        let input = json!({
            "allOf": [{"nullable": true, "bogus": 1}],
            "not": {"type": "string", "title": ""},
            "additionalProperties": {"type": "string", "x-kubernetes-int-or-string": false},
            "patternProperties": {"^a": {"type": "integer", "exclusiveMinimum": false}},
            "definitions": {},
            "items": {"type": "object", "x-kubernetes-embedded-resource": true},
        });
        assert_eq!(
            normalize(&input),
            json!({
                "items": {"type": "object", "x-kubernetes-embedded-resource": true},
                "allOf": [{"nullable": true}],
                "not": {"type": "string"},
                "additionalProperties": {"type": "string"},
                "patternProperties": {"^a": {"type": "integer"}},
            })
        );
    }
}
