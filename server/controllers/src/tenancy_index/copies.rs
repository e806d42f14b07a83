//! Other shards' LogicalClusters, WorkspaceTypes, APIExports, APIResourceSchemas and RBAC, as read back
//! from the cache server (upstream's "global" informers over the cache): a WorkspaceType of
//! `root:org` held by another shard resolves here for admission, scheduling, `extend` and
//! initializers, an APIExport of it (with its schemas) for APIBindings, and the ClusterRoles and
//! ClusterRoleBindings that grant `bind`, `use` or `access` there, with the phase of its
//! LogicalCluster, for the authorizer (upstream's workspace content authorizer reads a
//! LogicalCluster it does not hold from the cache).
//!
//! They are kept apart from this shard's own objects on purpose: a copy never counts in this
//! shard's capacity, never makes `/clusters/<path>` resolve to a local request (a path of another
//! shard stays 429 or 404), and never overrides a local object: a lookup asks the local objects
//! first and the copies only when the shard has nothing of its own.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use kcp_apimachinery::meta;
use kcp_registry::LogicalClusterName;
use kcp_registry::sparse::remove_and_shrink;
use kcp_tenancy::Path;
use serde_json::Value;

use super::{cluster_of, path_of};

/// The annotation the cache puts on every copy: the shard that replicated it.
const SHARD_ANNOTATION: &str = "kcp.io/shard";

/// Whether `deleted` is the copy `held` (the same shard's): every shard replicates its own `root`
/// LogicalCluster and built-in types, so one shard's deletion must not drop another's copy.
fn same_shard(held: &Value, deleted: &Value) -> bool {
    meta::annotations(held).get(SHARD_ANNOTATION)
        == meta::annotations(deleted).get(SHARD_ANNOTATION)
}

/// Which kind of copies a list replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CopiedKind {
    LogicalClusters,
    WorkspaceTypes,
    ApiExports,
    ApiResourceSchemas,
    ApiConversions,
    ClusterRoles,
    ClusterRoleBindings,
    /// Other shards' markers of the exports their APIBindings bind (kcp-cache's
    /// `replication/markers.rs`).
    BoundExports,
}

/// The copies that authorize `bind` and `use` in another shard's cluster.
const RBAC_KINDS: [CopiedKind; 2] = [CopiedKind::ClusterRoles, CopiedKind::ClusterRoleBindings];

impl CopiedKind {
    fn of(object: &Value) -> Option<CopiedKind> {
        match object.get("kind").and_then(Value::as_str)? {
            "LogicalCluster" => Some(CopiedKind::LogicalClusters),
            "WorkspaceType" => Some(CopiedKind::WorkspaceTypes),
            "APIExport" => Some(CopiedKind::ApiExports),
            "APIResourceSchema" => Some(CopiedKind::ApiResourceSchemas),
            "APIConversion" => Some(CopiedKind::ApiConversions),
            "ClusterRole" => Some(CopiedKind::ClusterRoles),
            "ClusterRoleBinding" => Some(CopiedKind::ClusterRoleBindings),
            "BoundExport" => Some(CopiedKind::BoundExports),
            _ => None,
        }
    }
}

/// A copied object other than a LogicalCluster: its kind, logical cluster and name.
type Named = (CopiedKind, LogicalClusterName, String);

/// Copies of other shards' objects, by logical cluster.
#[derive(Default)]
pub(super) struct Copies {
    clusters: HashMap<LogicalClusterName, Arc<Value>>,
    /// Canonical path (`kcp.io/path`) to cluster, of the copied LogicalClusters.
    paths: HashMap<String, LogicalClusterName>,
    /// Every other copy (WorkspaceTypes, APIExports, APIResourceSchemas, APIConversions,
    /// ClusterRoles and ClusterRoleBindings).
    named: HashMap<Named, Arc<Value>>,
    /// The apiexport URLs of other shards holding bindings of an export, by the export's cluster
    /// and name, then by shard.
    bound_exports: HashMap<(LogicalClusterName, String), BTreeMap<String, String>>,
    /// When each cluster's RBAC copies last changed (a number from `rbac_changes`), for the
    /// clusters that have any: a policy built from them is current while the stamp is the same.
    rbac_stamps: HashMap<LogicalClusterName, u64>,
    /// Every change of an RBAC copy so far: stamps are never reused, even after a cluster's
    /// copies are all gone and come back.
    rbac_changes: u64,
    /// The kinds listed from the cache at least once since the shard started.
    listed: HashSet<CopiedKind>,
    /// Whether a cache feeds these copies (without one, there is nothing to wait for).
    expected: bool,
}

impl Copies {
    /// Replaces every copy of `kind` with `items` (a fresh list of the cache); returns the
    /// logical clusters whose copies of `kind` it touched (held before or now).
    pub(super) fn replace(
        &mut self,
        kind: CopiedKind,
        items: Vec<Value>,
    ) -> BTreeSet<LogicalClusterName> {
        let mut touched = BTreeSet::new();
        match kind {
            CopiedKind::LogicalClusters => {
                touched.extend(self.clusters.keys().cloned());
                self.clusters.clear();
                self.paths.clear();
            }
            CopiedKind::BoundExports => {
                touched.extend(
                    self.bound_exports
                        .keys()
                        .map(|(cluster, _)| cluster.clone()),
                );
                self.bound_exports.clear();
            }
            _ => self.named.retain(|(k, cluster, _), _| {
                let keep = *k != kind;
                if !keep {
                    touched.insert(cluster.clone());
                }
                keep
            }),
        }
        self.listed.insert(kind);
        for object in items {
            touched.extend(self.apply(false, object));
        }
        if RBAC_KINDS.contains(&kind) {
            for cluster in &touched {
                self.stamp_rbac(cluster);
            }
        }
        touched
    }

    /// Records that `cluster`'s RBAC copies changed: a new stamp while it has any, none after.
    fn stamp_rbac(&mut self, cluster: &LogicalClusterName) {
        if self.of_cluster(&RBAC_KINDS, cluster).is_empty() {
            remove_and_shrink(&mut self.rbac_stamps, cluster);
        } else {
            self.rbac_changes += 1;
            self.rbac_stamps.insert(cluster.clone(), self.rbac_changes);
        }
    }

    /// The stamp of `cluster`'s RBAC copies, `None` when it has none.
    pub(super) fn rbac_stamp(&self, cluster: &LogicalClusterName) -> Option<u64> {
        self.rbac_stamps.get(cluster).copied()
    }

    /// From now on, copies are read back from a cache: until a kind is listed, an absent copy of
    /// it says nothing.
    pub(super) fn expect(&mut self) {
        self.expected = true;
    }

    /// Whether copies of `kind` are as complete as they get: listed from the cache since the
    /// shard started, or no cache feeds them.
    pub(super) fn listed(&self, kind: CopiedKind) -> bool {
        !self.expected || self.listed.contains(&kind)
    }

    /// Records a copy, or its deletion; returns its logical cluster.
    pub(super) fn apply(&mut self, deleted: bool, object: Value) -> Option<LogicalClusterName> {
        let (Some(cluster), Some(kind)) = (cluster_of(&object), CopiedKind::of(&object)) else {
            return None;
        };
        if kind == CopiedKind::LogicalClusters {
            if deleted
                && !self
                    .clusters
                    .get(&cluster)
                    .is_some_and(|held| same_shard(held, &object))
            {
                return None;
            }
            if let Some(old) = remove_and_shrink(&mut self.clusters, &cluster) {
                let path = path_of(&old, &cluster);
                if self.paths.get(&path) == Some(&cluster) {
                    remove_and_shrink(&mut self.paths, &path);
                }
            }
            if !deleted {
                self.paths
                    .insert(path_of(&object, &cluster), cluster.clone());
                self.clusters.insert(cluster.clone(), Arc::new(object));
            }
            return Some(cluster);
        }
        let name = meta::name(&object)?.to_owned();
        if kind == CopiedKind::BoundExports {
            let shard = meta::annotations(&object).remove(SHARD_ANNOTATION)?;
            let key = (cluster.clone(), name);
            let urls = self.bound_exports.entry(key.clone()).or_default();
            match object.pointer("/spec/url").and_then(Value::as_str) {
                Some(url) if !deleted => {
                    urls.insert(shard, url.to_owned());
                }
                _ => {
                    urls.remove(&shard);
                }
            }
            if urls.is_empty() {
                remove_and_shrink(&mut self.bound_exports, &key);
            }
            return Some(cluster);
        }
        let key = (kind, cluster.clone(), name);
        if !deleted {
            self.named.insert(key, Arc::new(object));
        } else if self
            .named
            .get(&key)
            .is_some_and(|held| same_shard(held, &object))
        {
            remove_and_shrink(&mut self.named, &key);
        }
        if RBAC_KINDS.contains(&kind) {
            self.stamp_rbac(&cluster);
        }
        Some(cluster)
    }

    /// The cluster a path names among the copies (a cluster name names itself).
    pub(super) fn resolve(&self, reference: &str) -> Option<LogicalClusterName> {
        let path = Path::parse(reference).ok()?;
        if let Ok(name) = path.cluster_name()
            && let Some(name) = LogicalClusterName::parse(name)
        {
            return Some(name);
        }
        self.paths.get(reference).cloned()
    }

    /// `status.phase` of a copied cluster's LogicalCluster (empty when unset).
    pub(super) fn phase(&self, cluster: &LogicalClusterName) -> Option<String> {
        let copy = self.clusters.get(cluster)?;
        let phase = copy.pointer("/status/phase").and_then(Value::as_str);
        Some(phase.unwrap_or_default().to_owned())
    }

    /// The canonical path of a copied cluster.
    pub(super) fn path(&self, cluster: &LogicalClusterName) -> Option<String> {
        self.clusters.get(cluster).map(|lc| path_of(lc, cluster))
    }

    /// The copy of `kind` named `name` in `cluster`.
    pub(super) fn named(
        &self,
        kind: CopiedKind,
        cluster: &LogicalClusterName,
        name: &str,
    ) -> Option<Arc<Value>> {
        self.named
            .get(&(kind, cluster.clone(), name.to_owned()))
            .cloned()
    }

    /// The apiexport URLs other shards holding bindings of export `name` of `cluster` published.
    pub(super) fn bound_export_urls(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
    ) -> Vec<String> {
        self.bound_exports
            .get(&(cluster.clone(), name.to_owned()))
            .map(|urls| urls.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Every copy of one of `kinds` in `cluster`.
    pub(super) fn of_cluster(
        &self,
        kinds: &[CopiedKind],
        cluster: &LogicalClusterName,
    ) -> Vec<Arc<Value>> {
        self.named
            .iter()
            .filter(|((kind, of, _), _)| of == cluster && kinds.contains(kind))
            .map(|(_, object)| object.clone())
            .collect()
    }
}
