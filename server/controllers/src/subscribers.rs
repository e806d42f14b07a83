//! Who hears of a cache's changes after the cache has them, as client-go's informers call their
//! handlers only once their store has the change (see `tenancy_index`): each subscriber gets an
//! unbounded channel, and one that went away is forgotten at the next change.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

/// The receivers of a cache's changes.
pub struct Subscribers<T> {
    senders: Mutex<Vec<mpsc::UnboundedSender<Arc<T>>>>,
}

impl<T> Default for Subscribers<T> {
    fn default() -> Self {
        Subscribers {
            senders: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Subscribers<T> {
    /// A new receiver of every change from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Arc<T>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.senders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sender);
        receiver
    }

    /// Tells every subscriber of `change`.
    pub fn notify(&self, change: Arc<T>) {
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        senders.retain(|s| s.send(change.clone()).is_ok());
    }

    /// Whether nobody listens.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.senders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}
