//! What the root logical cluster holds from the start: its LogicalCluster (type `root:root`,
//! Ready), the built-in WorkspaceTypes and root's RBAC (everyone authenticated may enter root and
//! use the built-in types). Created when missing, so restarts and several replicas are harmless;
//! existing objects are left as they are (an administrator may have changed them). Only the root
//! shard holds them; on the others, what an earlier release bootstrapped there (every shard used
//! to hold a `root` of its own) is removed at start, so that root's real objects, read back from
//! the cache, are the only ones and the shard's `Shard` counts no root.

use std::sync::Arc;

use kcp_apimachinery::{ApiError, meta};
use kcp_registry::ResourceType;
use kcp_tenancy::bootstrap::{Options, root_objects};
use serde_json::{Value, json};

use kcp_registry::LogicalClusterName;
use kcp_registry::store::{DeleteOptions, Location, RestStore};

/// Which resource stores an object of `kind`.
fn resource_of(kind: &str) -> Option<(&'static str, &'static str)> {
    match kind {
        "LogicalCluster" => Some(("core.kcp.io", "logicalclusters")),
        "WorkspaceType" => Some(("tenancy.kcp.io", "workspacetypes")),
        "ClusterRole" => Some(("rbac.authorization.k8s.io", "clusterroles")),
        "ClusterRoleBinding" => Some(("rbac.authorization.k8s.io", "clusterrolebindings")),
        _ => None,
    }
}

/// The resource type of one of root's objects and its name; `None` for a kind root does not hold.
fn stored_as(
    store: &RestStore,
    object: &Value,
) -> Result<Option<(Arc<ResourceType>, String)>, ApiError> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let Some((group, plural)) = resource_of(kind) else {
        return Ok(None);
    };
    let rt = store
        .registry()
        .builtin_type(group, "v1alpha1", plural)
        .or_else(|| store.registry().builtin_type(group, "v1", plural))
        .ok_or_else(|| ApiError::internal_error(&format!("{plural}.{group} is not registered")))?;
    Ok(Some((
        rt,
        meta::name(object).unwrap_or_default().to_string(),
    )))
}

pub(crate) async fn ensure_root(store: &RestStore, options: &Options) -> Result<(), ApiError> {
    let root = LogicalClusterName::root();
    let at = Location {
        cluster: &root,
        namespace: None,
    };
    for object in root_objects(options) {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let Some((rt, name)) = stored_as(store, &object)? else {
            continue;
        };
        let wanted_phase = object.pointer("/status/phase").cloned();
        match store.create(&rt, at, object, false).await {
            Ok(_) => tracing::info!(%kind, %name, "created root object"),
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        // Status is not taken on create; the root LogicalCluster is Ready from the start.
        if let Some(phase) = wanted_phase {
            let current = store.get(&rt, at, &name).await?.object;
            if current.pointer("/status/phase") != Some(&phase) {
                let set_phase = |current: &Value| {
                    let mut updated = current.clone();
                    updated["status"] = json!({"phase": phase.clone()});
                    Ok(updated)
                };
                store
                    .update(&rt, at, &name, &set_phase, Some("status"), false)
                    .await?;
            }
        }
    }
    Ok(())
}

/// On a shard that does not hold root: deletes what an earlier release's bootstrap created in
/// its `root` (its LogicalCluster last), if anything.
pub(crate) async fn forget_root(store: &RestStore) -> Result<(), ApiError> {
    let root = LogicalClusterName::root();
    let at = Location {
        cluster: &root,
        namespace: None,
    };
    let every = Options {
        workspace_types_battery: true,
        ..Options::default()
    };
    for object in root_objects(&every).into_iter().rev() {
        let Some((rt, name)) = stored_as(store, &object)? else {
            continue;
        };
        match store
            .delete(&rt, at, &name, &DeleteOptions::default())
            .await
        {
            Ok(_) => tracing::info!(
                kind = %rt.kind,
                %name,
                "removed a root object an earlier release bootstrapped on this shard: root lives on the root shard"
            ),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
