//! Custom resources: the types a CustomResourceDefinition defines, served from its schema.
//!
//! One [`ResourceType`] per served version, all sharing one storage (the CRD's group and plural,
//! under the `customresources` key layout, or under an APIExport's identity for bound resources).
//! Versions convert with the `None` strategy: only `apiVersion` changes, unless the type brings a
//! conversion of its own (the apis.kcp.io system types, whose versions differ in shape, and bound
//! resources with an APIConversion). The schema does the rest: unknown fields are pruned (and reported for
//! `fieldValidation`), defaults applied, values and CEL rules validated; `metadata.generation` moves
//! when anything but metadata and status changes.

use std::sync::Arc;

use kcp_apiextensions::{CrdInfo, CrdVersion, StructuralSchema};
use kcp_apimachinery::jsonpath::JsonPath;
use kcp_apimachinery::{ApiError, FieldError, meta};
use kcp_fieldmanager::TypeSchema;
use serde_json::{Value, json};

use super::table::{Column, age};
use super::{BoundPolicy, ResourceType, Strategy};
use crate::storage::KeyLayout;

/// One printer column with its parsed path.
struct PrinterColumn {
    column: Column,
    path: Option<JsonPath>,
    is_date: bool,
}

/// The `scale` subresource paths of a version.
struct ScalePaths {
    spec_replicas: JsonPointerPath,
    status_replicas: JsonPointerPath,
    label_selector: Option<JsonPointerPath>,
}

/// A `.a.b.c` path as JSON-pointer segments (scale paths are simple field paths by CRD validation).
#[derive(Clone)]
struct JsonPointerPath(Vec<String>);

impl JsonPointerPath {
    fn parse(path: &str) -> JsonPointerPath {
        JsonPointerPath(
            path.trim_start_matches('.')
                .split('.')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }

    fn get<'a>(&self, value: &'a Value) -> Option<&'a Value> {
        self.0.iter().try_fold(value, |v, key| v.get(key.as_str()))
    }

    fn set(&self, value: &mut Value, new: Value) {
        let Some((last, parents)) = self.0.split_last() else {
            return;
        };
        let mut current = value;
        for key in parents {
            if !current[key.as_str()].is_object() {
                current[key.as_str()] = json!({});
            }
            current = &mut current[key.as_str()];
        }
        current[last.as_str()] = new;
    }
}

struct CustomResources {
    api_version: String,
    storage_api_version: String,
    schema: Arc<StructuralSchema>,
    status_subresource: bool,
    scale: Option<ScalePaths>,
    columns: Vec<PrinterColumn>,
    selectable: Vec<(String, JsonPath)>,
    derive: Option<DeriveFields>,
    convert: Option<ConvertVersions>,
}

/// Sets the fields a type derives from the rest of the object (e.g. a label that mirrors
/// `status.phase`), after defaulting, on every create and update, status writes included.
pub type DeriveFields = fn(&mut Value);

/// Converts an object to another served version of its type (`object`, target `apiVersion`).
pub type ConvertVersions = Arc<dyn Fn(Value, &str) -> Value + Send + Sync>;

/// How a CRD's types are served beyond what the CRD says.
#[derive(Clone, Default)]
pub struct Serving {
    /// Fields derived from the rest of the object (the built-in tenancy types' phase and
    /// initializer labels).
    pub derive: Option<DeriveFields>,
    /// A conversion between versions of different shapes (the apis.kcp.io types, and bound
    /// resources whose schema has an APIConversion).
    pub convert: Option<ConvertVersions>,
    /// The identity hash of the APIExport the type is bound from: its objects are stored under it.
    pub bound_identity: Option<Arc<str>>,
    /// The APIExport whose maximal permission policy caps requests on the bound type.
    pub bound_policy: Option<BoundPolicy>,
}

/// The types of every served version of a CRD.
pub fn resource_types(crd: &CrdInfo) -> Vec<Arc<ResourceType>> {
    resource_types_serving(crd, &Serving::default())
}

/// The types of every served version of a CRD, served as `serving` says.
pub fn resource_types_serving(crd: &CrdInfo, serving: &Serving) -> Vec<Arc<ResourceType>> {
    let storage_version = crd
        .versions
        .iter()
        .find(|v| v.storage)
        .map_or("", |v| v.name.as_str());
    crd.versions
        .iter()
        .filter(|v| v.served)
        .map(|v| Arc::new(resource_type(crd, v, storage_version, serving)))
        .collect()
}

/// The types of CRDs the server itself serves (kcp's tenancy and apis.kcp.io types), each served
/// as `serving` says; a definition that does not parse is logged and not served.
pub(crate) fn system_types(
    crds: &[Value],
    serving: impl Fn(&CrdInfo) -> Serving,
) -> Vec<Arc<ResourceType>> {
    crds.iter()
        .filter_map(|crd| match CrdInfo::from_crd(crd) {
            Ok(info) => Some(resource_types_serving(&info, &serving(&info))),
            Err(error) => {
                tracing::error!(?error, "a built-in CRD is invalid; not serving it");
                None
            }
        })
        .flatten()
        .collect()
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn resource_type(
    crd: &CrdInfo,
    version: &CrdVersion,
    storage_version: &str,
    serving: &Serving,
) -> ResourceType {
    let columns = version
        .printer_columns
        .iter()
        .map(|c| PrinterColumn {
            column: Column::owned(
                c.name.clone(),
                c.column_type.clone(),
                c.description.clone().unwrap_or_default(),
                u32::try_from(c.priority).unwrap_or(0),
            ),
            path: JsonPath::parse(&c.json_path).ok(),
            is_date: c.column_type == "date",
        })
        .collect();
    let selectable = version
        .selectable_fields
        .iter()
        .filter_map(|path| {
            JsonPath::parse(path)
                .ok()
                .map(|p| (path.trim_start_matches('.').to_string(), p))
        })
        .collect();
    let scale = version.scale.as_ref().map(|s| ScalePaths {
        spec_replicas: JsonPointerPath::parse(&s.spec_replicas_path),
        status_replicas: JsonPointerPath::parse(&s.status_replicas_path),
        label_selector: s.label_selector_path.as_deref().map(JsonPointerPath::parse),
    });
    let mut subresources = Vec::new();
    if version.status_subresource {
        subresources.push("status".to_string());
    }
    if scale.is_some() {
        subresources.push("scale".to_string());
    }
    let strategy = CustomResources {
        api_version: api_version(&crd.group, &version.name),
        storage_api_version: api_version(&crd.group, storage_version),
        schema: version.schema.clone(),
        status_subresource: version.status_subresource,
        scale,
        columns,
        selectable,
        derive: serving.derive,
        convert: serving.convert.clone(),
    };
    ResourceType {
        group: crd.group.clone(),
        version: version.name.clone(),
        kind: crd.kind.clone(),
        plural: crd.plural.clone(),
        singular: crd.singular.clone(),
        short_names: crd.short_names.clone(),
        categories: crd.categories.clone(),
        namespaced: crd.namespaced,
        subresources,
        storage_group: crd.group.clone(),
        bound_policy: serving.bound_policy.clone(),
        layout: match &serving.bound_identity {
            Some(identity) => KeyLayout::Bound(identity.clone()),
            None => KeyLayout::CustomResource,
        },
        schema: Some(version.openapi_schema.clone()),
        structural: Some(version.schema.clone()),
        strategic_merge_patch: has_patch_extensions(&version.openapi_schema),
        field_schema: Arc::new(
            TypeSchema::from_openapi(&version.openapi_schema, |_| None)
                .with_status_subresource(version.status_subresource),
        ),
        strategy: Box::new(strategy),
    }
}

/// Whether a schema anywhere says how strategic merge patches merge its lists.
fn has_patch_extensions(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("x-kubernetes-patch-strategy")
                || map.contains_key("x-kubernetes-patch-merge-key")
                || map.values().any(has_patch_extensions)
        }
        Value::Array(items) => items.iter().any(has_patch_extensions),
        _ => false,
    }
}

/// Whether anything but metadata and status changed: what `metadata.generation` counts (compared
/// in place: this runs on every update).
fn spec_changed(new: &Value, old: &Value) -> bool {
    const NOT_SPEC: [&str; 3] = ["metadata", "status", "apiVersion"];
    let (Some(new), Some(old)) = (new.as_object(), old.as_object()) else {
        return new != old;
    };
    let spec = |map: &'_ serde_json::Map<String, Value>| {
        map.iter()
            .filter(|(key, _)| !NOT_SPEC.contains(&key.as_str()))
            .count()
    };
    spec(new) != spec(old)
        || new
            .iter()
            .filter(|(key, _)| !NOT_SPEC.contains(&key.as_str()))
            .any(|(key, value)| old.get(key) != Some(value))
}

impl CustomResources {
    fn to_version(&self, mut object: Value, api_version: &str) -> Value {
        match &self.convert {
            Some(convert) if object["apiVersion"] != api_version => convert(object, api_version),
            _ => {
                object["apiVersion"] = json!(api_version);
                object
            }
        }
    }

    /// Pruning happens in the store (for every type); defaults are the CRD's own, then the
    /// derived fields.
    fn normalize(&self, object: &mut Value) {
        self.schema.apply_defaults(object);
        if let Some(derive) = self.derive {
            derive(object);
        }
    }
}

impl Strategy for CustomResources {
    fn prepare_for_create(&self, object: &mut Value) {
        if self.status_subresource
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        self.normalize(object);
        meta::set_generation(object, 1);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        if self.status_subresource && subresource.is_none() {
            match old.get("status") {
                Some(status) => new["status"] = status.clone(),
                None => {
                    if let Some(map) = new.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
        self.normalize(new);
        let generation = meta::generation(old).unwrap_or(1);
        let changed = spec_changed(new, old);
        meta::set_generation(new, if changed { generation + 1 } else { generation });
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = self.schema.validate(object);
        if errors.is_empty() {
            errors.extend(self.schema.validate_cel(object, None));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.schema.validate(new);
        if errors.is_empty() {
            errors.extend(self.schema.validate_cel(new, Some(old)));
        }
        errors
    }

    fn supports_field(&self, field: &str) -> bool {
        self.selectable.iter().any(|(name, _)| name == field)
    }

    fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        let (_, path) = self.selectable.iter().find(|(name, _)| name == field)?;
        Some(match path.first(object) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        })
    }

    fn api_to_storage(&self, object: Value) -> Value {
        self.to_version(object, &self.storage_api_version)
    }

    /// Objects are defaulted on read too, so a default added to the schema later applies to objects
    /// stored before it (as kube-apiserver does).
    fn storage_to_api(&self, object: Value) -> Value {
        let mut object = self.to_version(object, &self.api_version);
        self.schema.apply_defaults(&mut object);
        object
    }

    fn columns(&self) -> Vec<Column> {
        self.columns.iter().map(|c| c.column.clone()).collect()
    }

    fn age_column(&self) -> bool {
        self.columns.is_empty()
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        self.columns
            .iter()
            .map(|c| match c.path.as_ref().and_then(|p| p.first(object)) {
                Some(Value::String(s)) if c.is_date => json!(age(Some(s))),
                Some(value) => value.clone(),
                None => Value::Null,
            })
            .collect()
    }

    fn to_scale(&self, object: &Value) -> Option<Value> {
        let scale = self.scale.as_ref()?;
        let selector = scale
            .label_selector
            .as_ref()
            .and_then(|p| p.get(object))
            .cloned();
        let mut status = json!({"replicas": scale.status_replicas.get(object).and_then(Value::as_i64).unwrap_or(0)});
        if let Some(selector) = selector {
            status["selector"] = selector;
        }
        let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
        Some(
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
            "spec": {"replicas": scale.spec_replicas.get(object).and_then(Value::as_i64).unwrap_or(0)},
            "status": status}),
        )
    }

    fn apply_scale(&self, object: &Value, scale: &Value) -> Result<Value, ApiError> {
        let paths = self
            .scale
            .as_ref()
            .ok_or_else(|| ApiError::bad_request("this resource has no scale subresource"))?;
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                meta::name(object).unwrap_or_default(),
                vec![FieldError::invalid(
                    "spec.replicas",
                    json!(replicas),
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let mut new = object.clone();
        paths.spec_replicas.set(&mut new, json!(replicas));
        if let Some(rv) = meta::resource_version(scale) {
            meta::set_resource_version(&mut new, rv);
        }
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_outside_metadata_and_status_move_the_generation() {
        let old = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"n": 1}, "status": {"s": 1}});
        let mut same_spec = old.clone();
        same_spec["metadata"]["labels"] = json!({"l": "v"});
        same_spec["status"]["s"] = json!(2);
        same_spec["apiVersion"] = json!("x/v2");
        assert!(!spec_changed(&same_spec, &old));

        let mut changed = old.clone();
        changed["spec"]["n"] = json!(2);
        assert!(spec_changed(&changed, &old));

        let mut added = old.clone();
        added["data"] = json!({});
        assert!(spec_changed(&added, &old));
        assert!(spec_changed(&old, &added), "a removed top-level field");
    }
}
