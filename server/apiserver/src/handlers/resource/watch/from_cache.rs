//! A watch served by the type's shared watch cache: the initial objects and the events come from
//! memory, each framed around the encoding its object keeps.
//!
//! kube-apiserver's cacher serves every watch it can this way (`cacheWatcher`): one decoded
//! event, filtered per watcher, serialized once per format (`cachingObject`). The stream is
//! produced as the client reads it (no task, no second buffer per watch), so an idle watch is
//! the cache's queue for it and this state, with one timer for its deadline and bookmarks; a watch whose
//! client stops reading is cut off by the cache when its buffer fills, and ends here once the
//! client has read what was handed to it. Bookmarks carry the cache's settled revision (which
//! moves with writes to any type, as kube's does with etcd's progress notifications), sent after
//! every event the cache had handed over by then.
//!
//! Frames that are ready together (the initial state, a backlog of events) go out as one chunk.
//! A busy stream also gathers: when it had to wait for an event and its last chunk went out less
//! than [`LINGER`] ago, it waits until [`LINGER`] after that chunk and sends everything ready
//! then as one, so a watcher of a type written hundreds of times a second costs one write (one
//! TLS record, one system call) per [`LINGER`] instead of one per event, while a stream that was
//! idle sends its event at once. kube-apiserver writes each event and flushes it; this trades at
//! most [`LINGER`] of delivery latency, under load only, for that CPU.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::stream;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::ApiError;
use kcp_storage::Revision;
use kcp_watchcache::{
    CachedEvents, CachedObject, CachedWatch, Event, Freshness, NotServed, WatchQuery, WatchStart,
};
use tokio::time::{Instant, Sleep};

use super::{BOOKMARK_INTERVAL, Keep, Start, Stream};
use crate::handlers::resource::Resolved;
use crate::handlers::response::Body;

/// The most bytes of ready frames sent as one chunk.
const CHUNK: usize = 64 * 1024;

/// How long after a chunk a busy stream gathers events before sending the next one.
const LINGER: Duration = Duration::from_millis(10);

/// A deadline no stream reaches (about 30 years).
const NEVER: Duration = Duration::from_secs(30 * 365 * 86_400);

/// The watch from the type's cache, or why the cache does not serve it.
pub(super) async fn open(
    r: &Resolved<'_>,
    prefix: &str,
    start: Start,
) -> Result<Result<CachedWatch, NotServed>, ApiError> {
    let current = async { r.scope.store.objects().current_revision().await };
    let from = match (start.initial, start.requested) {
        (true, Some(requested)) => WatchStart::Initial(Freshness::AtLeast(requested)),
        (true, None) if start.any => WatchStart::Initial(Freshness::Any),
        (true, None) => WatchStart::Initial(Freshness::AtLeast(current.await?)),
        (false, Some(requested)) => WatchStart::After(requested),
        (false, None) => WatchStart::After(current.await?),
    };
    let keys = r.scope.store.keys(&r.rt);
    let query = WatchQuery {
        root: keys.all_clusters(),
        namespaced: r.rt.namespaced,
        prefix,
    };
    Ok(r.scope.watch_caches.watch(query, from).await)
}

/// The response body of a watch served from the cache (`initial`: the watch asked for the
/// initial state, which ends with a bookmark when bookmarks are allowed).
pub(super) fn body(watch: CachedWatch, stream: Stream, initial: bool) -> Body {
    let initial_end = (initial && stream.bookmarks).then_some(watch.revision);
    let state = Cached::new(
        stream,
        watch.events,
        watch.initial,
        initial_end,
        watch.revision,
    );
    let frames = stream::unfold(state, |mut state| async move {
        let frame = state.next_chunk().await?;
        Some((Ok::<_, Infallible>(Frame::data(frame)), state))
    });
    BodyExt::boxed(StreamBody::new(frames))
}

/// Where a stream's events come from: the cache's [`CachedEvents`] (a queue in tests).
trait Events: Send + 'static {
    /// The next event; `None` once the watch has ended.
    fn next(&mut self) -> impl Future<Output = Option<Arc<Event>>> + Send;
    /// The next event if one is pending.
    fn try_next(&mut self) -> Option<Arc<Event>>;
    /// The revision a bookmark may carry once the pending events are sent; `None` once ended.
    fn settled_revision(&self) -> Option<Revision>;
}

impl Events for CachedEvents {
    fn next(&mut self) -> impl Future<Output = Option<Arc<Event>>> + Send {
        CachedEvents::next(self)
    }

    fn try_next(&mut self) -> Option<Arc<Event>> {
        CachedEvents::try_next(self)
    }

    fn settled_revision(&self) -> Option<Revision> {
        CachedEvents::settled_revision(self)
    }
}

/// What wakes a waiting stream.
enum Wake {
    End,
    Bookmark,
    Event(Arc<Event>),
}

struct Cached<E> {
    stream: Stream,
    events: E,
    initial: std::vec::IntoIter<Arc<CachedObject>>,
    /// The revision of the initial-events-end BOOKMARK, until it is sent.
    initial_end: Option<Revision>,
    /// The revision of the last event or bookmark.
    last: Revision,
    /// Frames ready to go (a bookmark and the events it follows).
    pending: VecDeque<Bytes>,
    /// The stream's one timer, set to whichever comes first of the deadline, the next bookmark
    /// and the end of a linger.
    timer: Pin<Box<Sleep>>,
    /// When the stream ends (`timeoutSeconds`).
    deadline: Instant,
    /// When the next periodic BOOKMARK is due, for a watch that asked for them.
    next_bookmark: Option<Instant>,
    /// When the last chunk was handed over, if one was.
    last_chunk: Option<Instant>,
    /// Set once an ERROR event ended the stream.
    done: bool,
}

impl<E: Events> Cached<E> {
    fn new(
        stream: Stream,
        events: E,
        initial: Vec<Arc<CachedObject>>,
        initial_end: Option<Revision>,
        revision: Revision,
    ) -> Cached<E> {
        let now = Instant::now();
        // A `timeoutSeconds` beyond what the clock can represent never ends the stream.
        let deadline = now
            .checked_add(stream.timeout)
            .unwrap_or_else(|| now + NEVER);
        Cached {
            next_bookmark: stream.bookmarks.then(|| now + BOOKMARK_INTERVAL),
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            deadline,
            stream,
            events,
            initial: initial.into_iter(),
            initial_end,
            last: revision,
            pending: VecDeque::new(),
            last_chunk: None,
            done: false,
        }
    }

    /// The next chunk of the stream: the first frame (waiting for it if need be), then, after a
    /// linger when the stream waited and sent a chunk less than [`LINGER`] ago, whatever more
    /// is ready, up to [`CHUNK`] bytes, so a busy stream (a WatchList's state, a burst or a
    /// steady flow of events) costs one write per chunk instead of one per event.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let mut waited = false;
        let first = loop {
            if let Some(frame) = self.ready_frame() {
                break frame;
            }
            if self.done {
                return None;
            }
            waited = true;
            match self.wait().await {
                Wake::End => return None,
                Wake::Bookmark => self.push_bookmark(),
                Wake::Event(event) => self.push_event(&event),
            }
        };
        if waited && let Some(last) = self.last_chunk {
            self.linger(last + LINGER).await;
        }
        let mut chunk: Option<BytesMut> = None;
        while chunk.as_ref().map_or(first.len(), BytesMut::len) < CHUNK
            && let Some(frame) = self.ready_frame()
        {
            chunk
                .get_or_insert_with(|| BytesMut::from(&first[..]))
                .extend_from_slice(&frame);
        }
        self.last_chunk = Some(Instant::now());
        Some(chunk.map_or(first, BytesMut::freeze))
    }

    /// A frame that is ready without waiting: one already made, an initial object, the
    /// initial-events-end bookmark, or an event the cache has handed over.
    fn ready_frame(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Some(frame);
            }
            if self.done {
                return None;
            }
            if let Some(object) = self.initial.next() {
                self.push_initial(&object);
                continue;
            }
            if let Some(revision) = self.initial_end.take() {
                let frame = self.stream.encoder.bookmark(revision, true);
                self.push(frame);
                continue;
            }
            let event = self.events.try_next()?;
            self.push_event(&event);
        }
    }

    /// Points the timer at `at`, unless it already is.
    fn set_timer(&mut self, at: Instant) {
        if self.timer.deadline() != at {
            self.timer.as_mut().reset(at);
        }
    }

    async fn wait(&mut self) -> Wake {
        let due = self
            .next_bookmark
            .map_or(self.deadline, |bookmark| bookmark.min(self.deadline));
        self.set_timer(due);
        tokio::select! {
            () = &mut self.timer => {
                if due >= self.deadline {
                    return Wake::End;
                }
                self.next_bookmark = Some(Instant::now() + BOOKMARK_INTERVAL);
                Wake::Bookmark
            }
            () = self.stream.shutdown.cancelled() => Wake::End,
            event = self.events.next() => event.map_or(Wake::End, Wake::Event),
        }
    }

    /// Waits until `until` (no later than the deadline, no longer than until shutdown) for more
    /// events to gather.
    async fn linger(&mut self, until: Instant) {
        if until <= Instant::now() {
            return;
        }
        self.set_timer(until.min(self.deadline));
        tokio::select! {
            () = &mut self.timer => {}
            () = self.stream.shutdown.cancelled() => {}
        }
    }

    fn push(&mut self, frame: Result<Bytes, ApiError>) {
        match frame {
            Ok(frame) => self.pending.push_back(frame),
            Err(error) => {
                self.pending.push_back(self.stream.encoder.error(&error));
                self.done = true;
            }
        }
    }

    fn push_initial(&mut self, object: &CachedObject) {
        match kept(self.stream.keep.as_ref(), &self.stream, object) {
            Ok(true) => {
                let frame = self.stream.encoder.cached_event("ADDED", object);
                self.push(frame);
            }
            Ok(false) => {}
            Err(error) => self.push(Err(error)),
        }
    }

    fn push_event(&mut self, event: &Event) {
        self.last = self.last.max(event.revision);
        let kind = match self.stream.keep.as_ref() {
            None => Ok(Some(event.kind)),
            Some(keep) => {
                let now = kept(Some(keep), &self.stream, &event.object);
                let before = match &event.previous {
                    Some(previous) => kept(Some(keep), &self.stream, previous),
                    None => Ok(false),
                };
                now.and_then(|now| before.map(|before| event.kind.seen_through_filter(now, before)))
            }
        };
        match kind {
            Ok(Some(kind)) => {
                let frame = self.stream.encoder.cached_change(kind, event);
                self.push(frame);
            }
            Ok(None) => {}
            Err(error) => self.push(Err(error)),
        }
    }

    /// A periodic BOOKMARK: the settled revision read first, then every event handed over by
    /// then, then the bookmark, so no event it covers comes after it. None for a watch that has
    /// ended: its stream ends once the events it was handed are sent.
    fn push_bookmark(&mut self) {
        let Some(settled) = self.events.settled_revision() else {
            return;
        };
        while !self.done
            && let Some(event) = self.events.try_next()
        {
            self.push_event(&event);
        }
        if self.done {
            return;
        }
        self.last = self.last.max(settled);
        let frame = self.stream.encoder.bookmark(self.last, false);
        self.push(frame);
    }
}

/// Whether the client's selectors keep the object (as the type serves it); `true` without any.
fn kept(keep: Option<&Keep>, stream: &Stream, object: &CachedObject) -> Result<bool, ApiError> {
    let Some(keep) = keep else {
        return Ok(true);
    };
    let served = object
        .served_value(&stream.encoder.rt)
        .map_err(|e| ApiError::internal_error(&format!("a cached object: {e}")))?;
    Ok(keep(&served))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::negotiation::Output;
    use kcp_registry::storage::objects::ChangeType;
    use serde_json::{Value, json};
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::super::encoder::Encoder;

    /// Events a test hands over, and the revision bookmarks carry.
    struct Queue {
        rx: mpsc::UnboundedReceiver<Arc<Event>>,
        settled: Revision,
    }

    impl Events for Queue {
        fn next(&mut self) -> impl Future<Output = Option<Arc<Event>>> + Send {
            self.rx.recv()
        }

        fn try_next(&mut self) -> Option<Arc<Event>> {
            self.rx.try_recv().ok()
        }

        fn settled_revision(&self) -> Option<Revision> {
            Some(self.settled)
        }
    }

    fn event(revision: Revision) -> Arc<Event> {
        let name = format!("cm-{revision}");
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": "default", "resourceVersion": revision.to_string()}});
        let object = Arc::new(CachedObject::new(&object).unwrap());
        let key = format!("c/default/{name}");
        Arc::new(Event::new(ChangeType::Added, revision, key, object, None))
    }

    fn watch(
        timeout: Duration,
        bookmarks: bool,
        shutdown: &CancellationToken,
    ) -> (Cached<Queue>, mpsc::UnboundedSender<Arc<Event>>) {
        let rt = kcp_registry::Registry::new()
            .builtin_type("", "v1", "configmaps")
            .unwrap();
        let stream = Stream {
            encoder: Encoder {
                output: Output::Json,
                rt,
            },
            keep: None,
            bookmarks,
            timeout,
            shutdown: shutdown.clone(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let events = Queue { rx, settled: 100 };
        (Cached::new(stream, events, Vec::new(), None, 1), tx)
    }

    /// Each frame of a chunk as `TYPE rv`.
    fn frames(chunk: &Bytes) -> Vec<String> {
        std::str::from_utf8(chunk)
            .unwrap()
            .lines()
            .map(|line| {
                let event: Value = serde_json::from_str(line).unwrap();
                let rv = &event["object"]["metadata"]["resourceVersion"];
                format!(
                    "{} {}",
                    event["type"].as_str().unwrap(),
                    rv.as_str().unwrap()
                )
            })
            .collect()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn an_idle_stream_sends_at_once_and_a_busy_one_gathers_in_order() {
        let shutdown = CancellationToken::new();
        let (mut cached, tx) = watch(HOUR, false, &shutdown);
        let start = Instant::now();
        let ms = Duration::from_millis;
        let send_at = |at: Duration, revision: Revision| {
            let tx = tx.clone();
            async move {
                tokio::time::sleep_until(start + at).await;
                tx.send(event(revision)).unwrap();
            }
        };
        // The first event of an idle stream goes out the moment it arrives.
        let (chunk, ()) = tokio::join!(cached.next_chunk(), send_at(ms(3), 2));
        assert_eq!(frames(&chunk.unwrap()), ["ADDED 2"]);
        assert_eq!(start.elapsed(), ms(3));
        // Events arriving within LINGER of that chunk wait for its end and go out together.
        let (chunk, (), ()) =
            tokio::join!(cached.next_chunk(), send_at(ms(4), 3), send_at(ms(6), 4));
        assert_eq!(frames(&chunk.unwrap()), ["ADDED 3", "ADDED 4"]);
        assert_eq!(start.elapsed(), ms(3) + LINGER);
        // A backlog goes out at once, in order, however recent the last chunk.
        for revision in 5..8 {
            tx.send(event(revision)).unwrap();
        }
        let chunk = cached.next_chunk().await.unwrap();
        assert_eq!(frames(&chunk), ["ADDED 5", "ADDED 6", "ADDED 7"]);
        assert_eq!(start.elapsed(), ms(3) + LINGER);
        // Once idle for LINGER, the next event goes out at once again.
        let later = ms(3) + LINGER * 5;
        let (chunk, ()) = tokio::join!(cached.next_chunk(), send_at(later, 8));
        assert_eq!(frames(&chunk.unwrap()), ["ADDED 8"]);
        assert_eq!(start.elapsed(), later);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_beyond_the_clock_is_no_timeout() {
        let shutdown = CancellationToken::new();
        let (mut cached, tx) = watch(Duration::MAX, false, &shutdown);
        tx.send(event(2)).unwrap();
        assert_eq!(frames(&cached.next_chunk().await.unwrap()), ["ADDED 2"]);
        shutdown.cancel();
        assert!(cached.next_chunk().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn bookmarks_follow_the_events_and_the_stream_ends_at_its_timeout() {
        let shutdown = CancellationToken::new();
        let timeout = BOOKMARK_INTERVAL * 2 + Duration::from_secs(5);
        let (mut cached, tx) = watch(timeout, true, &shutdown);
        let start = Instant::now();
        let chunk = cached.next_chunk().await.unwrap();
        assert_eq!(frames(&chunk), ["BOOKMARK 100"]);
        assert_eq!(start.elapsed(), BOOKMARK_INTERVAL);
        tx.send(event(101)).unwrap();
        let chunk = cached.next_chunk().await.unwrap();
        assert_eq!(frames(&chunk), ["ADDED 101"]);
        let chunk = cached.next_chunk().await.unwrap();
        assert_eq!(frames(&chunk), ["BOOKMARK 101"]);
        assert_eq!(start.elapsed(), BOOKMARK_INTERVAL * 2);
        assert!(cached.next_chunk().await.is_none());
        assert_eq!(start.elapsed(), timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_and_timeout_cut_a_linger_short_and_end_after_sending() {
        for by_shutdown in [true, false] {
            let shutdown = CancellationToken::new();
            let ms = Duration::from_millis;
            let timeout = if by_shutdown { HOUR } else { ms(3) };
            let (mut cached, tx) = watch(timeout, false, &shutdown);
            let start = Instant::now();
            tx.send(event(2)).unwrap();
            assert_eq!(frames(&cached.next_chunk().await.unwrap()), ["ADDED 2"]);
            let end = async {
                tokio::time::sleep(ms(1)).await;
                tx.send(event(3)).unwrap();
                tokio::time::sleep(ms(1)).await;
                if by_shutdown {
                    shutdown.cancel();
                }
            };
            let (chunk, ()) = tokio::join!(cached.next_chunk(), end);
            assert_eq!(frames(&chunk.unwrap()), ["ADDED 3"]);
            assert!(start.elapsed() < LINGER, "{by_shutdown}");
            assert!(cached.next_chunk().await.is_none());
        }
    }
}
