//! Tables for autoscaling/v1: Scale, the body of the `/scale` subresource.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35) plus the fields 1.36 added (listed in
//! the `protobuf` module doc); see `messages` for how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static SCALE_SPEC: Message = Message {
    name: "ScaleSpec",
    fields: &[Field::value(1, "replicas", T::Int32)],
};

static SCALE_STATUS: Message = Message {
    name: "ScaleStatus",
    fields: &[
        Field::value(1, "replicas", T::Int32),
        Field::value(2, "selector", T::String),
    ],
};

pub(super) static SCALE: Message = Message {
    name: "Scale",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SCALE_SPEC)),
        Field::value(3, "status", T::Message(&SCALE_STATUS)),
    ],
};
