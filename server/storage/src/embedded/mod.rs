//! The embedded backend: the whole store in one redb file, so a single binary is a control plane.
//!
//! The pieces, each in its own module: `schema` lays out the file (versions, change log, garbage
//! index, counters), `reads` serves ranges and change-log windows from one snapshot, `writer` is the
//! one thread that batches writes into durable commits, and `watch` turns the change log plus the
//! writer's fan-out (`fanout`, routed by key prefix) into watch streams. This module ties them together behind [`Storage`].
//!
//! redb is synchronous. Writes run on the writer thread. Reads of a bounded number of keys (a
//! `get`, a chunk of a list) run in the caller's task: redb serves them from its page cache in
//! microseconds, less than the two thread wake-ups a trip to the blocking pool costs. Unbounded
//! reads (and opening, closing) run on tokio's blocking pool.
//!
//! [`EmbeddedStore::in_memory`] runs the same code on redb's in-memory backend instead of a file,
//! so tests get the real store (revisions, compaction, watches) without a directory to clean up.

mod fanout;
mod reads;
mod schema;
mod watch;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use redb::backends::InMemoryBackend;
use redb::{Builder, Database, ReadTransaction, ReadableDatabase};
use tokio::sync::{mpsc, oneshot};
use tracing::info;

use self::fanout::Fanout;
use self::schema::{VERSIONS, live_at};
use self::writer::{Op, Published};
use crate::{
    KeyValue, RangeRequest, RangeResponse, Result, Revision, Storage, StorageError, WatchStream,
};

/// A [`Storage`] kept in a single redb file. Cheap to share behind an `Arc`; [`Storage::close`]
/// releases the file so it can be opened again.
#[derive(Debug)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

/// What the store and its watch streams share.
#[derive(Debug)]
struct Inner {
    /// Where the data lives, for logs: the file's path, or `memory`.
    location: String,
    /// `None` once closed.
    open: RwLock<Option<Open>>,
    published: Arc<Published>,
}

/// The resources of an open store.
#[derive(Debug)]
struct Open {
    db: Arc<Database>,
    ops: mpsc::Sender<Op>,
    events: Arc<Fanout>,
    writer: std::thread::JoinHandle<()>,
}

impl From<redb::Error> for StorageError {
    fn from(error: redb::Error) -> Self {
        StorageError::Unavailable(format!("embedded store: {error}"))
    }
}

fn closed() -> StorageError {
    StorageError::Unavailable("the embedded store is closed".to_owned())
}

fn task_failed(error: tokio::task::JoinError) -> StorageError {
    StorageError::Unavailable(format!("embedded store task failed: {error}"))
}

/// The store's own page cache. redb defaults to 1 GiB, which a shard fills with every page it ever
/// touched and keeps after the data is deleted (10,000 workspaces created and deleted left 330 MiB
/// behind); the operating system's page cache serves re-reads of the file anyway, so a small cache
/// bounds the server's memory at no measurable cost to request latency. Neither 32 MiB nor 16 MiB
/// holds the working set of a shard with thousands of workspaces: deleting 10,000 reads about as
/// many pages from the file with either (10% more with 16 MiB, a few microseconds each from the
/// operating system's cache), writes the same and spends the same CPU, so the smaller cache adds
/// neither work nor waits to a deletion and saves every shard up to 16 MiB (docs/performance.md,
/// "Sharded: the page cache and the deletion's waits").
const PAGE_CACHE_BYTES: usize = 16 * 1024 * 1024;
/// Ranges asking for at most this many keys are read in the caller's task (the registry reads
/// lists in chunks of this size); unbounded ones go to the blocking pool.
const INLINE_RANGE: usize = 500;

impl EmbeddedStore {
    /// Opens the store in the file at `path`, creating the file and its parent directories when
    /// missing. Everything committed before is there again: keys, revisions, compaction point.
    pub async fn open(path: &Path) -> Result<EmbeddedStore> {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || Self::open_blocking(path))
            .await
            .map_err(task_failed)?
    }

    /// A new, empty store kept in memory (redb's [`InMemoryBackend`]): the same tables, writer and
    /// watches as a file store, nothing on disk. Its data is gone once the store is closed or
    /// dropped, so this is for tests and throwaway servers.
    pub async fn in_memory() -> Result<EmbeddedStore> {
        tokio::task::spawn_blocking(|| {
            let db = builder()
                .create_with_backend(InMemoryBackend::new())
                .map_err(|e| {
                    StorageError::Unavailable(format!(
                        "cannot create in-memory embedded store: {e}"
                    ))
                })?;
            Self::start(db, "memory".to_owned())
        })
        .await
        .map_err(task_failed)?
    }

    fn open_blocking(path: PathBuf) -> Result<EmbeddedStore> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StorageError::Config(format!("cannot create directory {}: {e}", parent.display()))
            })?;
        }
        let db = builder().create(&path).map_err(|e| {
            StorageError::Unavailable(format!(
                "cannot open embedded store {}: {e}",
                path.display()
            ))
        })?;
        Self::start(db, path.display().to_string())
    }

    /// Starts the writer on an open database.
    fn start(db: Database, location: String) -> Result<EmbeddedStore> {
        let db = Arc::new(db);
        let handle = writer::spawn(db.clone())?;
        info!(
            location = %location,
            revision = handle.published.revision.load(Ordering::SeqCst),
            "opened embedded store"
        );
        let open = Open {
            db,
            ops: handle.ops,
            events: handle.events,
            writer: handle.thread,
        };
        let inner = Inner {
            location,
            open: RwLock::new(Some(open)),
            published: handle.published,
        };
        Ok(EmbeddedStore {
            inner: Arc::new(inner),
        })
    }
}

/// How every store's database is configured, whatever holds its bytes.
fn builder() -> Builder {
    let mut builder = Database::builder();
    builder.set_cache_size(PAGE_CACHE_BYTES);
    builder
}

impl Inner {
    /// Runs `f` on the open store's resources, or fails when the store is closed.
    fn with_open<T>(&self, f: impl FnOnce(&Open) -> T) -> Result<T> {
        let guard = self.open.read().map_err(|_| closed())?;
        guard.as_ref().map(f).ok_or_else(closed)
    }

    /// Runs a read on a fresh snapshot, on the blocking pool.
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&ReadTransaction) -> Result<Result<T>, redb::Error> + Send + 'static,
    {
        let db = self.with_open(|open| open.db.clone())?;
        let read = move || -> Result<Result<T>, redb::Error> { f(&db.begin_read()?) };
        tokio::task::spawn_blocking(read)
            .await
            .map_err(task_failed)??
    }

    /// Runs a read of a bounded number of keys on a fresh snapshot in the caller's task. A point
    /// lookup in redb's page cache takes microseconds, a chunk of [`INLINE_RANGE`] keys well under
    /// a millisecond; handing either to the blocking pool and back costs two thread wake-ups, more
    /// than most reads, and a workspace's life (and more so its deletion: every namespaced type
    /// listed in each namespace) is made of many such reads.
    fn read_now<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<Result<T>, redb::Error>,
    ) -> Result<T> {
        let db = self.with_open(|open| open.db.clone())?;
        let read = move || -> Result<Result<T>, redb::Error> { f(&db.begin_read()?) };
        read()?
    }

    /// Queues a mutation for the writer and waits until it is committed (or failed).
    async fn submit<T>(&self, op: impl FnOnce(oneshot::Sender<Result<T>>) -> Op) -> Result<T> {
        let ops = self.with_open(|open| open.ops.clone())?;
        let (reply, answer) = oneshot::channel();
        ops.send(op(reply)).await.map_err(|_| closed())?;
        answer.await.map_err(|_| {
            StorageError::Unavailable("the embedded store writer dropped the operation".to_owned())
        })?
    }

    /// The latest committed revision counters, once the store is known to be open.
    fn published(&self, counter: impl FnOnce(&Published) -> Revision) -> Result<Revision> {
        self.with_open(|_| counter(&self.published))
    }
}

#[async_trait]
impl Storage for EmbeddedStore {
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.published(|p| p.revision.load(Ordering::SeqCst))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner
            .read_now(|txn| Ok(Ok(live_at(&txn.open_table(VERSIONS)?, key, Revision::MAX)?)))
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResponse> {
        if (1..=INLINE_RANGE).contains(&request.limit) {
            return self.inner.read_now(|txn| reads::range(txn, &request));
        }
        self.inner
            .read(move |txn| reads::range(txn, &request))
            .await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let key = key.to_owned();
        self.inner
            .submit(|reply| Op::Create { key, value, reply })
            .await
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let key = key.to_owned();
        self.inner
            .submit(|reply| Op::Update {
                key,
                value,
                expected,
                reply,
            })
            .await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(KeyValue, Revision)> {
        let key = key.to_owned();
        self.inner
            .submit(|reply| Op::Delete {
                key,
                expected,
                reply,
            })
            .await
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream> {
        // Subscribe before reading the counters: every commit after them reaches the subscription.
        let live = self.inner.with_open(|open| open.events.subscribe(prefix))?;
        let current = self.inner.published.revision.load(Ordering::SeqCst);
        let compacted = self.inner.published.compacted.load(Ordering::SeqCst);
        if from == 0 {
            return Ok(watch::stream(
                self.inner.clone(),
                prefix,
                current + 1,
                live,
                false,
            ));
        }
        if from < compacted {
            return Err(StorageError::Compacted {
                requested: from,
                compacted,
            });
        }
        Ok(watch::stream(self.inner.clone(), prefix, from, live, true))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner
            .submit(|reply| Op::Compact { revision, reply })
            .await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.published(|p| p.compacted.load(Ordering::SeqCst))
    }

    async fn close(&self) -> Result<()> {
        let open = self.inner.open.write().map_err(|_| closed())?.take();
        let Some(Open {
            db,
            ops,
            events,
            writer,
        }) = open
        else {
            return Ok(());
        };
        // The writer stops once the last queue sender is gone and releases the file when it does.
        drop((db, ops, events));
        tokio::task::spawn_blocking(move || writer.join())
            .await
            .map_err(task_failed)?
            .map_err(|_| {
                StorageError::Unavailable("the embedded store writer panicked".to_owned())
            })?;
        info!(location = %self.inner.location, "closed embedded store");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::EventKind;

    #[tokio::test]
    async fn in_memory_store_keeps_revisions_and_watches_without_a_file() {
        let store = EmbeddedStore::in_memory().await.unwrap();
        let start = store.current_revision().await.unwrap();
        let mut changes = store.watch("/a/", 0).await.unwrap();

        let created = store
            .create("/a/x", Bytes::from_static(b"1"))
            .await
            .unwrap();
        assert_eq!(created.mod_revision, start + 1);
        let updated = store
            .update("/a/x", Bytes::from_static(b"2"), created.mod_revision)
            .await
            .unwrap();
        assert_eq!(store.get("/a/x").await.unwrap(), Some(updated.clone()));
        assert!(matches!(
            store
                .update("/a/x", Bytes::from_static(b"3"), created.mod_revision)
                .await,
            Err(StorageError::Conflict { .. })
        ));

        let first = changes.next().await.unwrap().unwrap();
        assert_eq!((first.kind, first.kv), (EventKind::Put, created.clone()));
        let second = changes.next().await.unwrap().unwrap();
        assert_eq!(second.prev.as_ref(), Some(&created));

        store.compact(updated.mod_revision).await.unwrap();
        assert!(matches!(
            store.watch("/a/", created.mod_revision).await,
            Err(StorageError::Compacted { .. })
        ));

        // Two in-memory stores share nothing.
        let other = EmbeddedStore::in_memory().await.unwrap();
        assert_eq!(other.get("/a/x").await.unwrap(), None);

        store.close().await.unwrap();
        assert!(matches!(
            store.get("/a/x").await,
            Err(StorageError::Unavailable(_))
        ));
    }
}
