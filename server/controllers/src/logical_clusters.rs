//! LogicalClusters through their life (upstream's `kcp-tenancy-logicalcluster`, bootstrap
//! initializer and deletion controllers, in one place because they act on the same object):
//!
//! - a new LogicalCluster moves to `Initializing` (its initializers copied to `status`), its
//!   creator gets the `workspace-admin` ClusterRoleBinding to `cluster-admin`, the built-in
//!   `root:universal` initializer creates namespaces `default` and `kube-system` and removes
//!   itself, and once no initializer is left the cluster is `Ready`;
//! - `workspace-admin` is kept as it should be: deleted or changed, it is made again (the watch
//!   on it decodes only that binding's changes, so the rest of RBAC costs nothing here);
//! - a deleted one is `Terminating` while terminators remain, then `Deleting`: its child
//!   Workspaces are deleted (each takes its own logical cluster with it), then everything else it
//!   holds is removed, then the LogicalCluster itself.
//!
//! The key is the logical cluster name; every step is idempotent and re-reads the object.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_tenancy::Phase;
use kcp_tenancy::logical_cluster::{self as lc, NAME};
use kcp_tenancy::types::API_BINDINGS_INITIALIZER;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::runner::{self, Controller, Pass, Queue};
use crate::tenancy_index::TenancyIndex;
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::store::{DeleteOptions, Location, RestStore};

/// Holds a LogicalCluster until its content is gone.
pub const DELETION_FINALIZER: &str = "core.kcp.io/logicalcluster-deletion";
/// The ClusterRoleBinding making a workspace's creator its admin.
pub(crate) const WORKSPACE_ADMIN_BINDING: &str = "workspace-admin";
/// The initializer the server itself runs.
pub(crate) const UNIVERSAL_INITIALIZER: &str = "root:universal";

const RETRY_AFTER: Duration = Duration::from_millis(200);

pub async fn run(
    store: RestStore,
    index: Arc<TenancyIndex>,
    external_url: String,
    shutdown: CancellationToken,
) {
    let Some(types) = Types::of(&store) else {
        return;
    };
    runner::run(
        LogicalClusters {
            store,
            index,
            types,
            external_url,
        },
        shutdown,
    )
    .await;
}

struct Types {
    logical_clusters: Arc<ResourceType>,
    workspaces: Arc<ResourceType>,
    namespaces: Arc<ResourceType>,
    bindings: Arc<ResourceType>,
}

impl Types {
    fn of(store: &RestStore) -> Option<Types> {
        let registry = store.registry();
        Some(Types {
            logical_clusters: registry.builtin_type(lc::GROUP, "v1alpha1", lc::RESOURCE)?,
            workspaces: registry.builtin_type("tenancy.kcp.io", "v1alpha1", "workspaces")?,
            namespaces: registry.builtin_type("", "v1", "namespaces")?,
            bindings: registry.builtin_type(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
            )?,
        })
    }
}

struct LogicalClusters {
    store: RestStore,
    index: Arc<TenancyIndex>,
    types: Types,
    /// `status.URL` is this with `/clusters/<path>` appended.
    external_url: String,
}

impl Controller for LogicalClusters {
    type Key = LogicalClusterName;
    const NAME: &'static str = "logicalcluster";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<LogicalClusterName>) -> Result<(), ApiError> {
        let rt = &self.types.logical_clusters;
        let prefix = self.store.keys(rt).all_clusters().to_string();
        let page = self
            .store
            .list(rt, ListRequest::everything(&prefix), &|_| true)
            .await?;
        for object in &page.items {
            if needs_work(object)
                && let Some(cluster) = cluster_of(object)
            {
                queue.add(cluster);
            }
        }
        let from = page.revision + 1;
        let logical_clusters = self.store.objects().watch_current(&prefix, from).await?;
        let bindings_prefix = self
            .store
            .keys(&self.types.bindings)
            .all_clusters()
            .to_string();
        let admin_suffix = format!("/{WORKSPACE_ADMIN_BINDING}");
        let admin_bindings = self
            .store
            .objects()
            .watch_where(&bindings_prefix, from, move |raw| {
                raw.key.ends_with(&admin_suffix)
            })
            .await?;
        let mut changes = futures::stream::select(
            logical_clusters.map(|change| (true, change)),
            admin_bindings.map(|change| (false, change)),
        );
        while let Some((of_logical_cluster, change)) = changes.next().await {
            let change = change?;
            if (!of_logical_cluster || needs_work(&change.object))
                && let Some(cluster) = cluster_of(&change.object)
            {
                queue.add(cluster);
            }
        }
        Err(ApiError::service_unavailable("LogicalCluster watch closed"))
    }

    async fn reconcile(&self, cluster: &LogicalClusterName) -> Result<Pass, ApiError> {
        // A few steps per pass (each a write); the watch brings the cluster back for the rest.
        for _ in 0..8 {
            let at = self.at(cluster);
            let current = match self.store.get(&self.types.logical_clusters, at, NAME).await {
                Ok(stored) => stored.object,
                Err(e) if e.code == 404 => {
                    self.index.set_logical_cluster(cluster, None);
                    return Ok(Pass::Done);
                }
                Err(e) => return Err(e),
            };
            match self.step(cluster, &current).await? {
                Step::Changed => continue,
                Step::Waiting => return Ok(Pass::Again),
                Step::Done => return Ok(Pass::Done),
            }
        }
        Ok(Pass::Again)
    }
}

enum Step {
    /// Wrote something; look again.
    Changed,
    /// Waiting for something else (child workspaces going away).
    Waiting,
    Done,
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// Whether a LogicalCluster has anything left to do (Ready ones are left alone).
fn needs_work(object: &Value) -> bool {
    meta::deletion_timestamp(object).is_some()
        || Phase::of(object) != Some(Phase::Ready)
        || !meta::finalizers(object)
            .iter()
            .any(|f| f == DELETION_FINALIZER)
}

impl LogicalClusters {
    fn at<'a>(&self, cluster: &'a LogicalClusterName) -> Location<'a> {
        Location {
            cluster,
            namespace: None,
        }
    }

    async fn write(
        &self,
        cluster: &LogicalClusterName,
        new: Value,
        subresource: Option<&str>,
    ) -> Result<Step, ApiError> {
        let replace = move |_: &Value| Ok(new.clone());
        let updated = self
            .store
            .update(
                &self.types.logical_clusters,
                self.at(cluster),
                NAME,
                &replace,
                subresource,
                false,
            )
            .await?;
        self.index.set_logical_cluster(cluster, Some(updated));
        Ok(Step::Changed)
    }

    async fn step(&self, cluster: &LogicalClusterName, current: &Value) -> Result<Step, ApiError> {
        if meta::deletion_timestamp(current).is_some() {
            return self.delete(cluster, current).await;
        }
        if !meta::finalizers(current)
            .iter()
            .any(|f| f == DELETION_FINALIZER)
        {
            let mut new = current.clone();
            let mut finalizers = meta::finalizers(current);
            finalizers.push(DELETION_FINALIZER.to_string());
            meta::set_finalizers(&mut new, finalizers);
            return self.write(cluster, new, None).await;
        }
        if let Some(next) = lc::next_phase(current) {
            let mut new = current.clone();
            new["status"]["phase"] = json!(next.as_str());
            lc::admit_update(&mut new, current);
            if next == Phase::Initializing {
                // The path the LogicalCluster carries (the index may not have it yet).
                let path = crate::tenancy_index::path_of(current, cluster);
                if let Ok(path) = kcp_tenancy::Path::parse(&path) {
                    new["status"]["URL"] =
                        json!(kcp_tenancy::workspace::url(&self.external_url, &path));
                }
                // The server's own initializers run at once, in the same write: a workspace
                // with only those is Ready after one status update instead of one per step.
                // The creator's binding and the initializers' objects are written together,
                // so the store commits them as one batch.
                tokio::try_join!(
                    self.ensure_admin_binding(cluster, current),
                    self.run_builtin_initializers(cluster, &mut new),
                )?;
                if let Some(Phase::Ready) = lc::next_phase(&new) {
                    new["status"]["phase"] = json!(Phase::Ready.as_str());
                }
            }
            return self.write(cluster, new, Some("status")).await;
        }
        if Phase::of(current) == Some(Phase::Initializing) {
            let mut new = current.clone();
            if self.run_builtin_initializers(cluster, &mut new).await? {
                return self.write(cluster, new, Some("status")).await;
            }
        }
        if Phase::of(current) == Some(Phase::Ready) {
            self.repair_admin_binding(cluster, current).await?;
        }
        Ok(Step::Done)
    }

    /// `workspace-admin` as it should be: the creator (`spec.createdBy`) is cluster-admin in what
    /// they created. `None` when the cluster has no creator (made by a privileged user).
    fn admin_binding(logical_cluster: &Value) -> Option<Value> {
        let username = logical_cluster
            .pointer("/spec/createdBy/username")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())?;
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": WORKSPACE_ADMIN_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": username}],
        }))
    }

    async fn ensure_admin_binding(
        &self,
        cluster: &LogicalClusterName,
        logical_cluster: &Value,
    ) -> Result<(), ApiError> {
        if let Some(binding) = Self::admin_binding(logical_cluster) {
            self.store
                .create_if_absent(&self.types.bindings, self.at(cluster), binding)
                .await?;
        }
        Ok(())
    }

    /// Makes `workspace-admin` again when it was deleted, or changed to bind someone else or
    /// another role (a roleRef cannot be updated, so that binding is replaced).
    async fn repair_admin_binding(
        &self,
        cluster: &LogicalClusterName,
        logical_cluster: &Value,
    ) -> Result<(), ApiError> {
        let Some(desired) = Self::admin_binding(logical_cluster) else {
            return Ok(());
        };
        let rt = &self.types.bindings;
        let current = match self
            .store
            .get(rt, self.at(cluster), WORKSPACE_ADMIN_BINDING)
            .await
        {
            Ok(stored) => stored.object,
            Err(e) if e.code == 404 => {
                return self.ensure_admin_binding(cluster, logical_cluster).await;
            }
            Err(e) => return Err(e),
        };
        if meta::deletion_timestamp(&current).is_some() {
            // Its deletion brings the cluster back here once it is gone.
            return Ok(());
        }
        if current["roleRef"] != desired["roleRef"] {
            self.store
                .delete(
                    rt,
                    self.at(cluster),
                    WORKSPACE_ADMIN_BINDING,
                    &DeleteOptions::default(),
                )
                .await?;
            return self.ensure_admin_binding(cluster, logical_cluster).await;
        }
        if current["subjects"] != desired["subjects"] {
            let subjects = desired["subjects"].clone();
            let replace = move |stored: &Value| {
                let mut fixed = stored.clone();
                fixed["subjects"] = subjects.clone();
                Ok(fixed)
            };
            self.store
                .update(
                    rt,
                    self.at(cluster),
                    WORKSPACE_ADMIN_BINDING,
                    &replace,
                    None,
                    false,
                )
                .await?;
        }
        Ok(())
    }

    /// Runs the initializers this server implements that `logical_cluster` still has and removes
    /// them from its status; whether there were any.
    async fn run_builtin_initializers(
        &self,
        cluster: &LogicalClusterName,
        logical_cluster: &mut Value,
    ) -> Result<bool, ApiError> {
        let pending = lc::initializers(logical_cluster);
        let mut ran = false;
        if pending.iter().any(|i| i == UNIVERSAL_INITIALIZER) {
            self.initialize_universal(cluster).await?;
            lc::remove_initializer(logical_cluster, UNIVERSAL_INITIALIZER);
            ran = true;
        }
        // kcp's own exports (tenancy.kcp.io, topology.kcp.io) are served in every logical
        // cluster here: a type binding only those has nothing to bind. Other exports are bound
        // by the default-bindings initializer (`apis::default_bindings`), which removes it.
        if pending.iter().any(|i| i == API_BINDINGS_INITIALIZER)
            && self.binds_only_kcps_own_exports(logical_cluster)
        {
            lc::remove_initializer(logical_cluster, API_BINDINGS_INITIALIZER);
            ran = true;
        }
        Ok(ran)
    }

    /// Whether every default API binding of the cluster's types names one of kcp's own exports
    /// (false when the types do not resolve: the initializer reports that).
    fn binds_only_kcps_own_exports(&self, logical_cluster: &Value) -> bool {
        let workspace_type = meta::annotations(logical_cluster)
            .get(lc::TYPE_ANNOTATION)
            .cloned();
        self.index
            .default_api_bindings(workspace_type.as_deref())
            .is_ok_and(|defaults| kcp_apis::default_bindings::to_make(defaults).is_empty())
    }

    /// What `root:universal` initializes: namespaces `default` and `kube-system` (created
    /// together, one commit of the store).
    async fn initialize_universal(&self, cluster: &LogicalClusterName) -> Result<(), ApiError> {
        futures::future::try_join_all(crate::bootstrap::ROOT_NAMESPACES.iter().map(|name| {
            let namespace =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            self.store
                .create_if_absent(&self.types.namespaces, self.at(cluster), namespace)
        }))
        .await?;
        Ok(())
    }

    /// Deletion: phase, child workspaces, content, then the LogicalCluster.
    async fn delete(
        &self,
        cluster: &LogicalClusterName,
        current: &Value,
    ) -> Result<Step, ApiError> {
        if let Some(next) = lc::next_phase(current) {
            let mut new = current.clone();
            new["status"]["phase"] = json!(next.as_str());
            return self.write(cluster, new, Some("status")).await;
        }
        if !lc::terminators(current).is_empty() {
            // Terminators are external controllers; the watch brings the cluster back.
            return Ok(Step::Done);
        }
        if !self.delete_child_workspaces(cluster).await? {
            return Ok(Step::Waiting);
        }
        self.purge_content(cluster).await?;
        let mut new = current.clone();
        let finalizers: Vec<String> = meta::finalizers(current)
            .into_iter()
            .filter(|f| f != DELETION_FINALIZER)
            .collect();
        meta::set_finalizers(&mut new, finalizers);
        self.write(cluster, new, None).await?;
        Ok(Step::Changed)
    }

    /// Asks every child Workspace to go; whether none is left.
    async fn delete_child_workspaces(
        &self,
        cluster: &LogicalClusterName,
    ) -> Result<bool, ApiError> {
        let rt = &self.types.workspaces;
        let prefix = self.store.keys(rt).scope(cluster, None);
        let page = self
            .store
            .list(rt, ListRequest::everything(&prefix), &|_| true)
            .await?;
        for workspace in page
            .items
            .iter()
            .filter(|w| meta::deletion_timestamp(w).is_none())
        {
            let name = meta::name(workspace).unwrap_or_default();
            match self
                .store
                .delete(rt, self.at(cluster), name, &DeleteOptions::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(page.items.is_empty())
    }

    /// Removes every object of the cluster but its LogicalCluster, without finalization: the
    /// whole cluster goes, so nothing in it needs to see its content leave one by one.
    async fn purge_content(&self, cluster: &LogicalClusterName) -> Result<(), ApiError> {
        let registry = self.store.registry().clone();
        let mut seen = HashSet::new();
        for rt in registry.for_cluster(cluster).types() {
            if rt.group == lc::GROUP && rt.plural == lc::RESOURCE {
                continue;
            }
            let prefix = self.store.keys(rt).scope(cluster, None);
            if !seen.insert(prefix.clone()) {
                continue;
            }
            let objects = self.store.objects();
            let page = objects
                .list(ListRequest::everything(&prefix), &|_| true)
                .await?;
            for object in page.items {
                let name = meta::name(&object).unwrap_or_default().to_string();
                let key = self
                    .store
                    .keys(rt)
                    .object(cluster, meta::namespace(&object), &name);
                let what = kcp_registry::storage::objects::ObjectRef {
                    group: &rt.group,
                    resource: &rt.plural,
                    name: &name,
                };
                match objects.delete(&key, None, what).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_clusters_with_their_finalizer_need_nothing() {
        let ready =
            json!({"metadata": {"finalizers": [DELETION_FINALIZER]}, "status": {"phase": "Ready"}});
        assert!(!needs_work(&ready));
        let new = json!({"metadata": {}, "spec": {}});
        assert!(needs_work(&new));
    }
}
