//! Watch streams: replay from the file, then live events from the writer, never unbounded buffering.
//!
//! A watcher is a cursor `next` (the first revision it has not seen) plus a subscription to the
//! writer's fan-out, which hands it only the commits with a key under its prefix. While it keeps up
//! it takes events from the fan-out; whenever it cannot (it starts at an old revision, or it fell so
//! far behind that its bounded queue filled and the fan-out dropped commits) it reads the missing
//! revisions from the change log in the file, in windows, and then returns to the fan-out. A slow
//! consumer therefore never holds writers up and never makes the store buffer more than its queue's
//! fixed capacity; it only fails when compaction removed the history it still needed (`Compacted`)
//! or the store closed (`Unavailable`).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::stream;

use super::Inner;
use super::fanout::Subscription;
use super::reads::{self, Chunk};
use crate::{Revision, StorageError, WatchEvent, WatchStream};

/// How many revisions one replay read covers.
const REPLAY_WINDOW: i64 = 512;

/// The state of one watch stream.
struct Watcher {
    inner: Arc<Inner>,
    prefix: String,
    /// The first revision not yet delivered or skipped.
    next: Revision,
    live: Subscription,
    pending: VecDeque<WatchEvent>,
    replaying: bool,
    done: bool,
}

/// Starts a stream of the changes under `prefix` from revision `next` on. With `replay` it first
/// reads the file from `next`; without, `next` must be past everything already committed.
pub(super) fn stream(
    inner: Arc<Inner>,
    prefix: &str,
    next: Revision,
    live: Subscription,
    replay: bool,
) -> WatchStream {
    let watcher = Watcher {
        inner,
        prefix: prefix.to_owned(),
        next,
        live,
        pending: VecDeque::new(),
        replaying: replay,
        done: false,
    };
    Box::pin(stream::unfold(watcher, |mut watcher| async move {
        let item = watcher.next_item().await?;
        Some((item, watcher))
    }))
}

impl Watcher {
    async fn next_item(&mut self) -> Option<Result<WatchEvent, StorageError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            let step = if self.replaying {
                self.replay().await
            } else {
                self.follow().await
            };
            if let Err(error) = step {
                self.done = true;
                return Some(Err(error));
            }
        }
    }

    /// Reads the next window of the change log.
    async fn replay(&mut self) -> Result<(), StorageError> {
        let (prefix, from) = (self.prefix.clone(), self.next);
        let Chunk {
            events,
            next,
            caught_up,
        } = self
            .inner
            .read(move |txn| reads::events(txn, &prefix, from, REPLAY_WINDOW))
            .await?;
        self.pending.extend(events);
        self.next = next;
        self.replaying = !caught_up;
        Ok(())
    }

    /// Takes the next commit from the fan-out (only commits with a key under the prefix come),
    /// or switches to replay when the fan-out dropped commits because this watcher's queue was
    /// full.
    async fn follow(&mut self) -> Result<(), StorageError> {
        if self.live.take_lagged() {
            tracing::debug!(next = self.next, "watcher fell behind; replaying from file");
            self.replaying = true;
            return Ok(());
        }
        match self.live.queue.recv().await {
            Some(batch) => {
                let Some(last) = batch.last() else {
                    return Ok(());
                };
                let next = self.next;
                self.pending.extend(
                    batch
                        .iter()
                        .filter(|e| e.kv.mod_revision >= next && e.kv.key.starts_with(&self.prefix))
                        .cloned(),
                );
                self.next = self.next.max(last.kv.mod_revision + 1);
                Ok(())
            }
            None => Err(StorageError::Unavailable("the store was closed".to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::StreamExt;

    use super::super::EmbeddedStore;
    use super::super::writer::FANOUT;
    use tempfile::TempDir;

    use crate::{Storage, StorageError, WatchStream};

    /// More separate commits than the fan-out holds, so a watcher that does not read meanwhile lags.
    const COMMITS: usize = FANOUT + 50;

    /// A store with a watcher that has not read anything while more commits than the fan-out
    /// holds happened; also returns the revisions of those commits.
    async fn lagging_watcher() -> (TempDir, EmbeddedStore, WatchStream, Vec<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("db.redb"))
            .await
            .unwrap();
        let watch = store.watch("/w/", 0).await.unwrap();
        let mut revisions = Vec::with_capacity(COMMITS);
        for i in 0..COMMITS {
            let kv = store
                .create(&format!("/w/{i:05}"), Bytes::from_static(b"x"))
                .await
                .unwrap();
            revisions.push(kv.mod_revision);
        }
        (dir, store, watch, revisions)
    }

    #[tokio::test]
    async fn a_watcher_that_fell_behind_catches_up_from_the_file() {
        let (_dir, store, mut watch, revisions) = lagging_watcher().await;

        let mut seen = Vec::with_capacity(COMMITS);
        while seen.len() < COMMITS {
            let event = watch.next().await.unwrap().unwrap();
            seen.push(event.kv.mod_revision);
        }
        assert_eq!(seen, revisions);
        // And it follows live changes again afterwards.
        let live = store
            .create("/w/live", Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert_eq!(watch.next().await.unwrap().unwrap().kv, live);
    }

    #[tokio::test]
    async fn a_watcher_whose_history_was_compacted_ends_with_compacted() {
        let (_dir, store, mut watch, revisions) = lagging_watcher().await;
        let current = store.current_revision().await.unwrap();
        store.compact(current).await.unwrap();

        match watch.next().await {
            Some(Err(StorageError::Compacted {
                requested,
                compacted,
            })) => {
                assert_eq!((requested, compacted), (revisions[0], current));
            }
            other => panic!("expected Compacted, got {other:?}"),
        }
        assert!(watch.next().await.is_none());
    }

    #[tokio::test]
    async fn closing_the_store_ends_watches_and_releases_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        let store = EmbeddedStore::open(&path).await.unwrap();
        let mut watch = store.watch("/", 0).await.unwrap();
        store.close().await.unwrap();
        assert!(matches!(
            watch.next().await,
            Some(Err(StorageError::Unavailable(_)))
        ));
        assert!(watch.next().await.is_none());
        // Closing twice is harmless, and the file can be opened again at once.
        store.close().await.unwrap();
        let reopened = EmbeddedStore::open(&path).await.unwrap();
        reopened
            .create("/a", Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
}
