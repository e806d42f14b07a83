//! The typed view of an accepted CRD that the registry serves custom resources from.

use std::sync::Arc;

use kcp_apimachinery::FieldError;
use kcp_apimachinery::status::aggregate;
use serde_json::Value;

use super::{names, str_at, validate_crd};
use crate::schema::StructuralSchema;

/// Why a CRD could not be turned into a [`CrdInfo`].
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The CRD does not pass admission; the errors are the same as [`validate_crd`] returns.
    #[error("invalid CustomResourceDefinition: {}", aggregate(.0).unwrap_or_default())]
    Invalid(Vec<FieldError>),
}

/// `subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub column_type: String,
    pub format: Option<String>,
    pub description: Option<String>,
    pub priority: i32,
    pub json_path: String,
}

/// One served (or stored) version of a CRD.
#[derive(Debug, Clone)]
pub struct CrdVersion {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
    /// The parsed schema, shared by every request and logical cluster using this CRD.
    pub schema: Arc<StructuralSchema>,
    /// The schema as written, for OpenAPI publishing.
    pub openapi_schema: Value,
    pub status_subresource: bool,
    pub scale: Option<ScaleSpec>,
    pub printer_columns: Vec<PrinterColumn>,
    /// `selectableFields[].jsonPath`.
    pub selectable_fields: Vec<String>,
}

/// Everything the registry needs to serve a CRD's resources.
#[derive(Debug, Clone)]
pub struct CrdInfo {
    pub name: String,
    /// `""` for a core-group CRD (`<plural>.core`).
    pub group: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<CrdVersion>,
}

/// Fills the fields `apiextensions.k8s.io/v1` defaults: `spec.names.singular` (lowercase kind),
/// `spec.names.listKind` (`<Kind>List`) and `spec.conversion.strategy` (`None`).
pub fn apply_crd_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let missing = |names: &serde_json::Map<String, Value>, key: &str| {
            names
                .get(key)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        };
        if missing(names, "singular") && !kind.is_empty() {
            names.insert("singular".into(), Value::from(kind.to_lowercase()));
        }
        if missing(names, "listKind") && !kind.is_empty() {
            names.insert("listKind".into(), Value::from(format!("{kind}List")));
        }
    }
    let conversion = spec
        .entry("conversion")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(conversion) = conversion.as_object_mut()
        && conversion
            .get("strategy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        conversion.insert("strategy".into(), Value::from("None"));
    }
}

fn strings(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

impl CrdInfo {
    /// Defaults and validates `crd`, then extracts its serving information and builds one
    /// [`StructuralSchema`] per version.
    pub fn from_crd(crd: &Value) -> Result<CrdInfo, CrdError> {
        let mut crd = crd.clone();
        apply_crd_defaults(&mut crd);
        let errors = validate_crd(&crd);
        if !errors.is_empty() {
            return Err(CrdError::Invalid(errors));
        }
        let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
        let names_value = spec.get("names").cloned().unwrap_or(Value::Null);
        let mut versions = Vec::new();
        for version in spec
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            versions.push(version_info(version)?);
        }
        Ok(CrdInfo {
            name: str_at(&crd, "/metadata/name").to_string(),
            group: str_at(&spec, "/group").to_string(),
            kind: str_at(&names_value, "/kind").to_string(),
            list_kind: str_at(&names_value, "/listKind").to_string(),
            plural: str_at(&names_value, "/plural").to_string(),
            singular: str_at(&names_value, "/singular").to_string(),
            short_names: names::list(&names_value, "shortNames"),
            categories: names::list(&names_value, "categories"),
            namespaced: str_at(&spec, "/scope") == "Namespaced",
            versions,
        })
    }

    /// The version objects are stored in.
    pub fn storage_version(&self) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.storage)
    }

    /// The version named `name`, if it is served.
    pub fn served_version(&self, name: &str) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.served && v.name == name)
    }
}

fn flag(value: &Value, pointer: &str) -> bool {
    value.pointer(pointer).and_then(Value::as_bool) == Some(true)
}

fn version_info(version: &Value) -> Result<CrdVersion, CrdError> {
    let openapi_schema = version
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .unwrap_or(Value::Null);
    let schema = StructuralSchema::new(&openapi_schema).map_err(CrdError::Invalid)?;
    let scale = version
        .pointer("/subresources/scale")
        .filter(|s| s.is_object())
        .map(|scale| ScaleSpec {
            spec_replicas_path: str_at(scale, "/specReplicasPath").to_string(),
            status_replicas_path: str_at(scale, "/statusReplicasPath").to_string(),
            label_selector_path: strings(scale, "labelSelectorPath").filter(|s| !s.is_empty()),
        });
    let printer_columns = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|column| PrinterColumn {
            name: str_at(column, "/name").to_string(),
            column_type: str_at(column, "/type").to_string(),
            format: strings(column, "format"),
            description: strings(column, "description"),
            priority: column
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            json_path: str_at(column, "/jsonPath").to_string(),
        })
        .collect();
    let selectable_fields = version
        .get("selectableFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|f| str_at(f, "/jsonPath").to_string())
        .collect();
    Ok(CrdVersion {
        name: str_at(version, "/name").to_string(),
        served: flag(version, "/served"),
        storage: flag(version, "/storage"),
        deprecated: flag(version, "/deprecated"),
        deprecation_warning: strings(version, "deprecationWarning"),
        schema: Arc::new(schema),
        openapi_schema,
        status_subresource: version
            .pointer("/subresources/status")
            .is_some_and(Value::is_object),
        scale,
        printer_columns,
        selectable_fields,
    })
}
