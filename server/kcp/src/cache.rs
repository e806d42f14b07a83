//! A shard's side of the cache server: the root shard without `--cache-kubeconfig` serves it
//! itself at `/services/cache/` (upstream's in-process cache), and every shard replicates its
//! objects into its cache (kcp-cache's `replication`): the root shard into its own, in the same
//! process; a shard with `--cache-kubeconfig` into the server that kubeconfig names, over HTTPS.

use std::sync::Arc;

use kcp_apiserver::services::Services;
use kcp_cache::CacheService;
use kcp_cache::client::CacheClient;
use kcp_cache::replication::{self, CacheSide, InProcessCache, Replicated};
use kcp_registry::storage::ObjectStore;
use kcp_registry::store::RestStore;
use kcp_storage::Storage;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::options::ValidatedOptions;

/// Why replication could not start.
#[derive(Debug, thiserror::Error)]
pub enum CacheSetupError {
    #[error("--cache-kubeconfig: {0}")]
    Client(#[from] kcp_cache::client::ClientError),
    #[error("replication to the cache: {0}")]
    Types(kcp_apimachinery::ApiError),
}

/// The cache this process serves itself, if any: the root shard's without `--cache-kubeconfig`,
/// on the shard's store under [`in_process_cache_prefix`].
pub fn in_process(
    options: &ValidatedOptions,
    storage: &Arc<dyn Storage>,
) -> Option<Arc<CacheService>> {
    if options.shard_name != "root" || options.cache_kubeconfig.is_some() {
        return None;
    }
    let prefix = in_process_cache_prefix(&options.etcd_prefix);
    info!(prefix = %prefix, "serving the cache server at /services/cache/");
    Some(Arc::new(CacheService::new(storage.clone(), &prefix)))
}

/// What the shard serves under `/services/`: the in-process cache, if any.
pub fn services(in_process: Option<&Arc<CacheService>>) -> Services {
    match in_process {
        Some(cache) => Services::default().with(kcp_cache::path::SERVICE_NAME, cache.clone()),
        None => Services::default(),
    }
}

/// `<etcd-prefix>-cache` (`/registry-cache` by default): beside the shard's keys, never under
/// them. Everything the shard reads is under `<etcd-prefix>/` (with the slash), so no list, watch
/// or scan of the shard ever meets a cache key, and the cache's keys stay apart from every other
/// shard's as long as their `--etcd-prefix`es differ, as they must when they share an etcd.
pub fn in_process_cache_prefix(etcd_prefix: &str) -> String {
    format!("{}-cache", etcd_prefix.trim_end_matches('/'))
}

/// Starts replicating the shard's objects into its cache, one task per replicated resource, until
/// `stop`. (Options validation leaves no shard without a cache: a non-root shard needs
/// `--cache-kubeconfig`, the root shard serves one itself without it.)
pub fn replicate(
    options: &ValidatedOptions,
    store: &RestStore,
    in_process: Option<&Arc<CacheService>>,
    stop: &CancellationToken,
) -> Result<Vec<JoinHandle<()>>, CacheSetupError> {
    let replicated = replication::replicated(store).map_err(CacheSetupError::Types)?;
    let spawn_all = |spawn_one: &dyn Fn(Replicated) -> JoinHandle<()>| {
        replicated
            .iter()
            .cloned()
            .map(spawn_one)
            .collect::<Vec<_>>()
    };
    let (shard, local) = (&options.shard_name, store.objects());
    Ok(match (in_process, &options.cache_kubeconfig) {
        (Some(cache), _) => {
            let cache = InProcessCache::new(cache);
            spawn_all(&|what| spawn(local, cache.clone(), shard, what, stop))
        }
        (None, Some(path)) => {
            let cache = CacheClient::from_kubeconfig(path)?;
            spawn_all(&|what| spawn(local, cache.clone(), shard, what, stop))
        }
        (None, None) => Vec::new(),
    })
}

fn spawn<C: CacheSide>(
    local: &ObjectStore,
    cache: C,
    shard: &str,
    what: Replicated,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(replication::run(
        local.clone(),
        cache,
        shard.to_owned(),
        what,
        stop.clone(),
    ))
}
