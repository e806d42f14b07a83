//! Tables for authentication.k8s.io/v1: TokenReview, SelfSubjectReview (`kubectl auth
//! whoami`) and TokenRequest (`kubectl create token`, the serviceaccounts/token subresource).
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35, unchanged in v0.36); see `messages` for
//! how to read a table. A field's number need not follow its position in the Go struct
//! (`TokenRequestSpec.expirationSeconds` is 4, `boundObjectRef` 3); tables, like Go's
//! marshaller, go by number.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static USER_INFO: Message = Message {
    name: "UserInfo",
    fields: &[
        Field::value(1, "username", T::String),
        Field::value(2, "uid", T::String),
        Field::repeated(3, "groups", T::String),
        Field::map(4, "extra", T::ExtraValue),
    ],
};

static TOKEN_REVIEW_SPEC: Message = Message {
    name: "TokenReviewSpec",
    fields: &[
        Field::value(1, "token", T::String),
        Field::repeated(2, "audiences", T::String),
    ],
};

static TOKEN_REVIEW_STATUS: Message = Message {
    name: "TokenReviewStatus",
    fields: &[
        Field::value(1, "authenticated", T::Bool),
        Field::value(2, "user", T::Message(&USER_INFO)),
        Field::value(3, "error", T::String),
        Field::repeated(4, "audiences", T::String),
    ],
};

pub(super) static TOKEN_REVIEW: Message = Message {
    name: "TokenReview",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&TOKEN_REVIEW_SPEC)),
        Field::value(3, "status", T::Message(&TOKEN_REVIEW_STATUS)),
    ],
};

static SELF_SUBJECT_REVIEW_STATUS: Message = Message {
    name: "SelfSubjectReviewStatus",
    fields: &[Field::value(1, "userInfo", T::Message(&USER_INFO))],
};

pub(super) static SELF_SUBJECT_REVIEW: Message = Message {
    name: "SelfSubjectReview",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "status", T::Message(&SELF_SUBJECT_REVIEW_STATUS)),
    ],
};

static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "BoundObjectReference",
    fields: &[
        Field::value(1, "kind", T::String),
        Field::value(2, "apiVersion", T::String),
        Field::value(3, "name", T::String),
        Field::value(4, "uid", T::String),
    ],
};

static TOKEN_REQUEST_SPEC: Message = Message {
    name: "TokenRequestSpec",
    fields: &[
        Field::repeated(1, "audiences", T::String),
        Field::optional(3, "boundObjectRef", T::Message(&BOUND_OBJECT_REFERENCE)),
        Field::optional(4, "expirationSeconds", T::Int64),
    ],
};

static TOKEN_REQUEST_STATUS: Message = Message {
    name: "TokenRequestStatus",
    fields: &[
        Field::value(1, "token", T::String),
        Field::value(2, "expirationTimestamp", T::Time),
    ],
};

pub(super) static TOKEN_REQUEST: Message = Message {
    name: "TokenRequest",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&TOKEN_REQUEST_SPEC)),
        Field::value(3, "status", T::Message(&TOKEN_REQUEST_STATUS)),
    ],
};
