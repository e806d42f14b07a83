//! The front-proxy's index (upstream `pkg/proxy/index` and `pkg/index`): which shard holds which
//! logical cluster and which workspace names which logical cluster, learnt from watches of
//! every shard, so that `/clusters/<path>` resolves to a shard and a logical cluster name.
//!
//! [`start`] reads the two kubeconfigs and spawns the watches ([`shards`]): `Shard` objects in
//! root through `--root-kubeconfig`; per shard, Workspaces and LogicalClusters across all its
//! logical clusters through `--shards-kubeconfig`'s credentials at the shard's `spec.baseURL`.
//! Each watch lists, then follows changes, and lists again after a `410 Gone` or a dropped
//! connection ([`watch`], decoding straight into the small structs of [`objects`]). Every event
//! changes only its own entries of the [`state`]; lookups take a read lock and never wait on
//! I/O. Unlike upstream, whose index is rebuilt from informer caches and was reported minutes
//! behind at scale (kcp #3811, #4073), a change is routable as soon as its event is applied.

mod objects;
mod shards;
mod state;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use kcp_kubeconfig::https::{self, HttpsError};
use tokio_util::sync::CancellationToken;

use crate::route::{Resolve, Route, Unroutable};
pub use state::IndexCounts;
use state::State;

/// Where the index learns the topology from.
#[derive(Debug, Clone)]
pub struct IndexSources {
    /// --root-kubeconfig: watches `Shard` objects in `root` (`/clusters/root/apis/core.kcp.io/v1alpha1/shards`).
    pub root_kubeconfig: PathBuf,
    /// --shards-kubeconfig: its CA and client certificate reach every shard; the host is
    /// replaced by each Shard's `spec.baseURL` (upstream behaviour).
    pub shards_kubeconfig: PathBuf,
}

/// Why the index cannot start: a kubeconfig that gives no client.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("--{flag} {}: {source}", path.display())]
    Kubeconfig {
        flag: &'static str,
        path: PathBuf,
        source: HttpsError,
    },
}

/// The index the proxy resolves paths with.
#[derive(Debug)]
pub struct Index {
    state: Arc<RwLock<State>>,
}

/// Reads the kubeconfigs (errors name the flag), spawns the watches on the current tokio
/// runtime, and returns at once; the watches end when `stop` is cancelled.
pub fn start(sources: IndexSources, stop: CancellationToken) -> Result<Arc<Index>, IndexError> {
    let root = client("root-kubeconfig", &sources.root_kubeconfig)?;
    let shards = client("shards-kubeconfig", &sources.shards_kubeconfig)?;
    let state = Arc::new(RwLock::new(State::default()));
    let watches = shards::Watches::new(state.clone(), shards.client, stop);
    watches.spawn(root.client.clone(), root.base_url());
    Ok(Arc::new(Index { state }))
}

fn client(flag: &'static str, path: &Path) -> Result<https::HttpsClient, IndexError> {
    https::client(path, None).map_err(|source| IndexError::Kubeconfig {
        flag,
        path: path.to_owned(),
        source,
    })
}

impl Index {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// For /metrics (no per-workspace labels): shards, logical clusters, workspaces indexed.
    pub fn counts(&self) -> IndexCounts {
        self.read().counts()
    }

    /// An estimate of the heap the index's entries take, in bytes (hash tables by capacity,
    /// names by malloc chunk): the figure kcp-bench divides by the workspaces indexed.
    pub fn heap_bytes(&self) -> usize {
        self.read().heap_bytes()
    }
}

impl Resolve for Index {
    fn resolve(&self, path: &str) -> Result<Route, Unroutable> {
        self.read().resolve(path)
    }

    fn virtual_workspaces(&self, shard: &str) -> Option<Arc<str>> {
        self.read().virtual_workspaces(shard)
    }

    fn is_ready(&self) -> bool {
        self.read().is_ready()
    }
}
