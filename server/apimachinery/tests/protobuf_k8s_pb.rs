//! Our protobuf bytes against an implementation we did not write: kube-rs's `k8s-pb` (prost
//! types generated from the Kubernetes 1.35 `.proto` files). For every registered kind, an
//! object with every table field set is encoded by us, decoded by prost into the `k8s-pb`
//! message and encoded again by prost; the bytes must be identical (same field numbers, wire
//! types and order: prost, like Go's marshaller, writes fields by ascending number and skips
//! what it does not know, so a wrong or unknown field changes the bytes), and our decoding of
//! prost's bytes must give back the JSON we started from. An object with no fields set checks
//! the empty value fields Go writes (prost keeps them as `Some(zero)` and writes them back).
//!
//! Both sides carry Kubernetes 1.35: our tables are generated from k8s-pb's prost code
//! (`tests/protobuf_tables.rs`), but the encoder, the decoder, the JSON keys (k8s-openapi) and the
//! Go shapes (`go_shapes.txt`) are ours, and prost's marshaller is an implementation we did not
//! write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_pb::api;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kcp_apimachinery::protobuf;
use prost::Message;
use serde_json::{Value, json};

/// Every field is compared: nothing exists on one side only.
fn skip(_message: &str, _field: &str) -> bool {
    false
}

/// Decodes `raw` as `M` with prost and encodes it again.
fn prost_again<M: Message + Default>(raw: &[u8]) -> Result<Vec<u8>, prost::DecodeError> {
    Ok(M::decode(raw)?.encode_to_vec())
}

/// prost's re-encoding of the object message of `(api_version, kind)`; `None` when this test
/// does not know the kind's k8s-pb type (a failure: every registered kind must be listed).
fn k8s_pb_round_trip(api_version: &str, kind: &str, raw: &[u8]) -> Option<Vec<u8>> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let r = match (group, api_version, kind) {
        (_, _, "Status") => prost_again::<meta::Status>(raw),
        (_, _, "DeleteOptions") => prost_again::<meta::DeleteOptions>(raw),
        (_, "v1", "ConfigMap") => prost_again::<api::core::v1::ConfigMap>(raw),
        (_, "v1", "ConfigMapList") => prost_again::<api::core::v1::ConfigMapList>(raw),
        (_, "v1", "Secret") => prost_again::<api::core::v1::Secret>(raw),
        (_, "v1", "SecretList") => prost_again::<api::core::v1::SecretList>(raw),
        (_, "v1", "Namespace") => prost_again::<api::core::v1::Namespace>(raw),
        (_, "v1", "NamespaceList") => prost_again::<api::core::v1::NamespaceList>(raw),
        (_, "v1", "ServiceAccount") => prost_again::<api::core::v1::ServiceAccount>(raw),
        (_, "v1", "ServiceAccountList") => prost_again::<api::core::v1::ServiceAccountList>(raw),
        (_, "v1", "Event") => prost_again::<api::core::v1::Event>(raw),
        (_, "v1", "EventList") => prost_again::<api::core::v1::EventList>(raw),
        (_, "v1", "PodTemplate") => prost_again::<api::core::v1::PodTemplate>(raw),
        (_, "v1", "PodTemplateList") => prost_again::<api::core::v1::PodTemplateList>(raw),
        (_, "v1", "Service") => prost_again::<api::core::v1::Service>(raw),
        (_, "v1", "ServiceList") => prost_again::<api::core::v1::ServiceList>(raw),
        (_, "v1", "Pod") => prost_again::<api::core::v1::Pod>(raw),
        (_, "v1", "PodList") => prost_again::<api::core::v1::PodList>(raw),
        (_, "v1", "PersistentVolumeClaim") => {
            prost_again::<api::core::v1::PersistentVolumeClaim>(raw)
        }
        (_, "v1", "PersistentVolumeClaimList") => {
            prost_again::<api::core::v1::PersistentVolumeClaimList>(raw)
        }
        (_, "v1", "Endpoints") => prost_again::<api::core::v1::Endpoints>(raw),
        (_, "v1", "EndpointsList") => prost_again::<api::core::v1::EndpointsList>(raw),
        ("events.k8s.io", _, "Event") => prost_again::<api::events::v1::Event>(raw),
        ("events.k8s.io", _, "EventList") => prost_again::<api::events::v1::EventList>(raw),
        ("coordination.k8s.io", _, "Lease") => prost_again::<api::coordination::v1::Lease>(raw),
        ("coordination.k8s.io", _, "LeaseList") => {
            prost_again::<api::coordination::v1::LeaseList>(raw)
        }
        ("apps", _, "Deployment") => prost_again::<api::apps::v1::Deployment>(raw),
        ("apps", _, "DeploymentList") => prost_again::<api::apps::v1::DeploymentList>(raw),
        ("apps", _, "StatefulSet") => prost_again::<api::apps::v1::StatefulSet>(raw),
        ("apps", _, "StatefulSetList") => prost_again::<api::apps::v1::StatefulSetList>(raw),
        ("apps", _, "ReplicaSet") => prost_again::<api::apps::v1::ReplicaSet>(raw),
        ("apps", _, "ReplicaSetList") => prost_again::<api::apps::v1::ReplicaSetList>(raw),
        ("apps", _, "DaemonSet") => prost_again::<api::apps::v1::DaemonSet>(raw),
        ("apps", _, "DaemonSetList") => prost_again::<api::apps::v1::DaemonSetList>(raw),
        ("policy", _, "PodDisruptionBudget") => {
            prost_again::<api::policy::v1::PodDisruptionBudget>(raw)
        }
        ("policy", _, "PodDisruptionBudgetList") => {
            prost_again::<api::policy::v1::PodDisruptionBudgetList>(raw)
        }
        ("policy", _, "Eviction") => prost_again::<api::policy::v1::Eviction>(raw),
        ("discovery.k8s.io", _, "EndpointSlice") => {
            prost_again::<api::discovery::v1::EndpointSlice>(raw)
        }
        ("discovery.k8s.io", _, "EndpointSliceList") => {
            prost_again::<api::discovery::v1::EndpointSliceList>(raw)
        }
        ("autoscaling", _, "Scale") => prost_again::<api::autoscaling::v1::Scale>(raw),
        ("rbac.authorization.k8s.io", _, "Role") => prost_again::<api::rbac::v1::Role>(raw),
        ("rbac.authorization.k8s.io", _, "RoleList") => prost_again::<api::rbac::v1::RoleList>(raw),
        ("rbac.authorization.k8s.io", _, "ClusterRole") => {
            prost_again::<api::rbac::v1::ClusterRole>(raw)
        }
        ("rbac.authorization.k8s.io", _, "ClusterRoleList") => {
            prost_again::<api::rbac::v1::ClusterRoleList>(raw)
        }
        ("rbac.authorization.k8s.io", _, "RoleBinding") => {
            prost_again::<api::rbac::v1::RoleBinding>(raw)
        }
        ("rbac.authorization.k8s.io", _, "RoleBindingList") => {
            prost_again::<api::rbac::v1::RoleBindingList>(raw)
        }
        ("rbac.authorization.k8s.io", _, "ClusterRoleBinding") => {
            prost_again::<api::rbac::v1::ClusterRoleBinding>(raw)
        }
        ("rbac.authorization.k8s.io", _, "ClusterRoleBindingList") => {
            prost_again::<api::rbac::v1::ClusterRoleBindingList>(raw)
        }
        (_, "authentication.k8s.io/v1", "TokenReview") => {
            prost_again::<api::authentication::v1::TokenReview>(raw)
        }
        (_, "authentication.k8s.io/v1", "TokenRequest") => {
            prost_again::<api::authentication::v1::TokenRequest>(raw)
        }
        (_, "authentication.k8s.io/v1", "SelfSubjectReview") => {
            prost_again::<api::authentication::v1::SelfSubjectReview>(raw)
        }
        (_, "authentication.k8s.io/v1beta1", "SelfSubjectReview") => {
            prost_again::<api::authentication::v1beta1::SelfSubjectReview>(raw)
        }
        ("authorization.k8s.io", _, "SubjectAccessReview") => {
            prost_again::<api::authorization::v1::SubjectAccessReview>(raw)
        }
        ("authorization.k8s.io", _, "LocalSubjectAccessReview") => {
            prost_again::<api::authorization::v1::LocalSubjectAccessReview>(raw)
        }
        ("authorization.k8s.io", _, "SelfSubjectAccessReview") => {
            prost_again::<api::authorization::v1::SelfSubjectAccessReview>(raw)
        }
        ("authorization.k8s.io", _, "SelfSubjectRulesReview") => {
            prost_again::<api::authorization::v1::SelfSubjectRulesReview>(raw)
        }
        ("apiextensions.k8s.io", _, "CustomResourceDefinition") => {
            prost_again::<apiextensions::CustomResourceDefinition>(raw)
        }
        ("apiextensions.k8s.io", _, "CustomResourceDefinitionList") => {
            prost_again::<apiextensions::CustomResourceDefinitionList>(raw)
        }
        ("meta.k8s.io", _, "PartialObjectMetadata") => {
            prost_again::<meta::PartialObjectMetadata>(raw)
        }
        ("meta.k8s.io", _, "PartialObjectMetadataList") => {
            prost_again::<meta::PartialObjectMetadataList>(raw)
        }
        _ => return None,
    };
    Some(r.unwrap_or_else(|e| panic!("k8s-pb cannot decode {api_version} {kind}: {e}")))
}

/// Our body for `object`, and prost's re-encoding of it (envelope through k8s-pb's `Unknown`).
fn both_encodings(object: &Value) -> (Vec<u8>, Vec<u8>) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let ours = protobuf::encode(object).unwrap_or_else(|e| panic!("{api_version} {kind}: {e}"));
    let envelope = Unknown::decode(&ours[4..]).unwrap();
    let raw = envelope.raw.clone().unwrap_or_default();
    let again = k8s_pb_round_trip(api_version, kind, &raw)
        .unwrap_or_else(|| panic!("{api_version} {kind}: no k8s-pb type listed in this test"));
    let theirs = Unknown {
        raw: Some(again),
        ..envelope
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(theirs.encode_to_vec());
    (ours, body)
}

#[test]
fn every_registered_kind_matches_k8s_pb_with_every_field_set() {
    let kinds = protobuf::registered_kinds();
    assert!(kinds.len() > 60, "{}", kinds.len());
    let mut failures = Vec::new();
    for (api_version, kind) in &kinds {
        let object = protobuf::example_object(api_version, kind, &skip).unwrap();
        let (ours, theirs) = both_encodings(&object);
        if ours != theirs {
            failures.push(format!(
                "{api_version} {kind}: bytes differ ({} ours, {} after k8s-pb)",
                ours.len(),
                theirs.len()
            ));
            continue;
        }
        let decoded = protobuf::decode(&theirs).unwrap();
        if decoded != object {
            failures.push(format!(
                "{api_version} {kind}: JSON differs after the round trip:\n{}\n{}",
                object, decoded
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_registered_kind_matches_k8s_pb_with_no_field_set() {
    for (api_version, kind) in protobuf::registered_kinds() {
        let object = json!({"apiVersion": api_version, "kind": kind});
        let (ours, theirs) = both_encodings(&object);
        assert_eq!(ours, theirs, "{api_version} {kind}");
    }
}

/// A CRD as `kubectl apply` and controller-runtime write one: the schema unions in both of
/// their JSON forms, doubles, defaults, a conversion webhook with a CA bundle.
#[test]
fn a_realistic_crd_matches_k8s_pb() {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "resourceVersion": "7",
            "creationTimestamp": "2026-11-25T12:00:00Z"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList", "shortNames": ["wd"]},
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"caBundle": "Y2E=", "service":
                    {"namespace": "ns", "name": "conv", "path": "/convert", "port": 8443}}}},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Age", "type": "date",
                    "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "required": ["size"],
                            "x-kubernetes-validations": [{"rule": "self.size > 0",
                                "message": "positive"}],
                            "properties": {
                                "size": {"type": "integer", "minimum": 1, "maximum": 10.5,
                                    "default": 3},
                                "mode": {"type": "string", "enum": ["a", "b"]},
                                "tags": {"type": "array", "items": {"type": "string"},
                                    "x-kubernetes-list-type": "set"},
                                "pairs": {"type": "array",
                                    "items": [{"type": "string"}, {"type": "integer"}]},
                                "labels": {"type": "object",
                                    "additionalProperties": {"type": "string"}},
                                "open": {"type": "object", "additionalProperties": false,
                                    "dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
                                "raw": {"x-kubernetes-preserve-unknown-fields": true}
                            }},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }}}
            }]
        },
        "status": {"storedVersions": ["v1"], "acceptedNames": {"plural": "widgets", "kind": "Widget"},
            "conditions": [{"type": "Established", "status": "True",
                "lastTransitionTime": "2026-11-25T12:00:01Z", "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted"}]}
    });
    let (ours, theirs) = both_encodings(&crd);
    assert_eq!(ours, theirs);
    assert_eq!(protobuf::decode(&theirs).unwrap(), crd);
}
