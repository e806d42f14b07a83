//! One self-contained structural schema per kind, from k8s-openapi's definitions.
//!
//! A CRD's `openAPIV3Schema` may not use `$ref`, and every node must say its `type` unless it
//! is int-or-string or preserves unknown fields; the apiserver prunes, defaults and validates
//! custom resources by that tree. The definitions schemars gives are OpenAPI 3.0 with
//! references (`$ref`, or a one-element `allOf` when the reference carries a description), so
//! each reference is replaced by a copy of its definition, with the referring site's
//! description and extensions laid over it. What does not fit the structural rules is mapped
//! the way Kubernetes maps it for CRDs: an untyped node (apiextensions `JSON`, any value) and
//! an object without declared fields (`RawExtension`, `FieldsV1`) preserve unknown fields
//! instead of pruning everything, and a type that contains itself (`JSONSchemaProps`) is cut at
//! its second occurrence the same way. Keywords a CRD schema does not know are dropped, and so
//! are defaults: the only ones kept are those this module adds to list-map keys.

use serde_json::{Map, Value, json};

use super::extensions::map_key_default;

/// Descriptions are cut to their first sentence, and that to at most this many characters:
/// kubectl explain still says what a field is, while the Pod template, copied into five CRDs,
/// keeps each CRD's JSON well under the 256 KiB that client-side `kubectl apply` can store in
/// its last-applied annotation (full descriptions would take it past that).
const DESCRIPTION_LIMIT: usize = 200;

/// Fields Kubernetes never requires, although k8s-openapi marks `metadata` required wherever
/// the Rust field is not an `Option`.
const NEVER_REQUIRED: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// apiextensions' `JSON` holds any value, but k8s-openapi declares it an object; Kubernetes
/// publishes it untyped.
const ANY_JSON: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON";

const PRESERVE_UNKNOWN: &str = "x-kubernetes-preserve-unknown-fields";
const INT_OR_STRING: &str = "x-kubernetes-int-or-string";

/// The structural schema of `root`, one of `definitions` (keyed by definition name, references
/// written `#/components/schemas/<name>`).
pub(crate) fn structural(definitions: &Map<String, Value>, root: &str) -> Map<String, Value> {
    Inliner {
        definitions,
        stack: Vec::new(),
    }
    .definition(root)
}

struct Inliner<'a> {
    definitions: &'a Map<String, Value>,
    /// Definitions being inlined, outermost first; a reference to one of them is a cycle.
    stack: Vec<&'a str>,
}

impl<'a> Inliner<'a> {
    fn definition(&mut self, name: &str) -> Map<String, Value> {
        let Some((name, schema)) = self.definitions.get_key_value(name) else {
            return preserving(None);
        };
        if name == ANY_JSON {
            return preserving(schema.get("description"));
        }
        if self.stack.contains(&name.as_str()) {
            let mut cut = preserving(schema.get("description"));
            cut.insert("type".into(), json!("object"));
            return cut;
        }
        self.stack.push(name);
        let inlined = self.node(schema);
        self.stack.pop();
        inlined
    }

    fn node(&mut self, schema: &'a Value) -> Map<String, Value> {
        let Value::Object(schema) = schema else {
            return preserving(None);
        };
        let mut out = match reference(schema) {
            Some(target) => {
                let mut inlined = self.definition(target);
                inlined.extend(self.keywords(schema));
                inlined
            }
            None => self.keywords(schema),
        };
        complete(&mut out);
        out
    }

    /// The keywords of `schema` itself, with subschemas inlined; references are left to the caller.
    fn keywords(&mut self, schema: &'a Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, value) in schema {
            let converted = match (key.as_str(), value) {
                ("description", Value::String(text)) => json!(brief(text)),
                ("type" | "format", _) => value.clone(),
                (key, _) if key.starts_with("x-kubernetes-") => value.clone(),
                ("required", Value::Array(names)) => {
                    let names: Vec<&Value> = names
                        .iter()
                        .filter(|name| !NEVER_REQUIRED.iter().any(|never| *name == never))
                        .collect();
                    if names.is_empty() {
                        continue;
                    }
                    json!(names)
                }
                ("properties", Value::Object(properties)) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, property)| (name.clone(), Value::Object(self.node(property))))
                        .collect(),
                ),
                ("items" | "additionalProperties", Value::Object(_)) => {
                    Value::Object(self.node(value))
                }
                _ => continue,
            };
            out.insert(key.clone(), converted);
        }
        out
    }
}

/// The definition `schema` refers to: `$ref` directly, or the single entry of an `allOf`.
fn reference(schema: &Map<String, Value>) -> Option<&str> {
    let direct = schema.get("$ref");
    let wrapped = || match schema.get("allOf") {
        Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref"),
        _ => None,
    };
    direct
        .or_else(wrapped)
        .and_then(Value::as_str)
        .map(|reference| reference.rsplit('/').next().unwrap_or(reference))
}

/// Structural fixes that depend on the finished node: an unknown shape preserves its fields, and
/// optional list-map keys get the default Kubernetes gives them.
fn complete(node: &mut Map<String, Value>) {
    let typed = node.contains_key("type") || node.contains_key(INT_OR_STRING);
    let open_object = node.get("type") == Some(&json!("object"))
        && !node.contains_key("properties")
        && !node.contains_key("additionalProperties");
    if !typed || open_object {
        node.insert(PRESERVE_UNKNOWN.into(), json!(true));
    }
    if node.get("x-kubernetes-list-type") == Some(&json!("map")) {
        default_optional_map_keys(node);
    }
}

fn default_optional_map_keys(list: &mut Map<String, Value>) {
    let keys: Vec<String> = list
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let Some(Value::Object(item)) = list.get_mut("items") else {
        return;
    };
    let required: Vec<Value> = match item.get("required") {
        Some(Value::Array(required)) => required.clone(),
        _ => Vec::new(),
    };
    for key in keys {
        if required.contains(&json!(key)) {
            continue;
        }
        let property = item
            .get_mut("properties")
            .and_then(|properties| properties.get_mut(&key))
            .and_then(Value::as_object_mut);
        if let (Some(property), Some(default)) = (property, map_key_default(&key)) {
            property.entry("default").or_insert(default);
        }
    }
}

/// A node that keeps whatever it is given, with `description` (shortened) when there is one.
fn preserving(description: Option<&Value>) -> Map<String, Value> {
    let mut node = Map::new();
    if let Some(Value::String(text)) = description {
        node.insert("description".into(), json!(brief(text)));
    }
    node.insert(PRESERVE_UNKNOWN.into(), json!(true));
    node
}

/// The first sentence of `text`, cut at a word within [`DESCRIPTION_LIMIT`] characters.
fn brief(text: &str) -> String {
    let sentence_end = text
        .match_indices(". ")
        .map(|(index, _)| index)
        .chain(text.find("\n\n"))
        .filter(|&index| {
            let head = &text[..index];
            !head.ends_with("e.g") && !head.ends_with("i.e")
        })
        .min();
    let sentence = match sentence_end {
        Some(index) if text[index..].starts_with('.') => &text[..=index],
        Some(index) => &text[..index],
        None => text,
    }
    .trim();
    if sentence.chars().count() <= DESCRIPTION_LIMIT {
        return sentence.to_owned();
    }
    let end = sentence
        .char_indices()
        .nth(DESCRIPTION_LIMIT)
        .map_or(sentence.len(), |(index, _)| index);
    let head = &sentence[..end];
    let word = head.rfind(' ').unwrap_or(end);
    format!("{}...", &head[..word])
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    use schemars::generate::SchemaSettings;

    use super::*;

    #[test]
    fn recursive_and_untyped_definitions_preserve_unknown_fields() {
        let mut generator = SchemaSettings::openapi3().into_generator();
        generator.subschema_for::<JSONSchemaProps>();
        let definitions: Map<String, Value> = generator.take_definitions(true);
        let props = structural(
            &definitions,
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
        );
        let properties = &props["properties"];
        // JSON: no type at all.
        assert_eq!(properties["default"][PRESERVE_UNKNOWN], json!(true));
        assert!(properties["default"].get("type").is_none());
        // The recursion is cut at the first nested JSONSchemaProps.
        let nested = &properties["not"];
        assert_eq!(nested["type"], json!("object"));
        assert_eq!(nested[PRESERVE_UNKNOWN], json!(true));
        assert!(nested.get("properties").is_none());
        // A property that happens to be called `$ref` is a field, not a reference.
        assert_eq!(properties["$ref"]["type"], json!("string"));
    }

    #[test]
    fn a_missing_definition_preserves_unknown_fields() {
        let definitions = json!({ "a": { "type": "object", "properties": {
            "b": { "description": "B.", "allOf": [{ "$ref": "#/components/schemas/missing" }] },
        }}});
        let Value::Object(definitions) = definitions else {
            unreachable!()
        };
        let a = structural(&definitions, "a");
        assert_eq!(
            a["properties"]["b"],
            json!({ PRESERVE_UNKNOWN: true, "description": "B." })
        );
    }

    #[test]
    fn descriptions_keep_their_first_sentence() {
        assert_eq!(brief("One. Two."), "One.");
        assert_eq!(brief("A list\n\nof things."), "A list");
        assert_eq!(brief("Names, e.g. foo. More."), "Names, e.g. foo.");
        let long = "word ".repeat(100);
        let short = brief(&long);
        assert!(short.len() <= DESCRIPTION_LIMIT + 3 && short.ends_with("word..."));
    }
}
