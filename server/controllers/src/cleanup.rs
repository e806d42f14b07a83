//! Writes the cleanup controllers share: deleting every object of a type in one logical cluster
//! (a CRD or an APIBinding going away takes its objects with it, as upstream's finalizers do),
//! and edits of one object that a concurrent deletion may have made moot (a 404 is not an error).

use kcp_apimachinery::{ApiError, meta};
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{DeleteOptions, Deleted, Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::Value;

/// Deletes every object of `rt` in `cluster`; returns how many are still there (held by their
/// finalizers).
pub(crate) async fn delete_all(
    store: &RestStore,
    rt: &ResourceType,
    cluster: &LogicalClusterName,
) -> Result<usize, ApiError> {
    let prefix = store.keys(rt).scope(cluster, None);
    let page = store
        .list(rt, ListRequest::everything(&prefix), &|_| true)
        .await?;
    let mut remaining = 0;
    for object in page.items {
        let at = Location {
            cluster,
            namespace: meta::namespace(&object),
        };
        let name = meta::name(&object).unwrap_or_default();
        match store.delete(rt, at, name, &DeleteOptions::default()).await {
            Ok(Deleted::Gone(_)) => {}
            Ok(Deleted::Pending(_)) => remaining += 1,
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(remaining)
}

/// Applies `edit` to the stored cluster-scoped object `name` (through `subresource`), unless it
/// is gone; the edit runs against each state the store retries on.
pub(crate) async fn edit_unless_gone(
    store: &RestStore,
    rt: &ResourceType,
    cluster: &LogicalClusterName,
    name: &str,
    subresource: Option<&str>,
    edit: &(dyn Fn(&mut Value) + Send + Sync),
) -> Result<(), ApiError> {
    let update = |current: &Value| {
        let mut new = current.clone();
        edit(&mut new);
        meta::metadata_mut(&mut new).remove("resourceVersion");
        Ok(new)
    };
    let at = Location {
        cluster,
        namespace: None,
    };
    match store
        .update(rt, at, name, &update, subresource, false)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes `finalizer` from the cluster-scoped object `name`, unless it is gone.
pub(crate) async fn remove_finalizer(
    store: &RestStore,
    rt: &ResourceType,
    cluster: &LogicalClusterName,
    name: &str,
    finalizer: &str,
) -> Result<(), ApiError> {
    let drop_finalizer = |object: &mut Value| {
        let kept: Vec<String> = meta::finalizers(object)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        meta::set_finalizers(object, kept);
    };
    edit_unless_gone(store, rt, cluster, name, None, &drop_finalizer).await
}
