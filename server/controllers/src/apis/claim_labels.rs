//! The permission claim labeler (upstream's `permissionclaimlabel` controllers): every object of a
//! claimed resource in a consumer's logical cluster carries the claim label of each export whose
//! accepted claim selects it (kcp-apis' `claims`), and no other claim label; the apiexport
//! virtual workspace lists and watches claimed objects by that label. The binding's status records
//! `appliedPermissionClaims` and the condition `PermissionClaimsApplied` (bindings that make
//! claims only: a binding without claims gets no extra status write).
//!
//! A key is one claimed resource in one logical cluster. It is reconciled when a binding of that
//! cluster changes its claims (accepted, rejected, selector changed, removed: the previous claims
//! count too) and when an object of that resource changes there, so labels follow selector and
//! object changes at once. Claims on resources bound from another export (a non-empty identity
//! hash) are not labeled: `PermissionClaimsApplied` says so.

use std::collections::{BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{SelectAll, Stream};
use kcp_apimachinery::{ApiError, meta, time};
use kcp_apis::claims::{self, AcceptedClaim, ClaimLabel, ClaimedResource};
use kcp_apis::conditions::{Condition, Severity};
use kcp_registry::storage::objects::{Change, ListRequest};
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{cluster_of, stored_type};
use crate::cleanup;
use crate::runner::{self, Controller, Pass, Queue};

/// `status.conditions[]` type: every accepted claim is applied.
pub const PERMISSION_CLAIMS_APPLIED: &str = "PermissionClaimsApplied";

/// Runs until `shutdown`.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let bindings = match stored_type(&store, kcp_apis::API_BINDINGS) {
        Ok(bindings) => bindings,
        Err(error) => {
            tracing::error!(%error, "the permission claim labeler cannot start");
            return;
        }
    };
    runner::run(ClaimLabels { store, bindings }, shutdown).await;
}

struct ClaimLabels {
    store: RestStore,
    bindings: Arc<ResourceType>,
}

type Changes =
    Pin<Box<dyn Stream<Item = (Option<ClaimedResource>, Result<Change, ApiError>)> + Send>>;

impl Controller for ClaimLabels {
    /// A claimed resource in a cluster, or (`None`) only the claim status of its bindings.
    type Key = (LogicalClusterName, Option<ClaimedResource>);
    const NAME: &'static str = "permissionclaimlabels";
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    async fn follow(&self, queue: &Queue<Self::Key>) -> Result<(), ApiError> {
        let prefix = self.store.keys(&self.bindings).all_clusters().to_string();
        let page = self
            .store
            .list(&self.bindings, ListRequest::everything(&prefix), &|_| true)
            .await?;
        // Which clusters claim each resource (objects changing elsewhere are no concern).
        let mut claimed: HashMap<ClaimedResource, BTreeSet<LogicalClusterName>> = HashMap::new();
        let mut changes: SelectAll<Changes> = SelectAll::new();
        let bindings = self
            .store
            .objects()
            .watch_current(&prefix, page.revision + 1)
            .await?;
        changes.push(Box::pin(bindings.map(|change| (None, change))));
        for binding in &page.items {
            self.claims_changed(
                binding,
                None,
                &mut claimed,
                &mut changes,
                page.revision,
                queue,
            )
            .await?;
        }
        while let Some((resource, change)) = changes.next().await {
            let change = change?;
            match resource {
                None => {
                    self.claims_changed(
                        &change.object,
                        change.previous.as_ref(),
                        &mut claimed,
                        &mut changes,
                        change.revision,
                        queue,
                    )
                    .await?
                }
                Some(resource) => {
                    if let Some(cluster) = cluster_of(&change.object)
                        && claimed.get(&resource).is_some_and(|c| c.contains(&cluster))
                    {
                        queue.add((cluster, Some(resource)));
                    }
                }
            }
        }
        Err(ApiError::service_unavailable(
            "permission claim watch closed",
        ))
    }

    async fn reconcile(&self, (cluster, resource): &Self::Key) -> Result<Pass, ApiError> {
        let bindings = self.bindings_in(cluster).await?;
        if let Some(resource) = resource
            && let Some(rt) = claimed_type(&self.store, resource)
        {
            let labels = claim_labels(&bindings, resource);
            self.relabel(&rt, cluster, &labels).await?;
        }
        for binding in bindings.iter().filter(|b| has_claims(b)) {
            self.record_applied(cluster, binding).await?;
        }
        Ok(Pass::Done)
    }
}

impl ClaimLabels {
    /// Queues the resources a binding claims now or claimed before, and watches objects of the
    /// ones not watched yet (from `revision` on; the queued pass labels what exists).
    async fn claims_changed(
        &self,
        binding: &Value,
        previous: Option<&Value>,
        claimed: &mut HashMap<ClaimedResource, BTreeSet<LogicalClusterName>>,
        changes: &mut SelectAll<Changes>,
        revision: i64,
        queue: &Queue<(LogicalClusterName, Option<ClaimedResource>)>,
    ) -> Result<(), ApiError> {
        let Some(cluster) = cluster_of(binding) else {
            return Ok(());
        };
        // A binding that never had claims needs no claim status (nothing to write per binding).
        if ![Some(binding), previous]
            .into_iter()
            .flatten()
            .any(has_claims)
        {
            return Ok(());
        }
        queue.add((cluster.clone(), None));
        let resources: BTreeSet<ClaimedResource> = [Some(binding), previous]
            .into_iter()
            .flatten()
            .flat_map(claimed_resources)
            .collect();
        for resource in resources {
            if !claimed.contains_key(&resource)
                && let Some(rt) = claimed_type(&self.store, &resource)
            {
                let prefix = self.store.keys(&rt).all_clusters().to_string();
                let objects = self
                    .store
                    .objects()
                    .watch_current(&prefix, revision + 1)
                    .await?;
                let tag = resource.clone();
                changes.push(Box::pin(
                    objects.map(move |change| (Some(tag.clone()), change)),
                ));
            }
            claimed
                .entry(resource.clone())
                .or_default()
                .insert(cluster.clone());
            queue.add((cluster.clone(), Some(resource)));
        }
        Ok(())
    }

    async fn bindings_in(&self, cluster: &LogicalClusterName) -> Result<Vec<Value>, ApiError> {
        let prefix = self.store.keys(&self.bindings).scope(cluster, None);
        Ok(self
            .store
            .list(&self.bindings, ListRequest::everything(&prefix), &|_| true)
            .await?
            .items)
    }

    /// Brings the claim labels of every object of `rt` in `cluster` to what `labels` want.
    async fn relabel(
        &self,
        rt: &ResourceType,
        cluster: &LogicalClusterName,
        labels: &[ClaimLabel],
    ) -> Result<(), ApiError> {
        let prefix = self.store.keys(rt).scope(cluster, None);
        let objects = self
            .store
            .list(rt, ListRequest::everything(&prefix), &|_| true)
            .await?
            .items;
        for object in objects {
            if claims::relabeled(&object, labels).is_none() {
                continue;
            }
            let name = meta::name(&object).unwrap_or_default().to_string();
            let namespace = meta::namespace(&object).map(str::to_string);
            let update = |current: &Value| {
                let mut new = claims::relabeled(current, labels).unwrap_or_else(|| current.clone());
                meta::metadata_mut(&mut new).remove("resourceVersion");
                Ok(new)
            };
            let at = Location {
                cluster,
                namespace: namespace.as_deref(),
            };
            match self.store.update(rt, at, &name, &update, None, false).await {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `status.appliedPermissionClaims` (the accepted claims on resources this shard labels) and
    /// `PermissionClaimsApplied`.
    async fn record_applied(
        &self,
        cluster: &LogicalClusterName,
        binding: &Value,
    ) -> Result<(), ApiError> {
        let accepted = claims::accepted_claims(binding);
        let (applied, unapplied): (Vec<&AcceptedClaim>, Vec<&AcceptedClaim>) = accepted
            .iter()
            .partition(|c| claimed_type(&self.store, &c.resource).is_some());
        let applied: Vec<Value> = applied.iter().map(|c| applied_claim(&c.scoped)).collect();
        let condition = match unapplied.as_slice() {
            [] => Condition::holds(PERMISSION_CLAIMS_APPLIED),
            missing => Condition::fails(
                PERMISSION_CLAIMS_APPLIED,
                kcp_apis::conditions::INTERNAL_ERROR,
                Severity::Error,
                format!(
                    "Permission claims have not been fully applied: {}",
                    missing
                        .iter()
                        .map(|c| format!(
                            "no resource {}.{} (identity {:?}) to label",
                            c.resource.resource, c.resource.group, c.resource.identity_hash
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        };
        let recorded = binding.pointer("/status/appliedPermissionClaims");
        let mut with_condition = binding.clone();
        let condition_changed = condition.set_on(&mut with_condition, &time::now_rfc3339());
        if accepted.is_empty() && recorded.is_none() && !condition_changed {
            return Ok(());
        }
        if recorded == Some(&json!(applied)) && !condition_changed {
            return Ok(());
        }
        let now = time::now_rfc3339();
        let edit = |object: &mut Value| {
            if !object["status"].is_object() {
                object["status"] = json!({});
            }
            object["status"]["appliedPermissionClaims"] = json!(applied);
            condition.set_on(object, &now);
        };
        let name = meta::name(binding).unwrap_or_default();
        cleanup::edit_unless_gone(
            &self.store,
            &self.bindings,
            cluster,
            name,
            Some("status"),
            &edit,
        )
        .await
    }
}

/// Whether a binding makes claims (accepted or rejected) or has claim status to keep current.
fn has_claims(binding: &Value) -> bool {
    let non_empty = |pointer: &str| {
        binding
            .pointer(pointer)
            .and_then(Value::as_array)
            .is_some_and(|list| !list.is_empty())
    };
    non_empty("/spec/permissionClaims")
        || non_empty("/status/appliedPermissionClaims")
        || kcp_apis::conditions::is_true(binding, PERMISSION_CLAIMS_APPLIED)
}

/// An accepted claim as `status.appliedPermissionClaims` records it (without `state`).
fn applied_claim(scoped: &Value) -> Value {
    let mut claim = scoped.clone();
    if let Some(fields) = claim.as_object_mut() {
        fields.remove("state");
    }
    claim
}

/// The resources a binding's accepted claims and its applied claims name.
fn claimed_resources(binding: &Value) -> Vec<ClaimedResource> {
    claims::accepted_claims(binding)
        .into_iter()
        .map(|c| c.resource)
        .chain(claims::applied_claims(binding))
        .collect()
}

/// The claim labels the bindings of one cluster want on objects of `resource`.
fn claim_labels(bindings: &[Value], resource: &ClaimedResource) -> Vec<ClaimLabel> {
    bindings
        .iter()
        .filter(|b| meta::deletion_timestamp(b).is_none())
        .flat_map(|binding| {
            let export_cluster = binding
                .pointer("/status/apiExportClusterName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let export_name = binding
                .pointer("/spec/reference/export/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let key = claims::label_key(&export_cluster, &export_name);
            claims::accepted_claims(binding)
                .into_iter()
                .filter(|c| &c.resource == resource && !export_cluster.is_empty())
                .map(move |c| ClaimLabel {
                    key: key.clone(),
                    value: claims::label_value(&c.resource),
                    selector: c.selector,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The built-in type a claim names (its preferred version); claims with an identity hash name
/// resources bound from another export, which this labeler does not serve.
fn claimed_type(store: &RestStore, resource: &ClaimedResource) -> Option<Arc<ResourceType>> {
    if !resource.identity_hash.is_empty() {
        return None;
    }
    store
        .registry()
        .builtin()
        .types()
        .iter()
        .find(|t| t.group == resource.group && t.plural == resource.resource)
        .cloned()
}
