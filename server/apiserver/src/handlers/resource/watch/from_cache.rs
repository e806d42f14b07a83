//! A watch served by the type's shared watch cache: the initial objects and the events come from
//! memory, each framed around the encoding its object keeps.
//!
//! kube-apiserver's cacher serves every watch it can this way (`cacheWatcher`): one decoded
//! event, filtered per watcher, serialized once per format (`cachingObject`). The stream is
//! produced as the client reads it (no task, no second buffer per watch), so an idle watch is
//! a channel and this state; a watch whose client stops reading is cut off by the cache when its
//! buffer fills, and ends here once the client has read what was handed to it. Bookmarks carry
//! the cache's settled revision (which moves with writes to any type, as kube's does with etcd's
//! progress notifications), sent after every event the cache had handed over by then. Frames
//! that are ready together (the initial state, a burst of events) go out as one chunk.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::stream;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::ApiError;
use kcp_storage::Revision;
use kcp_watchcache::{
    CachedEvents, CachedObject, CachedWatch, Event, Freshness, NotServed, WatchQuery, WatchStart,
};
use tokio::time::{Instant, Interval, Sleep};

use super::{BOOKMARK_INTERVAL, Keep, Start, Stream, transition};

/// The most bytes of ready frames sent as one chunk.
const CHUNK: usize = 64 * 1024;
use crate::handlers::resource::Resolved;
use crate::handlers::response::Body;

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
    let state = Cached {
        bookmark_timer: stream.bookmarks.then(|| {
            tokio::time::interval_at(Instant::now() + BOOKMARK_INTERVAL, BOOKMARK_INTERVAL)
        }),
        deadline: Box::pin(tokio::time::sleep(stream.timeout)),
        initial: watch.initial.into_iter(),
        initial_end,
        last: watch.revision,
        events: watch.events,
        pending: VecDeque::new(),
        done: false,
        stream,
    };
    let frames = stream::unfold(state, |mut state| async move {
        let frame = state.next_chunk().await?;
        Some((Ok::<_, Infallible>(Frame::data(frame)), state))
    });
    BodyExt::boxed(StreamBody::new(frames))
}

/// What wakes a waiting stream.
enum Wake {
    End,
    Bookmark,
    Event(Arc<Event>),
}

struct Cached {
    stream: Stream,
    events: CachedEvents,
    initial: std::vec::IntoIter<Arc<CachedObject>>,
    /// The revision of the initial-events-end BOOKMARK, until it is sent.
    initial_end: Option<Revision>,
    /// The revision of the last event or bookmark.
    last: Revision,
    /// Frames ready to go (a bookmark and the events it follows).
    pending: VecDeque<Bytes>,
    bookmark_timer: Option<Interval>,
    deadline: Pin<Box<Sleep>>,
    /// Set once an ERROR event ended the stream.
    done: bool,
}

impl Cached {
    /// The next chunk of the stream: the first frame (waiting for it if need be), then whatever
    /// more is ready without waiting, up to [`CHUNK`] bytes, so a busy stream (a WatchList's
    /// state, a burst of events) costs one write per chunk instead of one per event.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let first = loop {
            if let Some(frame) = self.ready_frame() {
                break frame;
            }
            if self.done {
                return None;
            }
            match self.wait().await {
                Wake::End => return None,
                Wake::Bookmark => self.push_bookmark(),
                Wake::Event(event) => self.push_event(&event),
            }
        };
        let mut chunk: Option<BytesMut> = None;
        while chunk.as_ref().map_or(first.len(), BytesMut::len) < CHUNK
            && let Some(frame) = self.ready_frame()
        {
            chunk
                .get_or_insert_with(|| BytesMut::from(&first[..]))
                .extend_from_slice(&frame);
        }
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

    async fn wait(&mut self) -> Wake {
        let timer = &mut self.bookmark_timer;
        let tick = async {
            match timer {
                Some(timer) => timer.tick().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut self.deadline => Wake::End,
            () = self.stream.shutdown.cancelled() => Wake::End,
            _ = tick => Wake::Bookmark,
            event = self.events.next() => event.map_or(Wake::End, Wake::Event),
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
                now.and_then(|now| before.map(|before| transition(event.kind, now, before)))
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
