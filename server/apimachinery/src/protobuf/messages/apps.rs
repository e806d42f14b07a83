//! Tables for apps/v1: Deployment, StatefulSet, ReplicaSet, DaemonSet.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35) plus the fields 1.36 added (listed in
//! the `protobuf` module doc); see `messages` for how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        Field::optional(1, "maxUnavailable", T::IntOrString),
        Field::optional(2, "maxSurge", T::IntOrString),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        Field::value(1, "type", T::String),
        Field::optional(2, "rollingUpdate", T::Message(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        Field::optional(1, "replicas", T::Int32),
        Field::optional(2, "selector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::value(3, "template", T::Message(&super::core::POD_TEMPLATE_SPEC)),
        Field::value(4, "strategy", T::Message(&DEPLOYMENT_STRATEGY)),
        Field::value(5, "minReadySeconds", T::Int32),
        Field::optional(6, "revisionHistoryLimit", T::Int32),
        Field::value(7, "paused", T::Bool),
        Field::optional(9, "progressDeadlineSeconds", T::Int32),
    ],
};

static DEPLOYMENT_CONDITION: Message = Message {
    name: "DeploymentCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(4, "reason", T::String),
        Field::value(5, "message", T::String),
        Field::value(6, "lastUpdateTime", T::Time),
        Field::value(7, "lastTransitionTime", T::Time),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        Field::value(1, "observedGeneration", T::Int64),
        Field::value(2, "replicas", T::Int32),
        Field::value(3, "updatedReplicas", T::Int32),
        Field::value(4, "availableReplicas", T::Int32),
        Field::value(5, "unavailableReplicas", T::Int32),
        Field::repeated(6, "conditions", T::Message(&DEPLOYMENT_CONDITION)),
        Field::value(7, "readyReplicas", T::Int32),
        Field::optional(8, "collisionCount", T::Int32),
        Field::optional(9, "terminatingReplicas", T::Int32),
    ],
};

pub(super) static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&DEPLOYMENT_SPEC)),
        Field::value(3, "status", T::Message(&DEPLOYMENT_STATUS)),
    ],
};

static ROLLING_UPDATE_STATEFUL_SET_STRATEGY: Message = Message {
    name: "RollingUpdateStatefulSetStrategy",
    fields: &[
        Field::optional(1, "partition", T::Int32),
        Field::optional(2, "maxUnavailable", T::IntOrString),
    ],
};

static STATEFUL_SET_UPDATE_STRATEGY: Message = Message {
    name: "StatefulSetUpdateStrategy",
    fields: &[
        Field::value(1, "type", T::String),
        Field::optional(
            2,
            "rollingUpdate",
            T::Message(&ROLLING_UPDATE_STATEFUL_SET_STRATEGY),
        ),
    ],
};

static STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY: Message = Message {
    name: "StatefulSetPersistentVolumeClaimRetentionPolicy",
    fields: &[
        Field::value(1, "whenDeleted", T::String),
        Field::value(2, "whenScaled", T::String),
    ],
};

static STATEFUL_SET_ORDINALS: Message = Message {
    name: "StatefulSetOrdinals",
    fields: &[Field::value(1, "start", T::Int32)],
};

static STATEFUL_SET_SPEC: Message = Message {
    name: "StatefulSetSpec",
    fields: &[
        Field::optional(1, "replicas", T::Int32),
        Field::optional(2, "selector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::value(3, "template", T::Message(&super::core::POD_TEMPLATE_SPEC)),
        Field::repeated(
            4,
            "volumeClaimTemplates",
            T::Message(&super::core::PERSISTENT_VOLUME_CLAIM),
        ),
        Field::value(5, "serviceName", T::String),
        Field::value(6, "podManagementPolicy", T::String),
        Field::value(
            7,
            "updateStrategy",
            T::Message(&STATEFUL_SET_UPDATE_STRATEGY),
        ),
        Field::optional(8, "revisionHistoryLimit", T::Int32),
        Field::value(9, "minReadySeconds", T::Int32),
        Field::optional(
            10,
            "persistentVolumeClaimRetentionPolicy",
            T::Message(&STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY),
        ),
        Field::optional(11, "ordinals", T::Message(&STATEFUL_SET_ORDINALS)),
    ],
};

static STATEFUL_SET_CONDITION: Message = Message {
    name: "StatefulSetCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "lastTransitionTime", T::Time),
        Field::value(4, "reason", T::String),
        Field::value(5, "message", T::String),
    ],
};

static STATEFUL_SET_STATUS: Message = Message {
    name: "StatefulSetStatus",
    fields: &[
        Field::value(1, "observedGeneration", T::Int64),
        Field::value(2, "replicas", T::Int32),
        Field::value(3, "readyReplicas", T::Int32),
        Field::value(4, "currentReplicas", T::Int32),
        Field::value(5, "updatedReplicas", T::Int32),
        Field::value(6, "currentRevision", T::String),
        Field::value(7, "updateRevision", T::String),
        Field::optional(9, "collisionCount", T::Int32),
        Field::repeated(10, "conditions", T::Message(&STATEFUL_SET_CONDITION)),
        Field::value(11, "availableReplicas", T::Int32),
    ],
};

pub(super) static STATEFUL_SET: Message = Message {
    name: "StatefulSet",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&STATEFUL_SET_SPEC)),
        Field::value(3, "status", T::Message(&STATEFUL_SET_STATUS)),
    ],
};

static REPLICA_SET_SPEC: Message = Message {
    name: "ReplicaSetSpec",
    fields: &[
        Field::optional(1, "replicas", T::Int32),
        Field::optional(2, "selector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::value(3, "template", T::Message(&super::core::POD_TEMPLATE_SPEC)),
        Field::value(4, "minReadySeconds", T::Int32),
    ],
};

static REPLICA_SET_CONDITION: Message = Message {
    name: "ReplicaSetCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "lastTransitionTime", T::Time),
        Field::value(4, "reason", T::String),
        Field::value(5, "message", T::String),
    ],
};

static REPLICA_SET_STATUS: Message = Message {
    name: "ReplicaSetStatus",
    fields: &[
        Field::value(1, "replicas", T::Int32),
        Field::value(2, "fullyLabeledReplicas", T::Int32),
        Field::value(3, "observedGeneration", T::Int64),
        Field::value(4, "readyReplicas", T::Int32),
        Field::value(5, "availableReplicas", T::Int32),
        Field::repeated(6, "conditions", T::Message(&REPLICA_SET_CONDITION)),
        Field::optional(7, "terminatingReplicas", T::Int32),
    ],
};

pub(super) static REPLICA_SET: Message = Message {
    name: "ReplicaSet",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&REPLICA_SET_SPEC)),
        Field::value(3, "status", T::Message(&REPLICA_SET_STATUS)),
    ],
};

static ROLLING_UPDATE_DAEMON_SET: Message = Message {
    name: "RollingUpdateDaemonSet",
    fields: &[
        Field::optional(1, "maxUnavailable", T::IntOrString),
        Field::optional(2, "maxSurge", T::IntOrString),
    ],
};

static DAEMON_SET_UPDATE_STRATEGY: Message = Message {
    name: "DaemonSetUpdateStrategy",
    fields: &[
        Field::value(1, "type", T::String),
        Field::optional(2, "rollingUpdate", T::Message(&ROLLING_UPDATE_DAEMON_SET)),
    ],
};

static DAEMON_SET_SPEC: Message = Message {
    name: "DaemonSetSpec",
    fields: &[
        Field::optional(1, "selector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::value(2, "template", T::Message(&super::core::POD_TEMPLATE_SPEC)),
        Field::value(3, "updateStrategy", T::Message(&DAEMON_SET_UPDATE_STRATEGY)),
        Field::value(4, "minReadySeconds", T::Int32),
        Field::optional(6, "revisionHistoryLimit", T::Int32),
    ],
};

static DAEMON_SET_CONDITION: Message = Message {
    name: "DaemonSetCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "lastTransitionTime", T::Time),
        Field::value(4, "reason", T::String),
        Field::value(5, "message", T::String),
    ],
};

static DAEMON_SET_STATUS: Message = Message {
    name: "DaemonSetStatus",
    fields: &[
        Field::value(1, "currentNumberScheduled", T::Int32),
        Field::value(2, "numberMisscheduled", T::Int32),
        Field::value(3, "desiredNumberScheduled", T::Int32),
        Field::value(4, "numberReady", T::Int32),
        Field::value(5, "observedGeneration", T::Int64),
        Field::value(6, "updatedNumberScheduled", T::Int32),
        Field::value(7, "numberAvailable", T::Int32),
        Field::value(8, "numberUnavailable", T::Int32),
        Field::optional(9, "collisionCount", T::Int32),
        Field::repeated(10, "conditions", T::Message(&DAEMON_SET_CONDITION)),
    ],
};

pub(super) static DAEMON_SET: Message = Message {
    name: "DaemonSet",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&DAEMON_SET_SPEC)),
        Field::value(3, "status", T::Message(&DAEMON_SET_STATUS)),
    ],
};
