//! The apiexport virtual workspace's knowledge of its exports and their consumers, kept between
//! requests (upstream's apiexport virtual workspace reads both from informers): what an export
//! shows ([`ExportView`]) and who is bound to it ([`Consumers`]) is computed once from a read of the
//! export and a list of the bindings, then served from memory until a watch of APIExports or
//! APIBindings across all clusters reports a change, so a request for one cluster costs a map
//! lookup instead of a list of every binding.
//!
//! Correctness never depends on the watches: entries are kept only while both watches are open
//! (until then, and after one ends until it is open again, every request reads afresh), any event
//! of either watch drops every entry, and an entry computed from reads that started before an
//! event (or before the watches opened) is not kept. The watches start with the first request,
//! run as the virtual workspaces' own user through the [`Backend`], reopen after a second when
//! they end, and stop when the server shuts down.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::BodyExt;
use kcp_apimachinery::ApiError;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::export_view::{Consumers, ExportView};

/// How long a watch that ended waits before it reopens.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// An export's view and consumers, as of the reads they were computed from.
#[derive(Debug)]
pub struct Export {
    /// `None` while the export has no identity (not served yet).
    pub view: Option<ExportView>,
    pub consumers: Consumers,
}

/// The watched collections, each across all clusters.
const WATCHED: [&str; 2] = [kcp_apis::API_EXPORTS, kcp_apis::API_BINDINGS];

#[derive(Default)]
struct State {
    /// Bumped by every event and by every watch opening or ending.
    generation: u64,
    /// How many of the [`WATCHED`] collections have an open watch.
    open: usize,
    entries: HashMap<(String, String), Arc<Export>>,
}

impl State {
    fn invalidate(&mut self) {
        self.generation += 1;
        self.entries.clear();
    }
}

/// The exports the virtual workspace was asked about, kept while the watches are open.
#[derive(Clone, Default)]
pub struct ExportCache {
    state: Arc<Mutex<State>>,
    started: Arc<AtomicBool>,
}

impl ExportCache {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map half-written in a way that
        // matters: every entry is whole, and the generation only grows.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Export `export_name` of `export_cluster`: from memory when the watches vouch for it,
    /// else computed by `read` (the export and the bindings), and kept if nothing changed
    /// meanwhile.
    pub async fn get<F, R>(
        &self,
        backend: &Backend,
        key: (&str, &str),
        shutdown: &CancellationToken,
        read: F,
    ) -> Result<Arc<Export>, ApiError>
    where
        F: FnOnce() -> R,
        R: Future<Output = Result<Export, ApiError>>,
    {
        self.start(backend, shutdown);
        let generation = {
            let state = self.state();
            if state.open == WATCHED.len()
                && let Some(export) = state.entries.get(&(key.0.to_owned(), key.1.to_owned()))
            {
                return Ok(export.clone());
            }
            state.generation
        };
        let export = Arc::new(read().await?);
        let mut state = self.state();
        if state.open == WATCHED.len() && state.generation == generation {
            state
                .entries
                .insert((key.0.to_owned(), key.1.to_owned()), export.clone());
        }
        Ok(export)
    }

    /// Starts the watches (once).
    fn start(&self, backend: &Backend, shutdown: &CancellationToken) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        for resource in WATCHED {
            let (cache, backend, shutdown) = (self.clone(), backend.clone(), shutdown.clone());
            tokio::spawn(async move { cache.watch(&backend, resource, &shutdown).await });
        }
    }

    /// Watches `resource` across all clusters until `shutdown`, reopening when the watch ends.
    async fn watch(&self, backend: &Backend, resource: &str, shutdown: &CancellationToken) {
        let collection = format!(
            "/clusters/*/apis/{}/{}/{resource}",
            kcp_apis::GROUP,
            kcp_apis::STORAGE_VERSION
        );
        while !shutdown.is_cancelled() {
            if let Err(error) = self.follow(backend, &collection, shutdown).await {
                tracing::debug!(%collection, %error, "the export cache's watch ended");
            }
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(REOPEN_AFTER) => {}
            }
        }
    }

    /// One watch of `collection` from the current revision: open, it counts towards
    /// [`WATCHED`]; every event invalidates; when it ends, it no longer counts.
    async fn follow(
        &self,
        backend: &Backend,
        collection: &str,
        shutdown: &CancellationToken,
    ) -> Result<(), ApiError> {
        let list = backend
            .read(&format!("{collection}?limit=1"), shutdown)
            .await?;
        let revision = list
            .pointer("/metadata/resourceVersion")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let query = format!("watch=1&resourceVersion={revision}");
        let answer = backend.watch(collection, &query, shutdown).await?;
        if !answer.status().is_success() {
            return Err(ApiError::service_unavailable(&format!(
                "watching {collection}: {}",
                answer.status()
            )));
        }
        let mut body = answer.into_body();
        {
            let mut state = self.state();
            state.open += 1;
            state.invalidate();
        }
        let ended = loop {
            let frame = tokio::select! {
                () = shutdown.cancelled() => break Ok(()),
                frame = body.frame() => frame,
            };
            match frame {
                Some(Ok(frame)) if frame.data_ref().is_some_and(|data| !data.is_empty()) => {
                    self.state().invalidate();
                }
                Some(Ok(_)) => {}
                Some(Err(_)) => break Err(ApiError::service_unavailable("the watch broke")),
                None => break Ok(()),
            }
        };
        let mut state = self.state();
        state.open -= 1;
        state.invalidate();
        ended
    }
}
