//! An etcd watch as a [`WatchStream`]: etcd's responses flattened into single events.
//!
//! etcd answers a watch with a `created` acknowledgement, then responses carrying any number of
//! events; a response with `compact_revision` set means etcd could not deliver history the watcher
//! still needed, and a `canceled` one that the server gave up on the watch. Both end our stream with
//! an error item, as does the gRPC stream ending, so a consumer can never silently miss events.

use std::collections::VecDeque;

use etcd_client::{EventType, WatchResponse};
use futures::stream;

use super::{convert_kv, unavailable};
use crate::{EventKind, KeyValue, Result, Revision, StorageError, WatchEvent, WatchStream};

struct Watcher {
    stream: etcd_client::WatchStream,
    pending: VecDeque<WatchEvent>,
    /// The revision the watch would resume from: the one after the last event delivered.
    next: Revision,
    done: bool,
}

/// Waits for etcd to acknowledge the watch, then streams its events.
pub(super) async fn start(stream: etcd_client::WatchStream, from: Revision) -> Result<WatchStream> {
    let mut watcher = Watcher {
        stream,
        pending: VecDeque::new(),
        next: from,
        done: false,
    };
    let created = watcher.stream.message().await.map_err(unavailable)?;
    match created {
        Some(response) if response.created() => watcher.absorb(response)?,
        Some(_) => {
            return Err(StorageError::Unavailable(
                "etcd did not acknowledge the watch".to_owned(),
            ));
        }
        None => {
            return Err(StorageError::Unavailable(
                "etcd closed the watch".to_owned(),
            ));
        }
    }
    Ok(Box::pin(stream::unfold(
        watcher,
        |mut watcher| async move {
            let item = watcher.next_item().await?;
            Some((item, watcher))
        },
    )))
}

impl Watcher {
    async fn next_item(&mut self) -> Option<Result<WatchEvent>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            let outcome = match self.stream.message().await {
                Ok(Some(response)) => self.absorb(response),
                Ok(None) => Err(StorageError::Unavailable(
                    "etcd closed the watch".to_owned(),
                )),
                Err(error) => Err(unavailable(error)),
            };
            if let Err(error) = outcome {
                self.done = true;
                return Some(Err(error));
            }
        }
    }

    /// Queues a response's events, or fails when it ends the watch.
    fn absorb(&mut self, response: WatchResponse) -> Result<()> {
        if response.compact_revision() != 0 {
            return Err(StorageError::Compacted {
                requested: self.next,
                compacted: response.compact_revision(),
            });
        }
        if response.canceled() {
            return Err(StorageError::Unavailable(format!(
                "etcd canceled the watch: {}",
                response.cancel_reason()
            )));
        }
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let kv = convert_kv(kv)?;
            self.next = kv.mod_revision + 1;
            let prev = event.prev_kv().map(convert_kv).transpose()?;
            self.pending.push_back(match event.event_type() {
                EventType::Put => WatchEvent {
                    kind: EventKind::Put,
                    kv,
                    prev,
                },
                EventType::Delete => WatchEvent {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        value: Default::default(),
                        create_revision: 0,
                        ..kv
                    },
                    prev,
                },
            });
        }
        Ok(())
    }
}
