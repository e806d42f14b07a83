//! What exists before the first request: on the root shard the `root` logical cluster with its
//! `default` and `kube-system` namespaces, and on every shard the bootstrap RBAC policy in
//! `system:admin` (the default ClusterRoles and bindings, which apply in every logical cluster).
//! As upstream (`pkg/server/server.go`: "the root ws is only present on the root shard"), a
//! non-root shard bootstraps no `root`: it reads root's WorkspaceTypes and replicated RBAC back
//! from the cache server like any other shard's objects. Idempotent, so restarts (and
//! several replicas) are harmless; a default role that changed in a new release is brought up to
//! date unless its `rbac.authorization.kubernetes.io/autoupdate` annotation is `"false"`, as
//! kube-apiserver's RBAC bootstrap does. [`before_serving`] runs the whole sequence, root's
//! tenancy objects ([`tenancy`]), the tenancy index and the CRDs and bound resources already
//! stored included.

mod tenancy;

use kcp_apimachinery::{ApiError, meta};
use serde_json::{Value, json};

use crate::TenancyIndex;

use kcp_rbac::bootstrap::BOOTSTRAP_CLUSTER;
use kcp_rbac::escalation::RBAC_GROUP;
use kcp_registry::LogicalClusterName;
use kcp_registry::store::{Location, RestStore};

pub(crate) const ROOT_NAMESPACES: [&str; 2] = ["default", "kube-system"];

const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// Everything that must exist or be known before the first request, in order: root and its
/// namespaces (root shard only), the bootstrap RBAC policy, root's tenancy objects (root shard
/// only; the others remove those an earlier release bootstrapped there), the tenancy index, and the CRDs and APIBindings stored by earlier runs (served at once,
/// not after the controllers' first pass).
pub async fn before_serving(
    store: &RestStore,
    tenancy_index: &TenancyIndex,
    options: &kcp_tenancy::bootstrap::Options,
) -> Result<(), ApiError> {
    if options.holds_root {
        ensure_root(store).await?;
    }
    ensure_bootstrap_policy(store).await?;
    if options.holds_root {
        tenancy::ensure_root(store, options).await?;
    } else {
        tenancy::forget_root(store).await?;
    }
    let [logical_clusters, workspace_types] = TenancyIndex::types(store)?;
    tenancy_index
        .load(store, [&logical_clusters, &workspace_types])
        .await?;
    crate::crd::serve_existing(store).await?;
    crate::apis::serve_existing(store).await
}

pub(crate) async fn ensure_root(store: &RestStore) -> Result<(), ApiError> {
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

/// Stores the bootstrap RBAC policy in `system:admin`.
pub(crate) async fn ensure_bootstrap_policy(store: &RestStore) -> Result<(), ApiError> {
    let cluster = LogicalClusterName::parse(BOOTSTRAP_CLUSTER)
        .ok_or_else(|| ApiError::internal_error("invalid bootstrap cluster name"))?;
    let at = Location {
        cluster: &cluster,
        namespace: None,
    };
    for object in kcp_rbac::bootstrap::system_admin_policy() {
        let plural = match object["kind"].as_str() {
            Some("ClusterRole") => "clusterroles",
            _ => "clusterrolebindings",
        };
        let Some(rt) = store.registry().builtin_type(RBAC_GROUP, "v1", plural) else {
            return Err(ApiError::internal_error("RBAC types are not registered"));
        };
        let name = meta::name(&object).unwrap_or_default().to_string();
        match store.create(&rt, at, object.clone(), false).await {
            Ok(_) => continue,
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        let current = store.get(&rt, at, &name).await?.object;
        let opted_out = meta::annotations(&current)
            .get(AUTOUPDATE_ANNOTATION)
            .is_some_and(|v| v == "false");
        if opted_out || same_policy(&current, &object) {
            continue;
        }
        let wanted = object.clone();
        let refresh = move |current: &Value| {
            let mut updated = current.clone();
            for field in ["rules", "aggregationRule", "roleRef", "subjects"] {
                match wanted.get(field) {
                    Some(value) => updated[field] = value.clone(),
                    None => {
                        if let Some(map) = updated.as_object_mut() {
                            map.remove(field);
                        }
                    }
                }
            }
            Ok(updated)
        };
        store.update(&rt, at, &name, &refresh, None, false).await?;
        tracing::info!(kind = plural, %name, "updated bootstrap RBAC object");
    }
    Ok(())
}

fn same_policy(current: &Value, wanted: &Value) -> bool {
    ["rules", "aggregationRule", "roleRef", "subjects"]
        .iter()
        .all(|field| current.get(*field) == wanted.get(*field))
}
