//! The cache of one resource type for every logical cluster: filled by one list, kept current by
//! the changes the store-wide [`Feed`] hands it, answering lists at the revision it holds.
//!
//! Like kube-apiserver's `cacher` with its `watchCache`, whose reflector lists, then watches from the
//! list's revision, and lists again when its watch fails; here the watch is the feed shared by every
//! cache: while the cache lists, the changes the feed hands it are queued, and once the list is in,
//! those after its revision are applied, in order, before any newer one. While it lists, reads
//! wait for it or go to storage. The cache knows the revision it is current
//! to (the list's, then each applied change's), and with the [`Feed`] whether it holds the store's
//! state at a later revision too, which is what a consistent list waits for
//! (kube's `waitUntilFreshAndBlock`, bounded like kube's by a few seconds). Each change applied is
//! also an [`Event`]: kept in the bounded [`History`] and handed to the type's [`Watchers`], under
//! the same lock that changes the objects, so a watch registered at a revision misses nothing and
//! sees nothing twice. A re-list ends every watch (kube's cacher terminates its watchers too).
//! A cache with no watcher and no read for a while empties itself and ends ([`run`]), to be
//! forgotten by its owner.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use kcp_apimachinery::ApiError;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{Change, ChangeType, ListRequest};
use kcp_storage::{Revision, WatchEvent};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::feed::{Feed, RETRY_AFTER};
use crate::history::{Event, FRAME_AGE, HISTORY_AGE, History};
use crate::object::{CachedObject, relative_key};
use crate::page::{self, Objects, Range};
use crate::watchers::{self, CachedEvents, Watchers};
use crate::{CacheStats, CachedPage, CachedWatch, Freshness, NotServed, WatchStart};

/// How long a list waits for the cache to reach the revision it needs (kube's `blockTimeout`).
const WAIT: Duration = Duration::from_secs(3);

/// How often events older than [`HISTORY_AGE`] (and frames older than [`FRAME_AGE`]) are dropped.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// The objects, the revision they are the store's state at, and the recent events.
struct State {
    ready: bool,
    revision: Revision,
    objects: Objects,
    history: History,
}

impl State {
    fn empty() -> State {
        State {
            ready: false,
            revision: 0,
            objects: Objects::new(),
            history: History::new(0),
        }
    }
}

/// One resource type's cache (all logical clusters).
pub(crate) struct TypeCache {
    /// `/<prefix>/<group>/<resource>/[customresources/]`
    root: String,
    namespaced: bool,
    state: RwLock<State>,
    /// Locked only while `state` is, for reading or writing.
    watchers: Mutex<Watchers>,
    /// `Some(revision)` once ready, for the lists that wait.
    applied: watch::Sender<Option<Revision>>,
    /// The newest write under `root` the feed has seen.
    last_write: AtomicI64,
    relist: Notify,
    feed: Arc<Feed>,
    /// What becomes of the changes the feed hands over. Locked before `state`.
    feeding: Mutex<Feeding>,
    /// When the cache last served a list or opened a watch (or was created).
    last_read: Mutex<Instant>,
}

/// What the cache does with the changes the feed hands it.
enum Feeding {
    /// Drops them: it has not started listing, or listing failed (it will list again).
    Idle,
    /// Keeps them while it lists: those after the list's revision are applied once it is in.
    Queued(Vec<WatchEvent>),
    /// Applies those after this revision (earlier ones are in the list it was filled with).
    Live(Revision),
}

impl TypeCache {
    pub(crate) fn new(root: &str, namespaced: bool, feed: Arc<Feed>) -> TypeCache {
        TypeCache {
            root: root.to_string(),
            namespaced,
            state: RwLock::new(State::empty()),
            watchers: Mutex::new(Watchers::default()),
            applied: watch::Sender::new(None),
            last_write: AtomicI64::new(0),
            relist: Notify::new(),
            feed,
            feeding: Mutex::new(Feeding::Idle),
            last_read: Mutex::new(Instant::now()),
        }
    }

    /// Records a read (a list or a watch) of the type.
    pub(crate) fn touch(&self) {
        if let Ok(mut last_read) = self.last_read.lock() {
            *last_read = Instant::now();
        }
    }

    /// Empties the cache when it has no watchers and no read for `idle`; whether it did. Checked
    /// under the state's lock, which a watch holds while it registers: a read that took the cache
    /// before finds it not ready and reads storage.
    fn release_if_idle(&self, idle: Duration) -> bool {
        let Ok(mut feeding) = self.feeding.lock() else {
            return false;
        };
        let Ok(mut state) = self.state.write() else {
            return false;
        };
        let watched = self.watchers.lock().map_or(true, |w| w.len() > 0);
        let read_lately = self.last_read.lock().map_or(true, |at| at.elapsed() < idle);
        if watched || read_lately {
            return false;
        }
        *feeding = Feeding::Idle;
        *state = State::empty();
        true
    }

    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    pub(crate) fn last_write(&self) -> &AtomicI64 {
        &self.last_write
    }

    /// Asks the filling task to list again.
    pub(crate) fn relist(&self) {
        self.relist.notify_one();
    }

    /// A page of the objects under `prefix` (a storage prefix under the root) as fresh as asked.
    pub(crate) async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        freshness: Freshness,
        keep: Option<&(dyn Fn(&Value) -> bool + Sync)>,
    ) -> Result<CachedPage, NotServed> {
        let relative = prefix
            .strip_prefix(&self.root)
            .ok_or(NotServed::OutsideRoot)?;
        self.wait_fresh(freshness).await?;
        let state = self.ready_state()?;
        // After `wait_current`, no write under the root lies between the state's revision and
        // `wanted`, so the objects are also the store's state at `wanted` when that is later.
        let revision = match freshness {
            Freshness::Any => state.revision,
            Freshness::AtLeast(revision) => state.revision.max(revision),
            Freshness::Exactly(revision) if state.revision <= revision => revision,
            Freshness::Exactly(revision) => return Err(NotServed::Moved(revision)),
        };
        let page = page::read(
            &state.objects,
            Range {
                prefix: relative,
                after,
                limit,
            },
            keep,
        );
        Ok(CachedPage::new(page, revision))
    }

    /// Opens a watch of the objects under `prefix` (a storage prefix under the root): the events
    /// after a revision, or the objects as fresh as asked and the events after them.
    pub(crate) async fn watch(
        self: &Arc<Self>,
        prefix: &str,
        start: WatchStart,
    ) -> Result<CachedWatch, NotServed> {
        let relative = prefix
            .strip_prefix(&self.root)
            .ok_or(NotServed::OutsideRoot)?;
        self.wait_fresh(match start {
            WatchStart::After(revision) => Freshness::AtLeast(revision),
            WatchStart::Initial(freshness) => freshness,
        })
        .await?;
        let state = self.ready_state()?;
        let (initial, replay, revision) = match start {
            WatchStart::After(revision) => {
                let replay = state
                    .history
                    .since(revision, relative)
                    .ok_or(NotServed::TooOld(revision))?;
                (Vec::new(), replay, revision)
            }
            WatchStart::Initial(freshness) => {
                let range = Range {
                    prefix: relative,
                    after: None,
                    limit: 0,
                };
                let revision = match freshness {
                    Freshness::Any => state.revision,
                    Freshness::AtLeast(r) | Freshness::Exactly(r) => state.revision.max(r),
                };
                let initial = page::read(&state.objects, range, None).items;
                (initial, Default::default(), revision)
            }
        };
        let (tx, rx) = watchers::queue();
        let id = self
            .watchers
            .lock()
            .map_err(|_| NotServed::NotReady)?
            .add(relative, tx);
        drop(state);
        Ok(CachedWatch {
            initial,
            revision,
            events: CachedEvents::new(replay, rx, self.clone(), relative, id),
        })
    }

    /// Forgets a watcher whose events are no longer read.
    pub(crate) fn unwatch(&self, relative_prefix: &str, id: u64) {
        if let Ok(mut watchers) = self.watchers.lock() {
            watchers.remove(relative_prefix, id);
        }
    }

    /// The latest revision the cache is known to hold the store's state at: its own, or the
    /// store-wide watch's position once every write under the root it saw is applied (and handed
    /// to the watchers, which happens under the same lock).
    pub(crate) fn settled_revision(&self) -> Revision {
        let position = self.feed.position();
        let newest = self.last_write.load(Ordering::SeqCst);
        let revision = self.state.read().map_or(0, |state| state.revision);
        if revision >= newest {
            revision.max(position)
        } else {
            revision
        }
    }

    /// What the cache holds, for metrics.
    pub(crate) fn stats(&self) -> CacheStats {
        let (objects, object_bytes, history_events, history_bytes, revision) =
            self.state.read().map_or((0, 0, 0, 0, 0), |state| {
                let bytes = state.objects.values().map(|o| o.size()).sum::<usize>()
                    + state.objects.keys().map(String::len).sum::<usize>();
                (
                    state.objects.len(),
                    bytes,
                    state.history.len(),
                    state.history.bytes(),
                    state.revision,
                )
            });
        let (watchers, cut_watchers) = self.watchers.lock().map_or((0, 0), |w| (w.len(), w.cut()));
        CacheStats {
            root: self.root.clone(),
            objects,
            object_bytes,
            history_events,
            history_bytes,
            watchers,
            cut_watchers,
            revision,
        }
    }

    fn ready_state(&self) -> Result<std::sync::RwLockReadGuard<'_, State>, NotServed> {
        let state = self.state.read().map_err(|_| NotServed::NotReady)?;
        if !state.ready {
            return Err(NotServed::NotReady);
        }
        Ok(state)
    }

    async fn wait_fresh(&self, freshness: Freshness) -> Result<(), NotServed> {
        match freshness {
            Freshness::Any => self.wait_ready().await,
            Freshness::AtLeast(revision) | Freshness::Exactly(revision) => {
                self.wait_current(revision).await
            }
        }
    }

    /// Waits until the cache has listed the type (it is being created, or lists again).
    async fn wait_ready(&self) -> Result<(), NotServed> {
        let ready = self.applied.subscribe();
        let ready = async move {
            let mut ready = ready;
            ready.wait_for(Option::is_some).await.is_ok()
        };
        match tokio::time::timeout(WAIT, ready).await {
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(NotServed::NotReady),
        }
    }

    /// Waits until the cache holds every write under its root up to `revision`: the feed
    /// has passed `revision` and the cache has applied the newest write it recorded.
    async fn wait_current(&self, revision: Revision) -> Result<(), NotServed> {
        let caught_up = async {
            if !self.feed.reached(revision).await {
                return false;
            }
            let newest = self.last_write.load(std::sync::atomic::Ordering::SeqCst);
            self.applied
                .subscribe()
                .wait_for(|applied| applied.is_some_and(|a| a >= newest))
                .await
                .is_ok()
        };
        match tokio::time::timeout(WAIT, caught_up).await {
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(NotServed::Behind(revision)),
        }
    }

    /// Stops serving and ends every watch until the next fill is in: changes from the feed are
    /// queued from now on.
    pub(crate) fn begin_fill(&self) {
        if let Ok(mut feeding) = self.feeding.lock() {
            *feeding = Feeding::Queued(Vec::new());
        }
        if let Ok(mut state) = self.state.write() {
            state.ready = false;
            if let Ok(mut watchers) = self.watchers.lock() {
                watchers.clear();
            }
        }
        self.applied.send_replace(None);
    }

    /// Lists the type and installs the result, then the changes queued meanwhile that are newer;
    /// returns the list's revision.
    async fn fill(&self) -> Result<Revision, ApiError> {
        self.begin_fill();
        let objects = self.feed.objects();
        let page = objects
            .list(ListRequest::everything(&self.root), &|_| true)
            .await?;
        let mut fresh = Objects::new();
        for object in page.items {
            if let Some((key, object)) = self.entry(&object) {
                fresh.insert(key, object);
            }
        }
        let mut feeding = self
            .feeding
            .lock()
            .map_err(|e| ApiError::internal_error(&e.to_string()))?;
        let mut state = self
            .state
            .write()
            .map_err(|e| ApiError::internal_error(&e.to_string()))?;
        *state = State {
            ready: true,
            revision: page.revision,
            objects: fresh,
            history: History::new(page.revision),
        };
        drop(state);
        self.applied.send_replace(Some(page.revision));
        let queued = match std::mem::replace(&mut *feeding, Feeding::Live(page.revision)) {
            Feeding::Queued(queued) => queued,
            Feeding::Idle | Feeding::Live(_) => Vec::new(),
        };
        for event in queued {
            self.take(objects, page.revision, event);
        }
        Ok(page.revision)
    }

    /// A change from the feed: queued while the cache lists, applied once it is filled.
    pub(crate) fn offer(&self, objects: &ObjectStore, event: WatchEvent) {
        let Ok(mut feeding) = self.feeding.lock() else {
            return;
        };
        match &mut *feeding {
            Feeding::Idle => {}
            Feeding::Queued(queued) => queued.push(event),
            Feeding::Live(filled_at) => self.take(objects, *filled_at, event),
        }
    }

    /// Applies a change newer than the list the cache was filled with (the feed may still be
    /// behind that list when the cache goes live).
    fn take(&self, objects: &ObjectStore, filled_at: Revision, event: WatchEvent) {
        if event.kv.mod_revision <= filled_at {
            return;
        }
        match objects.current_change(event) {
            Ok(change) => self.apply(change),
            Err(error) => {
                tracing::warn!(root = %self.root, error = %error.message,
                    "watch cache: a change could not be decoded; listing again");
                self.relist();
            }
        }
    }

    fn entry(&self, object: &Value) -> Option<(String, Arc<CachedObject>)> {
        let Some(key) = relative_key(object, self.namespaced) else {
            tracing::warn!(root = %self.root, "watch cache: an object without cluster or name");
            return None;
        };
        match CachedObject::new(object) {
            Ok(object) => Some((key, Arc::new(object))),
            Err(error) => {
                tracing::warn!(%error, %key, "watch cache: encoding an object failed");
                None
            }
        }
    }

    /// Drops the events older than [`HISTORY_AGE`], and the frames of those older than
    /// [`FRAME_AGE`].
    fn drop_old_events(&self) {
        let now = std::time::Instant::now();
        if let Ok(mut state) = self.state.write() {
            if let Some(before) = now.checked_sub(HISTORY_AGE) {
                state.history.drop_older(before);
            }
            if let Some(before) = now.checked_sub(FRAME_AGE) {
                state.history.forget_frames(before);
            }
        }
    }

    /// Applies a change: the objects, the history and the watchers see it under one lock. An
    /// object the cache cannot key or encode is left out (and logged), its revision still counts.
    fn apply(&self, change: Change) {
        let revision = change.revision;
        let entry = self.entry(&change.object);
        if let Ok(mut state) = self.state.write() {
            if let Some((key, object)) = entry {
                let previous = match change.kind {
                    ChangeType::Deleted => state.objects.remove(&key),
                    ChangeType::Added | ChangeType::Modified => {
                        state.objects.insert(key.clone(), object.clone())
                    }
                };
                let event = Arc::new(Event::new(change.kind, revision, key, object, previous));
                if let Ok(mut watchers) = self.watchers.lock() {
                    watchers.dispatch(&event, &self.root);
                }
                state.history.push(event);
            }
            state.revision = revision;
        }
        self.applied.send_replace(Some(revision));
    }
}

/// Why [`run`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    Shutdown,
    /// Released: no watcher, and no read for the idle time.
    Idle,
}

/// Keeps a cache filled until `shutdown`, or until it has had no watcher and no read for `idle`:
/// list, then follow the feed, and list again whenever [`TypeCache::relist`] asks (the feed
/// broke, a change could not be decoded); events older than the history keeps are dropped
/// meanwhile, and idleness is checked as often.
pub(crate) async fn run(
    cache: Arc<TypeCache>,
    shutdown: CancellationToken,
    idle: Duration,
) -> Ended {
    loop {
        let filled = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ended::Shutdown,
            filled = cache.fill() => filled,
        };
        if let Err(error) = filled {
            if let Ok(mut feeding) = cache.feeding.lock() {
                *feeding = Feeding::Idle;
            }
            tracing::warn!(root = %cache.root, error = %error.message,
                "watch cache: listing failed");
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ended::Shutdown,
                () = tokio::time::sleep(RETRY_AFTER) => {}
            }
            continue;
        }
        let mut trim = tokio::time::interval(TRIM_EVERY);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ended::Shutdown,
                () = cache.relist.notified() => break,
                _ = trim.tick() => {
                    if cache.release_if_idle(idle) {
                        return Ended::Idle;
                    }
                    cache.drop_old_events();
                }
            }
        }
    }
}
