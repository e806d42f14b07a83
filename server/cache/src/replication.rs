//! Replication of a shard's objects into the cache (upstream `pkg/reconciler/cache/replication`):
//! every shard pushes the objects others need to read into the cache under its own shard name,
//! every logical cluster of it: its `Shard`s (held by the root shard only), its `WorkspaceType`s,
//! `APIExport`s, `APIResourceSchema`s and `APIConversion`s, the routing data of the `LogicalCluster`s of the
//! logical clusters holding a type or an export, so that other shards resolve their paths
//! (`replication/desired.rs`), the RBAC other shards need to authorize binding those exports,
//! using those types and entering those clusters (`replication/rbac.rs`), and markers of the exports its APIBindings bind,
//! for the exports' endpoint slices (`replication/markers.rs`). An export's identity Secret is
//! never replicated: a binding needs only `status.identityHash`, which the export carries.
//!
//! Level-based, per resource: list the shard's objects and the cache's copies (this shard,
//! `clusters/*`), make the cache equal (create what is missing, overwrite what differs, delete
//! what the shard no longer has), then follow both sides: a local change is pushed at once, and
//! a change in the cache that disagrees with the shard (another writer, a cache that lost data)
//! is put right. When either stream ends or a write fails (a restart of the shard's store or of
//! the cache server), it waits a moment and starts over with a full comparison, so nothing a
//! restart missed stays wrong. Copies are the shard's objects as it serves them without
//! `resourceVersion` (the cache has its own) and the key annotations. One replication may write
//! several resources (its lanes): one writes the LogicalClusters' routing data, ClusterRoles and
//! ClusterRoleBindings from one watch of each, as whether one is copied depends on the others.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kcp_apimachinery::{ApiError, meta};
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{
    CLUSTER_ANNOTATION, ChangeType, ListRequest, strip_read_only,
};
use kcp_registry::store::RestStore;
use kcp_storage::Revision;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::client::{At, CacheClient, Listed, Resource, WatchEvent};
use crate::keys::{self, SHARD_ANNOTATION};
use crate::path::{CachePath, Cluster, Shard};

mod desired;
mod markers;
mod rbac;
mod stored;

use desired::{Desired, one_lane};
pub use markers::{MARKER_GROUP, MARKER_KIND};
pub use rbac::grants_across_shards;

/// How long to wait before starting over after a failure.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// The cache as replication writes it: over HTTPS ([`CacheClient`]) or in the same process
/// ([`InProcessCache`]).
pub trait CacheSide: Send + Sync + 'static {
    /// This shard's copies of `resource`, every logical cluster.
    fn list(
        &self,
        resource: &Resource,
        shard: &str,
    ) -> impl Future<Output = Result<Listed, ApiError>> + Send;
    /// Changes of this shard's copies after `revision`.
    fn watch(
        &self,
        resource: &Resource,
        shard: &str,
        revision: Revision,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError>> + Send;
    /// Creates the copy, or overwrites it when it exists.
    fn put(
        &self,
        resource: &Resource,
        shard: &str,
        cluster: &str,
        object: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes the copy (gone already is fine).
    fn remove(
        &self,
        resource: &Resource,
        shard: &str,
        id: &ObjectId,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// Which object: logical cluster, namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectId {
    pub cluster: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectId {
    fn of(object: &Value) -> Option<ObjectId> {
        Some(ObjectId {
            cluster: meta::annotations(object).remove(CLUSTER_ANNOTATION)?,
            namespace: meta::namespace(object).map(str::to_owned),
            name: meta::name(object)?.to_owned(),
        })
    }

    fn at<'a>(&'a self, shard: &'a str) -> At<'a> {
        At {
            shard,
            cluster: &self.cluster,
            namespace: self.namespace.as_deref(),
        }
    }
}

/// An object as the comparison sees it: without `resourceVersion` and the shard annotation.
fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    strip_read_only(&mut object, &[SHARD_ANNOTATION]);
    object
}

/// One replication: where the shard keeps what it follows, how the cache names what it writes,
/// and which copies the shard wants.
#[derive(Debug, Clone)]
pub struct Replicated {
    /// `<etcd-prefix>/<group>/<resource>/` in the shard's store (every logical cluster).
    pub local_prefix: String,
    /// The resources it writes in the cache, in the order of the copies' lanes: one, or
    /// LogicalClusters, ClusterRoles and ClusterRoleBindings for [`Copies::Marked`].
    pub resources: Vec<Resource>,
    pub copies: Copies,
}

/// Which copies of a resource the shard wants in the cache.
#[derive(Debug, Clone)]
pub enum Copies {
    /// Every object, whole.
    Whole,
    /// Three lanes: the routing data of the LogicalClusters (under the local prefix) of the
    /// logical clusters holding an object under one of the `held` prefixes of the shard's store
    /// (WorkspaceTypes, APIExports), which marks them for replication, then the ClusterRoles
    /// (under `roles`) that grant what other shards authorize, or `access` to a marked cluster,
    /// and the ClusterRoleBindings (under `bindings`) of them (see `replication/rbac.rs`).
    Marked {
        held: Vec<String>,
        roles: String,
        bindings: String,
    },
    /// One marker per export the shard's APIBindings (under the local prefix) bind, with the
    /// shard's apiexport URL for it (see `replication/markers.rs`).
    BoundExportMarkers { virtual_workspace_url: String },
}

impl Replicated {
    async fn wanted(&self, local: &ObjectStore) -> Result<desired::Lanes, ApiError> {
        match &self.copies {
            Copies::Whole => desired::whole(local, &self.local_prefix)
                .await
                .map(one_lane),
            Copies::Marked {
                held,
                roles,
                bindings,
            } => rbac::marked(local, &self.local_prefix, held, roles, bindings).await,
            Copies::BoundExportMarkers {
                virtual_workspace_url,
            } => markers::bound_exports(local, &self.local_prefix, virtual_workspace_url)
                .await
                .map(one_lane),
        }
    }

    /// The resources it writes, for logs.
    fn names(&self) -> String {
        let names: Vec<&str> = self.resources.iter().map(|r| r.resource.as_str()).collect();
        names.join(",")
    }
}

/// The `LogicalClusters` resource (`core.kcp.io/v1alpha1`).
pub fn logical_clusters() -> Resource {
    Resource::new("core.kcp.io", "v1alpha1", "logicalclusters")
}

/// The `WorkspaceTypes` resource (`tenancy.kcp.io/v1alpha1`).
pub fn workspace_types() -> Resource {
    Resource::new("tenancy.kcp.io", "v1alpha1", "workspacetypes")
}

/// The `APIExports` resource, in the version the shards store it.
pub fn api_exports() -> Resource {
    Resource::new(
        kcp_apis::GROUP,
        kcp_apis::STORAGE_VERSION,
        kcp_apis::API_EXPORTS,
    )
}

/// The `APIBindings` resource, in the version the shards store it (read locally only).
fn api_bindings() -> Resource {
    Resource::new(
        kcp_apis::GROUP,
        kcp_apis::STORAGE_VERSION,
        kcp_apis::API_BINDINGS,
    )
}

/// The `APIResourceSchemas` resource (`apis.kcp.io/v1alpha1`).
pub fn api_resource_schemas() -> Resource {
    Resource::new(kcp_apis::GROUP, "v1alpha1", kcp_apis::API_RESOURCE_SCHEMAS)
}

/// The `APIConversions` resource (`apis.kcp.io/v1alpha1`).
pub fn api_conversions() -> Resource {
    Resource::new(kcp_apis::GROUP, "v1alpha1", kcp_apis::API_CONVERSIONS)
}

/// The markers of exports bound on a shard (see `replication/markers.rs`), a resource of the
/// cache only.
pub fn bound_export_markers() -> Resource {
    Resource::new(MARKER_GROUP, "v1alpha1", "boundexports")
}

/// The `ClusterRoles` resource (`rbac.authorization.k8s.io/v1`).
pub fn cluster_roles() -> Resource {
    Resource::new("rbac.authorization.k8s.io", "v1", "clusterroles")
}

/// The `ClusterRoleBindings` resource (`rbac.authorization.k8s.io/v1`).
pub fn cluster_role_bindings() -> Resource {
    Resource::new("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
}

/// The `Shards` resource (`core.kcp.io/v1alpha1`).
pub fn shards() -> Resource {
    Resource::new("core.kcp.io", "v1alpha1", "shards")
}

/// What every shard replicates, where `store` keeps it: its `Shard`s (root-only, so only the
/// root shard has any), its `WorkspaceType`s, `APIExport`s, `APIResourceSchema`s and
/// `APIConversion`s, the
/// routing data of the `LogicalCluster`s of the logical clusters holding a WorkspaceType or an
/// APIExport, the `ClusterRole`s and `ClusterRoleBinding`s that grant `bind`, export content
/// or `use` of a type, or `access` to one of those clusters (what other shards authorize about
/// this shard's clusters), and a marker per
/// export its APIBindings bind (for the export's endpoint slice on the export's shard, with the
/// shard's apiexport URL under `virtual_workspace_url`).
pub fn replicated(
    store: &RestStore,
    virtual_workspace_url: &str,
) -> Result<Vec<Replicated>, ApiError> {
    let registry = store.registry();
    let find = |resource: &Resource, root_only: bool| {
        let (group, version, plural) = (&resource.group, &resource.version, &resource.resource);
        let rt = if root_only {
            registry.root_type(group, version, plural)
        } else {
            registry.builtin_type(group, version, plural)
        };
        rt.map(|rt| store.keys(&rt).all_clusters().to_owned())
            .ok_or_else(|| ApiError::internal_error(&format!("{plural}.{group} is not registered")))
    };
    let types_prefix = find(&workspace_types(), false)?;
    let exports_prefix = find(&api_exports(), false)?;
    let roles = find(&cluster_roles(), false)?;
    let bindings = find(&cluster_role_bindings(), false)?;
    let whole = |local_prefix: String, resource: Resource| Replicated {
        local_prefix,
        resources: vec![resource],
        copies: Copies::Whole,
    };
    Ok(vec![
        Replicated {
            local_prefix: find(&api_bindings(), false)?,
            resources: vec![bound_export_markers()],
            copies: Copies::BoundExportMarkers {
                virtual_workspace_url: virtual_workspace_url.to_owned(),
            },
        },
        whole(find(&shards(), true)?, shards()),
        whole(types_prefix.clone(), workspace_types()),
        whole(exports_prefix.clone(), api_exports()),
        whole(
            find(&api_resource_schemas(), false)?,
            api_resource_schemas(),
        ),
        whole(find(&api_conversions(), false)?, api_conversions()),
        Replicated {
            local_prefix: find(&logical_clusters(), false)?,
            resources: vec![logical_clusters(), cluster_roles(), cluster_role_bindings()],
            copies: Copies::Marked {
                held: vec![types_prefix, exports_prefix],
                roles,
                bindings,
            },
        },
    ])
}

/// Keeps the cache's copies of `what` equal to the shard's objects until `stop`.
pub async fn run<C: CacheSide>(
    local: ObjectStore,
    cache: C,
    shard: String,
    what: Replicated,
    stop: CancellationToken,
) {
    let replica = Replica {
        local,
        cache,
        shard,
        what,
    };
    loop {
        let outcome = tokio::select! {
            _ = stop.cancelled() => return,
            outcome = replica.sync_and_follow() => outcome,
        };
        if let Err(error) = outcome {
            tracing::info!(
                resource = %replica.what.names(),
                %error,
                "replication to the cache starts over"
            );
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RETRY_AFTER) => {}
        }
    }
}

struct Replica<C> {
    local: ObjectStore,
    cache: C,
    shard: String,
    what: Replicated,
}

impl<C: CacheSide> Replica<C> {
    /// One full comparison, then following both sides until one of them fails or ends.
    async fn sync_and_follow(&self) -> Result<(), ApiError> {
        let (mut local, mut local_changes) = self.what.wanted(&self.local).await?;
        let mut watches = Vec::new();
        for (lane, resource) in self.what.resources.iter().enumerate() {
            let wanted = local.get(lane).ok_or_else(|| {
                ApiError::internal_error(&format!("no copies for {}", resource.resource))
            })?;
            let cached = self.cache.list(resource, &self.shard).await?;
            let copies: BTreeMap<ObjectId, Value> = cached
                .items
                .iter()
                .filter_map(|object| Some((ObjectId::of(object)?, comparable(object))))
                .collect();
            for (id, object) in wanted {
                if copies.get(id) != Some(object) {
                    self.cache
                        .put(resource, &self.shard, &id.cluster, object)
                        .await?;
                }
            }
            for id in copies.keys().filter(|id| !wanted.contains_key(*id)) {
                self.cache.remove(resource, &self.shard, id).await?;
            }
            let ended = stream::once(async {
                Err(ApiError::service_unavailable("the cache's watch ended"))
            });
            let watch = self
                .cache
                .watch(resource, &self.shard, cached.revision)
                .await?;
            let watch = watch.map(move |event| event.map(|event| (lane, event)));
            watches.push(watch.chain(ended).boxed());
        }
        let mut cache_changes = stream::select_all(watches);

        loop {
            tokio::select! {
                change = local_changes.next() => {
                    let (lane, desired) = change.ok_or_else(|| ApiError::service_unavailable("the shard's watch ended"))??;
                    let (Some(resource), Some(local)) = (self.what.resources.get(lane), local.get_mut(lane)) else { continue };
                    match desired {
                        Desired::Gone(id) => {
                            local.remove(&id);
                            self.cache.remove(resource, &self.shard, &id).await?;
                        }
                        Desired::Set(id, object) => {
                            if local.get(&id) != Some(&object) {
                                self.cache.put(resource, &self.shard, &id.cluster, &object).await?;
                                local.insert(id, object);
                            }
                        }
                    }
                }
                event = cache_changes.next() => {
                    let (lane, event) = event.ok_or_else(|| ApiError::service_unavailable("the cache's watch ended"))??;
                    let (Some(resource), Some(local)) = (self.what.resources.get(lane), local.get(lane)) else { continue };
                    let Some(id) = ObjectId::of(&event.object) else { continue };
                    let copy = (event.kind != ChangeType::Deleted.as_str()).then(|| comparable(&event.object));
                    match (local.get(&id), copy) {
                        (Some(object), copy) if copy.as_ref() != Some(object) => self.cache.put(resource, &self.shard, &id.cluster, object).await?,
                        (None, Some(_)) => self.cache.remove(resource, &self.shard, &id).await?,
                        _ => {}
                    }
                }
            }
        }
    }
}

impl CacheSide for CacheClient {
    async fn list(&self, resource: &Resource, shard: &str) -> Result<Listed, ApiError> {
        let at = At {
            shard,
            cluster: "*",
            namespace: None,
        };
        CacheClient::list(self, resource, at, "").await
    }

    async fn watch(
        &self,
        resource: &Resource,
        shard: &str,
        revision: Revision,
    ) -> Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError> {
        let at = At {
            shard,
            cluster: "*",
            namespace: None,
        };
        CacheClient::watch(self, resource, at, Some(revision), "").await
    }

    async fn put(
        &self,
        resource: &Resource,
        shard: &str,
        cluster: &str,
        object: &Value,
    ) -> Result<(), ApiError> {
        let at = At {
            shard,
            cluster,
            namespace: meta::namespace(object),
        };
        match self.create(resource, at, object).await {
            Err(error) if error.code == 409 => self.update(resource, at, object).await.map(drop),
            other => other.map(drop),
        }
    }

    async fn remove(
        &self,
        resource: &Resource,
        shard: &str,
        id: &ObjectId,
    ) -> Result<(), ApiError> {
        match self.delete(resource, id.at(shard), &id.name).await {
            Err(error) if error.code == 404 => Ok(()),
            other => other.map(drop),
        }
    }
}

/// The cache of the same process (the root shard's `/services/cache/`), written directly in its
/// store with the cache's key layout.
#[derive(Clone)]
pub struct InProcessCache {
    objects: ObjectStore,
}

impl InProcessCache {
    pub fn new(service: &crate::CacheService) -> InProcessCache {
        InProcessCache {
            objects: service.objects().clone(),
        }
    }

    fn path(
        resource: &Resource,
        shard: &str,
        cluster: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<CachePath, ApiError> {
        let cluster = match cluster {
            None => Cluster::Wildcard,
            Some(name) => Cluster::Named(
                kcp_registry::LogicalClusterName::parse(name).ok_or_else(|| {
                    ApiError::bad_request(&format!("invalid logical cluster name {name:?}"))
                })?,
            ),
        };
        let shard = match shard {
            "*" => Shard::Wildcard,
            name => Shard::Named(name.to_owned()),
        };
        Ok(CachePath {
            shard,
            cluster,
            group: resource.group.clone(),
            version: resource.version.clone(),
            resource: resource.resource.clone(),
            namespace: namespace.map(str::to_owned),
            name: None,
        })
    }

    fn key(&self, path: &CachePath, shard: &str, cluster: &str, name: &str) -> String {
        keys::object_key(self.objects.prefix(), path, shard, cluster, name)
    }

    fn what<'a>(
        resource: &'a Resource,
        name: &'a str,
    ) -> kcp_registry::storage::objects::ObjectRef<'a> {
        kcp_registry::storage::objects::ObjectRef {
            group: &resource.group,
            resource: &resource.resource,
            name,
        }
    }
}

impl CacheSide for InProcessCache {
    async fn list(&self, resource: &Resource, shard: &str) -> Result<Listed, ApiError> {
        let path = Self::path(resource, shard, None, None)?;
        let prefix = keys::list_prefix(self.objects.prefix(), &path);
        let page = self
            .objects
            .list(ListRequest::everything(&prefix), &|_| true)
            .await?;
        Ok(Listed {
            items: page.items,
            revision: page.revision,
        })
    }

    async fn watch(
        &self,
        resource: &Resource,
        shard: &str,
        revision: Revision,
    ) -> Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError> {
        let path = Self::path(resource, shard, None, None)?;
        let prefix = keys::list_prefix(self.objects.prefix(), &path);
        let changes = self.objects.watch_current(&prefix, revision + 1).await?;
        Ok(changes
            .map(|change| {
                change.map(|change| WatchEvent {
                    kind: change.kind.as_str().to_owned(),
                    object: change.object,
                })
            })
            .boxed())
    }

    async fn put(
        &self,
        resource: &Resource,
        shard: &str,
        cluster: &str,
        object: &Value,
    ) -> Result<(), ApiError> {
        let path = Self::path(resource, shard, Some(cluster), meta::namespace(object))?;
        let name = meta::name(object).unwrap_or_default();
        let key = self.key(&path, shard, cluster, name);
        let what = Self::what(resource, name);
        match self.objects.get(&key, what).await? {
            Some(current) => self
                .objects
                .update(&key, object, current.revision, what)
                .await
                .map(drop),
            None => self.objects.create(&key, object, what).await.map(drop),
        }
    }

    async fn remove(
        &self,
        resource: &Resource,
        shard: &str,
        id: &ObjectId,
    ) -> Result<(), ApiError> {
        let path = Self::path(resource, shard, Some(&id.cluster), id.namespace.as_deref())?;
        let key = self.key(&path, shard, &id.cluster, &id.name);
        match self
            .objects
            .delete(&key, None, Self::what(resource, &id.name))
            .await
        {
            Err(error) if error.code == 404 => Ok(()),
            other => other.map(drop),
        }
    }
}
