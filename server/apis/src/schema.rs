//! APIResourceSchemas: their names and the CustomResourceDefinition a bound schema is served as.
//!
//! A schema is named `<prefix>.<plural>.<group>` (`core` for the legacy group; upstream's versioned
//! `v<yymmdd>-<hash>` prefixes follow this rule) and never changes after creation: a new version of
//! an API is a new schema. Upstream turns a bound schema into a CRD in `system:bound-crds`; here the
//! same CRD value is built in memory and handed to the CRD machinery (`CrdInfo::from_crd`), so bound
//! resources get pruning, defaults, validation, CEL, tables, discovery and OpenAPI as CRDs do,
//! and an invalid schema is refused at admission with the CRD machinery's own errors.

use serde_json::{Map, Value, json};

/// The group as it appears in names: `core` for the legacy group.
pub fn group_in_names(group: &str) -> &str {
    if group.is_empty() { "core" } else { group }
}

fn spec_str<'a>(schema: &'a Value, pointer: &str) -> &'a str {
    schema
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The schema's group (`""` for the legacy group) and plural.
pub fn group_resource(schema: &Value) -> (String, String) {
    (
        spec_str(schema, "/spec/group").to_string(),
        spec_str(schema, "/spec/names/plural").to_string(),
    )
}

/// Why a schema's name does not fit its spec (upstream's messages), if it does not.
pub fn name_error(name: &str, schema: &Value) -> Option<String> {
    let (group, plural) = group_resource(schema);
    if plural.is_empty() {
        return None;
    }
    let suffix = format!(".{plural}.{}", group_in_names(&group));
    let Some(prefix) = name.strip_suffix(&suffix) else {
        return Some(format!("must end in {suffix}"));
    };
    let valid_prefix = prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && !prefix.ends_with('-')
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!valid_prefix).then(|| format!("must match ^[a-z]([-a-z0-9]*[a-z0-9])?$ in front of {suffix}"))
}

/// The CRD a schema is served as: its group, names, scope and versions (each version's `schema`
/// becoming `schema.openAPIV3Schema`), conversion strategy `None`.
pub fn to_crd(schema: &Value) -> Value {
    let spec = schema.get("spec").cloned().unwrap_or_else(|| json!({}));
    let (group, plural) = group_resource(schema);
    let versions: Vec<Value> = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(crd_version)
        .collect();
    let mut crd_spec = json!({
        "group": group,
        "names": spec["names"],
        "scope": spec["scope"],
        "versions": versions,
        "conversion": {"strategy": "None"},
    });
    if let Some(validation) = spec.get("nameValidation") {
        crd_spec["nameValidation"] = validation.clone();
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{}", group_in_names(&group))},
        "spec": crd_spec,
    })
}

fn crd_version(version: &Value) -> Value {
    let mut out = Map::new();
    for field in [
        "name",
        "served",
        "storage",
        "deprecated",
        "deprecationWarning",
        "subresources",
        "additionalPrinterColumns",
        "selectableFields",
    ] {
        if let Some(value) = version.get(field) {
            out.insert(field.to_string(), value.clone());
        }
    }
    out.insert(
        "schema".to_string(),
        json!({"openAPIV3Schema": version.get("schema").cloned().unwrap_or_else(|| json!({}))}),
    );
    Value::Object(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kcp_apiextensions::CrdInfo;

    /// A schema of `widgets.example.com` (namespaced, one version, a status subresource).
    pub fn widgets(name: &str) -> Value {
        json!({
            "apiVersion": "apis.kcp.io/v1alpha1",
            "kind": "APIResourceSchema",
            "metadata": {"name": name, "uid": "u1"},
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"type": "object", "properties": {"spec": {"type": "object",
                        "properties": {"size": {"type": "integer", "default": 1}}}}},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                }],
            },
        })
    }

    #[test]
    fn a_schema_is_served_as_a_crd() {
        let crd = to_crd(&widgets("today.widgets.example.com"));
        let info = CrdInfo::from_crd(&crd).unwrap();
        assert_eq!(
            (info.group.as_str(), info.plural.as_str()),
            ("example.com", "widgets")
        );
        assert!(info.namespaced);
        assert_eq!(info.versions[0].printer_columns.len(), 1);
        assert!(info.versions[0].status_subresource);
    }

    #[test]
    fn names_follow_upstreams_rule() {
        let schema = widgets("x");
        assert_eq!(name_error("today.widgets.example.com", &schema), None);
        assert_eq!(
            name_error("widgets.example.com", &schema).as_deref(),
            Some("must end in .widgets.example.com")
        );
        assert!(name_error("Today.widgets.example.com", &schema).is_some());
        let mut core = schema.clone();
        core["spec"]["group"] = json!("");
        assert_eq!(name_error("v1.widgets.core", &core), None);
    }
}
