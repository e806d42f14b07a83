//! What the server knows of every logical cluster and WorkspaceType without reading the store:
//! each cluster's LogicalCluster (its path, phase and type) and every WorkspaceType, kept up to
//! date by one watch (and by the tenancy controllers' own writes, so a workspace is reachable by
//! path the moment it is scheduled).
//!
//! Three decisions need this on every request or admission and cannot wait for storage: turning
//! `/clusters/root:org:team` into a logical cluster name, the workspace content authorizer (does
//! the cluster exist, is it Ready), and type resolution during Workspace admission (types live in
//! other logical clusters, looked up by path).
//!
//! Controllers that decide from this index learn of LogicalCluster changes from it
//! ([`TenancyIndex::subscribe`]), not from a storage watch of their own, as client-go's informers
//! call handlers only after their cache has the change: a controller woken by its own watch could
//! read the index before the index had the change, decide nothing changed, and never be woken
//! again (a Workspace left Initializing while its LogicalCluster was Ready). Updates are kept in
//! resourceVersion order, so a late watch event never takes the index back to an older state.
//!
//! Every shard holds one entry per logical cluster it serves, so an entry is not the
//! LogicalCluster but the few fields the decisions read ([`IndexedLogicalCluster`]): kept whole
//! as a `serde_json::Value` it cost about 8 KB per logical cluster (docs/performance.md, "Root
//! shard memory, continued").

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select_all;
use kcp_apimachinery::{ApiError, meta};
use kcp_tenancy::logical_cluster::PATH_ANNOTATION;
use kcp_tenancy::paths::rewrite_home;
use kcp_tenancy::types::{self, DefaultApiBinding, ResolvedType, TypeError};
use kcp_tenancy::{Path, TypeRef};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::sparse::remove_and_shrink;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ChangeType, ListRequest};
use kcp_registry::store::RestStore;

use crate::subscribers::Subscribers;

mod copies;
mod entry;

pub use copies::CopiedKind;
use copies::Copies;
pub use entry::IndexedLogicalCluster;

#[derive(Default)]
struct Inner {
    /// The LogicalCluster of each cluster that has one.
    clusters: HashMap<LogicalClusterName, Arc<IndexedLogicalCluster>>,
    /// How many of `clusters` are not shard-local `system:` ones, kept with every change: the
    /// shard heartbeat asks after every LogicalCluster change, and counting 10,000 entries each
    /// time cost more than the change.
    counted: usize,
    /// Canonical path (`kcp.io/path`) to cluster.
    paths: HashMap<String, LogicalClusterName>,
    /// WorkspaceTypes by cluster and name.
    types: HashMap<(LogicalClusterName, String), Arc<Value>>,
    /// Other shards' LogicalClusters and WorkspaceTypes, read back from the cache.
    copies: Copies,
}

/// LogicalClusters and WorkspaceTypes of every logical cluster.
#[derive(Default)]
pub struct TenancyIndex {
    inner: RwLock<Inner>,
    /// Who hears of every LogicalCluster the index records (the object, or the last one known
    /// when it is gone), after the index has it.
    subscribers: Subscribers<IndexedLogicalCluster>,
    /// Who hears of the logical clusters whose copies from other shards change.
    copy_subscribers: Subscribers<LogicalClusterName>,
}

/// Another shard's RBAC copies of one logical cluster.
pub struct RbacCopies {
    /// Changes with every change of the copies and is never reused: a policy built from copies
    /// of the same stamp is current.
    pub stamp: u64,
    pub objects: Vec<Value>,
}

/// Why a `/clusters/<path>` does not name a logical cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// Not a path at all.
    Invalid(String),
    /// A valid path no workspace has.
    NotFound(String),
}

/// The path a LogicalCluster carries (`kcp.io/path`), or its cluster name when it has none.
pub(crate) fn path_of(logical_cluster: &Value, cluster: &LogicalClusterName) -> String {
    meta::annotations(logical_cluster)
        .get(PATH_ANNOTATION)
        .filter(|p| !p.is_empty())
        .cloned()
        .unwrap_or_else(|| cluster.to_string())
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

impl TenancyIndex {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The logical cluster `/clusters/<reference>` addresses: a cluster name as it is, a path
    /// (`root:org`, `user:alice:child`) through the workspaces' canonical paths.
    pub fn resolve(&self, reference: &str) -> Result<LogicalClusterName, Unresolved> {
        let path = Path::parse(reference).map_err(|_| Unresolved::Invalid(reference.into()))?;
        if let Ok(name) = path.cluster_name()
            && let Some(name) = LogicalClusterName::parse(name)
        {
            return Ok(name);
        }
        if let Some(cluster) = self.read().paths.get(reference) {
            return Ok(cluster.clone());
        }
        // `user:<name>[:rest]` is also reachable through the home cluster's name.
        let rewritten = rewrite_home(reference);
        if rewritten != reference {
            return self.resolve(&rewritten);
        }
        Err(Unresolved::NotFound(reference.into()))
    }

    /// The LogicalCluster of a cluster, if it has one.
    pub fn logical_cluster(
        &self,
        cluster: &LogicalClusterName,
    ) -> Option<Arc<IndexedLogicalCluster>> {
        self.read().clusters.get(cluster).cloned()
    }

    /// How many logical clusters this shard holds: those with a LogicalCluster, except the
    /// shard-local `system:` ones (what `Shard.status.capacity` counts and the limit bounds).
    pub fn logical_cluster_count(&self) -> u64 {
        u64::try_from(self.read().counted).unwrap_or(u64::MAX)
    }

    /// The canonical path of a cluster (its name when it has no LogicalCluster or path).
    pub fn path(&self, cluster: &LogicalClusterName) -> String {
        match self.read().clusters.get(cluster) {
            Some(logical_cluster) => logical_cluster.path(),
            None => cluster.to_string(),
        }
    }

    /// A WorkspaceType by reference (`path` resolved like a request path): this shard's own,
    /// else another shard's copy from the cache.
    pub fn workspace_type(&self, reference: &TypeRef) -> Option<Value> {
        let resolved = self.resolve(&reference.path).ok();
        let inner = self.read();
        let local = resolved.and_then(|cluster| {
            let object = inner
                .types
                .get(&(cluster.clone(), reference.name.clone()))?;
            let path = inner
                .clusters
                .get(&cluster)
                .map_or_else(|| cluster.to_string(), |lc| lc.path());
            Some((object.clone(), path))
        });
        let (object, path) = local.or_else(|| {
            let cluster = inner.copies.resolve(&reference.path)?;
            let object =
                inner
                    .copies
                    .named(CopiedKind::WorkspaceTypes, &cluster, &reference.name)?;
            let path = inner
                .copies
                .path(&cluster)
                .unwrap_or_else(|| cluster.to_string());
            Some((object, path))
        })?;
        let mut object = object.as_ref().clone();
        // Types are known by their workspace's canonical path (what initializer names use).
        meta::metadata_mut(&mut object)
            .entry("annotations")
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
            .map(|a| a.insert(PATH_ANNOTATION.into(), Value::String(path)));
        Some(object)
    }

    /// The exports a logical cluster binds while it initializes: `spec.defaultAPIBindings` of its
    /// type (`workspace_type`, the `internal.tenancy.kcp.io/type` annotation) and of every type
    /// that extends; none for a cluster without a type.
    pub fn default_api_bindings(
        &self,
        workspace_type: Option<&str>,
    ) -> Result<Vec<DefaultApiBinding>, TypeError> {
        let Some(annotation) = workspace_type.filter(|a| !a.is_empty()) else {
            return Ok(Vec::new());
        };
        let reference = TypeRef::parse(annotation);
        let lookup = |r: &TypeRef| self.workspace_type(r);
        let object =
            lookup(&reference).ok_or_else(|| TypeError::NotFound(annotation.to_string()))?;
        let aliases = types::resolve_aliases(&ResolvedType::new(object, &reference), &lookup)?;
        Ok(types::default_api_bindings(&aliases))
    }

    /// The logical cluster `path` names: one of this shard's, else another shard's known from
    /// the cache (for finding where a type or an export lives, never to serve a request).
    pub fn resolve_with_copies(&self, path: &str) -> Option<LogicalClusterName> {
        match self.resolve(path) {
            Ok(cluster) => Some(cluster),
            Err(_) => self.read().copies.resolve(path),
        }
    }

    /// Replaces every copy of `kind` from other shards with `items` (a fresh list of the cache).
    pub fn replace_copies(&self, kind: CopiedKind, items: Vec<Value>) {
        let touched = self.write().copies.replace(kind, items);
        for cluster in touched {
            self.copy_subscribers.notify(Arc::new(cluster));
        }
    }

    /// Records a copy of another shard's object from the cache, or its deletion.
    pub fn apply_copy(&self, deleted: bool, object: Value) {
        let touched = self.write().copies.apply(deleted, object);
        if let Some(cluster) = touched {
            self.copy_subscribers.notify(Arc::new(cluster));
        }
    }

    /// Another shard's copy of `kind` named `name` in `cluster` (an APIExport, an
    /// APIResourceSchema), as read back from the cache.
    pub fn copy_of(
        &self,
        kind: CopiedKind,
        cluster: &LogicalClusterName,
        name: &str,
    ) -> Option<Arc<Value>> {
        self.read().copies.named(kind, cluster, name)
    }

    /// Copies are read back from a cache from now on (the shard's cache links call it before
    /// they start): until each kind is listed, [`TenancyIndex::copies_listed`] says no.
    pub fn expect_copies(&self) {
        self.write().copies.expect();
    }

    /// The ClusterRoles and ClusterRoleBindings another shard replicated for `cluster` (what
    /// authorizes `bind` on its exports and `use` of its types here), `None` when there are none.
    pub fn rbac_copies(&self, cluster: &LogicalClusterName) -> Option<RbacCopies> {
        let inner = self.read();
        let stamp = inner.copies.rbac_stamp(cluster)?;
        let objects = inner
            .copies
            .of_cluster(
                &[CopiedKind::ClusterRoles, CopiedKind::ClusterRoleBindings],
                cluster,
            )
            .into_iter()
            .map(|object| object.as_ref().clone())
            .collect();
        Some(RbacCopies { stamp, objects })
    }

    /// `status.phase` of `cluster`'s LogicalCluster as another shard replicated it (empty when
    /// unset), `None` when no copy is known: what the workspace content authorizer reads of a
    /// cluster this shard does not hold (upstream's global LogicalCluster lister).
    pub fn copied_phase(&self, cluster: &LogicalClusterName) -> Option<String> {
        self.read().copies.phase(cluster)
    }

    /// The stamp of the RBAC copies of `cluster` ([`RbacCopies::stamp`]) without the copies:
    /// whether a policy built from them is still current.
    pub fn rbac_copies_stamp(&self, cluster: &LogicalClusterName) -> Option<u64> {
        self.read().copies.rbac_stamp(cluster)
    }

    /// The apiexport virtual-workspace URLs of the other shards that hold bindings of export
    /// `name` of `cluster` (from their markers in the cache), for the export's endpoint slice.
    pub fn bound_export_urls(&self, cluster: &LogicalClusterName, name: &str) -> Vec<String> {
        self.read().copies.bound_export_urls(cluster, name)
    }

    /// Whether the copies of `kind` are complete: listed from the cache since the shard started
    /// (until then a missing copy may only be not read yet), or no cache feeds the index.
    pub fn copies_listed(&self, kind: CopiedKind) -> bool {
        self.read().copies.listed(kind)
    }

    /// The logical clusters whose copies change, from now on: each after the index has it.
    pub fn subscribe_copies(&self) -> mpsc::UnboundedReceiver<Arc<LogicalClusterName>> {
        self.copy_subscribers.subscribe()
    }

    /// LogicalClusters as the index records them, from now on: each change, after the index has
    /// it (a removed cluster comes as its last known object). Ends when the index is dropped.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Arc<IndexedLogicalCluster>> {
        self.subscribers.subscribe()
    }

    /// Records a LogicalCluster as stored (or its deletion with `None`). A state no newer than
    /// the one recorded (by resourceVersion) is ignored: the watch brings a controller's own
    /// write again after the controller recorded it, and may bring an older one after a newer.
    pub fn set_logical_cluster(&self, cluster: &LogicalClusterName, object: Option<Value>) {
        let changed = {
            let mut inner = self.write();
            let new = object.map(|object| IndexedLogicalCluster::new(cluster, &object));
            if let (Some(new), Some(old)) = (&new, inner.clusters.get(cluster))
                && new.revision() != 0
                && new.revision() <= old.revision()
            {
                return;
            }
            let old = remove_and_shrink(&mut inner.clusters, cluster);
            let counted = !cluster.as_str().starts_with("system:");
            if let Some(old) = &old {
                inner.counted -= usize::from(counted);
                let path = old.path();
                if inner.paths.get(&path) == Some(cluster) {
                    remove_and_shrink(&mut inner.paths, &path);
                }
            }
            match new {
                Some(new) => {
                    let new = Arc::new(new);
                    inner.paths.insert(new.path(), cluster.clone());
                    inner.clusters.insert(cluster.clone(), new.clone());
                    inner.counted += usize::from(counted);
                    Some(new)
                }
                None => old,
            }
        };
        if let Some(changed) = changed {
            self.subscribers.notify(changed);
        }
    }

    fn set_workspace_type(&self, cluster: LogicalClusterName, name: String, object: Option<Value>) {
        let mut inner = self.write();
        match object {
            Some(object) => inner.types.insert((cluster, name), Arc::new(object)),
            None => remove_and_shrink(&mut inner.types, &(cluster, name)),
        };
    }

    fn apply(&self, kind: ChangeType, object: Value) {
        let (Some(cluster), Some(name)) = (cluster_of(&object), meta::name(&object)) else {
            return;
        };
        let name = name.to_string();
        let deleted = kind == ChangeType::Deleted;
        match object.get("kind").and_then(Value::as_str) {
            Some("LogicalCluster") => {
                self.set_logical_cluster(&cluster, (!deleted).then_some(object))
            }
            Some("WorkspaceType") => {
                self.set_workspace_type(cluster, name, (!deleted).then_some(object))
            }
            _ => {}
        }
    }

    /// The two types this index follows, LogicalClusters and WorkspaceTypes (registered with the
    /// built-ins, so only a broken build lacks them).
    pub fn types(store: &RestStore) -> Result<[Arc<ResourceType>; 2], ApiError> {
        let registry = store.registry();
        match (
            registry.builtin_type("core.kcp.io", "v1alpha1", "logicalclusters"),
            registry.builtin_type("tenancy.kcp.io", "v1alpha1", "workspacetypes"),
        ) {
            (Some(logical_clusters), Some(workspace_types)) => {
                Ok([logical_clusters, workspace_types])
            }
            _ => Err(ApiError::internal_error("tenancy types are not registered")),
        }
    }

    /// Loads everything, then follows changes until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        store: RestStore,
        logical_clusters: Arc<ResourceType>,
        workspace_types: Arc<ResourceType>,
        shutdown: CancellationToken,
    ) {
        while !shutdown.is_cancelled() {
            let follow = self.follow(&store, &logical_clusters, &workspace_types);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                result = follow => if let Err(error) = result {
                    tracing::warn!(%error, "tenancy watch ended, restarting");
                },
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Reads every LogicalCluster and WorkspaceType (before the server takes requests).
    pub async fn load(
        &self,
        store: &RestStore,
        types: [&ResourceType; 2],
    ) -> Result<i64, ApiError> {
        let mut revision = i64::MAX;
        for rt in types {
            let prefix = store.keys(rt).all_clusters().to_string();
            let page = store
                .list(rt, ListRequest::everything(&prefix), &|_| true)
                .await?;
            revision = revision.min(page.revision);
            for object in page.items {
                self.apply(ChangeType::Added, object);
            }
        }
        Ok(revision)
    }

    async fn follow(
        &self,
        store: &RestStore,
        logical_clusters: &ResourceType,
        workspace_types: &ResourceType,
    ) -> Result<(), ApiError> {
        let revision = self
            .load(store, [logical_clusters, workspace_types])
            .await?;
        let mut changes = select_all([
            Box::pin(
                store
                    .objects()
                    .watch_current(store.keys(logical_clusters).all_clusters(), revision + 1)
                    .await?,
            ),
            Box::pin(
                store
                    .objects()
                    .watch_current(store.keys(workspace_types).all_clusters(), revision + 1)
                    .await?,
            ),
        ]);
        while let Some(change) = changes.next().await {
            let change = change?;
            self.apply(change.kind, change.object);
        }
        Err(ApiError::service_unavailable("tenancy watch closed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lc(cluster: &str, path: &str) -> Value {
        json!({"kind": "LogicalCluster", "metadata": {"name": "cluster",
            "annotations": {"kcp.io/cluster": cluster, "kcp.io/path": path}}})
    }

    #[test]
    fn paths_resolve_through_logical_clusters() {
        let index = TenancyIndex::default();
        index.apply(ChangeType::Added, lc("abc", "root:org"));
        let abc = LogicalClusterName::parse("abc").unwrap();
        assert_eq!(index.resolve("root:org"), Ok(abc.clone()));
        assert_eq!(index.resolve("abc"), Ok(abc.clone()));
        assert_eq!(index.resolve("root"), Ok(LogicalClusterName::root()));
        assert_eq!(
            index.resolve("root:nope"),
            Err(Unresolved::NotFound("root:nope".into()))
        );
        assert_eq!(
            index.resolve("root:Bad"),
            Err(Unresolved::Invalid("root:Bad".into()))
        );
        assert_eq!(index.path(&abc), "root:org");
        index.apply(ChangeType::Deleted, lc("abc", "root:org"));
        assert!(index.resolve("root:org").is_err());
    }

    #[test]
    fn the_count_follows_additions_updates_and_removals_without_system_clusters() {
        let index = TenancyIndex::default();
        index.apply(ChangeType::Added, lc("abc", "root:abc"));
        index.apply(ChangeType::Added, lc("def", "root:def"));
        index.apply(ChangeType::Added, lc("system:admin", "system:admin"));
        assert_eq!(index.logical_cluster_count(), 2);
        index.apply(ChangeType::Modified, lc("abc", "root:abc"));
        assert_eq!(index.logical_cluster_count(), 2);
        index.apply(ChangeType::Deleted, lc("abc", "root:abc"));
        index.apply(ChangeType::Deleted, lc("abc", "root:abc"));
        index.apply(ChangeType::Deleted, lc("system:admin", "system:admin"));
        assert_eq!(index.logical_cluster_count(), 1);
    }

    #[test]
    fn homes_resolve_by_user_path_and_below() {
        let index = TenancyIndex::default();
        let home = kcp_tenancy::names::home_cluster_name("alice");
        index.apply(ChangeType::Added, lc(&home, "user:alice"));
        index.apply(ChangeType::Added, lc("child1", "user:alice:dev"));
        assert_eq!(index.resolve("user:alice").unwrap().as_str(), home);
        assert_eq!(index.resolve("user:alice:dev").unwrap().as_str(), "child1");
    }

    fn at(cluster: &str, phase: &str, rv: u64) -> Value {
        let mut object = lc(cluster, "root:org");
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        object["status"] = json!({"phase": phase});
        object
    }

    fn phase(index: &TenancyIndex, cluster: &LogicalClusterName) -> Option<String> {
        index
            .logical_cluster(cluster)
            .map(|lc| lc.raw_phase().to_string())
    }

    #[test]
    fn a_late_older_state_never_replaces_a_newer_one() {
        let index = TenancyIndex::default();
        let abc = LogicalClusterName::parse("abc").unwrap();
        // The controller records its own write (rv 7) before the watch brings rv 6 and rv 7.
        index.set_logical_cluster(&abc, Some(at("abc", "Ready", 7)));
        index.apply(ChangeType::Modified, at("abc", "Initializing", 6));
        assert_eq!(phase(&index, &abc).as_deref(), Some("Ready"));
        index.apply(ChangeType::Modified, at("abc", "Ready", 7));
        index.apply(ChangeType::Modified, at("abc", "Unavailable", 8));
        assert_eq!(phase(&index, &abc).as_deref(), Some("Unavailable"));
        index.apply(ChangeType::Deleted, at("abc", "Unavailable", 9));
        assert_eq!(phase(&index, &abc), None);
    }

    #[test]
    fn an_entry_keeps_what_is_read_and_nothing_else() {
        let index = TenancyIndex::default();
        let abc = LogicalClusterName::parse("abc").unwrap();
        let mut object = at("abc", "Ready", 3);
        object["metadata"]["managedFields"] = json!([{"manager": "kcp", "operation": "Update",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:owner": {}}}}]);
        index.set_logical_cluster(&abc, Some(object));
        let kept = index.logical_cluster(&abc).unwrap();
        assert_eq!(
            *kept,
            IndexedLogicalCluster::new(&abc, &at("abc", "Ready", 3))
        );
        assert_eq!(kept.revision(), 3);
        assert_eq!(index.path(&abc), "root:org");
        assert_eq!(phase(&index, &abc).as_deref(), Some("Ready"));
    }

    #[test]
    fn subscribers_hear_of_each_change_after_the_index_has_it() {
        let index = TenancyIndex::default();
        let mut changes = index.subscribe();
        let abc = LogicalClusterName::parse("abc").unwrap();
        index.set_logical_cluster(&abc, Some(at("abc", "Initializing", 3)));
        // The same state again (the watch repeating a controller's write) and an older one are
        // no change: nobody is woken for them.
        index.apply(ChangeType::Modified, at("abc", "Initializing", 3));
        index.apply(ChangeType::Modified, at("abc", "Scheduling", 2));
        index.apply(ChangeType::Modified, at("abc", "Ready", 4));
        index.apply(ChangeType::Deleted, at("abc", "Ready", 5));
        let mut heard = Vec::new();
        while let Ok(change) = changes.try_recv() {
            heard.push(change.raw_phase().to_string());
        }
        assert_eq!(heard, ["Initializing", "Ready", "Ready"]);
        drop(changes);
        // A subscriber that went away is forgotten at the next change.
        index.set_logical_cluster(&abc, Some(at("abc", "Ready", 6)));
        assert!(index.subscribers.is_empty());
    }

    fn workspace_type(cluster: &str, name: &str, extra: Value) -> Value {
        json!({"kind": "WorkspaceType", "metadata": {"name": name,
            "annotations": {"kcp.io/cluster": cluster}}, "spec": extra})
    }

    #[test]
    fn copies_of_other_shards_resolve_types_but_never_requests() {
        let index = TenancyIndex::default();
        index.replace_copies(CopiedKind::LogicalClusters, vec![lc("far", "root:org")]);
        index.replace_copies(
            CopiedKind::WorkspaceTypes,
            vec![
                workspace_type("far", "team", json!({"copy": true})),
                workspace_type("root", "universal", json!({"copy": true})),
            ],
        );
        let team = index
            .workspace_type(&TypeRef::new("root:org", "team"))
            .unwrap();
        assert_eq!(team["metadata"]["annotations"]["kcp.io/path"], "root:org");
        assert_eq!(
            index.resolve_with_copies("root:org").unwrap().as_str(),
            "far"
        );
        // The copied path serves no request and counts nothing here.
        assert!(index.resolve("root:org").is_err());
        assert_eq!(index.logical_cluster_count(), 0);
        // A local object wins over a copy.
        index.apply(
            ChangeType::Added,
            workspace_type("root", "universal", json!({"copy": false})),
        );
        let universal = index
            .workspace_type(&TypeRef::new("root", "universal"))
            .unwrap();
        assert_eq!(universal["spec"]["copy"], false);
        // A deleted copy, or a fresh list without it, is gone; another shard's deletion of a
        // copy of the same name leaves it.
        let of_shard = |shard: &str| {
            let mut object = workspace_type("far", "team", json!({}));
            object["metadata"]["annotations"]["kcp.io/shard"] = json!(shard);
            object
        };
        index.replace_copies(CopiedKind::WorkspaceTypes, vec![of_shard("root")]);
        index.apply_copy(true, of_shard("shard-1"));
        assert!(
            index
                .workspace_type(&TypeRef::new("root:org", "team"))
                .is_some()
        );
        index.apply_copy(true, of_shard("root"));
        assert!(
            index
                .workspace_type(&TypeRef::new("root:org", "team"))
                .is_none()
        );
        index.replace_copies(CopiedKind::LogicalClusters, Vec::new());
        assert!(index.resolve_with_copies("root:org").is_none());
    }

    #[test]
    fn api_and_rbac_copies_are_found_and_their_changes_heard() {
        let index = TenancyIndex::default();
        let far = LogicalClusterName::parse("far").unwrap();
        let copy = |kind: &str, name: &str, shard: &str| {
            json!({"kind": kind, "metadata": {"name": name,
                "annotations": {"kcp.io/cluster": "far", "kcp.io/shard": shard}},
                "spec": {"url": format!("https://{shard}/services/apiexport/far/{name}")}})
        };
        // Without a cache nothing is awaited; with one, a kind is complete once listed.
        assert!(index.copies_listed(CopiedKind::ApiExports));
        index.expect_copies();
        assert!(!index.copies_listed(CopiedKind::ApiExports));
        let mut changes = index.subscribe_copies();
        index.replace_copies(
            CopiedKind::ApiExports,
            vec![copy("APIExport", "widgets", "root")],
        );
        assert!(index.copies_listed(CopiedKind::ApiExports));
        assert!(!index.copies_listed(CopiedKind::ApiResourceSchemas));
        assert_eq!(changes.try_recv().unwrap().as_str(), "far");
        assert!(
            index
                .copy_of(CopiedKind::ApiExports, &far, "widgets")
                .is_some()
        );
        assert!(
            index
                .copy_of(CopiedKind::ApiResourceSchemas, &far, "widgets")
                .is_none()
        );
        index.apply_copy(false, copy("ClusterRole", "binder", "root"));
        index.apply_copy(false, copy("ClusterRoleBinding", "alice", "root"));
        assert_eq!(changes.try_recv().unwrap().as_str(), "far");
        let rbac = index.rbac_copies(&far).unwrap();
        let mut kinds: Vec<String> = rbac
            .objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_owned())
            .collect();
        kinds.sort();
        assert_eq!(kinds, ["ClusterRole", "ClusterRoleBinding"]);
        assert_eq!(index.rbac_copies_stamp(&far), Some(rbac.stamp));
        // Markers of bound exports are kept per shard.
        index.apply_copy(false, copy("BoundExport", "widgets", "shard-1"));
        index.apply_copy(false, copy("BoundExport", "widgets", "shard-2"));
        assert_eq!(index.bound_export_urls(&far, "widgets").len(), 2);
        index.apply_copy(true, copy("BoundExport", "widgets", "shard-1"));
        assert_eq!(
            index.bound_export_urls(&far, "widgets"),
            ["https://shard-2/services/apiexport/far/widgets"]
        );
        index.replace_copies(CopiedKind::ApiExports, Vec::new());
        assert!(
            index
                .copy_of(CopiedKind::ApiExports, &far, "widgets")
                .is_none()
        );
        // Other kinds leave the RBAC stamp alone; every RBAC change takes a new one, and a
        // cluster without RBAC copies has none (a later copy never brings an old stamp back).
        assert_eq!(index.rbac_copies(&far).unwrap().objects.len(), 2);
        assert_eq!(index.rbac_copies_stamp(&far), Some(rbac.stamp));
        index.apply_copy(true, copy("ClusterRoleBinding", "alice", "root"));
        let revoked = index.rbac_copies_stamp(&far).unwrap();
        assert!(revoked > rbac.stamp);
        index.replace_copies(CopiedKind::ClusterRoles, Vec::new());
        assert!(index.rbac_copies(&far).is_none());
        index.apply_copy(false, copy("ClusterRole", "binder", "root"));
        assert!(index.rbac_copies_stamp(&far).unwrap() > revoked);
    }
}
