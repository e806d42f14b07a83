//! The etcd backend: the contract is etcd v3's own, so each call is one etcd request.
//!
//! Conditional writes are single transactions (create: `create_revision == 0`; update and guarded
//! delete: `mod_revision == expected`), whose failure branch reads the key so a conflict can report
//! the current value without a second round trip. Keys are used exactly as given: the API server
//! already puts its `/registry/...` prefix in front.
//!
//! etcd reports "compacted" and "future revision" as gRPC errors without the numbers our errors carry;
//! those are looked up afterwards (see [`EtcdStore::compacted_revision`]), which costs a round trip
//! only on these rare failures.

mod config;
mod watch;

use std::sync::RwLock;

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, KvClient, PutOptions, Txn, TxnOp,
    TxnOpResponse, TxnResponse, WatchOptions,
};
use tracing::info;

pub use self::config::EtcdConfig;
use crate::{
    KeyValue, RangeRequest, RangeResponse, Result, Revision, Storage, StorageError, WatchStream,
};

/// A key nobody writes, for requests that only need a revision check or a response header.
const PROBE_KEY: &[u8] = b"\0kcp-storage-probe";

/// A [`Storage`] backed by an etcd v3 cluster.
pub struct EtcdStore {
    /// `None` once closed.
    client: RwLock<Option<Client>>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").finish_non_exhaustive()
    }
}

/// What etcd refused a request for, when the refusal is part of the contract.
enum Refusal {
    Compacted,
    FutureRevision,
}

fn refusal(error: &etcd_client::Error) -> Option<Refusal> {
    let etcd_client::Error::GRpcStatus(status) = error else {
        return None;
    };
    let message = status.message();
    if message.contains("required revision has been compacted") {
        Some(Refusal::Compacted)
    } else if message.contains("required revision is a future revision") {
        Some(Refusal::FutureRevision)
    } else {
        None
    }
}

pub(super) fn unavailable(error: etcd_client::Error) -> StorageError {
    StorageError::Unavailable(format!("etcd: {error}"))
}

/// Our key value from etcd's; keys written through this crate are always UTF-8.
pub(super) fn convert_kv(kv: &etcd_client::KeyValue) -> Result<KeyValue> {
    let key = kv.key_str().map_err(|_| {
        StorageError::Unavailable(format!("etcd returned a non-UTF-8 key {:?}", kv.key()))
    })?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
    })
}

/// The end of the key range holding every key that starts with `prefix` (etcd's `range_end`).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte is 0xff, or the prefix is empty: "\0" means "to the end of the keyspace".
    vec![0]
}

/// etcd rejects the empty key; "\0" is the smallest key there is.
fn range_start(key: &[u8]) -> Vec<u8> {
    if key.is_empty() {
        vec![0]
    } else {
        key.to_vec()
    }
}

fn header_revision(response: &TxnResponse) -> Result<Revision> {
    response
        .header()
        .map(|h| h.revision())
        .ok_or_else(|| StorageError::Unavailable("etcd response without header".to_owned()))
}

/// The key a transaction's failure branch read (`None` when absent).
fn read_back(response: &TxnResponse) -> Result<Option<KeyValue>> {
    for op in response.op_responses() {
        if let TxnOpResponse::Get(get) = op {
            return get.kvs().first().map(convert_kv).transpose();
        }
    }
    Ok(None)
}

/// `compares` hold only if `key` exists and, when `expected` is given, was last modified then.
fn guard(key: &str, expected: Option<Revision>) -> Vec<Compare> {
    let mut compares = vec![Compare::create_revision(key, CompareOp::Greater, 0)];
    if let Some(expected) = expected {
        compares.push(Compare::mod_revision(key, CompareOp::Equal, expected));
    }
    compares
}

/// The error for a failed guarded write: the key is gone, or it changed.
fn guard_failed(key: &str, expected: Option<Revision>, current: Option<KeyValue>) -> StorageError {
    match (current, expected) {
        (None, _) => StorageError::NotFound {
            key: key.to_owned(),
        },
        (current @ Some(_), Some(expected)) => StorageError::Conflict {
            key: key.to_owned(),
            expected,
            current,
        },
        // Unguarded and the key exists: the transaction can not have failed on a guard.
        (Some(_), None) => StorageError::Unavailable(format!("etcd refused to delete {key}")),
    }
}

impl EtcdStore {
    /// Connects to etcd and checks that it answers.
    pub async fn connect(config: &EtcdConfig) -> Result<EtcdStore> {
        let options = config.connect_options().await?;
        let client = Client::connect(&config.servers, Some(options))
            .await
            .map_err(unavailable)?;
        let store = EtcdStore {
            client: RwLock::new(Some(client)),
        };
        let revision = store.current_revision().await?;
        info!(servers = ?config.servers, revision, "connected to etcd");
        Ok(store)
    }

    fn client(&self) -> Result<Client> {
        let closed = || StorageError::Unavailable("the etcd store is closed".to_owned());
        self.client
            .read()
            .map_err(|_| closed())?
            .clone()
            .ok_or_else(closed)
    }

    fn kv(&self) -> Result<KvClient> {
        Ok(self.client()?.kv_client())
    }

    /// The contract's error for an etcd failure of a request at revision `requested`.
    async fn explain(&self, error: etcd_client::Error, requested: Revision) -> StorageError {
        match refusal(&error) {
            Some(Refusal::Compacted) => {
                let compacted = self
                    .compacted_revision()
                    .await
                    .unwrap_or(0)
                    .max(requested + 1);
                StorageError::Compacted {
                    requested,
                    compacted,
                }
            }
            Some(Refusal::FutureRevision) => {
                let current = self.current_revision().await.unwrap_or(requested - 1);
                StorageError::FutureRevision { requested, current }
            }
            None => unavailable(error),
        }
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.kv()?.txn(txn).await.map_err(unavailable)
    }

    /// Asks etcd for the compacted revision by watching from revision 1, which etcd answers with
    /// the compaction point. Only meaningful once a read at revision 1 failed as compacted.
    async fn compact_revision_from_watch(&self) -> Result<Revision> {
        let options = WatchOptions::new().with_start_revision(1);
        let mut stream = self
            .client()?
            .watch_client()
            .watch(PROBE_KEY, Some(options))
            .await
            .map_err(unavailable)?;
        while let Some(response) = stream.message().await.map_err(unavailable)? {
            if response.compact_revision() != 0 {
                return Ok(response.compact_revision());
            }
            if response.canceled() {
                break;
            }
        }
        Err(StorageError::Unavailable(
            "etcd did not report its compacted revision".to_owned(),
        ))
    }
}

#[async_trait]
impl Storage for EtcdStore {
    async fn current_revision(&self) -> Result<Revision> {
        let response = self
            .kv()?
            .get(PROBE_KEY, Some(GetOptions::new().with_count_only()))
            .await
            .map_err(unavailable)?;
        response
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| StorageError::Unavailable("etcd response without header".to_owned()))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let response = self.kv()?.get(key, None).await.map_err(unavailable)?;
        response.kvs().first().map(convert_kv).transpose()
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResponse> {
        let prefix = request.prefix.as_bytes();
        let start = match request.start_after.as_deref() {
            Some(after) if after >= request.prefix.as_str() => [after.as_bytes(), b"\0"].concat(),
            _ => range_start(prefix),
        };
        let mut options = GetOptions::new()
            .with_range(prefix_end(prefix))
            .with_revision(request.revision);
        if request.limit > 0 {
            options = options.with_limit(i64::try_from(request.limit).unwrap_or(i64::MAX));
        }
        let response = match self.kv()?.get(start, Some(options)).await {
            Ok(response) => response,
            Err(error) => return Err(self.explain(error, request.revision).await),
        };
        let revision = match request.revision {
            0 => response.header().map(|h| h.revision()).ok_or_else(|| {
                StorageError::Unavailable("etcd response without header".to_owned())
            })?,
            pinned => pinned,
        };
        let kvs = response
            .kvs()
            .iter()
            .map(convert_kv)
            .collect::<Result<_>>()?;
        Ok(RangeResponse {
            kvs,
            more: response.more(),
            revision,
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.to_vec(), None)]);
        let response = self.txn(txn).await?;
        if !response.succeeded() {
            return Err(StorageError::AlreadyExists {
                key: key.to_owned(),
            });
        }
        let revision = header_revision(&response)?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: revision,
            mod_revision: revision,
        })
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let txn = Txn::new()
            .when(guard(key, Some(expected)))
            .and_then([TxnOp::put(
                key,
                value.to_vec(),
                Some(PutOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn(txn).await?;
        if !response.succeeded() {
            return Err(guard_failed(key, Some(expected), read_back(&response)?));
        }
        let revision = header_revision(&response)?;
        let create_revision = response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Put(put) => put.prev_key().map(|kv| kv.create_revision()),
                _ => None,
            })
            .ok_or_else(|| {
                StorageError::Unavailable(format!("etcd did not return the previous {key}"))
            })?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision,
            mod_revision: revision,
        })
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(KeyValue, Revision)> {
        let txn = Txn::new()
            .when(guard(key, expected))
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn(txn).await?;
        if !response.succeeded() {
            return Err(guard_failed(key, expected, read_back(&response)?));
        }
        let revision = header_revision(&response)?;
        let deleted = response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Delete(delete) => delete.prev_kvs().first().map(convert_kv),
                _ => None,
            })
            .ok_or_else(|| {
                StorageError::Unavailable(format!("etcd did not return the deleted {key}"))
            })??;
        Ok((deleted, revision))
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream> {
        if from > 0 {
            // etcd acknowledges a watch on compacted history and only then cancels it; a read at the
            // start revision turns that into the immediate error the contract promises. A future
            // start revision is fine for a watch: it waits.
            let probe = GetOptions::new().with_revision(from).with_count_only();
            if let Err(error) = self.kv()?.get(PROBE_KEY, Some(probe)).await {
                match self.explain(error, from).await {
                    StorageError::FutureRevision { .. } => {}
                    error => return Err(error),
                }
            }
        }
        let options = WatchOptions::new()
            .with_range(prefix_end(prefix.as_bytes()))
            .with_start_revision(from)
            .with_prev_key();
        let stream = self
            .client()?
            .watch_client()
            .watch(range_start(prefix.as_bytes()), Some(options))
            .await
            .map_err(unavailable)?;
        watch::start(stream, from).await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        match self.kv()?.compact(revision, None).await {
            Ok(_) => Ok(()),
            Err(error) => match self.explain(error, revision).await {
                // Already compacted at or past `revision`: what the caller wanted holds.
                StorageError::Compacted { .. } => Ok(()),
                error => Err(error),
            },
        }
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        let probe = GetOptions::new().with_revision(1).with_count_only();
        match self.kv()?.get(PROBE_KEY, Some(probe)).await {
            Ok(_) => Ok(0),
            Err(error) if matches!(refusal(&error), Some(Refusal::Compacted)) => {
                self.compact_revision_from_watch().await
            }
            Err(error) => Err(unavailable(error)),
        }
    }

    async fn close(&self) -> Result<()> {
        let closed = || StorageError::Unavailable("the etcd store is closed".to_owned());
        self.client.write().map_err(|_| closed())?.take();
        Ok(())
    }
}
