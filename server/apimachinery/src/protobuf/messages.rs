//! The message tables for every kind this server speaks protobuf for, and the registry mapping
//! `(apiVersion, kind)` to them.
//!
//! Field numbers come from the Kubernetes `generated.proto` files; labels from the Go types
//! (value field, pointer, slice, map). Supporting another kind means adding its tables here
//! and one [`Registration`]; the codec needs no change.

use super::schema::{Field, FieldType as T, Message, Registration};

// ---- meta/v1 ----

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        Field::value(1, "kind", T::String),
        Field::value(3, "name", T::String),
        Field::value(4, "uid", T::String),
        Field::value(5, "apiVersion", T::String),
        Field::optional(6, "controller", T::Bool),
        Field::optional(7, "blockOwnerDeletion", T::Bool),
    ],
};

static MANAGED_FIELDS_ENTRY: Message = Message {
    name: "ManagedFieldsEntry",
    fields: &[
        Field::value(1, "manager", T::String),
        Field::value(2, "operation", T::String),
        Field::value(3, "apiVersion", T::String),
        Field::optional(4, "time", T::Time),
        Field::value(6, "fieldsType", T::String),
        Field::optional(7, "fieldsV1", T::FieldsV1),
        Field::value(8, "subresource", T::String),
    ],
};

static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "generateName", T::String),
        Field::value(3, "namespace", T::String),
        Field::value(4, "selfLink", T::String),
        Field::value(5, "uid", T::String),
        Field::value(6, "resourceVersion", T::String),
        Field::value(7, "generation", T::Int64),
        Field::value(8, "creationTimestamp", T::Time),
        Field::optional(9, "deletionTimestamp", T::Time),
        Field::optional(10, "deletionGracePeriodSeconds", T::Int64),
        Field::map(11, "labels", T::String),
        Field::map(12, "annotations", T::String),
        Field::repeated(13, "ownerReferences", T::Message(&OWNER_REFERENCE)),
        Field::repeated(14, "finalizers", T::String),
        Field::repeated(17, "managedFields", T::Message(&MANAGED_FIELDS_ENTRY)),
    ],
};

static SHARD_INFO: Message = Message {
    name: "ShardInfo",
    fields: &[Field::value(1, "selector", T::String)],
};

static LIST_META: Message = Message {
    name: "ListMeta",
    fields: &[
        Field::value(1, "selfLink", T::String),
        Field::value(2, "resourceVersion", T::String),
        Field::value(3, "continue", T::String),
        Field::optional(4, "remainingItemCount", T::Int64),
        Field::optional(5, "shardInfo", T::Message(&SHARD_INFO)),
    ],
};

static STATUS_CAUSE: Message = Message {
    name: "StatusCause",
    fields: &[
        Field::value(1, "reason", T::String),
        Field::value(2, "message", T::String),
        Field::value(3, "field", T::String),
    ],
};

static STATUS_DETAILS: Message = Message {
    name: "StatusDetails",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "group", T::String),
        Field::value(3, "kind", T::String),
        Field::repeated(4, "causes", T::Message(&STATUS_CAUSE)),
        Field::value(5, "retryAfterSeconds", T::Int32),
        Field::value(6, "uid", T::String),
    ],
};

static STATUS: Message = Message {
    name: "Status",
    fields: &[
        Field::value(1, "metadata", T::Message(&LIST_META)),
        Field::value(2, "status", T::String),
        Field::value(3, "message", T::String),
        Field::value(4, "reason", T::String),
        Field::optional(5, "details", T::Message(&STATUS_DETAILS)),
        Field::value(6, "code", T::Int32),
    ],
};

static PRECONDITIONS: Message = Message {
    name: "Preconditions",
    fields: &[
        Field::optional(1, "uid", T::String),
        Field::optional(2, "resourceVersion", T::String),
    ],
};

static DELETE_OPTIONS: Message = Message {
    name: "DeleteOptions",
    fields: &[
        Field::optional(1, "gracePeriodSeconds", T::Int64),
        Field::optional(2, "preconditions", T::Message(&PRECONDITIONS)),
        Field::optional(3, "orphanDependents", T::Bool),
        Field::optional(4, "propagationPolicy", T::String),
        Field::repeated(5, "dryRun", T::String),
        Field::optional(
            6,
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            T::Bool,
        ),
    ],
};

/// `meta.v1.WatchEvent`, one frame of a protobuf watch stream (never enveloped itself).
pub(super) static WATCH_EVENT: Message = Message {
    name: "WatchEvent",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "object", T::Object),
    ],
};

// ---- core/v1 ----

static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        Field::value(1, "kind", T::String),
        Field::value(2, "namespace", T::String),
        Field::value(3, "name", T::String),
        Field::value(4, "uid", T::String),
        Field::value(5, "apiVersion", T::String),
        Field::value(6, "resourceVersion", T::String),
        Field::value(7, "fieldPath", T::String),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[Field::value(1, "name", T::String)],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::map(2, "data", T::String),
        Field::map(3, "binaryData", T::Bytes),
        Field::optional(4, "immutable", T::Bool),
    ],
};

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::map(2, "data", T::Bytes),
        Field::value(3, "type", T::String),
        Field::map(4, "stringData", T::String),
        Field::optional(5, "immutable", T::Bool),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[Field::repeated(1, "finalizers", T::String)],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(4, "lastTransitionTime", T::Time),
        Field::value(5, "reason", T::String),
        Field::value(6, "message", T::String),
    ],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        Field::value(1, "phase", T::String),
        Field::repeated(2, "conditions", T::Message(&NAMESPACE_CONDITION)),
    ],
};

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::value(2, "spec", T::Message(&NAMESPACE_SPEC)),
        Field::value(3, "status", T::Message(&NAMESPACE_STATUS)),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::repeated(2, "secrets", T::Message(&OBJECT_REFERENCE)),
        Field::repeated(3, "imagePullSecrets", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::optional(4, "automountServiceAccountToken", T::Bool),
    ],
};

static EVENT_SOURCE: Message = Message {
    name: "EventSource",
    fields: &[
        Field::value(1, "component", T::String),
        Field::value(2, "host", T::String),
    ],
};

/// core/v1 and events.k8s.io/v1 `EventSeries` are the same message.
static EVENT_SERIES: Message = Message {
    name: "EventSeries",
    fields: &[
        Field::value(1, "count", T::Int32),
        Field::value(2, "lastObservedTime", T::MicroTime),
    ],
};

static CORE_EVENT: Message = Message {
    name: "Event",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::value(2, "involvedObject", T::Message(&OBJECT_REFERENCE)),
        Field::value(3, "reason", T::String),
        Field::value(4, "message", T::String),
        Field::value(5, "source", T::Message(&EVENT_SOURCE)),
        Field::value(6, "firstTimestamp", T::Time),
        Field::value(7, "lastTimestamp", T::Time),
        Field::value(8, "count", T::Int32),
        Field::value(9, "type", T::String),
        Field::value(10, "eventTime", T::MicroTime),
        Field::optional(11, "series", T::Message(&EVENT_SERIES)),
        Field::value(12, "action", T::String),
        Field::optional(13, "related", T::Message(&OBJECT_REFERENCE)),
        Field::value(14, "reportingComponent", T::String),
        Field::value(15, "reportingInstance", T::String),
    ],
};

// ---- events.k8s.io/v1 ----

static EVENTS_EVENT: Message = Message {
    name: "Event",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::value(2, "eventTime", T::MicroTime),
        Field::optional(3, "series", T::Message(&EVENT_SERIES)),
        Field::value(4, "reportingController", T::String),
        Field::value(5, "reportingInstance", T::String),
        Field::value(6, "action", T::String),
        Field::value(7, "reason", T::String),
        Field::value(8, "regarding", T::Message(&OBJECT_REFERENCE)),
        Field::optional(9, "related", T::Message(&OBJECT_REFERENCE)),
        Field::value(10, "note", T::String),
        Field::value(11, "type", T::String),
        Field::value(12, "deprecatedSource", T::Message(&EVENT_SOURCE)),
        Field::value(13, "deprecatedFirstTimestamp", T::Time),
        Field::value(14, "deprecatedLastTimestamp", T::Time),
        Field::value(15, "deprecatedCount", T::Int32),
    ],
};

// ---- coordination.k8s.io/v1 ----

static LEASE_SPEC: Message = Message {
    name: "LeaseSpec",
    fields: &[
        Field::optional(1, "holderIdentity", T::String),
        Field::optional(2, "leaseDurationSeconds", T::Int32),
        Field::optional(3, "acquireTime", T::MicroTime),
        Field::optional(4, "renewTime", T::MicroTime),
        Field::optional(5, "leaseTransitions", T::Int32),
        Field::optional(6, "strategy", T::String),
        Field::optional(7, "preferredHolder", T::String),
    ],
};

static LEASE: Message = Message {
    name: "Lease",
    fields: &[
        Field::value(1, "metadata", T::Message(&OBJECT_META)),
        Field::value(2, "spec", T::Message(&LEASE_SPEC)),
    ],
};

// ---- lists ----

/// A `<Kind>List` table: `{1: ListMeta metadata, 2: repeated item}`, the same for every kind.
macro_rules! list_of {
    ($name:literal, $item:expr) => {
        Message {
            name: $name,
            fields: &[
                Field::value(1, "metadata", T::Message(&LIST_META)),
                Field::repeated(2, "items", T::Message(&$item)),
            ],
        }
    };
}

static CONFIG_MAP_LIST: Message = list_of!("ConfigMapList", CONFIG_MAP);
static SECRET_LIST: Message = list_of!("SecretList", SECRET);
static NAMESPACE_LIST: Message = list_of!("NamespaceList", NAMESPACE);
static SERVICE_ACCOUNT_LIST: Message = list_of!("ServiceAccountList", SERVICE_ACCOUNT);
static CORE_EVENT_LIST: Message = list_of!("EventList", CORE_EVENT);
static EVENTS_EVENT_LIST: Message = list_of!("EventList", EVENTS_EVENT);
static LEASE_LIST: Message = list_of!("LeaseList", LEASE);

// ---- registry ----

const CORE: &[&str] = &["v1"];
const EVENTS: &[&str] = &["events.k8s.io/v1"];
const COORDINATION: &[&str] = &["coordination.k8s.io/v1"];
/// `meta/v1` kinds are registered into every served group version (Go's
/// `metav1.AddToGroupVersion`), so a typed client deleting a Lease sends
/// `coordination.k8s.io/v1 DeleteOptions`.
const EVERY_VERSION: &[&str] = &[
    "v1",
    "events.k8s.io/v1",
    "coordination.k8s.io/v1",
    "meta.k8s.io/v1",
];

pub(super) static REGISTRY: &[Registration] = &[
    Registration::new(CORE, "ConfigMap", &CONFIG_MAP),
    Registration::new(CORE, "ConfigMapList", &CONFIG_MAP_LIST),
    Registration::new(CORE, "Secret", &SECRET),
    Registration::new(CORE, "SecretList", &SECRET_LIST),
    Registration::new(CORE, "Namespace", &NAMESPACE),
    Registration::new(CORE, "NamespaceList", &NAMESPACE_LIST),
    Registration::new(CORE, "ServiceAccount", &SERVICE_ACCOUNT),
    Registration::new(CORE, "ServiceAccountList", &SERVICE_ACCOUNT_LIST),
    Registration::new(CORE, "Event", &CORE_EVENT),
    Registration::new(CORE, "EventList", &CORE_EVENT_LIST),
    Registration::new(EVENTS, "Event", &EVENTS_EVENT),
    Registration::new(EVENTS, "EventList", &EVENTS_EVENT_LIST),
    Registration::new(COORDINATION, "Lease", &LEASE),
    Registration::new(COORDINATION, "LeaseList", &LEASE_LIST),
    Registration::new(EVERY_VERSION, "Status", &STATUS),
    Registration::new(EVERY_VERSION, "DeleteOptions", &DELETE_OPTIONS),
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
    use crate::protobuf::schema::FieldType;

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
        assert!(lookup("apps/v1", "Deployment").is_none());
        assert!(lookup("events.k8s.io/v1", "ConfigMap").is_none());
    }
}
