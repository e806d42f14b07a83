//! The single writer: every mutation of the file goes through one thread that batches.
//!
//! redb allows one write transaction at a time and each durable commit costs an fsync, so writing
//! per request would cap the store at the disk's fsync rate. Instead callers queue operations; the
//! writer takes everything queued (up to [`MAX_BATCH`]), applies the operations in order inside one
//! transaction (each successful one gets its own revision, each failing one its own error and no
//! revision), commits once, and only then publishes the events and answers the callers. A write is
//! therefore acknowledged only when it is on disk, and N concurrent writers cost one fsync, not N.
//!
//! Under concurrent load the writer also waits a little between commits ([`COMMIT_GAP`]): each
//! commit costs an fsync, redb's page bookkeeping and a wake-up of every watcher of its keys,
//! whatever it carries, so a busy store commits fewer, larger batches (etcd batches its backend commits the
//! same way). It waits only while writes are concurrent (the last commit carried more than one):
//! a lone write, or one client writing one object after another, is committed at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::{Database, ReadableTable, Table, WriteTransaction};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, error};

use super::fanout::Fanout;
use super::schema::{
    EVENTS, INITIAL_REVISION, META, META_COMPACTED, META_REVISION, OBSOLETE, VERSIONS, VersionKey,
    VersionValue, live_at, meta, tombstone,
};
use crate::{EventKind, KeyValue, Result, Revision, StorageError, WatchEvent};

/// The most operations one commit carries; bounds the latency a huge queue adds to its first caller.
const MAX_BATCH: usize = 1024;
/// How many operations may wait for the writer before callers wait to enqueue.
const QUEUE: usize = 4 * MAX_BATCH;
/// How many commits a watcher may lag behind before it falls back to reading the file.
pub(super) const FANOUT: usize = 1024;
/// The shortest time from one commit to the next while writes are concurrent.
const COMMIT_GAP: Duration = Duration::from_millis(1);

/// The events of one commit, in revision order (never empty).
pub(super) type Batch = Arc<[WatchEvent]>;

/// Where an operation's outcome goes.
type Reply<T> = oneshot::Sender<Result<T>>;

/// One queued mutation with the channel its caller waits on.
pub(super) enum Op {
    Create {
        key: String,
        value: Bytes,
        reply: Reply<KeyValue>,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
        reply: Reply<KeyValue>,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
        reply: Reply<(KeyValue, Revision)>,
    },
    Compact {
        revision: Revision,
        reply: Reply<()>,
    },
}

/// The revisions of the last commit, readable without touching the file.
#[derive(Debug)]
pub(super) struct Published {
    pub(super) revision: AtomicI64,
    pub(super) compacted: AtomicI64,
}

/// What a running writer hands to the store.
pub(super) struct Handle {
    pub(super) ops: mpsc::Sender<Op>,
    pub(super) events: Arc<Fanout>,
    pub(super) published: Arc<Published>,
    pub(super) thread: std::thread::JoinHandle<()>,
}

/// An applied operation waiting for the commit before its caller hears about it.
enum Answer {
    Written(Reply<KeyValue>, Result<KeyValue>),
    Deleted(Reply<(KeyValue, Revision)>, Result<(KeyValue, Revision)>),
    Compacted(Reply<()>, Result<()>),
}

impl Answer {
    /// Answers the caller; `failure` replaces the outcome when the batch did not commit.
    fn send(self, failure: Option<&str>) {
        match self {
            Answer::Written(reply, outcome) => answer(reply, outcome, failure),
            Answer::Deleted(reply, outcome) => answer(reply, outcome, failure),
            Answer::Compacted(reply, outcome) => answer(reply, outcome, failure),
        }
    }
}

fn answer<T>(reply: Reply<T>, outcome: Result<T>, failure: Option<&str>) {
    let outcome = match failure {
        Some(reason) => Err(StorageError::Unavailable(reason.to_owned())),
        None => outcome,
    };
    // A caller that stopped waiting dropped its receiver; nobody is left to tell.
    let _ = reply.send(outcome);
}

/// The tables one batch writes to.
struct Tables<'txn> {
    versions: Table<'txn, VersionKey, VersionValue>,
    events: Table<'txn, i64, &'static str>,
    obsolete: Table<'txn, (i64, &'static str, i64), ()>,
}

/// The writer thread's state.
struct Writer {
    db: Arc<Database>,
    ops: mpsc::Receiver<Op>,
    events: Arc<Fanout>,
    published: Arc<Published>,
    revision: Revision,
    compacted: Revision,
}

/// Prepares the file (tables and counters of a new store) and starts the writer thread.
pub(super) fn spawn(db: Arc<Database>) -> Result<Handle, redb::Error> {
    let txn = db.begin_write()?;
    let (revision, compacted) = {
        let table = txn.open_table(META)?;
        (
            meta(&table, META_REVISION, INITIAL_REVISION)?,
            meta(&table, META_COMPACTED, 0)?,
        )
    };
    txn.open_table(VERSIONS)?;
    txn.open_table(EVENTS)?;
    txn.open_table(OBSOLETE)?;
    txn.commit()?;

    let (ops_tx, ops_rx) = mpsc::channel(QUEUE);
    let events = Arc::new(Fanout::default());
    let published = Arc::new(Published {
        revision: AtomicI64::new(revision),
        compacted: AtomicI64::new(compacted),
    });
    let writer = Writer {
        db,
        ops: ops_rx,
        events: events.clone(),
        published: published.clone(),
        revision,
        compacted,
    };
    let thread = std::thread::Builder::new()
        .name("kcp-storage-writer".to_owned())
        .spawn(move || writer.run())?;
    Ok(Handle {
        ops: ops_tx,
        events,
        published,
        thread,
    })
}

impl Writer {
    /// Commits batches until every sender of operations is gone (the store was closed or dropped).
    fn run(mut self) {
        // When the last commit ended, if it carried more than one operation.
        let mut concurrent_until: Option<Instant> = None;
        while let Some(first) = self.ops.blocking_recv() {
            if let Some(gap_end) = concurrent_until.take() {
                let now = Instant::now();
                if gap_end > now {
                    std::thread::sleep(gap_end - now);
                }
            }
            let mut ops = vec![first];
            while ops.len() < MAX_BATCH {
                match self.ops.try_recv() {
                    Ok(op) => ops.push(op),
                    Err(_) => break,
                }
            }
            let carried = ops.len();
            self.commit(ops);
            if carried > 1 {
                concurrent_until = Some(Instant::now() + COMMIT_GAP);
            }
        }
        debug!("storage writer stopped");
    }

    /// Applies one batch in one transaction, commits it, publishes its events, answers its callers.
    fn commit(&mut self, ops: Vec<Op>) {
        let (revision, compacted) = (self.revision, self.compacted);
        let count = ops.len();
        let mut answers = Vec::with_capacity(count);
        let mut events = Vec::new();
        let committed = self
            .db
            .begin_write()
            .map_err(redb::Error::from)
            .and_then(|txn| {
                let failure = self.apply(&txn, ops, &mut answers, &mut events)?;
                match failure {
                    Some(error) => Err(error),
                    None => txn.commit().map_err(redb::Error::from),
                }
            });
        if let Err(error) = committed {
            error!(%error, operations = count, "storage commit failed");
            self.revision = revision;
            self.compacted = compacted;
            let reason = format!("commit failed: {error}");
            answers.into_iter().for_each(|a| a.send(Some(&reason)));
            return;
        }
        self.published
            .revision
            .store(self.revision, Ordering::SeqCst);
        self.published
            .compacted
            .store(self.compacted, Ordering::SeqCst);
        if !events.is_empty() {
            self.events.publish(&Batch::from(events));
        }
        answers.into_iter().for_each(|a| a.send(None));
    }

    /// Applies every operation of a batch; returns the first storage failure, after which the batch
    /// must not commit (every operation still gets an answer, which the failure then overrides).
    fn apply(
        &mut self,
        txn: &WriteTransaction,
        ops: Vec<Op>,
        answers: &mut Vec<Answer>,
        events: &mut Vec<WatchEvent>,
    ) -> Result<Option<redb::Error>, redb::Error> {
        let mut tables = Tables {
            versions: txn.open_table(VERSIONS)?,
            events: txn.open_table(EVENTS)?,
            obsolete: txn.open_table(OBSOLETE)?,
        };
        let mut failure = None;
        for op in ops {
            let answer = match op {
                Op::Create { key, value, reply } => {
                    let outcome = self.create(&mut tables, &key, &value, events);
                    Answer::Written(reply, settle(outcome, &mut failure))
                }
                Op::Update {
                    key,
                    value,
                    expected,
                    reply,
                } => {
                    let outcome = self.update(&mut tables, &key, &value, expected, events);
                    Answer::Written(reply, settle(outcome, &mut failure))
                }
                Op::Delete {
                    key,
                    expected,
                    reply,
                } => {
                    let outcome = self.delete(&mut tables, &key, expected, events);
                    Answer::Deleted(reply, settle(outcome, &mut failure))
                }
                Op::Compact { revision, reply } => {
                    let outcome = self.compact(&mut tables, revision);
                    Answer::Compacted(reply, settle(outcome, &mut failure))
                }
            };
            answers.push(answer);
        }
        drop(tables);
        let mut table = txn.open_table(META)?;
        table.insert(META_REVISION, self.revision)?;
        table.insert(META_COMPACTED, self.compacted)?;
        Ok(failure)
    }

    fn next_revision(&mut self) -> Revision {
        self.revision += 1;
        self.revision
    }

    fn create(
        &mut self,
        tables: &mut Tables<'_>,
        key: &str,
        value: &[u8],
        events: &mut Vec<WatchEvent>,
    ) -> Result<Result<KeyValue>, redb::Error> {
        if live_at(&tables.versions, key, Revision::MAX)?.is_some() {
            return Ok(Err(StorageError::AlreadyExists {
                key: key.to_owned(),
            }));
        }
        let revision = self.next_revision();
        tables
            .versions
            .insert((key, revision), (revision, Some(value)))?;
        tables.events.insert(revision, key)?;
        let kv = KeyValue {
            key: key.to_owned(),
            value: Bytes::copy_from_slice(value),
            create_revision: revision,
            mod_revision: revision,
        };
        events.push(WatchEvent {
            kind: EventKind::Put,
            kv: kv.clone(),
            prev: None,
        });
        Ok(Ok(kv))
    }

    fn update(
        &mut self,
        tables: &mut Tables<'_>,
        key: &str,
        value: &[u8],
        expected: Revision,
        events: &mut Vec<WatchEvent>,
    ) -> Result<Result<KeyValue>, redb::Error> {
        let current = match guarded(tables, key, Some(expected))? {
            Ok(current) => current,
            Err(error) => return Ok(Err(error)),
        };
        let revision = self.next_revision();
        tables
            .versions
            .insert((key, revision), (current.create_revision, Some(value)))?;
        tables.events.insert(revision, key)?;
        tables
            .obsolete
            .insert((revision, key, current.mod_revision), ())?;
        let kv = KeyValue {
            key: key.to_owned(),
            value: Bytes::copy_from_slice(value),
            create_revision: current.create_revision,
            mod_revision: revision,
        };
        events.push(WatchEvent {
            kind: EventKind::Put,
            kv: kv.clone(),
            prev: Some(current),
        });
        Ok(Ok(kv))
    }

    fn delete(
        &mut self,
        tables: &mut Tables<'_>,
        key: &str,
        expected: Option<Revision>,
        events: &mut Vec<WatchEvent>,
    ) -> Result<Result<(KeyValue, Revision)>, redb::Error> {
        let current = match guarded(tables, key, expected)? {
            Ok(current) => current,
            Err(error) => return Ok(Err(error)),
        };
        let revision = self.next_revision();
        tables.versions.insert((key, revision), (0, None))?;
        tables.events.insert(revision, key)?;
        // Both the deleted version and the tombstone itself are garbage once compaction passes it.
        tables
            .obsolete
            .insert((revision, key, current.mod_revision), ())?;
        tables.obsolete.insert((revision, key, revision), ())?;
        events.push(WatchEvent {
            kind: EventKind::Delete,
            kv: tombstone(key, revision),
            prev: Some(current.clone()),
        });
        Ok(Ok((current, revision)))
    }

    /// Drops every version that is neither visible at `revision` nor newer, and the change log
    /// before it. Compacting to a revision at or below the compacted one is a no-op.
    fn compact(
        &mut self,
        tables: &mut Tables<'_>,
        revision: Revision,
    ) -> Result<Result<()>, redb::Error> {
        if revision > self.revision {
            return Ok(Err(StorageError::FutureRevision {
                requested: revision,
                current: self.revision,
            }));
        }
        if revision <= self.compacted {
            return Ok(Ok(()));
        }
        let garbage = tables
            .obsolete
            .range(..(revision, "", i64::MIN))?
            .map(|entry| {
                entry.map(|(row, _)| {
                    let (obsolete_at, key, version) = row.value();
                    (obsolete_at, key.to_owned(), version)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (obsolete_at, key, version) in &garbage {
            tables.versions.remove((key.as_str(), *version))?;
            tables
                .obsolete
                .remove((*obsolete_at, key.as_str(), *version))?;
        }
        tables.events.retain_in(..revision, |_, _| false)?;
        debug!(revision, versions = garbage.len(), "compacted");
        self.compacted = revision;
        Ok(Ok(()))
    }
}

/// The live value of `key` if the guard (`expected` mod revision) holds.
fn guarded(
    tables: &Tables<'_>,
    key: &str,
    expected: Option<Revision>,
) -> Result<Result<KeyValue>, redb::Error> {
    let Some(current) = live_at(&tables.versions, key, Revision::MAX)? else {
        return Ok(Err(StorageError::NotFound {
            key: key.to_owned(),
        }));
    };
    match expected {
        Some(expected) if expected != current.mod_revision => Ok(Err(StorageError::Conflict {
            key: key.to_owned(),
            expected,
            current: Some(current),
        })),
        _ => Ok(Ok(current)),
    }
}

/// Flattens an operation's outcome, remembering the first storage failure of the batch.
fn settle<T>(
    outcome: Result<Result<T>, redb::Error>,
    failure: &mut Option<redb::Error>,
) -> Result<T> {
    outcome.unwrap_or_else(|error| {
        let reason = error.to_string();
        failure.get_or_insert(error);
        Err(StorageError::Unavailable(reason))
    })
}
