//! The layout of the redb file and the reads every other embedded module shares.
//!
//! etcd keeps every version of a key until compaction and indexes changes by revision; the same two
//! structures give us pinned-revision reads (paginated lists) and watch replay from old revisions.
//! Values are stored once, in [`VERSIONS`]; the other tables only point at versions, so history costs
//! one row per write and compaction costs one row per superseded version:
//!
//! * [`VERSIONS`] `(key, revision) -> (create_revision, value)`: every version not yet compacted, a
//!   `None` value marking a delete (tombstone). Sorted by key then revision, so "the key as of
//!   revision R" is one reverse seek and a prefix read is one forward scan.
//! * [`EVENTS`] `revision -> key`: the change log, one row per revision, for watch replay.
//! * [`OBSOLETE`] `(revision, key, version)`: versions that became garbage at `revision` (superseded
//!   by a newer write or being a tombstone); compaction to C removes exactly the rows with
//!   `revision < C` instead of scanning the whole keyspace.
//! * [`META`]: the current and compacted revision, so both survive a restart.

use redb::{ReadableTable, TableDefinition};

use crate::{KeyValue, Revision, WatchEvent};

pub(super) type VersionKey = (&'static str, i64);
pub(super) type VersionValue = (i64, Option<&'static [u8]>);

pub(super) const VERSIONS: TableDefinition<VersionKey, VersionValue> =
    TableDefinition::new("versions");
pub(super) const EVENTS: TableDefinition<i64, &str> = TableDefinition::new("events");
pub(super) const OBSOLETE: TableDefinition<(i64, &str, i64), ()> = TableDefinition::new("obsolete");
pub(super) const META: TableDefinition<&str, i64> = TableDefinition::new("meta");

pub(super) const META_REVISION: &str = "revision";
pub(super) const META_COMPACTED: &str = "compacted";

/// The revision of a store nobody has written to yet (as in etcd, the first write gets revision 2).
pub(super) const INITIAL_REVISION: Revision = 1;

/// One stored version of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Version {
    pub(super) revision: Revision,
    pub(super) create_revision: Revision,
    /// `None` for a tombstone.
    pub(super) value: Option<Vec<u8>>,
}

impl Version {
    /// The key value this version stands for, or `None` when it is a tombstone.
    pub(super) fn into_kv(self, key: &str) -> Option<KeyValue> {
        self.value.map(|value| KeyValue {
            key: key.to_owned(),
            value: value.into(),
            create_revision: self.create_revision,
            mod_revision: self.revision,
        })
    }
}

/// The newest version of `key` with a revision `<= at`.
pub(super) fn version_at(
    versions: &impl ReadableTable<VersionKey, VersionValue>,
    key: &str,
    at: Revision,
) -> Result<Option<Version>, redb::StorageError> {
    let Some(entry) = versions.range((key, i64::MIN)..=(key, at))?.next_back() else {
        return Ok(None);
    };
    let (stored_key, stored_value) = entry?;
    let (_, revision) = stored_key.value();
    let (create_revision, value) = stored_value.value();
    Ok(Some(Version {
        revision,
        create_revision,
        value: value.map(<[u8]>::to_vec),
    }))
}

/// The live value of `key` as of `at` (`None` when absent or deleted).
pub(super) fn live_at(
    versions: &impl ReadableTable<VersionKey, VersionValue>,
    key: &str,
    at: Revision,
) -> Result<Option<KeyValue>, redb::StorageError> {
    Ok(version_at(versions, key, at)?.and_then(|version| version.into_kv(key)))
}

/// The watch event of the write to `key` at `revision`, with the key's previous value.
pub(super) fn event_at(
    versions: &impl ReadableTable<VersionKey, VersionValue>,
    key: &str,
    revision: Revision,
) -> Result<Option<WatchEvent>, redb::StorageError> {
    let Some(version) = version_at(versions, key, revision)?.filter(|v| v.revision == revision)
    else {
        return Ok(None);
    };
    let prev = live_at(versions, key, revision - 1)?;
    Ok(Some(match version.into_kv(key) {
        Some(kv) => WatchEvent {
            kind: crate::EventKind::Put,
            kv,
            prev,
        },
        None => WatchEvent {
            kind: crate::EventKind::Delete,
            kv: tombstone(key, revision),
            prev,
        },
    }))
}

/// The `kv` of a delete event: the key, no value, the delete's revision.
pub(super) fn tombstone(key: &str, revision: Revision) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Default::default(),
        create_revision: 0,
        mod_revision: revision,
    }
}

/// Reads a meta counter, defaulting when the store is new.
pub(super) fn meta(
    table: &impl ReadableTable<&'static str, i64>,
    name: &str,
    default: Revision,
) -> Result<Revision, redb::StorageError> {
    Ok(table.get(name)?.map_or(default, |v| v.value()))
}
