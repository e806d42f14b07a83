//! A workspace path whose Workspace is on this shard but whose logical cluster lives on another:
//! upstream kcp's local proxy answers `429 Too Many Requests` with `Retry-After: 1` and the
//! plain text `Not found on this shard` (Go's `http.Error`), so that a client retries through
//! the front-proxy, which sends it to the right shard. This server never forwards.
//!
//! Looked at only when a path misses the tenancy index (paths that resolve here cost nothing):
//! the parent path must resolve on this shard, and its logical cluster must hold the Workspace
//! named by the last segment, scheduled (`spec.cluster` set) to another shard
//! (`core.kcp.io/shard`). Deeper paths below such a workspace stay 404, as upstream's index walk
//! stops there; so does a workspace of this shard whose logical cluster is being deleted.

use http::{HeaderValue, Response, header};
use kcp_apimachinery::meta;
use kcp_controllers::TenancyIndex;
use kcp_registry::LogicalClusterName;
use kcp_registry::store::{Location, RestStore};
use kcp_tenancy::{Path, workspace};
use serde_json::Value;

use super::response::{self, Body};

/// Upstream's body, as Go's `http.Error` writes it.
const BODY: &str = "Not found on this shard\n";

/// The 429 for `path` when its Workspace is here and its logical cluster elsewhere.
pub(crate) async fn on_another_shard(
    store: &RestStore,
    tenancy: &TenancyIndex,
    this_shard: &str,
    path: &str,
) -> Option<Response<Body>> {
    let path = Path::parse(path).ok()?;
    let parent = tenancy.resolve(path.parent()?.as_str()).ok()?;
    let workspaces =
        store
            .registry()
            .builtin_type(workspace::GROUP, "v1alpha1", workspace::RESOURCE)?;
    let at = Location {
        cluster: &parent,
        namespace: None,
    };
    let found = store.get(&workspaces, at, path.base()).await.ok()?.object;
    let cluster = found
        .pointer("/spec/cluster")
        .and_then(Value::as_str)
        .and_then(LogicalClusterName::parse)?;
    let shard = meta::annotations(&found).remove(workspace::SHARD_ANNOTATION)?;
    if shard == this_shard || tenancy.logical_cluster(&cluster).is_some() {
        return None;
    }
    let mut answer = response::text(429, BODY);
    let headers = answer.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Some(answer)
}
