//! The Shard finalizer: a shard registers itself in the root shard (a `core.kcp.io` `Shard`
//! object in the `root` workspace, named after the Shard). When the Shard is deleted, that
//! registration would otherwise stay behind and kcp would keep scheduling workspaces onto a
//! shard that no longer exists, so the finalizer deletes it first.
//!
//! Upstream kcp-operator has no answer for the workspaces such a shard still holds (they are
//! orphaned silently). Here the finalizer waits while the registration's `status.capacity`
//! (this project's server reports it) counts logical clusters (a shard other than the root shard
//! holds no `root`, as upstream's, so every one counted is a workspace's), with a `Deleting` condition naming the count, and deregisters
//! once they are gone. A root shard that cannot be reached is retried with the usual backoff,
//! without a limit. The annotation `operator.kcp.io/force-delete: "true"` ends the wait: the
//! shard is deregistered whatever it holds, and a root shard that cannot be reached is then
//! given up after the Kubeconfig's number of failed attempts (with a Warning). When the
//! RootShard is gone (or going) there is nothing to deregister from and the Shard is released
//! at once.

use std::time::Duration;

use jiff::Timestamp;
use kube::api::{ApiResource, DeleteParams, DynamicObject};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::api::conditions::DELETING;
use crate::api::{RootShard, Shard};
use crate::naming::{FORCE_DELETE_ANNOTATION, SHARD_FINALIZER};
use crate::validate::RootShardFacts;

use super::finalizer::{self, Cleaned};
use super::kcp::{self, is_not_found};
use super::status::{self, Wanted};
use super::{Context, Error};

/// The workspace shards register in.
const ROOT_WORKSPACE: &str = "root";
/// How often a waiting finalizer looks at the shard's capacity again (it changes in kcp, where
/// the operator watches nothing).
pub const HOLDING_REQUEUE: Duration = Duration::from_secs(5);
/// Reason of the `Deleting` condition while the shard holds logical clusters.
pub const LOGICAL_CLUSTERS_REMAIN: &str = "LogicalClustersRemain";

/// What the deregistration found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Deregistered,
    NotRegistered,
    RootShardGone,
    /// Still registered with this many logical clusters: not deleted.
    Holds(u64),
}

/// kcp's own `Shard` resource (cluster-scoped in a workspace).
fn kcp_shards() -> ApiResource {
    ApiResource {
        group: "core.kcp.io".into(),
        version: "v1alpha1".into(),
        api_version: "core.kcp.io/v1alpha1".into(),
        kind: "Shard".into(),
        plural: "shards".into(),
    }
}

/// Whether the user asked to deregister the shard whatever it holds.
fn forced(shard: &Shard) -> bool {
    shard
        .annotations()
        .get(FORCE_DELETE_ANNOTATION)
        .is_some_and(|value| value == "true")
}

/// The logical clusters a registration's `status.capacity` counts; `None` when it reports no
/// capacity (a server that does not count them).
fn held(registration: &Value) -> Option<u64> {
    let count = &registration["status"]["capacity"]["logicalClusters"];
    count
        .as_u64()
        .or_else(|| count.as_str().and_then(|text| text.parse().ok()))
}

/// Deregisters a deleted Shard and removes its finalizer, or waits while it holds workspaces.
pub async fn finalize(shard: &Shard, ctx: &Context) -> Result<Action, Error> {
    if !finalizer::has(shard, SHARD_FINALIZER) {
        return Ok(Action::await_change());
    }
    let forced = forced(shard);
    let cleaned = |reason, note: &str| Cleaned {
        reason,
        note: note.to_owned(),
    };
    match deregister(shard, ctx, forced).await {
        Ok(Outcome::Holds(count)) => {
            report_holding(ctx, shard, count).await?;
            Ok(Action::requeue(HOLDING_REQUEUE))
        }
        Ok(Outcome::Deregistered) => {
            let note = "deleted the shard's registration in the root shard";
            finalizer::succeed(ctx, shard, SHARD_FINALIZER, cleaned("Deregistered", note)).await
        }
        Ok(Outcome::NotRegistered) => {
            let note = "the shard was not registered in the root shard";
            finalizer::succeed(ctx, shard, SHARD_FINALIZER, cleaned("Deregistered", note)).await
        }
        Ok(Outcome::RootShardGone) => {
            let note = "the root shard is gone; nothing to deregister";
            finalizer::succeed(ctx, shard, SHARD_FINALIZER, cleaned("RootShardGone", note)).await
        }
        // Forced, the cleanup is best effort like the Kubeconfig's: retried with the usual
        // backoff, given up after `finalizer::MAX_ATTEMPTS` failures.
        Err(error) if forced => finalizer::release(ctx, shard, SHARD_FINALIZER, Err(error)).await,
        Err(error) => Err(error),
    }
}

async fn deregister(shard: &Shard, ctx: &Context, forced: bool) -> Result<Outcome, Error> {
    let roots: Api<RootShard> =
        Api::namespaced(ctx.client.clone(), &shard.namespace().unwrap_or_default());
    let root = roots
        .get_opt(&shard.spec.root_shard.reference.name)
        .await
        .map_err(Error::Kube)?;
    let Some(root) = root.filter(|root| root.metadata.deletion_timestamp.is_none()) else {
        return Ok(Outcome::RootShardGone);
    };
    let facts = RootShardFacts::of(&root).map_err(|error| Error::Invalid(error.to_string()))?;
    let endpoint = kcp::endpoint(ctx, &facts, &facts.shard_base_url, ROOT_WORKSPACE).await?;
    let client = ctx.kcp.connect(&endpoint)?;
    let api: Api<DynamicObject> = Api::all_with(client, &kcp_shards());
    let name = shard.name_any();
    if !forced {
        let Some(registration) = api.get_opt(&name).await.map_err(Error::Kcp)? else {
            return Ok(Outcome::NotRegistered);
        };
        let registration = serde_json::to_value(&registration).map_err(Error::Serialize)?;
        if let Some(count @ 1..) = held(&registration) {
            return Ok(Outcome::Holds(count));
        }
    }
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(Outcome::Deregistered),
        Err(error) if is_not_found(&error) => Ok(Outcome::NotRegistered),
        Err(error) => Err(Error::Kcp(error)),
    }
}

/// The `Deleting` condition of a Shard whose finalizer waits for `count` logical clusters.
pub fn holding_condition(shard: &str, count: u64) -> Wanted {
    let plural = if count == 1 { "" } else { "s" };
    Wanted::new(
        DELETING,
        true,
        LOGICAL_CLUSTERS_REMAIN,
        format!(
            "shard {shard:?} still holds {count} logical cluster{plural} (workspaces); it is deregistered from the root shard once they are deleted, or at once with annotation {FORCE_DELETE_ANNOTATION}: \"true\" (their workspaces are then orphaned)"
        ),
    )
}

/// Sets the `Deleting` condition (other conditions kept), writing only when it changed.
async fn report_holding(ctx: &Context, shard: &Shard, count: u64) -> Result<(), Error> {
    let previous = shard.status.clone().unwrap_or_default();
    let deleting = status::conditions(
        &previous.conditions,
        vec![holding_condition(&shard.name_any(), count)],
        shard.metadata.generation,
        Timestamp::now(),
    );
    let mut next = previous.clone();
    for condition in deleting {
        match next.conditions.iter_mut().find(|c| c.type_ == DELETING) {
            Some(existing) => *existing = condition,
            None => next.conditions.push(condition),
        }
    }
    status::write(&ctx.client, shard, &previous, &next).await
}
