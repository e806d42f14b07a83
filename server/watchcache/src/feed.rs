//! The one storage watch behind every cache: a raw watch of every key that hands each change to
//! the cache of its type and tells consistent lists how far the store has been seen.
//!
//! kube-apiserver gives each resource's cacher a reflector (a list and a watch of its own) and
//! learns how current a cache is from etcd's progress notifications, which etcd 3.4 lacks and the
//! embedded store has no equivalent of. Here one watch of the whole key space, undecoded, does both:
//! a change under a cached type's root is handed to that cache (decoded only then), then recorded
//! as the type's newest write, then the position moves on; once the position has reached R, a
//! cache that has applied its type's newest recorded write holds the store's state at R
//! (`TypeCache::wait_current`). One watcher for any number of cached types matters to the
//! embedded store, which wakes every watcher for every commit: each further storage watcher cost
//! about half a millisecond of CPU per workspace deleted (docs/performance.md). If this watch
//! breaks (compacted history, store unavailable) writes may have gone unseen: every cache is told
//! it must reach the revision the watch restarts at, and lists again to get there.

use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kcp_registry::storage::ObjectStore;
use kcp_storage::{Revision, StorageError, WatchEvent, WatchStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cache::TypeCache;

/// How long to wait before opening the watch again after it failed.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The position of the store-wide watch and the caches it feeds.
pub(crate) struct Feed {
    objects: ObjectStore,
    position: watch::Sender<Revision>,
    caches: RwLock<Vec<Arc<TypeCache>>>,
}

impl Feed {
    /// Reads the store's revision, opens the watch from just after it and follows it in a task
    /// until `shutdown`. The position is the store's revision when this returns, so a cache
    /// registered afterwards lists at that revision or later and misses nothing.
    pub(crate) async fn start(
        objects: ObjectStore,
        shutdown: CancellationToken,
    ) -> Result<Arc<Feed>, StorageError> {
        let (position, stream) = open(&objects).await?;
        let feed = Arc::new(Feed {
            objects,
            position: watch::Sender::new(position),
            caches: RwLock::new(Vec::new()),
        });
        tokio::spawn(follow(feed.clone(), stream, shutdown));
        Ok(feed)
    }

    pub(crate) fn register(&self, cache: Arc<TypeCache>) {
        if let Ok(mut caches) = self.caches.write() {
            caches.push(cache);
        }
    }

    /// Stops handing changes to a cache that was released.
    pub(crate) fn unregister(&self, cache: &Arc<TypeCache>) {
        if let Ok(mut caches) = self.caches.write() {
            caches.retain(|c| !Arc::ptr_eq(c, cache));
        }
    }

    pub(crate) fn objects(&self) -> &ObjectStore {
        &self.objects
    }

    /// The revision up to which the watch has seen every write.
    pub(crate) fn position(&self) -> Revision {
        *self.position.borrow()
    }

    /// Waits until the watch has seen every write up to `revision`.
    pub(crate) async fn reached(&self, revision: Revision) -> bool {
        self.position
            .subscribe()
            .wait_for(|position| *position >= revision)
            .await
            .is_ok()
    }

    /// One write: handed to the cache of its type, recorded as that type's newest, then the new
    /// position, so whoever sees the position also sees the write recorded.
    fn seen(&self, event: WatchEvent) {
        let revision = event.kv.mod_revision;
        if let Ok(caches) = self.caches.read()
            && let Some(cache) = caches
                .iter()
                .filter(|c| event.kv.key.starts_with(c.root()))
                .max_by_key(|c| c.root().len())
        {
            cache.offer(&self.objects, event);
            cache.last_write().fetch_max(revision, Ordering::SeqCst);
        }
        self.position.send_replace(revision);
    }

    /// After a gap in the watch: every cache must reach `revision`, by listing again.
    fn resync(&self, revision: Revision) {
        if let Ok(caches) = self.caches.read() {
            for cache in caches.iter() {
                cache.last_write().fetch_max(revision, Ordering::SeqCst);
                cache.relist();
            }
        }
        self.position.send_replace(revision);
    }
}

async fn open(objects: &ObjectStore) -> Result<(Revision, WatchStream), StorageError> {
    let storage = objects.storage();
    let revision = storage.current_revision().await?;
    let stream = storage.watch("", revision + 1).await?;
    Ok((revision, stream))
}

async fn follow(feed: Arc<Feed>, mut stream: WatchStream, shutdown: CancellationToken) {
    loop {
        loop {
            let event = tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            match event {
                Some(Ok(event)) => feed.seen(event),
                Some(Err(error)) => {
                    tracing::warn!(%error, "watch cache: the store-wide watch failed");
                    break;
                }
                None => break,
            }
        }
        stream = loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(RETRY_AFTER) => {}
            }
            match open(&feed.objects).await {
                Ok((revision, stream)) => {
                    feed.resync(revision);
                    break stream;
                }
                Err(error) => {
                    tracing::warn!(%error, "watch cache: reopening the store-wide watch failed");
                }
            }
        };
    }
}
