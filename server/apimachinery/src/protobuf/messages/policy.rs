//! Tables for policy/v1: PodDisruptionBudget, and Eviction (what `kubectl drain` posts).
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35) plus the fields 1.36 added (listed in
//! the `protobuf` module doc); see `messages` for how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "PodDisruptionBudgetSpec",
    fields: &[
        Field::optional(1, "minAvailable", T::IntOrString),
        Field::optional(2, "selector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::optional(3, "maxUnavailable", T::IntOrString),
        Field::optional(4, "unhealthyPodEvictionPolicy", T::String),
    ],
};

static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "PodDisruptionBudgetStatus",
    fields: &[
        Field::value(1, "observedGeneration", T::Int64),
        Field::map(2, "disruptedPods", T::Time),
        Field::value(3, "disruptionsAllowed", T::Int32),
        Field::value(4, "currentHealthy", T::Int32),
        Field::value(5, "desiredHealthy", T::Int32),
        Field::value(6, "expectedPods", T::Int32),
        Field::repeated(7, "conditions", T::Message(&super::meta::CONDITION)),
    ],
};

pub(super) static POD_DISRUPTION_BUDGET: Message = Message {
    name: "PodDisruptionBudget",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&POD_DISRUPTION_BUDGET_SPEC)),
        Field::value(3, "status", T::Message(&POD_DISRUPTION_BUDGET_STATUS)),
    ],
};

pub(super) static EVICTION: Message = Message {
    name: "Eviction",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::optional(2, "deleteOptions", T::Message(&super::meta::DELETE_OPTIONS)),
    ],
};
