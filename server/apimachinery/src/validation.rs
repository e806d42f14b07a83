//! Kubernetes naming and `ObjectMeta` validation rules.
//!
//! Names, namespaces, label keys and values, annotation keys, finalizers and data keys follow
//! fixed grammars (RFC 1123 labels and subdomains, "qualified names"). Users see the rule text in
//! 422 responses and tools compare it, so each check returns Kubernetes' exact messages,
//! including its example lists. The checks are written by hand rather than with regexes: the
//! grammars are tiny and this keeps validation allocation-free on the happy path.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::meta;
use crate::status::FieldError;

/// kube-apiserver's limit on a request body; larger bodies are rejected with 413.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;
/// etcd's default request limit (1.5 MiB): a larger encoded object cannot be stored (413).
pub const MAX_STORED_OBJECT_BYTES: usize = 1_572_864;
/// Longest DNS-1123 label (namespace names, many object names).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS-1123 subdomain (most object names).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest label value and name part of a qualified name.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// Total bytes allowed for all annotation keys and values of one object.
pub const TOTAL_ANNOTATION_SIZE_LIMIT_BYTES: usize = 256 * 1024;
/// Longest `managedFields[].manager`.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// Message for a negative count (`generation`, grace periods).
pub const IS_NEGATIVE_ERROR_MSG: &str = "must be greater than or equal to 0";
/// Message for a field that may not change on update.
pub const FIELD_IMMUTABLE_ERROR_MSG: &str = "field is immutable";

const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";
const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// `must be no more than N characters`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// Kubernetes' rule message with examples and the pattern it documents.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// Non-empty, made of `allowed` bytes, starting and ending with `edge` bytes.
fn is_word(s: &str, allowed: impl Fn(u8) -> bool, edge: impl Fn(u8) -> bool) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            edge(first) && edge(last) && bytes.iter().all(|&b| allowed(b))
        }
        _ => false,
    }
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn matches_dns1123_label(s: &str) -> bool {
    is_word(s, |b| lower_alnum(b) || b == b'-', lower_alnum)
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

fn matches_qualified_name(s: &str) -> bool {
    is_word(
        s,
        |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'),
        |b| b.is_ascii_alphanumeric(),
    )
}

/// Errors for a DNS-1123 label (at most 63 lowercase alphanumerics and `-`); empty when valid.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// Errors for a DNS-1123 subdomain (dot-separated labels, at most 253 characters).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Errors for a qualified name (label and annotation keys, finalizers): an optional DNS
/// subdomain prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_` and `.`.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_error(LABEL_VALUE_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
        ));
    }
    errs
}

/// Errors for a label value: empty, or at most 63 alphanumerics, `-`, `_`, `.` starting and
/// ending alphanumeric.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Errors for a ConfigMap or Secret data key (which becomes a file name when mounted).
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let key_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if value.is_empty() || !value.bytes().all(key_byte) {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match value {
        "." => errs.push("must not be '.'".to_string()),
        ".." => errs.push("must not be '..'".to_string()),
        v if v.starts_with("..") => errs.push("must not start with '..'".to_string()),
        _ => {}
    }
    errs
}

/// Errors for a name used as a single URL path segment (e.g. RBAC objects).
pub fn is_valid_path_segment_name(value: &str) -> Vec<String> {
    if let Some(bad) = [".", ".."].into_iter().find(|bad| value == *bad) {
        return vec![format!("may not be '{bad}'")];
    }
    is_valid_path_segment_prefix(value)
}

/// Errors for a `generateName` prefix of a path-segment name.
pub fn is_valid_path_segment_prefix(value: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|bad| value.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// Which grammar an object type's names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain: most resources (ConfigMap, Secret, CRDs, ...).
    Dns1123Subdomain,
    /// DNS-1123 label: Namespace, Service, ...
    Dns1123Label,
    /// Anything usable as one path segment: RBAC roles and bindings, ...
    PathSegment,
}

impl NameRule {
    /// Errors for `name`; with `prefix`, `name` is a `generateName` value, which may end in `-`.
    pub fn errors(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::Dns1123Subdomain => is_dns1123_subdomain(&mask_trailing_dash(name, prefix)),
            NameRule::Dns1123Label => is_dns1123_label(&mask_trailing_dash(name, prefix)),
            NameRule::PathSegment if prefix => is_valid_path_segment_prefix(name),
            NameRule::PathSegment => is_valid_path_segment_name(name),
        }
    }
}

/// A generateName prefix is checked as if its trailing `-` were a letter.
fn mask_trailing_dash(name: &str, prefix: bool) -> String {
    match name.strip_suffix('-') {
        Some(rest) if prefix && name.len() > 1 => format!("{rest}a"),
        _ => name.to_string(),
    }
}

/// Validates label keys and values, reported against `field` (e.g. `metadata.labels`).
pub fn validate_labels(labels: &BTreeMap<String, String>, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (key, value) in labels {
        errs.extend(
            is_qualified_name(key)
                .iter()
                .map(|m| FieldError::invalid(field, Value::from(key.as_str()), m)),
        );
        errs.extend(
            is_valid_label_value(value)
                .iter()
                .map(|m| FieldError::invalid(field, Value::from(value.as_str()), m)),
        );
    }
    errs
}

/// Validates annotation keys (qualified names, case-insensitive) and their total size.
pub fn validate_annotations(
    annotations: &BTreeMap<String, String>,
    field: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in annotations.keys() {
        errs.extend(
            is_qualified_name(&key.to_lowercase())
                .iter()
                .map(|m| FieldError::invalid(field, Value::from(key.as_str()), m)),
        );
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_BYTES {
        errs.push(FieldError::too_long(
            field,
            TOTAL_ANNOTATION_SIZE_LIMIT_BYTES,
        ));
    }
    errs
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Validates owner references: apiVersion with a version, kind, name and uid present, no
/// core Event as owner, and at most one controller.
pub fn validate_owner_references(references: &[Value], field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for reference in references {
        let api_version = str_field(reference, "apiVersion");
        let kind = str_field(reference, "kind");
        let gvk = meta::GroupVersionKind::from_api_version_and_kind(api_version, kind);
        let required = [
            (
                "apiVersion",
                api_version,
                gvk.version.is_empty(),
                "version must not be empty",
            ),
            ("kind", kind, gvk.kind.is_empty(), "kind must not be empty"),
            (
                "name",
                str_field(reference, "name"),
                str_field(reference, "name").is_empty(),
                "name must not be empty",
            ),
            (
                "uid",
                str_field(reference, "uid"),
                str_field(reference, "uid").is_empty(),
                "uid must not be empty",
            ),
        ];
        for (child, value, missing, detail) in required {
            if missing {
                errs.push(FieldError::invalid(
                    &format!("{field}.{child}"),
                    Value::from(value),
                    detail,
                ));
            }
        }
        if gvk.group.is_empty() && gvk.version == "v1" && gvk.kind == "Event" {
            errs.push(FieldError::invalid(
                field,
                reference.clone(),
                &format!("{gvk} is disallowed from being an owner"),
            ));
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{}", str_field(reference, "name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    field,
                    Value::Array(references.to_vec()),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// Validates finalizer names (qualified names) and that `orphan` and `foregroundDeletion` are
/// not both requested. Like Kubernetes, duplicates are accepted.
pub fn validate_finalizers(finalizers: &[String], field: &str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = finalizers
        .iter()
        .flat_map(|f| {
            is_qualified_name(f)
                .into_iter()
                .map(move |m| FieldError::invalid(field, Value::from(f.as_str()), &m))
        })
        .collect();
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has(FINALIZER_ORPHAN_DEPENDENTS) && has(FINALIZER_DELETE_DEPENDENTS) {
        errs.push(FieldError::invalid(
            field,
            Value::from(finalizers.to_vec()),
            &format!("finalizer {FINALIZER_ORPHAN_DEPENDENTS} and {FINALIZER_DELETE_DEPENDENTS} cannot be both set"),
        ));
    }
    errs
}

/// Validates `managedFields` entries: operation `Apply` or `Update`, fieldsType `FieldsV1`, and a
/// short, printable manager name.
pub fn validate_managed_fields(entries: &[Value], field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let operation = str_field(entry, "operation");
        if operation != "Apply" && operation != "Update" {
            errs.push(FieldError::invalid(
                &format!("{path}.operation"),
                Value::from(operation),
                "must be `Apply` or `Update`",
            ));
        }
        let fields_type = str_field(entry, "fieldsType");
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                &format!("{path}.fieldsType"),
                Value::from(fields_type),
                "must be `FieldsV1`",
            ));
        }
        let manager = str_field(entry, "manager");
        let manager_path = format!("{path}.manager");
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            errs.push(FieldError::too_long(
                &manager_path,
                FIELD_MANAGER_MAX_LENGTH,
            ));
        }
        for (pos, c) in manager.char_indices().filter(|(_, c)| c.is_control()) {
            errs.push(FieldError::invalid(
                &manager_path,
                Value::from(manager),
                &format!("invalid character U+{:04X} (at position {pos})", c as u32),
            ));
        }
    }
    errs
}

/// Validates the `metadata` of an object being created (or, together with
/// [`validate_object_meta_update`], updated): name (which the server has already derived
/// from generateName), generateName, namespace presence, generation, labels, annotations,
/// owner references, finalizers and managedFields.
pub fn validate_object_meta(obj: &Value, namespaced: bool, name_rule: NameRule) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = meta::generate_name(obj).unwrap_or_default();
    if !generate_name.is_empty() {
        errs.extend(
            name_rule.errors(generate_name, true).iter().map(|m| {
                FieldError::invalid("metadata.generateName", Value::from(generate_name), m)
            }),
        );
    }
    match meta::name(obj).unwrap_or_default() {
        "" => errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
        name => errs.extend(
            name_rule
                .errors(name, false)
                .iter()
                .map(|m| FieldError::invalid("metadata.name", Value::from(name), m)),
        ),
    }
    let namespace = meta::namespace(obj).unwrap_or_default();
    match (namespaced, namespace.is_empty()) {
        (true, true) => errs.push(FieldError::required("metadata.namespace", "")),
        (true, false) => errs.extend(
            NameRule::Dns1123Label
                .errors(namespace, false)
                .iter()
                .map(|m| FieldError::invalid("metadata.namespace", Value::from(namespace), m)),
        ),
        (false, false) => errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        )),
        (false, true) => {}
    }
    if let Some(generation) = meta::generation(obj).filter(|g| *g < 0) {
        errs.push(FieldError::invalid(
            "metadata.generation",
            Value::from(generation),
            IS_NEGATIVE_ERROR_MSG,
        ));
    }
    errs.extend(validate_common_meta(obj));
    errs.extend(validate_finalizers(
        &meta::finalizers(obj),
        "metadata.finalizers",
    ));
    errs
}

/// Checks shared by create and update validation.
fn validate_common_meta(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_labels(&meta::labels(obj), "metadata.labels");
    errs.extend(validate_annotations(
        &meta::annotations(obj),
        "metadata.annotations",
    ));
    errs.extend(validate_owner_references(
        &meta::owner_references(obj),
        "metadata.ownerReferences",
    ));
    errs.extend(validate_managed_fields(
        &meta::managed_fields(obj),
        "metadata.managedFields",
    ));
    errs
}

/// A `metadata` field's value for immutability checks: absent and `null` are the same.
fn meta_value(obj: &Value, key: &str) -> Value {
    obj.get("metadata")
        .and_then(|m| m.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Validates an update of `metadata` against the stored object: a resourceVersion is given,
/// generation does not go down, name, namespace, uid, creationTimestamp, deletionTimestamp and
/// deletionGracePeriodSeconds are unchanged, no finalizer is added once deletion started, and
/// labels, annotations, owner references and managedFields are well-formed. Callers also run
/// their type's create validation (which includes [`validate_object_meta`]) on the new object.
pub fn validate_object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if meta::deletion_timestamp(old).is_some() {
        let old_finalizers = meta::finalizers(old);
        let mut added: Vec<String> = meta::finalizers(new)
            .into_iter()
            .filter(|f| !old_finalizers.contains(f))
            .collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            let listed: Vec<&str> = added.iter().map(String::as_str).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    crate::gofmt::string_slice(&listed)
                ),
            ));
        }
    }
    let resource_version = meta::resource_version(new).unwrap_or_default();
    if resource_version.is_empty() {
        errs.push(FieldError::invalid(
            "metadata.resourceVersion",
            Value::from(resource_version),
            "must be specified for an update",
        ));
    }
    let new_generation = meta::generation(new).unwrap_or_default();
    if new_generation < meta::generation(old).unwrap_or_default() {
        errs.push(FieldError::invalid(
            "metadata.generation",
            Value::from(new_generation),
            "must not be decremented",
        ));
    }
    let immutable = [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ];
    for key in immutable {
        let new_value = meta_value(new, key);
        if new_value != meta_value(old, key) {
            errs.push(FieldError::invalid(
                &format!("metadata.{key}"),
                new_value,
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
    }
    errs.extend(validate_common_meta(new));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const QNAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn dns1123_label() {
        for ok in ["a", "ab", "a-b", "0", "a1", &"a".repeat(63)] {
            assert!(is_dns1123_label(ok).is_empty(), "{ok}");
        }
        assert_eq!(is_dns1123_label("Foo"), vec![LABEL_MSG]);
        assert_eq!(is_dns1123_label("-a"), vec![LABEL_MSG]);
        assert_eq!(is_dns1123_label(""), vec![LABEL_MSG]);
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }

    #[test]
    fn dns1123_subdomain() {
        for ok in ["a", "a.b", "a-b.c-d", "example.com", "0.0"] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        for bad in ["", "A", "a..b", ".a", "a.", "a_b", "a.-b"] {
            assert_eq!(is_dns1123_subdomain(bad), vec![SUBDOMAIN_MSG], "{bad}");
        }
        let long = "a".repeat(254);
        assert_eq!(
            is_dns1123_subdomain(&long),
            vec!["must be no more than 253 characters"]
        );
    }

    #[test]
    fn qualified_names() {
        for ok in ["a", "A", "a.b_c-d", "example.com/MyName", "k8s.io/x", "1"] {
            assert!(is_qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(is_qualified_name("a b"), vec![QNAME_MSG]);
        assert_eq!(
            is_qualified_name(""),
            vec![
                "name part must be non-empty".to_string(),
                QNAME_MSG.to_string()
            ]
        );
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            is_qualified_name("Ex.com/a"),
            vec![format!("prefix part {SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert_eq!(
            is_qualified_name("a/b/c"),
            vec![
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "A-b_c.d", "12345"] {
            assert!(is_valid_label_value(ok).is_empty(), "{ok:?}");
        }
        assert_eq!(
            is_valid_label_value("-a"),
            vec![
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }

    #[test]
    fn config_map_keys() {
        for ok in ["a", ".a", "KEY_NAME", "key-name", "key.name", "a..b"] {
            assert!(is_config_map_key(ok).is_empty(), "{ok}");
        }
        let regex_msg = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
        assert_eq!(is_config_map_key("a b"), vec![regex_msg]);
        assert_eq!(is_config_map_key(""), vec![regex_msg]);
        assert_eq!(is_config_map_key("."), vec!["must not be '.'"]);
        assert_eq!(is_config_map_key(".."), vec!["must not be '..'"]);
        assert_eq!(is_config_map_key("..a"), vec!["must not start with '..'"]);
    }

    #[test]
    fn path_segments_and_prefixes() {
        assert_eq!(
            NameRule::PathSegment.errors("..", false),
            vec!["may not be '..'"]
        );
        assert_eq!(
            NameRule::PathSegment.errors("a/b%", false),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(NameRule::PathSegment.errors("Any:Thing", false).is_empty());
        assert!(NameRule::PathSegment.errors("..", true).is_empty());
        assert!(NameRule::Dns1123Subdomain.errors("web-", true).is_empty());
        assert!(!NameRule::Dns1123Subdomain.errors("web-", false).is_empty());
        assert!(NameRule::Dns1123Label.errors("ns-", true).is_empty());
        assert!(!NameRule::Dns1123Label.errors("-", true).is_empty());
    }

    #[test]
    fn object_meta_create() {
        let ok =
            json!({"metadata": {"name": "x", "namespace": "default", "labels": {"app": "web"}}});
        assert!(validate_object_meta(&ok, true, NameRule::Dns1123Subdomain).is_empty());

        let missing = json!({"metadata": {}});
        assert_eq!(
            messages(&validate_object_meta(
                &missing,
                true,
                NameRule::Dns1123Subdomain
            )),
            vec![
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Required value",
            ]
        );
        let bad = json!({"metadata": {"name": "Foo", "namespace": "a.b", "generation": -1}});
        assert_eq!(
            messages(&validate_object_meta(
                &bad,
                true,
                NameRule::Dns1123Subdomain
            )),
            vec![
                format!("metadata.name: Invalid value: \"Foo\": {SUBDOMAIN_MSG}"),
                "metadata.namespace: Invalid value: \"a.b\": must not contain dots".to_string(),
                "metadata.generation: Invalid value: -1: must be greater than or equal to 0"
                    .to_string(),
            ]
        );
        let cluster_scoped = json!({"metadata": {"name": "x", "namespace": "default"}});
        assert_eq!(
            messages(&validate_object_meta(
                &cluster_scoped,
                false,
                NameRule::Dns1123Label
            )),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
        let generate = json!({"metadata": {"generateName": "Web-", "name": "web-abcde"}});
        assert_eq!(
            messages(&validate_object_meta(
                &generate,
                false,
                NameRule::Dns1123Label
            )),
            vec![format!(
                "metadata.generateName: Invalid value: \"Web-\": {LABEL_MSG}"
            )]
        );
    }

    #[test]
    fn labels_and_annotations() {
        let obj = json!({"metadata": {"name": "x",
            "labels": {"a b": "ok", "k": "-bad"},
            "annotations": {"Example.COM/Key": "fine", "bad key": "v"}}});
        let got = messages(&validate_object_meta(
            &obj,
            false,
            NameRule::Dns1123Subdomain,
        ));
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0],
            format!("metadata.labels: Invalid value: \"a b\": {QNAME_MSG}")
        );
        assert!(got[1].starts_with("metadata.labels: Invalid value: \"-bad\": a valid label"));
        assert_eq!(
            got[2],
            format!("metadata.annotations: Invalid value: \"bad key\": {QNAME_MSG}")
        );

        let big: BTreeMap<String, String> = [(
            "k".to_string(),
            "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_BYTES),
        )]
        .into();
        assert_eq!(
            messages(&validate_annotations(&big, "metadata.annotations")),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
    }

    #[test]
    fn owner_references() {
        let refs = vec![
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": true}),
            json!({"apiVersion": "", "kind": "", "name": "", "uid": ""}),
            json!({"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "2", "controller": true}),
        ];
        let got = messages(&validate_owner_references(
            &refs,
            "metadata.ownerReferences",
        ));
        assert_eq!(
            got[0],
            "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty"
        );
        assert_eq!(
            got[1],
            "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty"
        );
        assert_eq!(
            got[2],
            "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty"
        );
        assert_eq!(
            got[3],
            "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"
        );
        assert!(
            got[4].ends_with("/v1, Kind=Event is disallowed from being an owner"),
            "{}",
            got[4]
        );
        assert!(
            got[5].ends_with(
                "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/rs and Event/e"
            ),
            "{}",
            got[5]
        );
        assert_eq!(got.len(), 6);
    }

    #[test]
    fn finalizers() {
        let ok = vec![
            "kubernetes".to_string(),
            "example.com/f".to_string(),
            "example.com/f".to_string(),
        ];
        assert!(validate_finalizers(&ok, "metadata.finalizers").is_empty());
        let both = vec![
            "orphan".to_string(),
            "foregroundDeletion".to_string(),
            "a b".to_string(),
        ];
        let got = messages(&validate_finalizers(&both, "metadata.finalizers"));
        assert_eq!(
            got[0],
            format!("metadata.finalizers: Invalid value: \"a b\": {QNAME_MSG}")
        );
        assert_eq!(
            got[1],
            "metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\", \"a b\"}: finalizer orphan and foregroundDeletion cannot be both set"
        );
    }

    #[test]
    fn managed_fields() {
        let entries = vec![
            json!({"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}),
            json!({"manager": "m\u{1}", "operation": "Patch", "fieldsType": "FieldsV2"}),
        ];
        assert_eq!(
            messages(&validate_managed_fields(&entries, "metadata.managedFields")),
            vec![
                "metadata.managedFields[1].operation: Invalid value: \"Patch\": must be `Apply` or `Update`",
                "metadata.managedFields[1].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[1].manager: Invalid value: \"m\\x01\": invalid character U+0001 (at position 1)",
            ]
        );
    }

    #[test]
    fn object_meta_update() {
        let old = json!({"metadata": {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "5",
            "generation": 3, "creationTimestamp": "2024-01-01T00:00:00Z",
            "deletionTimestamp": "2024-01-02T00:00:00Z", "deletionGracePeriodSeconds": 0,
            "finalizers": ["a"]}});
        let mut same = old.clone();
        meta::set_finalizers(&mut same, Vec::<String>::new());
        assert!(validate_object_meta_update(&same, &old).is_empty());

        let new = json!({"metadata": {"name": "y", "namespace": "ns", "uid": "v",
            "generation": 2, "creationTimestamp": "2024-01-01T00:00:00Z",
            "finalizers": ["a", "c", "b"]}});
        assert_eq!(
            messages(&validate_object_meta_update(&new, &old)),
            vec![
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\", \"c\"}",
                "metadata.resourceVersion: Invalid value: \"\": must be specified for an update",
                "metadata.generation: Invalid value: 2: must not be decremented",
                "metadata.name: Invalid value: \"y\": field is immutable",
                "metadata.uid: Invalid value: \"v\": field is immutable",
                "metadata.deletionTimestamp: Invalid value: \"null\": field is immutable",
                "metadata.deletionGracePeriodSeconds: Invalid value: \"null\": field is immutable",
            ]
        );
    }
}
