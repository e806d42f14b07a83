//! Reads against one redb snapshot: pinned-revision ranges and change-log chunks for watch replay.
//!
//! Each function takes a read transaction, so everything it returns (data, current and compacted
//! revision) comes from one consistent snapshot; revision checks use the snapshot's own counters, never
//! the in-memory ones, so a concurrent compaction can not slip between check and read.

use std::ops::Bound;

use redb::ReadTransaction;

use super::schema::{
    EVENTS, INITIAL_REVISION, META, META_COMPACTED, META_REVISION, VERSIONS, Version, event_at,
    meta,
};
use crate::{RangeRequest, RangeResponse, Revision, StorageError, WatchEvent};

/// The current and compacted revision of a snapshot.
struct Counters {
    revision: Revision,
    compacted: Revision,
}

fn counters(txn: &ReadTransaction) -> Result<Counters, redb::Error> {
    let table = txn.open_table(META)?;
    Ok(Counters {
        revision: meta(&table, META_REVISION, INITIAL_REVISION)?,
        compacted: meta(&table, META_COMPACTED, 0)?,
    })
}

/// Serves a [`RangeRequest`]: the newest version `<=` the requested revision of every key under the
/// prefix, skipping keys whose visible version is a delete.
pub(super) fn range(
    txn: &ReadTransaction,
    request: &RangeRequest,
) -> Result<Result<RangeResponse, StorageError>, redb::Error> {
    let Counters {
        revision: current,
        compacted,
    } = counters(txn)?;
    let at = if request.revision == 0 {
        current
    } else {
        request.revision
    };
    if at > current {
        return Ok(Err(StorageError::FutureRevision {
            requested: at,
            current,
        }));
    }
    if at < compacted {
        return Ok(Err(StorageError::Compacted {
            requested: at,
            compacted,
        }));
    }

    let prefix = request.prefix.as_str();
    let start = match request.start_after.as_deref() {
        Some(after) if after >= prefix => Bound::Excluded((after, i64::MAX)),
        _ => Bound::Included((prefix, i64::MIN)),
    };
    let versions = txn.open_table(VERSIONS)?;
    let mut response = RangeResponse {
        kvs: Vec::new(),
        more: false,
        revision: at,
    };
    // The visible version of the key being scanned; versions of one key arrive oldest first.
    let mut visible: Option<(String, Version)> = None;
    for entry in versions.range((start, Bound::Unbounded))? {
        let (stored_key, stored_value) = entry?;
        let (key, revision) = stored_key.value();
        if !key.starts_with(prefix) {
            break;
        }
        let same_key = visible.as_ref().is_some_and(|(k, _)| k == key);
        if !same_key && emit(&mut response, visible.take(), request.limit) {
            return Ok(Ok(response));
        }
        if revision <= at {
            let (create_revision, value) = stored_value.value();
            let version = Version {
                revision,
                create_revision,
                value: value.map(<[u8]>::to_vec),
            };
            visible = Some((key.to_owned(), version));
        }
    }
    emit(&mut response, visible, request.limit);
    Ok(Ok(response))
}

/// Adds a key's visible version to the page; returns `true` when the page was already full, which
/// means there is more after it.
fn emit(response: &mut RangeResponse, visible: Option<(String, Version)>, limit: usize) -> bool {
    let Some(kv) = visible.and_then(|(key, version)| version.into_kv(&key)) else {
        return false;
    };
    if limit > 0 && response.kvs.len() == limit {
        response.more = true;
        return true;
    }
    response.kvs.push(kv);
    false
}

/// A window of the change log read for a watcher.
pub(super) struct Chunk {
    /// The matching events, in revision order.
    pub(super) events: Vec<WatchEvent>,
    /// The first revision not covered by this chunk.
    pub(super) next: Revision,
    /// The chunk reached the snapshot's current revision: the watcher is caught up with the file.
    pub(super) caught_up: bool,
}

/// Reads the events under `prefix` from revision `from` on, covering at most `window` revisions.
pub(super) fn events(
    txn: &ReadTransaction,
    prefix: &str,
    from: Revision,
    window: i64,
) -> Result<Result<Chunk, StorageError>, redb::Error> {
    let Counters {
        revision: current,
        compacted,
    } = counters(txn)?;
    if from < compacted {
        return Ok(Err(StorageError::Compacted {
            requested: from,
            compacted,
        }));
    }
    if from > current {
        return Ok(Ok(Chunk {
            events: Vec::new(),
            next: from,
            caught_up: true,
        }));
    }
    let last = current.min(from.saturating_add(window - 1));
    let log = txn.open_table(EVENTS)?;
    let versions = txn.open_table(VERSIONS)?;
    let mut events = Vec::new();
    for entry in log.range(from..=last)? {
        let (revision, key) = entry?;
        let key = key.value();
        if key.starts_with(prefix)
            && let Some(event) = event_at(&versions, key, revision.value())?
        {
            events.push(event);
        }
    }
    Ok(Ok(Chunk {
        events,
        next: last + 1,
        caught_up: last == current,
    }))
}
