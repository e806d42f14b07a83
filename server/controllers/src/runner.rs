//! The loop every queue-driven controller shares: a `follow` side that lists and watches and puts
//! keys on a queue (restarted a second after the store drops its watch), and a `reconcile` side
//! that takes keys one at a time and makes them right, retrying a key later when it is not done.
//! Keys are idempotent work items (a logical cluster, a namespace), so a key queued twice costs at
//! most one extra pass. Like client-go's work queue, different keys are worked on concurrently
//! (up to [`WORKERS`] at a time: a pass mostly waits for the store, and thousands of workspaces
//! created per minute must not queue behind each other), one key never twice at once: a key that
//! comes in while it is being worked on gets one more pass afterwards.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use kcp_apimachinery::ApiError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How many keys are worked on at once.
const WORKERS: usize = 16;

/// How long a dropped watch waits before it is opened again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Where `follow` puts the keys that need a pass.
pub struct Queue<K>(mpsc::UnboundedSender<K>);

impl<K: Send + 'static> Queue<K> {
    pub fn add(&self, key: K) {
        let _ = self.0.send(key);
    }

    fn add_after(&self, key: K, delay: Duration) {
        let queue = self.0.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = queue.send(key);
        });
    }
}

/// What a pass over a key concluded.
pub enum Pass {
    Done,
    /// Not there yet (waiting for something else): look again after the retry delay.
    Again,
    /// Waiting for something slow (room on a full shard): look again after this long.
    After(Duration),
}

/// The two halves of a queue-driven controller.
pub trait Controller: Send + Sync {
    type Key: Debug + Clone + Eq + Hash + Send + 'static;

    /// Named in logs.
    const NAME: &'static str;
    /// How long a key that is not done waits before its next pass.
    const RETRY_AFTER: Duration;

    /// Lists and watches, queueing keys; returns only when the watch fails or ends.
    fn follow(&self, queue: &Queue<Self::Key>)
    -> impl Future<Output = Result<(), ApiError>> + Send;

    /// One pass over a key.
    fn reconcile(&self, key: &Self::Key) -> impl Future<Output = Result<Pass, ApiError>> + Send;
}

/// Runs a controller until `shutdown`.
pub async fn run<C: Controller>(controller: C, shutdown: CancellationToken) {
    let name = C::NAME;
    let retry_after = C::RETRY_AFTER;
    let (sender, mut keys) = mpsc::unbounded_channel::<C::Key>();
    let queue = Queue(sender);
    let work = async {
        let mut running = FuturesUnordered::new();
        let mut busy: HashSet<C::Key> = HashSet::new();
        // Keys that came in while busy: one more pass when the current one ends.
        let mut dirty: HashSet<C::Key> = HashSet::new();
        let pass = |key: C::Key| {
            let controller = &controller;
            async move {
                let outcome = controller.reconcile(&key).await;
                (key, outcome)
            }
        };
        loop {
            tokio::select! {
                key = keys.recv(), if running.len() < WORKERS => {
                    let Some(key) = key else { break };
                    if busy.contains(&key) {
                        dirty.insert(key);
                    } else {
                        busy.insert(key.clone());
                        running.push(pass(key));
                    }
                }
                Some((key, outcome)) = running.next() => {
                    busy.remove(&key);
                    match outcome {
                        Ok(Pass::Done) => {}
                        Ok(Pass::Again) => queue.add_after(key.clone(), retry_after),
                        Ok(Pass::After(delay)) => queue.add_after(key.clone(), delay),
                        Err(error) => {
                            tracing::warn!(controller = name, ?key, %error, "reconcile failed, retrying");
                            queue.add_after(key.clone(), retry_after);
                        }
                    }
                    if dirty.remove(&key) {
                        busy.insert(key.clone());
                        running.push(pass(key));
                    }
                }
            }
        }
    };
    let watch = async {
        loop {
            if let Err(error) = controller.follow(&queue).await {
                tracing::warn!(controller = name, %error, "watch ended, restarting");
            }
            tokio::time::sleep(RESTART_AFTER).await;
        }
    };
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = work => {}
        _ = watch => {}
    }
}
