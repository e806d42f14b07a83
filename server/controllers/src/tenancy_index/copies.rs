//! Other shards' LogicalClusters and WorkspaceTypes, as read back from the cache server
//! (upstream's "global" informers over the cache): a WorkspaceType of `root:org` held by another
//! shard resolves here for admission, scheduling, `extend` and initializers.
//!
//! They are kept apart from this shard's own objects on purpose: a copy never counts in this
//! shard's capacity, never makes `/clusters/<path>` resolve to a local request (a path of another
//! shard stays 429 or 404), and never overrides a local object: a lookup asks the local objects
//! first and the copies only when the shard has nothing of its own.

use std::collections::HashMap;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopiedKind {
    LogicalClusters,
    WorkspaceTypes,
}

impl CopiedKind {
    fn of(object: &Value) -> Option<CopiedKind> {
        match object.get("kind").and_then(Value::as_str)? {
            "LogicalCluster" => Some(CopiedKind::LogicalClusters),
            "WorkspaceType" => Some(CopiedKind::WorkspaceTypes),
            _ => None,
        }
    }
}

/// Copies of other shards' objects, by logical cluster.
#[derive(Default)]
pub(super) struct Copies {
    clusters: HashMap<LogicalClusterName, Arc<Value>>,
    /// Canonical path (`kcp.io/path`) to cluster, of the copied LogicalClusters.
    paths: HashMap<String, LogicalClusterName>,
    types: HashMap<(LogicalClusterName, String), Arc<Value>>,
}

impl Copies {
    /// Replaces every copy of `kind` with `items` (a fresh list of the cache).
    pub(super) fn replace(&mut self, kind: CopiedKind, items: Vec<Value>) {
        match kind {
            CopiedKind::LogicalClusters => {
                self.clusters.clear();
                self.paths.clear();
            }
            CopiedKind::WorkspaceTypes => self.types.clear(),
        }
        for object in items {
            self.apply(false, object);
        }
    }

    /// Records a copy, or its deletion.
    pub(super) fn apply(&mut self, deleted: bool, object: Value) {
        let (Some(cluster), Some(kind)) = (cluster_of(&object), CopiedKind::of(&object)) else {
            return;
        };
        match kind {
            CopiedKind::LogicalClusters => {
                if deleted
                    && !self
                        .clusters
                        .get(&cluster)
                        .is_some_and(|held| same_shard(held, &object))
                {
                    return;
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
                    self.clusters.insert(cluster, Arc::new(object));
                }
            }
            CopiedKind::WorkspaceTypes => {
                let Some(name) = meta::name(&object).map(str::to_owned) else {
                    return;
                };
                let key = (cluster, name);
                if deleted {
                    if self
                        .types
                        .get(&key)
                        .is_some_and(|held| same_shard(held, &object))
                    {
                        remove_and_shrink(&mut self.types, &key);
                    }
                } else {
                    self.types.insert(key, Arc::new(object));
                }
            }
        }
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

    /// The canonical path of a copied cluster.
    pub(super) fn path(&self, cluster: &LogicalClusterName) -> Option<String> {
        self.clusters.get(cluster).map(|lc| path_of(lc, cluster))
    }

    pub(super) fn workspace_type(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
    ) -> Option<Arc<Value>> {
        self.types.get(&(cluster.clone(), name.to_owned())).cloned()
    }
}
