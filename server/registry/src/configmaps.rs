//! core/v1 ConfigMap: string and binary data under validated keys, optionally immutable.
//!
//! Validation is kube's `ValidateConfigMap`: keys are config-map keys (`[-._a-zA-Z0-9]+`, at most
//! 253 characters, not `.` or `..`), no key in both `data` and `binaryData`, and at most 1 MiB of
//! data in total (binary data counted decoded).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
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
                // binaryData travels as base64 in JSON; kube counts the decoded bytes.
                total += match field {
                    "binaryData" => value
                        .as_str()
                        .and_then(|v| STANDARD.decode(v).ok())
                        .map_or(0, |bytes| bytes.len()),
                    _ => value.as_str().map_or(0, str::len),
                };
            }
        }
        if total > MAX_DATA_BYTES {
            // kube reports the whole object: `field.NewPath("")` prints as `[]`.
            errors.push(FieldError::too_long("[]", MAX_DATA_BYTES));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(object: &Value) -> Vec<String> {
        ConfigMaps
            .validate(object)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn data_is_at_most_1_mib_in_total() {
        let half = "x".repeat(MAX_DATA_BYTES / 2);
        let exact = json!({"data": {"a": half, "b": half}});
        assert!(errors(&exact).is_empty());
        let over = json!({"data": {"a": half, "b": format!("{half}x")}});
        assert_eq!(
            errors(&over),
            ["[]: Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn binary_data_counts_decoded_bytes() {
        // 786432 bytes encode to 1048576 base64 characters: within the limit once decoded.
        let encoded = STANDARD.encode(vec![0u8; 786_432]);
        let object = json!({"binaryData": {"bin": encoded}, "data": {"a": "x".repeat(200_000)}});
        assert!(errors(&object).is_empty(), "{:?}", errors(&object));
        let object = json!({"binaryData": {"bin": encoded}, "data": {"a": "x".repeat(262_145)}});
        assert_eq!(errors(&object).len(), 1);
    }

    #[test]
    fn keys_are_config_map_keys() {
        let object = json!({"data": {"bad key": "v", "..": "v", "ok-key_1.txt": "v"}});
        let found = errors(&object);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().any(|m| m.starts_with(
            "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
        )), "{found:?}");
        assert!(
            found
                .iter()
                .any(|m| m == "data[..]: Invalid value: \"..\": must not be '..'"),
            "{found:?}"
        );
        let long = "k".repeat(254);
        assert_eq!(errors(&json!({"data": {long.clone(): "v"}})).len(), 1);
    }

    #[test]
    fn a_key_may_not_be_in_both_maps() {
        let object = json!({"data": {"a": "x"}, "binaryData": {"a": "eA=="}});
        assert_eq!(
            errors(&object),
            ["data[a]: Invalid value: \"a\": duplicate of key present in binaryData"]
        );
    }
}
