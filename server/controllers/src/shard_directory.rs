//! Which shards exist: the `Shard` objects of `root`, as the workspace scheduler places logical
//! clusters over them (upstream's scheduler reads them from a Shard informer on the root shard
//! or, on other shards, from the cache server).
//!
//! Where they come from is a [`ShardDirectory`]: the root shard reads its own store
//! ([`crate::shard_registration::LocalShards`]), other shards the copies the root shard
//! replicated into the cache server ([`CopiedShards`], fed by the kcp binary's read-back of the
//! cache, which keeps the last known list while the cache is unreachable). [`Shards`] keeps the
//! last list, read again every [`REFRESH`], so that placing a workspace never waits for a
//! request; a failed read keeps the previous list (a shard's liveness is judged from its
//! heartbeat, which then only ages).
//!
//! A shard's `status.capacity` trails its logical clusters by up to a second, and the list by up
//! to [`REFRESH`] more, so the placements this shard makes count against their shard for
//! [`PLACED_COUNTS_FOR`] on top of what its `Shard` says: a burst of workspaces cannot overfill a
//! shard whose capacity has not caught up (at worst a shard looks full a little early, and the
//! workspace is looked at again).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kcp_apimachinery::ApiError;
use kcp_tenancy::placement::Candidate;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::shard_registration::STALE_AFTER;

/// How often the list of shards is read again.
pub const REFRESH: Duration = Duration::from_secs(1);
/// How long a placement counts against its shard on top of the shard's reported capacity.
pub const PLACED_COUNTS_FOR: Duration = Duration::from_secs(5);

/// Where the `Shard` objects of `root` are read from.
pub trait ShardDirectory: Send + Sync + 'static {
    /// Every `Shard`.
    fn list(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>>;
}

/// The `Shard`s of `root` as the cache holds them (replicated there by the root shard): a fresh
/// list replaces them, changes follow. Until the first list arrives, reading fails; afterwards
/// the last known list stays while the cache is unreachable.
#[derive(Default)]
pub struct CopiedShards {
    objects: RwLock<Option<BTreeMap<String, Value>>>,
}

impl CopiedShards {
    /// Replaces every copy with `items` (a fresh list of the cache).
    pub fn replace(&self, items: Vec<Value>) {
        let objects = items
            .into_iter()
            .filter_map(|object| Some((kcp_apimachinery::meta::name(&object)?.to_owned(), object)))
            .collect();
        *self.objects.write().unwrap_or_else(|p| p.into_inner()) = Some(objects);
    }

    /// Records a changed copy, or its deletion.
    pub fn apply(&self, deleted: bool, object: Value) {
        let Some(name) = kcp_apimachinery::meta::name(&object).map(str::to_owned) else {
            return;
        };
        let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
        let objects = objects.get_or_insert_with(BTreeMap::new);
        if deleted {
            objects.remove(&name);
        } else {
            objects.insert(name, object);
        }
    }
}

impl ShardDirectory for CopiedShards {
    fn list(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        let objects = self.objects.read().unwrap_or_else(|p| p.into_inner());
        let listed = match objects.as_ref() {
            Some(objects) => Ok(objects.values().cloned().collect()),
            None => Err(ApiError::service_unavailable(
                "the Shards have not been read from the cache server yet",
            )),
        };
        Box::pin(std::future::ready(listed))
    }
}

/// The last list of shards read from a [`ShardDirectory`].
#[derive(Default)]
pub struct Shards {
    objects: RwLock<Arc<Vec<Value>>>,
    /// When this shard last placed logical clusters, by shard.
    placed: Mutex<HashMap<String, Vec<Instant>>>,
}

impl Shards {
    /// The shards as placement sees them now.
    pub fn candidates(&self) -> Vec<Candidate> {
        let now = jiff::Timestamp::now();
        let stale = i64::try_from(STALE_AFTER.as_secs()).unwrap_or(i64::MAX);
        let placed = self.recent_placements();
        self.objects
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|shard| Candidate::of(shard, now, stale))
            .map(|c| {
                let count = placed.get(&c.name).copied().unwrap_or(0);
                c.with_placed(count)
            })
            .collect()
    }

    /// Counts a logical cluster placed on `shard` now.
    pub fn placed(&self, shard: &str) {
        self.placed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(shard.to_string())
            .or_default()
            .push(Instant::now());
    }

    /// Placements younger than [`PLACED_COUNTS_FOR`], by shard (older ones are forgotten).
    fn recent_placements(&self) -> HashMap<String, u64> {
        let mut placed = self.placed.lock().unwrap_or_else(|p| p.into_inner());
        placed.retain(|_, times| {
            times.retain(|at| at.elapsed() < PLACED_COUNTS_FOR);
            !times.is_empty()
        });
        placed
            .iter()
            .map(|(shard, times)| (shard.clone(), times.len() as u64))
            .collect()
    }

    /// The shard named `name`, if it is known.
    pub fn candidate(&self, name: &str) -> Option<Candidate> {
        self.candidates().into_iter().find(|c| c.name == name)
    }

    /// Reads the list now; the previous one stays on failure.
    pub async fn refresh(&self, directory: &dyn ShardDirectory) -> Result<(), ApiError> {
        let objects = directory.list().await?;
        *self.objects.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(objects);
        Ok(())
    }

    /// Reads the list every [`REFRESH`] until `stop`.
    pub async fn run(self: Arc<Self>, directory: Arc<dyn ShardDirectory>, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(REFRESH);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if let Err(error) = self.refresh(directory.as_ref()).await {
                tracing::warn!(%error, "reading the list of shards failed, keeping the last one");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixed(Result<Vec<Value>, ApiError>);

    impl ShardDirectory for Fixed {
        fn list(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
            Box::pin(async move { self.0.clone() })
        }
    }

    #[tokio::test]
    async fn a_failed_read_keeps_the_last_list() {
        let shards = Shards::default();
        let one = json!({"metadata": {"name": "a"}, "spec": {"baseURL": "https://a"}});
        shards.refresh(&Fixed(Ok(vec![one]))).await.unwrap();
        assert_eq!(shards.candidate("a").unwrap().base_url, "https://a");
        let failing = Fixed(Err(ApiError::service_unavailable("root is down")));
        assert!(shards.refresh(&failing).await.is_err());
        assert_eq!(shards.candidates().len(), 1);
        assert!(shards.candidate("b").is_none());
    }

    #[tokio::test]
    async fn copied_shards_follow_the_cache_and_fail_until_first_listed() {
        let copies = CopiedShards::default();
        assert_eq!(copies.list().await.unwrap_err().code, 503);
        let shard = |name: &str| json!({"metadata": {"name": name}});
        copies.replace(vec![shard("root"), shard("shard-1")]);
        copies.apply(false, shard("shard-2"));
        copies.apply(true, shard("root"));
        let names: Vec<_> = copies
            .list()
            .await
            .unwrap()
            .iter()
            .map(|s| s["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("shard-1"), json!("shard-2")]);
    }

    #[tokio::test]
    async fn recent_placements_count_against_their_shard() {
        let shards = Shards::default();
        let full_soon = json!({"metadata": {"name": "a"},
            "status": {"capacity": {"logicalClusters": 1, "maxLogicalClusters": 2},
                "conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": kcp_apimachinery::time::format_rfc3339(jiff::Timestamp::now())}]}});
        shards.refresh(&Fixed(Ok(vec![full_soon]))).await.unwrap();
        let pick = |shards: &Shards| {
            kcp_tenancy::placement::choose(&shards.candidates(), None, |_| 0)
                .map(|c| c.name.clone())
        };
        assert_eq!(pick(&shards).unwrap(), "a");
        shards.placed("a");
        assert!(pick(&shards).unwrap_err().all_full());
    }
}
