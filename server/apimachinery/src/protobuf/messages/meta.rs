//! Tables for meta/v1 (`k8s.io/apimachinery/pkg/apis/meta/v1`): object and list metadata,
//! label and field selectors, conditions, and the kinds every group version carries (Status,
//! DeleteOptions, WatchEvent).

use crate::protobuf::schema::{Field, FieldType as T, Message};

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

pub(super) static OBJECT_META: Message = Message {
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

pub(super) static LIST_META: Message = Message {
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

pub(super) static STATUS: Message = Message {
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

pub(super) static DELETE_OPTIONS: Message = Message {
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
pub(in crate::protobuf) static WATCH_EVENT: Message = Message {
    name: "WatchEvent",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "object", T::Object),
    ],
};

pub(super) static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        Field::value(1, "key", T::String),
        Field::value(2, "operator", T::String),
        Field::repeated(3, "values", T::String),
    ],
};

pub(super) static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        Field::map(1, "matchLabels", T::String),
        Field::repeated(
            2,
            "matchExpressions",
            T::Message(&LABEL_SELECTOR_REQUIREMENT),
        ),
    ],
};

/// `metav1.FieldSelectorRequirement`, one parsed term of a field selector (the
/// `fieldSelector` of authorization/v1 resource attributes).
pub(super) static FIELD_SELECTOR_REQUIREMENT: Message = Message {
    name: "FieldSelectorRequirement",
    fields: &[
        Field::value(1, "key", T::String),
        Field::value(2, "operator", T::String),
        Field::repeated(3, "values", T::String),
    ],
};

/// `metav1.Condition`, the condition type of newer APIs (PodDisruptionBudget, PVC
/// allocation, ...).
pub(super) static CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "observedGeneration", T::Int64),
        Field::value(4, "lastTransitionTime", T::Time),
        Field::value(5, "reason", T::String),
        Field::value(6, "message", T::String),
    ],
};

/// `PartialObjectMetadata`, what metadata-only clients (`metadatainformer`, the garbage
/// collector, `kubectl` for `--output name`) ask for with `as=PartialObjectMetadata`.
pub(super) static PARTIAL_OBJECT_METADATA: Message = Message {
    name: "PartialObjectMetadata",
    fields: &[Field::value(1, "metadata", T::Message(&OBJECT_META))],
};

pub(super) static PARTIAL_OBJECT_METADATA_LIST: Message = Message {
    name: "PartialObjectMetadataList",
    fields: &[
        Field::value(1, "metadata", T::Message(&LIST_META)),
        Field::repeated(2, "items", T::Message(&PARTIAL_OBJECT_METADATA)),
    ],
};
