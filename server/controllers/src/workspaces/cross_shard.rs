//! Workspaces whose logical cluster lives on another shard: upstream kcp's two-phase scheduling
//! protocol, the mirror of the remote LogicalCluster's status, and deletion across shards.
//!
//! Phase one records the choice on the Workspace before anything exists elsewhere: the shard
//! (`core.kcp.io/shard` and the deprecated 8-character hash `internal.tenancy.kcp.io/shard`),
//! the logical cluster name (`internal.tenancy.kcp.io/cluster`, from the Workspace's UID) and
//! the `core.kcp.io/logicalcluster` finalizer. Phase two creates the LogicalCluster on that
//! shard (through [`crate::remote_shards::RemoteShards`], with the initializers and terminators
//! of the Workspace's type resolved here: the other shard may not know the type) and only then
//! sets `spec.cluster` and `spec.URL` (the shard's `externalURL` + `/clusters/<path>`). A shard
//! that cannot be reached leaves the Workspace `Scheduling` with its choice recorded, and the
//! next pass creates the same LogicalCluster: once the shard is back the workspace converges
//! with exactly one (kcp #4054). A LogicalCluster that exists already is ours when its owner is
//! this Workspace; another owner's gets a fresh random name, as upstream.
//!
//! A shard that refuses the LogicalCluster because it is full (429: its capacity had not caught
//! up when this shard placed the workspace) has the choice forgotten, and the workspace is
//! placed again.
//!
//! A LogicalCluster not seen yet (the watch is starting or catching up) is read from its shard;
//! a NotFound is never taken as gone: the Workspace keeps its phase and is looked at again
//! (kcp PR #3858). Deletion deletes the
//! remote LogicalCluster and drops the finalizer once that shard says it is gone.

use std::time::Duration;

use kcp_apimachinery::{ApiError, meta};
use kcp_registry::LogicalClusterName;
use kcp_tenancy::Phase;
use kcp_tenancy::names;
use kcp_tenancy::placement::{self, Unschedulable};
use kcp_tenancy::workspace::{
    self, LOGICAL_CLUSTER_FINALIZER, SCHEDULED_CLUSTER_ANNOTATION, SHARD_ANNOTATION,
    SHARD_HASH_ANNOTATION,
};
use serde_json::{Value, json};

use super::{Peers, Workspaces, record_shard};
use crate::runner::Pass;

/// How long a pass waits before trying a shard that could not be reached again.
const UNREACHABLE_RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long a scheduled Workspace whose remote LogicalCluster is not seen yet waits.
const UNCONFIRMED_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Whether an error says the shard could not be reached (or is not serving yet).
fn unreachable(error: &ApiError) -> bool {
    matches!(error.code, 502..=504)
}

/// Looks again after a while at a Workspace whose shard could not be reached (or refused).
fn waiting_for(shard: &str, error: &ApiError) -> Pass {
    tracing::info!(%shard, %error, "shard unreachable or refusing, retrying");
    Pass::After(UNREACHABLE_RETRY_AFTER)
}

/// A Workspace recorded on another shard while this one cannot reach other shards (it was
/// restarted without `--logical-cluster-admin-kubeconfig`).
fn without_peers(shard: &str) -> Pass {
    tracing::warn!(
        %shard,
        "a workspace is scheduled to another shard, but this shard has no \
         --logical-cluster-admin-kubeconfig to reach it"
    );
    Pass::After(UNREACHABLE_RETRY_AFTER * 10)
}

/// Whether `logical_cluster` belongs to `workspace` (same owner UID).
fn owned_by(logical_cluster: &Value, workspace: &Value) -> bool {
    logical_cluster
        .pointer("/spec/owner/uid")
        .and_then(Value::as_str)
        .is_some_and(|uid| Some(uid) == meta::uid(workspace))
}

impl Workspaces {
    /// The other shards, following `shard`'s LogicalClusters; the pass to return without them.
    fn peers_for(&self, shard: &str) -> Result<&Peers, Pass> {
        let peers = self.peers.as_ref().ok_or_else(|| without_peers(shard))?;
        peers.logical_clusters.watch(shard);
        Ok(peers)
    }

    /// The shard `kcp_tenancy::placement` chooses for `workspace`, this shard's own capacity
    /// taken from its index (fresher than its `Shard`).
    pub(super) fn place(&self, peers: &Peers, workspace: &Value) -> Result<String, Unschedulable> {
        let mut candidates = peers.shards.candidates();
        if let Some(own) = self.shard.as_deref() {
            for candidate in candidates.iter_mut().filter(|c| c.name == own.name) {
                *candidate = candidate.clone().with_capacity(own.capacity(&self.index));
            }
        }
        let selector = workspace
            .pointer("/spec/location/selector")
            .filter(|s| !s.is_null());
        placement::choose(&candidates, selector, placement::random_index).map(|c| c.name.clone())
    }

    /// Phase one: records the shard, the cluster name and the finalizer on the Workspace, then
    /// goes on with phase two.
    pub(super) async fn record_placement(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        shard: &str,
        target: &LogicalClusterName,
    ) -> Result<Pass, ApiError> {
        let mut placed = current.clone();
        record_shard(&mut placed, shard);
        meta::set_annotation(&mut placed, SCHEDULED_CLUSTER_ANNOTATION, target.as_str());
        let mut finalizers = meta::finalizers(&placed);
        if !finalizers.iter().any(|f| f == LOGICAL_CLUSTER_FINALIZER) {
            finalizers.push(LOGICAL_CLUSTER_FINALIZER.to_string());
        }
        meta::set_finalizers(&mut placed, finalizers);
        let placed = match self.update(cluster, name, placed, None).await {
            Ok(placed) => placed,
            Err(e) if e.code == 404 => return Ok(Pass::Done),
            Err(e) if e.code == 409 => return Ok(Pass::Again),
            Err(e) => return Err(e),
        };
        self.schedule_remotely(cluster, name, &placed, shard, target)
            .await
    }

    /// Phase two: creates the LogicalCluster on `shard`, then sets `spec.cluster` and `spec.URL`.
    pub(super) async fn schedule_remotely(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        shard: &str,
        target: &LogicalClusterName,
    ) -> Result<Pass, ApiError> {
        let peers = match self.peers_for(shard) {
            Ok(peers) => peers,
            Err(pass) => return Ok(pass),
        };
        let Some(candidate) = peers.shards.candidate(shard) else {
            let why = format!("chosen shard {shard:?} does not exist anymore");
            return self.unschedulable(cluster, name, current, &why).await;
        };
        let (logical_cluster, path) =
            self.logical_cluster_for(cluster, name, current, Some(shard))?;
        let remote = peers.logical_clusters.remote();
        let base = &candidate.base_url;
        match remote.create(base, target.as_str(), &logical_cluster).await {
            Ok(created) => {
                peers.shards.placed(shard);
                peers.logical_clusters.record(shard, &created, false)
            }
            Err(e) if e.code == 409 => match remote.get(base, target.as_str()).await {
                Ok(Some(existing)) if owned_by(&existing, current) => {
                    peers.logical_clusters.record(shard, &existing, false)
                }
                Ok(Some(_)) => return self.rename_cluster(cluster, name, current).await,
                Ok(None) => return Ok(Pass::Again),
                Err(e) => return Ok(waiting_for(shard, &e)),
            },
            Err(e) if unreachable(&e) => return Ok(waiting_for(shard, &e)),
            Err(e) if e.code == 429 => {
                peers.shards.placed(shard);
                return self.unplace(cluster, name, current, shard, &e).await;
            }
            // Refused for another reason (e.g. credentials it does not accept): the Workspace
            // says so, and is looked at again later.
            Err(e) => {
                tracing::warn!(%shard, error = %e, "shard refused a logical cluster");
                let why = format!("shard {shard:?} refused the LogicalCluster: {}", e.message);
                return self.unschedulable(cluster, name, current, &why).await;
            }
        }
        let mut scheduled = current.clone();
        scheduled["spec"]["cluster"] = json!(target.as_str());
        scheduled["spec"]["URL"] = json!(workspace::url(&candidate.external_url, &path));
        let scheduled = match self.update(cluster, name, scheduled, None).await {
            Ok(scheduled) => scheduled,
            // Changed or gone meanwhile: the next pass sees how (deletion included).
            Err(e) if e.code == 404 || e.code == 409 => return Ok(Pass::Again),
            Err(e) => return Err(e),
        };
        self.scheduled(cluster, name, scheduled).await
    }

    /// The chosen shard refused the LogicalCluster because it is full: forgets the choice (the
    /// cluster name stays), so the next pass places the workspace again; the refusal counts
    /// against that shard for a while, as a placement does.
    async fn unplace(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        shard: &str,
        refusal: &ApiError,
    ) -> Result<Pass, ApiError> {
        tracing::info!(%shard, error = %refusal, "shard refused a logical cluster, placing again");
        let mut unplaced = current.clone();
        meta::remove_annotation(&mut unplaced, SHARD_ANNOTATION);
        meta::remove_annotation(&mut unplaced, SHARD_HASH_ANNOTATION);
        match self.update(cluster, name, unplaced, None).await {
            Ok(_) => Ok(Pass::Done),
            Err(e) if e.code == 404 || e.code == 409 => Ok(Pass::Again),
            Err(e) => Err(e),
        }
    }

    /// The logical cluster name is taken by another owner's LogicalCluster: records a fresh
    /// random one (upstream generates a new name the same way).
    async fn rename_cluster(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
    ) -> Result<Pass, ApiError> {
        let mut renamed = current.clone();
        meta::set_annotation(
            &mut renamed,
            SCHEDULED_CLUSTER_ANNOTATION,
            &names::random_cluster_name(),
        );
        match self.update(cluster, name, renamed, None).await {
            Ok(_) => Ok(Pass::Again),
            Err(e) if e.code == 404 || e.code == 409 => Ok(Pass::Again),
            Err(e) => Err(e),
        }
    }

    /// Mirrors the LogicalCluster on `shard`, as its watch last reported it.
    pub(super) async fn mirror_remote_status(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        shard: &str,
        target: &LogicalClusterName,
    ) -> Result<Pass, ApiError> {
        let peers = match self.peers_for(shard) {
            Ok(peers) => peers,
            Err(pass) => return Ok(pass),
        };
        let unconfirmed = matches!(
            Phase::of(current),
            None | Some(Phase::Scheduling | Phase::Initializing)
        );
        let mut logical_cluster = peers.logical_clusters.get(shard, target);
        if logical_cluster.is_none() && unconfirmed {
            // Not seen by the watch yet (it is starting, catching up, or cannot follow that
            // shard): the shard itself says; a NotFound only means "not yet", never "gone".
            let base_url = peers.shards.candidate(shard).map(|c| c.base_url);
            let Some(base_url) = base_url else {
                return Ok(Pass::After(UNCONFIRMED_RETRY_AFTER));
            };
            match peers
                .logical_clusters
                .remote()
                .get(&base_url, target.as_str())
                .await
            {
                Ok(Some(found)) => {
                    peers.logical_clusters.record(shard, &found, false);
                    logical_cluster = peers.logical_clusters.get(shard, target);
                }
                Ok(None) => return Ok(Pass::After(UNCONFIRMED_RETRY_AFTER)),
                Err(e) => return Ok(waiting_for(shard, &e)),
            }
        }
        self.mirror(cluster, name, current, logical_cluster.as_ref())
            .await?;
        if logical_cluster.is_none() && unconfirmed {
            return Ok(Pass::After(UNCONFIRMED_RETRY_AFTER));
        }
        Ok(Pass::Done)
    }

    /// Deletes the LogicalCluster on `shard`; drops the finalizer once that shard says it is gone.
    pub(super) async fn delete_remotely(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        current: &Value,
        shard: &str,
        target: &LogicalClusterName,
    ) -> Result<Pass, ApiError> {
        let peers = match self.peers_for(shard) {
            Ok(peers) => peers,
            Err(pass) => return Ok(pass),
        };
        let Some(candidate) = peers.shards.candidate(shard) else {
            let error = ApiError::service_unavailable("the shard is not in the list of shards");
            return Ok(waiting_for(shard, &error));
        };
        let remote = peers.logical_clusters.remote();
        let remaining = async {
            remote.delete(&candidate.base_url, target.as_str()).await?;
            remote.get(&candidate.base_url, target.as_str()).await
        };
        match remaining.await {
            Ok(None) => self.release(cluster, name, current).await,
            Ok(Some(logical_cluster)) => {
                // Its content is being removed there: its removal (from the watch) brings this
                // Workspace back.
                peers
                    .logical_clusters
                    .record(shard, &logical_cluster, false);
                self.mirror(cluster, name, current, Some(&logical_cluster))
                    .await?;
                Ok(Pass::Done)
            }
            Err(e) => Ok(waiting_for(shard, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logical_cluster_is_ours_by_owner_uid() {
        let workspace = json!({"metadata": {"name": "a", "uid": "u1"}});
        assert!(owned_by(
            &json!({"spec": {"owner": {"uid": "u1"}}}),
            &workspace
        ));
        assert!(!owned_by(
            &json!({"spec": {"owner": {"uid": "u2"}}}),
            &workspace
        ));
        assert!(!owned_by(&json!({"spec": {}}), &workspace));
    }

    #[test]
    fn only_gateway_errors_mean_unreachable() {
        assert!(unreachable(&ApiError::service_unavailable("down")));
        assert!(!unreachable(&ApiError::internal_error("bug")));
    }
}
