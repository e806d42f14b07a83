//! The total object count limit of a logical cluster, as upstream kcp's
//! `core.kcp.io/LogicalClusterObjectCountLimit` admission plugin: a create in a logical cluster
//! holding as many objects (of all types together) as its limit allows is refused with 403.
//!
//! The limit is `kcp start --logical-cluster-total-object-limit` for every cluster but `root` and
//! `system:` ones, or the annotation [`MAX_OBJECTS_ANNOTATION`] on the cluster's LogicalCluster
//! (any cluster; a value that is not a positive number turns the limit off there). Only creates
//! are limited, and only once the LogicalCluster is `Ready`; LogicalClusters, events and the
//! `workspace-admin` ClusterRoleBinding (what workspace initialization and every controller must
//! always be able to write) are neither limited nor counted. A LogicalCluster that cannot be read
//! leaves the create admitted. Counts come from [`ObjectCounts`].

use std::sync::Arc;

use kcp_apimachinery::ApiError;
use kcp_apimachinery::gofmt::quote;
use kcp_registry::admission::{Operation, Write};
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::Value;

use crate::object_count::ObjectCounts;

/// The annotation of a LogicalCluster that sets its limit (only privileged users may change it).
pub const MAX_OBJECTS_ANNOTATION: &str = "core.kcp.io/max-total-objects";

const LOGICAL_CLUSTER_GROUP: &str = "core.kcp.io";
const LOGICAL_CLUSTER_VERSION: &str = "v1alpha1";
const LOGICAL_CLUSTERS: &str = "logicalclusters";
const LOGICAL_CLUSTER_NAME: &str = "cluster";

/// Whether objects of `resource` in `group` named `name` are outside the limit: never refused and
/// never counted. `group` is the API group (`""` for core, which is also what storage keys spell
/// `core`); events of both APIs share the core storage.
pub fn is_exempt(group: &str, resource: &str, name: &str) -> bool {
    match (group, resource) {
        ("" | "core" | "events.k8s.io", "events") => true,
        (LOGICAL_CLUSTER_GROUP, LOGICAL_CLUSTERS) => true,
        ("rbac.authorization.k8s.io", "clusterrolebindings") => name == "workspace-admin",
        _ => false,
    }
}

/// The limit in force for creates in `cluster`, whose LogicalCluster is `logical_cluster`, with
/// `default` from the flag (`0`: none); `None` when nothing is limited.
pub fn limit_for(
    cluster: &LogicalClusterName,
    logical_cluster: &Value,
    default: u64,
) -> Option<u64> {
    let ready = logical_cluster
        .pointer("/status/phase")
        .and_then(Value::as_str)
        == Some("Ready");
    if !ready {
        return None;
    }
    let annotation = logical_cluster
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(MAX_OBJECTS_ANNOTATION))
        .and_then(Value::as_str);
    let limit = match annotation {
        Some(value) => value.trim().parse::<u64>().unwrap_or(0),
        None if is_exempt_from_default(cluster) => 0,
        None => default,
    };
    (limit > 0).then_some(limit)
}

fn is_exempt_from_default(cluster: &LogicalClusterName) -> bool {
    *cluster == LogicalClusterName::root() || cluster.as_str().starts_with("system:")
}

/// The refusal of a create of `name` (empty with `generateName`) at `count` of `limit` objects.
pub fn refusal(write: &Write<'_>, count: u64, limit: u64) -> ApiError {
    ApiError::forbidden(
        &write.rt.group,
        &write.rt.plural,
        write.name,
        &format!(
            "logical cluster {} has reached its total object count limit ({count}/{limit} objects); delete objects to free up capacity",
            quote(write.cluster.as_str())
        ),
    )
}

/// Admits one write against the limit of its cluster, counting the creates and deletes it lets
/// through (dry runs excepted). Costs one flag check while no cluster has a limit.
pub async fn admit(
    counts: &ObjectCounts,
    store: &RestStore,
    write: &Write<'_>,
) -> Result<(), ApiError> {
    if !counts.is_active()
        || write.subresource.is_some()
        || is_exempt(&write.rt.group, &write.rt.plural, write.name)
    {
        return Ok(());
    }
    match write.operation {
        Operation::Update => Ok(()),
        Operation::Delete => {
            if !write.dry_run {
                counts.removed(write.cluster);
            }
            Ok(())
        }
        Operation::Create => {
            let limit = logical_cluster(store, write.cluster)
                .await
                .and_then(|lc| limit_for(write.cluster, &lc, counts.default_limit()));
            let admitted = match (limit, write.dry_run) {
                (None, true) => Ok(()),
                (None, false) => {
                    counts.added(write.cluster);
                    Ok(())
                }
                (Some(limit), true) => counts.check(write.cluster, limit),
                (Some(limit), false) => counts.reserve(write.cluster, limit),
            };
            admitted.map_err(|full| refusal(write, full.count, full.limit))
        }
    }
}

/// The LogicalCluster type, as the store serves it.
pub(crate) fn logical_cluster_type(store: &RestStore) -> Option<Arc<ResourceType>> {
    store.registry().builtin_type(
        LOGICAL_CLUSTER_GROUP,
        LOGICAL_CLUSTER_VERSION,
        LOGICAL_CLUSTERS,
    )
}

/// The LogicalCluster of `cluster`; `None` (admit) when it cannot be read.
async fn logical_cluster(store: &RestStore, cluster: &LogicalClusterName) -> Option<Value> {
    let rt = logical_cluster_type(store)?;
    let at = Location {
        cluster,
        namespace: None,
    };
    match store.get(&rt, at, LOGICAL_CLUSTER_NAME).await {
        Ok(stored) => Some(stored.object),
        Err(error) => {
            if error.code != 404 {
                tracing::warn!(%cluster, %error, "LogicalCluster unreadable; object count limit not enforced");
            }
            None
        }
    }
}

#[cfg(test)]
mod tests;
