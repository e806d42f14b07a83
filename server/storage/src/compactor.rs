//! Periodic compaction, the way kube-apiserver does it.
//!
//! History is what makes pinned-revision lists and watch resumption work, but it grows with every
//! write. Every `interval` the compactor compacts to the revision that was current one interval
//! earlier, so clients always have at least one interval of history to resume from, and the store
//! keeps at most about two intervals of it. Failures are logged and retried on the next tick: a
//! missed compaction only means a little more history for a while.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::{Revision, Storage};

/// [`run`] in a task of its own, or nothing when `interval` is zero (compaction disabled). Await
/// the handle after cancelling `stop`.
pub fn spawn(
    store: Arc<dyn Storage>,
    interval: Duration,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    (!interval.is_zero()).then(|| tokio::spawn(run(store, interval, stop)))
}

/// Compacts `store` every `interval` until `stop` is cancelled. Spawn it next to the server.
pub async fn run(store: Arc<dyn Storage>, interval: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The revision that was current at the previous tick: the next compaction point.
    let mut previous: Option<Revision> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = ticks.tick() => {}
        }
        if let Some(revision) = previous {
            match store.compact(revision).await {
                Ok(()) => debug!(revision, "compacted storage"),
                Err(error) => warn!(%error, revision, "storage compaction failed"),
            }
        }
        match store.current_revision().await {
            Ok(current) => previous = Some(current),
            Err(error) => warn!(%error, "cannot read the storage revision to compact to later"),
        }
    }
    debug!("storage compactor stopped");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::embedded::EmbeddedStore;

    #[tokio::test]
    async fn compacts_to_the_revision_of_the_previous_tick_until_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Storage> = Arc::new(
            EmbeddedStore::open(&dir.path().join("db.redb"))
                .await
                .unwrap(),
        );
        let first = store.create("/a", Bytes::from_static(b"1")).await.unwrap();
        store
            .update("/a", Bytes::from_static(b"2"), first.mod_revision)
            .await
            .unwrap();
        let written = store.current_revision().await.unwrap();

        let stop = CancellationToken::new();
        let task = tokio::spawn(run(store.clone(), Duration::from_millis(20), stop.clone()));
        // Generous bound: the compactor needs two ticks; this only guards against hanging forever.
        let mut compacted = 0;
        for _ in 0..3000 {
            compacted = store.compacted_revision().await.unwrap();
            if compacted >= written {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            compacted, written,
            "the compactor never compacted to the written revision"
        );
        stop.cancel();
        task.await.unwrap();

        // Compaction kept the visible state and dropped the history below it.
        assert_eq!(
            store.get("/a").await.unwrap().unwrap().value,
            Bytes::from_static(b"2")
        );
        let old = store.range(crate::RangeRequest {
            prefix: "/".into(),
            revision: first.mod_revision,
            ..Default::default()
        });
        assert!(matches!(
            old.await,
            Err(crate::StorageError::Compacted { .. })
        ));
    }
}
