//! Kubernetes strategic merge patch.
//!
//! A JSON merge patch that knows the schema: lists marked `merge` merge element by element
//! (by merge key, or as sets of primitives) instead of being replaced, and patches may carry
//! directives: `$patch: replace|delete` on maps, `$patch: replace|delete` elements in merged
//! lists, `$retainKeys`, `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.
//! The algorithm, the resulting element order and the error texts follow Kubernetes'
//! implementation as the server applies it (parallel deletion lists merged, unmatched nulls
//! ignored). Two deliberate refinements: values added where nothing existed are cleaned of
//! `null`s and directives (Kubernetes stores them raw and lets typed decoding drop them), and
//! structural errors Kubernetes leaks as 500s are reported as 400s.
//!
//! Keys starting with `$` that are not directives are ordinary fields (CRD schemas contain
//! `$ref` and `$schema`), as in Kubernetes.

use serde_json::{Map, Value};

use super::PatchError;
use super::schema::{FieldPatch, PLAIN_FIELD, PatchSchema};
use crate::gofmt;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

const ERR_BAD_JSON_DOC: &str = "invalid JSON document";
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
const ERR_PRIMITIVE_LIST_FORMAT: &str = "invalid patch format of primitive list";
const ERR_RETAIN_KEYS_FORMAT: &str = "invalid patch format of retainKeys";
const ERR_SET_ELEMENT_ORDER_FORMAT: &str = "invalid patch format of setElementOrder list";

type Result<T> = std::result::Result<T, PatchError>;

/// Applies a strategic merge patch to `target` using `schema` for list strategies and merge keys.
pub fn apply_strategic_merge_patch(
    target: &Value,
    patch: &[u8],
    schema: &PatchSchema,
) -> Result<Value> {
    let patch: Value = serde_json::from_slice(patch).map_err(|e| bad_request(e.to_string()))?;
    let patch = match patch {
        Value::Object(map) => map,
        Value::Null => return Ok(target.clone()),
        other => {
            return Err(bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_kind(&other)
            )));
        }
    };
    let Value::Object(original) = target else {
        return Err(bad_request(ERR_BAD_JSON_DOC.to_string()));
    };
    merge_map(original.clone(), patch, schema).map(Value::Object)
}

fn bad_request(message: String) -> PatchError {
    PatchError::BadRequest(message)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go kind name of a decoded JSON value, for Kubernetes' type-mismatch messages.
fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

fn bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    bad_request(format!(
        "expected a {expected}, but received a {}",
        go_kind(actual)
    ))
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> PatchError {
    bad_request(format!(
        "map: {} does not contain declared merge key: {key}",
        gofmt::value_v(&Value::Object(map.clone()))
    ))
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> PatchError {
    bad_request(format!(
        "unknown patch type: {} in map: {}",
        gofmt::value_v(directive),
        gofmt::value_v(&Value::Object(map.clone()))
    ))
}

fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Equality as Go's `==` on decoded JSON: numbers compare by value (1 equals 1.0).
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn field_of<'a>(schema: &'a PatchSchema, key: &str) -> &'a FieldPatch {
    schema.field(key).unwrap_or(&PLAIN_FIELD)
}

/// The directive part after a prefix must be `/<field>`.
fn extract_key(rest: &str, error: &str) -> Result<String> {
    rest.strip_prefix('/')
        .map(str::to_string)
        .ok_or_else(|| bad_request(error.to_string()))
}

fn strip_nulls(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::Object(inner) => (k, Value::Object(strip_nulls(inner))),
            other => (k, other),
        })
        .collect()
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: &PatchSchema,
) -> Result<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.shift_remove(DIRECTIVE);
                Ok(strip_nulls(patch))
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, schema)?;
    for (key, patch_value) in patch {
        let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(rest) => (extract_key(rest, ERR_PRIMITIVE_LIST_FORMAT)?, true),
            None => (key, false),
        };
        if patch_value.is_null() {
            original.shift_remove(&key);
            continue;
        }
        let field = field_of(schema, &key);
        match original.get_mut(&key) {
            Some(slot) => {
                let current = std::mem::take(slot);
                *slot = merge_value(current, patch_value, field, is_delete_list)?;
            }
            None if is_delete_list => {}
            None => {
                original.insert(key, fresh_value(patch_value, field)?);
            }
        }
    }
    Ok(original)
}

/// Merges a patch value into an existing value of the same field.
fn merge_value(
    current: Value,
    patch: Value,
    field: &FieldPatch,
    is_delete_list: bool,
) -> Result<Value> {
    if !same_kind(&current, &patch) {
        return if is_delete_list {
            Ok(current)
        } else {
            fresh_value(patch, field)
        };
    }
    match (current, patch) {
        (Value::Object(_), Value::Object(patch)) if field.replace => Ok(Value::Object(patch)),
        (Value::Object(current), Value::Object(patch)) => {
            merge_map(current, patch, &field.schema).map(Value::Object)
        }
        (Value::Array(current), Value::Array(patch)) => {
            merge_list_field(current, patch, field, is_delete_list).map(Value::Array)
        }
        (_, patch) => Ok(patch),
    }
}

/// A patch value for a field with nothing to merge into: directives applied, nulls dropped.
fn fresh_value(patch: Value, field: &FieldPatch) -> Result<Value> {
    match patch {
        Value::Object(map) if field.replace => Ok(Value::Object(map)),
        Value::Object(map) => merge_map(Map::new(), map, &field.schema).map(Value::Object),
        Value::Array(items) => merge_list_field(Vec::new(), items, field, false).map(Value::Array),
        scalar => Ok(scalar),
    }
}

/// Merges a list field by its strategy: merged lists (and parallel deletion lists) merge,
/// other lists are replaced by the patch.
fn merge_list_field(
    current: Vec<Value>,
    patch: Vec<Value>,
    field: &FieldPatch,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if field.merge || is_delete_list {
        merge_list(
            current,
            patch,
            &field.schema,
            field.merge_key.as_deref().unwrap_or_default(),
            is_delete_list,
        )
    } else {
        Ok(patch)
    }
}

/// `$retainKeys`: keys of the original not listed are dropped; the patch may only set listed keys.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.shift_remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad_request(ERR_RETAIN_KEYS_FORMAT.to_string()));
    };
    let listed = |key: &str| retain.iter().any(|r| r.as_str() == Some(key));
    let unlisted = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !k.starts_with(SET_ELEMENT_ORDER)
            && !listed(k)
    });
    if unlisted {
        return Err(bad_request(ERR_RETAIN_KEYS_FORMAT.to_string()));
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// `$setElementOrder/<field>`: merges the field's patch list (if any) and orders the result by
/// the given order, then by the live order for server-only elements.
fn apply_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: &PatchSchema,
) -> Result<()> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let Some(order) = patch.shift_remove(&directive) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type("slice", &order));
        };
        let key = extract_key(
            &directive[SET_ELEMENT_ORDER.len()..],
            ERR_SET_ELEMENT_ORDER_FORMAT,
        )?;
        let list_at = |map: &Map<String, Value>| -> Result<Option<Vec<Value>>> {
            match map.get(&key) {
                None => Ok(None),
                Some(Value::Array(items)) => Ok(Some(items.clone())),
                Some(other) => Err(bad_arg_type("slice", other)),
            }
        };
        let (original_list, patch_list) = (list_at(original)?, list_at(patch)?);
        let field = field_of(schema, &key);
        let merge_key = field.merge_key.as_deref().unwrap_or_default();
        validate_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let merged = match (&original_list, patch_list) {
            (None, None) => continue,
            (Some(current), None) => current.clone(),
            (current, Some(items)) => {
                merge_list_field(current.clone().unwrap_or_default(), items, field, false)?
            }
        };
        let live = original_list.unwrap_or_default();
        let ordered = if merged.is_empty() {
            merged
        } else {
            let (listed, server_only) = partition(&merged, &order, merge_key)?;
            normalize_order(listed, server_only, &order, &live, merge_key)?
        };
        original.insert(key.clone(), Value::Array(ordered));
        patch.shift_remove(&key);
    }
    Ok(())
}

fn is_delete_directive(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Checks that the patch list's elements appear in the same relative order in `$setElementOrder`.
fn validate_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let mut kept = Vec::new();
    for item in patch_list {
        if !merge_key.is_empty() && !item.is_object() {
            return Err(bad_arg_type("map", item));
        }
        if merge_key.is_empty() || !is_delete_directive(item) {
            kept.push(item);
        }
    }
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        if merge_key_equal(kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(bad_request(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            gofmt::value_v(&Value::Array(patch_list.to_vec())),
            gofmt::value_v(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_key_value<'a>(item: &'a Value, merge_key: &str) -> Result<&'a Value> {
    let Value::Object(map) = item else {
        return Err(bad_arg_type("map", item));
    };
    map.get(merge_key)
        .ok_or_else(|| no_merge_key(map, merge_key))
}

fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(scalar_eq(left, right));
    }
    Ok(scalar_eq(
        merge_key_value(left, merge_key)?,
        merge_key_value(right, merge_key)?,
    ))
}

/// Whether a list element is a map whose `merge_key` equals `value`.
fn has_key_value(item: &Value, merge_key: &str, value: &Value) -> bool {
    item.get(merge_key).is_some_and(|v| scalar_eq(v, value))
}

/// Merges two lists of a `merge` field; `merge_key` is empty for primitive lists.
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    schema: &PatchSchema,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    check_element_kinds(&original, &patch)?;
    let maps = original
        .iter()
        .chain(&patch)
        .next()
        .is_some_and(Value::is_object);
    if !maps {
        if is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|o| !patch.iter().any(|p| scalar_eq(o, p)))
                .collect());
        }
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for item in original.iter().chain(&patch) {
            if !merged.iter().any(|m| scalar_eq(m, item)) {
                merged.push(item.clone());
            }
        }
        let (listed, server_only) = partition(&merged, &patch, "")?;
        return normalize_order(listed, server_only, &patch, &original, "");
    }
    if merge_key.is_empty() {
        return Err(bad_request(
            "cannot merge lists without merge key for type map".to_string(),
        ));
    }
    let (original, patch) = apply_element_directives(original, patch, schema, merge_key)?;
    let mut merged = original.clone();
    for item in &patch {
        let Value::Object(element) = item else {
            return Err(bad_arg_type("map", item));
        };
        let key_value = element
            .get(merge_key)
            .ok_or_else(|| no_merge_key(element, merge_key))?;
        match merged
            .iter()
            .position(|m| has_key_value(m, merge_key, key_value))
        {
            Some(i) => {
                let current = match std::mem::take(&mut merged[i]) {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(current, element.clone(), schema)?);
            }
            None => merged.push(Value::Object(merge_map(
                Map::new(),
                element.clone(),
                schema,
            )?)),
        }
    }
    let (listed, server_only) = partition(&merged, &patch, merge_key)?;
    normalize_order(listed, server_only, &patch, &original, merge_key)
}

/// All elements of both lists share one JSON type, and none is a list.
fn check_element_kinds(original: &[Value], patch: &[Value]) -> Result<()> {
    let mut items = original.iter().chain(patch);
    let Some(first) = items.next() else {
        return Ok(());
    };
    if first.is_array() {
        return Err(PatchError::Unprocessable(ERR_NO_LIST_OF_LISTS.to_string()));
    }
    if items.any(|item| !same_kind(first, item)) {
        let both = Value::Array(vec![
            Value::Array(original.to_vec()),
            Value::Array(patch.to_vec()),
        ]);
        return Err(bad_request(format!(
            "list element types are not identical: {}",
            gofmt::value_v(&both)
        )));
    }
    Ok(())
}

/// Applies `$patch: delete` elements (removing matches from the original) and `$patch: replace`
/// (the patch elements become the whole list); returns the original and the plain patch elements.
fn apply_element_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    schema: &PatchSchema,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let (directive, element) = match &item {
            Value::Object(element) => match element.get(DIRECTIVE) {
                Some(directive) => (directive, element),
                None => {
                    plain.push(item);
                    continue;
                }
            },
            _ => {
                plain.push(item);
                continue;
            }
        };
        match directive.as_str() {
            Some("delete") => {
                let key_value = element
                    .get(merge_key)
                    .ok_or_else(|| no_merge_key(element, merge_key))?;
                original.retain(|o| !has_key_value(o, merge_key, key_value));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(bad_request(
                    "merging lists cannot yet be specified in the patch".to_string(),
                ));
            }
            _ => return Err(bad_patch_type(directive, element)),
        }
    }
    if !replace {
        return Ok((original, plain));
    }
    let replacement = plain
        .into_iter()
        .map(|item| match item {
            Value::Object(map) => merge_map(Map::new(), map, schema).map(Value::Object),
            other => Ok(other),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((replacement, Vec::new()))
}

/// Splits `items` into those present in `by` (by merge key, or by value for primitives) and
/// the rest, keeping their order.
fn partition(items: &[Value], by: &[Value], merge_key: &str) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut listed = Vec::new();
    let mut rest = Vec::new();
    for item in items {
        let present = if merge_key.is_empty() {
            by.iter().any(|b| scalar_eq(b, item))
        } else {
            let key_value = merge_key_value(item, merge_key)?;
            by.iter().any(|b| has_key_value(b, merge_key, key_value))
        };
        if present {
            listed.push(item.clone())
        } else {
            rest.push(item.clone())
        }
    }
    Ok((listed, rest))
}

/// Position of `item` in `list`, comparing merge-key values (or whole values for primitives).
fn index_of(list: &[Value], item: &Value, merge_key: &str) -> Option<usize> {
    if merge_key.is_empty() {
        return list.iter().position(|v| scalar_eq(v, item));
    }
    let wanted = item.get(merge_key);
    list.iter().position(|v| match (v.get(merge_key), wanted) {
        (Some(a), Some(b)) => scalar_eq(a, b),
        (None, None) => true,
        _ => false,
    })
}

/// Orders patch elements by `patch_order` and server-only elements by `server_order`, then
/// interleaves them by the live order: Kubernetes' rule that patch order wins, and
/// server-only elements keep their place relative to the elements around them.
fn normalize_order(
    mut listed: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
) -> Result<Vec<Value>> {
    if !merge_key.is_empty() {
        for item in listed
            .iter()
            .chain(&server_only)
            .chain(patch_order)
            .chain(server_order)
        {
            merge_key_value(item, merge_key)?;
        }
    }
    listed.sort_by_key(|item| index_of(patch_order, item, merge_key).unwrap_or(usize::MAX));
    server_only.sort_by_key(|item| index_of(server_order, item, merge_key).unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(listed.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = listed.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                matches!(
                    (index_of(server_order, l, merge_key), index_of(server_order, r, merge_key)),
                    (Some(li), Some(ri)) if li < ri
                )
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}
