//! Applies the Deployment and StatefulSet plans to the host API: creates and deletes pods and
//! claims, writes status, and removes pods whose workload is gone (the host API has no garbage
//! collector).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::Value;

use crate::context::Ctx;
use crate::controller::{self, Expectations, owner_reference};
use crate::statefulset::{self, Action, Revisions};
use crate::{deployment, names};

/// Pods of this node that are still stopping, by owner uid and by `namespace/name`.
#[derive(Debug, Default)]
pub struct Stopping {
    pub by_owner: HashMap<String, usize>,
    pub keys: HashSet<String>,
}

pub struct Workloads {
    pub expectations: Expectations,
    pub revisions: Revisions,
}

fn status_of<T: serde::Serialize>(status: &Option<T>) -> Value {
    status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null)
}

impl Workloads {
    pub fn new(revisions: Revisions) -> Workloads {
        Workloads {
            expectations: Expectations::default(),
            revisions,
        }
    }

    /// One pass over every Deployment and StatefulSet.
    pub async fn sync(&mut self, ctx: &Arc<Ctx>, stopping: &Stopping) {
        self.expectations.observe(&ctx.cache);
        for deployment in ctx.cache.deployments.state() {
            if deployment.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if let Err(error) = self.sync_deployment(ctx, &deployment, stopping).await {
                tracing::warn!(deployment = ?deployment.metadata.name, %error, "syncing deployment");
            }
        }
        let mut live_revisions = HashSet::new();
        for sts in ctx.cache.statefulsets.state() {
            if sts.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let namespace = sts.metadata.namespace.clone().unwrap_or_default();
            let params = statefulset::params(&sts);
            live_revisions.insert(format!("{namespace}/{}", params.update_revision));
            live_revisions.insert(format!("{namespace}/{}", params.current_revision));
            if let Err(error) = self.sync_statefulset(ctx, &sts, stopping).await {
                tracing::warn!(statefulset = ?sts.metadata.name, %error, "syncing statefulset");
            }
        }
        self.revisions.retain(&live_revisions);
        if let Err(error) = self.collect_orphans(ctx).await {
            tracing::warn!(%error, "removing pods of deleted workloads");
        }
    }

    async fn sync_deployment(
        &mut self,
        ctx: &Arc<Ctx>,
        d: &Deployment,
        stopping: &Stopping,
    ) -> Result<(), kube::Error> {
        let name = d.metadata.name.clone().unwrap_or_default();
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let Some(spec) = &d.spec else { return Ok(()) };
        if !selects_template(&spec.selector, &spec.template) {
            tracing::warn!(deployment = %format!("{namespace}/{name}"), "spec.selector does not match the template labels; nothing is done");
            return Ok(());
        }
        let now = jiff::Timestamp::now();
        let hash = deployment::template_hash(d);
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let owned = self.expectations.owned_pods(&ctx.cache, &uid);
        let infos = deployment::infos(&owned, min_ready, now);
        let plan = deployment::plan(
            deployment::replicas(d),
            deployment::strategy(d),
            spec.paused.unwrap_or(false),
            &hash,
            &infos,
            stopping.by_owner.get(&uid).copied().unwrap_or(0),
        );
        for pod_name in &plan.delete {
            self.delete_owned(ctx, &owned, pod_name).await?;
        }
        for _ in 0..plan.create {
            let pod = controller::pod_from_template(
                &spec.template,
                &namespace,
                &names::deployment_pod_name(&name, &hash),
                owner_reference("apps/v1", "Deployment", &name, &uid),
                deployment::pod_labels(&hash),
                &ctx.settings.node_name,
            );
            self.expectations.create_pod(&ctx.client, pod).await?;
        }
        // Like the real controller, whose status comes from ReplicaSet status, the status of this
        // pass describes the pods as they were before its own changes (the next pass, woken by
        // them, catches up): so a new rollout first shows `NewReplicaSetCreated`.
        let status = deployment::status(d, &hash, deployment::counts(&hash, &infos), now);
        if !controller::status_matches(&status_of(&d.status), &without_label_selector(&status)) {
            let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
            controller::patch_status(&api, &name, status).await?;
        }
        Ok(())
    }

    async fn sync_statefulset(
        &mut self,
        ctx: &Arc<Ctx>,
        sts: &StatefulSet,
        stopping: &Stopping,
    ) -> Result<(), kube::Error> {
        let name = sts.metadata.name.clone().unwrap_or_default();
        let namespace = sts.metadata.namespace.clone().unwrap_or_default();
        let uid = sts.metadata.uid.clone().unwrap_or_default();
        let Some(spec) = &sts.spec else { return Ok(()) };
        if !selects_template(&spec.selector, &spec.template) {
            tracing::warn!(statefulset = %format!("{namespace}/{name}"), "spec.selector does not match the template labels; nothing is done");
            return Ok(());
        }
        let now = jiff::Timestamp::now();
        let params = statefulset::params(sts);
        self.revisions
            .remember(&namespace, &params.update_revision, &spec.template);
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let owned = self.expectations.owned_pods(&ctx.cache, &uid);
        let infos = statefulset::infos(&name, &owned, min_ready, now);
        let stopping_ordinals: Vec<i32> = stopping
            .keys
            .iter()
            .filter_map(|key| key.strip_prefix(&format!("{namespace}/")))
            .filter_map(|pod| names::ordinal_of(&name, pod))
            .collect();
        let actions = statefulset::plan(&params, &infos, &stopping_ordinals);
        for action in actions {
            match action {
                Action::Create { ordinal, revision } => {
                    self.ensure_claims(ctx, sts, ordinal).await?;
                    let template = self
                        .revisions
                        .get(&namespace, &revision)
                        .cloned()
                        .unwrap_or_else(|| spec.template.clone());
                    let (template, labels) =
                        statefulset::pod_template(sts, &template, ordinal, &revision);
                    let pod = controller::pod_from_template(
                        &template,
                        &namespace,
                        &names::stateful_pod_name(&name, ordinal),
                        owner_reference("apps/v1", "StatefulSet", &name, &uid),
                        labels,
                        &ctx.settings.node_name,
                    );
                    self.expectations.create_pod(&ctx.client, pod).await?;
                }
                Action::Delete { ordinal } => {
                    let pod_name = names::stateful_pod_name(&name, ordinal);
                    self.delete_owned(ctx, &owned, &pod_name).await?;
                }
            }
        }
        if statefulset::delete_claims_when_scaled(sts) {
            self.delete_scaled_claims(ctx, sts, &owned, stopping)
                .await?;
        }
        let owned = self.expectations.owned_pods(&ctx.cache, &uid);
        let infos = statefulset::infos(&name, &owned, min_ready, now);
        let status = statefulset::status(sts, &params, &infos);
        if !controller::status_matches(&status_of(&sts.status), &without_label_selector(&status)) {
            let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &namespace);
            controller::patch_status(&api, &name, status).await?;
        }
        Ok(())
    }

    /// Deletes the pod called `pod_name` among `owned`, if it is there.
    async fn delete_owned(
        &mut self,
        ctx: &Arc<Ctx>,
        owned: &[Arc<Pod>],
        pod_name: &str,
    ) -> Result<(), kube::Error> {
        if let Some(pod) = owned
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pod_name))
        {
            self.expectations.delete_pod(&ctx.client, pod).await?;
        }
        Ok(())
    }

    /// Creates the claims of `ordinal` that do not exist yet.
    async fn ensure_claims(
        &self,
        ctx: &Arc<Ctx>,
        sts: &StatefulSet,
        ordinal: i32,
    ) -> Result<(), kube::Error> {
        let namespace = sts.metadata.namespace.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
        for (claim_name, claim) in statefulset::claims(sts, ordinal) {
            let known = ctx
                .cache
                .claims
                .get(&kube::runtime::reflector::ObjectRef::new(&claim_name).within(&namespace))
                .is_some();
            if known {
                continue;
            }
            let claim: PersistentVolumeClaim =
                serde_json::from_value(claim).map_err(kube::Error::SerdeError)?;
            match api.create(&PostParams::default(), &claim).await {
                Ok(_) => {
                    tracing::info!(claim = %format!("{namespace}/{claim_name}"), "created claim")
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// `whenScaled: Delete`: claims of ordinals at or above `replicas` whose pod is gone.
    async fn delete_scaled_claims(
        &self,
        ctx: &Arc<Ctx>,
        sts: &StatefulSet,
        owned: &[Arc<Pod>],
        stopping: &Stopping,
    ) -> Result<(), kube::Error> {
        let name = sts.metadata.name.clone().unwrap_or_default();
        let namespace = sts.metadata.namespace.clone().unwrap_or_default();
        let replicas = statefulset::replicas(sts);
        let templates: Vec<String> = sts
            .spec
            .iter()
            .flat_map(|s| s.volume_claim_templates.iter().flatten())
            .filter_map(|t| t.metadata.name.clone())
            .collect();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
        for claim in ctx.cache.claims.state() {
            if claim.metadata.namespace.as_deref() != Some(namespace.as_str()) {
                continue;
            }
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            let Some(ordinal) = templates.iter().find_map(|t| {
                claim_name
                    .strip_prefix(&format!("{t}-"))
                    .and_then(|rest| names::ordinal_of(&name, rest))
            }) else {
                continue;
            };
            let pod_name = names::stateful_pod_name(&name, ordinal);
            let pod_exists = owned
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(pod_name.as_str()))
                || stopping.keys.contains(&format!("{namespace}/{pod_name}"));
            if ordinal >= replicas && !pod_exists {
                match api.delete(&claim_name, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!(claim = %format!("{namespace}/{claim_name}"), "deleted claim of a removed ordinal")
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(())
    }

    /// Pods (and claims with `whenDeleted: Delete`) whose Deployment or StatefulSet is gone.
    async fn collect_orphans(&mut self, ctx: &Arc<Ctx>) -> Result<(), kube::Error> {
        let live: HashSet<String> = ctx
            .cache
            .deployments
            .state()
            .iter()
            .filter_map(|d| d.metadata.uid.clone())
            .chain(
                ctx.cache
                    .statefulsets
                    .state()
                    .iter()
                    .filter_map(|s| s.metadata.uid.clone()),
            )
            .collect();
        let workload_kinds = ["Deployment", "StatefulSet"];
        for pod in ctx.cache.pods.state() {
            let orphaned = pod.metadata.owner_references.iter().flatten().any(|o| {
                o.controller == Some(true)
                    && o.api_version == "apps/v1"
                    && workload_kinds.contains(&o.kind.as_str())
                    && !live.contains(&o.uid)
            });
            if orphaned {
                self.expectations.delete_pod(&ctx.client, &pod).await?;
            }
        }
        for claim in ctx.cache.claims.state() {
            let orphaned = claim.metadata.owner_references.iter().flatten().any(|o| {
                o.kind == "StatefulSet" && o.api_version == "apps/v1" && !live.contains(&o.uid)
            });
            if orphaned {
                let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                let api: Api<PersistentVolumeClaim> =
                    Api::namespaced(ctx.client.clone(), &namespace);
                let name = claim.metadata.name.clone().unwrap_or_default();
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!(claim = %format!("{namespace}/{name}"), "deleted claim of a deleted StatefulSet")
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(())
    }
}

/// Kubernetes refuses a workload whose selector does not select its own template (the CRDs do
/// not), and a controller would otherwise make pods it cannot find again.
fn selects_template(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> bool {
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty());
    !empty && crate::selector::matches(selector, &labels)
}

/// The status without `labelSelector`: k8s-openapi's typed status (the cache) has no such field,
/// so it is compared without it. It is written with every status write, and the first write of
/// every workload happens when the object has no status yet.
fn without_label_selector(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(map) = status.as_object_mut() {
        map.remove("labelSelector");
    }
    status
}
