//! Workspaces: scheduling, status and deletion (upstream's workspace scheduler, phase and deletion
//! reconcilers). A Workspace gets a logical cluster name that follows from its UID (recorded on
//! it, so a crash never makes two), its LogicalCluster is created with the initializers and
//! terminators of its type, and `spec.cluster` and `spec.URL` are set. From then on the
//! Workspace mirrors its LogicalCluster's phase. Deleting a Workspace deletes its LogicalCluster
//! (which empties the cluster); the Workspace's finalizer goes when the LogicalCluster is gone.
//!
//! Which shard: without `--logical-cluster-admin-kubeconfig` this one. With it, the shard
//! `kcp_tenancy::placement` chooses over the Shards of `root` (selector, liveness, most
//! headroom); a workspace placed on another shard follows upstream's two-phase protocol
//! ([`cross_shard`]). On this shard, scheduling is local: the LogicalCluster is created in this
//! store, then the Workspace is written once.
//!
//! With `--max-logical-clusters`, a Workspace that would exceed this shard's limit (and that no
//! other shard takes) stays `Scheduling` with `WorkspaceScheduled=False` (reason
//! `Unschedulable`, a message saying which shards are full) and is looked at again after
//! [`FULL_RETRY_AFTER`], so it is scheduled once a logical cluster is deleted, without anyone
//! touching it.
//!
//! The key is the Workspace's logical cluster and name; LogicalCluster changes are routed to their
//! owning Workspace. They come from the tenancy index (which `mirror_status` reads) and, for
//! other shards, from [`RemoteLogicalClusters`], never from a watch of this controller's own:
//! woken before the cache had a change, it would mirror the old phase and never look again.

mod cross_shard;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_tenancy::logical_cluster::{self as lc, NAME, Placement};
use kcp_tenancy::placement::{Skipped, Unschedulable};
use kcp_tenancy::workspace::{
    self, LOGICAL_CLUSTER_FINALIZER, SCHEDULED_CLUSTER_ANNOTATION, SHARD_ANNOTATION,
    SHARD_HASH_ANNOTATION,
};
use kcp_tenancy::{Path, TypeRef, names, shard, types};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::logical_clusters::DELETION_FINALIZER;
use super::runner::{self, Controller, Pass, Queue};
use crate::remote_shards::{RemoteLogicalClusters, RemoteShards};
use crate::shard_directory::Shards;
use crate::shard_registration::Registration;
use crate::tenancy_index::TenancyIndex;
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::store::{DeleteOptions, Location, RestStore};

type Key = (LogicalClusterName, String);

const RETRY_AFTER: Duration = Duration::from_millis(200);
/// How often a Workspace waiting for room on a full shard looks again.
pub const FULL_RETRY_AFTER: Duration = Duration::from_secs(2);

/// Upstream's logical cluster names are 16 base36 characters.
const CLUSTER_NAME_LENGTH: usize = 16;

/// What scheduling to other shards needs: the shards and a way to their LogicalClusters.
#[derive(Clone)]
pub struct CrossShard {
    pub shards: Arc<Shards>,
    pub remote: Arc<dyn RemoteShards>,
}

/// The placement side of [`CrossShard`] inside the controller.
struct Peers {
    shards: Arc<Shards>,
    logical_clusters: Arc<RemoteLogicalClusters>,
}

pub async fn run(
    store: RestStore,
    index: Arc<TenancyIndex>,
    external_url: String,
    shard: Option<Arc<Registration>>,
    cross_shard: Option<CrossShard>,
    shutdown: CancellationToken,
) {
    let registry = store.registry().clone();
    let (Some(workspaces), Some(logical_clusters)) = (
        registry.builtin_type(workspace::GROUP, "v1alpha1", workspace::RESOURCE),
        registry.builtin_type(lc::GROUP, "v1alpha1", lc::RESOURCE),
    ) else {
        return;
    };
    // Cross-shard placement needs this shard's name.
    let peers = cross_shard.filter(|_| shard.is_some()).map(|cross| Peers {
        logical_clusters: Arc::new(RemoteLogicalClusters::new(
            cross.remote,
            cross.shards.clone(),
            index.clone(),
            shutdown.child_token(),
        )),
        shards: cross.shards,
    });
    let controller = Workspaces {
        store,
        index,
        external_url,
        shard,
        peers,
        placing: tokio::sync::Mutex::new(()),
        workspaces,
        logical_clusters,
    };
    runner::run(controller, shutdown).await;
}

struct Workspaces {
    store: RestStore,
    index: Arc<TenancyIndex>,
    external_url: String,
    /// This shard's registration, whose capacity bounds scheduling (`None`: unlimited).
    shard: Option<Arc<Registration>>,
    /// Other shards (`None`: every workspace is scheduled here).
    peers: Option<Peers>,
    /// Held from the capacity check to the LogicalCluster's creation when there is a limit.
    placing: tokio::sync::Mutex<()>,
    workspaces: Arc<ResourceType>,
    logical_clusters: Arc<ResourceType>,
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// The Workspace a LogicalCluster belongs to.
fn owner_of(logical_cluster: &Value) -> Option<Key> {
    let owner = logical_cluster.pointer("/spec/owner")?;
    let cluster = LogicalClusterName::parse(owner.get("cluster")?.as_str()?)?;
    Some((cluster, owner.get("name")?.as_str()?.to_string()))
}

/// The next change of a LogicalCluster on another shard (never, without other shards).
async fn next_remote(
    remote: &mut Option<tokio::sync::mpsc::UnboundedReceiver<Arc<Value>>>,
) -> Option<Arc<Value>> {
    match remote {
        Some(remote) => remote.recv().await,
        None => std::future::pending().await,
    }
}

/// The shard a Workspace is recorded as scheduled to (`core.kcp.io/shard`), if any.
fn recorded_shard(workspace: &Value) -> Option<String> {
    meta::annotations(workspace)
        .get(SHARD_ANNOTATION)
        .filter(|s| !s.is_empty())
        .cloned()
}

/// Records `shard` on a Workspace as upstream does: its name and the deprecated hash.
fn record_shard(workspace: &mut Value, shard: &str) {
    meta::set_annotation(workspace, SHARD_ANNOTATION, shard);
    meta::set_annotation(workspace, SHARD_HASH_ANNOTATION, &names::shard_hash(shard));
}

impl Controller for Workspaces {
    type Key = Key;
    const NAME: &'static str = "workspace";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<Key>) -> Result<(), ApiError> {
        // LogicalCluster changes come from the index this controller reads them from, after it
        // has them (see `tenancy_index`); subscribed before the list, so none is missed.
        let mut logical_clusters = self.index.subscribe();
        let mut remote = self.peers.as_ref().map(|p| p.logical_clusters.subscribe());
        let prefix = self.store.keys(&self.workspaces).all_clusters().to_string();
        let page = self
            .store
            .list(&self.workspaces, ListRequest::everything(&prefix), &|_| {
                true
            })
            .await?;
        for object in &page.items {
            if let (Some(cluster), Some(name)) = (cluster_of(object), meta::name(object)) {
                queue.add((cluster, name.to_string()));
            }
        }
        let mut workspaces = self
            .store
            .objects()
            .watch_current(&prefix, page.revision + 1)
            .await?;
        loop {
            let key = tokio::select! {
                change = workspaces.next() => match change {
                    Some(change) => {
                        let object = change?.object;
                        cluster_of(&object).zip(meta::name(&object).map(str::to_string))
                    }
                    None => break,
                },
                logical_cluster = logical_clusters.recv() => match logical_cluster {
                    Some(logical_cluster) => logical_cluster.owner(),
                    None => break,
                },
                Some(logical_cluster) = next_remote(&mut remote) => owner_of(&logical_cluster),
            };
            if let Some(key) = key {
                queue.add(key);
            }
        }
        Err(ApiError::service_unavailable("Workspace watch closed"))
    }

    async fn reconcile(&self, (cluster, name): &Key) -> Result<Pass, ApiError> {
        let at = Location {
            cluster,
            namespace: None,
        };
        let current = match self.store.get(&self.workspaces, at, name).await {
            Ok(stored) => stored.object,
            Err(e) if e.code == 404 => return Ok(Pass::Done),
            Err(e) => return Err(e),
        };
        if meta::deletion_timestamp(&current).is_some() {
            return self.delete(cluster, name, &current).await;
        }
        if current
            .pointer("/spec/cluster")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return self.schedule(cluster, name, &current).await;
        }
        self.mirror_status(cluster, name, &current).await
    }
}

/// The logical cluster a Workspace is (or will be) scheduled to: the one recorded on it, else
/// the one that follows from its UID (as random as upstream's random bytes, but the same on
/// every retry, so a crash between creating the LogicalCluster and recording it never makes a
/// second one).
fn scheduled_cluster(
    cluster: &LogicalClusterName,
    name: &str,
    workspace: &Value,
) -> Result<LogicalClusterName, ApiError> {
    let target = meta::annotations(workspace)
        .get(SCHEDULED_CLUSTER_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| {
            let uid = meta::uid(workspace).unwrap_or(name);
            let digest = names::base36_sha224(format!("workspace:{cluster}:{uid}").as_bytes());
            digest.chars().take(CLUSTER_NAME_LENGTH).collect()
        });
    LogicalClusterName::parse(&target)
        .ok_or_else(|| ApiError::internal_error("invalid scheduled cluster name"))
}

impl Workspaces {
    /// Deletes a cluster's LogicalCluster (which empties the cluster first); a missing one is
    /// already gone.
    async fn delete_logical_cluster(
        &self,
        target: &LogicalClusterName,
    ) -> Result<kcp_registry::store::Deleted, ApiError> {
        let at = Location {
            cluster: target,
            namespace: None,
        };
        match self
            .store
            .delete(&self.logical_clusters, at, NAME, &DeleteOptions::default())
            .await
        {
            Err(e) if e.code == 404 => Ok(kcp_registry::store::Deleted::Gone(Value::Null)),
            result => result,
        }
    }

    async fn update(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        new: Value,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        let replace = move |_: &Value| Ok(new.clone());
        self.store
            .update(
                &self.workspaces,
                Location {
                    cluster,
                    namespace: None,
                },
                name,
                &replace,
                subresource,
                false,
            )
            .await
    }

    /// The LogicalCluster of a Workspace's new logical cluster: owner, path, type, and the
    /// initializers and terminators of its type (resolved here, where the types are known, so
    /// a shard that has no copy of the type can take the cluster).
    fn logical_cluster_for(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        workspace: &Value,
        shard: Option<&str>,
    ) -> Result<(Value, Path), ApiError> {
        let parent_path = Path::parse(&self.index.path(cluster))
            .map_err(|e| ApiError::internal_error(&e.to_string()))?;
        let path = parent_path
            .join(name)
            .map_err(|e| ApiError::internal_error(&e.to_string()))?;
        let lookup = |reference: &TypeRef| self.index.workspace_type(reference);
        let (initializers, terminators) =
            match workspace.pointer("/spec/type").and_then(TypeRef::from_json) {
                Some(reference) => {
                    let resolved = types::resolve_reference(&parent_path, &reference, &lookup)
                        .map_err(|e| ApiError::internal_error(&e.to_string()))?;
                    let aliases = types::resolve_aliases(&resolved, &lookup)
                        .map_err(|e| ApiError::internal_error(&e.to_string()))?;
                    (types::initializers(&aliases), types::terminators(&aliases))
                }
                None => (Vec::new(), Vec::new()),
            };
        let mut logical_cluster = lc::for_workspace(&Placement {
            workspace,
            workspace_cluster: cluster.as_str(),
            path: &path,
            shard,
            initializers: &initializers,
            terminators: &terminators,
        });
        meta::set_finalizers(&mut logical_cluster, [DELETION_FINALIZER]);
        Ok((logical_cluster, path))
    }

    /// This shard's name, when it has one.
    fn own_name(&self) -> Option<&str> {
        self.shard.as_deref().map(|r| r.name.as_str())
    }

    /// Picks the shard (see [`cross_shard`]) and schedules there.
    async fn schedule(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        let target_cluster = scheduled_cluster(cluster, name, current)?;
        let recorded = recorded_shard(current);
        if let Some(shard) = recorded.as_deref().filter(|s| Some(*s) != self.own_name()) {
            return self
                .schedule_remotely(cluster, name, current, shard, &target_cluster)
                .await;
        }
        // Placed here already (recorded, or its LogicalCluster exists: a crash after creating
        // it) or placed now.
        if recorded.is_none()
            && self.index.logical_cluster(&target_cluster).is_none()
            && let Some(peers) = &self.peers
        {
            match self.place(peers, current) {
                Err(why) => {
                    return self
                        .unschedulable(cluster, name, current, &why.to_string())
                        .await;
                }
                Ok(chosen) if Some(chosen.as_str()) != self.own_name() => {
                    return self
                        .record_placement(cluster, name, current, &chosen, &target_cluster)
                        .await;
                }
                Ok(_) => {}
            }
        }
        self.schedule_here(cluster, name, current, &target_cluster)
            .await
    }

    /// Creates the LogicalCluster in this shard's store, then sets `spec.cluster` and `spec.URL`.
    async fn schedule_here(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        target_cluster: &LogicalClusterName,
    ) -> Result<Pass, ApiError> {
        // The cluster name follows from the Workspace's UID (as random as upstream's random bytes,
        // but the same on every retry), so scheduling is one write of the Workspace after its
        // LogicalCluster exists, and a crash in between never makes a second cluster.
        let workspace = current.clone();
        // With a limit, checking for room and taking it (the LogicalCluster enters the index
        // below) is one step at a time, so parallel passes never overfill the shard.
        let placing = match &self.shard {
            Some(shard) if shard.max_logical_clusters.is_some() => Some(self.placing.lock().await),
            _ => None,
        };
        if self.index.logical_cluster(target_cluster).is_none()
            && let Some(pass) = self.wait_for_room(cluster, name, current).await?
        {
            return Ok(pass);
        }
        let target = target_cluster.to_string();
        let (logical_cluster, path) =
            self.logical_cluster_for(cluster, name, &workspace, self.own_name())?;
        let at = Location {
            cluster: target_cluster,
            namespace: None,
        };
        match self
            .store
            .create(&self.logical_clusters, at, logical_cluster, false)
            .await
        {
            Ok(created) => self
                .index
                .set_logical_cluster(target_cluster, Some(created)),
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        drop(placing);
        let mut scheduled = workspace.clone();
        meta::set_annotation(&mut scheduled, SCHEDULED_CLUSTER_ANNOTATION, &target);
        if let Some(own) = self.own_name() {
            record_shard(&mut scheduled, own);
        }
        let mut finalizers = meta::finalizers(&scheduled);
        if !finalizers.iter().any(|f| f == LOGICAL_CLUSTER_FINALIZER) {
            finalizers.push(LOGICAL_CLUSTER_FINALIZER.to_string());
        }
        meta::set_finalizers(&mut scheduled, finalizers);
        scheduled["spec"]["cluster"] = json!(target);
        scheduled["spec"]["URL"] = json!(workspace::url(&self.external_url, &path));
        let scheduled = match self.update(cluster, name, scheduled, None).await {
            Ok(scheduled) => scheduled,
            // Deleted while its LogicalCluster was being made (it had no finalizer yet): that
            // cluster belongs to nobody now.
            Err(e) if e.code == 404 => {
                self.delete_logical_cluster(target_cluster).await?;
                return Ok(Pass::Done);
            }
            // Changed meanwhile (e.g. marked for deletion): the next pass sees how.
            Err(e) if e.code == 409 => return Ok(Pass::Again),
            Err(e) => return Err(e),
        };
        self.scheduled(cluster, name, scheduled).await
    }

    /// After `spec.cluster` is set: a Workspace that waited for a shard says it is scheduled
    /// now, in the status write that moves it to Initializing.
    async fn scheduled(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        mut scheduled: Value,
    ) -> Result<Pass, ApiError> {
        if shard::condition_is_false(&scheduled, shard::SCHEDULED_CONDITION) {
            shard::set_condition(
                &mut scheduled,
                shard::scheduled_condition(jiff::Timestamp::now()),
            );
        }
        self.mirror_status(cluster, name, &scheduled).await
    }

    /// When this shard is full: records why on the Workspace and says to look again later.
    async fn wait_for_room(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Option<Pass>, ApiError> {
        let Some(registration) = &self.shard else {
            return Ok(None);
        };
        let capacity = registration.capacity(&self.index);
        if capacity.has_room() {
            return Ok(None);
        }
        let why = Unschedulable::NoneFits(vec![(
            registration.name.clone(),
            Skipped::Full {
                capacity,
                placed: 0,
            },
        )]);
        self.unschedulable(cluster, name, current, &why.to_string())
            .await
            .map(Some)
    }

    /// Records on the Workspace why no shard takes it (`WorkspaceScheduled=False`) and says to
    /// look again after [`FULL_RETRY_AFTER`].
    async fn unschedulable(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        why: &str,
    ) -> Result<Pass, ApiError> {
        let mut waiting = current.clone();
        let condition = shard::unschedulable_condition(why, jiff::Timestamp::now());
        if shard::set_condition(&mut waiting, condition) {
            match self.update(cluster, name, waiting, Some("status")).await {
                Ok(_) => {}
                Err(e) if e.code == 404 || e.code == 409 => return Ok(Pass::Done),
                Err(e) => return Err(e),
            }
        }
        Ok(Pass::After(FULL_RETRY_AFTER))
    }

    /// Moves the Workspace's status along with its LogicalCluster (its phase label follows in
    /// the same write: the registry derives it).
    async fn mirror_status(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        let Some(target) = current
            .pointer("/spec/cluster")
            .and_then(Value::as_str)
            .and_then(LogicalClusterName::parse)
        else {
            return Ok(Pass::Done);
        };
        if let Some(shard) = self.remote_shard(current) {
            return self
                .mirror_remote_status(cluster, name, current, &shard, &target)
                .await;
        }
        let logical_cluster = self.index.logical_cluster(&target);
        let logical_cluster = logical_cluster.map(|lc| lc.object());
        self.mirror(cluster, name, current, logical_cluster.as_ref())
            .await?;
        Ok(Pass::Done)
    }

    /// Writes the status `workspace::reconcile_status` derives from `logical_cluster`, if it
    /// changes anything.
    async fn mirror(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        logical_cluster: Option<&Value>,
    ) -> Result<(), ApiError> {
        let mut new = current.clone();
        if workspace::reconcile_status(&mut new, logical_cluster) {
            self.update(cluster, name, new, Some("status")).await?;
        }
        Ok(())
    }

    /// The shard other than this one a Workspace is recorded on.
    fn remote_shard(&self, workspace: &Value) -> Option<String> {
        recorded_shard(workspace).filter(|s| Some(s.as_str()) != self.own_name())
    }

    /// Deletes the LogicalCluster; drops the finalizer once it is gone. The cluster is the one
    /// scheduling picks, so a Workspace deleted before its scheduling was recorded (or whose
    /// finalizer someone removed) does not leave its LogicalCluster behind.
    async fn delete(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        let target = current
            .pointer("/spec/cluster")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .and_then(LogicalClusterName::parse);
        let target = match target {
            Some(target) => target,
            None => scheduled_cluster(cluster, name, current)?,
        };
        if let Some(shard) = self.remote_shard(current) {
            return self
                .delete_remotely(cluster, name, current, &shard, &target)
                .await;
        }
        if let kcp_registry::store::Deleted::Pending(_) =
            self.delete_logical_cluster(&target).await?
        {
            // Still there (its content is being removed): the LogicalCluster's removal brings
            // this Workspace back.
            let logical_cluster = self.index.logical_cluster(&target);
            let logical_cluster = logical_cluster.map(|lc| lc.object());
            self.mirror(cluster, name, current, logical_cluster.as_ref())
                .await?;
            return Ok(Pass::Done);
        }
        self.release(cluster, name, current).await
    }

    /// Removes the finalizer of a Workspace whose LogicalCluster is gone.
    async fn release(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        if !meta::finalizers(current)
            .iter()
            .any(|f| f == LOGICAL_CLUSTER_FINALIZER)
        {
            return Ok(Pass::Done);
        }
        let mut new = current.clone();
        let finalizers: Vec<String> = meta::finalizers(current)
            .into_iter()
            .filter(|f| f != LOGICAL_CLUSTER_FINALIZER)
            .collect();
        meta::set_finalizers(&mut new, finalizers);
        match self.update(cluster, name, new, None).await {
            Ok(_) => Ok(Pass::Done),
            Err(e) if e.code == 404 => Ok(Pass::Done),
            Err(e) => Err(e),
        }
    }
}
