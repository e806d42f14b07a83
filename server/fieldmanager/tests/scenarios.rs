//! The classic structured-merge-diff scenarios, end to end through `apply` and `update`, with
//! assertions on the resulting object and on `metadata.managedFields` as Kubernetes writes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_fieldmanager::{ApplyError, Request, TypeSchema, apply, update};
use serde_json::{Value, json};

const T1: &str = "2024-05-01T10:00:00Z";
const T2: &str = "2024-05-01T11:00:00Z";
const T3: &str = "2024-05-01T12:00:00Z";

fn req<'a>(manager: &'a str, api_version: &'a str, now: &'a str) -> Request<'a> {
    Request {
        manager,
        api_version,
        subresource: None,
        now,
    }
}

/// The `fieldsV1` of the entry of `manager` with `operation`, as compact JSON text.
fn fields(object: &Value, manager: &str, operation: &str) -> Option<String> {
    entry(object, manager, operation).map(|e| e["fieldsV1"].to_string())
}

fn entry<'a>(object: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}/{}",
                e["manager"].as_str().unwrap_or(""),
                e["operation"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data})
}

/// A stored object: what the registry adds on create.
fn stored(mut object: Value) -> Value {
    object["metadata"]["uid"] = json!("u-1");
    object["metadata"]["resourceVersion"] = json!("1");
    object["metadata"]["creationTimestamp"] = json!(T1);
    object
}

fn deployment_schema() -> TypeSchema {
    let definitions = json!({
        "Deployment": {"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "paused": {"type": "boolean"},
                "template": {"type": "object", "properties": {
                    "spec": {"$ref": "#/definitions/PodSpec"}}}
            }},
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"}}},
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
            }}
        }},
        "PodSpec": {"type": "object", "properties": {
            "containers": {"type": "array", "items": {"$ref": "#/definitions/Container"},
                "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
            "tolerations": {"type": "array", "items": {"type": "object"},
                "x-kubernetes-list-type": "atomic"}
        }},
        "Container": {"type": "object", "properties": {
            "name": {"type": "string"},
            "image": {"type": "string"},
            "args": {"type": "array", "items": {"type": "string"}},
            "ports": {"type": "array", "items": {"$ref": "#/definitions/ContainerPort"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"]}
        }},
        "ContainerPort": {"type": "object", "properties": {
            "containerPort": {"type": "integer"},
            "protocol": {"type": "string", "default": "TCP"},
            "name": {"type": "string"}
        }}
    });
    TypeSchema::from_openapi(&json!({"$ref": "#/definitions/Deployment"}), |r| {
        definitions
            .get(r.trim_start_matches("#/definitions/"))
            .cloned()
    })
    .with_status_subresource(true)
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec})
}

#[test]
fn create_records_the_creator_like_kubernetes() {
    let schema = TypeSchema::deduced();
    let new = stored(configmap(json!({"key": "a"})));
    let out = update(None, &new, &schema, &req("kubectl-create", "v1", T1));
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": T1, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:key": {}}}}])
    );
    assert_eq!(
        serde_json::to_string(&out["metadata"]["managedFields"][0]["fieldsV1"]).unwrap(),
        r#"{"f:data":{".":{},"f:key":{}}}"#
    );
    assert_eq!(out["data"], json!({"key": "a"}));
}

#[test]
fn two_appliers_share_an_object() {
    let schema = TypeSchema::deduced();
    let a = apply(
        None,
        &configmap(json!({"a": "1"})),
        false,
        &schema,
        &req("alice", "v1", T1),
    )
    .unwrap();
    let live = stored(a);
    let b = apply(
        Some(&live),
        &configmap(json!({"b": "2"})),
        false,
        &schema,
        &req("bob", "v1", T2),
    )
    .unwrap();
    assert_eq!(b["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(managers(&b), ["alice/Apply", "bob/Apply"]);
    assert_eq!(
        fields(&b, "alice", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:a":{}}}"#)
    );
    assert_eq!(
        fields(&b, "bob", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:b":{}}}"#)
    );
    assert_eq!(entry(&b, "alice", "Apply").unwrap()["time"], T1);
    assert_eq!(entry(&b, "bob", "Apply").unwrap()["time"], T2);
    // The same value applied by both: shared, no conflict.
    let shared = apply(
        Some(&b),
        &configmap(json!({"a": "1", "b": "2"})),
        false,
        &schema,
        &req("bob", "v1", T3),
    )
    .unwrap();
    assert_eq!(
        fields(&shared, "alice", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:a":{}}}"#)
    );
    assert_eq!(
        fields(&shared, "bob", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:a":{},"f:b":{}}}"#)
    );
}

#[test]
fn conflict_then_force() {
    let schema = TypeSchema::deduced();
    let created = update(
        None,
        &stored(configmap(json!({"key": "a", "other": "o"}))),
        &schema,
        &req("kubectl-client-side-apply", "v1", T1),
    );
    let config = configmap(json!({"key": "b"}));
    let err = apply(
        Some(&created),
        &config,
        false,
        &schema,
        &req("kubectl", "v1", T2),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.key"
    );
    let status = err.to_api_error().to_status();
    assert_eq!(status["code"], 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl-client-side-apply\" using v1", "field": ".data.key"}])
    );

    let forced = apply(
        Some(&created),
        &config,
        true,
        &schema,
        &req("kubectl", "v1", T2),
    )
    .unwrap();
    assert_eq!(forced["data"], json!({"key": "b", "other": "o"}));
    assert_eq!(
        fields(&forced, "kubectl", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:key":{}}}"#)
    );
    assert_eq!(
        fields(&forced, "kubectl-client-side-apply", "Update").as_deref(),
        Some(r#"{"f:data":{".":{},"f:other":{}}}"#)
    );
}

#[test]
fn conflicts_with_several_managers_are_grouped() {
    let schema = TypeSchema::deduced();
    let live = update(
        None,
        &stored(configmap(json!({"a": "1"}))),
        &schema,
        &req("maker", "v1", T1),
    );
    let live = apply(
        Some(&live),
        &configmap(json!({"b": "1", "c": "1"})),
        false,
        &schema,
        &req("alice", "v1", T2),
    )
    .unwrap();
    let err = apply(
        Some(&live),
        &configmap(json!({"a": "2", "b": "2", "c": "2"})),
        false,
        &schema,
        &req("bob", "v1", T3),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 3 conflicts: conflicts with \"alice\":\n- .data.b\n- .data.c\n\
         conflicts with \"maker\" using v1:\n- .data.a"
    );
}

#[test]
fn list_maps_merge_by_keys() {
    let schema = deployment_schema();
    let a = deployment(json!({"template": {"spec": {"containers": [
        {"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]}
    ]}}}));
    let live = apply(None, &a, false, &schema, &req("alice", "apps/v1", T1)).unwrap();
    assert_eq!(
        fields(&live, "alice", "Apply").as_deref(),
        Some(concat!(
            r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"#,
            r#""f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"#,
            r#""f:containerPort":{}}}}}}}}}"#
        ))
    );
    let b = deployment(json!({"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "side:1"},
        {"name": "app", "ports": [{"containerPort": 9090, "protocol": "TCP", "name": "metrics"}]}
    ]}}}));
    let live = apply(Some(&live), &b, false, &schema, &req("bob", "apps/v1", T2)).unwrap();
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"],
        json!([
            {"name": "sidecar", "image": "side:1"},
            {"name": "app", "image": "app:1", "ports": [
                {"containerPort": 80},
                {"containerPort": 9090, "protocol": "TCP", "name": "metrics"}
            ]}
        ])
    );
    assert_eq!(
        fields(&live, "bob", "Apply").as_deref(),
        Some(concat!(
            r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"#,
            r#""f:name":{},"f:ports":{"k:{\"containerPort\":9090,\"protocol\":\"TCP\"}":{".":{},"#,
            r#""f:containerPort":{},"f:name":{},"f:protocol":{}}}},"k:{\"name\":\"sidecar\"}":{".":{},"#,
            r#""f:image":{},"f:name":{}}}}}}}"#
        ))
    );
    // Changing alice's image is a conflict naming the element by key.
    let c = deployment(
        json!({"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}),
    );
    let err = apply(Some(&live), &c, false, &schema, &req("bob", "apps/v1", T3)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.template.spec.containers[name=\"app\"].image"
    );
}

#[test]
fn set_lists_union_and_shrink() {
    let schema = TypeSchema::deduced();
    let with_finalizers = |names: &[&str]| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "finalizers": names}});
    let live = apply(
        None,
        &with_finalizers(&["a.io/x"]),
        false,
        &schema,
        &req("alice", "v1", T1),
    )
    .unwrap();
    let live = apply(
        Some(&live),
        &with_finalizers(&["b.io/y"]),
        false,
        &schema,
        &req("bob", "v1", T2),
    )
    .unwrap();
    assert_eq!(live["metadata"]["finalizers"], json!(["a.io/x", "b.io/y"]));
    assert_eq!(
        fields(&live, "bob", "Apply").as_deref(),
        Some(r#"{"f:metadata":{"f:finalizers":{"v:\"b.io/y\"":{}}}}"#)
    );
    let live = apply(
        Some(&live),
        &with_finalizers(&[]),
        false,
        &schema,
        &req("alice", "v1", T3),
    )
    .unwrap();
    assert_eq!(live["metadata"]["finalizers"], json!(["b.io/y"]));
    assert_eq!(managers(&live), ["bob/Apply"]);
}

#[test]
fn atomic_lists_conflict_and_are_replaced_whole() {
    let schema = deployment_schema();
    let with_args = |args: &[&str]| {
        deployment(json!({"template": {"spec": {"containers": [{"name": "app", "args": args}]}}}))
    };
    let live = apply(
        None,
        &with_args(&["--a", "--b"]),
        false,
        &schema,
        &req("alice", "apps/v1", T1),
    )
    .unwrap();
    let err = apply(
        Some(&live),
        &with_args(&["--c"]),
        false,
        &schema,
        &req("bob", "apps/v1", T2),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.template.spec.containers[name=\"app\"].args"
    );
    let live = apply(
        Some(&live),
        &with_args(&["--c"]),
        true,
        &schema,
        &req("bob", "apps/v1", T2),
    )
    .unwrap();
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["--c"])
    );
    assert_eq!(
        fields(&live, "alice", "Apply").as_deref(),
        Some(
            r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{}}}}}}}"#
        )
    );
    assert_eq!(
        fields(&live, "bob", "Apply").as_deref(),
        Some(
            r#"{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:args":{},"f:name":{}}}}}}}"#
        )
    );
}

#[test]
fn unapplied_fields_are_removed_unless_owned_elsewhere() {
    let schema = deployment_schema();
    let live = apply(
        None,
        &deployment(
            json!({"replicas": 3, "paused": true, "template": {"spec": {"containers": [
            {"name": "app", "image": "app:1"}, {"name": "extra", "image": "extra:1"}]}}}),
        ),
        false,
        &schema,
        &req("alice", "apps/v1", T1),
    )
    .unwrap();
    let live = update(
        Some(&live),
        &{
            let mut edited = live.clone();
            edited["spec"]["replicas"] = json!(5);
            edited
        },
        &schema,
        &req("kubectl-edit", "apps/v1", T2),
    );
    assert_eq!(
        fields(&live, "kubectl-edit", "Update").as_deref(),
        Some(r#"{"f:spec":{"f:replicas":{}}}"#)
    );
    // alice stops applying replicas (now kubectl-edit's), paused and the extra container.
    let live = apply(
        Some(&live),
        &deployment(
            json!({"template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}}),
        ),
        false,
        &schema,
        &req("alice", "apps/v1", T3),
    )
    .unwrap();
    assert_eq!(
        live["spec"],
        json!({"replicas": 5, "template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}})
    );
    // Nothing applied at all any more: the named struct `spec` goes, except what others own.
    let live = apply(
        Some(&live),
        &deployment(json!({})),
        false,
        &schema,
        &req("alice", "apps/v1", T3),
    )
    .unwrap();
    assert_eq!(live["spec"], json!({"replicas": 5}));
    assert_eq!(managers(&live), ["kubectl-edit/Update"]);
}

#[test]
fn ownership_hand_over_from_update_to_apply() {
    let schema = TypeSchema::deduced();
    let live = update(
        None,
        &stored(configmap(json!({"key": "v", "legacy": "l"}))),
        &schema,
        &req("kubectl-client-side-apply", "v1", T1),
    );
    // The applier takes the same value: no conflict, shared ownership.
    let live = apply(
        Some(&live),
        &configmap(json!({"key": "v"})),
        false,
        &schema,
        &req("kubectl", "v1", T2),
    )
    .unwrap();
    assert_eq!(
        fields(&live, "kubectl", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:key":{}}}"#)
    );
    assert_eq!(
        fields(&live, "kubectl-client-side-apply", "Update").as_deref(),
        Some(r#"{"f:data":{".":{},"f:key":{},"f:legacy":{}}}"#)
    );
    // Nothing changed in the object, so the applier's entry has no time yet.
    assert!(
        entry(&live, "kubectl", "Apply")
            .unwrap()
            .get("time")
            .is_none()
    );
    // Applying without the field keeps it: the updater still owns it.
    let live = apply(
        Some(&live),
        &configmap(json!({"new": "n"})),
        false,
        &schema,
        &req("kubectl", "v1", T3),
    )
    .unwrap();
    assert_eq!(live["data"], json!({"key": "v", "legacy": "l", "new": "n"}));
    assert_eq!(
        fields(&live, "kubectl", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:new":{}}}"#)
    );
}

#[test]
fn status_applies_are_separate() {
    let schema = deployment_schema();
    let live = apply(
        None,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1}, "status": {"replicas": 99}}),
        false,
        &schema,
        &req("alice", "apps/v1", T1),
    )
    .unwrap();
    // The main resource neither writes nor owns status.
    assert!(live.get("status").is_none());
    assert_eq!(
        fields(&live, "alice", "Apply").as_deref(),
        Some(r#"{"f:spec":{"f:replicas":{}}}"#)
    );
    let status_request = Request {
        subresource: Some("status"),
        ..req("ctrl", "apps/v1", T2)
    };
    let status_config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 7}, "status": {"replicas": 1, "conditions": [{"type": "Available", "status": "True"}]}});
    let live = apply(Some(&live), &status_config, false, &schema, &status_request).unwrap();
    assert_eq!(live["spec"], json!({"replicas": 1}));
    assert_eq!(live["status"]["replicas"], 1);
    let ctrl = entry(&live, "ctrl", "Apply").unwrap();
    assert_eq!(ctrl["subresource"], "status");
    assert_eq!(
        ctrl["fieldsV1"].to_string(),
        r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:status":{},"f:type":{}}},"f:replicas":{}}}"#
    );
    // A later main apply does not touch status, and its fields don't conflict with ctrl's.
    let live = apply(
        Some(&live),
        &deployment(json!({"replicas": 2})),
        false,
        &schema,
        &req("alice", "apps/v1", T3),
    )
    .unwrap();
    assert_eq!(live["status"]["replicas"], 1);
    assert_eq!(live["spec"]["replicas"], 2);
    // Status updates (not applies) through the subresource record a status Update entry.
    let mut next = live.clone();
    next["status"]["replicas"] = json!(2);
    next["spec"]["replicas"] = json!(100);
    let updated = update(
        Some(&live),
        &next,
        &schema,
        &Request {
            subresource: Some("status"),
            ..req("kcm", "apps/v1", T3)
        },
    );
    assert_eq!(
        entry(&updated, "kcm", "Update")
            .map(|e| (e["subresource"].clone(), e["fieldsV1"].to_string())),
        Some((
            json!("status"),
            r#"{"f:status":{"f:replicas":{}}}"#.to_string()
        ))
    );
    assert_eq!(
        fields(&updated, "ctrl", "Apply").as_deref(),
        Some(
            r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:status":{},"f:type":{}}}}}"#
        )
    );
}

#[test]
fn applying_the_same_config_twice_changes_nothing() {
    let schema = deployment_schema();
    let config = deployment(json!({"replicas": 2, "template": {"spec": {"containers": [
        {"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]}]}}}));
    let first = stored(apply(None, &config, false, &schema, &req("alice", "apps/v1", T1)).unwrap());
    let second = apply(
        Some(&first),
        &config,
        false,
        &schema,
        &req("alice", "apps/v1", T2),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&second).unwrap()
    );
    assert_eq!(entry(&second, "alice", "Apply").unwrap()["time"], T1);
}

#[test]
fn untracked_objects_get_a_before_first_apply_owner() {
    let schema = TypeSchema::deduced();
    let live = stored(configmap(json!({"key": "a"})));
    let out = apply(
        Some(&live),
        &configmap(json!({"key": "b"})),
        false,
        &schema,
        &req("kubectl", "v1", T2),
    );
    assert_eq!(
        out.unwrap_err().to_string(),
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.key"
    );
    // Updates of untracked objects stay untracked.
    let mut edited = live.clone();
    edited["data"]["key"] = json!("c");
    let out = update(
        Some(&live),
        &edited,
        &schema,
        &req("kubectl-edit", "v1", T2),
    );
    assert!(out["metadata"].get("managedFields").is_none());
}

#[test]
fn updates_take_fields_and_can_reset() {
    let schema = TypeSchema::deduced();
    let live = apply(
        None,
        &configmap(json!({"a": "1", "b": "1"})),
        false,
        &schema,
        &req("alice", "v1", T1),
    )
    .unwrap();
    let mut edited = live.clone();
    edited["data"]["a"] = json!("2");
    edited["metadata"]["labels"] = json!({"team": "x"});
    let live = update(
        Some(&live),
        &edited,
        &schema,
        &req("kubectl-edit", "v1", T2),
    );
    assert_eq!(
        fields(&live, "alice", "Apply").as_deref(),
        Some(r#"{"f:data":{"f:b":{}}}"#)
    );
    assert_eq!(
        fields(&live, "kubectl-edit", "Update").as_deref(),
        Some(r#"{"f:data":{"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:team":{}}}}"#)
    );
    // A second edit by the same manager merges into its entry and moves its time.
    let mut edited = live.clone();
    edited["data"]["c"] = json!("3");
    let live = update(
        Some(&live),
        &edited,
        &schema,
        &req("kubectl-edit", "v1", T3),
    );
    assert_eq!(
        fields(&live, "kubectl-edit", "Update").as_deref(),
        Some(r#"{"f:data":{"f:a":{},"f:c":{}},"f:metadata":{"f:labels":{".":{},"f:team":{}}}}"#)
    );
    assert_eq!(entry(&live, "kubectl-edit", "Update").unwrap()["time"], T3);
    // `managedFields: [{}]` clears tracking.
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    let out = update(Some(&live), &reset, &schema, &req("kubectl-edit", "v1", T3));
    assert!(out["metadata"].get("managedFields").is_none());
}

#[test]
fn update_managers_are_capped() {
    let schema = TypeSchema::deduced();
    let mut live = update(
        None,
        &stored(configmap(json!({}))),
        &schema,
        &req("maker", "v1", T1),
    );
    live = apply(
        Some(&live),
        &configmap(json!({"seed": "s"})),
        false,
        &schema,
        &req("seed", "v1", T1),
    )
    .unwrap();
    for i in 0..11 {
        let mut next = live.clone();
        next["data"][format!("k{i}")] = json!("v");
        let now = format!("2024-05-01T10:{i:02}:00Z");
        live = update(
            Some(&live),
            &next,
            &schema,
            &req(&format!("writer-{i}"), "v1", &now),
        );
    }
    let ms = managers(&live);
    assert_eq!(ms.iter().filter(|m| m.ends_with("/Update")).count(), 10);
    assert!(ms.contains(&"ancient-changes/Update".to_string()));
    assert_eq!(
        fields(&live, "ancient-changes", "Update").as_deref(),
        // The creator (oldest) became the bucket; writer-0 and writer-1 were folded into it.
        Some(r#"{"f:data":{".":{},"f:k0":{},"f:k1":{}}}"#)
    );
    assert!(!ms.contains(&"maker/Update".to_string()));
    assert!(!ms.contains(&"writer-1/Update".to_string()));
    assert!(ms.contains(&"writer-2/Update".to_string()));
}

#[test]
fn bad_apply_bodies() {
    let schema = deployment_schema();
    let mut with_managed = configmap(json!({}));
    with_managed["metadata"]["managedFields"] = json!([]);
    let err = apply(
        None,
        &with_managed,
        false,
        &TypeSchema::deduced(),
        &req("m", "v1", T1),
    )
    .unwrap_err();
    assert_eq!(err, ApplyError::ManagedFieldsInConfig);
    assert_eq!(err.to_api_error().code, 400);
    let keyless = deployment(json!({"template": {"spec": {"containers": [{"image": "x"}]}}}));
    let err = apply(None, &keyless, false, &schema, &req("m", "apps/v1", T1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to create typed patch object: .spec.template.spec.containers: element 0: associative \
         list with keys has an element that omits all key fields [\"name\"] (and doesn't have default \
         values for any key fields)"
    );
    assert_eq!(err.to_api_error().code, 500);
    let duplicated =
        deployment(json!({"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}));
    assert_eq!(
        apply(None, &duplicated, false, &schema, &req("m", "apps/v1", T1))
            .unwrap_err()
            .to_string(),
        "failed to create typed patch object: .spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
    );
}
