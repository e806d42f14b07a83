//! The controllers of APIs as a service (kcp-apis holds their rules): [`exports`] gives every
//! APIExport its identity and default endpoint slice, [`bindings`] decides what APIBindings bind
//! and [`bound_types`] serves it; [`default_bindings`] is the `system:apibindings` initializer;
//! [`endpoint_slices`] lists this shard's virtual-workspace URL on the endpoint slices of exports
//! bound here; [`claim_labels`] labels the objects accepted permission claims grant.

pub mod bindings;
mod bound_types;
pub mod claim_labels;
pub mod default_bindings;
pub mod endpoint_slices;
pub mod exports;

pub(crate) use bound_types::serve_existing;

use std::sync::Arc;

use kcp_apimachinery::{ApiError, meta};
use kcp_registry::storage::objects::CLUSTER_ANNOTATION;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::Value;

use crate::TenancyIndex;
use crate::tenancy_index::CopiedKind;

/// An apis.kcp.io type in the version it is stored in.
fn stored_type(store: &RestStore, plural: &str) -> Result<Arc<ResourceType>, ApiError> {
    let version = match plural {
        kcp_apis::API_EXPORTS | kcp_apis::API_BINDINGS => kcp_apis::STORAGE_VERSION,
        _ => "v1alpha1",
    };
    store
        .registry()
        .builtin_type(kcp_apis::GROUP, version, plural)
        .ok_or_else(|| ApiError::internal_error(&format!("{plural} are not registered")))
}

/// A built-in core type (`secrets`, `namespaces`).
fn core_type(store: &RestStore, plural: &str) -> Result<Arc<ResourceType>, ApiError> {
    store
        .registry()
        .builtin_type("", "v1", plural)
        .ok_or_else(|| ApiError::internal_error(&format!("{plural} are not registered")))
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// The object `name` of `rt` in `cluster`: this shard's own, else (an APIExport or an
/// APIResourceSchema of a cluster on another shard) its copy read back from the cache.
async fn local_or_copy(
    store: &RestStore,
    tenancy: &TenancyIndex,
    rt: &ResourceType,
    cluster: &LogicalClusterName,
    name: &str,
) -> Result<Option<Value>, ApiError> {
    let at = Location {
        cluster,
        namespace: None,
    };
    match store.get(rt, at, name).await {
        Ok(stored) => Ok(Some(stored.object)),
        Err(e) if e.code == 404 => {
            let kind = match rt.plural.as_str() {
                kcp_apis::API_EXPORTS => CopiedKind::ApiExports,
                kcp_apis::API_RESOURCE_SCHEMAS => CopiedKind::ApiResourceSchemas,
                kcp_apis::API_CONVERSIONS => CopiedKind::ApiConversions,
                _ => return Ok(None),
            };
            Ok(tenancy
                .copy_of(kind, cluster, name)
                .map(|copy| copy.as_ref().clone()))
        }
        Err(e) => Err(e),
    }
}
