//! The shard's side of APIExportEndpointSlices (upstream's `apiexportendpointsliceurls`
//! controller): a slice lists this shard's apiexport virtual-workspace URL for its export
//! (`<virtualWorkspaceURL>/services/apiexport/<export-cluster>/<export-name>`) while this shard
//! holds an APIBinding of the export, and not otherwise, so a slice is empty before the first
//! binding (kcp #3364). Only this shard's own URL is ever added or removed, from this shard's own
//! bindings, so nothing is wiped while the cache server or another shard is unreachable.
//! Slices and exports of logical clusters on other shards are left to those shards.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select;
use kcp_apimachinery::{ApiError, meta};
use kcp_apis::endpoints::{apiexport_url, binds_export};
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{cluster_of, stored_type};
use crate::TenancyIndex;
use crate::cleanup;
use crate::runner::{self, Controller, Pass, Queue};

/// Runs until `shutdown`; `virtual_workspace_url` is where this shard serves its virtual
/// workspaces (`Shard.spec.virtualWorkspaceURL`, which defaults to its base URL).
pub async fn run(
    store: RestStore,
    tenancy: Arc<TenancyIndex>,
    virtual_workspace_url: String,
    shutdown: CancellationToken,
) {
    let types = (
        stored_type(&store, kcp_apis::API_EXPORT_ENDPOINT_SLICES),
        stored_type(&store, kcp_apis::API_BINDINGS),
    );
    let (Ok(slices), Ok(bindings)) = types else {
        tracing::error!("the APIExportEndpointSlice controller cannot start: types missing");
        return;
    };
    runner::run(
        EndpointSlices {
            store,
            tenancy,
            virtual_workspace_url,
            slices,
            bindings,
        },
        shutdown,
    )
    .await;
}

struct EndpointSlices {
    store: RestStore,
    tenancy: Arc<TenancyIndex>,
    virtual_workspace_url: String,
    slices: Arc<ResourceType>,
    bindings: Arc<ResourceType>,
}

impl Controller for EndpointSlices {
    type Key = (LogicalClusterName, String);
    const NAME: &'static str = "apiexportendpointslices";
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    async fn follow(&self, queue: &Queue<Self::Key>) -> Result<(), ApiError> {
        let slices_prefix = self.store.keys(&self.slices).all_clusters().to_string();
        let bindings_prefix = self.store.keys(&self.bindings).all_clusters().to_string();
        let page = self.all(&self.slices).await?;
        for slice in &page.items {
            if let Some(key) = key_of(slice) {
                queue.add(key);
            }
        }
        let objects = self.store.objects();
        let slice_changes = objects
            .watch_current(&slices_prefix, page.revision + 1)
            .await?;
        let binding_changes = objects
            .watch_current(&bindings_prefix, page.revision + 1)
            .await?;
        let mut changes = select(
            slice_changes.map(|change| (false, change)),
            binding_changes.map(|change| (true, change)),
        );
        while let Some((is_binding, change)) = changes.next().await {
            let object = change?.object;
            if is_binding {
                // A binding can add or remove this shard's URL on every slice of its export.
                let export = object
                    .pointer("/spec/reference/export/name")
                    .and_then(Value::as_str);
                for slice in self.all(&self.slices).await?.items {
                    if slice.pointer("/spec/export/name").and_then(Value::as_str) == export
                        && let Some(key) = key_of(&slice)
                    {
                        queue.add(key);
                    }
                }
            } else if let Some(key) = key_of(&object) {
                queue.add(key);
            }
        }
        Err(ApiError::service_unavailable(
            "APIExportEndpointSlice watch closed",
        ))
    }

    async fn reconcile(&self, (cluster, name): &Self::Key) -> Result<Pass, ApiError> {
        let at = Location {
            cluster,
            namespace: None,
        };
        let slice = match self.store.get(&self.slices, at, name).await {
            Ok(stored) => stored.object,
            Err(e) if e.code == 404 => return Ok(Pass::Done),
            Err(e) => return Err(e),
        };
        let path = slice
            .pointer("/spec/export/path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let export_cluster = if path.is_empty() {
            cluster.clone()
        } else {
            match self.tenancy.resolve(path) {
                Ok(export_cluster) => export_cluster,
                // An export this shard does not know: its shard's slices are its own.
                Err(_) => return Ok(Pass::Done),
            }
        };
        let export_name = slice
            .pointer("/spec/export/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let bound_here = self
            .all(&self.bindings)
            .await?
            .items
            .iter()
            .any(|b| binds_export(b, export_cluster.as_str(), export_name));
        let url = apiexport_url(
            &self.virtual_workspace_url,
            export_cluster.as_str(),
            export_name,
        );
        if with_endpoint(&slice, &url, bound_here) == slice {
            return Ok(Pass::Done);
        }
        let edit = |object: &mut Value| *object = with_endpoint(object, &url, bound_here);
        cleanup::edit_unless_gone(
            &self.store,
            &self.slices,
            cluster,
            name,
            Some("status"),
            &edit,
        )
        .await?;
        Ok(Pass::Done)
    }
}

impl EndpointSlices {
    /// Every object of `rt` in every logical cluster of this shard.
    async fn all(
        &self,
        rt: &ResourceType,
    ) -> Result<kcp_registry::storage::objects::ListPage, ApiError> {
        let prefix = self.store.keys(rt).all_clusters().to_string();
        self.store
            .list(rt, ListRequest::everything(&prefix), &|_| true)
            .await
    }
}

fn key_of(slice: &Value) -> Option<(LogicalClusterName, String)> {
    Some((cluster_of(slice)?, meta::name(slice)?.to_string()))
}

/// `slice` with `url` in `status.endpoints` (`present`) or without it; other shards' endpoints
/// stay as they are.
fn with_endpoint(slice: &Value, url: &str, present: bool) -> Value {
    let mut slice = slice.clone();
    let mut endpoints: Vec<Value> = slice
        .pointer("/status/endpoints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has = endpoints.iter().any(|e| e["url"] == url);
    match (present, has) {
        (true, false) => endpoints.push(json!({"url": url})),
        (false, true) => endpoints.retain(|e| e["url"] != url),
        _ => return slice,
    }
    if !slice["status"].is_object() {
        slice["status"] = json!({});
    }
    slice["status"]["endpoints"] = Value::Array(endpoints);
    slice
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_shards_endpoint_is_added_or_removed() {
        let other = json!({"url": "https://other/services/apiexport/p/e"});
        let slice = json!({"status": {"endpoints": [other.clone()]}});
        let mine = "https://me/services/apiexport/p/e";
        let added = with_endpoint(&slice, mine, true);
        assert_eq!(
            added["status"]["endpoints"],
            json!([other.clone(), {"url": mine}])
        );
        assert_eq!(with_endpoint(&added, mine, true), added);
        assert_eq!(with_endpoint(&added, mine, false), slice);
        assert_eq!(with_endpoint(&slice, mine, false), slice);
        let empty = json!({"metadata": {"name": "e"}});
        assert_eq!(
            with_endpoint(&empty, mine, true)["status"]["endpoints"],
            json!([{"url": mine}])
        );
    }
}
