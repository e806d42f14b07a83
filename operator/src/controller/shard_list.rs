//! The shard lists in RootShard and FrontProxy statuses: a RootShard lists the Shards that
//! reference it (upstream's `status.shards`), a FrontProxy the shards it routes to (the root
//! shard and those Shards), each with its base URL. Both follow Shard changes (see `run`), so a
//! list is current after every Shard is created or gone.

use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde::Serialize;

use crate::api::common::ShardReference;
use crate::api::{RootShard, Shard};
use crate::validate;

use super::{Context, Error, Watched, status};

/// The Shards (in its namespace) that reference `root`, sorted by name; none without a root.
pub async fn of_root(
    ctx: &Context,
    root: Option<&RootShard>,
) -> Result<Vec<ShardReference>, Error> {
    let Some(root) = root else {
        return Ok(Vec::new());
    };
    let shards: Api<Shard> =
        Api::namespaced(ctx.client.clone(), &root.namespace().unwrap_or_default());
    let list = shards
        .list(&ListParams::default())
        .await
        .map_err(Error::Kube)?;
    let mut references: Vec<ShardReference> = list
        .items
        .iter()
        .filter(|shard| shard.spec.root_shard.reference.name == root.name_any())
        .map(|shard| ShardReference {
            name: shard.name_any(),
            url: validate::shard(shard, Some(root))
                .ok()
                .map(|config| config.shard_base_url),
        })
        .collect();
    references.sort();
    Ok(references)
}

/// The part of a status this module writes.
#[derive(PartialEq, Serialize)]
struct Listed {
    shards: Vec<ShardReference>,
}

/// Writes `next` as `status.shards` of `object` unless it equals the stored `previous`.
pub async fn write<K: Watched>(
    ctx: &Context,
    object: &K,
    previous: &[ShardReference],
    next: Vec<ShardReference>,
) -> Result<(), Error> {
    let previous = Listed {
        shards: previous.to_vec(),
    };
    status::write(&ctx.client, object, &previous, &Listed { shards: next }).await
}
