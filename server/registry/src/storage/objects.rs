//! Reading and writing Kubernetes objects (JSON values) in the revisioned store.

use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use kcp_apimachinery::{ApiError, meta};
use kcp_storage::{EventKind, KeyValue, RangeRequest, Revision, Storage, StorageError};
use serde_json::Value;

use super::continuation::Continuation;
use super::keys::{self, KeyLayout, ResourceKeys};
use crate::LogicalClusterName;

/// The most keys one storage read of a list asks for.
const STORAGE_CHUNK: usize = 500;

/// The annotation kcp puts on every object it returns, naming the logical cluster it lives in.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// An object read from the store, with the revision of its last write.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredObject {
    pub object: Value,
    pub revision: Revision,
}

/// Names what an error is about, so storage failures become Statuses naming the right object.
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
}

/// One page of a list, read at one revision.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Value>,
    pub revision: Revision,
    /// Set when more items follow; pass it back as `continue`.
    pub continue_token: Option<String>,
}

/// The `metadata` of a list: the revision it was read at and, when more items follow, the
/// `continue` token.
pub fn list_metadata(revision: Revision, continue_token: Option<String>) -> Value {
    let mut metadata = serde_json::json!({"resourceVersion": revision.to_string()});
    if let Some(token) = continue_token {
        metadata["continue"] = serde_json::json!(token);
    }
    metadata
}

/// What a list reads: which keys, at which revision, how many, from where.
#[derive(Debug, Clone)]
pub struct ListRequest<'a> {
    pub prefix: &'a str,
    /// `0` for the latest revision.
    pub revision: Revision,
    pub limit: usize,
    pub continuation: Option<Continuation>,
}

impl<'a> ListRequest<'a> {
    /// Everything under a prefix at the latest revision, in one page.
    pub fn everything(prefix: &'a str) -> Self {
        ListRequest {
            prefix,
            revision: 0,
            limit: 0,
            continuation: None,
        }
    }
}

/// A change to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }

    /// What this change means to a client filtering with selectors: whether the object matches
    /// now and matched before decide the event type it sees, if any (kube's watch filtering: an
    /// object that stops matching is reported DELETED, one that starts matching ADDED).
    pub fn seen_through_filter(self, now: bool, before: bool) -> Option<ChangeType> {
        match self {
            ChangeType::Added if now => Some(ChangeType::Added),
            ChangeType::Modified if now && before => Some(ChangeType::Modified),
            ChangeType::Modified if now => Some(ChangeType::Added),
            ChangeType::Modified if before => Some(ChangeType::Deleted),
            ChangeType::Deleted if now => Some(ChangeType::Deleted),
            _ => None,
        }
    }
}

/// One change with the object after it (for deletes: the last state, at the delete's revision) and the
/// object before it, so selector-filtered watches can turn "stopped matching" into a delete.
#[derive(Debug, Clone)]
pub struct Change {
    pub kind: ChangeType,
    pub object: Value,
    pub previous: Option<Value>,
    pub revision: Revision,
}

/// What the keys of a store say about their objects: annotations every read sets from the key
/// and every write strips (the key is the truth). The API server's keys name the logical cluster
/// ([`LogicalClusterOfKey`]); other stores (the cache server's, whose keys name a shard too) bring
/// their own.
pub trait KeyAnnotations: Send + Sync + 'static {
    /// Every annotation [`Self::annotate`] may set.
    fn names(&self) -> &'static [&'static str];
    /// Calls `set` with each annotation of the object stored at `relative_key` (the key without
    /// the store's prefix and its `/`).
    fn annotate(&self, relative_key: &str, set: &mut dyn FnMut(&'static str, &str));
}

/// The API server's layout: `<group>/<resource>/[customresources/|<identityHash>/]<cluster>/...` names the
/// logical cluster, published as [`CLUSTER_ANNOTATION`].
pub struct LogicalClusterOfKey;

impl KeyAnnotations for LogicalClusterOfKey {
    fn names(&self) -> &'static [&'static str] {
        &[CLUSTER_ANNOTATION]
    }

    fn annotate(&self, relative_key: &str, set: &mut dyn FnMut(&'static str, &str)) {
        if let Some(cluster) = cluster_of_relative_key(relative_key) {
            set(CLUSTER_ANNOTATION, cluster.as_str());
        }
    }
}

/// Where keys start and what they say: all decoding and encoding needs to know of a store.
struct Layout {
    prefix: String,
    annotations: Box<dyn KeyAnnotations>,
}

/// Kubernetes objects over a [`Storage`], shared by every handler.
#[derive(Clone)]
pub struct ObjectStore {
    storage: Arc<dyn Storage>,
    layout: Arc<Layout>,
}

impl ObjectStore {
    /// The storage prefix every key starts with (`/registry`).
    pub fn prefix(&self) -> &str {
        &self.layout.prefix
    }

    pub fn new(storage: Arc<dyn Storage>, prefix: &str) -> Self {
        Self::with_key_annotations(storage, prefix, LogicalClusterOfKey)
    }

    /// A store whose keys say other things than the API server's (see [`KeyAnnotations`]).
    pub fn with_key_annotations(
        storage: Arc<dyn Storage>,
        prefix: &str,
        annotations: impl KeyAnnotations,
    ) -> Self {
        ObjectStore {
            storage,
            layout: Arc::new(Layout {
                prefix: prefix.to_string(),
                annotations: Box::new(annotations),
            }),
        }
    }

    /// Where every resource of an API group is stored (see [`keys::group_root`]).
    pub fn group_root(&self, group: &str) -> String {
        keys::group_root(self.prefix(), group)
    }

    pub fn keys(&self, group: &str, resource: &str, layout: KeyLayout) -> ResourceKeys {
        ResourceKeys::new(self.prefix(), group, resource, layout)
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub async fn current_revision(&self) -> Result<Revision, ApiError> {
        self.storage
            .current_revision()
            .await
            .map_err(|e| storage_error(e, None))
    }

    pub async fn get(
        &self,
        key: &str,
        what: ObjectRef<'_>,
    ) -> Result<Option<StoredObject>, ApiError> {
        match self
            .storage
            .get(key)
            .await
            .map_err(|e| storage_error(e, Some(what)))?
        {
            Some(kv) => Ok(Some(decode(&self.layout, &kv, kv.mod_revision)?)),
            None => Ok(None),
        }
    }

    /// Like [`get`](Self::get), answering 404 when the object does not exist.
    pub(crate) async fn get_existing(
        &self,
        key: &str,
        what: ObjectRef<'_>,
    ) -> Result<StoredObject, ApiError> {
        self.get(key, what)
            .await?
            .ok_or_else(|| ApiError::not_found(what.group, what.resource, what.name))
    }

    pub async fn create(
        &self,
        key: &str,
        object: &Value,
        what: ObjectRef<'_>,
    ) -> Result<StoredObject, ApiError> {
        let kv = self
            .storage
            .create(key, encode(&self.layout, object)?)
            .await
            .map_err(|e| storage_error(e, Some(what)))?;
        decode(&self.layout, &kv, kv.mod_revision)
    }

    pub async fn update(
        &self,
        key: &str,
        object: &Value,
        expected: Revision,
        what: ObjectRef<'_>,
    ) -> Result<StoredObject, ApiError> {
        let kv = self
            .storage
            .update(key, encode(&self.layout, object)?, expected)
            .await
            .map_err(|e| storage_error(e, Some(what)))?;
        decode(&self.layout, &kv, kv.mod_revision)
    }

    /// Deletes an object; returns its last state, with the delete's revision as `resourceVersion`.
    pub async fn delete(
        &self,
        key: &str,
        expected: Option<Revision>,
        what: ObjectRef<'_>,
    ) -> Result<StoredObject, ApiError> {
        let (kv, revision) = self
            .storage
            .delete(key, expected)
            .await
            .map_err(|e| storage_error(e, Some(what)))?;
        decode(&self.layout, &kv, revision)
    }

    /// Reads objects under a prefix, page after page at one revision, keeping those `keep` accepts,
    /// until `limit` are found or the range ends.
    pub async fn list(
        &self,
        request: ListRequest<'_>,
        keep: &(dyn Fn(&Value) -> bool + Sync),
    ) -> Result<ListPage, ApiError> {
        let mut revision = request
            .continuation
            .as_ref()
            .map_or(request.revision, Continuation::revision);
        let mut start_after = request
            .continuation
            .as_ref()
            .map(|c| format!("{}{}", request.prefix, c.after()));
        let mut items = Vec::new();
        loop {
            // Read in bounded chunks (all at one revision), so a large list never needs one huge
            // storage response (etcd's gRPC messages are limited) nor one huge decode.
            let wanted = match request.limit {
                0 => STORAGE_CHUNK,
                limit => (limit - items.len()).min(STORAGE_CHUNK),
            };
            let page = self
                .storage
                .range(RangeRequest {
                    prefix: request.prefix.to_string(),
                    start_after: start_after.clone(),
                    revision,
                    limit: wanted,
                })
                .await
                .map_err(|e| storage_error(e, None))?;
            revision = page.revision;
            let last_key = page.kvs.last().map(|kv| kv.key.clone());
            for kv in &page.kvs {
                let object = decode(&self.layout, kv, kv.mod_revision)?.object;
                if keep(&object) {
                    items.push(object);
                }
            }
            let full = request.limit != 0 && items.len() >= request.limit;
            match (page.more, last_key) {
                (true, Some(last)) if full => {
                    let relative = last.strip_prefix(request.prefix).unwrap_or(&last);
                    let token = Continuation::new(revision, relative).encode();
                    return Ok(ListPage {
                        items,
                        revision,
                        continue_token: Some(token),
                    });
                }
                (true, Some(last)) => {
                    start_after = Some(last);
                    // A store that reads in the caller's task (the embedded one) would otherwise
                    // hold this thread for the whole list; let others run between chunks.
                    yield_once().await;
                }
                _ => {
                    return Ok(ListPage {
                        items,
                        revision,
                        continue_token: None,
                    });
                }
            }
        }
    }

    /// The change a raw event of a storage watch opened elsewhere is (one watch of the whole
    /// store feeding several readers, as the shared watch cache does), without the object before
    /// it (`previous` is `None`: such a reader keeps its own).
    pub fn current_change(&self, event: kcp_storage::WatchEvent) -> Result<Change, ApiError> {
        decode_change(&self.layout, event, Decode::Current)
    }

    /// Changes under a prefix with revisions `>= from` (`0`: from now on), each with the object
    /// before it (what a selector-filtered watch needs to report an object leaving its selection).
    pub async fn watch(
        &self,
        prefix: &str,
        from: Revision,
    ) -> Result<impl Stream<Item = Result<Change, ApiError>> + Send + use<>, ApiError> {
        self.decoded_watch(prefix, from, |_| true, Decode::WithPrevious)
            .await
    }

    /// Like [`Self::watch`], without the object before each change (`previous` is `None`): for a
    /// reader that acts on objects as they are now (controllers, caches), which then decodes one
    /// object per change instead of two.
    pub async fn watch_current(
        &self,
        prefix: &str,
        from: Revision,
    ) -> Result<impl Stream<Item = Result<Change, ApiError>> + Send + use<>, ApiError> {
        self.decoded_watch(prefix, from, |_| true, Decode::Current)
            .await
    }

    /// Like [`Self::watch_current`], but only the changes `wanted` picks from their raw stored form
    /// are decoded and reported. A watcher interested in few objects among everything (the garbage
    /// collector watches the whole key space for owner references) must not parse every write:
    /// a watcher that falls behind holds up the writes themselves.
    pub async fn watch_where<W>(
        &self,
        prefix: &str,
        from: Revision,
        wanted: W,
    ) -> Result<impl Stream<Item = Result<Change, ApiError>> + Send + use<W>, ApiError>
    where
        W: Fn(&RawChange<'_>) -> bool + Send + 'static,
    {
        self.decoded_watch(prefix, from, wanted, Decode::Current)
            .await
    }

    /// Changes under a prefix with revisions `>= from`, undecoded: for a reader whose choice of
    /// the changes it decodes ([`Self::current_change`]) depends on state it keeps, and which
    /// learns what it needs of most changes from the key alone (the cache replication decodes no
    /// deletion, and no change of an object it does not replicate).
    pub async fn watch_stored(
        &self,
        prefix: &str,
        from: Revision,
    ) -> Result<
        impl Stream<Item = Result<kcp_storage::WatchEvent, ApiError>> + Send + use<>,
        ApiError,
    > {
        let events = self
            .storage
            .watch(prefix, from)
            .await
            .map_err(|e| storage_error(e, None))?;
        Ok(events.map(|event| event.map_err(|e| storage_error(e, None))))
    }

    async fn decoded_watch<W>(
        &self,
        prefix: &str,
        from: Revision,
        wanted: W,
        decode: Decode,
    ) -> Result<impl Stream<Item = Result<Change, ApiError>> + Send + use<W>, ApiError>
    where
        W: Fn(&RawChange<'_>) -> bool + Send + 'static,
    {
        let events = self
            .storage
            .watch(prefix, from)
            .await
            .map_err(|e| storage_error(e, None))?;
        let layout = self.layout.clone();
        Ok(events.filter_map(move |event| {
            let change = match event {
                Err(e) => Some(Err(storage_error(e, None))),
                Ok(event) => {
                    let raw = RawChange {
                        deleted: event.kind == EventKind::Delete,
                        key: &event.kv.key,
                        value: &event.kv.value,
                        previous: event.prev.as_ref().map(|prev| &prev.value[..]),
                    };
                    wanted(&raw).then(|| decode_change(&layout, event, decode))
                }
            };
            std::future::ready(change)
        }))
    }
}

/// Which objects of a change a watch decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decode {
    /// The object after the change and the one before it.
    WithPrevious,
    /// The object after the change only (for a delete, its last state).
    Current,
}

/// Lets the executor run other tasks once before this one goes on (any executor: the registry
/// does not depend on tokio).
async fn yield_once() {
    let mut yielded = false;
    futures::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await;
}

/// A change as stored, before decoding: what [`ObjectStore::watch_where`] filters on.
pub struct RawChange<'a> {
    pub deleted: bool,
    pub key: &'a str,
    /// The new value (empty for a delete).
    pub value: &'a [u8],
    /// The value before the change, when there was one.
    pub previous: Option<&'a [u8]>,
}

fn decode_change(
    layout: &Layout,
    event: kcp_storage::WatchEvent,
    decode_as: Decode,
) -> Result<Change, ApiError> {
    let previous = match &event.prev {
        Some(prev) if decode_as == Decode::WithPrevious => {
            Some(decode(layout, prev, prev.mod_revision)?.object)
        }
        _ => None,
    };
    let revision = event.kv.mod_revision;
    match (event.kind, event.prev) {
        (EventKind::Put, prev) => Ok(Change {
            kind: if prev.is_some() {
                ChangeType::Modified
            } else {
                ChangeType::Added
            },
            object: decode(layout, &event.kv, revision)?.object,
            previous,
            revision,
        }),
        (EventKind::Delete, Some(prev)) => Ok(Change {
            kind: ChangeType::Deleted,
            object: decode(layout, &prev, revision)?.object,
            previous,
            revision,
        }),
        (EventKind::Delete, None) => Err(ApiError::internal_error(&format!(
            "storage reported the delete of {} without its previous value",
            event.kv.key
        ))),
    }
}

/// Stored bytes never carry `resourceVersion` (the revision is the truth) nor the annotations the
/// key sets (the key is the truth).
fn encode(layout: &Layout, object: &Value) -> Result<Bytes, ApiError> {
    let mut object = object.clone();
    strip_read_only(&mut object, layout.annotations.names());
    serde_json::to_vec(&object)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal_error(&format!("encoding object: {e}")))
}

/// Removes what reads add to an object: `resourceVersion` and the annotations `names` (and the
/// annotations map when nothing is left in it). What storage keeps, and what two copies of an
/// object are compared on.
pub fn strip_read_only(object: &mut Value, names: &[&str]) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            for name in names {
                annotations.remove(*name);
            }
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        }
    }
}

fn decode(layout: &Layout, kv: &KeyValue, revision: Revision) -> Result<StoredObject, ApiError> {
    let mut object: Value = serde_json::from_slice(&kv.value).map_err(|e| {
        ApiError::internal_error(&format!("stored object {} is not valid JSON: {e}", kv.key))
    })?;
    meta::set_resource_version(&mut object, &revision.to_string());
    if let Some(relative) = kv
        .key
        .strip_prefix(layout.prefix.trim_end_matches('/'))
        .and_then(|rest| rest.strip_prefix('/'))
    {
        layout.annotations.annotate(relative, &mut |name, value| {
            meta::set_annotation(&mut object, name, value)
        });
    }
    Ok(StoredObject { object, revision })
}

/// Keys are `<prefix>/<group>/<resource>/[customresources/|<identityHash>/]<cluster>/...` (see
/// [`ResourceKeys`]), so the logical cluster is the third segment after the prefix, or the fourth
/// for custom resources and resources bound from an APIExport.
fn cluster_of_relative_key(rest: &str) -> Option<LogicalClusterName> {
    let mut segments = rest.split('/').skip(2);
    let cluster = match segments.next()? {
        super::keys::CUSTOM_RESOURCES_SEGMENT => segments.next()?,
        identity if super::keys::is_identity_hash(identity) => segments.next()?,
        cluster => cluster,
    };
    LogicalClusterName::parse(cluster)
}

/// Maps a storage failure to the Kubernetes Status clients expect.
pub(crate) fn storage_error(error: StorageError, what: Option<ObjectRef<'_>>) -> ApiError {
    let (group, resource, name) = what.map_or(("", "", ""), |w| (w.group, w.resource, w.name));
    match error {
        StorageError::AlreadyExists { .. } => ApiError::already_exists(group, resource, name),
        StorageError::NotFound { .. } => ApiError::not_found(group, resource, name),
        StorageError::Conflict { .. } => ApiError::conflict(
            group,
            resource,
            name,
            kcp_apimachinery::status::OPTIMISTIC_LOCK_ERROR_MSG,
        ),
        StorageError::Compacted {
            requested,
            compacted,
        } => ApiError::resource_expired(&format!(
            "too old resource version: {requested} ({compacted})"
        )),
        StorageError::FutureRevision { requested, current } => ApiError::timeout(
            &format!("Too large resource version: {requested}, current: {current}"),
            1,
        ),
        StorageError::Unavailable(message) => {
            ApiError::service_unavailable(&format!("storage unavailable: {message}"))
        }
        StorageError::Config(message) => ApiError::internal_error(&message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_from_key() {
        let layout = Layout {
            prefix: "/registry".into(),
            annotations: Box::new(LogicalClusterOfKey),
        };
        let cluster = |k: &str| {
            let kv = KeyValue {
                key: k.into(),
                value: Bytes::from_static(b"{}"),
                create_revision: 1,
                mod_revision: 1,
            };
            let object = decode(&layout, &kv, 1).unwrap().object;
            meta::annotations(&object).remove(CLUSTER_ANNOTATION)
        };
        assert_eq!(
            cluster("/registry/core/configmaps/root/default/x").as_deref(),
            Some("root")
        );
        assert_eq!(
            cluster("/registry/core/namespaces/abc/default").as_deref(),
            Some("abc")
        );
        assert_eq!(cluster("/other/core/namespaces/abc/default"), None);
        let bound = format!("/registry/example.com/widgets/{}/abc/ns/w", "0a".repeat(32));
        assert_eq!(cluster(&bound).as_deref(), Some("abc"));
        assert_eq!(
            cluster("/registry/example.com/widgets/customresources/abc/ns/w").as_deref(),
            Some("abc")
        );
    }

    #[test]
    fn selector_transitions() {
        use ChangeType::{Added, Deleted, Modified};
        assert_eq!(Added.seen_through_filter(true, false), Some(Added));
        assert_eq!(Added.seen_through_filter(false, false), None);
        assert_eq!(Modified.seen_through_filter(true, true), Some(Modified));
        assert_eq!(Modified.seen_through_filter(true, false), Some(Added));
        assert_eq!(Modified.seen_through_filter(false, true), Some(Deleted));
        assert_eq!(Modified.seen_through_filter(false, false), None);
        assert_eq!(Deleted.seen_through_filter(true, true), Some(Deleted));
        assert_eq!(Deleted.seen_through_filter(false, true), None);
    }

    #[test]
    fn stored_bytes_have_no_resource_version_nor_cluster() {
        let object = serde_json::json!({"metadata": {"name": "x", "resourceVersion": "5",
            "annotations": {"kcp.io/cluster": "root"}}});
        let layout = Layout {
            prefix: "/registry".into(),
            annotations: Box::new(LogicalClusterOfKey),
        };
        let bytes = encode(&layout, &object).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            serde_json::json!({"metadata": {"name": "x"}})
        );
    }
}
