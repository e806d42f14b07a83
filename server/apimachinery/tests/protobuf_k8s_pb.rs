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
use k8s_pb::api::admissionregistration;
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
        (_, "v1", "ResourceQuota") => prost_again::<api::core::v1::ResourceQuota>(raw),
        (_, "v1", "ResourceQuotaList") => prost_again::<api::core::v1::ResourceQuotaList>(raw),
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
        (_, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            prost_again::<admissionregistration::v1::ValidatingWebhookConfiguration>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfigurationList") => {
            prost_again::<admissionregistration::v1::ValidatingWebhookConfigurationList>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            prost_again::<admissionregistration::v1::MutatingWebhookConfiguration>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "MutatingWebhookConfigurationList") => {
            prost_again::<admissionregistration::v1::MutatingWebhookConfigurationList>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            prost_again::<admissionregistration::v1::ValidatingAdmissionPolicy>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyList") => {
            prost_again::<admissionregistration::v1::ValidatingAdmissionPolicyList>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            prost_again::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>(raw)
        }
        (_, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBindingList") => {
            prost_again::<admissionregistration::v1::ValidatingAdmissionPolicyBindingList>(raw)
        }
        (_, "admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicy") => {
            prost_again::<admissionregistration::v1beta1::MutatingAdmissionPolicy>(raw)
        }
        (_, "admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicyList") => {
            prost_again::<admissionregistration::v1beta1::MutatingAdmissionPolicyList>(raw)
        }
        (_, "admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicyBinding") => {
            prost_again::<admissionregistration::v1beta1::MutatingAdmissionPolicyBinding>(raw)
        }
        (_, "admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicyBindingList") => {
            prost_again::<admissionregistration::v1beta1::MutatingAdmissionPolicyBindingList>(raw)
        }
        ("certificates.k8s.io", _, "CertificateSigningRequest") => {
            prost_again::<api::certificates::v1::CertificateSigningRequest>(raw)
        }
        ("certificates.k8s.io", _, "CertificateSigningRequestList") => {
            prost_again::<api::certificates::v1::CertificateSigningRequestList>(raw)
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

/// Admission configuration, policies, quotas and certificate requests as kube-apiserver stores
/// them (defaults applied: `namespaceSelector: {}`, `objectSelector: {}`, `matchPolicy`,
/// `scope`, an empty `typeChecking`) and as clients send them (`kubectl certificate approve`'s
/// CSR with an Approved condition). Go pointers set to their zero value (`{}`) survive the round
/// trip only when the table knows they are pointers, and every JSON key here is the API's own,
/// so a wrong key, an embedded struct not declared `inline` or a pointer taken for a value field
/// fails the comparison.
fn realistic_admission_certificate_and_quota_objects() -> Vec<Value> {
    let meta = |name: &str| {
        json!({"name": name, "uid": format!("{name}-uid"), "resourceVersion": "41",
            "generation": 2, "creationTimestamp": "2026-11-25T12:00:00Z",
            "labels": {"app.kubernetes.io/part-of": "policy"}})
    };
    let rule = |operations: Value, group: &str, resources: Value, scope: &str| {
        json!({"operations": operations, "apiGroups": [group], "apiVersions": ["v1"],
            "resources": resources, "scope": scope})
    };
    let not_kube_system = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
        "operator": "NotIn", "values": ["kube-system", "kube-public"]}]});
    let match_conditions = json!([{"name": "not-a-node",
        "expression": "!request.userInfo.username.startsWith('system:node:')"}]);
    let service_webhook = json!({
        "name": "pods.policy.example.com",
        "clientConfig": {"caBundle": "Y2EtYnVuZGxl", "service": {"namespace": "policy",
            "name": "webhook", "path": "/validate-pods", "port": 8443}},
        "rules": [rule(json!(["CREATE", "UPDATE"]), "", json!(["pods", "pods/ephemeralcontainers"]), "Namespaced")],
        "failurePolicy": "Fail", "matchPolicy": "Equivalent",
        "namespaceSelector": not_kube_system, "objectSelector": {},
        "sideEffects": "None", "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1", "v1beta1"], "matchConditions": match_conditions,
    });
    let url_webhook = json!({
        "name": "deployments.policy.example.com",
        "clientConfig": {"url": "https://webhook.example.com:8443/check"},
        "rules": [rule(json!(["*"]), "apps", json!(["deployments", "deployments/scale"]), "*")],
        "failurePolicy": "Ignore", "matchPolicy": "Exact",
        "namespaceSelector": {}, "objectSelector": {"matchLabels": {"team": "a"}},
        "sideEffects": "NoneOnDryRun", "timeoutSeconds": 30,
        "admissionReviewVersions": ["v1"],
    });
    let mut mutating_service = service_webhook.clone();
    mutating_service["reinvocationPolicy"] = json!("IfNeeded");
    mutating_service["clientConfig"]["service"] =
        json!({"namespace": "policy", "name": "webhook", "path": "/mutate-pods", "port": 443});
    let mut mutating_url = url_webhook.clone();
    mutating_url["reinvocationPolicy"] = json!("Never");
    let match_constraints = json!({
        "namespaceSelector": {}, "objectSelector": {}, "matchPolicy": "Equivalent",
        "resourceRules": [rule(json!(["CREATE", "UPDATE"]), "apps", json!(["deployments"]), "*")],
        "excludeResourceRules": [{"resourceNames": ["system-critical"], "operations": ["*"],
            "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
            "scope": "*"}],
    });
    let condition = |kind: &str, reason: &str| {
        json!({"type": kind, "status": "True", "observedGeneration": 2,
            "lastTransitionTime": "2026-11-25T12:00:05Z", "reason": reason,
            "message": "the policy was compiled"})
    };
    let binding_match = json!({"namespaceSelector": {"matchLabels": {"environment": "test"}},
        "objectSelector": {}, "matchPolicy": "Equivalent"});
    let quota_hard = json!({"requests.cpu": "4", "requests.memory": "8Gi", "limits.cpu": "8",
        "pods": "20", "count/configmaps": "50"});
    vec![
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta("policy.example.com"),
            "webhooks": [service_webhook, url_webhook],
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta("defaults.example.com"),
            "webhooks": [mutating_service, mutating_url],
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": meta("replica-limit"),
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": match_constraints,
                "validations": [
                    {"expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                        "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'",
                        "reason": "Invalid"},
                    {"expression": "has(object.spec.template)", "message": "a template is required"},
                ],
                "failurePolicy": "Fail",
                "auditAnnotations": [{"key": "high-replica-count",
                    "valueExpression": "'replicas: ' + string(object.spec.replicas)"}],
                "matchConditions": match_conditions,
                "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
            },
            "status": {"observedGeneration": 2, "typeChecking": {},
                "conditions": [condition("TypeChecked", "Compiled")]},
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": meta("labels-required"),
            "spec": {
                "matchConstraints": match_constraints,
                "validations": [{"expression": "has(object.metadata.labels.owner)"}],
                "failurePolicy": "Ignore",
            },
            "status": {"observedGeneration": 1, "typeChecking": {"expressionWarnings": [
                {"fieldRef": "spec.validations[0].expression",
                    "warning": "apps/v1, Kind=Deployment: undefined field 'owner'"}]}},
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": meta("replica-limit-test"),
            "spec": {
                "policyName": "replica-limit",
                "paramRef": {"name": "replica-limit-params", "namespace": "default",
                    "parameterNotFoundAction": "Deny"},
                "matchResources": binding_match,
                "validationActions": ["Deny", "Audit"],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": meta("replica-limit-all"),
            "spec": {
                "policyName": "replica-limit",
                "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
                "validationActions": ["Warn"],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": meta("sidecar"),
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {
                    "namespaceSelector": {}, "objectSelector": {}, "matchPolicy": "Equivalent",
                    "resourceRules": [rule(json!(["CREATE"]), "", json!(["pods"]), "*")],
                },
                "variables": [{"name": "image", "expression": "params.data.image"}],
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                        "Object{metadata: Object.metadata{labels: {\"mutated\": \"true\"}}}"}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression":
                        "[JSONPatch{op: \"add\", path: \"/spec/initContainers/-\", value: Object.spec.initContainers{name: \"init\", image: variables.image}}]"}},
                ],
                "failurePolicy": "Fail",
                "matchConditions": match_conditions,
                "reinvocationPolicy": "IfNeeded",
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": meta("sidecar-test"),
            "spec": {
                "policyName": "sidecar",
                "paramRef": {"name": "sidecar-params", "namespace": "default",
                    "parameterNotFoundAction": "Deny"},
                "matchResources": binding_match,
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": meta("sidecar-all"),
            "spec": {"policyName": "sidecar",
                "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"}},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "compute", "namespace": "team-a", "resourceVersion": "9",
                "creationTimestamp": "2026-11-25T12:00:00Z"},
            "spec": {
                "hard": quota_hard,
                "scopeSelector": {"matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["high", "critical"]},
                    {"scopeName": "Terminating", "operator": "DoesNotExist"},
                ]},
            },
            "status": {"hard": quota_hard, "used": {"requests.cpu": "500m",
                "requests.memory": "1Gi", "limits.cpu": "0", "pods": "3", "count/configmaps": "0"}},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "best-effort", "namespace": "team-a"},
            "spec": {"hard": {"pods": "5"}, "scopes": ["BestEffort", "NotTerminating"]},
        }),
        json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": meta("node-csr-abc"),
            "spec": {
                "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                "expirationSeconds": 86400,
                "usages": ["digital signature", "key encipherment", "client auth"],
                "username": "system:bootstrap:abcdef",
                "uid": "bootstrap-uid",
                "groups": ["system:bootstrappers", "system:authenticated"],
                "extra": {"authentication.kubernetes.io/credential-id": ["X509SHA256=ab12"],
                    "scopes": ["a", "b"]},
            },
            // `kubectl certificate approve` PUTs this to `/approval`.
            "status": {"conditions": [{"type": "Approved", "status": "True",
                "reason": "KubectlApprove",
                "message": "This CSR was approved by kubectl certificate approve.",
                "lastUpdateTime": "2026-11-25T12:01:00Z",
                "lastTransitionTime": "2026-11-25T12:01:00Z"}]},
        }),
        json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": meta("signed"),
            "spec": {
                "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                "signerName": "example.com/serving",
                "usages": ["server auth"],
                "username": "alice",
            },
            "status": {
                "conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                    "message": "approved by the signer's controller",
                    "lastUpdateTime": "2026-11-25T12:01:00Z",
                    "lastTransitionTime": "2026-11-25T12:01:00Z"}],
                "certificate": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
            },
        }),
    ]
}

#[test]
fn realistic_admission_certificate_and_quota_objects_match_k8s_pb() {
    for object in realistic_admission_certificate_and_quota_objects() {
        let name = format!("{} {}", object["kind"], object["metadata"]["name"]);
        let (ours, theirs) = both_encodings(&object);
        assert_eq!(ours, theirs, "{name}");
        assert_eq!(protobuf::decode(&theirs).unwrap(), object, "{name}");
        // The same object as an item of its list, where Go writes no TypeMeta.
        let mut item = object.clone();
        let item_map = item.as_object_mut().unwrap();
        let api_version = item_map.remove("apiVersion").unwrap();
        let kind = item_map.remove("kind").unwrap();
        let list = json!({
            "apiVersion": api_version, "kind": format!("{}List", kind.as_str().unwrap()),
            "metadata": {"resourceVersion": "42", "continue": "next"},
            "items": [item],
        });
        let (ours, theirs) = both_encodings(&list);
        assert_eq!(ours, theirs, "{name} in a list");
        assert_eq!(protobuf::decode(&theirs).unwrap(), list, "{name} in a list");
    }
}
