//! An event about an operator object as the status page lists it: the object, type, reason,
//! note, how often it happened and when last. The operator publishes `events.k8s.io/v1` Events
//! (kube-runtime's recorder, like controller-runtime's for upstream kcp-operator); events about
//! other objects are dropped when they arrive.

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;

/// The API group whose objects' events the page keeps.
const OPERATOR_GROUP_PREFIX: &str = "operator.kcp.io/";

/// One event about an operator object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub namespace: String,
    /// The event object's own name (stable across repetitions of a series).
    pub name: String,
    pub kind: String,
    pub object: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    pub reason: String,
    pub note: String,
    /// How often it happened (a series counts every repetition).
    pub count: i32,
    /// When it last happened.
    pub last_seen: Option<Timestamp>,
}

impl EventRecord {
    /// The record of `event`, when it is about an operator object.
    pub fn of_event(event: &Event) -> Option<Self> {
        let regarding = event.regarding.as_ref()?;
        if !regarding
            .api_version
            .as_deref()
            .is_some_and(|version| version.starts_with(OPERATOR_GROUP_PREFIX))
        {
            return None;
        }
        let last_seen = event
            .series
            .as_ref()
            .map(|series| series.last_observed_time.0)
            .or_else(|| event.event_time.as_ref().map(|time| time.0))
            .or_else(|| event.deprecated_last_timestamp.as_ref().map(|time| time.0))
            .or_else(|| event.creation_timestamp().map(|time| time.0));
        let count = event
            .series
            .as_ref()
            .map(|series| series.count)
            .or(event.deprecated_count)
            .unwrap_or(1);
        Some(Self {
            namespace: event.namespace().unwrap_or_default(),
            name: event.name_any(),
            kind: regarding.kind.clone().unwrap_or_default(),
            object: regarding.name.clone().unwrap_or_default(),
            type_: event.type_.clone().unwrap_or_else(|| "Normal".into()),
            reason: event.reason.clone().unwrap_or_default(),
            note: event.note.clone().unwrap_or_default(),
            count,
            last_seen,
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::EventSeries;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    use super::*;

    fn event(api_version: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some("shard-1.abc".into()),
                namespace: Some("kcp".into()),
                ..ObjectMeta::default()
            },
            regarding: Some(ObjectReference {
                api_version: Some(api_version.into()),
                kind: Some("Shard".into()),
                name: Some("shard-1".into()),
                ..ObjectReference::default()
            }),
            type_: Some("Warning".into()),
            reason: Some("ReferenceNotFound".into()),
            note: Some("RootShard \"gone\" does not exist".into()),
            event_time: Some(MicroTime(Timestamp::from_second(100).expect("time"))),
            ..Event::default()
        }
    }

    #[test]
    fn keeps_events_about_operator_objects_only() {
        let record = EventRecord::of_event(&event("operator.kcp.io/v1alpha1")).expect("kept");
        assert_eq!(record.kind, "Shard");
        assert_eq!(record.object, "shard-1");
        assert_eq!(record.type_, "Warning");
        assert_eq!(record.count, 1);
        assert_eq!(
            record.last_seen,
            Some(Timestamp::from_second(100).expect("time"))
        );
        assert!(EventRecord::of_event(&event("v1")).is_none());
    }

    #[test]
    fn a_series_counts_and_dates_its_repetitions() {
        let mut repeated = event("operator.kcp.io/v1alpha1");
        repeated.series = Some(EventSeries {
            count: 7,
            last_observed_time: MicroTime(Timestamp::from_second(500).expect("time")),
        });
        let record = EventRecord::of_event(&repeated).expect("kept");
        assert_eq!(record.count, 7);
        assert_eq!(
            record.last_seen,
            Some(Timestamp::from_second(500).expect("time"))
        );
    }
}
