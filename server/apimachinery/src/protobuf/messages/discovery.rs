//! Tables for discovery.k8s.io/v1: EndpointSlice.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35) plus the fields 1.36 added (listed in
//! the `protobuf` module doc); see `messages` for how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static ENDPOINT_CONDITIONS: Message = Message {
    name: "EndpointConditions",
    fields: &[
        Field::optional(1, "ready", T::Bool),
        Field::optional(2, "serving", T::Bool),
        Field::optional(3, "terminating", T::Bool),
    ],
};

static FOR_ZONE: Message = Message {
    name: "ForZone",
    fields: &[Field::value(1, "name", T::String)],
};

static FOR_NODE: Message = Message {
    name: "ForNode",
    fields: &[Field::value(1, "name", T::String)],
};

static ENDPOINT_HINTS: Message = Message {
    name: "EndpointHints",
    fields: &[
        Field::repeated(1, "forZones", T::Message(&FOR_ZONE)),
        Field::repeated(2, "forNodes", T::Message(&FOR_NODE)),
    ],
};

static ENDPOINT: Message = Message {
    name: "Endpoint",
    fields: &[
        Field::repeated(1, "addresses", T::String),
        Field::value(2, "conditions", T::Message(&ENDPOINT_CONDITIONS)),
        Field::optional(3, "hostname", T::String),
        Field::optional(4, "targetRef", T::Message(&super::core::OBJECT_REFERENCE)),
        Field::map(5, "deprecatedTopology", T::String),
        Field::optional(6, "nodeName", T::String),
        Field::optional(7, "zone", T::String),
        Field::optional(8, "hints", T::Message(&ENDPOINT_HINTS)),
    ],
};

static ENDPOINT_PORT: Message = Message {
    name: "EndpointPort",
    fields: &[
        Field::optional(1, "name", T::String),
        Field::optional(2, "protocol", T::String),
        Field::optional(3, "port", T::Int32),
        Field::optional(4, "appProtocol", T::String),
    ],
};

pub(super) static ENDPOINT_SLICE: Message = Message {
    name: "EndpointSlice",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "endpoints", T::Message(&ENDPOINT)),
        Field::repeated(3, "ports", T::Message(&ENDPOINT_PORT)),
        Field::value(4, "addressType", T::String),
    ],
};
