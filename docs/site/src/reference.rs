//! The field reference of the operator's custom resources, rendered as Markdown from their CRDs
//! (the `openAPIV3Schema` of each kind), so the reference cannot drift from the API: a test
//! compares `docs/operator-reference.md` with this rendering.
//!
//! Every field of `spec` and `status` gets a row (path, type, default, required, description).
//! Fields whose type is a Kubernetes core type (volumes, resources, affinity, tolerations, ...)
//! get one row naming that type instead of its whole subtree, which the Kubernetes API reference
//! documents. [`field_paths`] lists the same rows' paths for the examples' coverage check.

use std::collections::BTreeSet;

use serde_json::Value;

/// Field names whose values are Kubernetes core types, with the type they are.
const KUBERNETES_TYPES: &[(&str, &str)] = &[
    ("resources", "ResourceRequirements"),
    ("extraVolumes", "[]Volume"),
    ("extraVolumeMounts", "[]VolumeMount"),
    ("affinity", "Affinity"),
    ("tolerations", "[]Toleration"),
    ("topologySpreadConstraints", "[]TopologySpreadConstraint"),
    ("hostAliases", "[]HostAlias"),
    ("imagePullSecrets", "[]LocalObjectReference"),
    ("conditions", "[]Condition"),
];

/// One row of the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// `spec.etcd.managed.replicas`; `[]` marks list items, `<name>` map values.
    pub path: String,
    pub kind: String,
    pub required: bool,
    pub default: Option<String>,
    pub description: String,
    /// A Kubernetes core type, not described further here.
    pub opaque: bool,
}

fn type_of(schema: &Value) -> String {
    match schema["type"].as_str() {
        Some("array") => format!("[]{}", type_of(&schema["items"])),
        Some("object") if schema["additionalProperties"].is_object() => {
            format!("map[string]{}", type_of(&schema["additionalProperties"]))
        }
        Some(kind) => kind.to_owned(),
        None if schema["x-kubernetes-int-or-string"] == true => "int or string".to_owned(),
        None if schema["x-kubernetes-preserve-unknown-fields"] == true => "any".to_owned(),
        None => "object".to_owned(),
    }
}

fn walk(schema: &Value, path: &str, required: bool, out: &mut Vec<Field>) {
    let name = path
        .rsplit('.')
        .next()
        .unwrap_or(path)
        .trim_end_matches("[]");
    let kubernetes = KUBERNETES_TYPES.iter().find(|(field, _)| *field == name);
    out.push(Field {
        path: path.to_owned(),
        kind: kubernetes.map_or_else(|| type_of(schema), |(_, kind)| (*kind).to_owned()),
        required,
        default: (!schema["default"].is_null()).then(|| schema["default"].to_string()),
        description: schema["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        opaque: kubernetes.is_some(),
    });
    if kubernetes.is_some() {
        return;
    }
    children(schema, path, out);
}

fn children(schema: &Value, path: &str, out: &mut Vec<Field>) {
    if schema["type"] == "array" {
        let items = &schema["items"];
        if items["properties"].is_object() || items["additionalProperties"].is_object() {
            children(items, &format!("{path}[]"), out);
        }
        return;
    }
    if schema["additionalProperties"].is_object() {
        let values = &schema["additionalProperties"];
        if values["properties"].is_object() {
            children(values, &format!("{path}.<name>"), out);
        }
        return;
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for (name, child) in schema["properties"].as_object().into_iter().flatten() {
        walk(
            child,
            &format!("{path}.{name}"),
            required.contains(&name.as_str()),
            out,
        );
    }
}

/// The storage version of a CRD (the one the reference describes).
fn storage_version(crd: &Value) -> Option<&Value> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|version| version["storage"] == true)
}

/// The rows of one CRD's storage version: `spec` and `status` and everything under them.
pub fn fields(crd: &Value) -> Vec<Field> {
    let Some(version) = storage_version(crd) else {
        return Vec::new();
    };
    let root = &version["schema"]["openAPIV3Schema"];
    let required: Vec<&str> = root["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Vec::new();
    for top in ["spec", "status"] {
        if root["properties"][top].is_object() {
            walk(
                &root["properties"][top],
                top,
                required.contains(&top),
                &mut out,
            );
        }
    }
    out
}

/// The field paths of [`fields`] that are leaves (no rows under them), for coverage checks.
pub fn field_paths(crd: &Value) -> Vec<String> {
    let fields = fields(crd);
    fields
        .iter()
        .filter(|field| {
            let below = format!("{}.", field.path);
            let items = format!("{}[]", field.path);
            !fields
                .iter()
                .any(|other| other.path.starts_with(&below) || other.path.starts_with(&items))
        })
        .map(|field| field.path.clone())
        .collect()
}

fn set_walk(schema: &Value, value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Array(items) => {
            for item in items {
                set_walk(&schema["items"], item, &format!("{path}[]"), out);
            }
        }
        Value::Object(fields) => {
            for (key, child) in fields {
                let (child_path, child_schema) = if schema["properties"][key].is_object() {
                    (format!("{path}.{key}"), &schema["properties"][key])
                } else if schema["additionalProperties"].is_object() {
                    (format!("{path}.<name>"), &schema["additionalProperties"])
                } else {
                    continue;
                };
                out.insert(child_path.clone());
                if !KUBERNETES_TYPES.iter().any(|(name, _)| name == key) {
                    set_walk(child_schema, child, &child_path, out);
                }
            }
        }
        _ => {}
    }
}

/// The reference paths (as [`fields`] names them) that `object` sets under `spec`, following
/// `crd`'s schema: map keys become `<name>`, list items `[]`, and the inside of a Kubernetes type
/// is not entered.
pub fn set_paths(crd: &Value, object: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(version) = storage_version(crd) else {
        return out;
    };
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    if !object["spec"].is_null() {
        out.insert("spec".to_owned());
        set_walk(spec, &object["spec"], "spec", &mut out);
    }
    out
}

/// A table cell: one line, pipes escaped, and `<`/`>` outside code spans too (they would open
/// HTML tags).
fn cell(text: &str) -> String {
    let line = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|");
    line.split('`')
        .enumerate()
        .map(|(index, part)| {
            if index % 2 == 0 {
                part.replace('<', "&lt;").replace('>', "&gt;")
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// The reference page for `crds` (in the order given), under `intro`.
pub fn render(intro: &str, crds: &[Value]) -> String {
    let mut page = String::from(intro);
    for crd in crds {
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let version = storage_version(crd)
            .and_then(|version| version["name"].as_str())
            .unwrap_or_default();
        let scope = crd["spec"]["scope"].as_str().unwrap_or_default();
        page.push_str(&format!(
            "\n## {kind}\n\n`apiVersion: {group}/{version}`, `kind: {kind}`, {scope}; short name(s): {}.\n\n\
             | Field | Type | Required | Default | Description |\n|---|---|---|---|---|\n",
            crd["spec"]["names"]["shortNames"]
                .as_array()
                .filter(|names| !names.is_empty())
                .map_or("none".to_owned(), |names| names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", "))
        ));
        for field in fields(crd) {
            let description = if field.opaque {
                format!(
                    "A Kubernetes `{}` (see the Kubernetes API reference). {}",
                    field.kind.trim_start_matches("[]"),
                    field.description
                )
            } else {
                field.description.clone()
            };
            page.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                field.path,
                cell(&field.kind),
                if field.required { "yes" } else { "" },
                field
                    .default
                    .as_deref()
                    .map_or(String::new(), |d| format!("`{}`", cell(d))),
                cell(&description),
            ));
        }
    }
    page
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn crd() -> Value {
        json!({
            "spec": {
                "group": "example.io", "scope": "Namespaced",
                "names": {"kind": "Thing"},
                "versions": [{"name": "v1", "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "required": ["spec"],
                    "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "default": 1, "description": "How | big"},
                        "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
                        "templates": {"type": "object", "additionalProperties": {"type": "object", "properties": {"days": {"type": "integer"}}}},
                        "resources": {"type": "object", "properties": {"limits": {"type": "object"}}},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    }}}
                }}}]
            }
        })
    }

    #[test]
    fn rows_for_every_field_but_inside_kubernetes_types() {
        let paths: Vec<String> = fields(&crd()).into_iter().map(|f| f.path).collect();
        assert_eq!(
            paths,
            vec![
                "spec",
                "spec.size",
                "spec.ports",
                "spec.ports[].port",
                "spec.templates",
                "spec.templates.<name>.days",
                "spec.resources",
                "spec.tags"
            ]
        );
        assert_eq!(
            field_paths(&crd()),
            vec![
                "spec.size",
                "spec.ports[].port",
                "spec.templates.<name>.days",
                "spec.resources",
                "spec.tags"
            ]
        );
        let set = set_paths(
            &crd(),
            &json!({"spec": {"size": 2, "ports": [{"port": 1}], "templates": {"a": {"days": 3}}, "resources": {"limits": {}}, "unknown": 1}}),
        );
        assert_eq!(
            set.into_iter().collect::<Vec<_>>(),
            vec![
                "spec",
                "spec.ports",
                "spec.ports[].port",
                "spec.resources",
                "spec.size",
                "spec.templates",
                "spec.templates.<name>",
                "spec.templates.<name>.days"
            ]
        );
        let page = render("# R\n", &[crd()]);
        assert!(
            page.contains("| `spec.size` | integer | yes | `1` | How \\| big |"),
            "{page}"
        );
        assert!(
            page.contains("| `spec.resources` | ResourceRequirements |"),
            "{page}"
        );
        assert!(page.contains("| `spec.tags` | []string |"), "{page}");
        assert!(
            page.contains("| `spec.templates` | map[string]object |"),
            "{page}"
        );
    }
}
