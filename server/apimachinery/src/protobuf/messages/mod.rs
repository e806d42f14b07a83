//! The message tables for every kind this server speaks protobuf for, and the registry mapping
//! `(apiVersion, kind)` to them.
//!
//! The tables are in `generated`, written by `tests/protobuf_tables.rs` from kube-rs's k8s-pb
//! (field numbers and protobuf types of the Kubernetes 1.35 `.proto` files), k8s-openapi
//! `v1_35` (JSON keys, Go names) and `go_shapes.txt` (which Go fields are pointers or embedded
//! structs, what Go's marshaller writes depends on and no `.proto` file says); a test fails when
//! the file is stale. Supporting another kind means adding it to that generator's roots and one
//! [`Registration`] here; the codec needs no change.
//!
//! The workload kinds (apps/v1, core/v1 Service, Pod, PersistentVolumeClaim, Endpoints,
//! policy/v1, discovery.k8s.io/v1) are served through CRDs here, but typed clients
//! (`kubectl create deployment|service|poddisruptionbudget`, controllers) still send and expect
//! their protobuf form, so their tables cover every field of the Go types. The same holds for
//! RBAC (`kubectl create role|rolebinding|...`) and for the authentication and authorization
//! reviews (`kubectl auth can-i|whoami`, `kubectl create token`), requests the server answers
//! with an object of the same kind. Admission configuration (webhook configurations, validating
//! and mutating admission policies and their bindings), ResourceQuota and
//! CertificateSigningRequest are built-in kinds client-go's typed clients send in protobuf too
//! (`kubectl certificate approve` PUTs the CSR to `/approval` in protobuf).

mod generated;

use super::schema::{Message, Registration};
use generated::*;

pub(super) use generated::META_V1_WATCH_EVENT as WATCH_EVENT;

// ---- registry ----

const CORE: &[&str] = &["v1"];
const EVENTS: &[&str] = &["events.k8s.io/v1"];
const COORDINATION: &[&str] = &["coordination.k8s.io/v1"];
const APPS: &[&str] = &["apps/v1"];
const POLICY: &[&str] = &["policy/v1"];
const DISCOVERY: &[&str] = &["discovery.k8s.io/v1"];
const AUTOSCALING: &[&str] = &["autoscaling/v1"];
const RBAC: &[&str] = &["rbac.authorization.k8s.io/v1"];
const ADMISSIONREGISTRATION: &[&str] = &["admissionregistration.k8s.io/v1"];
/// The mutating admission policies are served at v1beta1 only (Kubernetes 1.35).
const ADMISSIONREGISTRATION_V1BETA1: &[&str] = &["admissionregistration.k8s.io/v1beta1"];
const CERTIFICATES: &[&str] = &["certificates.k8s.io/v1"];
const AUTHENTICATION: &[&str] = &["authentication.k8s.io/v1"];
/// kubectl before 1.28 asks `whoami` at v1beta1, whose SelfSubjectReview has the same shape.
const SELF_SUBJECT_REVIEW: &[&str] = &["authentication.k8s.io/v1", "authentication.k8s.io/v1beta1"];
const AUTHORIZATION: &[&str] = &["authorization.k8s.io/v1"];
const APIEXTENSIONS: &[&str] = &["apiextensions.k8s.io/v1"];
const META: &[&str] = &["meta.k8s.io/v1"];
/// `meta/v1` kinds are registered into every served group version (Go's
/// `metav1.AddToGroupVersion`), so a typed client deleting a Lease sends
/// `coordination.k8s.io/v1 DeleteOptions`.
const EVERY_VERSION: &[&str] = &[
    "v1",
    "events.k8s.io/v1",
    "coordination.k8s.io/v1",
    "apps/v1",
    "policy/v1",
    "discovery.k8s.io/v1",
    "autoscaling/v1",
    "rbac.authorization.k8s.io/v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1beta1",
    "certificates.k8s.io/v1",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    "meta.k8s.io/v1",
];

pub(super) static REGISTRY: &[Registration] = &[
    Registration::new(CORE, "ConfigMap", &CORE_V1_CONFIG_MAP),
    Registration::new(CORE, "ConfigMapList", &CORE_V1_CONFIG_MAP_LIST),
    Registration::new(CORE, "Secret", &CORE_V1_SECRET),
    Registration::new(CORE, "SecretList", &CORE_V1_SECRET_LIST),
    Registration::new(CORE, "Namespace", &CORE_V1_NAMESPACE),
    Registration::new(CORE, "NamespaceList", &CORE_V1_NAMESPACE_LIST),
    Registration::new(CORE, "ServiceAccount", &CORE_V1_SERVICE_ACCOUNT),
    Registration::new(CORE, "ServiceAccountList", &CORE_V1_SERVICE_ACCOUNT_LIST),
    Registration::new(CORE, "Event", &CORE_V1_EVENT),
    Registration::new(CORE, "EventList", &CORE_V1_EVENT_LIST),
    Registration::new(CORE, "PodTemplate", &CORE_V1_POD_TEMPLATE),
    Registration::new(CORE, "PodTemplateList", &CORE_V1_POD_TEMPLATE_LIST),
    Registration::new(CORE, "Service", &CORE_V1_SERVICE),
    Registration::new(CORE, "ServiceList", &CORE_V1_SERVICE_LIST),
    Registration::new(CORE, "Pod", &CORE_V1_POD),
    Registration::new(CORE, "PodList", &CORE_V1_POD_LIST),
    Registration::new(
        CORE,
        "PersistentVolumeClaim",
        &CORE_V1_PERSISTENT_VOLUME_CLAIM,
    ),
    Registration::new(
        CORE,
        "PersistentVolumeClaimList",
        &CORE_V1_PERSISTENT_VOLUME_CLAIM_LIST,
    ),
    Registration::new(CORE, "ResourceQuota", &CORE_V1_RESOURCE_QUOTA),
    Registration::new(CORE, "ResourceQuotaList", &CORE_V1_RESOURCE_QUOTA_LIST),
    Registration::new(CORE, "Endpoints", &CORE_V1_ENDPOINTS),
    Registration::new(CORE, "EndpointsList", &CORE_V1_ENDPOINTS_LIST),
    Registration::new(EVENTS, "Event", &EVENTS_V1_EVENT),
    Registration::new(EVENTS, "EventList", &EVENTS_V1_EVENT_LIST),
    Registration::new(COORDINATION, "Lease", &COORDINATION_V1_LEASE),
    Registration::new(COORDINATION, "LeaseList", &COORDINATION_V1_LEASE_LIST),
    Registration::new(APPS, "Deployment", &APPS_V1_DEPLOYMENT),
    Registration::new(APPS, "DeploymentList", &APPS_V1_DEPLOYMENT_LIST),
    Registration::new(APPS, "StatefulSet", &APPS_V1_STATEFUL_SET),
    Registration::new(APPS, "StatefulSetList", &APPS_V1_STATEFUL_SET_LIST),
    Registration::new(APPS, "ReplicaSet", &APPS_V1_REPLICA_SET),
    Registration::new(APPS, "ReplicaSetList", &APPS_V1_REPLICA_SET_LIST),
    Registration::new(APPS, "DaemonSet", &APPS_V1_DAEMON_SET),
    Registration::new(APPS, "DaemonSetList", &APPS_V1_DAEMON_SET_LIST),
    Registration::new(
        POLICY,
        "PodDisruptionBudget",
        &POLICY_V1_POD_DISRUPTION_BUDGET,
    ),
    Registration::new(
        POLICY,
        "PodDisruptionBudgetList",
        &POLICY_V1_POD_DISRUPTION_BUDGET_LIST,
    ),
    Registration::new(POLICY, "Eviction", &POLICY_V1_EVICTION),
    Registration::new(DISCOVERY, "EndpointSlice", &DISCOVERY_V1_ENDPOINT_SLICE),
    Registration::new(
        DISCOVERY,
        "EndpointSliceList",
        &DISCOVERY_V1_ENDPOINT_SLICE_LIST,
    ),
    Registration::new(AUTOSCALING, "Scale", &AUTOSCALING_V1_SCALE),
    Registration::new(RBAC, "Role", &RBAC_V1_ROLE),
    Registration::new(RBAC, "RoleList", &RBAC_V1_ROLE_LIST),
    Registration::new(RBAC, "ClusterRole", &RBAC_V1_CLUSTER_ROLE),
    Registration::new(RBAC, "ClusterRoleList", &RBAC_V1_CLUSTER_ROLE_LIST),
    Registration::new(RBAC, "RoleBinding", &RBAC_V1_ROLE_BINDING),
    Registration::new(RBAC, "RoleBindingList", &RBAC_V1_ROLE_BINDING_LIST),
    Registration::new(RBAC, "ClusterRoleBinding", &RBAC_V1_CLUSTER_ROLE_BINDING),
    Registration::new(
        RBAC,
        "ClusterRoleBindingList",
        &RBAC_V1_CLUSTER_ROLE_BINDING_LIST,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "ValidatingWebhookConfiguration",
        &ADMISSIONREGISTRATION_V1_VALIDATING_WEBHOOK_CONFIGURATION,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "ValidatingWebhookConfigurationList",
        &ADMISSIONREGISTRATION_V1_VALIDATING_WEBHOOK_CONFIGURATION_LIST,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "MutatingWebhookConfiguration",
        &ADMISSIONREGISTRATION_V1_MUTATING_WEBHOOK_CONFIGURATION,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "MutatingWebhookConfigurationList",
        &ADMISSIONREGISTRATION_V1_MUTATING_WEBHOOK_CONFIGURATION_LIST,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "ValidatingAdmissionPolicy",
        &ADMISSIONREGISTRATION_V1_VALIDATING_ADMISSION_POLICY,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "ValidatingAdmissionPolicyList",
        &ADMISSIONREGISTRATION_V1_VALIDATING_ADMISSION_POLICY_LIST,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "ValidatingAdmissionPolicyBinding",
        &ADMISSIONREGISTRATION_V1_VALIDATING_ADMISSION_POLICY_BINDING,
    ),
    Registration::new(
        ADMISSIONREGISTRATION,
        "ValidatingAdmissionPolicyBindingList",
        &ADMISSIONREGISTRATION_V1_VALIDATING_ADMISSION_POLICY_BINDING_LIST,
    ),
    Registration::new(
        ADMISSIONREGISTRATION_V1BETA1,
        "MutatingAdmissionPolicy",
        &ADMISSIONREGISTRATION_V1BETA1_MUTATING_ADMISSION_POLICY,
    ),
    Registration::new(
        ADMISSIONREGISTRATION_V1BETA1,
        "MutatingAdmissionPolicyList",
        &ADMISSIONREGISTRATION_V1BETA1_MUTATING_ADMISSION_POLICY_LIST,
    ),
    Registration::new(
        ADMISSIONREGISTRATION_V1BETA1,
        "MutatingAdmissionPolicyBinding",
        &ADMISSIONREGISTRATION_V1BETA1_MUTATING_ADMISSION_POLICY_BINDING,
    ),
    Registration::new(
        ADMISSIONREGISTRATION_V1BETA1,
        "MutatingAdmissionPolicyBindingList",
        &ADMISSIONREGISTRATION_V1BETA1_MUTATING_ADMISSION_POLICY_BINDING_LIST,
    ),
    Registration::new(
        CERTIFICATES,
        "CertificateSigningRequest",
        &CERTIFICATES_V1_CERTIFICATE_SIGNING_REQUEST,
    ),
    Registration::new(
        CERTIFICATES,
        "CertificateSigningRequestList",
        &CERTIFICATES_V1_CERTIFICATE_SIGNING_REQUEST_LIST,
    ),
    Registration::new(
        AUTHENTICATION,
        "TokenReview",
        &AUTHENTICATION_V1_TOKEN_REVIEW,
    ),
    Registration::new(
        SELF_SUBJECT_REVIEW,
        "SelfSubjectReview",
        &AUTHENTICATION_V1_SELF_SUBJECT_REVIEW,
    ),
    Registration::new(
        AUTHENTICATION,
        "TokenRequest",
        &AUTHENTICATION_V1_TOKEN_REQUEST,
    ),
    Registration::new(
        AUTHORIZATION,
        "SubjectAccessReview",
        &AUTHORIZATION_V1_SUBJECT_ACCESS_REVIEW,
    ),
    Registration::new(
        AUTHORIZATION,
        "LocalSubjectAccessReview",
        &AUTHORIZATION_V1_LOCAL_SUBJECT_ACCESS_REVIEW,
    ),
    Registration::new(
        AUTHORIZATION,
        "SelfSubjectAccessReview",
        &AUTHORIZATION_V1_SELF_SUBJECT_ACCESS_REVIEW,
    ),
    Registration::new(
        AUTHORIZATION,
        "SelfSubjectRulesReview",
        &AUTHORIZATION_V1_SELF_SUBJECT_RULES_REVIEW,
    ),
    Registration::new(
        APIEXTENSIONS,
        "CustomResourceDefinition",
        &APIEXTENSIONS_V1_CUSTOM_RESOURCE_DEFINITION,
    ),
    Registration::new(
        APIEXTENSIONS,
        "CustomResourceDefinitionList",
        &APIEXTENSIONS_V1_CUSTOM_RESOURCE_DEFINITION_LIST,
    ),
    Registration::new(
        META,
        "PartialObjectMetadata",
        &META_V1_PARTIAL_OBJECT_METADATA,
    ),
    Registration::new(
        META,
        "PartialObjectMetadataList",
        &META_V1_PARTIAL_OBJECT_METADATA_LIST,
    ),
    Registration::new(EVERY_VERSION, "Status", &META_V1_STATUS),
    Registration::new(EVERY_VERSION, "DeleteOptions", &META_V1_DELETE_OPTIONS),
];

/// The message of a registered kind.
pub(super) fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    REGISTRY
        .iter()
        .find(|r| r.kind == kind && r.api_versions.contains(&api_version))
        .map(|r| r.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::schema::{FieldType, Label};

    /// Every table reachable from the registry or the watch event.
    fn all_messages() -> Vec<&'static Message> {
        let mut pending: Vec<&'static Message> = REGISTRY.iter().map(|r| r.message).collect();
        pending.push(&WATCH_EVENT);
        let mut seen: Vec<&'static Message> = Vec::new();
        while let Some(message) = pending.pop() {
            if seen.iter().any(|m| std::ptr::eq(*m, message)) {
                continue;
            }
            seen.push(message);
            for field in message.fields {
                if let FieldType::Message(nested) = field.ty {
                    pending.push(nested);
                }
            }
        }
        seen
    }

    #[test]
    fn tables_are_in_field_number_order_without_duplicates() {
        for message in all_messages() {
            let numbers: Vec<u32> = message.fields.iter().map(|f| f.number).collect();
            assert!(
                numbers.windows(2).all(|w| w[0] < w[1]),
                "{}: {numbers:?}",
                message.name
            );
            let mut names: Vec<&str> = message.fields.iter().map(|f| f.json).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), message.fields.len(), "{}", message.name);
        }
    }

    /// The JSON keys a message's object holds, its embedded structs' included.
    fn json_keys(message: &'static Message, keys: &mut Vec<&'static str>) {
        for field in message.fields {
            match (field.label, field.ty) {
                (Label::Inline, FieldType::Message(nested)) => json_keys(nested, keys),
                (Label::Inline, _) => {
                    panic!("{}.{} embeds a non-message", message.name, field.json)
                }
                _ => keys.push(field.json),
            }
        }
    }

    #[test]
    fn embedded_structs_do_not_shadow_keys() {
        let mut embedding = 0;
        for message in all_messages() {
            embedding += usize::from(message.fields.iter().any(|f| f.label == Label::Inline));
            let mut keys = Vec::new();
            json_keys(message, &mut keys);
            let count = keys.len();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), count, "{}: {keys:?}", message.name);
        }
        // Volume, Probe, EphemeralContainer and the key selectors and volume sources that embed
        // LocalObjectReference.
        assert!(embedding >= 10, "{embedding}");
    }

    #[test]
    fn registry_has_no_ambiguous_entries() {
        for (i, a) in REGISTRY.iter().enumerate() {
            for b in &REGISTRY[i + 1..] {
                let overlap = a.api_versions.iter().any(|v| b.api_versions.contains(v));
                assert!(
                    !(overlap && a.kind == b.kind),
                    "{} registered twice",
                    a.kind
                );
            }
        }
        assert!(lookup("v1", "ConfigMap").is_some());
        assert!(lookup("coordination.k8s.io/v1", "DeleteOptions").is_some());
        assert!(lookup("apps/v1", "Deployment").is_some());
        assert!(lookup("autoscaling/v1", "DeleteOptions").is_some());
        assert!(lookup("rbac.authorization.k8s.io/v1", "ClusterRoleBindingList").is_some());
        assert!(lookup("v1", "ResourceQuota").is_some());
        assert!(lookup("certificates.k8s.io/v1", "CertificateSigningRequest").is_some());
        assert!(lookup("certificates.k8s.io/v1", "DeleteOptions").is_some());
        assert!(
            lookup(
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfigurationList"
            )
            .is_some()
        );
        assert!(
            lookup(
                "admissionregistration.k8s.io/v1beta1",
                "MutatingAdmissionPolicy"
            )
            .is_some()
        );
        assert!(lookup("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy").is_none());
        assert!(lookup("authorization.k8s.io/v1", "SelfSubjectAccessReview").is_some());
        assert!(lookup("authentication.k8s.io/v1", "Status").is_some());
        assert!(lookup("authorization.k8s.io/v1", "TokenReview").is_none());
        assert!(lookup("v1", "Deployment").is_none());
        assert!(lookup("batch/v1", "Job").is_none());
        assert!(lookup("events.k8s.io/v1", "ConfigMap").is_none());
    }
}
