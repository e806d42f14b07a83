//! Typed access to `metadata` of objects held as JSON.
//!
//! Objects travel through the server as `serde_json::Value` so that one code path serves every
//! built-in and custom resource. These accessors are the only place that knows the JSON paths of
//! `ObjectMeta`; readers tolerate missing or mistyped fields (an object is validated elsewhere),
//! and writers create `metadata` when absent and drop fields that become empty, matching the
//! `omitempty` serialisation of Kubernetes.

mod group_version;

pub use group_version::{
    GroupResource, GroupVersion, GroupVersionError, GroupVersionKind, GroupVersionResource,
};

use std::collections::BTreeMap;

use serde_json::{Map, Value};

fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

fn meta_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    metadata(obj)?.get(key)?.as_str()
}

fn meta_i64(obj: &Value, key: &str) -> Option<i64> {
    metadata(obj)?.get(key)?.as_i64()
}

fn string_map(obj: &Value, key: &str) -> BTreeMap<String, String> {
    metadata(obj)
        .and_then(|m| m.get(key))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn array(obj: &Value, key: &str) -> Vec<Value> {
    metadata(obj)
        .and_then(|m| m.get(key))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Turns `v` into an object if it is anything else, and returns its map.
fn ensure_object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(map) => map,
        _ => unreachable!("the value was made an object above"),
    }
}

/// The object's `metadata` map, created (and the object made a JSON object) when absent.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let root = ensure_object(obj);
    ensure_object(
        root.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new())),
    )
}

fn set_meta(obj: &mut Value, key: &str, value: Value) {
    metadata_mut(obj).insert(key.to_string(), value);
}

/// Removes `metadata.<key>`; a no-op when absent.
pub fn remove_metadata_field(obj: &mut Value, key: &str) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove(key);
    }
}

pub fn api_version(obj: &Value) -> Option<&str> {
    obj.get("apiVersion")?.as_str()
}

pub fn kind(obj: &Value) -> Option<&str> {
    obj.get("kind")?.as_str()
}

/// The object's `apiVersion` and `kind` as a [`GroupVersionKind`].
pub fn group_version_kind(obj: &Value) -> GroupVersionKind {
    GroupVersionKind::from_api_version_and_kind(
        api_version(obj).unwrap_or_default(),
        kind(obj).unwrap_or_default(),
    )
}

/// Sets `apiVersion` and `kind`.
pub fn set_type_meta(obj: &mut Value, api_version: &str, kind: &str) {
    let root = ensure_object(obj);
    root.insert("apiVersion".to_string(), Value::from(api_version));
    root.insert("kind".to_string(), Value::from(kind));
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace")
}

pub fn generate_name(obj: &Value) -> Option<&str> {
    meta_str(obj, "generateName")
}

pub fn uid(obj: &Value) -> Option<&str> {
    meta_str(obj, "uid")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion")
}

pub fn generation(obj: &Value) -> Option<i64> {
    meta_i64(obj, "generation")
}

pub fn creation_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "creationTimestamp")
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "deletionTimestamp")
}

pub fn deletion_grace_period_seconds(obj: &Value) -> Option<i64> {
    meta_i64(obj, "deletionGracePeriodSeconds")
}

pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, "labels")
}

pub fn annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, "annotations")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    array(obj, "finalizers")
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

pub fn owner_references(obj: &Value) -> Vec<Value> {
    array(obj, "ownerReferences")
}

pub fn managed_fields(obj: &Value) -> Vec<Value> {
    array(obj, "managedFields")
}

pub fn set_name(obj: &mut Value, name: &str) {
    set_meta(obj, "name", Value::from(name));
}

pub fn set_namespace(obj: &mut Value, namespace: &str) {
    set_meta(obj, "namespace", Value::from(namespace));
}

pub fn set_generate_name(obj: &mut Value, generate_name: &str) {
    set_meta(obj, "generateName", Value::from(generate_name));
}

pub fn set_uid(obj: &mut Value, uid: &str) {
    set_meta(obj, "uid", Value::from(uid));
}

pub fn set_resource_version(obj: &mut Value, resource_version: &str) {
    set_meta(obj, "resourceVersion", Value::from(resource_version));
}

pub fn set_generation(obj: &mut Value, generation: i64) {
    set_meta(obj, "generation", Value::from(generation));
}

pub fn set_creation_timestamp(obj: &mut Value, timestamp: &str) {
    set_meta(obj, "creationTimestamp", Value::from(timestamp));
}

pub fn set_deletion_timestamp(obj: &mut Value, timestamp: &str) {
    set_meta(obj, "deletionTimestamp", Value::from(timestamp));
}

pub fn set_deletion_grace_period_seconds(obj: &mut Value, seconds: i64) {
    set_meta(obj, "deletionGracePeriodSeconds", Value::from(seconds));
}

/// Writes a string map, removing the field when the map is empty.
fn set_string_map(obj: &mut Value, key: &str, map: &BTreeMap<String, String>) {
    if map.is_empty() {
        remove_metadata_field(obj, key);
    } else {
        let json = map
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect();
        set_meta(obj, key, Value::Object(json));
    }
}

/// Sets one entry of a string map, creating the map when needed.
fn set_map_entry(obj: &mut Value, map_key: &str, key: &str, value: &str) {
    let meta = metadata_mut(obj);
    ensure_object(
        meta.entry(map_key)
            .or_insert_with(|| Value::Object(Map::new())),
    )
    .insert(key.to_string(), Value::from(value));
}

/// Removes one entry of a string map, and the map when it becomes empty.
fn remove_map_entry(obj: &mut Value, map_key: &str, key: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let now_empty = match meta.get_mut(map_key).and_then(Value::as_object_mut) {
        Some(map) => {
            map.remove(key);
            map.is_empty()
        }
        None => false,
    };
    if now_empty {
        meta.remove(map_key);
    }
}

pub fn set_labels(obj: &mut Value, labels: &BTreeMap<String, String>) {
    set_string_map(obj, "labels", labels);
}

pub fn set_label(obj: &mut Value, key: &str, value: &str) {
    set_map_entry(obj, "labels", key, value);
}

pub fn remove_label(obj: &mut Value, key: &str) {
    remove_map_entry(obj, "labels", key);
}

pub fn set_annotations(obj: &mut Value, annotations: &BTreeMap<String, String>) {
    set_string_map(obj, "annotations", annotations);
}

pub fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    set_map_entry(obj, "annotations", key, value);
}

pub fn remove_annotation(obj: &mut Value, key: &str) {
    remove_map_entry(obj, "annotations", key);
}

/// Writes a list, removing the field when the list is empty.
fn set_array(obj: &mut Value, key: &str, items: Vec<Value>) {
    if items.is_empty() {
        remove_metadata_field(obj, key);
    } else {
        set_meta(obj, key, Value::Array(items));
    }
}

pub fn set_finalizers<S: Into<String>>(obj: &mut Value, finalizers: impl IntoIterator<Item = S>) {
    let items = finalizers
        .into_iter()
        .map(|f| Value::String(f.into()))
        .collect();
    set_array(obj, "finalizers", items);
}

pub fn set_owner_references(obj: &mut Value, references: Vec<Value>) {
    set_array(obj, "ownerReferences", references);
}

pub fn set_managed_fields(obj: &mut Value, entries: Vec<Value>) {
    set_array(obj, "managedFields", entries);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "x", "namespace": "default", "uid": "u", "resourceVersion": "7",
                "generation": 2, "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30,
                "labels": {"a": "b"}, "annotations": {"k": "v"},
                "finalizers": ["f1", "f2"], "ownerReferences": [{"uid": "o"}]
            }
        })
    }

    #[test]
    fn readers() {
        let obj = sample();
        assert_eq!(name(&obj), Some("x"));
        assert_eq!(namespace(&obj), Some("default"));
        assert_eq!(uid(&obj), Some("u"));
        assert_eq!(resource_version(&obj), Some("7"));
        assert_eq!(generation(&obj), Some(2));
        assert_eq!(creation_timestamp(&obj), Some("2024-01-01T00:00:00Z"));
        assert_eq!(deletion_timestamp(&obj), Some("2024-01-02T00:00:00Z"));
        assert_eq!(deletion_grace_period_seconds(&obj), Some(30));
        assert_eq!(labels(&obj).get("a").map(String::as_str), Some("b"));
        assert_eq!(annotations(&obj).len(), 1);
        assert_eq!(finalizers(&obj), vec!["f1", "f2"]);
        assert_eq!(owner_references(&obj), vec![json!({"uid": "o"})]);
        assert_eq!(api_version(&obj), Some("v1"));
        assert_eq!(kind(&obj), Some("ConfigMap"));
        assert_eq!(group_version_kind(&obj).to_string(), "/v1, Kind=ConfigMap");
        assert_eq!(generate_name(&obj), None);
        assert!(managed_fields(&obj).is_empty());
    }

    #[test]
    fn readers_tolerate_missing_metadata() {
        let obj = json!({"kind": "X"});
        assert_eq!(name(&obj), None);
        assert!(labels(&obj).is_empty());
        assert!(finalizers(&json!(null)).is_empty());
    }

    #[test]
    fn writers_create_and_clean_up() {
        let mut obj = json!({});
        set_name(&mut obj, "n");
        set_namespace(&mut obj, "ns");
        set_generate_name(&mut obj, "n-");
        set_uid(&mut obj, "u");
        set_resource_version(&mut obj, "1");
        set_generation(&mut obj, 1);
        set_creation_timestamp(&mut obj, "2024-01-01T00:00:00Z");
        set_deletion_timestamp(&mut obj, "2024-01-01T00:00:01Z");
        set_deletion_grace_period_seconds(&mut obj, 0);
        set_label(&mut obj, "a", "b");
        set_annotation(&mut obj, "k", "v");
        set_finalizers(&mut obj, ["f"]);
        set_type_meta(&mut obj, "v1", "Secret");
        assert_eq!(
            obj,
            json!({"metadata": {
                "name": "n", "namespace": "ns", "generateName": "n-", "uid": "u", "resourceVersion": "1",
                "generation": 1, "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-01T00:00:01Z", "deletionGracePeriodSeconds": 0,
                "labels": {"a": "b"}, "annotations": {"k": "v"}, "finalizers": ["f"]
            }, "apiVersion": "v1", "kind": "Secret"})
        );
        remove_label(&mut obj, "a");
        remove_annotation(&mut obj, "k");
        remove_annotation(&mut obj, "absent");
        set_finalizers(&mut obj, Vec::<String>::new());
        remove_metadata_field(&mut obj, "deletionTimestamp");
        let meta = metadata(&obj).cloned().unwrap_or_default();
        for gone in ["labels", "annotations", "finalizers", "deletionTimestamp"] {
            assert!(!meta.contains_key(gone), "{gone} should be removed");
        }
    }

    #[test]
    fn map_and_list_setters() {
        let mut obj = json!({"metadata": null});
        let labels_in: BTreeMap<String, String> = [("x".to_string(), "y".to_string())].into();
        set_labels(&mut obj, &labels_in);
        set_annotations(&mut obj, &labels_in);
        set_owner_references(&mut obj, vec![json!({"uid": "1"})]);
        set_managed_fields(&mut obj, vec![json!({"manager": "m"})]);
        assert_eq!(labels(&obj), labels_in);
        assert_eq!(annotations(&obj), labels_in);
        assert_eq!(owner_references(&obj).len(), 1);
        assert_eq!(managed_fields(&obj).len(), 1);
        set_labels(&mut obj, &BTreeMap::new());
        assert!(obj["metadata"].get("labels").is_none());
        let existing = vec!["a".to_string()];
        set_finalizers(&mut obj, &existing);
        assert_eq!(finalizers(&obj), existing);
    }
}
