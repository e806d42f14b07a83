//! The queue of events handed to one watcher: the cache pushes without waiting, the watch's
//! stream takes them as its client reads, and a queue that reaches its bound refuses more.
//!
//! kube-apiserver's `cacheWatcher` has a buffered Go channel per watcher for this. A general
//! channel (tokio's `mpsc`) costs about 800 bytes per watcher before any event: cache-padded
//! halves and a first block of 32 slots. Idle watchers are most of them (one per informer per
//! workspace), so this one is a mutex around a deque that has no storage until an event arrives
//! and gives it back once drained after a burst: one small allocation per idle watcher.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// Room a drained queue keeps; more is given back.
const KEPT_ROOM: usize = 16;

struct State<T> {
    items: VecDeque<T>,
    /// The receiver waiting for an item.
    waker: Option<Waker>,
    /// The sender is gone: no more items will come.
    sender_gone: bool,
    /// The receiver is gone: items would never be taken.
    receiver_gone: bool,
}

impl<T> State<T> {
    /// The first item; a queue drained after a burst gives its room back.
    fn pop(&mut self) -> Option<T> {
        let item = self.items.pop_front();
        if self.items.is_empty() && self.items.capacity() > KEPT_ROOM {
            self.items = VecDeque::new();
        }
        item
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state stays consistent at every unlock: a panic elsewhere does not spoil it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why an item was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The queue holds its bound.
    Full,
    /// The receiver is gone.
    Closed,
}

/// The cache's end: one per queue.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
    bound: usize,
}

/// The watch's end.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// A queue holding at most `bound` items.
pub(crate) fn bounded<T>(bound: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            waker: None,
            sender_gone: false,
            receiver_gone: false,
        }),
    });
    (
        Sender {
            shared: shared.clone(),
            bound,
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    /// Queues `item` and wakes the receiver, never waiting.
    pub(crate) fn try_send(&self, item: T) -> Result<(), Refused> {
        let waker = {
            let mut state = self.shared.lock();
            if state.receiver_gone {
                return Err(Refused::Closed);
            }
            if state.items.len() >= self.bound {
                return Err(Refused::Full);
            }
            state.items.push_back(item);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.shared.lock();
            state.sender_gone = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// The next item, if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        self.shared.lock().pop()
    }

    /// The next item, waiting for it; `None` once the sender is gone and every item was taken.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.shared.lock();
        if let Some(item) = state.pop() {
            return Poll::Ready(Some(item));
        }
        if state.sender_gone {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) => waker.clone_from(cx.waker()),
            None => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Whether the sender is gone (items may still be queued).
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.lock().sender_gone
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let items = {
            let mut state = self.shared.lock();
            state.receiver_gone = true;
            state.waker = None;
            std::mem::take(&mut state.items)
        };
        drop(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn items_come_in_order_then_the_end() {
        let (tx, mut rx) = bounded(3);
        for i in 0..3 {
            tx.try_send(i).unwrap();
        }
        assert_eq!(tx.try_send(3), Err(Refused::Full));
        assert_eq!(rx.try_recv(), Some(0));
        assert!(!rx.is_closed());
        drop(tx);
        assert!(rx.is_closed());
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken() {
        let (tx, mut rx) = bounded(4);
        let sent = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.try_send("a").unwrap();
            tx
        });
        assert_eq!(rx.recv().await, Some("a"));
        drop(sent.await.unwrap());
        assert_eq!(rx.recv().await, None);
    }

    #[test]
    fn a_gone_receiver_refuses_and_drops_what_was_queued() {
        let (tx, rx) = bounded(4);
        let item = Arc::new(());
        tx.try_send(item.clone()).unwrap();
        drop(rx);
        assert_eq!(Arc::strong_count(&item), 1);
        assert_eq!(tx.try_send(item.clone()), Err(Refused::Closed));
    }

    #[test]
    fn a_drained_queue_gives_its_room_back() {
        let (tx, mut rx) = bounded(100);
        for i in 0..50 {
            tx.try_send(i).unwrap();
        }
        while rx.try_recv().is_some() {}
        assert_eq!(rx.shared.lock().items.capacity(), 0);
    }
}
