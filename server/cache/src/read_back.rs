//! Reading other shards' copies back from the cache (upstream's "global" informers, which list
//! and watch the cache server instead of the shard's own store): one resource of every shard
//! (`shards/*/clusters/*`), the reading shard's own copies left out.
//!
//! List, then watch from the list's revision; whoever observes gets the whole list first
//! ([`Observed::Listed`], which replaces what it knew) and then each change. When the watch
//! ends or fails (410 Expired after a compaction, the cache server restarting or unreachable),
//! it waits a moment and lists again, so nothing missed in between stays wrong; until then the
//! observer keeps what it last saw.

use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::client::Resource;
use crate::keys::SHARD_ANNOTATION;
use crate::replication::CacheSide;

/// How long to wait before listing again after a failure.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// What the read-back saw in the cache.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// Every copy of other shards, now.
    Listed(Vec<Value>),
    /// One copy changed (or was deleted).
    Changed { deleted: bool, object: Value },
}

/// Follows `resource` of every shard but `own_shard` in `cache`, telling `observe`, until `stop`.
pub async fn run<C: CacheSide>(
    cache: C,
    resource: Resource,
    own_shard: String,
    observe: impl Fn(Observed) + Send + Sync + 'static,
    stop: CancellationToken,
) {
    loop {
        let outcome = tokio::select! {
            _ = stop.cancelled() => return,
            outcome = list_and_watch(&cache, &resource, &own_shard, &observe) => outcome,
        };
        let error = match outcome {
            Ok(()) => ApiError::service_unavailable("the cache's watch ended"),
            Err(error) => error,
        };
        tracing::info!(
            resource = %resource.resource,
            %error,
            "reading back from the cache starts over"
        );
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RETRY_AFTER) => {}
        }
    }
}

fn foreign(object: &Value, own_shard: &str) -> bool {
    meta::annotations(object)
        .get(SHARD_ANNOTATION)
        .is_some_and(|shard| shard != own_shard)
}

/// One list, then the watch from its revision until it ends.
async fn list_and_watch<C: CacheSide>(
    cache: &C,
    resource: &Resource,
    own_shard: &str,
    observe: &impl Fn(Observed),
) -> Result<(), ApiError> {
    let listed = cache.list(resource, "*").await?;
    let mut changes = cache.watch(resource, "*", listed.revision).await?;
    observe(Observed::Listed(
        listed
            .items
            .into_iter()
            .filter(|object| foreign(object, own_shard))
            .collect(),
    ));
    while let Some(event) = changes.next().await {
        let event = event?;
        if foreign(&event.object, own_shard) {
            observe(Observed::Changed {
                deleted: event.kind == "DELETED",
                object: event.object,
            });
        }
    }
    Ok(())
}
