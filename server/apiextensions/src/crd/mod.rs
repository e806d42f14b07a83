//! CustomResourceDefinition admission (`apiextensions.k8s.io/v1`) and the typed view of an
//! accepted CRD.
//!
//! A CRD is stored as JSON like any object; before it is accepted, [`validate_crd`] applies
//! kube-apiextensions' rules with its field paths and messages, including structural-schema and
//! CEL compilation errors. The registry then builds a [`CrdInfo`] once per CRD change to serve the
//! custom resources: names, scope, versions with their shared [`StructuralSchema`]s, subresources,
//! printer columns and selectable fields.

mod info;
mod names;

use kcp_apimachinery::FieldError;
use kcp_apimachinery::validation::{FIELD_IMMUTABLE_ERROR_MSG, is_dns1123_subdomain};
use serde_json::Value;

pub use info::{CrdError, CrdInfo, CrdVersion, PrinterColumn, ScaleSpec, apply_crd_defaults};

use crate::path;
use crate::schema::StructuralSchema;
use crate::schema::node::Type;

/// The suffix of a core-group CRD's name (`services.core`), as upstream kcp allows.
pub const CORE_GROUP_SUFFIX: &str = "core";

/// Kubernetes' own API groups without a dot. Like upstream kcp, a logical cluster may serve these
/// types through CRDs (e.g. `deployments.apps`), so their groups pass the "at least one dot" rule.
pub const KUBERNETES_GROUPS_WITHOUT_DOT: &[&str] =
    &["apps", "autoscaling", "batch", "extensions", "policy"];
/// At most this many selectable fields per version.
pub const MAX_SELECTABLE_FIELDS: usize = 8;

const PRINTER_COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const PRINTER_COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
/// Root schema keywords allowed when the status subresource is enabled (JSON spelling).
const ROOT_KEYWORDS_WITH_STATUS: [&str; 22] = [
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
];
const ROOT_FIELDS_WITH_STATUS_GO: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";

fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Validates a CRD being created. Missing `singular`/`listKind` count as defaulted (see
/// [`apply_crd_defaults`]).
pub fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    validate_name(crd, &mut errors);
    validate_spec(crd, &mut errors);
    errors
}

/// Validates a CRD update: everything [`validate_crd`] checks, plus the fields that may not
/// change (`spec.group`, `spec.scope`, `spec.names.plural`, `spec.names.kind`).
pub fn validate_crd_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = validate_crd(new);
    for (pointer, field) in [
        ("/spec/scope", "spec.scope"),
        ("/spec/names/kind", "spec.names.kind"),
        ("/spec/group", "spec.group"),
        ("/spec/names/plural", "spec.names.plural"),
    ] {
        let value = str_at(new, pointer);
        if value != str_at(old, pointer) {
            errors.push(FieldError::invalid(
                field,
                Value::from(value),
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
    }
    errors
}

fn validate_name(crd: &Value, errors: &mut Vec<FieldError>) {
    let name = str_at(crd, "/metadata/name");
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
        return;
    }
    let group = str_at(crd, "/spec/group");
    let suffix = if group.is_empty() {
        CORE_GROUP_SUFFIX
    } else {
        group
    };
    let mut messages = is_dns1123_subdomain(name);
    if name != format!("{}.{suffix}", str_at(crd, "/spec/names/plural")) {
        messages.push("must be spec.names.plural+\".\"+spec.group".to_string());
    }
    for message in messages {
        errors.push(FieldError::invalid(
            "metadata.name",
            Value::from(name),
            &message,
        ));
    }
}

fn validate_spec(crd: &Value, errors: &mut Vec<FieldError>) {
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = str_at(&spec, "/group");
    if !group.is_empty() {
        let messages = is_dns1123_subdomain(group);
        if !messages.is_empty() {
            errors.push(FieldError::invalid(
                "spec.group",
                Value::from(group),
                &messages.join(","),
            ));
        } else if !group.contains('.') && !KUBERNETES_GROUPS_WITHOUT_DOT.contains(&group) {
            errors.push(FieldError::invalid(
                "spec.group",
                Value::from(group),
                "should be a domain with at least one dot",
            ));
        }
    }
    match str_at(&spec, "/scope") {
        "" => errors.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errors.push(FieldError::not_supported(
            "spec.scope",
            Value::from(other),
            &["Cluster", "Namespaced"],
        )),
    }
    for key in ["plural", "kind"] {
        if str_at(&spec, &format!("/names/{key}")).is_empty() {
            errors.push(FieldError::required(&format!("spec.names.{key}"), ""));
        }
    }
    errors.extend(names::validate_names(
        spec.get("names").unwrap_or(&Value::Null),
        "spec.names",
    ));
    if spec.get("preserveUnknownFields").and_then(Value::as_bool) == Some(true) {
        errors.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            Value::Bool(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    validate_conversion(&spec, errors);
    validate_versions(&spec, errors);
}

fn validate_conversion(spec: &Value, errors: &mut Vec<FieldError>) {
    match str_at(spec, "/conversion/strategy") {
        "" | "None" => {}
        other => errors.push(FieldError::not_supported(
            "spec.conversion.strategy",
            Value::from(other),
            &["None"],
        )),
    }
}

fn validate_versions(spec: &Value, errors: &mut Vec<FieldError>) {
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let versions_value = Value::Array(versions.clone());
    if versions.is_empty() {
        errors.push(FieldError::required(
            "spec.versions",
            "must have at least one version",
        ));
        return;
    }
    let mut names: Vec<&str> = Vec::new();
    let mut storage = 0;
    for (i, version) in versions.iter().enumerate() {
        let at = path::index("spec.versions", i);
        let name = str_at(version, "/name");
        let messages = names::is_dns1035_label(name);
        if !messages.is_empty() {
            errors.push(FieldError::invalid(
                &path::child(&at, "name"),
                Value::from(name),
                &messages.join(","),
            ));
        }
        if names.contains(&name) {
            errors.push(FieldError::invalid(
                "spec.versions",
                versions_value.clone(),
                "must contain unique version names",
            ));
        }
        names.push(name);
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        validate_version(version, &at, errors);
    }
    if storage != 1 {
        errors.push(FieldError::invalid(
            "spec.versions",
            versions_value,
            "must have exactly one version marked as storage version",
        ));
    }
}

fn validate_version(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    if let Some(warning) = version.get("deprecationWarning").and_then(Value::as_str)
        && version.get("deprecated").and_then(Value::as_bool) != Some(true)
    {
        errors.push(FieldError::invalid(
            &path::child(at, "deprecationWarning"),
            Value::from(warning),
            "can only be set for deprecated versions",
        ));
    }
    let status_enabled = version
        .pointer("/subresources/status")
        .is_some_and(|s| !s.is_null());
    let schema_at = path::child(&path::child(at, "schema"), "openAPIV3Schema");
    let schema = match version.pointer("/schema/openAPIV3Schema") {
        None | Some(Value::Null) => {
            errors.push(FieldError::required(&schema_at, ""));
            None
        }
        Some(raw) => {
            if status_enabled {
                validate_root_with_status(raw, &schema_at, errors);
            }
            match StructuralSchema::new_at(raw, &schema_at) {
                Ok(schema) => Some(schema),
                Err(errs) => {
                    errors.extend(errs);
                    None
                }
            }
        }
    };
    validate_subresources(version, at, errors);
    validate_printer_columns(version, at, errors);
    validate_selectable_fields(version, at, schema.as_ref(), errors);
}

fn validate_root_with_status(raw: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(obj) = raw.as_object() else {
        return;
    };
    if let Some(ty) = obj.get("type").and_then(Value::as_str)
        && ty != "object"
    {
        errors.push(FieldError::invalid(
            &path::child(at, "type"),
            Value::from(ty),
            "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
        ));
    }
    if obj
        .keys()
        .any(|k| !ROOT_KEYWORDS_WITH_STATUS.contains(&k.as_str()))
    {
        errors.push(FieldError::invalid(
            at,
            raw.clone(),
            &format!("only {ROOT_FIELDS_WITH_STATUS_GO} fields are allowed at the root of the schema if the status subresource is enabled"),
        ));
    }
}

/// Kubernetes' `validateSimpleJSONPath`.
fn simple_json_path(value: &str, at: &str) -> Option<FieldError> {
    if value.is_empty() {
        Some(FieldError::invalid(
            at,
            Value::from(value),
            "must not be empty",
        ))
    } else if !value.starts_with('.') {
        Some(FieldError::invalid(
            at,
            Value::from(value),
            "must be a simple json path starting with .",
        ))
    } else {
        None
    }
}

fn validate_subresources(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(scale) = version
        .pointer("/subresources/scale")
        .filter(|s| !s.is_null())
    else {
        return;
    };
    let sub_at = path::child(at, "subresources");
    for (key, prefix, detail) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let field = format!("{sub_at}.scale.{key}");
        match scale.get(key).and_then(Value::as_str).unwrap_or_default() {
            "" => errors.push(FieldError::required(&field, "")),
            value => match simple_json_path(value, &field) {
                Some(err) => errors.push(err),
                None if !value.starts_with(prefix) => {
                    errors.push(FieldError::invalid(&field, Value::from(value), detail))
                }
                None => {}
            },
        }
    }
    if let Some(selector) = scale
        .get("labelSelectorPath")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        let field = format!("{sub_at}.scale.labelSelectorPath");
        match simple_json_path(selector, &field) {
            Some(err) => errors.push(err),
            None if !selector.starts_with(".spec.") && !selector.starts_with(".status.") => errors
                .push(FieldError::invalid(
                    &field,
                    Value::from(selector),
                    "should be a json path under either .spec or .status",
                )),
            None => {}
        }
    }
}

fn validate_printer_columns(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(columns) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    else {
        return;
    };
    let columns_at = path::child(at, "additionalPrinterColumns");
    for (i, column) in columns.iter().enumerate() {
        let col_at = path::index(&columns_at, i);
        if str_at(column, "/name").is_empty() {
            errors.push(FieldError::required(&path::child(&col_at, "name"), ""));
        }
        let type_detail = format!("must be one of {PRINTER_COLUMN_TYPES}");
        match str_at(column, "/type") {
            "" => errors.push(FieldError::required(
                &path::child(&col_at, "type"),
                &type_detail,
            )),
            ty if PRINTER_COLUMN_TYPES.split(',').any(|t| t == ty) => {}
            ty => errors.push(FieldError::invalid(
                &path::child(&col_at, "type"),
                Value::from(ty),
                &type_detail,
            )),
        }
        let format = str_at(column, "/format");
        if !format.is_empty() && !PRINTER_COLUMN_FORMATS.split(',').any(|f| f == format) {
            errors.push(FieldError::invalid(
                &path::child(&col_at, "format"),
                Value::from(format),
                &format!("must be one of {PRINTER_COLUMN_FORMATS}"),
            ));
        }
        let json_path_at = path::child(&col_at, "JSONPath");
        match str_at(column, "/jsonPath") {
            "" => errors.push(FieldError::required(&json_path_at, "")),
            value => errors.extend(simple_json_path(value, &json_path_at)),
        }
    }
}

fn validate_selectable_fields(
    version: &Value,
    at: &str,
    schema: Option<&StructuralSchema>,
    errors: &mut Vec<FieldError>,
) {
    let Some(fields) = version.get("selectableFields").and_then(Value::as_array) else {
        return;
    };
    let fields_at = path::child(at, "selectableFields");
    let Some(schema) = schema else {
        return;
    };
    let mut unique: Vec<String> = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        let json_path_at = path::child(&path::index(&fields_at, i), "jsonPath");
        let json_path = str_at(field, "/jsonPath");
        if json_path.is_empty() {
            errors.push(FieldError::required(&json_path_at, ""));
            continue;
        }
        let resolved = match crate::schema::fieldpath::resolve(schema.root(), json_path, false) {
            Ok(resolved) => resolved,
            Err(err) => {
                errors.push(FieldError::invalid(
                    &json_path_at,
                    Value::from(json_path),
                    &format!("is an invalid path: {err}"),
                ));
                continue;
            }
        };
        if resolved.segments.first().map(String::as_str) == Some("metadata") {
            errors.push(FieldError::invalid(
                &json_path_at,
                Value::from(json_path),
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            resolved.node.ty,
            Some(Type::String | Type::Boolean | Type::Integer)
        ) {
            errors.push(FieldError::invalid(
                &json_path_at,
                Value::from(json_path),
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        let normalized = resolved.field_path();
        if unique.contains(&normalized) {
            errors.push(FieldError::duplicate(&json_path_at, Value::from(json_path)));
        } else {
            unique.push(normalized);
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errors.push(FieldError::too_many(
            &fields_at,
            unique.len(),
            MAX_SELECTABLE_FIELDS,
        ));
    }
}
