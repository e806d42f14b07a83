//! Tables for events.k8s.io/v1: Event, whose series, source and references are core/v1's
//! messages (the same field numbers in both groups).

use crate::protobuf::schema::{Field, FieldType as T, Message};

pub(super) static EVENT: Message = Message {
    name: "Event",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "eventTime", T::MicroTime),
        Field::optional(3, "series", T::Message(&super::core::EVENT_SERIES)),
        Field::value(4, "reportingController", T::String),
        Field::value(5, "reportingInstance", T::String),
        Field::value(6, "action", T::String),
        Field::value(7, "reason", T::String),
        Field::value(8, "regarding", T::Message(&super::core::OBJECT_REFERENCE)),
        Field::optional(9, "related", T::Message(&super::core::OBJECT_REFERENCE)),
        Field::value(10, "note", T::String),
        Field::value(11, "type", T::String),
        Field::value(
            12,
            "deprecatedSource",
            T::Message(&super::core::EVENT_SOURCE),
        ),
        Field::value(13, "deprecatedFirstTimestamp", T::Time),
        Field::value(14, "deprecatedLastTimestamp", T::Time),
        Field::value(15, "deprecatedCount", T::Int32),
    ],
};
