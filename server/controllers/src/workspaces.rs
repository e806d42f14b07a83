//! Workspaces: scheduling, status and deletion (upstream's workspace scheduler, phase and deletion
//! reconcilers). This server is one shard, so scheduling is local: a Workspace gets a random
//! logical cluster name (recorded on it first, so a crash never makes two), its LogicalCluster is
//! created there with the initializers and terminators of its type, and `spec.cluster` and
//! `spec.URL` are set. From then on the Workspace mirrors its LogicalCluster's phase. Deleting a
//! Workspace deletes its LogicalCluster (which empties the cluster); the Workspace's finalizer
//! goes when the LogicalCluster is gone.
//!
//! With `--max-logical-clusters`, a Workspace that would exceed the shard's limit stays
//! `Scheduling` with `WorkspaceScheduled=False` (reason `Unschedulable`, a message saying the
//! shard is full) and is looked at again after [`FULL_RETRY_AFTER`], so it is scheduled once a
//! logical cluster is deleted, without anyone touching it.
//!
//! The key is the Workspace's logical cluster and name; LogicalCluster changes are routed to their
//! owning Workspace. They come from the tenancy index (which `mirror_status` reads), never from a
//! watch of this controller's own: woken before the index had a change, it would mirror the old
//! phase and never look again.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_tenancy::logical_cluster::{self as lc, NAME, Placement};
use kcp_tenancy::workspace::{self, LOGICAL_CLUSTER_FINALIZER, SCHEDULED_CLUSTER_ANNOTATION};
use kcp_tenancy::{Path, TypeRef, names, shard, types};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::logical_clusters::DELETION_FINALIZER;
use super::runner::{self, Controller, Pass, Queue};
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

pub async fn run(
    store: RestStore,
    index: Arc<TenancyIndex>,
    external_url: String,
    shard: Option<Arc<Registration>>,
    shutdown: CancellationToken,
) {
    let registry = store.registry().clone();
    let (Some(workspaces), Some(logical_clusters)) = (
        registry.builtin_type(workspace::GROUP, "v1alpha1", workspace::RESOURCE),
        registry.builtin_type(lc::GROUP, "v1alpha1", lc::RESOURCE),
    ) else {
        return;
    };
    let controller = Workspaces {
        store,
        index,
        external_url,
        shard,
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

impl Controller for Workspaces {
    type Key = Key;
    const NAME: &'static str = "workspace";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<Key>) -> Result<(), ApiError> {
        // LogicalCluster changes come from the index this controller reads them from, after it
        // has them (see `tenancy_index`); subscribed before the list, so none is missed.
        let mut logical_clusters = self.index.subscribe();
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
                    Some(logical_cluster) => owner_of(&logical_cluster),
                    None => break,
                },
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

    /// Picks the logical cluster, creates its LogicalCluster, sets `spec.cluster` and `spec.URL`.
    async fn schedule(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        // The cluster name follows from the Workspace's UID (as random as upstream's random bytes,
        // but the same on every retry), so scheduling is one write of the Workspace after its
        // LogicalCluster exists, and a crash in between never makes a second cluster.
        let workspace = current.clone();
        let target_cluster = scheduled_cluster(cluster, name, current)?;
        // With a limit, checking for room and taking it (the LogicalCluster enters the index
        // below) is one step at a time, so parallel passes never overfill the shard.
        let placing = match &self.shard {
            Some(shard) if shard.max_logical_clusters.is_some() => Some(self.placing.lock().await),
            _ => None,
        };
        if self.index.logical_cluster(&target_cluster).is_none()
            && let Some(pass) = self.wait_for_room(cluster, name, current).await?
        {
            return Ok(pass);
        }
        let target = target_cluster.to_string();
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
            workspace: &workspace,
            workspace_cluster: cluster.as_str(),
            path: &path,
            shard: None,
            initializers: &initializers,
            terminators: &terminators,
        });
        meta::set_finalizers(&mut logical_cluster, [DELETION_FINALIZER]);
        let at = Location {
            cluster: &target_cluster,
            namespace: None,
        };
        match self
            .store
            .create(&self.logical_clusters, at, logical_cluster, false)
            .await
        {
            Ok(created) => self
                .index
                .set_logical_cluster(&target_cluster, Some(created)),
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        drop(placing);
        let mut scheduled = workspace.clone();
        meta::metadata_mut(&mut scheduled)
            .entry("annotations")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|a| a.insert(SCHEDULED_CLUSTER_ANNOTATION.into(), json!(target)));
        let mut finalizers = meta::finalizers(&scheduled);
        if !finalizers.iter().any(|f| f == LOGICAL_CLUSTER_FINALIZER) {
            finalizers.push(LOGICAL_CLUSTER_FINALIZER.to_string());
        }
        meta::set_finalizers(&mut scheduled, finalizers);
        scheduled["spec"]["cluster"] = json!(target);
        scheduled["spec"]["URL"] = json!(workspace::url(&self.external_url, &path));
        let mut scheduled = match self.update(cluster, name, scheduled, None).await {
            Ok(scheduled) => scheduled,
            // Deleted while its LogicalCluster was being made (it had no finalizer yet): that
            // cluster belongs to nobody now.
            Err(e) if e.code == 404 => {
                self.delete_logical_cluster(&target_cluster).await?;
                return Ok(Pass::Done);
            }
            // Changed meanwhile (e.g. marked for deletion): the next pass sees how.
            Err(e) if e.code == 409 => return Ok(Pass::Again),
            Err(e) => return Err(e),
        };
        // A Workspace that waited for room says it is scheduled now, in the status write that
        // moves it to Initializing.
        if shard::condition_is_false(&scheduled, shard::SCHEDULED_CONDITION) {
            shard::set_condition(
                &mut scheduled,
                shard::scheduled_condition(jiff::Timestamp::now()),
            );
        }
        self.mirror_status(cluster, name, &scheduled).await
    }

    /// When the shard is full: records why on the Workspace and says to look again later.
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
        let mut waiting = current.clone();
        let condition = shard::full_condition(&registration.name, capacity, jiff::Timestamp::now());
        if shard::set_condition(&mut waiting, condition) {
            match self.update(cluster, name, waiting, Some("status")).await {
                Ok(_) => {}
                Err(e) if e.code == 404 || e.code == 409 => return Ok(Some(Pass::Done)),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(Pass::After(FULL_RETRY_AFTER)))
    }

    /// Moves the Workspace's status along with its LogicalCluster (its phase label follows in
    /// the same write: the registry derives it).
    async fn mirror_status(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        let target = current
            .pointer("/spec/cluster")
            .and_then(Value::as_str)
            .and_then(LogicalClusterName::parse);
        let logical_cluster = target.and_then(|t| self.index.logical_cluster(&t));
        let mut new = current.clone();
        if workspace::reconcile_status(&mut new, logical_cluster.as_deref()) {
            self.update(cluster, name, new, Some("status")).await?;
        }
        Ok(Pass::Done)
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
        if let kcp_registry::store::Deleted::Pending(_) =
            self.delete_logical_cluster(&target).await?
        {
            // Still there (its content is being removed): the LogicalCluster's removal brings
            // this Workspace back.
            let mut new = current.clone();
            if workspace::reconcile_status(&mut new, self.index.logical_cluster(&target).as_deref())
            {
                self.update(cluster, name, new, Some("status")).await?;
            }
            return Ok(Pass::Done);
        }
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
