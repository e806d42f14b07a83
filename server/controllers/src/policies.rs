//! The RBAC policy of each logical cluster, built from what the cluster stores and kept until an
//! RBAC object of that cluster changes.
//!
//! kcp authorizes a request against two layers (upstream's "bootstrap" and "local" authorizers):
//! the RBAC objects of the `system:admin` logical cluster, which apply in every logical cluster,
//! and those of the request's own logical cluster, whose bindings may name the ClusterRoles of
//! `system:admin` (that is how `cluster-admin`, `admin`, `edit` and `view` exist everywhere
//! without being stored everywhere). Indexes are built lazily on the first request to a cluster,
//! so an idle workspace costs one small map entry, and dropped when a watch on the RBAC resources
//! (or a write through this server) says they changed. A drop of `system:admin` drops every entry,
//! because local indexes copy the rules of the bootstrap roles they reference.
//!
//! Deep SubjectAccessReviews (upstream's, asked by admission in another workspace: `bind` on an
//! APIExport, `use` of a WorkspaceType) and requests by cluster name (the workspace content
//! authorizer's `access`, then RBAC) may be about a cluster of another shard; its policy is
//! built from the ClusterRoles and ClusterRoleBindings that shard replicated into the cache
//! (upstream's global authorizer over the cache's informers), and kept as long as the tenancy
//! index's stamp of those copies is the same: the read-back of a grant or revoke changes the
//! stamp, and the next review builds the policy again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_rbac::{PolicyIndex, bootstrap};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use kcp_registry::LogicalClusterName;
use kcp_registry::sparse::remove_and_shrink;

use crate::TenancyIndex;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::storage::{KeyLayout, ObjectStore};
use kcp_storage::Revision;

use kcp_rbac::bootstrap::BOOTSTRAP_CLUSTER;
use kcp_rbac::escalation::RBAC_GROUP;
use kcp_registry::hooks::{AfterWrite, Written};

/// The four RBAC resources and the kind of their objects.
pub const RBAC_RESOURCES: [(&str, &str); 4] = [
    ("clusterroles", "ClusterRole"),
    ("roles", "Role"),
    ("clusterrolebindings", "ClusterRoleBinding"),
    ("rolebindings", "RoleBinding"),
];

/// The policy layers a request to one logical cluster is authorized against, first opinion first:
/// the cluster's own, then the bootstrap policy.
pub struct ClusterPolicy {
    layers: Vec<Arc<PolicyIndex>>,
    /// Every RBAC change of the cluster up to this store revision is in the layers.
    revision: Revision,
}

impl ClusterPolicy {
    /// The layers as a [`kcp_rbac::Policy`] (a slice of policies is one).
    pub fn layers(&self) -> Vec<&PolicyIndex> {
        self.layers.iter().map(Arc::as_ref).collect()
    }
}

/// The bootstrap layer: `system:admin`'s objects (local indexes resolve role references in them)
/// and their index.
struct Bootstrap {
    objects: Vec<Value>,
    index: Arc<PolicyIndex>,
    revision: Revision,
}

/// A cluster's policy: its own objects over the bootstrap layer. The local index comes first: it
/// answers for the bootstrap roles it extends or replaces (a role reference resolves in the first
/// layer that has the role).
fn layered(
    cluster: &LogicalClusterName,
    bootstrap: &Bootstrap,
    local: &[Value],
    revision: Revision,
) -> Result<ClusterPolicy, ApiError> {
    let base: Vec<&Value> = bootstrap.objects.iter().collect();
    let index = PolicyIndex::build_layered(local, &base).map_err(|e| {
        ApiError::internal_error(&format!("building the RBAC policy of {cluster}: {e}"))
    })?;
    Ok(ClusterPolicy {
        layers: vec![Arc::new(index), bootstrap.index.clone()],
        revision,
    })
}

/// Per-cluster RBAC indexes over the object store.
pub struct PolicyCache {
    objects: ObjectStore,
    bootstrap_cluster: LogicalClusterName,
    bootstrap: RwLock<Option<Arc<Bootstrap>>>,
    clusters: RwLock<HashMap<LogicalClusterName, Arc<ClusterPolicy>>>,
    /// Policies of other shards' clusters, built from their RBAC copies, with the stamp of the
    /// copies they were built from.
    copied: RwLock<HashMap<LogicalClusterName, (u64, Arc<ClusterPolicy>)>>,
    /// Bumped by every invalidation, so an index built from a read that raced with a change is not
    /// kept.
    generation: AtomicU64,
}

impl PolicyCache {
    pub fn new(objects: ObjectStore) -> PolicyCache {
        PolicyCache {
            objects,
            bootstrap_cluster: LogicalClusterName::parse(BOOTSTRAP_CLUSTER)
                .unwrap_or_else(LogicalClusterName::root),
            bootstrap: RwLock::new(None),
            clusters: RwLock::new(HashMap::new()),
            copied: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// The policy of a logical cluster, building it when it is not cached.
    pub async fn policy(
        &self,
        cluster: &LogicalClusterName,
    ) -> Result<Arc<ClusterPolicy>, ApiError> {
        if let Some(policy) = read(&self.clusters).get(cluster) {
            return Ok(policy.clone());
        }
        let generation = self.generation.load(Ordering::Acquire);
        let bootstrap = self.bootstrap().await?;
        let policy = if *cluster == self.bootstrap_cluster {
            ClusterPolicy {
                layers: vec![bootstrap.index.clone()],
                revision: bootstrap.revision,
            }
        } else {
            let (local, revision) = self.read_cluster(cluster).await?;
            layered(cluster, &bootstrap, &local, revision)?
        };
        let policy = Arc::new(policy);
        if self.generation.load(Ordering::Acquire) == generation {
            write(&self.clusters).insert(cluster.clone(), policy.clone());
        }
        Ok(policy)
    }

    /// The bootstrap policy alone (`system:admin`'s RBAC): what authorizes the requests of a
    /// logical-cluster-admin across all logical clusters (`/clusters/*`).
    pub async fn bootstrap_policy(&self) -> Result<Arc<PolicyIndex>, ApiError> {
        Ok(self.bootstrap().await?.index.clone())
    }

    /// The policy of `cluster` wherever it lives, what a deep SubjectAccessReview and a request
    /// into the cluster are decided by: the cluster's own when this shard holds it (or nobody
    /// replicated RBAC for it), else the one built from the RBAC copies another shard replicated
    /// for it, cached while those copies do not change.
    pub async fn deep_policy(
        &self,
        cluster: &LogicalClusterName,
        tenancy: &TenancyIndex,
    ) -> Result<Arc<ClusterPolicy>, ApiError> {
        if tenancy.logical_cluster(cluster).is_some() {
            return self.policy(cluster).await;
        }
        let Some(stamp) = tenancy.rbac_copies_stamp(cluster) else {
            remove_and_shrink(&mut write(&self.copied), cluster);
            return self.policy(cluster).await;
        };
        if let Some((built_from, policy)) = read(&self.copied).get(cluster)
            && *built_from == stamp
        {
            return Ok(policy.clone());
        }
        let generation = self.generation.load(Ordering::Acquire);
        let bootstrap = self.bootstrap().await?;
        let Some(copies) = tenancy.rbac_copies(cluster) else {
            return self.policy(cluster).await;
        };
        let policy = Arc::new(layered(cluster, &bootstrap, &copies.objects, 0)?);
        // Not kept when the bootstrap layer changed meanwhile: it is part of the policy.
        if self.generation.load(Ordering::Acquire) == generation {
            write(&self.copied).insert(cluster.clone(), (copies.stamp, policy.clone()));
        }
        Ok(policy)
    }

    async fn bootstrap(&self) -> Result<Arc<Bootstrap>, ApiError> {
        if let Some(bootstrap) = read(&self.bootstrap).clone() {
            return Ok(bootstrap);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let mut objects = bootstrap::system_admin_policy();
        let (stored, revision) = self.read_cluster(&self.bootstrap_cluster).await?;
        objects.extend(stored);
        let index = PolicyIndex::build(&objects).map_err(|e| {
            ApiError::internal_error(&format!("building the bootstrap RBAC policy: {e}"))
        })?;
        let bootstrap = Arc::new(Bootstrap {
            objects,
            index: Arc::new(index),
            revision,
        });
        if self.generation.load(Ordering::Acquire) == generation {
            *write(&self.bootstrap) = Some(bootstrap.clone());
        }
        Ok(bootstrap)
    }

    /// Every RBAC object a logical cluster stores, and the revision they are complete up to.
    async fn read_cluster(
        &self,
        cluster: &LogicalClusterName,
    ) -> Result<(Vec<Value>, Revision), ApiError> {
        let mut objects = Vec::new();
        let mut revision = Revision::MAX;
        for (resource, kind) in RBAC_RESOURCES {
            let prefix = self
                .objects
                .keys(RBAC_GROUP, resource, KeyLayout::BuiltIn)
                .scope(cluster, None);
            let page = self
                .objects
                .list(ListRequest::everything(&prefix), &|_| true)
                .await?;
            revision = revision.min(page.revision);
            objects.extend(page.items.into_iter().map(|mut object| {
                object["kind"] = json!(kind);
                object
            }));
        }
        Ok((objects, revision))
    }

    /// Forgets what is known of a logical cluster's RBAC (all clusters' for `system:admin`).
    /// Called after every RBAC write through the store (see the [`AfterWrite`] impl), so the
    /// next request does not see the old policy while the RBAC watch catches up.
    pub fn invalidate(&self, cluster: &LogicalClusterName) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if *cluster == self.bootstrap_cluster {
            *write(&self.bootstrap) = None;
            write(&self.clusters).clear();
            write(&self.copied).clear();
        } else {
            remove_and_shrink(&mut write(&self.clusters), cluster);
        }
    }

    /// Forgets a cluster's RBAC unless what is known already includes the change at `revision`
    /// (a write through this server rebuilt it before the watch reported the write).
    fn invalidate_change(&self, cluster: &LogicalClusterName, revision: Revision) {
        let known = if *cluster == self.bootstrap_cluster {
            read(&self.bootstrap).as_ref().map(|b| b.revision)
        } else {
            read(&self.clusters).get(cluster).map(|p| p.revision)
        };
        if known.is_none_or(|known| known < revision) {
            self.invalidate(cluster);
        }
    }

    fn invalidate_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        *write(&self.bootstrap) = None;
        write(&self.clusters).clear();
        write(&self.copied).clear();
    }

    /// Drops indexes as RBAC objects change anywhere (including through other servers sharing the
    /// store); runs until `shutdown`.
    pub async fn watch_changes(self: Arc<Self>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            if let Err(error) = self.follow(&shutdown).await {
                tracing::warn!(%error, "RBAC watch ended, restarting");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }

    async fn follow(&self, shutdown: &CancellationToken) -> Result<(), ApiError> {
        let from = self.objects.current_revision().await? + 1;
        // One watch over the group, not one per RBAC type: every storage watch is woken by every
        // write.
        let mut changes = self
            .objects
            .watch_current(&self.objects.group_root(RBAC_GROUP), from)
            .await?;
        // Whatever happened before the watch started is unknown: start from nothing.
        self.invalidate_all();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                change = changes.next() => match change {
                    None => return Err(ApiError::service_unavailable("RBAC watch closed")),
                    Some(Err(error)) => return Err(error),
                    Some(Ok(change)) => {
                        match meta::annotations(&change.object)
                            .get(CLUSTER_ANNOTATION)
                            .and_then(|c| LogicalClusterName::parse(c))
                        {
                            Some(cluster) => self.invalidate_change(&cluster, change.revision),
                            None => self.invalidate_all(),
                        }
                    }
                }
            }
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A write to RBAC changes who may do what in its logical cluster: a registry hook, so writes by
/// controllers and bootstrap count as much as clients'.
impl AfterWrite for PolicyCache {
    fn after_write(&self, written: &Written<'_>) {
        if written.rt.group == RBAC_GROUP {
            self.invalidate(written.cluster);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_rbac::{Attributes, Policy, ResourceAttributes, User};

    /// The annotations of a copy another shard replicated for cluster `far`.
    fn of_far() -> Value {
        json!({"kcp.io/cluster": "far", "kcp.io/shard": "root"})
    }

    fn binder_role() -> Value {
        json!({"kind": "ClusterRole", "metadata": {"name": "binder", "annotations": of_far()},
            "rules": [{"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"],
                "resourceNames": ["widgets"], "verbs": ["bind"]}]})
    }

    fn alice_binds() -> Value {
        json!({"kind": "ClusterRoleBinding",
            "metadata": {"name": "binder", "annotations": of_far()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "binder"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                "name": "alice"}]})
    }

    fn alice_may_bind(policy: &ClusterPolicy) -> bool {
        let bind = Attributes::resource(
            User::new("alice", &[]),
            "bind",
            ResourceAttributes {
                api_group: "apis.kcp.io".into(),
                resource: "apiexports".into(),
                name: "widgets".into(),
                ..ResourceAttributes::default()
            },
        );
        policy.layers().as_slice().authorize(&bind).is_allowed()
    }

    #[tokio::test]
    async fn the_policy_of_copies_is_kept_until_the_copies_change() {
        let storage = kcp_storage::open_in_memory().await.unwrap();
        let cache = PolicyCache::new(ObjectStore::new(storage, "/registry"));
        let tenancy = TenancyIndex::default();
        let far = LogicalClusterName::parse("far").unwrap();
        tenancy.apply_copy(false, binder_role());
        tenancy.apply_copy(false, alice_binds());

        let granted = cache.deep_policy(&far, &tenancy).await.unwrap();
        assert!(alice_may_bind(&granted));
        let again = cache.deep_policy(&far, &tenancy).await.unwrap();
        assert!(
            Arc::ptr_eq(&granted, &again),
            "built again without a change"
        );

        // The revoke read back from the cache is seen by the next review.
        tenancy.apply_copy(true, alice_binds());
        let revoked = cache.deep_policy(&far, &tenancy).await.unwrap();
        assert!(!alice_may_bind(&revoked));
        tenancy.apply_copy(false, alice_binds());
        assert!(alice_may_bind(
            &cache.deep_policy(&far, &tenancy).await.unwrap()
        ));

        // A change of the bootstrap layer drops the policies of copies too.
        let kept = cache.deep_policy(&far, &tenancy).await.unwrap();
        cache.invalidate(&cache.bootstrap_cluster.clone());
        let rebuilt = cache.deep_policy(&far, &tenancy).await.unwrap();
        assert!(!Arc::ptr_eq(&kept, &rebuilt));
        assert!(alice_may_bind(&rebuilt));

        // Without copies, the cluster's own (here: the bootstrap policy alone).
        tenancy.apply_copy(true, alice_binds());
        tenancy.apply_copy(true, binder_role());
        assert!(!alice_may_bind(
            &cache.deep_policy(&far, &tenancy).await.unwrap()
        ));
        assert!(read(&cache.copied).is_empty());
    }
}
