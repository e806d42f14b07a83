//! The shard's side of APIExportEndpointSlices (upstream's `apiexportendpointsliceurls`
//! controller): a slice lists a shard's apiexport virtual-workspace URL for its export
//! (`<virtualWorkspaceURL>/services/apiexport/<export-cluster>/<export-name>`) while that shard
//! holds an APIBinding of the export, and not otherwise, so a slice is empty before the first
//! binding (kcp #3364). The slice is written by the shard that holds it: this shard's own URL
//! from its own bindings, other shards' URLs from the markers they replicated into the cache
//! (kcp-cache's `replication/markers.rs`, read back into the tenancy index). Other shards' URLs
//! are removed only once their markers were read since this shard started, and the read-back
//! keeps what it last saw while the cache is unreachable, so nothing is wiped then. Slices and
//! exports of logical clusters on other shards are left to those shards.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select;
use kcp_apimachinery::{ApiError, meta};
use kcp_apis::endpoints::{apiexport_url, binds_export};
use kcp_registry::storage::objects::{ChangeType, ListRequest};
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{cluster_of, stored_type};
use crate::TenancyIndex;
use crate::cleanup;
use crate::runner::{self, Controller, Pass, Queue};
use crate::tenancy_index::CopiedKind;

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
            bound: Mutex::default(),
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
    /// Which exports this shard's bindings bind, kept by `follow` from the bindings' watch
    /// before it wakes the slices that depend on it.
    bound: Mutex<BoundExports>,
}

/// An export: its logical cluster and name.
type Export = (String, String);
/// A binding or a slice: its logical cluster and name.
type ObjectKey = (LogicalClusterName, String);

/// The bindings of this shard by the export they bind: each binding's export (one shared
/// allocation per export, however many bindings bind it) and how many bind each export.
#[derive(Default)]
struct BoundExports {
    bindings_of: HashMap<Arc<Export>, usize>,
    export_of: HashMap<ObjectKey, Arc<Export>>,
}

impl BoundExports {
    /// Records what `binding` binds now (`None`: nothing, or it is gone); returns the exports
    /// whose bound-or-not state changed.
    fn set(&mut self, binding: ObjectKey, binds: Option<Export>) -> Vec<Export> {
        let mut flipped = Vec::new();
        let before = self.export_of.get(&binding);
        if before.map(|export| export.as_ref()) == binds.as_ref() {
            return flipped;
        }
        if let Some(old) = self.export_of.remove(&binding)
            && let Some(count) = self.bindings_of.get_mut(&old)
        {
            *count -= 1;
            if *count == 0 {
                self.bindings_of.remove(&old);
                flipped.push(old.as_ref().clone());
            }
        }
        if let Some(new) = binds {
            let shared = match self.bindings_of.get_key_value(&new) {
                Some((shared, _)) => shared.clone(),
                None => {
                    flipped.push(new.clone());
                    Arc::new(new)
                }
            };
            *self.bindings_of.entry(shared.clone()).or_default() += 1;
            self.export_of.insert(binding, shared);
        }
        flipped
    }

    fn is_bound(&self, export: &Export) -> bool {
        self.bindings_of.contains_key(export)
    }
}

/// The export a binding binds, once it bound something (kcp-apis' `binds_export`).
fn export_bound_by(binding: &Value) -> Option<Export> {
    let cluster = binding.pointer("/status/apiExportClusterName")?.as_str()?;
    let name = binding.pointer("/spec/reference/export/name")?.as_str()?;
    binds_export(binding, cluster, name).then(|| (cluster.to_string(), name.to_string()))
}

impl Controller for EndpointSlices {
    type Key = ObjectKey;
    const NAME: &'static str = "apiexportendpointslices";
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    async fn follow(&self, queue: &Queue<Self::Key>) -> Result<(), ApiError> {
        let bindings = self.all(&self.bindings).await?;
        {
            let mut bound = self.bound();
            *bound = BoundExports::default();
            for binding in &bindings.items {
                if let Some(key) = key_of(binding) {
                    bound.set(key, export_bound_by(binding));
                }
            }
        }
        let slices = self.all(&self.slices).await?;
        // Slices by the name of their export (its cluster is resolved when reconciled).
        let mut slices_of: HashMap<String, BTreeSet<ObjectKey>> = HashMap::new();
        for slice in &slices.items {
            if let Some(key) = key_of(slice) {
                slices_of
                    .entry(export_name(slice))
                    .or_default()
                    .insert(key.clone());
                queue.add(key);
            }
        }
        let objects = self.store.objects();
        let slice_prefix = self.store.keys(&self.slices).all_clusters().to_string();
        let binding_prefix = self.store.keys(&self.bindings).all_clusters().to_string();
        let slice_changes = objects
            .watch_current(&slice_prefix, slices.revision + 1)
            .await?;
        let binding_changes = objects
            .watch_current(&binding_prefix, bindings.revision + 1)
            .await?;
        let mut changes = select(
            slice_changes.map(|change| (false, change)),
            binding_changes.map(|change| (true, change)),
        );
        // Other shards' markers of bound exports arrive as copies from the cache.
        let mut copies = self.tenancy.subscribe_copies();
        loop {
            let (is_binding, change) = tokio::select! {
                change = changes.next() => match change {
                    Some(change) => change,
                    None => break,
                },
                copy = copies.recv() => {
                    let Some(cluster) = copy else { break };
                    for key in slices_of.values().flatten().filter(|(c, _)| *c == *cluster) {
                        queue.add(key.clone());
                    }
                    continue;
                }
            };
            let change = change?;
            let Some(key) = key_of(&change.object) else {
                continue;
            };
            let gone = change.kind == ChangeType::Deleted;
            if is_binding {
                let binds = export_bound_by(&change.object).filter(|_| !gone);
                let flipped = self.bound().set(key, binds);
                for (_, name) in flipped {
                    for slice in slices_of.get(&name).into_iter().flatten() {
                        queue.add(slice.clone());
                    }
                }
            } else {
                for keys in slices_of.values_mut() {
                    keys.remove(&key);
                }
                if !gone {
                    slices_of
                        .entry(export_name(&change.object))
                        .or_default()
                        .insert(key.clone());
                }
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
        let export = (export_cluster.to_string(), export_name.to_string());
        let bound_here = self.bound().is_bound(&export);
        let url = apiexport_url(
            &self.virtual_workspace_url,
            export_cluster.as_str(),
            export_name,
        );
        let mut wanted = self.tenancy.bound_export_urls(&export_cluster, export_name);
        if bound_here {
            wanted.push(url.clone());
        }
        let markers_known = self.tenancy.copies_listed(CopiedKind::BoundExports);
        let keep = |endpoint: &str| !markers_known && endpoint != url;
        if with_endpoints(&slice, &wanted, &keep) == slice {
            return Ok(Pass::Done);
        }
        let edit = |object: &mut Value| *object = with_endpoints(object, &wanted, &keep);
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
    fn bound(&self) -> std::sync::MutexGuard<'_, BoundExports> {
        self.bound
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

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

fn key_of(object: &Value) -> Option<ObjectKey> {
    Some((cluster_of(object)?, meta::name(object)?.to_string()))
}

/// The name of the export a slice is for.
fn export_name(slice: &Value) -> String {
    slice
        .pointer("/spec/export/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `slice` with the `wanted` URLs in `status.endpoints`, and of the others only those `keep`
/// accepts (in the order they were, new ones after).
fn with_endpoints(slice: &Value, wanted: &[String], keep: &dyn Fn(&str) -> bool) -> Value {
    let mut slice = slice.clone();
    let before: Vec<Value> = slice
        .pointer("/status/endpoints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let url_of = |e: &Value| e["url"].as_str().unwrap_or_default().to_owned();
    let mut endpoints: Vec<Value> = before
        .iter()
        .filter(|e| {
            let url = url_of(e);
            wanted.contains(&url) || keep(&url)
        })
        .cloned()
        .collect();
    for url in wanted {
        if !endpoints.iter().any(|e| url_of(e) == *url) {
            endpoints.push(json!({"url": url}));
        }
    }
    if endpoints == before {
        return slice;
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
    fn an_export_flips_with_its_first_and_last_binding() {
        let mut bound = BoundExports::default();
        let cluster = |n: &str| LogicalClusterName::parse(n).unwrap();
        let export = ("p".to_string(), "e".to_string());
        let a = (cluster("a"), "b".to_string());
        let b = (cluster("b"), "b".to_string());
        assert_eq!(
            bound.set(a.clone(), Some(export.clone())),
            vec![export.clone()]
        );
        assert!(bound.set(b.clone(), Some(export.clone())).is_empty());
        assert!(bound.set(a.clone(), Some(export.clone())).is_empty());
        assert!(bound.set(a, None).is_empty());
        assert!(bound.is_bound(&export));
        assert_eq!(bound.set(b, None), vec![export.clone()]);
        assert!(!bound.is_bound(&export));
    }

    #[test]
    fn other_shards_endpoints_go_only_once_their_markers_are_known() {
        let other = "https://other/services/apiexport/p/e";
        let slice = json!({"status": {"endpoints": [{"url": other}]}});
        let mine = "https://me/services/apiexport/p/e";
        let unknown = |url: &str| url != mine;
        let known = |_: &str| false;
        let added = with_endpoints(&slice, &[mine.to_owned()], &unknown);
        assert_eq!(
            added["status"]["endpoints"],
            json!([{"url": other}, {"url": mine}])
        );
        assert_eq!(with_endpoints(&added, &[mine.to_owned()], &unknown), added);
        assert_eq!(with_endpoints(&added, &[], &unknown), slice);
        assert_eq!(
            with_endpoints(&added, &[mine.to_owned()], &known)["status"]["endpoints"],
            json!([{"url": mine}])
        );
        let both = [other.to_owned(), mine.to_owned()];
        assert_eq!(with_endpoints(&added, &both, &known), added);
        let empty = json!({"metadata": {"name": "e"}});
        assert_eq!(
            with_endpoints(&empty, &[mine.to_owned()], &known)["status"]["endpoints"],
            json!([{"url": mine}])
        );
    }
}
