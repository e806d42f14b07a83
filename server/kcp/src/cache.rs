//! A shard's side of the cache server: the root shard without `--cache-kubeconfig` serves it
//! itself at `/services/cache/` (upstream's in-process cache), and every shard replicates its
//! objects into its cache (kcp-cache's `replication`): the root shard into its own, in the same
//! process; a shard with `--cache-kubeconfig` into the server that kubeconfig names, over HTTPS.
//! From the same cache every shard reads back what other shards replicated (kcp-cache's
//! `read_back`): their WorkspaceTypes, APIExports, APIResourceSchemas, LogicalClusters and the
//! RBAC that grants `bind` and `use` into its tenancy index (as copies that never serve a request), and the `Shard`s, a non-root shard's
//! directory of shards.

use std::sync::Arc;

use kcp_apiserver::services::Services;
use kcp_cache::CacheService;
use kcp_cache::client::{CacheClient, Resource};
use kcp_cache::read_back::{self, Observed};
use kcp_cache::replication::{self, CacheSide, InProcessCache, Replicated};
use kcp_controllers::TenancyIndex;
use kcp_controllers::shard_directory::CopiedShards;
use kcp_controllers::tenancy_index::CopiedKind;
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

/// What the shard keeps in touch with its cache: the tasks that replicate into it and read
/// back from it, and the `Shard`s read back (a non-root shard's directory of shards).
pub struct CacheLinks {
    pub tasks: Vec<JoinHandle<()>>,
    pub shards: Arc<CopiedShards>,
}

/// Starts replicating the shard's objects into its cache, one task per replicated resource, and
/// reading back other shards' copies (LogicalClusters' routing data, WorkspaceTypes, APIExports,
/// APIResourceSchemas and replicated RBAC into
/// `tenancy`, Shards into [`CacheLinks::shards`]), until `stop`. (Options validation leaves no
/// shard without a cache: a non-root shard needs `--cache-kubeconfig`, the root shard serves one
/// itself without it.) `virtual_workspace_url` is where this shard serves its virtual workspaces
/// (the URL its markers of bound exports publish).
pub fn connect(
    options: &ValidatedOptions,
    store: &RestStore,
    tenancy: &Arc<TenancyIndex>,
    in_process: Option<&Arc<CacheService>>,
    virtual_workspace_url: &str,
    stop: &CancellationToken,
) -> Result<CacheLinks, CacheSetupError> {
    let replicated =
        replication::replicated(store, virtual_workspace_url).map_err(CacheSetupError::Types)?;
    let local = Local {
        objects: store.objects(),
        shard: &options.shard_name,
        tenancy,
        stop,
    };
    Ok(match (in_process, &options.cache_kubeconfig) {
        (Some(cache), _) => local.link(InProcessCache::new(cache), replicated),
        (None, Some(path)) => local.link(CacheClient::from_kubeconfig(path)?, replicated),
        (None, None) => CacheLinks {
            tasks: Vec::new(),
            shards: Arc::default(),
        },
    })
}

/// The shard's side of the links.
struct Local<'a> {
    objects: &'a ObjectStore,
    shard: &'a str,
    tenancy: &'a Arc<TenancyIndex>,
    stop: &'a CancellationToken,
}

impl Local<'_> {
    fn link<C: CacheSide + Clone>(&self, cache: C, replicated: Vec<Replicated>) -> CacheLinks {
        let mut tasks: Vec<JoinHandle<()>> = replicated
            .into_iter()
            .map(|what| {
                tokio::spawn(replication::run(
                    self.objects.clone(),
                    cache.clone(),
                    self.shard.to_owned(),
                    what,
                    self.stop.clone(),
                ))
            })
            .collect();
        let shards = Arc::new(CopiedShards::default());
        self.tenancy.expect_copies();
        for (kind, resource) in [
            (CopiedKind::LogicalClusters, replication::logical_clusters()),
            (CopiedKind::WorkspaceTypes, replication::workspace_types()),
            (CopiedKind::ApiExports, replication::api_exports()),
            (
                CopiedKind::ApiResourceSchemas,
                replication::api_resource_schemas(),
            ),
            (CopiedKind::ApiConversions, replication::api_conversions()),
            (CopiedKind::ClusterRoles, replication::cluster_roles()),
            (
                CopiedKind::ClusterRoleBindings,
                replication::cluster_role_bindings(),
            ),
            (
                CopiedKind::BoundExports,
                replication::bound_export_markers(),
            ),
        ] {
            let tenancy = self.tenancy.clone();
            tasks.push(
                self.read_back(&cache, resource, move |observed| match observed {
                    Observed::Listed(items) => tenancy.replace_copies(kind, items),
                    Observed::Changed { deleted, object } => tenancy.apply_copy(deleted, object),
                }),
            );
        }
        let copied = shards.clone();
        tasks.push(self.read_back(
            &cache,
            replication::shards(),
            move |observed| match observed {
                Observed::Listed(items) => copied.replace(items),
                Observed::Changed { deleted, object } => copied.apply(deleted, object),
            },
        ));
        CacheLinks { tasks, shards }
    }

    fn read_back<C: CacheSide + Clone>(
        &self,
        cache: &C,
        resource: Resource,
        observe: impl Fn(Observed) + Send + Sync + 'static,
    ) -> JoinHandle<()> {
        tokio::spawn(read_back::run(
            cache.clone(),
            resource,
            self.shard.to_owned(),
            observe,
            self.stop.clone(),
        ))
    }
}
