//! The Shard finalizer: a shard registers itself in the root shard (a `core.kcp.io` `Shard`
//! object in the `root` workspace, named after the Shard). When the Shard is deleted, that
//! registration would otherwise stay behind and kcp would keep scheduling workspaces onto a
//! shard that no longer exists, so the finalizer deletes it first.
//!
//! Best effort: when the RootShard is gone (or going) there is nothing to deregister from, and
//! when the root shard cannot be reached the finalizer is removed anyway after a bounded number
//! of attempts (see `finalizer::release`).

use kube::api::{ApiResource, DeleteParams, DynamicObject};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use crate::api::{RootShard, Shard};
use crate::naming::SHARD_FINALIZER;
use crate::validate::RootShardFacts;

use super::finalizer::{self, Cleaned};
use super::kcp::{self, is_not_found};
use super::{Context, Error};

/// The workspace shards register in.
const ROOT_WORKSPACE: &str = "root";

/// What the deregistration found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Deregistered,
    NotRegistered,
    RootShardGone,
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

/// Deregisters a deleted Shard and removes its finalizer.
pub async fn finalize(shard: &Shard, ctx: &Context) -> Result<Action, Error> {
    if !finalizer::has(shard, SHARD_FINALIZER) {
        return Ok(Action::await_change());
    }
    let cleanup = deregister(shard, ctx).await.map(|outcome| match outcome {
        Outcome::Deregistered => Cleaned {
            reason: "Deregistered",
            note: "deleted the shard's registration in the root shard".into(),
        },
        Outcome::NotRegistered => Cleaned {
            reason: "Deregistered",
            note: "the shard was not registered in the root shard".into(),
        },
        Outcome::RootShardGone => Cleaned {
            reason: "RootShardGone",
            note: "the root shard is gone; nothing to deregister".into(),
        },
    });
    finalizer::release(ctx, shard, SHARD_FINALIZER, cleanup).await
}

async fn deregister(shard: &Shard, ctx: &Context) -> Result<Outcome, Error> {
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
    match api
        .delete(&shard.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Outcome::Deregistered),
        Err(error) if is_not_found(&error) => Ok(Outcome::NotRegistered),
        Err(error) => Err(Error::Kcp(error)),
    }
}
