//! `kubectl kcp crd snapshot`'s conversion: a CustomResourceDefinition to an
//! `apis.kcp.io/v1alpha1` APIResourceSchema, following upstream's `CRDToAPIResourceSchema` after
//! the CRD went through apiextensions' decoder and defaulting:
//!
//! - the name is `<prefix>.<crd name>` and must be a DNS-1123 subdomain;
//! - `spec.group`, `spec.names` (with `singular` and `listKind` defaulted as the API server
//!   does) and `spec.scope` are copied; `spec.preserveUnknownFields`, metadata other than the
//!   name and `status` are not carried;
//! - `spec.conversion` defaults to `{strategy: None}`; a `Webhook` conversion keeps its
//!   `conversionReviewVersions` and a URL client config (`url`, `caBundle`) and is refused when it
//!   points at a Service or has no URL;
//! - each version keeps `name`, `served`, `storage`, `deprecated` (when true),
//!   `deprecationWarning`, `additionalPrinterColumns`, `selectableFields`; its
//!   `schema.openAPIV3Schema` becomes `schema` after the typed round trip of
//!   [`crate::schema_props`] (`null` without one) and `subresources` is always present (`{}`
//!   without any).
//!
//! Keys are emitted in upstream's field order (`kind` before `apiVersion`, as Go's TypeMeta), so
//! `-o json` matches upstream's key order.

use kcp_apimachinery::status::{FieldError, aggregate};
use kcp_apimachinery::validation::is_dns1123_subdomain;
use serde_json::{Map, Value, json};

use crate::schema_props;

/// Why a CRD cannot become an APIResourceSchema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The field errors of the name, aggregated as Kubernetes prints them.
    #[error("{0}")]
    InvalidName(String),
    #[error("no kind {kind:?} is registered for version {api_version:?}")]
    NotACrd { kind: String, api_version: String },
    #[error("Object 'Kind' is missing in the document")]
    MissingKind,
    #[error("{0} must be {1}")]
    WrongType(&'static str, &'static str),
    #[error("webhooks that refer to services are not supported, please use URL instead")]
    WebhookService,
    #[error("webhooks URL must be set")]
    WebhookUrl,
}

const CRD_API_VERSION: &str = "apiextensions.k8s.io/v1";
const SCHEMA_API_VERSION: &str = "apis.kcp.io/v1alpha1";

/// Converts one decoded CRD document into the APIResourceSchema upstream writes.
pub fn crd_to_schema(crd: &Value, prefix: &str) -> Result<Value, SnapshotError> {
    let kind = text(crd, "/kind");
    let api_version = text(crd, "/apiVersion");
    if kind.is_empty() {
        return Err(SnapshotError::MissingKind);
    }
    if kind != "CustomResourceDefinition" || api_version != CRD_API_VERSION {
        return Err(SnapshotError::NotACrd {
            kind: kind.to_owned(),
            api_version: api_version.to_owned(),
        });
    }
    let name = format!("{prefix}.{}", text(crd, "/metadata/name"));
    let problems: Vec<FieldError> = is_dns1123_subdomain(&name)
        .iter()
        .map(|detail| FieldError::invalid("metadata.name", json!(name), detail))
        .collect();
    if let Some(message) = aggregate(&problems) {
        return Err(SnapshotError::InvalidName(message));
    }

    let spec = crd.get("spec").cloned().unwrap_or_else(|| json!({}));
    let versions = match spec.get("versions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(versions)) => versions.iter().map(version).collect(),
        Some(_) => return Err(SnapshotError::WrongType("spec.versions", "a list")),
    };
    let mut out = Map::new();
    out.insert(
        "group".into(),
        spec.get("group").cloned().unwrap_or(json!("")),
    );
    out.insert("names".into(), names(spec.get("names"))?);
    out.insert(
        "scope".into(),
        spec.get("scope").cloned().unwrap_or(json!("")),
    );
    out.insert("versions".into(), Value::Array(versions));
    out.insert("conversion".into(), conversion(spec.get("conversion"))?);
    Ok(json!({
        "kind": "APIResourceSchema",
        "apiVersion": SCHEMA_API_VERSION,
        "metadata": {"name": name},
        "spec": out,
    }))
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `CustomResourceDefinitionNames` in upstream's field order, with the server's defaults for
/// `singular` (lower-cased kind) and `listKind` (`<kind>List`).
fn names(names: Option<&Value>) -> Result<Value, SnapshotError> {
    let names = match names {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(SnapshotError::WrongType("spec.names", "an object")),
    };
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let present = |key: &str| {
        names
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    let mut out = Map::new();
    out.insert(
        "plural".into(),
        names.get("plural").cloned().unwrap_or(json!("")),
    );
    if present("singular") {
        out.insert("singular".into(), names["singular"].clone());
    } else if !kind.is_empty() {
        out.insert("singular".into(), json!(kind.to_lowercase()));
    }
    copy_non_empty(&names, &mut out, "shortNames");
    out.insert("kind".into(), json!(kind));
    if present("listKind") {
        out.insert("listKind".into(), names["listKind"].clone());
    } else if !kind.is_empty() {
        out.insert("listKind".into(), json!(format!("{kind}List")));
    }
    copy_non_empty(&names, &mut out, "categories");
    Ok(Value::Object(out))
}

/// Copies `key` unless it is absent, null, `false`, `""`, `[]` or `{}` (Go's `omitempty`).
fn copy_non_empty(from: &Map<String, Value>, to: &mut Map<String, Value>, key: &str) {
    let keep = match from.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    if keep {
        to.insert(key.to_owned(), from[key].clone());
    }
}

/// One `APIResourceVersion` from a CRD version.
fn version(crd_version: &Value) -> Value {
    let empty = Map::new();
    let from = crd_version.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    out.insert(
        "name".into(),
        from.get("name").cloned().unwrap_or(json!("")),
    );
    for flag in ["served", "storage"] {
        let value = from.get(flag).and_then(Value::as_bool).unwrap_or(false);
        out.insert(flag.into(), json!(value));
    }
    copy_non_empty(from, &mut out, "deprecated");
    if let Some(warning) = from.get("deprecationWarning").filter(|w| !w.is_null()) {
        out.insert("deprecationWarning".into(), warning.clone());
    }
    let schema = crd_version
        .pointer("/schema/openAPIV3Schema")
        .filter(|s| !s.is_null())
        .map_or(Value::Null, schema_props::normalize);
    out.insert("schema".into(), schema);
    let subresources = match from.get("subresources") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        _ => json!({}),
    };
    out.insert("subresources".into(), subresources);
    copy_non_empty(from, &mut out, "additionalPrinterColumns");
    copy_non_empty(from, &mut out, "selectableFields");
    Value::Object(out)
}

/// `spec.conversion`, defaulted to `None` as apiextensions' defaulting does.
fn conversion(conversion: Option<&Value>) -> Result<Value, SnapshotError> {
    let Some(conversion) = conversion.filter(|c| !c.is_null()) else {
        return Ok(json!({"strategy": "None"}));
    };
    let strategy = conversion
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if strategy != "Webhook" {
        return Ok(json!({ "strategy": strategy }));
    }
    let webhook = conversion.get("webhook").cloned().unwrap_or(Value::Null);
    let mut out = Map::new();
    if let Some(config) = webhook.get("clientConfig").filter(|c| !c.is_null()) {
        if config.get("service").is_some_and(|s| !s.is_null()) {
            return Err(SnapshotError::WebhookService);
        }
        let url = config.get("url").and_then(Value::as_str);
        let Some(url) = url else {
            return Err(SnapshotError::WebhookUrl);
        };
        let mut client = Map::new();
        if !url.is_empty() {
            client.insert("url".into(), json!(url));
        }
        if let Some(config) = config.as_object() {
            copy_non_empty(config, &mut client, "caBundle");
        }
        out.insert("clientConfig".into(), Value::Object(client));
    }
    out.insert(
        "conversionReviewVersions".into(),
        webhook
            .get("conversionReviewVersions")
            .cloned()
            .unwrap_or(Value::Null),
    );
    Ok(json!({"strategy": "Webhook", "webhook": out}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(extra_spec: Value) -> Value {
        let mut spec = json!({
            "group": "example.io",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "preserveUnknownFields": false,
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        });
        if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra_spec) {
            spec.extend(extra);
        }
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.io", "annotations": {"a": "b"}, "uid": "u"},
            "spec": spec,
            "status": {"storedVersions": ["v1"]},
        })
    }

    #[test]
    fn minimal_crd_with_defaults() {
        let schema = crd_to_schema(&crd(json!({})), "today").ok();
        let expected = json!({
            "kind": "APIResourceSchema",
            "apiVersion": "apis.kcp.io/v1alpha1",
            "metadata": {"name": "today.widgets.example.io"},
            "spec": {
                "group": "example.io",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "subresources": {},
                }],
                "conversion": {"strategy": "None"},
            },
        });
        assert_eq!(schema, Some(expected.clone()));
        // upstream's key order, which `-o json` prints
        assert_eq!(
            serde_json::to_string(&schema).ok(),
            serde_json::to_string(&expected).ok()
        );
    }

    #[test]
    fn versions_keep_columns_subresources_and_deprecation() {
        let input = crd(json!({
            "names": {"kind": "Widget", "plural": "widgets", "singular": "wd", "shortNames": ["w"],
                      "listKind": "Widgets", "categories": ["all"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                 "deprecationWarning": "use v1",
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                 "selectableFields": [{"jsonPath": ".spec.color"}]},
                {"name": "v1", "served": true, "storage": true, "deprecated": false},
            ],
        }));
        let schema = crd_to_schema(&input, "p").unwrap_or_default();
        assert_eq!(
            schema["spec"]["names"],
            json!({"plural": "widgets", "singular": "wd", "shortNames": ["w"], "kind": "Widget",
                   "listKind": "Widgets", "categories": ["all"]})
        );
        let old = &schema["spec"]["versions"][0];
        assert_eq!(old["deprecated"], true);
        assert_eq!(old["deprecationWarning"], "use v1");
        assert_eq!(old["schema"], Value::Null);
        assert_eq!(
            old["subresources"]["scale"]["specReplicasPath"],
            ".spec.replicas"
        );
        assert_eq!(old["additionalPrinterColumns"][0]["name"], "Age");
        assert_eq!(
            old["selectableFields"],
            json!([{"jsonPath": ".spec.color"}])
        );
        let new = &schema["spec"]["versions"][1];
        assert!(new.get("deprecated").is_none());
        assert_eq!(new["subresources"], json!({}));
        // several versions without a conversion strategy still default to None
        assert_eq!(schema["spec"]["conversion"], json!({"strategy": "None"}));
    }

    #[test]
    fn webhook_conversion() {
        let url = crd(json!({"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "https://conv.example.io", "caBundle": "Y2E="},
            "conversionReviewVersions": ["v1"]}}}));
        assert_eq!(
            crd_to_schema(&url, "p").unwrap_or_default()["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://conv.example.io", "caBundle": "Y2E="},
                "conversionReviewVersions": ["v1"]}})
        );
        let service = crd(json!({"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "conv", "namespace": "ns"}},
            "conversionReviewVersions": ["v1"]}}}));
        assert_eq!(
            crd_to_schema(&service, "p"),
            Err(SnapshotError::WebhookService)
        );
        let no_url = crd(json!({"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": {"caBundle": "Y2E="}, "conversionReviewVersions": ["v1"]}}}));
        assert_eq!(crd_to_schema(&no_url, "p"), Err(SnapshotError::WebhookUrl));
    }

    #[test]
    fn bad_prefix_and_wrong_kinds() {
        let err = crd_to_schema(&crd(json!({})), "Bad_Prefix")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "metadata.name: Invalid value: \"Bad_Prefix.widgets.example.io\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            )
        );
        let long = "x".repeat(250);
        let err = crd_to_schema(&crd(json!({})), &long).err();
        assert!(
            matches!(err, Some(SnapshotError::InvalidName(ref m)) if m.ends_with("must be no more than 253 characters"))
        );
        let mut beta = crd(json!({}));
        beta["apiVersion"] = json!("apiextensions.k8s.io/v1beta1");
        assert_eq!(
            crd_to_schema(&beta, "p").err().map(|e| e.to_string()),
            Some("no kind \"CustomResourceDefinition\" is registered for version \"apiextensions.k8s.io/v1beta1\"".to_owned())
        );
        assert_eq!(
            crd_to_schema(&json!({"apiVersion": "v1"}), "p"),
            Err(SnapshotError::MissingKind)
        );
    }
}
