//! The condition types and reasons of the `operator.kcp.io/v1alpha1` statuses.
//!
//! They are part of the API: users and tools match on them, and the upgrade order reads them
//! from the statuses of other components. Keeping them here, with the types, lets both the
//! controllers that write them (`controller::status`) and the pure planner that reads them
//! (`upgrade`) depend on the API instead of on each other.

/// Every replica runs the current template and is available.
pub const AVAILABLE: &str = "Available";
/// A rollout (or an upgrade held back by an earlier stage) is under way.
pub const PROGRESSING: &str = "Progressing";
/// The spec is unusable or the rollout gave up.
pub const DEGRADED: &str = "Degraded";
/// Whether the spec and every object it references can be used.
pub const REFERENCES_VALID: &str = "ReferencesValid";
/// A deleted object's finalizer waits (a Shard that still holds logical clusters).
pub const DELETING: &str = "Deleting";
/// A Shard replicates into the cache its RootShard uses (upstream requires it; only Shards carry it).
pub const CACHE_SHARED: &str = "CacheShared";
/// Fields accepted for compatibility that this operator ignores (cert-manager settings).
pub const IGNORED_FIELDS: &str = "IgnoredFields";

/// Reason of the `Progressing` condition while a component waits for an earlier stage.
pub const UPGRADING: &str = "Upgrading";
/// Reason of the `Progressing` condition while an earlier stage's rollout is stuck.
pub const UPGRADE_BLOCKED: &str = "UpgradeBlocked";
/// Reason of `Progressing=False` when the component's own rollout gave up.
pub const ROLLOUT_FAILED: &str = "RolloutFailed";
/// Reason of `Available=False` and `Degraded=True` while a rollout waits and no endpoint of the
/// component's external etcd accepts connections from the operator.
pub const ETCD_UNREACHABLE: &str = "EtcdUnreachable";
