//! core/v1 Secret: base64 data (checked by decoding), `stringData` folded into `data` on write, a type
//! that decides which keys must be present, and immutability like ConfigMaps.
//!
//! Validation is kube's `ValidateSecret`: config-map keys, at most 1 MiB of decoded data, the keys
//! each type requires (`tls.crt`/`tls.key`, `ssh-privatekey`, `.dockercfg`,
//! `.dockerconfigjson`, `username` or `password`, the service-account annotation), an immutable
//! type. (kube also parses the docker config types' JSON and reports Go's decoder error text;
//! that text is not reproduced.)

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_apimachinery::FieldError;
use serde_json::{Value, json};

use super::configmaps::{MAX_DATA_BYTES, immutable_data_errors};
use super::{Column, ResourceType, Strategy, map_len};

pub fn resource() -> ResourceType {
    super::resource("", "Secret", "secrets", true, &[], Box::new(Secrets))
}

struct Secrets;

/// Folds `stringData` into `data` (base64-encoding it) and defaults the type, as kube-apiserver does.
fn fold_string_data(object: &mut Value) {
    if let Some(Value::Object(string_data)) =
        object.as_object_mut().and_then(|o| o.remove("stringData"))
    {
        if !object["data"].is_object() {
            object["data"] = json!({});
        }
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            object["data"][key] = json!(STANDARD.encode(text));
        }
    }
    if object
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        object["type"] = json!("Opaque");
    }
}

/// Keys a Secret type requires in `data`.
fn required_keys(secret_type: &str) -> &'static [&'static str] {
    match secret_type {
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        _ => &[],
    }
}

impl Strategy for Secrets {
    fn prepare_for_create(&self, object: &mut Value) {
        fold_string_data(object);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value, _subresource: Option<&str>) {
        fold_string_data(new);
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut total = 0;
        let data = object.get("data").and_then(Value::as_object);
        for (key, value) in data.into_iter().flatten() {
            for message in kcp_apimachinery::validation::is_config_map_key(key) {
                errors.push(FieldError::invalid(
                    &format!("data[{key}]"),
                    json!(key),
                    &message,
                ));
            }
            match value.as_str().map(|v| STANDARD.decode(v)) {
                Some(Ok(bytes)) => total += bytes.len(),
                _ => errors.push(FieldError::invalid(
                    &format!("data[{key}]"),
                    json!("<secret contents redacted>"),
                    "must be a base64-encoded string",
                )),
            }
        }
        if total > MAX_DATA_BYTES {
            errors.push(FieldError::too_long("data", MAX_DATA_BYTES));
        }
        let secret_type = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("Opaque");
        if secret_type == "kubernetes.io/basic-auth"
            && data.is_none_or(|d| !d.contains_key("username") && !d.contains_key("password"))
        {
            // Either may be empty, but one of them must be there.
            errors.push(FieldError::required("data[username]", ""));
            errors.push(FieldError::required("data[password]", ""));
        }
        for key in required_keys(secret_type) {
            if data.is_none_or(|d| !d.contains_key(*key)) {
                errors.push(FieldError::required(&format!("data[{key}]"), ""));
            }
        }
        if secret_type == "kubernetes.io/service-account-token"
            && !kcp_apimachinery::meta::annotations(object)
                .contains_key("kubernetes.io/service-account.name")
        {
            errors.push(FieldError::required(
                "metadata.annotations[kubernetes.io/service-account.name]",
                "",
            ));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        if new.get("type") != old.get("type") {
            errors.push(FieldError::invalid(
                "type",
                new.get("type").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errors.extend(immutable_data_errors(new, old, &["data"]));
        errors
    }

    fn supports_field(&self, field: &str) -> bool {
        field == "type"
    }

    fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        (field == "type").then(|| {
            object
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data.",
            ),
            Column::new("Data", "string", "Data contains the secret data."),
        ]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![
            object.get("type").cloned().unwrap_or(json!("")),
            json!(map_len(object, "data")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_folded_and_type_defaulted() {
        let mut secret = json!({"metadata": {"name": "s"}, "stringData": {"a": "hello"}});
        Secrets.prepare_for_create(&mut secret);
        assert_eq!(secret["data"]["a"], "aGVsbG8=");
        assert_eq!(secret["type"], "Opaque");
        assert!(secret.get("stringData").is_none());
    }

    #[test]
    fn bad_base64_and_missing_tls_keys_are_invalid() {
        let secret = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "!!!"}});
        let fields: Vec<String> = Secrets
            .validate(&secret)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert!(fields.contains(&"data[tls.crt]".to_string()));
        assert!(fields.contains(&"data[tls.key]".to_string()));
    }

    fn errors(secret: &Value) -> Vec<String> {
        Secrets
            .validate(secret)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn data_is_at_most_1_mib_decoded() {
        let exact = STANDARD.encode(vec![7u8; MAX_DATA_BYTES]);
        assert!(errors(&json!({"data": {"a": exact}})).is_empty());
        let over = STANDARD.encode(vec![7u8; MAX_DATA_BYTES + 1]);
        assert_eq!(
            errors(&json!({"data": {"a": over}})),
            ["data: Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn keys_are_config_map_keys() {
        let found = errors(&json!({"data": {"a/b": "eA=="}}));
        assert_eq!(found.len(), 1);
        assert!(
            found[0].starts_with("data[a/b]: Invalid value: \"a/b\": a valid config key"),
            "{found:?}"
        );
    }

    #[test]
    fn basic_auth_needs_a_username_or_a_password() {
        let found = errors(&json!({"type": "kubernetes.io/basic-auth", "data": {}}));
        assert_eq!(
            found,
            [
                "data[username]: Required value",
                "data[password]: Required value"
            ]
        );
        let only_password = json!({"type": "kubernetes.io/basic-auth", "data": {"password": ""}});
        assert!(errors(&only_password).is_empty());
    }

    #[test]
    fn service_account_tokens_name_their_account() {
        let found = errors(&json!({"type": "kubernetes.io/service-account-token"}));
        assert_eq!(
            found,
            ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
    }
}
