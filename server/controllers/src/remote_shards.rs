//! LogicalClusters on other shards: how the workspace scheduler writes them ([`RemoteShards`])
//! and what it knows of them ([`RemoteLogicalClusters`]).
//!
//! Upstream kcp's scheduler creates a workspace's LogicalCluster on the shard it chose through
//! that shard's base URL with the logical-cluster-admin credentials, and learns of its phase
//! from informers. kcp-controllers knows no HTTP, so [`RemoteShards`] is the narrow interface
//! the kcp binary implements over HTTPS (`--logical-cluster-admin-kubeconfig` against
//! `Shard.spec.baseURL`). [`RemoteLogicalClusters`] holds one wildcard watch of LogicalClusters
//! per remote shard that holds this shard's workspaces (opened when the scheduler first needs
//! it; listed again after a `410 Gone`, a dropped connection or a shard restart) and keeps, of
//! the LogicalClusters owned by a Workspace on this shard, what the Workspace mirrors
//! (metadata, owner, status). Subscribers hear of each change after the cache has it, as with
//! the tenancy index, so the Workspace controller is woken by owner.
//!
//! The root shard holds one such entry for each of its workspaces placed elsewhere (two thirds
//! of them over three shards), so an entry is kept as JSON text, parsed when read: as a
//! `serde_json::Value` (ordered maps, a string per key and value) the same trimmed object takes
//! about ten times the memory (docs/performance.md, "Root shard memory").

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use kcp_apimachinery::{ApiError, meta};
use kcp_registry::LogicalClusterName;
use kcp_registry::storage::objects::CLUSTER_ANNOTATION;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::shard_directory::Shards;
use crate::subscribers::Subscribers;
use crate::tenancy_index::TenancyIndex;

/// How long a watch that ended waits before listing again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// What a watch of LogicalClusters reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventKind {
    Added,
    Modified,
    Deleted,
    /// Only a newer resourceVersion.
    Bookmark,
}

/// One event of a remote watch; an `ERROR` event (e.g. `410 Gone`) comes as an `Err`.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub kind: WatchEventKind,
    pub object: Value,
}

/// A list of every LogicalCluster of a shard and the resourceVersion to watch from.
#[derive(Debug, Clone)]
pub struct Listed {
    pub items: Vec<Value>,
    pub resource_version: String,
}

/// The LogicalClusters of another shard, reached at its base URL with the logical-cluster-admin
/// credentials. Errors carry the remote status code (503 when the shard cannot be reached).
pub trait RemoteShards: Send + Sync + 'static {
    /// Creates `logical_cluster` in `cluster`; the stored object (409 when one exists).
    fn create<'a>(
        &'a self,
        base_url: &'a str,
        cluster: &'a str,
        logical_cluster: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ApiError>>;
    /// The LogicalCluster of `cluster`, `None` when there is none.
    fn get<'a>(
        &'a self,
        base_url: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ApiError>>;
    /// Asks for the deletion of the LogicalCluster of `cluster` (none there is no error).
    fn delete<'a>(
        &'a self,
        base_url: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
    /// Every LogicalCluster of the shard (`/clusters/*`).
    fn list<'a>(&'a self, base_url: &'a str) -> BoxFuture<'a, Result<Listed, ApiError>>;
    /// Every change after `resource_version`, until the connection ends.
    fn watch<'a>(
        &'a self,
        base_url: &'a str,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError>>;
}

type Key = (String, LogicalClusterName);

/// What this shard knows of the LogicalClusters its Workspaces own on other shards.
pub struct RemoteLogicalClusters {
    remote: Arc<dyn RemoteShards>,
    shards: Arc<Shards>,
    index: Arc<TenancyIndex>,
    known: RwLock<HashMap<Key, Remembered>>,
    /// Shards with a watch running.
    watched: Mutex<HashSet<String>>,
    subscribers: Subscribers<Value>,
    stop: CancellationToken,
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

fn revision(object: &Value) -> Option<u64> {
    meta::resource_version(object)?.parse().ok()
}

/// The part of a LogicalCluster a Workspace mirrors: name, cluster, resourceVersion, deletion,
/// owner and status (the rest would only cost memory).
fn trimmed(object: &Value) -> Value {
    let mut metadata = Map::new();
    for field in ["name", "resourceVersion", "deletionTimestamp"] {
        if let Some(value) = object.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), value.clone());
        }
    }
    if let Some(cluster) = meta::annotations(object).get(CLUSTER_ANNOTATION) {
        metadata.insert("annotations".into(), json!({CLUSTER_ANNOTATION: cluster}));
    }
    json!({
        "kind": "LogicalCluster",
        "metadata": metadata,
        "spec": {"owner": object.pointer("/spec/owner").cloned().unwrap_or(Value::Null)},
        "status": object.get("status").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A trimmed LogicalCluster as kept: its resourceVersion, which orders the states seen, and the
/// object as JSON text.
struct Remembered {
    revision: Option<u64>,
    json: Box<str>,
}

impl Remembered {
    fn of(trimmed: &Value, revision: Option<u64>) -> Option<Remembered> {
        let json = serde_json::to_string(trimmed).ok()?.into_boxed_str();
        Some(Remembered { revision, json })
    }

    fn object(&self) -> Option<Value> {
        serde_json::from_str(&self.json).ok()
    }
}

impl RemoteLogicalClusters {
    /// Watches end with `stop`.
    pub fn new(
        remote: Arc<dyn RemoteShards>,
        shards: Arc<Shards>,
        index: Arc<TenancyIndex>,
        stop: CancellationToken,
    ) -> RemoteLogicalClusters {
        RemoteLogicalClusters {
            remote,
            shards,
            index,
            known: RwLock::default(),
            watched: Mutex::default(),
            subscribers: Subscribers::default(),
            stop,
        }
    }

    pub fn remote(&self) -> &dyn RemoteShards {
        self.remote.as_ref()
    }

    /// The LogicalCluster of `cluster` on `shard`, as last seen (trimmed).
    pub fn get(&self, shard: &str, cluster: &LogicalClusterName) -> Option<Value> {
        self.known
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(shard.to_string(), cluster.clone()))
            .and_then(Remembered::object)
    }

    /// LogicalClusters as the cache records them, from now on (a removed one comes as its last
    /// known state). Ends when the cache is dropped.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Arc<Value>> {
        self.subscribers.subscribe()
    }

    /// Whether a Workspace on this shard owns `logical_cluster`.
    fn is_ours(&self, logical_cluster: &Value) -> bool {
        logical_cluster
            .pointer("/spec/owner/cluster")
            .and_then(Value::as_str)
            .and_then(LogicalClusterName::parse)
            .is_some_and(|owner| self.index.logical_cluster(&owner).is_some())
    }

    /// Records a LogicalCluster of `shard` (its deletion with `deleted`); a state older than the
    /// one recorded is ignored. Subscribers hear of real changes.
    pub fn record(&self, shard: &str, object: &Value, deleted: bool) {
        let Some(cluster) = cluster_of(object) else {
            return;
        };
        if !deleted && !self.is_ours(object) {
            return;
        }
        let key = (shard.to_string(), cluster);
        let changed = {
            let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
            if deleted {
                known.remove(&key).and_then(|gone| gone.object())
            } else {
                let new = revision(object);
                let old = known.get(&key).and_then(|old| old.revision);
                if let (Some(new), Some(old)) = (new, old)
                    && new <= old
                {
                    return;
                }
                let object = trimmed(object);
                let Some(remembered) = Remembered::of(&object, new) else {
                    return;
                };
                known.insert(key, remembered);
                Some(object)
            }
        };
        if let Some(changed) = changed {
            self.subscribers.notify(Arc::new(changed));
        }
    }

    /// Replaces everything known of `shard` with a fresh list: what is gone is reported gone.
    fn replace(&self, shard: &str, items: &[Value]) {
        let listed: HashSet<LogicalClusterName> = items.iter().filter_map(cluster_of).collect();
        let gone: Vec<Value> = {
            let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
            let stale: Vec<Key> = known
                .keys()
                .filter(|(s, c)| s == shard && !listed.contains(c))
                .cloned()
                .collect();
            let removed = stale.iter().filter_map(|key| known.remove(key));
            removed.filter_map(|gone| gone.object()).collect()
        };
        for object in gone {
            self.subscribers.notify(Arc::new(object));
        }
        for object in items {
            self.record(shard, object, false);
        }
    }

    /// Starts following `shard`'s LogicalClusters unless that runs already.
    pub fn watch(self: &Arc<Self>, shard: &str) {
        if !self
            .watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(shard.to_string())
        {
            return;
        }
        let this = self.clone();
        let shard = shard.to_string();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = this.stop.cancelled() => return,
                    result = this.follow(&shard) => if let Err(error) = result {
                        tracing::debug!(%shard, %error, "remote LogicalCluster watch ended, listing again");
                    },
                }
                tokio::select! {
                    _ = this.stop.cancelled() => return,
                    _ = tokio::time::sleep(RECONNECT_AFTER) => {}
                }
            }
        });
    }

    /// Lists the shard's LogicalClusters, then follows their changes until the watch ends.
    async fn follow(&self, shard: &str) -> Result<(), ApiError> {
        // The shard's URL is read at every (re)connection: a restarted shard may have moved.
        let base_url = self
            .shards
            .candidate(shard)
            .map(|c| c.base_url)
            .ok_or_else(|| ApiError::service_unavailable(&format!("unknown shard {shard:?}")))?;
        let listed = self.remote.list(&base_url).await?;
        self.replace(shard, &listed.items);
        let mut events = self
            .remote
            .watch(&base_url, &listed.resource_version)
            .await?;
        while let Some(event) = events.next().await {
            let event = event?;
            match event.kind {
                WatchEventKind::Bookmark => {}
                kind => self.record(shard, &event.object, kind == WatchEventKind::Deleted),
            }
        }
        Err(ApiError::service_unavailable("the watch ended"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lc(cluster: &str, owner_cluster: &str, rv: u64, phase: &str) -> Value {
        json!({
            "kind": "LogicalCluster",
            "metadata": {"name": "cluster", "resourceVersion": rv.to_string(),
                "annotations": {CLUSTER_ANNOTATION: cluster, "kcp.io/path": "root:a"},
                "finalizers": ["x"]},
            "spec": {"owner": {"cluster": owner_cluster, "name": "a"}, "initializers": ["i"]},
            "status": {"phase": phase},
        })
    }

    struct Unreachable;

    impl RemoteShards for Unreachable {
        fn create<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a Value,
        ) -> BoxFuture<'a, Result<Value, ApiError>> {
            Box::pin(async { Err(ApiError::service_unavailable("down")) })
        }
        fn get<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
            Box::pin(async { Err(ApiError::service_unavailable("down")) })
        }
        fn delete<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
            Box::pin(async { Err(ApiError::service_unavailable("down")) })
        }
        fn list<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Listed, ApiError>> {
            Box::pin(async { Err(ApiError::service_unavailable("down")) })
        }
        fn watch<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> BoxFuture<'a, Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError>>
        {
            Box::pin(async { Err(ApiError::service_unavailable("down")) })
        }
    }

    fn cache() -> RemoteLogicalClusters {
        let index = Arc::new(TenancyIndex::default());
        index.set_logical_cluster(
            &LogicalClusterName::root(),
            Some(json!({"metadata": {"annotations": {"kcp.io/path": "root"}}})),
        );
        RemoteLogicalClusters::new(
            Arc::new(Unreachable),
            Arc::new(Shards::default()),
            index,
            CancellationToken::new(),
        )
    }

    #[test]
    fn only_logical_clusters_of_local_workspaces_are_kept_trimmed() {
        let cache = cache();
        let mut heard = cache.subscribe();
        cache.record("s1", &lc("abc", "root", 5, "Initializing"), false);
        cache.record("s1", &lc("def", "elsewhere", 5, "Ready"), false);
        let abc = LogicalClusterName::parse("abc").unwrap();
        let kept = cache.get("s1", &abc).unwrap();
        assert_eq!(kept["status"]["phase"], "Initializing");
        assert_eq!(kept["spec"]["owner"]["name"], "a");
        assert!(kept.pointer("/spec/initializers").is_none());
        assert!(kept.pointer("/metadata/finalizers").is_none());
        assert!(
            cache
                .get("s1", &LogicalClusterName::parse("def").unwrap())
                .is_none()
        );
        assert!(cache.get("s2", &abc).is_none());
        assert_eq!(heard.try_recv().unwrap()["status"]["phase"], "Initializing");
        assert!(heard.try_recv().is_err());
    }

    #[test]
    fn older_states_are_ignored_and_deletions_reported() {
        let cache = cache();
        let mut heard = cache.subscribe();
        let abc = LogicalClusterName::parse("abc").unwrap();
        cache.record("s1", &lc("abc", "root", 7, "Ready"), false);
        cache.record("s1", &lc("abc", "root", 6, "Initializing"), false);
        assert_eq!(cache.get("s1", &abc).unwrap()["status"]["phase"], "Ready");
        cache.record("s1", &lc("abc", "root", 8, "Ready"), true);
        assert!(cache.get("s1", &abc).is_none());
        let phases: Vec<Value> = std::iter::from_fn(|| heard.try_recv().ok())
            .map(|o| o["status"]["phase"].clone())
            .collect();
        assert_eq!(phases, [json!("Ready"), json!("Ready")]);
    }

    #[test]
    fn a_relist_reports_what_went_away_meanwhile() {
        let cache = cache();
        cache.record("s1", &lc("abc", "root", 1, "Ready"), false);
        cache.record("s2", &lc("xyz", "root", 1, "Ready"), false);
        let mut heard = cache.subscribe();
        cache.replace("s1", &[lc("def", "root", 2, "Initializing")]);
        assert!(
            cache
                .get("s1", &LogicalClusterName::parse("abc").unwrap())
                .is_none()
        );
        assert!(
            cache
                .get("s1", &LogicalClusterName::parse("def").unwrap())
                .is_some()
        );
        assert!(
            cache
                .get("s2", &LogicalClusterName::parse("xyz").unwrap())
                .is_some()
        );
        assert_eq!(std::iter::from_fn(|| heard.try_recv().ok()).count(), 2);
    }
}
