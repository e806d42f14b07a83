//! The message tables for every kind this server speaks protobuf for, and the registry mapping
//! `(apiVersion, kind)` to them.
//!
//! Field numbers come from the Kubernetes `generated.proto` files; labels from the Go types
//! (value field, pointer, slice, map, embedded struct). One module per API group version holds
//! its tables; a table references messages of other groups through their modules (apps/v1
//! pod templates are core/v1's). Supporting another kind means adding its tables and one
//! [`Registration`]; the codec needs no change.
//!
//! The workload kinds (apps/v1, core/v1 Service, Pod, PersistentVolumeClaim, Endpoints,
//! policy/v1, discovery.k8s.io/v1) are served through CRDs here, but typed clients
//! (`kubectl create deployment|service|poddisruptionbudget`, controllers) still send and expect
//! their protobuf form, so their tables cover every field of the Go types. The same holds for
//! RBAC (`kubectl create role|rolebinding|...`) and for the authentication and authorization
//! reviews (`kubectl auth can-i|whoami`, `kubectl create token`), requests the server answers
//! with an object of the same kind.

mod apiextensions;
mod apps;
mod authentication;
mod authorization;
mod autoscaling;
mod coordination;
mod core;
mod discovery;
mod events;
mod meta;
mod policy;
mod rbac;

use super::schema::{Field, FieldType as T, Message, Registration};

pub(super) use meta::WATCH_EVENT;

// ---- lists ----

/// A `<Kind>List` table: `{1: ListMeta metadata, 2: repeated item}`, the same for every kind.
macro_rules! list_of {
    ($name:literal, $item:expr) => {
        Message {
            name: $name,
            fields: &[
                Field::value(1, "metadata", T::Message(&meta::LIST_META)),
                Field::repeated(2, "items", T::Message(&$item)),
            ],
        }
    };
}

static POD_TEMPLATE_LIST: Message = list_of!("PodTemplateList", core::POD_TEMPLATE);
static CUSTOM_RESOURCE_DEFINITION_LIST: Message = list_of!(
    "CustomResourceDefinitionList",
    apiextensions::CUSTOM_RESOURCE_DEFINITION
);
static CONFIG_MAP_LIST: Message = list_of!("ConfigMapList", core::CONFIG_MAP);
static SECRET_LIST: Message = list_of!("SecretList", core::SECRET);
static NAMESPACE_LIST: Message = list_of!("NamespaceList", core::NAMESPACE);
static SERVICE_ACCOUNT_LIST: Message = list_of!("ServiceAccountList", core::SERVICE_ACCOUNT);
static CORE_EVENT_LIST: Message = list_of!("EventList", core::EVENT);
static SERVICE_LIST: Message = list_of!("ServiceList", core::SERVICE);
static POD_LIST: Message = list_of!("PodList", core::POD);
static PERSISTENT_VOLUME_CLAIM_LIST: Message =
    list_of!("PersistentVolumeClaimList", core::PERSISTENT_VOLUME_CLAIM);
static ENDPOINTS_LIST: Message = list_of!("EndpointsList", core::ENDPOINTS);
static EVENTS_EVENT_LIST: Message = list_of!("EventList", events::EVENT);
static LEASE_LIST: Message = list_of!("LeaseList", coordination::LEASE);
static DEPLOYMENT_LIST: Message = list_of!("DeploymentList", apps::DEPLOYMENT);
static STATEFUL_SET_LIST: Message = list_of!("StatefulSetList", apps::STATEFUL_SET);
static REPLICA_SET_LIST: Message = list_of!("ReplicaSetList", apps::REPLICA_SET);
static DAEMON_SET_LIST: Message = list_of!("DaemonSetList", apps::DAEMON_SET);
static POD_DISRUPTION_BUDGET_LIST: Message =
    list_of!("PodDisruptionBudgetList", policy::POD_DISRUPTION_BUDGET);
static ENDPOINT_SLICE_LIST: Message = list_of!("EndpointSliceList", discovery::ENDPOINT_SLICE);
static ROLE_LIST: Message = list_of!("RoleList", rbac::ROLE);
static CLUSTER_ROLE_LIST: Message = list_of!("ClusterRoleList", rbac::CLUSTER_ROLE);
static ROLE_BINDING_LIST: Message = list_of!("RoleBindingList", rbac::ROLE_BINDING);
static CLUSTER_ROLE_BINDING_LIST: Message =
    list_of!("ClusterRoleBindingList", rbac::CLUSTER_ROLE_BINDING);

// ---- registry ----

const CORE: &[&str] = &["v1"];
const EVENTS: &[&str] = &["events.k8s.io/v1"];
const COORDINATION: &[&str] = &["coordination.k8s.io/v1"];
const APPS: &[&str] = &["apps/v1"];
const POLICY: &[&str] = &["policy/v1"];
const DISCOVERY: &[&str] = &["discovery.k8s.io/v1"];
const AUTOSCALING: &[&str] = &["autoscaling/v1"];
const RBAC: &[&str] = &["rbac.authorization.k8s.io/v1"];
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
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    "meta.k8s.io/v1",
];

pub(super) static REGISTRY: &[Registration] = &[
    Registration::new(CORE, "ConfigMap", &core::CONFIG_MAP),
    Registration::new(CORE, "ConfigMapList", &CONFIG_MAP_LIST),
    Registration::new(CORE, "Secret", &core::SECRET),
    Registration::new(CORE, "SecretList", &SECRET_LIST),
    Registration::new(CORE, "Namespace", &core::NAMESPACE),
    Registration::new(CORE, "NamespaceList", &NAMESPACE_LIST),
    Registration::new(CORE, "ServiceAccount", &core::SERVICE_ACCOUNT),
    Registration::new(CORE, "ServiceAccountList", &SERVICE_ACCOUNT_LIST),
    Registration::new(CORE, "Event", &core::EVENT),
    Registration::new(CORE, "EventList", &CORE_EVENT_LIST),
    Registration::new(CORE, "PodTemplate", &core::POD_TEMPLATE),
    Registration::new(CORE, "PodTemplateList", &POD_TEMPLATE_LIST),
    Registration::new(CORE, "Service", &core::SERVICE),
    Registration::new(CORE, "ServiceList", &SERVICE_LIST),
    Registration::new(CORE, "Pod", &core::POD),
    Registration::new(CORE, "PodList", &POD_LIST),
    Registration::new(
        CORE,
        "PersistentVolumeClaim",
        &core::PERSISTENT_VOLUME_CLAIM,
    ),
    Registration::new(
        CORE,
        "PersistentVolumeClaimList",
        &PERSISTENT_VOLUME_CLAIM_LIST,
    ),
    Registration::new(CORE, "Endpoints", &core::ENDPOINTS),
    Registration::new(CORE, "EndpointsList", &ENDPOINTS_LIST),
    Registration::new(EVENTS, "Event", &events::EVENT),
    Registration::new(EVENTS, "EventList", &EVENTS_EVENT_LIST),
    Registration::new(COORDINATION, "Lease", &coordination::LEASE),
    Registration::new(COORDINATION, "LeaseList", &LEASE_LIST),
    Registration::new(APPS, "Deployment", &apps::DEPLOYMENT),
    Registration::new(APPS, "DeploymentList", &DEPLOYMENT_LIST),
    Registration::new(APPS, "StatefulSet", &apps::STATEFUL_SET),
    Registration::new(APPS, "StatefulSetList", &STATEFUL_SET_LIST),
    Registration::new(APPS, "ReplicaSet", &apps::REPLICA_SET),
    Registration::new(APPS, "ReplicaSetList", &REPLICA_SET_LIST),
    Registration::new(APPS, "DaemonSet", &apps::DAEMON_SET),
    Registration::new(APPS, "DaemonSetList", &DAEMON_SET_LIST),
    Registration::new(
        POLICY,
        "PodDisruptionBudget",
        &policy::POD_DISRUPTION_BUDGET,
    ),
    Registration::new(
        POLICY,
        "PodDisruptionBudgetList",
        &POD_DISRUPTION_BUDGET_LIST,
    ),
    Registration::new(POLICY, "Eviction", &policy::EVICTION),
    Registration::new(DISCOVERY, "EndpointSlice", &discovery::ENDPOINT_SLICE),
    Registration::new(DISCOVERY, "EndpointSliceList", &ENDPOINT_SLICE_LIST),
    Registration::new(AUTOSCALING, "Scale", &autoscaling::SCALE),
    Registration::new(RBAC, "Role", &rbac::ROLE),
    Registration::new(RBAC, "RoleList", &ROLE_LIST),
    Registration::new(RBAC, "ClusterRole", &rbac::CLUSTER_ROLE),
    Registration::new(RBAC, "ClusterRoleList", &CLUSTER_ROLE_LIST),
    Registration::new(RBAC, "RoleBinding", &rbac::ROLE_BINDING),
    Registration::new(RBAC, "RoleBindingList", &ROLE_BINDING_LIST),
    Registration::new(RBAC, "ClusterRoleBinding", &rbac::CLUSTER_ROLE_BINDING),
    Registration::new(RBAC, "ClusterRoleBindingList", &CLUSTER_ROLE_BINDING_LIST),
    Registration::new(AUTHENTICATION, "TokenReview", &authentication::TOKEN_REVIEW),
    Registration::new(
        SELF_SUBJECT_REVIEW,
        "SelfSubjectReview",
        &authentication::SELF_SUBJECT_REVIEW,
    ),
    Registration::new(
        AUTHENTICATION,
        "TokenRequest",
        &authentication::TOKEN_REQUEST,
    ),
    Registration::new(
        AUTHORIZATION,
        "SubjectAccessReview",
        &authorization::SUBJECT_ACCESS_REVIEW,
    ),
    Registration::new(
        AUTHORIZATION,
        "LocalSubjectAccessReview",
        &authorization::LOCAL_SUBJECT_ACCESS_REVIEW,
    ),
    Registration::new(
        AUTHORIZATION,
        "SelfSubjectAccessReview",
        &authorization::SELF_SUBJECT_ACCESS_REVIEW,
    ),
    Registration::new(
        AUTHORIZATION,
        "SelfSubjectRulesReview",
        &authorization::SELF_SUBJECT_RULES_REVIEW,
    ),
    Registration::new(
        APIEXTENSIONS,
        "CustomResourceDefinition",
        &apiextensions::CUSTOM_RESOURCE_DEFINITION,
    ),
    Registration::new(
        APIEXTENSIONS,
        "CustomResourceDefinitionList",
        &CUSTOM_RESOURCE_DEFINITION_LIST,
    ),
    Registration::new(
        META,
        "PartialObjectMetadata",
        &meta::PARTIAL_OBJECT_METADATA,
    ),
    Registration::new(
        META,
        "PartialObjectMetadataList",
        &meta::PARTIAL_OBJECT_METADATA_LIST,
    ),
    Registration::new(EVERY_VERSION, "Status", &meta::STATUS),
    Registration::new(EVERY_VERSION, "DeleteOptions", &meta::DELETE_OPTIONS),
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
        assert!(lookup("authorization.k8s.io/v1", "SelfSubjectAccessReview").is_some());
        assert!(lookup("authentication.k8s.io/v1", "Status").is_some());
        assert!(lookup("authorization.k8s.io/v1", "TokenReview").is_none());
        assert!(lookup("v1", "Deployment").is_none());
        assert!(lookup("batch/v1", "Job").is_none());
        assert!(lookup("events.k8s.io/v1", "ConfigMap").is_none());
    }
}
