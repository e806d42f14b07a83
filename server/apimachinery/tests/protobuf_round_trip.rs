//! JSON → protobuf → JSON for realistic objects of every supported kind, the encoder's error
//! reporting, watch frames, and a mutation loop showing that no input makes `decode` panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod protobuf_fuzz;

use kcp_apimachinery::protobuf::{self, ProtobufError};
use serde_json::{Value, json};

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({
        "name": name,
        "uid": "0f9d6c3e-7a51-4c1b-a1de-3f1f6f0b9a42",
        "resourceVersion": "1234",
        "generation": 3,
        "creationTimestamp": "2026-11-21T18:44:29Z",
        "labels": {"app.kubernetes.io/name": "shop", "tier": "backend"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"},
        "ownerReferences": [{
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "shop",
            "uid": "6a2d4e1f-0000-4000-8000-000000000001",
            "controller": true,
            "blockOwnerDeletion": false,
        }],
        "finalizers": ["kubernetes", "example.com/cleanup"],
        "managedFields": [{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-21T18:44:29Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}},
        }, {
            "manager": "controller",
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {}},
            "subresource": "status",
        }],
    });
    if let Some(namespace) = namespace {
        meta["namespace"] = json!(namespace);
    }
    meta
}

fn object_reference() -> Value {
    json!({
        "kind": "Pod",
        "namespace": "shop",
        "name": "shop-7d9f8-abcde",
        "uid": "9e0c7a55-1111-4222-8333-444455556666",
        "apiVersion": "v1",
        "resourceVersion": "998",
        "fieldPath": "spec.containers{web}",
    })
}

fn config_map() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata("shop-config", Some("shop")),
        "data": {"app.properties": "color=blue\nsize=3\n", "empty": ""},
        "binaryData": {"logo.png": "iVBORw0KGgo=", "none": ""},
        "immutable": true,
    })
}

fn secret() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata("shop-db", Some("shop")),
        "data": {"password": "czNjcjN0IQ==", "raw": "AAH+/w=="},
        "stringData": {"extra": "plain text"},
        "type": "Opaque",
        "immutable": false,
    })
}

fn namespace() -> Value {
    let mut meta = metadata("shop", None);
    meta["deletionTimestamp"] = json!("2026-11-21T19:00:00Z");
    meta["deletionGracePeriodSeconds"] = json!(0);
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {
            "phase": "Terminating",
            "conditions": [{
                "type": "NamespaceDeletionContentFailure",
                "status": "False",
                "lastTransitionTime": "2026-11-21T19:00:01Z",
                "reason": "ContentDeleted",
                "message": "All content successfully deleted",
            }],
        },
    })
}

fn service_account() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata("builder", Some("shop")),
        "secrets": [{"name": "builder-token", "namespace": "shop"}],
        "imagePullSecrets": [{"name": "registry"}],
        "automountServiceAccountToken": false,
    })
}

fn core_event() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata("shop-7d9f8-abcde.17a9c", Some("shop")),
        "involvedObject": object_reference(),
        "reason": "BackOff",
        "message": "Back-off restarting failed container",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-11-21T18:44:29Z",
        "lastTimestamp": "2026-11-21T18:50:00Z",
        "count": 7,
        "type": "Warning",
        "eventTime": "2026-11-21T18:44:29.123456Z",
        "series": {"count": 6, "lastObservedTime": "2026-11-21T18:50:00.000001Z"},
        "action": "Restarting",
        "related": {"kind": "Node", "name": "node-1"},
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1",
    })
}

fn events_event() -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": metadata("shop.17a9d", Some("shop")),
        "eventTime": "2026-11-21T18:44:29.000001Z",
        "series": {"count": 2, "lastObservedTime": "2026-11-21T18:45:29.500000Z"},
        "reportingController": "example.com/controller",
        "reportingInstance": "controller-0",
        "action": "Scale",
        "reason": "ScalingReplicaSet",
        "regarding": object_reference(),
        "related": {"kind": "ReplicaSet", "name": "shop-7d9f8", "namespace": "shop"},
        "note": "Scaled up to 3",
        "type": "Normal",
        "deprecatedSource": {"component": "deployment-controller"},
        "deprecatedFirstTimestamp": "2026-11-21T18:44:29Z",
        "deprecatedLastTimestamp": "2026-11-21T18:45:29Z",
        "deprecatedCount": 2,
    })
}

fn lease() -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata("kube-controller-manager", Some("kube-system")),
        "spec": {
            "holderIdentity": "",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-11-21T18:44:29.000000Z",
            "renewTime": "2026-11-21T18:46:02.987654Z",
            "leaseTransitions": 0,
            "strategy": "OldestEmulationVersion",
            "preferredHolder": "node-2",
        },
    })
}

fn list_of(kind: &str, items: &[Value]) -> Value {
    let first = &items[0];
    let items: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            let map = item.as_object_mut().unwrap();
            map.remove("apiVersion");
            map.remove("kind");
            item
        })
        .collect();
    json!({
        "apiVersion": first["apiVersion"],
        "kind": kind,
        "metadata": {
            "resourceVersion": "5000",
            "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",
            "remainingItemCount": 0,
        },
        "items": items,
    })
}

fn status() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {"resourceVersion": "17"},
        "status": "Failure",
        "message": "ConfigMap \"x\" is invalid: data[bad key]: Invalid value",
        "reason": "Invalid",
        "details": {
            "name": "x",
            "kind": "configmaps",
            "uid": "abc",
            "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value", "field": "data[bad key]"},
                {"reason": "FieldValueRequired", "message": "Required value"},
            ],
            "retryAfterSeconds": 2,
        },
        "code": 422,
    })
}

fn delete_options() -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u-1", "resourceVersion": ""},
        "orphanDependents": false,
        "propagationPolicy": "Foreground",
        "dryRun": ["All"],
        "ignoreStoreReadErrorWithClusterBreakingPotential": false,
    })
}

fn all_objects() -> Vec<Value> {
    let mut objects = vec![
        config_map(),
        secret(),
        namespace(),
        service_account(),
        core_event(),
        events_event(),
        lease(),
    ];
    let lists: Vec<Value> = objects
        .iter()
        .map(|o| {
            let kind = format!("{}List", o["kind"].as_str().unwrap());
            list_of(&kind, &[o.clone(), o.clone()])
        })
        .collect();
    objects.extend(lists);
    objects.push(status());
    objects.push(delete_options());
    objects
}

#[test]
fn every_kind_round_trips() {
    for object in all_objects() {
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        assert!(protobuf::supports(api_version, kind), "{kind}");
        let body = protobuf::encode(&object).unwrap();
        assert!(body.starts_with(b"k8s\0"));
        let decoded = protobuf::decode(&body).unwrap();
        assert_eq!(decoded, object, "{api_version} {kind}");
        assert_eq!(protobuf::encode(&decoded).unwrap(), body, "{kind}");
    }
}

#[test]
fn zero_values_of_value_fields_are_omitted_but_set_pointers_kept() {
    let object = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "", "generation": 0, "labels": {}},
        "spec": {"leaseTransitions": 0, "holderIdentity": ""},
    });
    let decoded = protobuf::decode(&protobuf::encode(&object).unwrap()).unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "l"},
            "spec": {"leaseTransitions": 0, "holderIdentity": ""},
        })
    );
    // An absent pointer stays absent: an empty spec is omitted altogether.
    let bare = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": null});
    let decoded = protobuf::decode(&protobuf::encode(&bare).unwrap()).unwrap();
    assert_eq!(
        decoded,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"})
    );
}

#[test]
fn times_are_truncated_like_go() {
    let object = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e", "creationTimestamp": "2026-11-21T20:44:29.9+02:00"},
        "eventTime": "2026-11-21T18:44:29.1234567Z",
    });
    let decoded = protobuf::decode(&protobuf::encode(&object).unwrap()).unwrap();
    assert_eq!(
        decoded["metadata"]["creationTimestamp"],
        "2026-11-21T18:44:29Z"
    );
    assert_eq!(decoded["eventTime"], "2026-11-21T18:44:29.123456Z");
}

#[test]
fn meta_kinds_are_served_in_every_group_version() {
    for api_version in [
        "v1",
        "coordination.k8s.io/v1",
        "events.k8s.io/v1",
        "apps/v1",
        "policy/v1",
        "discovery.k8s.io/v1",
        "autoscaling/v1",
        "meta.k8s.io/v1",
    ] {
        assert!(protobuf::supports(api_version, "DeleteOptions"));
        assert!(protobuf::supports(api_version, "Status"));
    }
    assert!(!protobuf::supports("coordination.k8s.io/v1", "ConfigMap"));
    assert!(!protobuf::supports("v1", "Node"));
    assert!(!protobuf::supports("apps/v1", "Pod"));
    assert!(!protobuf::supports("meta.k8s.io/v1", "Table"));
}

#[test]
fn encode_reports_unsupported_and_misshapen_objects() {
    let err = protobuf::encode(&json!({"apiVersion": "batch/v1", "kind": "Job"})).unwrap_err();
    assert!(err.is_unsupported());
    let err = protobuf::encode(&json!({"kind": "ConfigMap"})).unwrap_err();
    assert!(matches!(err, ProtobufError::MissingTypeMeta));
    let err = protobuf::encode(&json!([1, 2])).unwrap_err();
    assert!(matches!(err, ProtobufError::InvalidObject { .. }));

    let cases = [
        (
            json!({"data": {"k": 1}}),
            "cannot encode data.k: expected a string",
        ),
        (
            json!({"binaryData": {"k": "%%%"}}),
            "cannot encode binaryData.k: expected a base64 string",
        ),
        (
            json!({"immutable": "yes"}),
            "cannot encode immutable: expected a boolean",
        ),
        (
            json!({"metadata": {"finalizers": "x"}}),
            "cannot encode metadata.finalizers: expected an array",
        ),
        (
            json!({"metadata": {"ownerReferences": [{}, {"controller": 1}]}}),
            "cannot encode metadata.ownerReferences[1].controller: expected a boolean",
        ),
        (
            json!({"metadata": {"generation": 1.5}}),
            "cannot encode metadata.generation: expected an integer",
        ),
        (
            json!({"metadata": "x"}),
            "cannot encode metadata: expected an object",
        ),
    ];
    for (fields, expected) in cases {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        object
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let err = protobuf::encode(&object).unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "spec": {"leaseDurationSeconds": 3_000_000_000i64, "renewTime": "tomorrow"},
    });
    let err = protobuf::encode(&lease).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot encode spec.leaseDurationSeconds: out of range for int32"
    );
}

#[test]
fn lists_made_of_encoded_items_are_the_encoded_lists() {
    // 200 items: the list's length takes three bytes (more than 16,383).
    let items: Vec<Value> = (0..200)
        .map(|i| {
            let mut cm = config_map();
            cm["metadata"]["name"] = json!(format!("cm-{i}"));
            cm
        })
        .collect();
    for (metadata, items) in [
        (
            json!({"resourceVersion": "42", "continue": "abc"}),
            &items[..],
        ),
        (json!({"resourceVersion": "8"}), &items[..1]),
        (json!({"resourceVersion": "7"}), &items[..0]),
    ] {
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": metadata, "items": items});
        let encoded: Vec<Vec<u8>> = items.iter().map(|i| protobuf::encode(i).unwrap()).collect();
        let assembled = protobuf::encode_list("v1", "ConfigMapList", &metadata, &encoded).unwrap();
        assert_eq!(assembled, protobuf::encode(&list).unwrap());
    }
    let no_list = protobuf::encode_list("v1", "NodeList", &json!({}), &[] as &[Vec<u8>]);
    assert!(no_list.unwrap_err().is_unsupported());
}

#[test]
fn watch_events_round_trip_as_frames() {
    let cases = [
        ("ADDED", config_map()),
        ("MODIFIED", lease()),
        ("ERROR", status()),
    ];
    for (event_type, object) in cases {
        let frame = protobuf::encode_watch_event(event_type, &object).unwrap();
        let announced = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(announced, frame.len() - 4);
        let (decoded_type, decoded) = protobuf::decode_watch_event(&frame).unwrap();
        assert_eq!(decoded_type, event_type);
        assert_eq!(decoded, object);
        // The object inside is a complete enveloped body, as Go's watch encoder embeds it.
        let body = protobuf::encode(&object).unwrap();
        assert!(frame.windows(body.len()).any(|w| w == body.as_slice()));
        // Framing the encoded body (what the watch cache does) makes the same bytes.
        assert_eq!(
            protobuf::watch_event_frame(event_type, &body).unwrap(),
            frame
        );
    }
    // Bodies of 128 bytes and more need a wider length inside the frame.
    let mut large = config_map();
    large["data"] = json!({"big": "x".repeat(70_000)});
    let body = protobuf::encode(&large).unwrap();
    assert_eq!(
        protobuf::watch_event_frame("MODIFIED", &body).unwrap(),
        protobuf::encode_watch_event("MODIFIED", &large).unwrap()
    );
    let frame = protobuf::encode_watch_event("ADDED", &config_map()).unwrap();
    let err = protobuf::decode_watch_event(&frame[..frame.len() - 1]).unwrap_err();
    assert!(matches!(err, ProtobufError::FrameLength { .. }));
    let err = protobuf::encode_watch_event("ADDED", &json!({"apiVersion": "v1", "kind": "Node"}))
        .unwrap_err();
    assert!(err.is_unsupported());
}

#[test]
fn decode_never_panics_on_mutated_bodies() {
    let bodies: Vec<Vec<u8>> = all_objects()
        .iter()
        .map(|o| protobuf::encode(o).unwrap())
        .collect();
    protobuf_fuzz::decode_never_panics(&bodies, 0x9e37_79b9_7f4a_7c15);
}
