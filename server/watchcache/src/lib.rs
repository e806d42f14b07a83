//! The shared watch cache: one in-memory copy of each resource type, for every logical cluster,
//! serving lists and watches without reading, decoding and encoding every object from storage.
//!
//! kube-apiserver puts a `cacher` (a `watchCache` fed by one reflector) in front of etcd for every
//! resource; kcp shares each one among all logical clusters, which is what keeps a workspace cheap
//! here too: a type's cache is created when the type is listed or watched a second time within
//! [`DEMAND_WINDOW`] (a server whose clients never read a type, or list it once to learn a
//! revision, pays nothing for it), filled by one list and kept current by the one watch of the
//! whole store that feeds every cache and tells lists how current each is ([`feed`]), and released
//! after [`IDLE_RELEASE`] without reads or watchers (kube's caches live as long as the server; here a
//! type read once in a while should not hold its objects for good). Lists are served as kube's
//! cacher serves them: `resourceVersion` unset (consistent)
//! and `NotOlderThan` wait, bounded, until the cache has reached the revision; `"0"` takes the cache
//! as it is; a continuation is served when the cache still holds its revision. Whatever the cache
//! cannot serve ([`NotServed`]) the caller reads from storage, with the same answers and the same
//! `continue` tokens. Watches are served as kube's cacher serves them: from a revision the cache's
//! bounded history still covers, or with the initial state first (WatchList); each event is
//! handed to the watchers it concerns as one shared [`Event`], whose object carries its encodings
//! once made ([`CachedObject`]), so N watchers cost N channel sends and one encoding per format,
//! and a watcher that falls behind is cut off instead of holding anything up. No HTTP here.

mod cache;
mod feed;
mod history;
mod object;
mod page;
mod queue;
mod watchers;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::continuation::Continuation;
use kcp_storage::{Revision, StorageError};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, DropGuard};

use cache::TypeCache;
use feed::Feed;
pub use history::{Event, FrameKey};
pub use object::{CachedObject, EncodeError};
pub use watchers::CachedEvents;

/// A type listed again within this time after a list gets a cache.
pub const DEMAND_WINDOW: Duration = Duration::from_secs(600);

/// A cache without watchers that has served no list and opened no watch for this long is released
/// (checked every 10 s): its memory is freed, and the next two reads of the type build it again.
pub const IDLE_RELEASE: Duration = Duration::from_secs(600);

/// How current a list must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Whatever the cache holds (`resourceVersion=0`).
    Any,
    /// The store's state at this revision or later (consistent lists, `NotOlderThan`).
    AtLeast(Revision),
    /// The store's state at exactly this revision (the next page of a list read at it).
    Exactly(Revision),
}

/// What a list asks the cache for.
#[derive(Debug, Clone, Copy)]
pub struct ListQuery<'a> {
    /// The type's root, `ResourceKeys::all_clusters()`: which cache.
    pub root: &'a str,
    /// Whether the type is namespaced (where the namespace is in its keys).
    pub namespaced: bool,
    /// The storage prefix the list covers (the root, a logical cluster, or a namespace in one).
    pub prefix: &'a str,
    /// Continue after this key, relative to `prefix` (a `continue` token's).
    pub after: Option<&'a str>,
    /// At most this many items; `0` for all.
    pub limit: usize,
    pub freshness: Freshness,
}

/// What a watch asks the cache for.
#[derive(Debug, Clone, Copy)]
pub struct WatchQuery<'a> {
    /// The type's root, `ResourceKeys::all_clusters()`: which cache.
    pub root: &'a str,
    /// Whether the type is namespaced (where the namespace is in its keys).
    pub namespaced: bool,
    /// The storage prefix watched (the root, a logical cluster, or a namespace in one).
    pub prefix: &'a str,
}

/// A page of a list served from the cache, in storage's order.
#[derive(Debug)]
pub struct CachedPage {
    /// The objects in their stored form (before the type's `storage_to_api`).
    pub items: Vec<Arc<CachedObject>>,
    /// The revision the page is the store's state at: the list's `resourceVersion`.
    pub revision: Revision,
    /// Set when more items follow, in the format storage's pages use.
    pub continue_token: Option<String>,
}

impl CachedPage {
    fn new(page: page::Page, revision: Revision) -> CachedPage {
        CachedPage {
            items: page.items,
            revision,
            continue_token: page
                .continue_after
                .map(|after| Continuation::new(revision, &after).encode()),
        }
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// The changes after this revision.
    After(Revision),
    /// The objects as fresh as asked (never [`Freshness::Exactly`]), then the changes after them
    /// (`sendInitialEvents=true`, and legacy watches from `""` or `"0"`).
    Initial(Freshness),
}

/// A watch served from the cache.
pub struct CachedWatch {
    /// The initial objects in key order (for [`WatchStart::Initial`]), in their stored form.
    pub initial: Vec<Arc<CachedObject>>,
    /// The revision the watch starts after: the initial objects are the store's state at it.
    pub revision: Revision,
    pub events: CachedEvents,
}

/// What one type's cache holds, for metrics.
#[derive(Debug, Clone)]
pub struct CacheStats {
    /// The type's storage root.
    pub root: String,
    pub objects: usize,
    /// The objects' keys, JSON and the encodings kept beside it.
    pub object_bytes: usize,
    pub history_events: usize,
    /// The JSON of the objects the history's events hold (mostly shared with the objects).
    pub history_bytes: usize,
    pub watchers: usize,
    /// Watchers cut off for falling behind since the cache was created.
    pub cut_watchers: u64,
    pub revision: Revision,
}

/// Why a list or watch was not served from the cache; the caller reads storage instead.
#[derive(Debug, thiserror::Error)]
pub enum NotServed {
    #[error("the type has not been listed again within the demand window")]
    Cold,
    #[error("the cache did not finish listing the type in time")]
    NotReady,
    #[error("the cache did not reach revision {0} in time")]
    Behind(Revision),
    #[error("the cache has moved past revision {0}")]
    Moved(Revision),
    #[error("the cache's history does not reach back to revision {0}")]
    TooOld(Revision),
    #[error("the list's prefix is not under the type's root")]
    OutsideRoot,
    #[error("starting the store-wide watch: {0}")]
    Feed(#[from] StorageError),
}

/// The caches by type root.
type Caches = HashMap<String, Arc<TypeCache>>;

/// The caches of every type listed so far, created on demand.
pub struct WatchCaches {
    objects: ObjectStore,
    shutdown: CancellationToken,
    /// Stops every cache's tasks when the caches are dropped.
    _stop: DropGuard,
    /// Started with the first cache; the lock also makes creating a cache happen once.
    feed: tokio::sync::Mutex<Option<Arc<Feed>>>,
    caches: Arc<RwLock<Caches>>,
    /// How many times each type's cache was released for being idle.
    released: Arc<Mutex<HashMap<String, u64>>>,
    /// When each type without a cache was last listed.
    listed: Mutex<HashMap<String, Instant>>,
}

impl WatchCaches {
    /// No cache and no task until the first list; all stop when `shutdown` is cancelled.
    pub fn new(objects: ObjectStore, shutdown: &CancellationToken) -> WatchCaches {
        let shutdown = shutdown.child_token();
        WatchCaches {
            objects,
            _stop: shutdown.clone().drop_guard(),
            shutdown,
            feed: tokio::sync::Mutex::new(None),
            caches: Arc::new(RwLock::new(HashMap::new())),
            released: Arc::new(Mutex::new(HashMap::new())),
            listed: Mutex::new(HashMap::new()),
        }
    }

    /// A page from the type's cache. The first list of a type is answered [`NotServed::Cold`];
    /// the next within [`DEMAND_WINDOW`] creates the cache and, like every list while it fills,
    /// waits (at most a few seconds) to be served from it.
    pub async fn list(
        &self,
        query: ListQuery<'_>,
        keep: Option<&(dyn Fn(&Value) -> bool + Sync)>,
    ) -> Result<CachedPage, NotServed> {
        let cache = self.demanded(query.root, query.namespaced).await?;
        cache
            .list(
                query.prefix,
                query.after,
                query.limit,
                query.freshness,
                keep,
            )
            .await
    }

    /// A watch from the type's cache, created on demand as for [`Self::list`] (a watch counts as
    /// a read of the type as a list does).
    pub async fn watch(
        &self,
        query: WatchQuery<'_>,
        start: WatchStart,
    ) -> Result<CachedWatch, NotServed> {
        let cache = self.demanded(query.root, query.namespaced).await?;
        cache.watch(query.prefix, start).await
    }

    /// How many types have a cache.
    pub fn cached_types(&self) -> usize {
        self.caches.read().map_or(0, |caches| caches.len())
    }

    /// How many times each type's cache was released for being idle ([`IDLE_RELEASE`]), by type
    /// root.
    pub fn released(&self) -> Vec<(String, u64)> {
        let mut released: Vec<(String, u64)> = self.released.lock().map_or_else(
            |_| Vec::new(),
            |released| released.iter().map(|(r, n)| (r.clone(), *n)).collect(),
        );
        released.sort();
        released
    }

    /// What every cache holds, by type root.
    pub fn stats(&self) -> Vec<CacheStats> {
        let caches: Vec<Arc<TypeCache>> = self
            .caches
            .read()
            .map_or_else(|_| Vec::new(), |caches| caches.values().cloned().collect());
        let mut stats: Vec<CacheStats> = caches.iter().map(|cache| cache.stats()).collect();
        stats.sort_by(|a, b| a.root.cmp(&b.root));
        stats
    }

    /// The type's cache (perhaps still filling), or [`NotServed::Cold`] for the first read of a
    /// type; the next within [`DEMAND_WINDOW`] creates the cache. Reads of a cache that is filling
    /// wait for it (kube's cacher waits for its initial list too), rather than all reading storage
    /// at once while the fill reads it as well.
    async fn demanded(&self, root: &str, namespaced: bool) -> Result<Arc<TypeCache>, NotServed> {
        if let Some(cache) = self.existing(root) {
            cache.touch();
            return Ok(cache);
        }
        if !self.listed_again(root) {
            return Err(NotServed::Cold);
        }
        self.create(root, namespaced).await
    }

    /// Records a read of a type without a cache; whether it had been listed within the window.
    fn listed_again(&self, root: &str) -> bool {
        let Ok(mut listed) = self.listed.lock() else {
            return false;
        };
        let now = Instant::now();
        listed.retain(|_, at| now.duration_since(*at) < DEMAND_WINDOW);
        listed.insert(root.to_string(), now).is_some()
    }

    fn existing(&self, root: &str) -> Option<Arc<TypeCache>> {
        self.caches.read().ok()?.get(root).cloned()
    }

    async fn create(&self, root: &str, namespaced: bool) -> Result<Arc<TypeCache>, NotServed> {
        let mut started = self.feed.lock().await;
        if let Some(cache) = self.existing(root) {
            return Ok(cache);
        }
        let feed = match &*started {
            Some(feed) => feed.clone(),
            None => {
                let feed = Feed::start(self.objects.clone(), self.shutdown.clone()).await?;
                *started = Some(feed.clone());
                feed
            }
        };
        let cache = Arc::new(TypeCache::new(root, namespaced, feed.clone()));
        feed.register(cache.clone());
        if let Ok(mut caches) = self.caches.write() {
            caches.insert(root.to_string(), cache.clone());
        }
        if let Ok(mut listed) = self.listed.lock() {
            listed.remove(root);
        }
        tokio::spawn(self.keep_filled(cache.clone(), feed));
        Ok(cache)
    }

    /// Keeps the cache filled until shutdown or until it is released for being idle; then it is
    /// forgotten by the feed and the caches (a read that took it just before finds it empty and
    /// reads storage).
    fn keep_filled(
        &self,
        cache: Arc<TypeCache>,
        feed: Arc<Feed>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let shutdown = self.shutdown.clone();
        let caches = self.caches.clone();
        let released = self.released.clone();
        async move {
            if cache::run(cache.clone(), shutdown, IDLE_RELEASE).await == cache::Ended::Idle {
                feed.unregister(&cache);
                if let Ok(mut caches) = caches.write()
                    && caches
                        .get(cache.root())
                        .is_some_and(|c| Arc::ptr_eq(c, &cache))
                {
                    caches.remove(cache.root());
                }
                if let Ok(mut released) = released.lock() {
                    *released.entry(cache.root().to_string()).or_default() += 1;
                }
                tracing::info!(root = %cache.root(), "watch cache released for being idle");
            }
        }
    }
}
