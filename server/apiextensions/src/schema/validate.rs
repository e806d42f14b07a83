//! Validation of a value against its schema, with kube-apiserver's field paths and messages.
//!
//! Clients and tests compare the text of 422 responses, so each check reproduces the message the
//! OpenAPI validator behind kube-apiserver prints (`spec.replicas in body must be of type integer:
//! "string"`) and the field-error kind Kubernetes maps it to (`Invalid`, `Required`,
//! `Unsupported value`, `Too many`, `Duplicate value`).

use kcp_apimachinery::FieldError;
use kcp_apimachinery::validation::{NameRule, validate_object_meta};
use serde_json::{Map, Value};

use crate::path;
use crate::quote::quote;
use crate::schema::format;
use crate::schema::node::{Additional, ListType, Node, Type};

/// All violations of `node` by `value`, found at field path `at`.
pub(crate) fn validate_value(node: &Node, value: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    walk(node, value, at, &mut errors);
    errors
}

/// The JSON type name kube-openapi reports for a value.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `%v` of a float64 bound, printed as an integer when it has no fraction.
fn go_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_error(at: &str, expected: &str, actual: &str) -> FieldError {
    FieldError::type_invalid(
        at,
        Value::from(actual),
        &format!("{at} in body must be of type {expected}: {}", quote(actual)),
    )
}

fn walk(node: &Node, value: &Value, at: &str, errors: &mut Vec<FieldError>) {
    if !check_type(node, value, at, errors) {
        return;
    }
    if value.is_null() {
        return;
    }
    check_format(node, value, at, errors);
    check_enum(node, value, at, errors);
    match value {
        Value::Number(n) => check_number(node, n, value, at, errors),
        Value::String(s) => check_string(node, s, at, errors),
        Value::Array(items) => check_array(node, items, at, errors),
        Value::Object(map) => check_object(node, map, at, errors),
        Value::Bool(_) | Value::Null => {}
    }
    check_junctors(node, value, at, errors);
}

/// Reports a type mismatch; false when validation of this value should stop.
fn check_type(node: &Node, value: &Value, at: &str, errors: &mut Vec<FieldError>) -> bool {
    let expected = match (node.ty, node.int_or_string) {
        (Some(ty), _) => ty.name(),
        (None, true) => "integer,string",
        (None, false) => return true,
    };
    if value.is_null() {
        if node.nullable {
            return false;
        }
        errors.push(type_error(at, expected, "null"));
        return false;
    }
    let ok = match (node.ty, value) {
        (None, v) => is_integer(v) || v.is_string(),
        (Some(Type::Integer), v) => is_integer(v),
        (Some(Type::Number), v) => v.is_number(),
        (Some(Type::String), v) => v.is_string(),
        (Some(Type::Boolean), v) => v.is_boolean(),
        (Some(Type::Array), v) => v.is_array(),
        (Some(Type::Object), v) => v.is_object(),
    };
    if !ok {
        errors.push(type_error(at, expected, json_type(value)));
    }
    ok
}

fn check_format(node: &Node, value: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(format) = node.format.as_deref() else {
        return;
    };
    match value {
        Value::String(s) if !format::check_string(format, s) => {
            errors.push(FieldError::type_invalid(
                at,
                value.clone(),
                &format!("{at} in body must be of type {format}: {}", quote(s)),
            ));
        }
        Value::Number(n) => {
            let (ty, fits) = if node.ty == Some(Type::Integer) {
                ("integer", format::integer_fits(format, n))
            } else {
                (
                    "number",
                    n.as_f64().is_none_or(|f| format::number_fits(format, f)),
                )
            };
            if !fits {
                errors.push(FieldError::invalid(
                    at,
                    value.clone(),
                    &format!("Checked value must be of type {ty} with format {format} in {at}"),
                ));
            }
        }
        _ => {}
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn check_enum(node: &Node, value: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(allowed) = &node.enumeration else {
        return;
    };
    if allowed.is_empty() || allowed.iter().any(|a| json_equal(a, value)) {
        return;
    }
    let names: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    errors.push(FieldError::not_supported(at, value.clone(), &refs));
}

fn check_number(
    node: &Node,
    n: &serde_json::Number,
    value: &Value,
    at: &str,
    errors: &mut Vec<FieldError>,
) {
    let integer = n.as_i64();
    let data = n.as_f64().unwrap_or(0.0);
    // Kubernetes compares integers natively, with the bound truncated to an integer.
    let bound = |b: f64| match integer {
        Some(_) => (b.trunc(), format!("{}", b as i64)),
        None => (b, go_number(b)),
    };
    let mut invalid = |detail: String| errors.push(FieldError::invalid(at, value.clone(), &detail));
    if let Some(factor) = node.multiple_of
        && factor > 0.0
    {
        let multiple = match integer {
            Some(i) if factor.fract() == 0.0 => i % (factor as i64) == 0,
            _ => {
                let m = if factor < 1.0 {
                    (1.0 / factor) * data
                } else {
                    data / factor
                };
                m.fract() == 0.0
            }
        };
        if !multiple {
            invalid(format!(
                "{at} in body should be a multiple of {}",
                bound(factor).1
            ));
        }
    }
    if let Some(max) = node.maximum {
        let (max, shown) = bound(max);
        if node.exclusive_maximum && data >= max {
            invalid(format!("{at} in body should be less than {shown}"));
        } else if data > max {
            invalid(format!(
                "{at} in body should be less than or equal to {shown}"
            ));
        }
    }
    if let Some(min) = node.minimum {
        let (min, shown) = bound(min);
        if node.exclusive_minimum && data <= min {
            invalid(format!("{at} in body should be greater than {shown}"));
        } else if data < min {
            invalid(format!(
                "{at} in body should be greater than or equal to {shown}"
            ));
        }
    }
}

fn check_string(node: &Node, s: &str, at: &str, errors: &mut Vec<FieldError>) {
    let runes = s.chars().count() as u64;
    if let Some(max) = node.max_length
        && runes > max
    {
        errors.push(FieldError::too_long(at, max as usize));
    }
    if let Some(min) = node.min_length
        && runes < min
    {
        errors.push(FieldError::invalid(
            at,
            Value::from(s),
            &format!("{at} in body should be at least {min} chars long"),
        ));
    }
    if let Some((pattern, re)) = &node.pattern
        && !re.is_match(s)
    {
        errors.push(FieldError::invalid(
            at,
            Value::from(s),
            &format!("{at} in body should match '{pattern}'"),
        ));
    }
}

fn check_array(node: &Node, items: &[Value], at: &str, errors: &mut Vec<FieldError>) {
    let len = items.len();
    if let Some(min) = node.min_items
        && (len as u64) < min
    {
        errors.push(FieldError::invalid(
            at,
            Value::from(len),
            &format!("{at} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = node.max_items
        && len as u64 > max
    {
        errors.push(FieldError::too_many(at, len, max as usize));
    }
    if node.unique_items
        && items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| json_equal(a, b)))
    {
        errors.push(FieldError::invalid(
            at,
            Value::from(""),
            &format!("{at} in body shouldn't contain duplicates"),
        ));
    }
    match node.list_type {
        Some(ListType::Set) => check_set(items, at, errors),
        Some(ListType::Map) => check_list_map(node, items, at, errors),
        _ => {}
    }
    if let Some(item_node) = &node.items {
        for (i, item) in items.iter().enumerate() {
            walk(item_node, item, &path::index(at, i), errors);
        }
    }
}

fn check_set(items: &[Value], at: &str, errors: &mut Vec<FieldError>) {
    for (i, item) in items.iter().enumerate() {
        if items[..i].iter().any(|earlier| json_equal(earlier, item)) {
            errors.push(FieldError::duplicate(&path::index(at, i), item.clone()));
        }
    }
}

/// The key fields of one list-map entry, in `x-kubernetes-list-map-keys` order (defaults applied).
pub(crate) fn list_map_key(node: &Node, item: &Value) -> Option<Map<String, Value>> {
    let item_node = node.items.as_deref();
    let obj = item.as_object()?;
    let mut key = Map::new();
    for name in &node.list_map_keys {
        let value = obj.get(name).cloned().or_else(|| {
            item_node
                .and_then(|n| n.property(name))
                .and_then(|p| p.default.clone())
        });
        if let Some(value) = value {
            key.insert(name.clone(), value);
        }
    }
    Some(key)
}

fn check_list_map(node: &Node, items: &[Value], at: &str, errors: &mut Vec<FieldError>) {
    let mut seen: Vec<Map<String, Value>> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(key) = list_map_key(node, item) else {
            errors.push(FieldError::invalid(
                &path::index(at, i),
                item.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        };
        let as_value = Value::Object(key.clone());
        if seen
            .iter()
            .any(|k| json_equal(&Value::Object(k.clone()), &as_value))
        {
            errors.push(FieldError::duplicate(&path::index(at, i), as_value));
        } else {
            seen.push(key);
        }
    }
}

fn check_object(node: &Node, map: &Map<String, Value>, at: &str, errors: &mut Vec<FieldError>) {
    let count = map.len();
    if let Some(min) = node.min_properties
        && (count as u64) < min
    {
        errors.push(FieldError::invalid(
            at,
            Value::from(count),
            &format!("{at} in body should have at least {min} properties"),
        ));
    }
    if let Some(max) = node.max_properties
        && count as u64 > max
    {
        errors.push(FieldError::too_many(at, count, max as usize));
    }
    for name in &node.required {
        if !map.contains_key(name) {
            errors.push(FieldError::required(&path::child(at, name), ""));
        }
    }
    for (key, child) in map {
        let child_at = path::child(at, key);
        if let Some(prop) = node.property(key) {
            walk(prop, child, &child_at, errors);
            continue;
        }
        match &node.additional {
            Additional::Schema(additional) => walk(additional, child, &child_at, errors),
            Additional::Allowed(false) => errors.push(FieldError::invalid(
                at,
                Value::from(key.as_str()),
                &format!("{at}.{key} in body is a forbidden property"),
            )),
            _ => {}
        }
    }
    if node.embedded {
        check_embedded(map, at, errors);
    }
}

/// An embedded resource carries `apiVersion`, `kind` and valid `metadata` like any object.
fn check_embedded(map: &Map<String, Value>, at: &str, errors: &mut Vec<FieldError>) {
    for field in ["apiVersion", "kind"] {
        let field_at = path::child(at, field);
        match map.get(field) {
            None => errors.push(FieldError::required(&field_at, "")),
            Some(Value::String(s)) if s.is_empty() => errors.push(FieldError::invalid(
                &field_at,
                Value::from(""),
                "must not be empty",
            )),
            Some(Value::String(_)) => {}
            Some(other) => errors.push(FieldError::invalid(
                &field_at,
                other.clone(),
                "must be a string",
            )),
        }
    }
    let Some(metadata) = map.get("metadata") else {
        return;
    };
    let mut probe = serde_json::json!({ "metadata": metadata });
    if let Some(meta) = probe.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        meta.insert("name".into(), Value::from("fakename"));
    }
    let namespaced = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    let prefix = path::child(at, "metadata");
    for mut err in validate_object_meta(&probe, namespaced, NameRule::PathSegment) {
        if let Some(rest) = err.field.strip_prefix("metadata") {
            err.field = format!("{prefix}{rest}");
        }
        errors.push(err);
    }
}

/// `<nil>`: where kube-openapi's composite errors land, since they carry no field.
const NO_FIELD: &str = "<nil>";

fn composite(detail: String) -> FieldError {
    FieldError::invalid(NO_FIELD, Value::from(""), &detail)
}

fn check_junctors(node: &Node, value: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let results = |branches: &[Node]| -> Vec<Vec<FieldError>> {
        branches
            .iter()
            .map(|b| validate_value(b, value, at))
            .collect()
    };
    let quoted_at = quote(at);
    if !node.any_of.is_empty() {
        let outcomes = results(&node.any_of);
        if outcomes.iter().all(|errs| !errs.is_empty()) {
            errors.push(composite(format!(
                "{quoted_at} must validate at least one schema (anyOf)"
            )));
            if let Some(best) = outcomes.into_iter().min_by_key(Vec::len) {
                errors.extend(best);
            }
        }
    }
    if !node.one_of.is_empty() {
        let outcomes = results(&node.one_of);
        let valid = outcomes.iter().filter(|errs| errs.is_empty()).count();
        if valid != 1 {
            let detail = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errors.push(composite(format!(
                "{quoted_at} must validate one and only one schema (oneOf). {detail}"
            )));
            if valid == 0
                && let Some(best) = outcomes.into_iter().min_by_key(Vec::len)
            {
                errors.extend(best);
            }
        }
    }
    if !node.all_of.is_empty() {
        let outcomes = results(&node.all_of);
        let valid = outcomes.iter().filter(|errs| errs.is_empty()).count();
        if valid != outcomes.len() {
            let none = if valid == 0 { ". None validated" } else { "" };
            errors.extend(outcomes.into_iter().flatten());
            errors.push(composite(format!(
                "{quoted_at} must validate all the schemas (allOf){none}"
            )));
        }
    }
    if let Some(not) = &node.not
        && validate_value(not, value, at).is_empty()
    {
        errors.push(composite(format!(
            "{quoted_at} must not validate the schema (not)"
        )));
    }
}
