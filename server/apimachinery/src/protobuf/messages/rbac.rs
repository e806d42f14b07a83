//! Tables for rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding, what `kubectl create role|clusterrole|rolebinding|clusterrolebinding`
//! sends.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35, unchanged in v0.36); see `messages` for
//! how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static POLICY_RULE: Message = Message {
    name: "PolicyRule",
    fields: &[
        Field::repeated(1, "verbs", T::String),
        Field::repeated(2, "apiGroups", T::String),
        Field::repeated(3, "resources", T::String),
        Field::repeated(4, "resourceNames", T::String),
        Field::repeated(5, "nonResourceURLs", T::String),
    ],
};

static AGGREGATION_RULE: Message = Message {
    name: "AggregationRule",
    fields: &[Field::repeated(
        1,
        "clusterRoleSelectors",
        T::Message(&super::meta::LABEL_SELECTOR),
    )],
};

static SUBJECT: Message = Message {
    name: "Subject",
    fields: &[
        Field::value(1, "kind", T::String),
        Field::value(2, "apiGroup", T::String),
        Field::value(3, "name", T::String),
        Field::value(4, "namespace", T::String),
    ],
};

static ROLE_REF: Message = Message {
    name: "RoleRef",
    fields: &[
        Field::value(1, "apiGroup", T::String),
        Field::value(2, "kind", T::String),
        Field::value(3, "name", T::String),
    ],
};

pub(super) static ROLE: Message = Message {
    name: "Role",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "rules", T::Message(&POLICY_RULE)),
    ],
};

pub(super) static CLUSTER_ROLE: Message = Message {
    name: "ClusterRole",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "rules", T::Message(&POLICY_RULE)),
        Field::optional(3, "aggregationRule", T::Message(&AGGREGATION_RULE)),
    ],
};

pub(super) static ROLE_BINDING: Message = Message {
    name: "RoleBinding",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "subjects", T::Message(&SUBJECT)),
        Field::value(3, "roleRef", T::Message(&ROLE_REF)),
    ],
};

pub(super) static CLUSTER_ROLE_BINDING: Message = Message {
    name: "ClusterRoleBinding",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "subjects", T::Message(&SUBJECT)),
        Field::value(3, "roleRef", T::Message(&ROLE_REF)),
    ],
};
