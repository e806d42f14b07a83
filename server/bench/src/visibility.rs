//! When a numbered change of one object became visible in a watch stream, and the figures over
//! every change (`type-replication`, issue 19's "cache replication lag").
//!
//! Each change writes the object with the annotation [`SEQUENCE_ANNOTATION`] set to its number.
//! Replication is level-based (upstream's `pkg/reconciler/cache/replication` too): it pushes the
//! object as it is when it looks, so two quick changes may reach the cache as one write carrying
//! the later number. A change is therefore visible from the first event that carries its number
//! or a later one: from then on a reader of the watch has that change (or a newer state).
//! Events are matched by the annotation, not by resourceVersion: the cache's revisions are its own,
//! unrelated to the shard's the write returned.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::stats::Latency;

/// The annotation carrying a change's number.
pub const SEQUENCE_ANNOTATION: &str = "bench.kcp.io/sequence";
/// The object the changes are made to.
pub const OBJECT_NAME: &str = "bench-replication";

#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    object: Object<'a>,
}

#[derive(Debug, Default, Deserialize)]
struct Object<'a> {
    #[serde(default, borrow)]
    metadata: Metadata<'a>,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    annotations: HashMap<Cow<'a, str>, Cow<'a, str>>,
}

/// The change number of an ADDED or MODIFIED event of [`OBJECT_NAME`] (one line of a watch
/// stream); `None` for any other line.
pub fn sequence_of(line: &[u8]) -> Option<String> {
    let event: Event = serde_json::from_slice(line).ok()?;
    if !matches!(event.kind.as_ref(), "ADDED" | "MODIFIED")
        || event.object.metadata.name.as_deref() != Some(OBJECT_NAME)
    {
        return None;
    }
    let sequence = event.object.metadata.annotations.get(SEQUENCE_ANNOTATION)?;
    sequence.parse::<u64>().ok().map(|n| n.to_string())
}

/// How the acknowledged changes became visible.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Visibility {
    /// Changes whose write was acknowledged (the ones timed).
    pub acknowledged: u64,
    /// Write response read → first event with this change's number or a later one, for the
    /// changes seen within the timeout.
    pub lag: Option<Latency>,
    /// Changes seen within the timeout.
    pub seen: u64,
    /// Of those, seen before the write's response was read (lag counted as 0).
    pub before_ack: u64,
    /// Changes with no such event within the timeout after their acknowledgement (never, or
    /// later): not in `lag`.
    pub not_seen_within_timeout: u64,
    /// Changes that reached the stream as an event of their own (the rest were overtaken by a
    /// later change before replication pushed them).
    pub own_events: u64,
}

/// Matches `acks` (change number, write response read) against `arrivals` (change number as
/// read from the stream, first arrival).
pub fn visibility(
    acks: &[(u64, Instant)],
    arrivals: &[(u64, Instant)],
    timeout: Duration,
) -> Visibility {
    let first: BTreeMap<u64, Instant> =
        arrivals.iter().fold(BTreeMap::new(), |mut map, &(n, at)| {
            map.entry(n)
                .and_modify(|t: &mut Instant| *t = (*t).min(at))
                .or_insert(at);
            map
        });
    // Earliest arrival of each number or a later one.
    let mut from: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut earliest: Option<Instant> = None;
    for (&n, &at) in first.iter().rev() {
        let min = earliest.map_or(at, |e| e.min(at));
        earliest = Some(min);
        from.insert(n, min);
    }
    let mut lags = Vec::with_capacity(acks.len());
    let (mut before_ack, mut missing, mut own_events) = (0, 0, 0);
    for &(n, acked) in acks {
        if first.contains_key(&n) {
            own_events += 1;
        }
        let visible = from.range(n..).next().map(|(_, &at)| at);
        match visible {
            Some(at) if at <= acked => {
                before_ack += 1;
                lags.push(Duration::ZERO);
            }
            Some(at) if at - acked <= timeout => lags.push(at - acked),
            _ => missing += 1,
        }
    }
    Visibility {
        acknowledged: acks.len() as u64,
        seen: lags.len() as u64,
        lag: Latency::of(lags),
        before_ack,
        not_seen_within_timeout: missing,
        own_events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, name: &str, sequence: Option<&str>) -> Vec<u8> {
        let annotations = match sequence {
            Some(n) => json!({ SEQUENCE_ANNOTATION: n, "kcp.io/shard": "root" }),
            None => json!({ "kcp.io/shard": "root" }),
        };
        json!({"type": kind, "object": {"kind": "WorkspaceType",
            "metadata": {"name": name, "resourceVersion": "9", "annotations": annotations},
            "spec": {"defaultChildWorkspaceType": {"name": "universal"}}}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn only_changes_of_the_object_count() {
        assert_eq!(
            sequence_of(&event("ADDED", OBJECT_NAME, Some("0"))),
            Some("0".into())
        );
        assert_eq!(
            sequence_of(&event("MODIFIED", OBJECT_NAME, Some("17"))),
            Some("17".into())
        );
        assert_eq!(sequence_of(&event("DELETED", OBJECT_NAME, Some("3"))), None);
        assert_eq!(
            sequence_of(&event("MODIFIED", "universal", Some("3"))),
            None
        );
        assert_eq!(sequence_of(&event("MODIFIED", OBJECT_NAME, None)), None);
        assert_eq!(
            sequence_of(&event("MODIFIED", OBJECT_NAME, Some("x"))),
            None
        );
        assert_eq!(sequence_of(b"not json"), None);
    }

    #[test]
    fn lag_runs_from_the_ack_to_the_first_event_with_that_number() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let acks = [(1, ms(0)), (2, ms(100))];
        let arrivals = [(1, ms(30)), (2, ms(150)), (1, ms(400))];
        let v = visibility(&acks, &arrivals, Duration::from_secs(1));
        assert_eq!((v.seen, v.before_ack, v.not_seen_within_timeout), (2, 0, 0));
        assert_eq!(v.own_events, 2);
        let lag = v.lag.unwrap();
        assert_eq!((lag.p50_ms, lag.max_ms), (30.0, 50.0));
    }

    #[test]
    fn a_change_overtaken_by_a_later_one_is_visible_with_it() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        // 2 never arrives on its own: 3 carries it.
        let acks = [(1, ms(0)), (2, ms(10)), (3, ms(20))];
        let arrivals = [(1, ms(5)), (3, ms(70))];
        let v = visibility(&acks, &arrivals, Duration::from_secs(1));
        assert_eq!((v.seen, v.own_events), (3, 2));
        let lag = v.lag.unwrap();
        assert_eq!((lag.p50_ms, lag.max_ms), (50.0, 60.0));
    }

    #[test]
    fn early_events_count_zero_and_late_or_missing_ones_are_counted_apart() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let acks = [(1, ms(50)), (2, ms(100)), (3, ms(200))];
        // 1 arrives before its ack was read, 2 after the timeout, 3 never.
        let arrivals = [(1, ms(40)), (2, ms(1_200))];
        let v = visibility(&acks, &arrivals, Duration::from_secs(1));
        assert_eq!(v.acknowledged, 3);
        assert_eq!((v.seen, v.before_ack, v.not_seen_within_timeout), (1, 1, 2));
        assert_eq!(v.lag.unwrap().max_ms, 0.0);
        let none = visibility(&acks, &[], Duration::from_secs(1));
        assert_eq!((none.lag, none.not_seen_within_timeout), (None, 3));
    }
}
