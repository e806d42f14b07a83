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
//! [`HISTORY_AGE`] are dropped too (kube's freshness window, 75 s), so a type written in a burst
//! does not keep the burst's objects for good, and the stream frames made of an event for its
//! watchers are dropped after [`FRAME_AGE`], once every watcher has long been handed it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kcp_registry::ResourceType;
use kcp_registry::storage::objects::ChangeType;
use kcp_storage::Revision;

use crate::object::CachedObject;

/// At most this many events are kept per type (kube's fixed default was 100 before it sized
/// the history by time).
pub(crate) const HISTORY_EVENTS: usize = 2_000;
/// At most this many bytes of objects are held by the events kept per type.
pub(crate) const HISTORY_BYTES: usize = 4 << 20;
/// Events are kept at most this long (kube's `eventFreshDuration`).
pub(crate) const HISTORY_AGE: Duration = Duration::from_secs(75);
/// The frames made of an event are kept this long: while its fan-out is under way.
pub(crate) const FRAME_AGE: Duration = Duration::from_secs(10);

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
    /// The stream frames made of it so far, shared by every watcher that sends the same one.
    frames: Mutex<Vec<KeptFrame>>,
    /// Whether more than one watcher was handed it: only then are its frames worth keeping.
    shared: AtomicBool,
}

/// Which frame of an event a watcher sends: the type it serves the object as, the event type
/// it reports (selectors may change it), and the stream's format.
#[derive(Clone, Copy)]
pub struct FrameKey<'a> {
    pub rt: &'a Arc<ResourceType>,
    pub kind: ChangeType,
    pub protobuf: bool,
}

struct KeptFrame {
    /// Compared by address, held weakly (as `CachedObject` keeps its served forms).
    rt: Weak<ResourceType>,
    kind: ChangeType,
    protobuf: bool,
    bytes: Bytes,
}

impl std::fmt::Debug for KeptFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeptFrame({:?}, {} bytes)", self.kind, self.bytes.len())
    }
}

impl Event {
    /// A change as the cache applies it (and as tests of a watch stream make one).
    pub fn new(
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
            frames: Mutex::new(Vec::new()),
            shared: AtomicBool::new(false),
        }
    }

    pub(crate) fn set_shared(&self, shared: bool) {
        self.shared.store(shared, Ordering::Relaxed);
    }

    /// The stream frame `key` names: made by `make` for the first watcher that sends it, then
    /// the same bytes for every other (kube's `cachingObject` serializes once per format). An
    /// event handed to one watcher only keeps no frame.
    pub fn frame<E>(
        &self,
        key: FrameKey<'_>,
        make: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let same = |kept: &KeptFrame| {
            kept.rt.as_ptr() == Arc::as_ptr(key.rt)
                && kept.kind == key.kind
                && kept.protobuf == key.protobuf
        };
        if let Ok(frames) = self.frames.lock()
            && let Some(kept) = frames.iter().find(|kept| same(kept))
        {
            return Ok(kept.bytes.clone());
        }
        let bytes = make()?;
        if self.shared.load(Ordering::Relaxed)
            && let Ok(mut frames) = self.frames.lock()
            && !frames.iter().any(same)
        {
            frames.push(KeptFrame {
                rt: Arc::downgrade(key.rt),
                kind: key.kind,
                protobuf: key.protobuf,
                bytes: bytes.clone(),
            });
        }
        Ok(bytes)
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

    /// Forgets the frames made of the events applied before `before`.
    pub(crate) fn forget_frames(&self, before: Instant) {
        for event in self.events.iter().take_while(|e| e.at < before) {
            if let Ok(mut frames) = event.frames.lock() {
                *frames = Vec::new();
            }
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

    fn key0(rt: &Arc<ResourceType>) -> FrameKey<'_> {
        FrameKey {
            rt,
            kind: ChangeType::Modified,
            protobuf: true,
        }
    }

    #[test]
    fn a_frame_is_made_once_per_type_kind_and_format() {
        let registry = kcp_registry::Registry::new();
        let configmaps = registry.builtin_type("", "v1", "configmaps").unwrap();
        let secrets = registry.builtin_type("", "v1", "secrets").unwrap();
        let e = event(1, "a/x");
        let made = std::cell::Cell::new(0);
        let make = |text: &'static str| {
            made.set(made.get() + 1);
            Ok::<_, ()>(Bytes::from_static(text.as_bytes()))
        };
        // Handed to one watcher: nothing kept.
        let _ = e.frame(key0(&configmaps), || make("z"));
        let _ = e.frame(key0(&configmaps), || make("z"));
        assert_eq!(made.get(), 2);
        made.set(0);
        e.set_shared(true);
        let key = |rt, kind, protobuf| FrameKey { rt, kind, protobuf };
        let first = e
            .frame(key(&configmaps, ChangeType::Added, false), || make("a"))
            .unwrap();
        let again = e
            .frame(key(&configmaps, ChangeType::Added, false), || make("b"))
            .unwrap();
        assert_eq!((first.as_ptr(), made.get()), (again.as_ptr(), 1));
        e.frame(key(&configmaps, ChangeType::Deleted, false), || make("c"))
            .unwrap();
        e.frame(key(&configmaps, ChangeType::Added, true), || make("d"))
            .unwrap();
        e.frame(key(&secrets, ChangeType::Added, false), || make("e"))
            .unwrap();
        assert_eq!(made.get(), 4);
        // Once forgotten, the next watcher makes its frame again.
        let mut history = History::new(0);
        history.push(e.clone());
        history.forget_frames(Instant::now());
        e.frame(key(&configmaps, ChangeType::Added, false), || make("f"))
            .unwrap();
        assert_eq!(made.get(), 5);
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
