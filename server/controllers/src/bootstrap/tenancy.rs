//! What the root logical cluster holds from the start: its LogicalCluster (type `root:root`,
//! Ready), the built-in WorkspaceTypes and root's RBAC (everyone authenticated may enter root and
//! use the built-in types). Created when missing, so restarts and several replicas are harmless;
//! existing objects are left as they are (an administrator may have changed them).

use kcp_apimachinery::{ApiError, meta};
use kcp_tenancy::bootstrap::{Options, root_objects};
use serde_json::{Value, json};

use kcp_registry::LogicalClusterName;
use kcp_registry::store::{Location, RestStore};

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

pub(crate) async fn ensure_root(store: &RestStore, options: &Options) -> Result<(), ApiError> {
    let root = LogicalClusterName::root();
    let at = Location {
        cluster: &root,
        namespace: None,
    };
    for object in root_objects(options) {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let Some((group, plural)) = resource_of(&kind) else {
            continue;
        };
        let Some(rt) = store
            .registry()
            .builtin_type(group, "v1alpha1", plural)
            .or_else(|| store.registry().builtin_type(group, "v1", plural))
        else {
            return Err(ApiError::internal_error(&format!(
                "{plural}.{group} is not registered"
            )));
        };
        let name = meta::name(&object).unwrap_or_default().to_string();
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
