//! Our protobuf bytes against bytes Go produced: request bodies captured from kubectl 1.32.4
//! (`tests/protobuf_data/`, recorded by a TLS listener standing in for the API server), and
//! bodies assembled by hand here from the `.proto` field numbers and Go's marshalling rules
//! (fields by number, value fields always written, map keys sorted).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod protobuf_wire;

use kcp_apimachinery::protobuf::{self, ProtobufError};
use protobuf_wire::{assert_same_as_go, envelope, len_field, str_field, varint, varint_field};
use serde_json::{Value, json};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/protobuf_data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn map_entry(number: u64, key: &str, value: &[u8]) -> Vec<u8> {
    len_field(number, &[str_field(1, key), len_field(2, value)].concat())
}

/// `ObjectMeta` as Go writes it for a created object: every value field, set or not.
fn object_meta(name: &str, namespace: &str, uid: &str, rv: &str, created: u64) -> Vec<u8> {
    let time = [varint_field(1, created), varint_field(2, 0)].concat();
    [
        str_field(1, name),
        str_field(2, ""),
        str_field(3, namespace),
        str_field(4, ""),
        str_field(5, uid),
        str_field(6, rv),
        varint_field(7, 0),
        len_field(8, &time),
    ]
    .concat()
}

/// 2026-11-21T18:44:29Z
const CREATED: u64 = 1_795_286_669;

// ---- kubectl captures ----

/// Decodes a capture, checks the JSON, and checks that encoding the JSON gives back the
/// captured bytes exactly: our encoder is Go's marshaller for this object.
fn check_capture(name: &str, expected: Value) {
    let body = fixture(name);
    let decoded = protobuf::decode(&body).unwrap();
    assert_eq!(decoded, expected, "{name}");
    assert_eq!(protobuf::encode(&decoded).unwrap(), body, "{name}");
}

#[test]
fn kubectl_create_configmap() {
    check_capture(
        "kubectl-create-configmap.bin",
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "app-config", "namespace": "default"},
            "data": {"log.level": "debug", "mode": "production"},
            "binaryData": {"blob": "AAH+/2Jpbg=="},
        }),
    );
}

#[test]
fn kubectl_create_secret() {
    check_capture(
        "kubectl-create-secret.bin",
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db-creds", "namespace": "default"},
            "data": {"password": "czNjcjN0IQ==", "username": "YWRtaW4="},
            "type": "Opaque",
        }),
    );
}

#[test]
fn kubectl_create_namespace() {
    check_capture(
        "kubectl-create-namespace.bin",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    );
}

#[test]
fn kubectl_create_serviceaccount() {
    check_capture(
        "kubectl-create-serviceaccount.bin",
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "builder", "namespace": "default"},
        }),
    );
}

#[test]
fn kubectl_create_deployment() {
    // `kubectl create deployment web --image=nginx --replicas=2 --port=80`: a pod template with
    // every PodSpec and Container value field written empty, an empty strategy and status.
    check_capture(
        "kubectl-create-deployment.bin",
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "nginx",
                            "image": "nginx",
                            "ports": [{"containerPort": 80}],
                        }],
                    },
                },
            },
        }),
    );
}

#[test]
fn kubectl_create_service_clusterip() {
    // `kubectl create service clusterip web --tcp=80:8080`: the target port is an
    // IntOrString holding an integer.
    check_capture(
        "kubectl-create-service-clusterip.bin",
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "web"},
                "type": "ClusterIP",
            },
        }),
    );
}

#[test]
fn kubectl_create_poddisruptionbudget() {
    // `kubectl create poddisruptionbudget pdb --selector=app=web --min-available=1`.
    check_capture(
        "kubectl-create-poddisruptionbudget.bin",
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }),
    );
}

// ---- hand-assembled bodies ----

#[test]
fn configmap_matches_hand_assembled_bytes() {
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "prod",
            "uid": "5b1c7c1e-0d7a-4c6e-9f55-2a0c3c5d7e11",
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-21T18:44:29Z",
            // Written out of order: Go sorts map keys.
            "labels": {"tier": "backend", "app": "shop"},
            "annotations": {"note": ""},
            "finalizers": ["example.com/keep"],
        },
        "immutable": false,
        "data": {"z.conf": "a=1", "a.conf": "b=2"},
    });
    let meta = [
        object_meta(
            "settings",
            "prod",
            "5b1c7c1e-0d7a-4c6e-9f55-2a0c3c5d7e11",
            "42",
            CREATED,
        ),
        map_entry(11, "app", b"shop"),
        map_entry(11, "tier", b"backend"),
        map_entry(12, "note", b""),
        str_field(14, "example.com/keep"),
    ]
    .concat();
    let raw = [
        len_field(1, &meta),
        map_entry(2, "a.conf", b"b=2"),
        map_entry(2, "z.conf", b"a=1"),
        varint_field(4, 0),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn secret_matches_hand_assembled_bytes() {
    let object = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "tls",
            "namespace": "prod",
            "uid": "u-1",
            "resourceVersion": "7",
            "creationTimestamp": "2026-11-21T18:44:29Z",
            "deletionTimestamp": "2026-11-21T18:45:00Z",
            "deletionGracePeriodSeconds": 0,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "owner",
                "uid": "u-0",
                "controller": true,
            }],
        },
        "data": {"tls.key": "AAH+/w==", "tls.crt": "LS0t"},
        "type": "kubernetes.io/tls",
        "immutable": true,
    });
    let owner = [
        str_field(1, "ConfigMap"),
        str_field(3, "owner"),
        str_field(4, "u-0"),
        str_field(5, "v1"),
        varint_field(6, 1),
    ]
    .concat();
    let deletion = [varint_field(1, 1_795_286_700), varint_field(2, 0)].concat();
    let meta = [
        object_meta("tls", "prod", "u-1", "7", CREATED),
        len_field(9, &deletion),
        varint_field(10, 0),
        len_field(13, &owner),
    ]
    .concat();
    let raw = [
        len_field(1, &meta),
        map_entry(2, "tls.crt", b"---"),
        map_entry(2, "tls.key", &[0x00, 0x01, 0xfe, 0xff]),
        str_field(3, "kubernetes.io/tls"),
        varint_field(5, 1),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn lease_with_negative_and_micro_time_fields() {
    let object = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": "node-a",
            "leaseDurationSeconds": -1,
            "renewTime": "2026-11-21T18:44:29.250000Z",
        },
    });
    let renew = [varint_field(1, CREATED), varint_field(2, 250_000_000)].concat();
    let spec = [
        str_field(1, "node-a"),
        // int32 -1 travels sign-extended: ten bytes.
        varint_field(2, u64::MAX),
        len_field(4, &renew),
    ]
    .concat();
    let meta = [
        str_field(1, "leader"),
        str_field(2, ""),
        str_field(3, "kube-system"),
        str_field(4, ""),
        str_field(5, ""),
        str_field(6, ""),
        varint_field(7, 0),
        len_field(8, &[]),
    ]
    .concat();
    let raw = [len_field(1, &meta), len_field(2, &spec)].concat();
    assert_same_as_go(&object, &raw);
}

/// `ObjectMeta` with only a name, as Go writes it.
fn named_meta(name: &str) -> Vec<u8> {
    [
        str_field(1, name),
        str_field(2, ""),
        str_field(3, ""),
        str_field(4, ""),
        str_field(5, ""),
        str_field(6, ""),
        varint_field(7, 0),
        len_field(8, &[]),
    ]
    .concat()
}

/// `intstr.IntOrString`: type, intVal and strVal, all three always written.
fn int_or_string(kind: u64, int: u64, text: &str) -> Vec<u8> {
    [
        varint_field(1, kind),
        varint_field(2, int),
        str_field(3, text),
    ]
    .concat()
}

#[test]
fn pdb_int_or_string_matches_hand_assembled_bytes() {
    let object = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb"},
        "spec": {"maxUnavailable": "25%", "minAvailable": -1},
    });
    let spec = [
        len_field(1, &int_or_string(0, u64::MAX, "")),
        len_field(3, &int_or_string(1, 0, "25%")),
    ]
    .concat();
    let status = [
        varint_field(1, 0),
        varint_field(3, 0),
        varint_field(4, 0),
        varint_field(5, 0),
        varint_field(6, 0),
    ]
    .concat();
    let raw = [
        len_field(1, &named_meta("pdb")),
        len_field(2, &spec),
        len_field(3, &status),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn embedded_structs_and_quantities_match_hand_assembled_bytes() {
    // A PersistentVolumeClaim: its requests are `map<string, Quantity>`, each quantity a
    // message `{1: string}`.
    let object = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi", "cpu": "0"}},
        },
    });
    let resources = [
        map_entry(2, "cpu", &str_field(1, "0")),
        map_entry(2, "storage", &str_field(1, "10Gi")),
    ]
    .concat();
    let spec = [
        str_field(1, "ReadWriteOnce"),
        len_field(2, &resources),
        str_field(3, ""),
    ]
    .concat();
    let status = str_field(1, "");
    let raw = [
        len_field(1, &named_meta("data")),
        len_field(2, &spec),
        len_field(3, &status),
    ]
    .concat();
    assert_same_as_go(&object, &raw);

    // A Volume embeds VolumeSource (field 2), and a ConfigMapVolumeSource embeds
    // LocalObjectReference (field 1), though JSON shows their keys flat.
    let volume = json!({"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}});
    let config_map = [
        len_field(1, &str_field(1, "settings")),
        varint_field(3, 420),
    ]
    .concat();
    let volume_bytes = [
        str_field(1, "cfg"),
        len_field(2, &len_field(19, &config_map)),
    ]
    .concat();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"volumes": [volume]},
    });
    let body = protobuf::encode(&pod).unwrap();
    assert!(
        body.windows(volume_bytes.len()).any(|w| w == volume_bytes),
        "{body:02x?}"
    );
    assert_eq!(protobuf::decode(&body).unwrap(), pod);
}

#[test]
fn packed_repeated_numbers_are_read() {
    // Go writes PodSecurityContext.supplementalGroups unpacked but reads the packed form too.
    let packed = len_field(4, &[varint(1000), varint(2000)].concat());
    let security = [packed, varint_field(4, 3000)].concat();
    let spec = len_field(14, &security);
    let raw = [len_field(1, &named_meta("p")), len_field(2, &spec)].concat();
    let decoded = protobuf::decode(&envelope("v1", "Pod", &raw)).unwrap();
    assert_eq!(
        decoded["spec"]["securityContext"]["supplementalGroups"],
        json!([1000, 2000, 3000])
    );
    let truncated = len_field(4, &[0x80]);
    let raw = len_field(2, &len_field(14, &truncated));
    let err = protobuf::decode(&envelope("v1", "Pod", &raw)).unwrap_err();
    assert!(matches!(err, ProtobufError::Truncated), "{err}");
}

#[test]
fn impossible_special_values_are_malformed() {
    // IntOrString type 2 does not exist; Go refuses to print it.
    let spec = len_field(1, &int_or_string(2, 0, ""));
    let raw = len_field(2, &spec);
    let err = protobuf::decode(&envelope("policy/v1", "PodDisruptionBudget", &raw)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid PodDisruptionBudgetSpec.minAvailable: unknown IntOrString type 2"
    );
    // An empty quantity string does not parse in Go.
    let resources = map_entry(2, "storage", &str_field(1, ""));
    let raw = len_field(2, &len_field(2, &resources));
    let err = protobuf::decode(&envelope("v1", "PersistentVolumeClaim", &raw)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid VolumeResourceRequirements.requests: empty quantity"
    );
    // An embedded struct sent as a number.
    let volume = [str_field(1, "v"), varint_field(2, 1)].concat();
    let raw = len_field(2, &len_field(1, &volume));
    let err = protobuf::decode(&envelope("v1", "Pod", &raw)).unwrap_err();
    assert!(
        matches!(
            err,
            ProtobufError::WrongWireType {
                message: "Volume",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn unknown_fields_are_skipped() {
    // A ConfigMap from a newer client: field 99 in the ConfigMap, field 40 in its ObjectMeta,
    // a fixed32 and a fixed64 field, none of which this server knows.
    let meta = [str_field(1, "future"), str_field(40, "new meta field")].concat();
    let raw = [
        len_field(1, &meta),
        varint_field(99, 5),
        vec![0x9d, 0x06, 1, 2, 3, 4],
        vec![0xa1, 0x06, 1, 2, 3, 4, 5, 6, 7, 8],
        map_entry(2, "k", b"v"),
    ]
    .concat();
    let decoded = protobuf::decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "future"},
            "data": {"k": "v"},
        })
    );
}

#[test]
fn repeated_embedded_message_merges() {
    // Protobuf merges a message field that appears twice; Go's unmarshaller does too.
    let raw = [
        len_field(1, &str_field(1, "first")),
        len_field(1, &str_field(3, "ns")),
    ]
    .concat();
    let decoded = protobuf::decode(&envelope("v1", "ServiceAccount", &raw)).unwrap();
    assert_eq!(
        decoded["metadata"],
        json!({"name": "first", "namespace": "ns"})
    );
}

#[test]
fn invalid_utf8_strings_are_repaired() {
    let raw = len_field(1, &len_field(1, &[b'a', 0xff, b'b']));
    let decoded = protobuf::decode(&envelope("v1", "Namespace", &raw)).unwrap();
    assert_eq!(decoded["metadata"]["name"], "a\u{fffd}b");
}

#[test]
fn wrong_wire_type_is_malformed() {
    // ConfigMap.immutable (a bool) sent length-delimited.
    let raw = str_field(4, "yes");
    let err = protobuf::decode(&envelope("v1", "ConfigMap", &raw)).unwrap_err();
    assert!(matches!(
        err,
        ProtobufError::WrongWireType {
            message: "ConfigMap",
            field: "immutable",
            wire_type: 2
        }
    ));
    assert!(!err.is_unsupported());
}

#[test]
fn unsupported_kind_is_distinguished() {
    let err = protobuf::decode(&envelope("batch/v1", "Job", &[])).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    assert_eq!(
        err.to_string(),
        "no protobuf encoding for kind \"Job\" in \"batch/v1\""
    );
}

#[test]
fn malformed_envelopes_are_rejected() {
    let no_magic = protobuf::decode(br#"{"kind":"ConfigMap"}"#).unwrap_err();
    assert!(matches!(no_magic, ProtobufError::MissingMagic));
    let empty = protobuf::decode(b"k8s\0").unwrap_err();
    assert!(matches!(empty, ProtobufError::MissingTypeMeta));
    let no_kind = protobuf::decode(&envelope("v1", "", &[])).unwrap_err();
    assert!(matches!(no_kind, ProtobufError::MissingTypeMeta));
    let bad_fields_v1 = {
        let entry = len_field(7, &str_field(1, "{not json"));
        let meta = len_field(17, &entry);
        envelope("v1", "ConfigMap", &len_field(1, &meta))
    };
    let err = protobuf::decode(&bad_fields_v1).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid ManagedFieldsEntry.fieldsV1: not JSON"),
        "{err}"
    );
}

// ---- admission configuration, policies, quotas, certificate requests ----
//
// Sparse objects, as clients send them before the server's defaults: a Go value field left
// unset is still written (its zero value), a pointer left unset is not, so a shape taken the
// wrong way in `go_shapes.txt` changes these bytes. Field numbers are those of the Go types'
// `protobuf` tags.

/// `ObjectMeta` with a name and a namespace, as Go writes it.
fn namespaced_meta(name: &str, namespace: &str) -> Vec<u8> {
    [
        str_field(1, name),
        str_field(2, ""),
        str_field(3, namespace),
        str_field(4, ""),
        str_field(5, ""),
        str_field(6, ""),
        varint_field(7, 0),
        len_field(8, &[]),
    ]
    .concat()
}

#[test]
fn webhook_configuration_matches_hand_assembled_bytes() {
    // No failurePolicy, matchPolicy, selectors, timeout, scope, path or port: all Go pointers.
    // RuleWithOperations embeds Rule (field 2), whose keys JSON shows flat.
    let object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "vwc"},
        "webhooks": [{
            "name": "pods.example.com",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    });
    let service = [str_field(1, "ns"), str_field(2, "svc")].concat();
    let rule = [str_field(1, ""), str_field(2, "v1"), str_field(3, "pods")].concat();
    let rule_with_operations = [
        str_field(1, "CREATE"),
        str_field(1, "UPDATE"),
        len_field(2, &rule),
    ]
    .concat();
    let webhook = [
        str_field(1, "pods.example.com"),
        len_field(2, &len_field(1, &service)),
        len_field(3, &rule_with_operations),
        str_field(6, "None"),
        str_field(8, "v1"),
    ]
    .concat();
    let raw = [len_field(1, &named_meta("vwc")), len_field(2, &webhook)].concat();
    assert_same_as_go(&object, &raw);

    // A mutating webhook by URL: reinvocationPolicy (10) and objectSelector (11) are pointers
    // here too, an empty selector written as an empty message.
    let object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mwc"},
        "webhooks": [{
            "name": "url.example.com",
            "clientConfig": {"url": "https://hook.example.com/mutate", "caBundle": "Y2E="},
            "timeoutSeconds": 5,
            "objectSelector": {},
            "reinvocationPolicy": "Never",
        }],
    });
    let client_config = [
        str_field(2, "ca"),
        str_field(3, "https://hook.example.com/mutate"),
    ]
    .concat();
    let webhook = [
        str_field(1, "url.example.com"),
        len_field(2, &client_config),
        varint_field(7, 5),
        str_field(10, "Never"),
        len_field(11, &[]),
    ]
    .concat();
    let raw = [len_field(1, &named_meta("mwc")), len_field(2, &webhook)].concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn admission_policies_match_hand_assembled_bytes() {
    // ValidatingAdmissionPolicy: paramKind, matchConstraints, failurePolicy, reason and
    // typeChecking are pointers; a validation's message strings and the status's
    // observedGeneration are values.
    let object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "vap"},
        "spec": {"validations": [{"expression": "true"}]},
    });
    let validation = [str_field(1, "true"), str_field(2, ""), str_field(4, "")].concat();
    let raw = [
        len_field(1, &named_meta("vap")),
        len_field(2, &len_field(3, &validation)),
        len_field(3, &varint_field(1, 0)),
    ]
    .concat();
    assert_same_as_go(&object, &raw);

    // A binding: paramRef and matchResources are pointers; within paramRef, name and namespace
    // are values, selector and parameterNotFoundAction pointers. In matchResources,
    // NamedRuleWithOperations embeds RuleWithOperations (field 2).
    let object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "vapb"},
        "spec": {
            "policyName": "vap",
            "paramRef": {"name": "params"},
            "matchResources": {"resourceRules": [{"resourceNames": ["a"],
                "operations": ["DELETE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                "resources": ["deployments"], "scope": "*"}]},
            "validationActions": ["Deny"],
        },
    });
    let param_ref = [str_field(1, "params"), str_field(2, "")].concat();
    let rule = [
        str_field(1, "apps"),
        str_field(2, "v1"),
        str_field(3, "deployments"),
        str_field(4, "*"),
    ]
    .concat();
    let named_rule = [
        str_field(1, "a"),
        len_field(2, &[str_field(1, "DELETE"), len_field(2, &rule)].concat()),
    ]
    .concat();
    let spec = [
        str_field(1, "vap"),
        len_field(2, &param_ref),
        len_field(3, &len_field(3, &named_rule)),
        str_field(4, "Deny"),
    ]
    .concat();
    let raw = [len_field(1, &named_meta("vapb")), len_field(2, &spec)].concat();
    assert_same_as_go(&object, &raw);

    // MutatingAdmissionPolicy (v1beta1): reinvocationPolicy (7) is a value, a mutation's
    // patchType (2) too; applyConfiguration (3) and jsonPatch (4) are pointers.
    let object = json!({
        "apiVersion": "admissionregistration.k8s.io/v1beta1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "map"},
        "spec": {"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]},
    });
    let mutation = [str_field(2, "JSONPatch"), len_field(4, &str_field(1, "[]"))].concat();
    let spec = [len_field(4, &mutation), str_field(7, "")].concat();
    let raw = [len_field(1, &named_meta("map")), len_field(2, &spec)].concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn resource_quota_and_csr_match_hand_assembled_bytes() {
    // No scopes and no scopeSelector (a pointer); an empty status is still written.
    let object = json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "quota", "namespace": "team-a"},
        "spec": {"hard": {"pods": "5", "requests.cpu": "2"}},
    });
    let hard = [
        map_entry(1, "pods", &str_field(1, "5")),
        map_entry(1, "requests.cpu", &str_field(1, "2")),
    ]
    .concat();
    let raw = [
        len_field(1, &namespaced_meta("quota", "team-a")),
        len_field(2, &hard),
        len_field(3, &[]),
    ]
    .concat();
    assert_same_as_go(&object, &raw);

    // A CSR as `kubectl create -f` sends it: request is Go `[]byte`, username and uid values,
    // expirationSeconds (8) a pointer.
    let object = json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": "csr"},
        "spec": {"request": "Y3Ny", "signerName": "example.com/signer", "usages": ["client auth"]},
    });
    let spec = [
        str_field(1, "csr"),
        str_field(2, ""),
        str_field(3, ""),
        str_field(5, "client auth"),
        str_field(7, "example.com/signer"),
    ]
    .concat();
    let raw = [
        len_field(1, &named_meta("csr")),
        len_field(2, &spec),
        len_field(3, &[]),
    ]
    .concat();
    assert_same_as_go(&object, &raw);

    // What `kubectl certificate approve` PUTs to `/approval`: an Approved condition whose
    // times are Go value fields (lastTransitionTime, left zero, written empty).
    let object = json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": "csr"},
        "spec": {"request": "Y3Ny", "signerName": "example.com/signer",
            "expirationSeconds": 3600, "usages": ["client auth"]},
        "status": {"conditions": [{"type": "Approved", "status": "True",
            "reason": "KubectlApprove", "message": "approved",
            "lastUpdateTime": "2026-11-21T18:44:29Z"}]},
    });
    let spec = [
        str_field(1, "csr"),
        str_field(2, ""),
        str_field(3, ""),
        str_field(5, "client auth"),
        str_field(7, "example.com/signer"),
        varint_field(8, 3600),
    ]
    .concat();
    let time = [varint_field(1, CREATED), varint_field(2, 0)].concat();
    let condition = [
        str_field(1, "Approved"),
        str_field(2, "KubectlApprove"),
        str_field(3, "approved"),
        len_field(4, &time),
        len_field(5, &[]),
        str_field(6, "True"),
    ]
    .concat();
    let raw = [
        len_field(1, &named_meta("csr")),
        len_field(2, &spec),
        len_field(3, &len_field(1, &condition)),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}
