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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::stream::BoxStream;
    use kcp_storage::Revision;
    use serde_json::json;

    use super::*;
    use crate::client::{Listed, WatchEvent};
    use crate::replication::ObjectId;

    /// A cache whose first watch is refused as too old (410) and whose second one brings one
    /// event; its list names which call it was.
    #[derive(Default)]
    struct Compacted {
        lists: Mutex<u64>,
        watches: Mutex<u64>,
    }

    fn copy(shard: &str, name: &str) -> Value {
        json!({"metadata": {"name": name, "annotations": {"kcp.io/shard": shard}}})
    }

    impl CacheSide for Arc<Compacted> {
        async fn list(&self, _: &Resource, _: &str) -> Result<Listed, ApiError> {
            let mut lists = self.lists.lock().unwrap();
            *lists += 1;
            let items = vec![copy("root", &format!("list-{lists}")), copy("me", "own")];
            Ok(Listed { items, revision: 7 })
        }

        async fn watch(
            &self,
            _: &Resource,
            _: &str,
            _: Revision,
        ) -> Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError> {
            let mut watches = self.watches.lock().unwrap();
            *watches += 1;
            if *watches == 1 {
                return Err(ApiError::from_answer(410, &json!({"reason": "Expired"})));
            }
            let event = WatchEvent {
                kind: "DELETED".to_owned(),
                object: copy("root", "list-2"),
            };
            Ok(futures::stream::iter([Ok(event)])
                .chain(futures::stream::pending())
                .boxed())
        }

        async fn put(&self, _: &Resource, _: &str, _: &str, _: &Value) -> Result<(), ApiError> {
            unreachable!("the read-back never writes")
        }

        async fn remove(&self, _: &Resource, _: &str, _: &ObjectId) -> Result<(), ApiError> {
            unreachable!("the read-back never writes")
        }
    }

    #[tokio::test]
    async fn a_refused_watch_lists_again_and_own_copies_are_left_out() {
        let cache = Arc::new(Compacted::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let observer = seen.clone();
        let task = tokio::spawn(run(
            cache,
            Resource::new("tenancy.kcp.io", "v1alpha1", "workspacetypes"),
            "me".to_owned(),
            move |observed| observer.lock().unwrap().push(observed),
            stop.clone(),
        ));
        let names = |observed: &Observed| match observed {
            Observed::Listed(items) => format!(
                "listed {:?}",
                items
                    .iter()
                    .map(|i| meta::name(i).unwrap_or_default())
                    .collect::<Vec<_>>()
            ),
            Observed::Changed { deleted, object } => format!(
                "changed {deleted} {}",
                meta::name(object).unwrap_or_default()
            ),
        };
        for _ in 0..100 {
            if seen.lock().unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.cancel();
        task.await.unwrap();
        let seen: Vec<String> = seen.lock().unwrap().iter().map(names).collect();
        // The first list is observed only with its watch, so the refused one is never seen.
        assert_eq!(
            seen,
            [r#"listed ["list-2"]"#, "changed true list-2"]
                .map(str::to_owned)
                .to_vec()
        );
    }
}
