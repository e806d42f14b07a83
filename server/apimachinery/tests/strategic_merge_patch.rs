//! Strategic merge patch scenarios modelled on the kinds of cases Kubernetes' own strategic
//! patch tests cover: map merging and deletion, replaced and merged lists, every directive,
//! nested merge lists, primitive sets and the resulting element order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_apimachinery::patch::{PatchError, PatchSchema, apply_strategic_merge_patch};
use serde_json::{Value, json};

fn schema() -> PatchSchema {
    PatchSchema::object_meta()
        .merge_list_by_key("mergingList", "name")
        .merge_list_by_key("mergingList.mergingList", "name")
        .merge_set("mergingIntList")
        .merge_list_by_key("spec.containers", "name")
        .merge_list_by_key("spec.containers.ports", "containerPort")
        .retain_keys("spec.strategy")
        .replace_map("replacedMap")
}

fn apply(original: Value, patch: Value) -> Value {
    let bytes = serde_json::to_vec(&patch).unwrap();
    match apply_strategic_merge_patch(&original, &bytes, &schema()) {
        Ok(v) => v,
        Err(e) => panic!("patch {patch} failed: {e}"),
    }
}

fn apply_err(original: Value, patch: Value) -> PatchError {
    let bytes = serde_json::to_vec(&patch).unwrap();
    apply_strategic_merge_patch(&original, &bytes, &schema()).unwrap_err()
}

#[test]
fn maps_merge_and_null_deletes() {
    let original = json!({"a": 1, "m": {"x": 1, "y": 2}, "keep": true});
    let patched = apply(
        original,
        json!({"a": 2, "m": {"x": null, "z": 3}, "gone": null, "n": {"p": null, "q": 1}}),
    );
    assert_eq!(
        patched,
        json!({"a": 2, "m": {"y": 2, "z": 3}, "keep": true, "n": {"q": 1}})
    );
}

#[test]
fn null_patch_and_type_change() {
    let original = json!({"a": "s", "b": {"c": 1}});
    assert_eq!(
        apply_strategic_merge_patch(&original, b"null", &schema()).unwrap(),
        original
    );
    assert_eq!(
        apply(original, json!({"a": {"x": null, "y": 1}, "b": [1]})),
        json!({"a": {"y": 1}, "b": [1]})
    );
}

#[test]
fn plain_lists_are_replaced() {
    let original = json!({"list": [1, 2, 3], "objs": [{"name": "a"}]});
    assert_eq!(
        apply(original, json!({"list": [4], "objs": [{"name": "b"}]})),
        json!({"list": [4], "objs": [{"name": "b"}]})
    );
}

#[test]
fn merge_list_updates_and_appends_by_key() {
    let original = json!({"mergingList": [{"name": "a", "v": 1}, {"name": "b", "v": 2}]});
    assert_eq!(
        apply(
            original.clone(),
            json!({"mergingList": [{"name": "b", "v": 3, "w": null}, {"name": "c"}]})
        ),
        json!({"mergingList": [{"name": "a", "v": 1}, {"name": "b", "v": 3}, {"name": "c"}]})
    );
    // Without $setElementOrder, Kubernetes places patch-only elements before the live ones.
    assert_eq!(
        apply(original, json!({"mergingList": [{"name": "c"}]})),
        json!({"mergingList": [{"name": "c"}, {"name": "a", "v": 1}, {"name": "b", "v": 2}]})
    );
}

#[test]
fn merge_list_delete_directive() {
    let original = json!({"mergingList": [{"name": "a"}, {"name": "b"}, {"name": "c"}]});
    assert_eq!(
        apply(
            original,
            json!({"mergingList": [{"name": "b", "$patch": "delete"}, {"name": "a", "x": 1}]})
        ),
        json!({"mergingList": [{"name": "a", "x": 1}, {"name": "c"}]})
    );
}

#[test]
fn merge_list_replace_directive() {
    let original = json!({"mergingList": [{"name": "a", "v": 1}, {"name": "b"}]});
    assert_eq!(
        apply(
            original,
            json!({"mergingList": [{"name": "z", "v": null, "w": 2}, {"$patch": "replace"}]})
        ),
        json!({"mergingList": [{"name": "z", "w": 2}]})
    );
}

#[test]
fn map_replace_and_delete_directives() {
    let original = json!({"m": {"a": 1, "b": {"c": 2}}, "n": {"a": 1}, "o": 1});
    assert_eq!(
        apply(
            original,
            json!({"m": {"$patch": "replace", "z": 9, "gone": null}, "n": {"$patch": "delete"}})
        ),
        json!({"m": {"z": 9}, "n": {}, "o": 1})
    );
}

#[test]
fn replace_strategy_map() {
    let original = json!({"replacedMap": {"a": 1, "b": 2}});
    assert_eq!(
        apply(original, json!({"replacedMap": {"c": 3}})),
        json!({"replacedMap": {"c": 3}})
    );
}

#[test]
fn primitive_set_lists() {
    let original = json!({"mergingIntList": [1, 2], "metadata": {"finalizers": ["a", "b"]}});
    assert_eq!(
        apply(
            original,
            json!({"mergingIntList": [2, 3, 3], "metadata": {"finalizers": ["c"]}})
        ),
        json!({"mergingIntList": [1, 2, 3], "metadata": {"finalizers": ["c", "a", "b"]}})
    );
}

#[test]
fn delete_from_primitive_list() {
    let original = json!({"metadata": {"finalizers": ["a", "b", "c"]}, "mergingIntList": [1, 2]});
    assert_eq!(
        apply(
            original,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "x"]},
                   "$deleteFromPrimitiveList/absent": ["q"],
                   "$deleteFromPrimitiveList/mergingIntList": [1, 2]})
        ),
        json!({"metadata": {"finalizers": ["a", "c"]}, "mergingIntList": []})
    );
}

#[test]
fn delete_list_combined_with_additions() {
    let original = json!({"metadata": {"finalizers": ["a", "b"]}});
    assert_eq!(
        apply(
            original,
            json!({"metadata": {"$setElementOrder/finalizers": ["a", "c"], "finalizers": ["c"],
                                "$deleteFromPrimitiveList/finalizers": ["b"]}})
        ),
        json!({"metadata": {"finalizers": ["a", "c"]}})
    );
}

#[test]
fn set_element_order_on_maps() {
    let original = json!({"mergingList": [{"name": "a"}, {"name": "b"}, {"name": "c"}]});
    assert_eq!(
        apply(
            original.clone(),
            json!({"$setElementOrder/mergingList": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
                   "mergingList": [{"name": "a", "v": 9}]})
        ),
        json!({"mergingList": [{"name": "c"}, {"name": "a", "v": 9}, {"name": "b"}]})
    );
    // Server-only elements keep their place relative to the live order.
    assert_eq!(
        apply(
            original.clone(),
            json!({"$setElementOrder/mergingList": [{"name": "c"}, {"name": "a"}]})
        ),
        json!({"mergingList": [{"name": "b"}, {"name": "c"}, {"name": "a"}]})
    );
    // New elements land where the order says.
    assert_eq!(
        apply(
            original,
            json!({"$setElementOrder/mergingList": [{"name": "a"}, {"name": "d"}, {"name": "b"}, {"name": "c"}],
                   "mergingList": [{"name": "d"}]})
        ),
        json!({"mergingList": [{"name": "a"}, {"name": "d"}, {"name": "b"}, {"name": "c"}]})
    );
}

#[test]
fn set_element_order_on_primitives_and_new_fields() {
    let original = json!({"mergingIntList": [1, 2, 3]});
    assert_eq!(
        apply(
            original,
            json!({"$setElementOrder/mergingIntList": [3, 4, 1, 2], "mergingIntList": [4],
                               "$setElementOrder/mergingList": [{"name": "x"}],
                               "mergingList": [{"name": "x", "n": null}]})
        ),
        json!({"mergingIntList": [3, 4, 1, 2], "mergingList": [{"name": "x"}]})
    );
    assert_eq!(
        apply(
            json!({}),
            json!({"$setElementOrder/mergingList": [{"name": "x"}]})
        ),
        json!({})
    );
}

#[test]
fn retain_keys() {
    let original =
        json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    assert_eq!(
        apply(
            original.clone(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
        ),
        json!({"spec": {"strategy": {"type": "Recreate"}}})
    );
    assert_eq!(
        apply(
            original.clone(),
            json!({"spec": {"strategy": {"$retainKeys": ["type", "rollingUpdate"], "rollingUpdate": {"maxUnavailable": 2}}}})
        ),
        json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 2}}}})
    );
    let err = apply_err(
        original.clone(),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "other": 1}}}),
    );
    assert_eq!(
        err,
        PatchError::BadRequest("invalid patch format of retainKeys".into())
    );
    let err = apply_err(
        original,
        json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
    );
    assert_eq!(err.to_api_error().code, 400);
}

#[test]
fn nested_merge_lists() {
    let original = json!({"spec": {"containers": [
        {"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]},
        {"name": "sidecar", "image": "side:1"}
    ]}});
    let patched = apply(
        original,
        json!({"spec": {"containers": [
            {"name": "app", "image": "app:2", "ports": [
                {"containerPort": 80.0, "protocol": "TCP"},
                {"containerPort": 443, "$patch": "delete"}
            ]}
        ]}}),
    );
    assert_eq!(
        patched,
        json!({"spec": {"containers": [
            {"name": "app", "image": "app:2", "ports": [{"containerPort": 80.0, "name": "http", "protocol": "TCP"}]},
            {"name": "sidecar", "image": "side:1"}
        ]}})
    );
    let nested = json!({"mergingList": [{"name": "a", "mergingList": [{"name": "x", "v": 1}]}]});
    assert_eq!(
        apply(
            nested,
            json!({"mergingList": [{"name": "a", "mergingList": [{"name": "y"}]}]})
        ),
        json!({"mergingList": [{"name": "a", "mergingList": [{"name": "y"}, {"name": "x", "v": 1}]}]})
    );
}

#[test]
fn object_meta_lists() {
    let original = json!({"metadata": {"name": "x", "labels": {"a": "1"},
        "ownerReferences": [{"uid": "1", "name": "one"}], "finalizers": ["f"]}});
    assert_eq!(
        apply(
            original,
            json!({"metadata": {"labels": {"a": null, "b": "2"},
                "ownerReferences": [{"uid": "1", "controller": true}, {"uid": "2", "name": "two"}],
                "finalizers": ["f", "g"]}})
        ),
        json!({"metadata": {"name": "x", "labels": {"b": "2"},
            "ownerReferences": [{"uid": "1", "name": "one", "controller": true}, {"uid": "2", "name": "two"}],
            "finalizers": ["f", "g"]}})
    );
}

#[test]
fn new_merge_lists_are_cleaned() {
    assert_eq!(
        apply(
            json!({}),
            json!({"mergingList": [{"name": "a", "x": null}, {"name": "b", "$patch": "delete"}]})
        ),
        json!({"mergingList": [{"name": "a"}]})
    );
}

#[test]
fn dollar_fields_that_are_not_directives_are_data() {
    assert_eq!(
        apply(
            json!({"schema": {"type": "object"}}),
            json!({"schema": {"$ref": "#/x", "$schema": "s"}})
        ),
        json!({"schema": {"type": "object", "$ref": "#/x", "$schema": "s"}})
    );
}

#[test]
fn directive_errors() {
    let list = json!({"mergingList": [{"name": "a"}]});
    assert_eq!(
        apply_err(list.clone(), json!({"m": {"$patch": "frob", "a": 1}})).to_string(),
        "unknown patch type: frob in map: map[$patch:frob a:1]"
    );
    assert_eq!(
        apply_err(
            list.clone(),
            json!({"mergingList": [{"name": "a", "$patch": "merge"}]})
        )
        .to_string(),
        "merging lists cannot yet be specified in the patch"
    );
    assert_eq!(
        apply_err(list.clone(), json!({"mergingList": [{"$patch": "delete"}]})).to_string(),
        "map: map[$patch:delete] does not contain declared merge key: name"
    );
    assert_eq!(
        apply_err(list.clone(), json!({"mergingList": [{"v": 1}]})).to_string(),
        "map: map[v:1] does not contain declared merge key: name"
    );
    assert_eq!(
        apply_err(list.clone(), json!({"mergingList": ["a"]})).to_string(),
        "list element types are not identical: [[map[name:a]] [a]]"
    );
    assert_eq!(
        apply_err(list.clone(), json!({"$deleteFromPrimitiveListx": [1]})).to_string(),
        "invalid patch format of primitive list"
    );
    assert_eq!(
        apply_err(list.clone(), json!({"$setElementOrderx": []})).to_string(),
        "invalid patch format of setElementOrder list"
    );
    assert_eq!(
        apply_err(list.clone(), json!({"$setElementOrder/mergingList": "a"})).to_string(),
        "expected a slice, but received a string"
    );
    assert_eq!(
        apply_err(
            list.clone(),
            json!({"$setElementOrder/mergingList": [{"name": "b"}, {"name": "a"}],
                   "mergingList": [{"name": "a"}, {"name": "b"}]})
        )
        .to_string(),
        "The order in patch list:\n[map[name:a] map[name:b]]\n doesn't match $setElementOrder list:\n[map[name:b] map[name:a]]\n"
    );
    let lists_of_lists = apply_err(
        json!({"mergingIntList": [[1]]}),
        json!({"mergingIntList": [[2]]}),
    );
    assert_eq!(
        lists_of_lists,
        PatchError::Unprocessable("lists of lists are not supported".into())
    );
    assert_eq!(lists_of_lists.to_api_error().code, 422);
    let unkeyed = PatchSchema::new().merge_set("objs");
    let err = apply_strategic_merge_patch(
        &json!({"objs": [{"a": 1}]}),
        br#"{"objs": [{"a": 2}]}"#,
        &unkeyed,
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "cannot merge lists without merge key for type map"
    );
}

#[test]
fn malformed_patches_are_bad_requests() {
    let bad_json = apply_strategic_merge_patch(&json!({}), b"{", &schema()).unwrap_err();
    assert_eq!(bad_json.to_api_error().code, 400);
    let array = apply_strategic_merge_patch(&json!({}), b"[]", &schema()).unwrap_err();
    assert_eq!(
        array.to_string(),
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    let not_object = apply_strategic_merge_patch(&json!([]), b"{}", &schema()).unwrap_err();
    assert_eq!(not_object.to_string(), "invalid JSON document");
}

#[test]
fn builtin_service_account_secrets() {
    let sa = json!({"metadata": {"name": "default"}, "secrets": [{"name": "a"}], "imagePullSecrets": [{"name": "p"}]});
    let schema = PatchSchema::for_builtin("", "ServiceAccount");
    let patched = apply_strategic_merge_patch(
        &sa,
        br#"{"$setElementOrder/secrets": [{"name": "a"}, {"name": "b"}], "secrets": [{"name": "b"}], "imagePullSecrets": [{"name": "q"}]}"#,
        &schema,
    )
    .unwrap();
    assert_eq!(
        patched,
        json!({"metadata": {"name": "default"}, "secrets": [{"name": "a"}, {"name": "b"}], "imagePullSecrets": [{"name": "q"}]})
    );
}
