//! How far the store has been seen: one raw watch of every key, telling consistent lists when a
//! type's cache holds everything written up to a revision.
//!
//! A type's cache follows only its own key prefix, so its revision stands still while other types
//! are written, and "the store is at revision R" does not say whether the cache still misses a
//! change at or below R. kube-apiserver answers that with etcd's progress notifications (which etcd
//! 3.4 lacks, and the embedded store has no equivalent); here one watch of the whole key space,
//! undecoded, moves a position forward with every write and records, per cached type, the newest
//! write under its root. Once the position has reached R, a cache that has applied its type's
//! newest recorded write holds the store's state at R (`TypeCache::wait_current`). If this watch
//! breaks (compacted history, store unavailable) writes may have gone unseen: every cache is
//! told it must reach the revision the watch restarts at, and re-lists to get there.

use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kcp_storage::{Revision, Storage, StorageError, WatchStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cache::TypeCache;

/// How long to wait before opening the watch again after it failed.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The position of the store-wide watch and the caches it records writes for.
pub(crate) struct Progress {
    position: watch::Sender<Revision>,
    caches: RwLock<Vec<Arc<TypeCache>>>,
}

impl Progress {
    /// Reads the store's revision, opens the watch from just after it and follows it in a task
    /// until `shutdown`. The position is the store's revision when this returns, so a cache
    /// registered afterwards lists at that revision or later and misses nothing.
    pub(crate) async fn start(
        storage: Arc<dyn Storage>,
        shutdown: CancellationToken,
    ) -> Result<Arc<Progress>, StorageError> {
        let (position, stream) = open(storage.as_ref()).await?;
        let progress = Arc::new(Progress {
            position: watch::Sender::new(position),
            caches: RwLock::new(Vec::new()),
        });
        tokio::spawn(follow(progress.clone(), storage, stream, shutdown));
        Ok(progress)
    }

    pub(crate) fn register(&self, cache: Arc<TypeCache>) {
        if let Ok(mut caches) = self.caches.write() {
            caches.push(cache);
        }
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

    /// Records one write: first for the cache of its type, then as the new position, so whoever
    /// sees the position also sees the write recorded.
    fn seen(&self, key: &str, revision: Revision) {
        if let Ok(caches) = self.caches.read() {
            for cache in caches.iter().filter(|c| key.starts_with(c.root())) {
                cache.last_write().fetch_max(revision, Ordering::SeqCst);
            }
        }
        self.position.send_replace(revision);
    }

    /// After a gap in the watch: every cache must reach `revision`, by re-listing.
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

async fn open(storage: &dyn Storage) -> Result<(Revision, WatchStream), StorageError> {
    let revision = storage.current_revision().await?;
    let stream = storage.watch("", revision + 1).await?;
    Ok((revision, stream))
}

async fn follow(
    progress: Arc<Progress>,
    storage: Arc<dyn Storage>,
    mut stream: WatchStream,
    shutdown: CancellationToken,
) {
    loop {
        loop {
            let event = tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            match event {
                Some(Ok(event)) => progress.seen(&event.kv.key, event.kv.mod_revision),
                Some(Err(error)) => {
                    tracing::warn!(%error, "watch cache: the store-wide progress watch failed");
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
            match open(storage.as_ref()).await {
                Ok((revision, stream)) => {
                    progress.resync(revision);
                    break stream;
                }
                Err(error) => {
                    tracing::warn!(%error, "watch cache: reopening the progress watch failed");
                }
            }
        };
    }
}
