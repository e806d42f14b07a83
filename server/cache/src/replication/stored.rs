//! The changes a replication follows, as the shard's store reports them: each names its object
//! from the key, and is decoded only when the follower needs the object itself.
//!
//! Upstream's replication controllers read their changes from informers, which decode every
//! object once per process. Here each replication task has its own storage watches (the RBAC
//! one a single watch of each of its two resources), so decoding every change would parse, for
//! instance, each deleted ClusterRoleBinding of a deleted workspace and each LogicalCluster
//! update for a holder check that needs the logical cluster's name only. Most decisions need the
//! object's identity and whether it was deleted, both in the key: a deletion is never decoded,
//! and a follower decodes only the changes of objects it may replicate.

use futures::StreamExt;
use futures::stream::BoxStream;
use kcp_apimachinery::ApiError;
use kcp_registry::storage::ObjectStore;
use kcp_storage::{EventKind, Revision, WatchEvent};
use serde_json::Value;

use super::ObjectId;

/// One change of an object, undecoded.
pub(super) struct Stored {
    /// The object, from its key.
    pub(super) id: ObjectId,
    pub(super) deleted: bool,
    event: WatchEvent,
}

impl Stored {
    /// The object after the change (a deletion's is its last state).
    pub(super) fn object(self, local: &ObjectStore) -> Result<Value, ApiError> {
        local.current_change(self.event).map(|change| change.object)
    }
}

/// The changes under `prefix` (a resource's keys in every logical cluster,
/// `<prefix>/<group>/<resource>/`) from revision `from` on.
pub(super) async fn changes(
    local: &ObjectStore,
    prefix: &str,
    from: Revision,
) -> Result<BoxStream<'static, Result<Stored, ApiError>>, ApiError> {
    let events = local.watch_stored(prefix, from).await?;
    let prefix = prefix.to_owned();
    Ok(events
        .filter_map(move |event| {
            let stored = match event {
                Err(error) => Some(Err(error)),
                Ok(event) => id_of_key(&prefix, &event.kv.key).map(|id| {
                    Ok(Stored {
                        id,
                        deleted: event.kind == EventKind::Delete,
                        event,
                    })
                }),
            };
            std::future::ready(stored)
        })
        .boxed())
}

/// The object a key under `prefix` stores: `<cluster>/<name>` or `<cluster>/<namespace>/<name>`
/// after it.
fn id_of_key(prefix: &str, key: &str) -> Option<ObjectId> {
    let mut segments = key.strip_prefix(prefix)?.split('/');
    let cluster = segments.next()?.to_owned();
    let first = segments.next()?.to_owned();
    let (namespace, name) = match (segments.next(), segments.next()) {
        (None, _) => (None, first),
        (Some(name), None) => (Some(first), name.to_owned()),
        (Some(_), Some(_)) => return None,
    };
    Some(ObjectId {
        cluster,
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_object() {
        let prefix = "/registry/rbac.authorization.k8s.io/clusterrolebindings/";
        let id = |key: &str| id_of_key(prefix, key);
        let of = |cluster: &str, namespace: Option<&str>, name: &str| {
            Some(ObjectId {
                cluster: cluster.to_owned(),
                namespace: namespace.map(str::to_owned),
                name: name.to_owned(),
            })
        };
        assert_eq!(id(&format!("{prefix}abc/admin")), of("abc", None, "admin"));
        assert_eq!(
            id(&format!("{prefix}abc/default/reader")),
            of("abc", Some("default"), "reader")
        );
        assert_eq!(id(&format!("{prefix}abc")), None);
        assert_eq!(id(&format!("{prefix}abc/a/b/c")), None);
        assert_eq!(id("/registry/core/configmaps/abc/x"), None);
    }
}
