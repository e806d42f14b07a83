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
//! object changes at once. A claim on a resource bound from another export (a non-empty identity
//! hash) is labeled like a built-in one in the clusters that bind that export: its objects are the
//! type bound under that identity, and a cluster binding it after accepting the claim is labeled
//! then; until the cluster serves it, `PermissionClaimsApplied` says so.

use std::collections::{BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{SelectAll, Stream};
use kcp_apimachinery::{ApiError, meta, time};
use kcp_apis::binding::BoundResource;
use kcp_apis::claims::{self, AcceptedClaim, ClaimLabel, ClaimedResource};
use kcp_apis::conditions::{Condition, Severity};
use kcp_registry::storage::KeyLayout;
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

/// What the labeler follows: which clusters claim each resource (objects changing elsewhere are
/// no concern), the resources whose objects it watches, and the watches.
#[derive(Default)]
struct Followed {
    claimed: HashMap<ClaimedResource, BTreeSet<LogicalClusterName>>,
    watched: BTreeSet<ClaimedResource>,
    changes: SelectAll<Changes>,
}

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
        let mut followed = Followed::default();
        let bindings = self
            .store
            .objects()
            .watch_current(&prefix, page.revision + 1)
            .await?;
        followed
            .changes
            .push(Box::pin(bindings.map(|change| (None, change))));
        for binding in &page.items {
            self.binding_changed(binding, None, &mut followed, page.revision, queue)
                .await?;
        }
        while let Some((resource, change)) = followed.changes.next().await {
            let change = change?;
            match resource {
                None => {
                    let previous = change.previous.as_ref();
                    self.binding_changed(
                        &change.object,
                        previous,
                        &mut followed,
                        change.revision,
                        queue,
                    )
                    .await?;
                }
                Some(resource) => {
                    if let Some(cluster) = cluster_of(&change.object)
                        && followed
                            .claimed
                            .get(&resource)
                            .is_some_and(|c| c.contains(&cluster))
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
            && let Some(rt) = claimed_type(&self.store, cluster, resource)
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
    /// Queues the resources a binding claims now or claimed before, and those of its cluster's
    /// claims a change of what it binds makes served (or no longer served), and watches objects
    /// of the ones not watched yet (from `revision` on; the queued pass labels what exists).
    async fn binding_changed(
        &self,
        binding: &Value,
        previous: Option<&Value>,
        followed: &mut Followed,
        revision: i64,
        queue: &Queue<(LogicalClusterName, Option<ClaimedResource>)>,
    ) -> Result<(), ApiError> {
        let Some(cluster) = cluster_of(binding) else {
            return Ok(());
        };
        let mut touched = claims_of(binding, previous);
        for resource in &touched {
            followed
                .claimed
                .entry(resource.clone())
                .or_default()
                .insert(cluster.clone());
        }
        touched.extend(served_claims(
            binding,
            previous,
            &cluster,
            &followed.claimed,
        ));
        if touched.is_empty() && !has_claims(binding) {
            return Ok(());
        }
        queue.add((cluster.clone(), None));
        for resource in touched {
            self.watch(&resource, &cluster, followed, revision).await?;
            queue.add((cluster.clone(), Some(resource)));
        }
        Ok(())
    }

    /// Watches the objects of `resource` in every cluster (from `revision` on), once, as soon as
    /// `cluster` serves it.
    async fn watch(
        &self,
        resource: &ClaimedResource,
        cluster: &LogicalClusterName,
        followed: &mut Followed,
        revision: i64,
    ) -> Result<(), ApiError> {
        if followed.watched.contains(resource) {
            return Ok(());
        }
        let Some(rt) = claimed_type(&self.store, cluster, resource) else {
            return Ok(());
        };
        let prefix = self.store.keys(&rt).all_clusters().to_string();
        let objects = self
            .store
            .objects()
            .watch_current(&prefix, revision + 1)
            .await?;
        let tag = resource.clone();
        followed.changes.push(Box::pin(
            objects.map(move |change| (Some(tag.clone()), change)),
        ));
        followed.watched.insert(resource.clone());
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
            .partition(|c| claimed_type(&self.store, cluster, &c.resource).is_some());
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

/// The resources a binding claims now or claimed before (none when it never made claims: such a
/// binding needs no claim status, nothing to write per binding).
fn claims_of(binding: &Value, previous: Option<&Value>) -> BTreeSet<ClaimedResource> {
    let both = [Some(binding), previous].into_iter().flatten();
    if !both.clone().any(has_claims) {
        return BTreeSet::new();
    }
    both.flat_map(claimed_resources).collect()
}

/// The claims of `cluster` on resources bound from an export whose identity the binding starts
/// or stops binding (so the cluster serves them now, or no longer).
fn served_claims(
    binding: &Value,
    previous: Option<&Value>,
    cluster: &LogicalClusterName,
    claimed: &HashMap<ClaimedResource, BTreeSet<LogicalClusterName>>,
) -> BTreeSet<ClaimedResource> {
    let identities = |binding: Option<&Value>| -> BTreeSet<String> {
        binding
            .map(BoundResource::of_status)
            .into_iter()
            .flatten()
            .map(|bound| bound.identity_hash)
            .collect()
    };
    let (now, before) = (identities(Some(binding)), identities(previous));
    if now == before {
        return BTreeSet::new();
    }
    claimed
        .iter()
        .filter(|(resource, clusters)| {
            clusters.contains(cluster)
                && !resource.identity_hash.is_empty()
                && (now.contains(&resource.identity_hash)
                    || before.contains(&resource.identity_hash))
        })
        .map(|(resource, _)| resource.clone())
        .collect()
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

/// The type a claim names in `cluster`: a built-in one (its preferred version), or, for a claim
/// with an identity hash, the type the cluster serves bound from the export of that identity.
fn claimed_type(
    store: &RestStore,
    cluster: &LogicalClusterName,
    resource: &ClaimedResource,
) -> Option<Arc<ResourceType>> {
    let layout = |t: &ResourceType| match &t.layout {
        KeyLayout::BuiltIn => resource.identity_hash.is_empty(),
        KeyLayout::Bound(identity) => **identity == *resource.identity_hash,
        KeyLayout::CustomResource => false,
    };
    store
        .registry()
        .for_cluster(cluster)
        .types()
        .iter()
        .find(|t| t.group == resource.group && t.plural == resource.resource && layout(t))
        .cloned()
}
