//! ClusterRole aggregation, as Kubernetes' clusterrole-aggregation controller does it: a ClusterRole
//! with an `aggregationRule` gets, in its stored `rules`, the rules of every ClusterRole of its
//! logical cluster that its selectors pick.
//!
//! Authorization never waits for this (the policy index aggregates on its own, see
//! [`kcp_rbac::effective_rules`]); the controller is for people and tools that read the role
//! (`kubectl describe clusterrole`, GitOps diffs), so they see what it grants.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_rbac::{PolicyRule, effective_rules, has_aggregation_rule};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::runner::{self, Controller, Pass, Queue};
use kcp_rbac::escalation::RBAC_GROUP;
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::store::{Location, RestStore};

const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Runs until `shutdown`.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let Some(roles) = store
        .registry()
        .builtin_type(RBAC_GROUP, "v1", "clusterroles")
    else {
        return;
    };
    runner::run(Aggregation { store, roles }, shutdown).await;
}

struct Aggregation {
    store: RestStore,
    roles: Arc<ResourceType>,
}

impl Controller for Aggregation {
    type Key = LogicalClusterName;
    const NAME: &'static str = "clusterrole-aggregation";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<LogicalClusterName>) -> Result<(), ApiError> {
        follow(&self.store, &self.roles, queue).await
    }

    async fn reconcile(&self, cluster: &LogicalClusterName) -> Result<Pass, ApiError> {
        aggregate(&self.store, &self.roles, cluster).await
    }
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// Queues every logical cluster with an aggregated role, then every cluster whose ClusterRoles
/// change.
async fn follow(
    store: &RestStore,
    roles: &ResourceType,
    queue: &Queue<LogicalClusterName>,
) -> Result<(), ApiError> {
    let prefix = store.keys(roles).all_clusters().to_string();
    let page = store
        .list(roles, ListRequest::everything(&prefix), &|_| true)
        .await?;
    let aggregating: BTreeSet<LogicalClusterName> = page
        .items
        .iter()
        .filter(|role| has_aggregation_rule(role))
        .filter_map(cluster_of)
        .collect();
    for cluster in aggregating {
        queue.add(cluster);
    }
    let mut changes = store
        .objects()
        .watch_current(&prefix, page.revision + 1)
        .await?;
    while let Some(change) = changes.next().await {
        if let Some(cluster) = cluster_of(&change?.object) {
            queue.add(cluster);
        }
    }
    Err(ApiError::service_unavailable("ClusterRole watch closed"))
}

/// Writes the aggregated rules of a cluster's aggregated roles where they differ.
async fn aggregate(
    store: &RestStore,
    roles: &ResourceType,
    cluster: &LogicalClusterName,
) -> Result<Pass, ApiError> {
    let prefix = store.keys(roles).scope(cluster, None);
    let page = store
        .list(roles, ListRequest::everything(&prefix), &|_| true)
        .await?;
    if !page.items.iter().any(has_aggregation_rule) {
        return Ok(Pass::Done);
    }
    // Listed in key order, which is name order, as the aggregation expects.
    let refs: Vec<&Value> = page.items.iter().collect();
    let at = Location {
        cluster,
        namespace: None,
    };
    for (role, rules) in page.items.iter().zip(effective_rules(&refs)) {
        if !has_aggregation_rule(role) {
            continue;
        }
        let wanted = Value::from(rules.iter().map(PolicyRule::to_json).collect::<Vec<_>>());
        if role.get("rules") == Some(&wanted) {
            continue;
        }
        let name = meta::name(role).unwrap_or_default().to_string();
        let wanted = Arc::new(wanted);
        let set_rules = move |current: &Value| {
            let mut updated = current.clone();
            updated["rules"] = wanted.as_ref().clone();
            Ok(updated)
        };
        match store
            .update(roles, at, &name, &set_rules, None, false)
            .await
        {
            Ok(_) => tracing::debug!(%cluster, role = %name, "aggregated ClusterRole rules"),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Pass::Done)
}
