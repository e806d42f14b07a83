//! The events of a type's cache and the bounded history of recent ones that watches start from.
//!
//! kube-apiserver's `watchCache` keeps a ring of recent events so a watch from a recent
//! `resourceVersion` is served from memory; a watch from before the ring answers 410 Gone and the
//! client lists again. Here the ring is bounded by count and by bytes (the JSON of the objects its
//! events hold, many of which are shared with the cache's current objects), and knows the revision
//! after which it is complete: the list that filled the cache, then the last event it dropped. A
//! watch from before that is not served from the cache (`NotServed::TooOld`), and the caller asks
//! storage, which still serves it unless its own history was compacted (then 410 as kube): so a
//! cache created while clients already watch never sends them back to list. Events older than
//! [`HISTORY_AGE`] are dropped too (kube keeps at least 75 s), so a type written in a burst
//! does not keep the burst's objects for good.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcp_registry::storage::objects::ChangeType;
use kcp_storage::Revision;

use crate::object::CachedObject;

/// At most this many events are kept per type.
pub(crate) const HISTORY_EVENTS: usize = 10_000;
/// At most this many bytes of objects are held by the events kept per type.
pub(crate) const HISTORY_BYTES: usize = 32 << 20;
/// Events are kept at most this long.
pub(crate) const HISTORY_AGE: Duration = Duration::from_secs(300);

/// One change of the type's objects, as every watcher receives it.
#[derive(Debug)]
pub struct Event {
    pub kind: ChangeType,
    pub revision: Revision,
    /// The object after the change; for a deletion, as it was, at the deletion's revision.
    pub object: Arc<CachedObject>,
    /// The object before the change (for selectors: what matched before).
    pub previous: Option<Arc<CachedObject>>,
    /// `<cluster>/[<namespace>/]<name>`, relative to the type's root.
    key: String,
    /// When the cache applied it.
    at: Instant,
}

impl Event {
    pub(crate) fn new(
        kind: ChangeType,
        revision: Revision,
        key: String,
        object: Arc<CachedObject>,
        previous: Option<Arc<CachedObject>>,
    ) -> Event {
        Event {
            kind,
            revision,
            object,
            previous,
            key,
            at: Instant::now(),
        }
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    fn bytes(&self) -> usize {
        self.object.json().len() + self.key.len()
    }
}

/// Recent events in revision order.
pub(crate) struct History {
    events: VecDeque<Arc<Event>>,
    bytes: usize,
    /// Every event after this revision is kept (or still to come).
    complete_after: Revision,
    max_events: usize,
    max_bytes: usize,
}

impl History {
    /// An empty history of a cache filled at `revision`.
    pub(crate) fn new(revision: Revision) -> History {
        History::bounded(revision, HISTORY_EVENTS, HISTORY_BYTES)
    }

    fn bounded(revision: Revision, max_events: usize, max_bytes: usize) -> History {
        History {
            events: VecDeque::new(),
            bytes: 0,
            complete_after: revision,
            max_events,
            max_bytes,
        }
    }

    /// Keeps an event, dropping the oldest beyond the bounds.
    pub(crate) fn push(&mut self, event: Arc<Event>) {
        self.bytes += event.bytes();
        self.events.push_back(event);
        while self.events.len() > self.max_events || self.bytes > self.max_bytes {
            self.drop_oldest();
        }
    }

    /// Drops the events applied before `before`.
    pub(crate) fn drop_older(&mut self, before: Instant) {
        while self.events.front().is_some_and(|e| e.at < before) {
            self.drop_oldest();
        }
    }

    fn drop_oldest(&mut self) {
        if let Some(oldest) = self.events.pop_front() {
            self.bytes -= oldest.bytes();
            self.complete_after = self.complete_after.max(oldest.revision);
        }
    }

    /// The events after `revision` under `prefix` (relative to the root), or `None` when some may
    /// have been dropped already.
    pub(crate) fn since(&self, revision: Revision, prefix: &str) -> Option<VecDeque<Arc<Event>>> {
        if revision < self.complete_after {
            return None;
        }
        let first = self.events.partition_point(|e| e.revision <= revision);
        Some(
            self.events
                .range(first..)
                .filter(|e| e.key.starts_with(prefix))
                .cloned()
                .collect(),
        )
    }

    #[cfg(test)]
    fn complete_after(&self) -> Revision {
        self.complete_after
    }

    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(revision: Revision, key: &str) -> Arc<Event> {
        let object = CachedObject::new(&json!({"k": key})).unwrap();
        Arc::new(Event::new(
            ChangeType::Added,
            revision,
            key.to_string(),
            Arc::new(object),
            None,
        ))
    }

    fn revisions(events: &VecDeque<Arc<Event>>) -> Vec<Revision> {
        events.iter().map(|e| e.revision).collect()
    }

    #[test]
    fn serves_the_events_after_a_revision_under_a_prefix() {
        let mut history = History::new(10);
        for (revision, key) in [(11, "a/x"), (12, "b/x"), (13, "a/y")] {
            history.push(event(revision, key));
        }
        assert_eq!(revisions(&history.since(10, "").unwrap()), [11, 12, 13]);
        assert_eq!(revisions(&history.since(11, "a/").unwrap()), [13]);
        assert_eq!(
            revisions(&history.since(13, "").unwrap()),
            Vec::<Revision>::new()
        );
        // Before the list that filled the cache: not known here.
        assert!(history.since(9, "").is_none());
    }

    #[test]
    fn dropping_the_oldest_moves_where_it_is_complete() {
        let mut history = History::bounded(0, 2, usize::MAX);
        for revision in 1..=4 {
            history.push(event(revision, "a/x"));
        }
        assert_eq!(history.len(), 2);
        assert_eq!(history.complete_after(), 2);
        assert!(history.since(1, "").is_none());
        assert_eq!(revisions(&history.since(2, "").unwrap()), [3, 4]);
    }

    #[test]
    fn old_events_are_dropped() {
        let mut history = History::new(0);
        history.push(event(1, "a/x"));
        let between = Instant::now();
        history.push(event(2, "a/x"));
        history.drop_older(between);
        assert_eq!(history.len(), 1);
        assert_eq!(history.complete_after(), 1);
        history.drop_older(Instant::now());
        assert_eq!(history.len(), 0);
        assert_eq!(history.bytes(), 0);
        assert_eq!(
            revisions(&history.since(2, "").unwrap()),
            Vec::<Revision>::new()
        );
    }

    #[test]
    fn bytes_bound_the_history_too() {
        let one = event(1, "a/x").bytes();
        let mut history = History::bounded(0, 100, 2 * one);
        for revision in 1..=3 {
            history.push(event(revision, "a/x"));
        }
        assert_eq!(history.len(), 2);
        assert_eq!(history.bytes(), 2 * one);
        assert_eq!(history.complete_after(), 1);
    }
}
