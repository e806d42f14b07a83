//! The cache of one resource type for every logical cluster: filled by one list, kept current by
//! one storage watch of the type's key prefix, answering lists at the revision it holds.
//!
//! Like kube-apiserver's `cacher` with its `watchCache`: the reflector lists, then watches from the
//! list's revision; on a watch error (compacted history, lost store) it lists again, and while it
//! does the cache is not ready and lists go to storage. The cache knows the revision it is current
//! to (the list's, then each applied change's), and with [`Progress`] whether it holds the store's
//! state at a later revision too, which is what a consistent list waits for
//! (kube's `waitUntilFreshAndBlock`, bounded like kube's by a few seconds). Each change applied is
//! also an [`Event`]: kept in the bounded [`History`] and handed to the type's [`Watchers`], under
//! the same lock that changes the objects, so a watch registered at a revision misses nothing and
//! sees nothing twice. A re-list ends every watch (kube's cacher terminates its watchers too).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::ApiError;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{Change, ChangeType, ListRequest};
use kcp_storage::Revision;
use serde_json::Value;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::history::{Event, FRAME_AGE, HISTORY_AGE, History};
use crate::object::{CachedObject, relative_key};
use crate::page::{self, Objects, Range};
use crate::progress::{Progress, RETRY_AFTER};
use crate::watchers::{CachedEvents, WATCHER_BUFFER, Watchers};
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
    /// The newest write under `root` the progress watch has seen.
    last_write: AtomicI64,
    relist: Notify,
    progress: Arc<Progress>,
}

impl TypeCache {
    pub(crate) fn new(root: &str, namespaced: bool, progress: Arc<Progress>) -> TypeCache {
        TypeCache {
            root: root.to_string(),
            namespaced,
            state: RwLock::new(State::empty()),
            watchers: Mutex::new(Watchers::default()),
            applied: watch::Sender::new(None),
            last_write: AtomicI64::new(0),
            relist: Notify::new(),
            progress,
        }
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
        let (tx, rx) = mpsc::channel(WATCHER_BUFFER);
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
        let position = self.progress.position();
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

    /// Waits until the cache holds every write under its root up to `revision`: the progress watch
    /// has passed `revision` and the cache has applied the newest write it recorded.
    async fn wait_current(&self, revision: Revision) -> Result<(), NotServed> {
        let caught_up = async {
            if !self.progress.reached(revision).await {
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

    /// Lists the type and installs the result; returns its revision.
    async fn fill(&self, objects: &ObjectStore) -> Result<Revision, ApiError> {
        if let Ok(mut state) = self.state.write() {
            state.ready = false;
            if let Ok(mut watchers) = self.watchers.lock() {
                watchers.clear();
            }
        }
        self.applied.send_replace(None);
        let page = objects
            .list(ListRequest::everything(&self.root), &|_| true)
            .await?;
        let mut fresh = Objects::new();
        for object in page.items {
            if let Some((key, object)) = self.entry(&object) {
                fresh.insert(key, object);
            }
        }
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
        Ok(page.revision)
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

/// Keeps a cache filled until `shutdown`: list, watch from the list's revision, and list again
/// whenever the watch fails or [`TypeCache::relist`] asks.
pub(crate) async fn run(cache: Arc<TypeCache>, objects: ObjectStore, shutdown: CancellationToken) {
    loop {
        let filled = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            filled = cache.fill(&objects) => filled,
        };
        match filled {
            Ok(revision) => match objects.watch(&cache.root, revision + 1).await {
                Ok(changes) => {
                    let mut changes = std::pin::pin!(changes);
                    let mut trim = tokio::time::interval(TRIM_EVERY);
                    loop {
                        let change = tokio::select! {
                            biased;
                            () = shutdown.cancelled() => return,
                            () = cache.relist.notified() => break,
                            _ = trim.tick() => {
                                cache.drop_old_events();
                                continue;
                            }
                            change = changes.next() => change,
                        };
                        match change {
                            Some(Ok(change)) => cache.apply(change),
                            Some(Err(error)) => {
                                tracing::info!(root = %cache.root, error = %error.message,
                                    "watch cache: the watch ended; listing again");
                                break;
                            }
                            None => break,
                        }
                    }
                    continue;
                }
                Err(error) => {
                    tracing::warn!(root = %cache.root, error = %error.message,
                        "watch cache: watching failed");
                }
            },
            Err(error) => {
                tracing::warn!(root = %cache.root, error = %error.message,
                    "watch cache: listing failed");
            }
        }
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(RETRY_AFTER) => {}
        }
    }
}
