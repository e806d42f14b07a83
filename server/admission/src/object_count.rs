//! How many objects each logical cluster holds, for the total object count limit
//! ([`crate::object_limit`]), counted as upstream kcp counts them: a periodic scan of storage
//! (`--logical-cluster-object-count-scan-interval`), plus one for every create and minus one for
//! every delete admitted between two scans. The scan corrects what the in-memory changes get
//! wrong (writes that failed after admission, deletes held by finalizers, the writes of other
//! replicas and of in-process controllers, which bypass admission).
//!
//! A scan reads every key under the storage prefix once, in pages at one revision, and counts by
//! the logical-cluster segment of the key (`/<prefix>/<group>/<resource>/[customresources/]
//! <cluster>/...`): no object is decoded. Before that it looks for the annotation on the
//! LogicalClusters (a byte search in their stored form); without a default limit and without an
//! annotated cluster, nothing else is read, nothing is counted, and admission skips the limit
//! after one flag check.
//!
//! A scan reads storage at the revision of its first read; changes admitted from the moment it
//! starts are kept past it, earlier ones are replaced by what it counted. So a write admitted
//! before a scan started but stored after its first read is missed, and one admitted after the
//! start but stored before that read is counted twice, until the next scan (a window of the
//! time one write takes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kcp_apimachinery::ApiError;
use kcp_registry::LogicalClusterName;
use kcp_registry::store::RestStore;
use kcp_storage::{RangeRequest, Revision};
use tokio_util::sync::CancellationToken;

use crate::object_limit::{MAX_OBJECTS_ANNOTATION, is_exempt, logical_cluster_type};

/// The most keys one storage read of a scan asks for (etcd limits the size of one response).
const SCAN_CHUNK: usize = 500;

/// The path segment custom resources' keys carry before the cluster.
const CUSTOM_RESOURCES_SEGMENT: &str = "customresources";

/// A create refused: the cluster holds `count` objects of `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    pub count: u64,
    pub limit: u64,
}

/// Per-cluster counts: the last scan's, and the changes admitted since.
#[derive(Debug, Default)]
struct Counts {
    scanned: HashMap<LogicalClusterName, u64>,
    /// Changes admitted before the scan in progress began (dropped when it ends).
    before_scan: HashMap<LogicalClusterName, i64>,
    /// Changes admitted since the scan in progress (or the last one) began.
    since_scan: HashMap<LogicalClusterName, i64>,
}

impl Counts {
    fn count(&self, cluster: &LogicalClusterName) -> u64 {
        let scanned = self.scanned.get(cluster).copied().unwrap_or(0);
        let changed = [&self.before_scan, &self.since_scan]
            .iter()
            .map(|changes| changes.get(cluster).copied().unwrap_or(0))
            .sum::<i64>();
        scanned.saturating_add_signed(changed)
    }

    fn change(&mut self, cluster: &LogicalClusterName, by: i64) {
        match self.since_scan.get_mut(cluster) {
            Some(change) => *change += by,
            None => {
                self.since_scan.insert(cluster.clone(), by);
            }
        }
    }
}

/// What one scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Whether any cluster may be limited (a default limit, or an annotated LogicalCluster).
    pub active: bool,
    /// Objects counted (0 when not active).
    pub objects: u64,
    /// Storage keys read, exempt ones included.
    pub keys: u64,
    pub took: Duration,
}

/// The object counts of every logical cluster on this shard.
#[derive(Debug)]
pub struct ObjectCounts {
    default_limit: u64,
    interval: Duration,
    /// Whether counts are kept (a scan found something to limit).
    active: AtomicBool,
    counts: Mutex<Counts>,
}

impl ObjectCounts {
    /// Counts for a default limit of `default_limit` objects (`0`: none), scanned every
    /// `interval`.
    pub fn new(default_limit: u64, interval: Duration) -> ObjectCounts {
        ObjectCounts {
            default_limit,
            interval,
            active: AtomicBool::new(false),
            counts: Mutex::new(Counts::default()),
        }
    }

    /// `--logical-cluster-total-object-limit` (`0`: no default).
    pub fn default_limit(&self) -> u64 {
        self.default_limit
    }

    /// Whether some cluster may be limited; when not, admission has nothing to check or count.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The objects `cluster` holds, as far as known.
    pub fn count(&self, cluster: &LogicalClusterName) -> u64 {
        self.lock().count(cluster)
    }

    /// Notes an admitted create that no limit applied to.
    pub fn added(&self, cluster: &LogicalClusterName) {
        self.lock().change(cluster, 1);
    }

    /// Notes an admitted delete.
    pub fn removed(&self, cluster: &LogicalClusterName) {
        self.lock().change(cluster, -1);
    }

    /// Whether one more object fits under `limit`, without counting it (dry runs).
    pub fn check(&self, cluster: &LogicalClusterName, limit: u64) -> Result<(), Full> {
        let count = self.lock().count(cluster);
        if count >= limit {
            Err(Full { count, limit })
        } else {
            Ok(())
        }
    }

    /// Counts one more object if it fits under `limit` (checked and counted at once, so parallel
    /// creates do not overshoot).
    pub fn reserve(&self, cluster: &LogicalClusterName, limit: u64) -> Result<(), Full> {
        let mut counts = self.lock();
        let count = counts.count(cluster);
        if count >= limit {
            return Err(Full { count, limit });
        }
        counts.change(cluster, 1);
        Ok(())
    }

    /// Scans now, then every interval, until `shutdown`; a failed scan keeps the counts it would
    /// have replaced and is retried at the next interval.
    pub async fn run(self: Arc<Self>, store: RestStore, shutdown: CancellationToken) {
        loop {
            match self.scan(&store).await {
                Ok(scan) if scan.active => tracing::debug!(
                    objects = scan.objects,
                    keys = scan.keys,
                    took_ms = scan.took.as_millis() as u64,
                    "logical cluster object counts scanned"
                ),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "scanning logical cluster object counts failed")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.interval) => {}
            }
        }
    }

    /// Counts the objects of every cluster in storage, when any cluster may be limited.
    pub async fn scan(&self, store: &RestStore) -> Result<Scan, ApiError> {
        let started = Instant::now();
        let active = self.default_limit > 0 || any_annotated(store).await?;
        if !active {
            self.active.store(false, Ordering::Release);
            *self.lock() = Counts::default();
            return Ok(Scan {
                active,
                objects: 0,
                keys: 0,
                took: started.elapsed(),
            });
        }
        {
            let mut counts = self.lock();
            let since = std::mem::take(&mut counts.since_scan);
            for (cluster, change) in since {
                *counts.before_scan.entry(cluster).or_default() += change;
            }
        }
        self.active.store(true, Ordering::Release);
        let (scanned, keys) = count_keys(store).await?;
        let objects = scanned.values().sum();
        let mut counts = self.lock();
        counts.scanned = scanned;
        counts.before_scan.clear();
        Ok(Scan {
            active,
            objects,
            keys,
            took: started.elapsed(),
        })
    }
}

/// `/<prefix>/`: what every key starts with.
fn key_root(store: &RestStore) -> String {
    format!("{}/", store.objects().prefix().trim_end_matches('/'))
}

/// Every key under `prefix` at one revision, page by page; `visit` sees each key and value.
async fn range_all(
    store: &RestStore,
    prefix: &str,
    mut visit: impl FnMut(&str, &[u8]),
) -> Result<(), ApiError> {
    let storage = store.objects().storage();
    let mut revision: Revision = 0;
    let mut start_after = None;
    loop {
        let page = storage
            .range(RangeRequest {
                prefix: prefix.to_string(),
                start_after: start_after.take(),
                revision,
                limit: SCAN_CHUNK,
            })
            .await
            .map_err(|error| ApiError::service_unavailable(&error.to_string()))?;
        revision = page.revision;
        for kv in &page.kvs {
            visit(&kv.key, &kv.value);
        }
        match page.kvs.last() {
            Some(last) if page.more => start_after = Some(last.key.clone()),
            _ => return Ok(()),
        }
    }
}

/// Whether some LogicalCluster carries the limit annotation, found in their stored bytes.
async fn any_annotated(store: &RestStore) -> Result<bool, ApiError> {
    let Some(rt) = logical_cluster_type(store) else {
        return Ok(false);
    };
    let needle = format!("\"{MAX_OBJECTS_ANNOTATION}\"");
    let needle = needle.as_bytes();
    let mut found = false;
    range_all(store, store.keys(&rt).all_clusters(), |_, value| {
        found = found || value.windows(needle.len()).any(|window| window == needle);
    })
    .await?;
    Ok(found)
}

/// The logical cluster of a key, and whether the key is exempt from the limit; `None` for keys
/// outside the layout.
fn cluster_of_key<'k>(root: &str, key: &'k str) -> Option<(&'k str, bool)> {
    let mut segments = key.strip_prefix(root)?.split('/');
    let group = segments.next()?;
    let resource = segments.next()?;
    let rest: Vec<&str> = segments.collect();
    let rest = match rest.first() {
        Some(&CUSTOM_RESOURCES_SEGMENT) if rest.len() > 2 => &rest[1..],
        _ => &rest[..],
    };
    let (cluster, name) = match rest {
        [cluster, name] | [cluster, _, name] => (*cluster, *name),
        _ => return None,
    };
    Some((cluster, is_exempt(group, resource, name)))
}

/// Objects per logical cluster (exempt ones left out), and how many keys were read.
async fn count_keys(
    store: &RestStore,
) -> Result<(HashMap<LogicalClusterName, u64>, u64), ApiError> {
    let root = key_root(store);
    let mut by_cluster: HashMap<String, u64> = HashMap::new();
    let mut keys = 0;
    range_all(store, &root, |key, _| {
        keys += 1;
        let Some((cluster, false)) = cluster_of_key(&root, key) else {
            return;
        };
        match by_cluster.get_mut(cluster) {
            Some(count) => *count += 1,
            None => {
                by_cluster.insert(cluster.to_string(), 1);
            }
        }
    })
    .await?;
    let counts = by_cluster
        .into_iter()
        .filter_map(|(cluster, count)| Some((LogicalClusterName::parse(&cluster)?, count)))
        .collect();
    Ok((counts, keys))
}

#[cfg(test)]
pub(crate) mod tests;
