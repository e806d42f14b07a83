//! The watchers of one type's cache: each event is handed to the watchers whose prefix holds it,
//! without copying or encoding it, and a watcher that does not keep up is cut off.
//!
//! kube-apiserver's `cacher` dispatches every event to its watchers through a buffered channel
//! each, indexed by namespace and name so an event wakes only the watchers it concerns, and
//! terminates a watcher whose buffer stays full ("Forcing watcher close due to unresponsiveness"):
//! the client sees its stream end and watches again from the last revision it received. The same
//! here, indexed by logical cluster: a watch of one workspace is only offered that workspace's
//! events, so 1,000 workspaces with a watcher each cost one channel send per event, not 1,000.
//! Handing an event over never waits: a full buffer ends that watcher, never the cache's writer
//! nor the other watchers.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use kcp_storage::Revision;

use crate::cache::TypeCache;
use crate::history::Event;
use crate::queue::{self, Receiver, Refused, Sender};

/// Events a watcher may have pending before it is cut off.
pub(crate) const WATCHER_BUFFER: usize = 1024;

/// A watcher's queue: the cache's end for [`Watchers::add`], the watch's for [`CachedEvents`].
pub(crate) fn queue() -> (Sender<Arc<Event>>, Receiver<Arc<Event>>) {
    queue::bounded(WATCHER_BUFFER)
}

struct Watcher {
    id: u64,
    /// Keys relative to the type's root that the watcher sees start with this.
    prefix: String,
    tx: Sender<Arc<Event>>,
}

/// Every watcher of one type's cache, by the logical cluster its prefix is in.
#[derive(Default)]
pub(crate) struct Watchers {
    next_id: u64,
    /// Watchers of every logical cluster.
    everywhere: Vec<Watcher>,
    by_cluster: HashMap<String, Vec<Watcher>>,
    /// Watchers cut off for falling behind, since the cache was created.
    cut: u64,
}

/// The logical cluster a relative prefix is inside, if it is inside one.
fn cluster_of(prefix: &str) -> Option<&str> {
    prefix.split_once('/').map(|(cluster, _)| cluster)
}

impl Watchers {
    pub(crate) fn add(&mut self, prefix: &str, tx: Sender<Arc<Event>>) -> u64 {
        self.next_id += 1;
        let watcher = Watcher {
            id: self.next_id,
            prefix: prefix.to_string(),
            tx,
        };
        match cluster_of(prefix) {
            Some(cluster) => self
                .by_cluster
                .entry(cluster.to_string())
                // Most clusters have one watcher (an informer per workspace): no room for four.
                .or_insert_with(|| Vec::with_capacity(1))
                .push(watcher),
            None => self.everywhere.push(watcher),
        }
        self.next_id
    }

    pub(crate) fn remove(&mut self, prefix: &str, id: u64) {
        match cluster_of(prefix) {
            Some(cluster) => {
                if let Some(watchers) = self.by_cluster.get_mut(cluster) {
                    watchers.retain(|w| w.id != id);
                    if watchers.is_empty() {
                        self.by_cluster.remove(cluster);
                    }
                }
            }
            None => self.everywhere.retain(|w| w.id != id),
        }
    }

    /// Hands the event to every watcher whose prefix holds its key; drops the watchers that are
    /// gone or whose buffer is full.
    pub(crate) fn dispatch(&mut self, event: &Arc<Event>, root: &str) {
        let key = event.key();
        let holds = |w: &Watcher| key.starts_with(&w.prefix);
        let in_cluster = cluster_of(key).and_then(|cluster| self.by_cluster.get(cluster));
        let receivers = self.everywhere.iter().filter(|w| holds(w)).count()
            + in_cluster.map_or(0, |watchers| watchers.iter().filter(|w| holds(w)).count());
        event.set_shared(receivers > 1);
        let mut cut = 0;
        offer(&mut self.everywhere, event, &mut cut);
        if let Some(cluster) = cluster_of(key)
            && let Some(watchers) = self.by_cluster.get_mut(cluster)
        {
            offer(watchers, event, &mut cut);
            if watchers.is_empty() {
                self.by_cluster.remove(cluster);
            }
        }
        if cut > 0 {
            tracing::warn!(%root, cut, buffer = WATCHER_BUFFER,
                "watch cache: watchers fell behind and were closed; they will watch again");
            self.cut += cut;
        }
    }

    /// Ends every watch (the cache lists again, and will not send the changes in between).
    pub(crate) fn clear(&mut self) {
        self.everywhere.clear();
        self.by_cluster.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.everywhere.len() + self.by_cluster.values().map(Vec::len).sum::<usize>()
    }

    pub(crate) fn cut(&self) -> u64 {
        self.cut
    }
}

fn offer(watchers: &mut Vec<Watcher>, event: &Arc<Event>, cut: &mut u64) {
    watchers.retain(|watcher| {
        if !event.key().starts_with(&watcher.prefix) {
            return true;
        }
        match watcher.tx.try_send(event.clone()) {
            Ok(()) => true,
            Err(Refused::Full) => {
                *cut += 1;
                false
            }
            Err(Refused::Closed) => false,
        }
    });
}

/// The events of one watch served from the cache, in revision order: first those the history
/// held after the watch's start, then each as the cache applies it. Ends (`None`) when the
/// watcher fell behind, the cache lists again, or the server stops; the client then watches
/// again from the last revision it received, as it does when kube-apiserver ends a watch.
pub struct CachedEvents {
    replay: VecDeque<Arc<Event>>,
    rx: Receiver<Arc<Event>>,
    cache: Arc<TypeCache>,
    prefix: String,
    id: u64,
}

impl CachedEvents {
    pub(crate) fn new(
        replay: VecDeque<Arc<Event>>,
        rx: Receiver<Arc<Event>>,
        cache: Arc<TypeCache>,
        prefix: &str,
        id: u64,
    ) -> CachedEvents {
        CachedEvents {
            replay,
            rx,
            cache,
            prefix: prefix.to_string(),
            id,
        }
    }

    /// The next event; `None` once the watch has ended.
    pub async fn next(&mut self) -> Option<Arc<Event>> {
        match self.replay.pop_front() {
            Some(event) => Some(event),
            None => self.rx.recv().await,
        }
    }

    /// The next event if one is pending.
    pub fn try_next(&mut self) -> Option<Arc<Event>> {
        self.replay.pop_front().or_else(|| self.rx.try_recv())
    }

    /// A revision this watch may report in a BOOKMARK once the events pending now have been
    /// sent: the store's state at it holds nothing under the watch's prefix that they do not
    /// carry. Read it first, then send what [`Self::try_next`] yields, then the bookmark. `None`
    /// once the watch has ended (cut off, or the cache lists again): events it will never hand
    /// over may lie below the cache's revision then.
    pub fn settled_revision(&self) -> Option<Revision> {
        // In this order: a watch still open after the revision was read was handed every event
        // up to it (events are handed over before the revision they bring is visible).
        let settled = self.cache.settled_revision();
        (!self.rx.is_closed()).then_some(settled)
    }
}

impl Drop for CachedEvents {
    fn drop(&mut self) {
        self.cache.unwatch(&self.prefix, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::CachedObject;
    use kcp_registry::storage::objects::ChangeType;
    use serde_json::json;

    fn event(key: &str) -> Arc<Event> {
        let object = Arc::new(CachedObject::new(&json!({})).unwrap());
        Arc::new(Event::new(
            ChangeType::Added,
            1,
            key.to_string(),
            object,
            None,
        ))
    }

    #[test]
    fn events_reach_the_watchers_whose_prefix_holds_them() {
        let mut watchers = Watchers::default();
        let (all_tx, mut all) = queue::bounded(10);
        let (a_tx, mut a) = queue::bounded(10);
        let (a_ns_tx, mut a_ns) = queue::bounded(10);
        let (b_tx, mut b) = queue::bounded(10);
        watchers.add("", all_tx);
        watchers.add("a/", a_tx);
        watchers.add("a/ns/", a_ns_tx);
        watchers.add("b/", b_tx);
        watchers.dispatch(&event("a/ns/x"), "/r/");
        watchers.dispatch(&event("a/other/x"), "/r/");
        watchers.dispatch(&event("ab/ns/x"), "/r/");
        let keys = |rx: &mut Receiver<Arc<Event>>| {
            let mut keys = Vec::new();
            while let Some(e) = rx.try_recv() {
                keys.push(e.key().to_string());
            }
            keys
        };
        assert_eq!(keys(&mut all), ["a/ns/x", "a/other/x", "ab/ns/x"]);
        assert_eq!(keys(&mut a), ["a/ns/x", "a/other/x"]);
        assert_eq!(keys(&mut a_ns), ["a/ns/x"]);
        assert!(keys(&mut b).is_empty());
    }

    #[test]
    fn a_full_watcher_is_cut_and_a_gone_one_dropped_without_holding_others() {
        let mut watchers = Watchers::default();
        let (slow_tx, slow) = queue::bounded(2);
        let (gone_tx, gone) = queue::bounded(2);
        let (ok_tx, mut ok) = queue::bounded(10);
        watchers.add("a/", slow_tx);
        watchers.add("a/", gone_tx);
        watchers.add("a/", ok_tx);
        drop(gone);
        for _ in 0..3 {
            watchers.dispatch(&event("a/x"), "/r/");
        }
        assert_eq!(watchers.len(), 1);
        assert_eq!(watchers.cut(), 1);
        let mut received = 0;
        while ok.try_recv().is_some() {
            received += 1;
        }
        assert_eq!(received, 3);
        // The slow watcher still has what it was given, then its stream ends.
        drop(watchers);
        let mut slow = slow;
        assert!(slow.try_recv().is_some() && slow.try_recv().is_some());
        assert!(slow.try_recv().is_none() && slow.is_closed());
    }

    #[test]
    fn removing_the_last_watcher_of_a_cluster_forgets_the_cluster() {
        let mut watchers = Watchers::default();
        let (tx, _rx) = queue::bounded(1);
        let id = watchers.add("a/ns/", tx);
        watchers.remove("a/ns/", id);
        assert_eq!(watchers.len(), 0);
        assert!(watchers.by_cluster.is_empty());
    }
}
