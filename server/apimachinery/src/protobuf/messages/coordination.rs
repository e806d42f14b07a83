//! Tables for coordination.k8s.io/v1: Lease.

use crate::protobuf::schema::{Field, FieldType as T, Message};

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

pub(super) static LEASE: Message = Message {
    name: "Lease",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&LEASE_SPEC)),
    ],
};
