//! Tables for authorization.k8s.io/v1: the access reviews `kubectl auth can-i` posts
//! (SelfSubjectAccessReview, and SelfSubjectRulesReview for `--list`) and the
//! SubjectAccessReview and LocalSubjectAccessReview that webhooks and controllers post.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35, unchanged in v0.36), field and label
//! selector attributes (1.31+) included; see `messages` for how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static FIELD_SELECTOR_ATTRIBUTES: Message = Message {
    name: "FieldSelectorAttributes",
    fields: &[
        Field::value(1, "rawSelector", T::String),
        Field::repeated(
            2,
            "requirements",
            T::Message(&super::meta::FIELD_SELECTOR_REQUIREMENT),
        ),
    ],
};

static LABEL_SELECTOR_ATTRIBUTES: Message = Message {
    name: "LabelSelectorAttributes",
    fields: &[
        Field::value(1, "rawSelector", T::String),
        Field::repeated(
            2,
            "requirements",
            T::Message(&super::meta::LABEL_SELECTOR_REQUIREMENT),
        ),
    ],
};

static RESOURCE_ATTRIBUTES: Message = Message {
    name: "ResourceAttributes",
    fields: &[
        Field::value(1, "namespace", T::String),
        Field::value(2, "verb", T::String),
        Field::value(3, "group", T::String),
        Field::value(4, "version", T::String),
        Field::value(5, "resource", T::String),
        Field::value(6, "subresource", T::String),
        Field::value(7, "name", T::String),
        Field::optional(8, "fieldSelector", T::Message(&FIELD_SELECTOR_ATTRIBUTES)),
        Field::optional(9, "labelSelector", T::Message(&LABEL_SELECTOR_ATTRIBUTES)),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Message = Message {
    name: "NonResourceAttributes",
    fields: &[
        Field::value(1, "path", T::String),
        Field::value(2, "verb", T::String),
    ],
};

static SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "SubjectAccessReviewSpec",
    fields: &[
        Field::optional(1, "resourceAttributes", T::Message(&RESOURCE_ATTRIBUTES)),
        Field::optional(
            2,
            "nonResourceAttributes",
            T::Message(&NON_RESOURCE_ATTRIBUTES),
        ),
        Field::value(3, "user", T::String),
        Field::repeated(4, "groups", T::String),
        Field::map(5, "extra", T::ExtraValue),
        Field::value(6, "uid", T::String),
    ],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message {
    name: "SubjectAccessReviewStatus",
    fields: &[
        Field::value(1, "allowed", T::Bool),
        Field::value(2, "reason", T::String),
        Field::value(3, "evaluationError", T::String),
        Field::value(4, "denied", T::Bool),
    ],
};

pub(super) static SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "SubjectAccessReview",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SUBJECT_ACCESS_REVIEW_SPEC)),
        Field::value(3, "status", T::Message(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

/// The namespaced twin of SubjectAccessReview: the same spec and status.
pub(super) static LOCAL_SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "LocalSubjectAccessReview",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SUBJECT_ACCESS_REVIEW_SPEC)),
        Field::value(3, "status", T::Message(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        Field::optional(1, "resourceAttributes", T::Message(&RESOURCE_ATTRIBUTES)),
        Field::optional(
            2,
            "nonResourceAttributes",
            T::Message(&NON_RESOURCE_ATTRIBUTES),
        ),
    ],
};

pub(super) static SELF_SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "SelfSubjectAccessReview",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        Field::value(3, "status", T::Message(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

static RESOURCE_RULE: Message = Message {
    name: "ResourceRule",
    fields: &[
        Field::repeated(1, "verbs", T::String),
        Field::repeated(2, "apiGroups", T::String),
        Field::repeated(3, "resources", T::String),
        Field::repeated(4, "resourceNames", T::String),
    ],
};

static NON_RESOURCE_RULE: Message = Message {
    name: "NonResourceRule",
    fields: &[
        Field::repeated(1, "verbs", T::String),
        Field::repeated(2, "nonResourceURLs", T::String),
    ],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Message = Message {
    name: "SelfSubjectRulesReviewSpec",
    fields: &[Field::value(1, "namespace", T::String)],
};

static SUBJECT_RULES_REVIEW_STATUS: Message = Message {
    name: "SubjectRulesReviewStatus",
    fields: &[
        Field::repeated(1, "resourceRules", T::Message(&RESOURCE_RULE)),
        Field::repeated(2, "nonResourceRules", T::Message(&NON_RESOURCE_RULE)),
        Field::value(3, "incomplete", T::Bool),
        Field::value(4, "evaluationError", T::String),
    ],
};

pub(super) static SELF_SUBJECT_RULES_REVIEW: Message = Message {
    name: "SelfSubjectRulesReview",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SELF_SUBJECT_RULES_REVIEW_SPEC)),
        Field::value(3, "status", T::Message(&SUBJECT_RULES_REVIEW_STATUS)),
    ],
};
