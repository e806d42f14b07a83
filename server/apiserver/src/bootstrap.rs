//! What exists before the first request: the `root` logical cluster with its `default` and
//! `kube-system` namespaces. Idempotent, so restarts (and several replicas) are harmless.

use kcp_apimachinery::ApiError;
use serde_json::json;

use crate::registry::store::{Location, RestStore};
use crate::request::LogicalClusterName;

pub const ROOT_NAMESPACES: [&str; 2] = ["default", "kube-system"];

pub async fn ensure_root(store: &RestStore) -> Result<(), ApiError> {
    let root = LogicalClusterName::root();
    let Some(namespaces) = store.registry().builtin_type("", "v1", "namespaces") else {
        return Err(ApiError::internal_error("namespaces are not registered"));
    };
    for name in ROOT_NAMESPACES {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match store
            .create(
                &namespaces,
                Location {
                    cluster: &root,
                    namespace: None,
                },
                namespace,
                false,
            )
            .await
        {
            Ok(_) => tracing::info!(namespace = name, "created root namespace"),
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
