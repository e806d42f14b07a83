//! The index's watches (upstream `pkg/proxy/index`'s controller): one of `Shard` objects in
//! root, and for each shard one of Workspaces and one of LogicalClusters across all its logical
//! clusters (`/clusters/*/...`) at the shard's `spec.baseURL`, with the shards kubeconfig's
//! credentials.
//!
//! A new shard starts its two watches; a shard whose base URL changed restarts them (its
//! entries stay until the new lists replace them); a shard whose object is gone stops them and
//! its entries go. Every watch feeds the shared [`State`] under a short write lock, never held
//! across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockWriteGuard};

use tokio_util::sync::CancellationToken;

use super::objects::{LogicalClusterObject, ShardObject, WorkspaceObject};
use super::state::{Feed, ShardEntry, ShardId, State, WorkspaceEntry};
use super::watch::{self, Update};

const SHARDS: &str = "/clusters/root/apis/core.kcp.io/v1alpha1/shards";
const WORKSPACES: &str = "/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspaces";
const LOGICAL_CLUSTERS: &str = "/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters";

/// Runs the watches of every shard the root shard lists.
pub(crate) struct Watches {
    state: Arc<RwLock<State>>,
    /// Credentials for every shard (the URL is each shard's).
    shards_http: reqwest::Client,
    /// The running watches of each shard, stopped by cancelling.
    running: Mutex<HashMap<ShardId, CancellationToken>>,
    stop: CancellationToken,
}

impl Watches {
    pub fn new(
        state: Arc<RwLock<State>>,
        shards_http: reqwest::Client,
        stop: CancellationToken,
    ) -> Arc<Watches> {
        Arc::new(Watches {
            state,
            shards_http,
            running: Mutex::default(),
            stop,
        })
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches root's Shards at `root_url` with `root_http` until the index stops.
    pub fn spawn(self: &Arc<Self>, root_http: reqwest::Client, root_url: &str) {
        let this = self.clone();
        let url = format!("{root_url}{SHARDS}");
        tokio::spawn(async move {
            let apply = |update: Update<ShardObject>| this.shards_changed(update);
            watch::follow(&root_http, &url, apply, &this.stop).await;
        });
    }

    fn shards_changed(self: &Arc<Self>, update: Update<ShardObject>) {
        let (started, removed) = {
            let mut state = self.write();
            match update {
                Update::Listed(shards) => {
                    let listed: Vec<ShardEntry> = shards.into_iter().map(shard_entry).collect();
                    state.relist_shards(&listed)
                }
                Update::Upserted(shard) => (
                    state
                        .upsert_shard(&shard_entry(shard))
                        .into_iter()
                        .collect(),
                    Vec::new(),
                ),
                Update::Deleted(shard) => (
                    Vec::new(),
                    state
                        .remove_shard(&shard.metadata.name)
                        .into_iter()
                        .collect(),
                ),
            }
        };
        for shard in removed {
            self.stop_shard(shard);
        }
        for feed in started {
            self.start_shard(feed);
        }
    }

    fn stop_shard(&self, shard: ShardId) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stop) = running.remove(&shard) {
            stop.cancel();
        }
    }

    /// (Re)starts the two watches of `feed`'s shard at its current base URL.
    fn start_shard(self: &Arc<Self>, feed: Feed) {
        let Some(base_url) = self
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .base_url(feed.shard)
        else {
            return;
        };
        let stop = self.stop.child_token();
        if let Some(previous) = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(feed.shard, stop.clone())
        {
            previous.cancel();
        }
        let (this, url, stopped) = (
            self.clone(),
            format!("{base_url}{WORKSPACES}"),
            stop.clone(),
        );
        tokio::spawn(async move {
            let apply = |update: Update<WorkspaceObject>| this.workspaces_changed(feed, update);
            watch::follow(&this.shards_http, &url, apply, &stopped).await;
        });
        let (this, url) = (self.clone(), format!("{base_url}{LOGICAL_CLUSTERS}"));
        tokio::spawn(async move {
            let apply =
                |update: Update<LogicalClusterObject>| this.logical_clusters_changed(feed, update);
            watch::follow(&this.shards_http, &url, apply, &stop).await;
        });
    }

    fn workspaces_changed(&self, feed: Feed, update: Update<WorkspaceObject>) {
        match update {
            Update::Listed(objects) => {
                let entries: Vec<WorkspaceEntry> =
                    objects.into_iter().filter_map(workspace_entry).collect();
                self.write().relist_workspaces(feed, &entries);
            }
            Update::Upserted(object) => {
                if let Some(entry) = workspace_entry(object) {
                    self.write().upsert_workspace(feed, &entry);
                }
            }
            Update::Deleted(object) => {
                if let Some(entry) = workspace_entry(object) {
                    self.write()
                        .delete_workspace(feed, &entry.parent, &entry.name);
                }
            }
        }
    }

    fn logical_clusters_changed(&self, feed: Feed, update: Update<LogicalClusterObject>) {
        match update {
            Update::Listed(objects) => {
                let clusters: Vec<&str> = objects.iter().filter_map(|o| o.cluster()).collect();
                self.write().relist_logical_clusters(feed, &clusters);
            }
            Update::Upserted(object) => {
                if let Some(cluster) = object.cluster() {
                    self.write().upsert_logical_cluster(feed, cluster);
                }
            }
            Update::Deleted(object) => {
                if let Some(cluster) = object.cluster() {
                    self.write().delete_logical_cluster(feed, cluster);
                }
            }
        }
    }
}

/// A Shard as the state records it.
fn shard_entry(object: ShardObject) -> ShardEntry {
    ShardEntry {
        name: object.metadata.name,
        base_url: object.spec.base_url,
        virtual_workspace_url: object.spec.virtual_workspace_url,
    }
}

/// A Workspace as the state records it; `None` without the logical cluster it is stored in.
fn workspace_entry(object: WorkspaceObject) -> Option<WorkspaceEntry> {
    let annotations = object.metadata.annotations;
    Some(WorkspaceEntry {
        parent: annotations.cluster?,
        name: object.metadata.name,
        cluster: object.spec.cluster,
        scheduled_to: annotations.shard,
        phase: object.status.phase,
    })
}
