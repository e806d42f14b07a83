//! Rules for the names a CRD introduces (`spec.names`), shared by spec and status.

use kcp_apimachinery::FieldError;
use serde_json::Value;

use crate::path;

const DNS1035_LABEL_MAX_LENGTH: usize = 63;
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

/// Errors for a DNS-1035 label (resource names, kinds lowercased, short names, categories).
pub(crate) fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {DNS1035_LABEL_MAX_LENGTH} characters"
        ));
    }
    let bytes = value.as_bytes();
    let valid = match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_lowercase()
                && (last.is_ascii_lowercase() || last.is_ascii_digit())
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        }
        _ => false,
    };
    if !valid {
        errs.push(format!(
            "{DNS1035_LABEL_ERR} (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"
        ));
    }
    errs
}

fn string_list(names: &Value, key: &str) -> Vec<String> {
    names
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `ValidateCustomResourceDefinitionNames`: format rules for whichever names are set.
pub(crate) fn validate_names(names: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let get = |key: &str| names.get(key).and_then(Value::as_str).unwrap_or_default();
    for key in ["plural", "singular"] {
        let value = get(key);
        let errs = is_dns1035_label(value);
        if !value.is_empty() && !errs.is_empty() {
            errors.push(FieldError::invalid(
                &path::child(at, key),
                Value::from(value),
                &errs.join(","),
            ));
        }
    }
    for key in ["kind", "listKind"] {
        let value = get(key);
        let errs = is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !errs.is_empty() {
            errors.push(FieldError::invalid(
                &path::child(at, key),
                Value::from(value),
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    errs.join(",")
                ),
            ));
        }
    }
    for key in ["shortNames", "categories"] {
        let list_at = path::child(at, key);
        for (i, name) in string_list(names, key).iter().enumerate() {
            let errs = is_dns1035_label(name);
            if !errs.is_empty() {
                errors.push(FieldError::invalid(
                    &path::index(&list_at, i),
                    Value::from(name.as_str()),
                    &errs.join(","),
                ));
            }
        }
    }
    if !get("kind").is_empty() && get("kind") == get("listKind") {
        errors.push(FieldError::invalid(
            &path::child(at, "listKind"),
            Value::from(get("listKind")),
            "kind and listKind may not be the same",
        ));
    }
    errors
}

/// The `shortNames`/`categories` of a names object.
pub(crate) fn list(names: &Value, key: &str) -> Vec<String> {
    string_list(names, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dns1035() {
        assert!(is_dns1035_label("widgets").is_empty());
        assert!(is_dns1035_label("a1-b").is_empty());
        assert_eq!(is_dns1035_label("1abc").len(), 1);
        assert_eq!(is_dns1035_label("Abc").len(), 1);
        assert!(is_dns1035_label("").len() == 1);
    }

    #[test]
    fn kind_may_have_mixed_case() {
        let errs = validate_names(
            &json!({"plural": "widgets", "kind": "Widget", "listKind": "WidgetList"}),
            "spec.names",
        );
        assert!(errs.is_empty(), "{errs:?}");
        let errs = validate_names(&json!({"kind": "Wid_get"}), "spec.names");
        assert!(errs[0].to_string().starts_with("spec.names.kind: Invalid value: \"Wid_get\": may have mixed case, but should otherwise match: a DNS-1035 label"));
    }

    #[test]
    fn kind_and_list_kind_differ() {
        let errs = validate_names(
            &json!({"kind": "Widget", "listKind": "Widget"}),
            "spec.names",
        );
        assert_eq!(
            errs[0].to_string(),
            "spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same"
        );
    }

    #[test]
    fn short_names_and_categories() {
        let errs = validate_names(
            &json!({"shortNames": ["wd", "W"], "categories": ["all", "-x"]}),
            "spec.names",
        );
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.names.shortNames[1]", "spec.names.categories[1]"]
        );
    }
}
