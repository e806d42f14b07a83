//! core/v1 ConfigMap: string and binary data under validated keys, optionally immutable.

use kcp_apimachinery::FieldError;
use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy, map_len};

/// ConfigMaps and Secrets hold at most 1 MiB of data.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

pub fn resource() -> ResourceType {
    super::resource(
        "",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        Box::new(ConfigMaps),
    )
}

struct ConfigMaps;

impl Strategy for ConfigMaps {
    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut total = 0;
        for field in ["data", "binaryData"] {
            let Some(map) = object.get(field).and_then(Value::as_object) else {
                continue;
            };
            for (key, value) in map {
                for message in kcp_apimachinery::validation::is_config_map_key(key) {
                    errors.push(FieldError::invalid(
                        &format!("{field}[{key}]"),
                        json!(key),
                        &message,
                    ));
                }
                if field == "binaryData"
                    && object
                        .pointer(&format!("/data/{}", escape_pointer(key)))
                        .is_some()
                {
                    errors.push(FieldError::invalid(
                        &format!("data[{key}]"),
                        json!(key),
                        "duplicate of key present in binaryData",
                    ));
                }
                total += value.as_str().map_or(0, str::len);
            }
        }
        if total > MAX_DATA_BYTES {
            errors.push(FieldError::too_long("", MAX_DATA_BYTES));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(immutable_data_errors(new, old, &["data", "binaryData"]));
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Data",
            "string",
            "Data contains the configuration data.",
        )]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(
            map_len(object, "data") + map_len(object, "binaryData")
        )]
    }
}

/// JSON pointer escaping of one path token.
pub(crate) fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Objects with `immutable: true` (ConfigMaps, Secrets) keep their data and stay immutable.
pub(crate) fn immutable_data_errors(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return errors;
    }
    if new.get("immutable") != Some(&Value::Bool(true)) {
        errors.push(FieldError::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    for field in fields {
        if new.get(*field) != old.get(*field) {
            errors.push(FieldError::forbidden(
                field,
                "field is immutable when `immutable` is set",
            ));
        }
    }
    errors
}
