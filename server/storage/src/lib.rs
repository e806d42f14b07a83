//! The storage contract every other part of the server stands on.
//!
//! Kubernetes' API machinery was designed around etcd v3, and its user-visible semantics leak straight
//! through: `resourceVersion` *is* the store revision, optimistic concurrency *is* a compare-and-swap on
//! the key's last modification revision, a paginated list *is* a range read pinned to one revision, and
//! a watch *is* an ordered stream of changes under a key prefix that can resume from any revision not yet
//! compacted. So instead of inventing an abstraction and translating, this crate states exactly that
//! contract ([`Storage`]) and provides two backends that honour it:
//!
//! * [`embedded`]: a single redb file, the default, so one binary is a whole control plane;
//! * [`etcd`]: a real etcd cluster, for production and for sharing one etcd between shards.
//!
//! Keys are opaque strings here; the API server decides their layout
//! (`/<prefix>/<group>/<resource>/<logical-cluster>/[<namespace>/]<name>`). One conformance suite
//! (`tests/conformance.rs`) runs unchanged against both backends.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;

pub mod compactor;
pub mod embedded;
pub mod etcd;

/// A store revision. Revisions start at 1 and grow by one per successful write; `0` means "latest" in
/// requests.
pub type Revision = i64;

/// One key as stored at some revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// The revision at which the key was (last) created.
    pub create_revision: Revision,
    /// The revision of the last write to this key; this is the object's `resourceVersion`.
    pub mod_revision: Revision,
}

/// A read of every key under a prefix, optionally at an older revision and in pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeRequest {
    /// Every key that starts with this string is in range.
    pub prefix: String,
    /// Continue after this key (exclusive): the last key of the previous page.
    pub start_after: Option<String>,
    /// Read the store as it was at this revision; `0` reads the latest revision.
    pub revision: Revision,
    /// At most this many keys; `0` means no limit.
    pub limit: usize,
}

/// The answer to a [`RangeRequest`]: keys in ascending byte order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeResponse {
    pub kvs: Vec<KeyValue>,
    /// More keys are in range after the last one returned.
    pub more: bool,
    /// The revision the read was served at (the store's current revision when `0` was asked for). Pages
    /// of one list pass it on so the whole list is one consistent snapshot.
    pub revision: Revision,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    pub kind: EventKind,
    /// For `Put` the new key value; for `Delete` the key with an empty value, `mod_revision` set to the
    /// revision of the delete and `create_revision` 0.
    pub kv: KeyValue,
    /// The key as it was just before this change; `None` when the key did not exist.
    pub prev: Option<KeyValue>,
}

/// The ordered change stream of a prefix. It ends with an error item if the backend loses the watch
/// (for example when the revision it would resume from has been compacted meanwhile).
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, StorageError>> + Send>>;

/// Everything that can go wrong talking to a store. Callers map these to Kubernetes `Status` codes.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// `create` found the key present.
    #[error("key {key} already exists")]
    AlreadyExists { key: String },
    /// `update`/`delete` found the key absent.
    #[error("key {key} not found")]
    NotFound { key: String },
    /// The guard revision did not match; `current` is the key as it is now, for the caller's retry.
    #[error("key {key} was modified concurrently (expected revision {expected})")]
    Conflict {
        key: String,
        expected: Revision,
        current: Option<KeyValue>,
    },
    /// The requested revision has been compacted away (Kubernetes: 410 Gone, "too old resource version").
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// The requested revision is newer than the store's current revision.
    #[error("required revision {requested} is a future revision (current revision {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    /// The store cannot be reached or failed internally.
    #[error("storage backend unavailable: {0}")]
    Unavailable(String),
    /// Bad configuration (paths, TLS material, endpoints).
    #[error("invalid storage configuration: {0}")]
    Config(String),
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// The revisioned key-value store with etcd v3 semantics. Every method is atomic; every successful
/// write gets its own revision, strictly greater than any revision returned before it.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// The newest revision of the store (the revision of the last write, or of an empty store).
    async fn current_revision(&self) -> Result<Revision>;

    /// The latest value of exactly this key.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Keys under a prefix, at a revision, paged. Fails with [`StorageError::Compacted`] below the
    /// compacted revision and [`StorageError::FutureRevision`] above the current one.
    async fn range(&self, request: RangeRequest) -> Result<RangeResponse>;

    /// Writes `value` only if `key` does not exist. Returns the new key value.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue>;

    /// Overwrites `key` only if its current `mod_revision` equals `expected`. Returns the new key value.
    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue>;

    /// Deletes `key`, guarded by its `mod_revision` when `expected` is given. Returns the deleted key
    /// value and the revision of the delete.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(KeyValue, Revision)>;

    /// Every change under `prefix` with a revision `>= from`, in revision order, with previous values,
    /// then live changes as they happen. `from == 0` starts with the next change. Fails with
    /// [`StorageError::Compacted`] when `from` is below the compacted revision (history no longer complete).
    /// A `from` beyond the current revision is allowed: the stream waits for it. On etcd the event at
    /// exactly the compacted revision may lack `prev`, because the value before it is compacted.
    async fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream>;

    /// Forgets history older than `revision`: reads and watches at revisions below it fail afterwards.
    /// Compacting at or below the compacted revision is a no-op; beyond the current revision it fails
    /// with [`StorageError::FutureRevision`].
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The revision history is complete from: reads at revisions `< compacted_revision()` fail. `0`
    /// while nothing has been compacted.
    async fn compacted_revision(&self) -> Result<Revision>;

    /// Flushes and releases the store; later calls fail with [`StorageError::Unavailable`].
    async fn close(&self) -> Result<()>;
}

/// How to reach a store, straight from the server's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageConfig {
    /// A redb file at this path (created when missing).
    Embedded { path: std::path::PathBuf },
    /// An etcd cluster (`--etcd-servers`, `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`).
    Etcd(etcd::EtcdConfig),
}

/// Opens the store a configuration names.
pub async fn open(config: &StorageConfig) -> Result<Arc<dyn Storage>> {
    match config {
        StorageConfig::Embedded { path } => {
            Ok(Arc::new(embedded::EmbeddedStore::open(path).await?))
        }
        StorageConfig::Etcd(etcd) => Ok(Arc::new(etcd::EtcdStore::connect(etcd).await?)),
    }
}

/// A new, empty store in memory ([`embedded::EmbeddedStore::in_memory`]), for tests that need the
/// real storage contract without a file or an etcd.
pub async fn open_in_memory() -> Result<Arc<dyn Storage>> {
    Ok(Arc::new(embedded::EmbeddedStore::in_memory().await?))
}
