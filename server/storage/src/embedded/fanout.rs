//! The writer's fan-out of commits to watch streams, routed by key prefix: a commit reaches (and
//! wakes) only the watchers with at least one of its keys under their prefix, as etcd's watchable
//! store hands each event only to the watchers of its key range.
//!
//! A shard runs dozens of storage watchers (the controllers', the indexes', replication's, the
//! watch cache's), each on the keys of one or a few resources. Sent every commit, each woke for
//! every write anywhere: at a workspace's dozen writes that was hundreds of task wake-ups per
//! workspace for nothing (docs/performance.md, "Where the CPU per workspace went after issue 18").
//! Each watcher has its own bounded queue of [`FANOUT`] commits; a watcher that lets it fill is
//! marked lagged and reads what it missed from the change log in the file, as before, so a slow
//! watcher still never holds the writer up nor makes the store buffer without bound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::{self, error::TrySendError};

use super::writer::{Batch, FANOUT};

/// Every watcher's queue, with the prefix that decides what it receives.
#[derive(Debug, Default)]
pub(super) struct Fanout {
    watchers: Mutex<Vec<Subscriber>>,
}

#[derive(Debug)]
struct Subscriber {
    prefix: String,
    queue: mpsc::Sender<Batch>,
    lagged: Arc<AtomicBool>,
}

/// One watcher's side: the commits with a key under its prefix, and whether some were dropped
/// because its queue was full (then it reads the change log from where it is).
#[derive(Debug)]
pub(super) struct Subscription {
    pub(super) queue: mpsc::Receiver<Batch>,
    pub(super) lagged: Arc<AtomicBool>,
}

impl Subscription {
    /// Whether commits were dropped since the last call (clears the mark).
    pub(super) fn take_lagged(&self) -> bool {
        self.lagged.swap(false, Ordering::SeqCst)
    }
}

impl Fanout {
    fn watchers(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.watchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A queue of every commit from now on with a key under `prefix`.
    pub(super) fn subscribe(&self, prefix: &str) -> Subscription {
        let (queue, receiver) = mpsc::channel(FANOUT);
        let lagged = Arc::new(AtomicBool::new(false));
        self.watchers().push(Subscriber {
            prefix: prefix.to_owned(),
            queue,
            lagged: lagged.clone(),
        });
        Subscription {
            queue: receiver,
            lagged,
        }
    }

    /// Hands a commit to each watcher with a key of it under its prefix; forgets watchers that
    /// are gone.
    pub(super) fn publish(&self, batch: &Batch) {
        let mut watchers = self.watchers();
        watchers.retain(|w| !w.queue.is_closed());
        for watcher in watchers.iter() {
            if !batch.iter().any(|e| e.kv.key.starts_with(&watcher.prefix)) {
                continue;
            }
            if let Err(TrySendError::Full(_)) = watcher.queue.try_send(batch.clone()) {
                watcher.lagged.store(true, Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tokio::sync::mpsc::error::TryRecvError;

    use super::*;
    use crate::{EventKind, KeyValue, WatchEvent};

    fn commit(keys: &[&str]) -> Batch {
        keys.iter()
            .zip(1..)
            .map(|(key, revision)| WatchEvent {
                kind: EventKind::Put,
                kv: KeyValue {
                    key: (*key).to_owned(),
                    value: Bytes::from_static(b"x"),
                    create_revision: revision,
                    mod_revision: revision,
                },
                prev: None,
            })
            .collect()
    }

    #[test]
    fn a_commit_reaches_only_the_watchers_of_its_keys() {
        let fanout = Fanout::default();
        let mut a = fanout.subscribe("/a/");
        let mut b = fanout.subscribe("/b/");
        let mut all = fanout.subscribe("");
        fanout.publish(&commit(&["/b/1"]));
        fanout.publish(&commit(&["/a/1", "/b/2"]));
        assert_eq!(a.queue.try_recv().unwrap().len(), 2);
        assert_eq!(a.queue.try_recv().unwrap_err(), TryRecvError::Empty);
        assert_eq!(b.queue.try_recv().unwrap()[0].kv.key, "/b/1");
        assert_eq!(b.queue.try_recv().unwrap().len(), 2);
        assert_eq!(all.queue.try_recv().unwrap().len(), 1);
        assert_eq!(all.queue.try_recv().unwrap().len(), 2);
    }

    #[test]
    fn a_full_queue_marks_its_watcher_lagged_and_others_of_other_keys_never() {
        let fanout = Fanout::default();
        let a = fanout.subscribe("/a/");
        let b = fanout.subscribe("/b/");
        for _ in 0..=FANOUT {
            fanout.publish(&commit(&["/a/1"]));
        }
        assert!(a.take_lagged());
        assert!(!a.take_lagged());
        assert!(!b.take_lagged());
    }

    #[test]
    fn a_dropped_watcher_is_forgotten() {
        let fanout = Fanout::default();
        drop(fanout.subscribe("/a/"));
        let _kept = fanout.subscribe("/a/");
        fanout.publish(&commit(&["/a/1"]));
        assert_eq!(fanout.watchers().len(), 1);
    }
}
