//! The StatefulSet controller: pods `<sts>-<ordinal>` with stable names, addresses and claims,
//! created and removed in order (OrderedReady) or all at once (Parallel), updated from the highest
//! ordinal down (RollingUpdate with partition) or only when deleted (OnDelete).
//!
//! Revisions are `<sts>-<hash of the template>`, as ControllerRevision names look; the agent keeps
//! the template of each revision (in memory and in the state directory) so a pod below the
//! partition that is deleted comes back at its old revision. Each volumeClaimTemplate gives the
//! claim `<template>-<sts>-<ordinal>`, created before its pod and removed after scale-down or
//! deletion only when `persistentVolumeClaimRetentionPolicy` says Delete.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume};
use serde_json::{Value, json};

use crate::controller::{self, omit_zero};
use crate::names;
use crate::podstatus;
use crate::selector;

pub const REVISION_LABEL: &str = "controller-revision-hash";
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// A pod of the StatefulSet as planning sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsPod {
    pub ordinal: i32,
    pub revision: String,
    pub ready: bool,
    pub available: bool,
}

/// The parts of the spec and status that planning needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub replicas: i32,
    pub parallel: bool,
    /// RollingUpdate's partition; None for OnDelete.
    pub partition: Option<i32>,
    pub update_revision: String,
    pub current_revision: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Create { ordinal: i32, revision: String },
    Delete { ordinal: i32 },
}

/// The revision a (re)created pod at `ordinal` gets.
fn revision_for(params: &Params, ordinal: i32) -> String {
    match params.partition {
        Some(partition) if ordinal < partition => params.current_revision.clone(),
        _ => params.update_revision.clone(),
    }
}

/// One pass of the controller. `stopping` lists ordinals whose previous pod still runs on the
/// node (its successor must wait).
pub fn plan(params: &Params, pods: &[StsPod], stopping: &[i32]) -> Vec<Action> {
    let by_ordinal: BTreeMap<i32, &StsPod> = pods.iter().map(|p| (p.ordinal, p)).collect();
    let monotonic = !params.parallel;
    let mut actions = Vec::new();
    for ordinal in 0..params.replicas {
        match by_ordinal.get(&ordinal) {
            None => {
                if stopping.contains(&ordinal) {
                    if monotonic {
                        return actions;
                    }
                    continue;
                }
                actions.push(Action::Create {
                    ordinal,
                    revision: revision_for(params, ordinal),
                });
                if monotonic {
                    return actions;
                }
            }
            Some(pod) if !pod.ready && monotonic => return actions,
            Some(_) => {}
        }
    }
    let mut condemned: Vec<&StsPod> = pods
        .iter()
        .filter(|p| p.ordinal >= params.replicas)
        .collect();
    condemned.sort_by_key(|p| std::cmp::Reverse(p.ordinal));
    let all_ready = (0..params.replicas).all(|o| by_ordinal.get(&o).is_some_and(|p| p.ready));
    for pod in condemned {
        if monotonic && !all_ready {
            return actions;
        }
        actions.push(Action::Delete {
            ordinal: pod.ordinal,
        });
        if monotonic {
            return actions;
        }
    }
    if !actions.is_empty() {
        return actions;
    }
    let Some(partition) = params.partition else {
        return actions;
    };
    for ordinal in (partition.max(0)..params.replicas).rev() {
        let Some(pod) = by_ordinal.get(&ordinal) else {
            return actions;
        };
        if pod.revision != params.update_revision {
            actions.push(Action::Delete { ordinal });
            return actions;
        }
        if !pod.ready {
            return actions;
        }
    }
    actions
}

pub fn replicas(sts: &StatefulSet) -> i32 {
    sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `<sts>-<hash>` of the current template.
pub fn update_revision(sts: &StatefulSet) -> String {
    let template = sts.spec.as_ref().map(|s| &s.template);
    let collisions = sts
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    format!(
        "{}-{}",
        sts.metadata.name.as_deref().unwrap_or_default(),
        names::template_hash(&template, collisions)
    )
}

pub fn params(sts: &StatefulSet) -> Params {
    let spec = sts.spec.clone().unwrap_or_default();
    let update = update_revision(sts);
    let current = sts
        .status
        .as_ref()
        .and_then(|s| s.current_revision.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| update.clone());
    let strategy = spec.update_strategy.unwrap_or_default();
    let partition = match strategy.type_.as_deref() {
        Some("OnDelete") => None,
        _ => Some(
            strategy
                .rolling_update
                .and_then(|r| r.partition)
                .unwrap_or(0),
        ),
    };
    Params {
        replicas: replicas(sts),
        parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
        partition,
        update_revision: update,
        current_revision: current,
    }
}

/// A pod of the StatefulSet for planning, or None when its name has no ordinal of `sts`.
pub fn pod_info(
    sts_name: &str,
    pod: &Pod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<StsPod> {
    let ordinal = names::ordinal_of(sts_name, pod.metadata.name.as_deref()?)?;
    let (ready, available) = podstatus::ready_and_available(pod, min_ready_seconds, now);
    Some(StsPod {
        ordinal,
        revision: controller::label(&pod.metadata, REVISION_LABEL),
        ready,
        available,
    })
}

/// The pods of the StatefulSet `sts_name` among `pods`, for planning.
pub fn infos(
    sts_name: &str,
    pods: &[Arc<Pod>],
    min_ready_seconds: i32,
    now: Timestamp,
) -> Vec<StsPod> {
    pods.iter()
        .filter_map(|p| pod_info(sts_name, p, min_ready_seconds, now))
        .collect()
}

/// The status the real controller would write.
pub fn status(sts: &StatefulSet, params: &Params, pods: &[StsPod]) -> Value {
    let count = |f: &dyn Fn(&StsPod) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(0)
    };
    let replicas = count(&|_| true);
    let ready = count(&|p| p.ready);
    let available = count(&|p| p.available);
    let updated = count(&|p| p.revision == params.update_revision);
    let mut current_revision = params.current_revision.clone();
    let mut current = count(&|p| p.revision == params.current_revision);
    if params.partition.is_some() && updated == replicas && ready == replicas {
        current_revision = params.update_revision.clone();
        current = updated;
    }
    let selector = sts
        .spec
        .as_ref()
        .map(|s| selector::to_string(&s.selector))
        .unwrap_or_default();
    json!({
        "observedGeneration": sts.metadata.generation.unwrap_or(0),
        "replicas": replicas,
        "readyReplicas": omit_zero(ready),
        "currentReplicas": omit_zero(current),
        "updatedReplicas": omit_zero(updated),
        "availableReplicas": available,
        "currentRevision": current_revision,
        "updateRevision": params.update_revision,
        "collisionCount": 0,
        "labelSelector": selector,
    })
}

/// The pod at `ordinal` from `template` (the template of its revision): stable hostname and
/// subdomain, the StatefulSet labels, one volume per claim template.
pub fn pod_template(
    sts: &StatefulSet,
    template: &PodTemplateSpec,
    ordinal: i32,
    revision: &str,
) -> (PodTemplateSpec, BTreeMap<String, String>) {
    let name = sts.metadata.name.clone().unwrap_or_default();
    let pod_name = names::stateful_pod_name(&name, ordinal);
    let mut template = template.clone();
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(pod_name.clone());
    if let Some(service) = sts
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty())
    {
        spec.subdomain = Some(service);
    }
    let mut volumes = spec.volumes.clone().unwrap_or_default();
    for claim in sts
        .spec
        .iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
    {
        let template_name = claim.metadata.name.clone().unwrap_or_default();
        volumes.retain(|v| v.name != template_name);
        volumes.push(Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: names::claim_name(&template_name, &name, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    spec.volumes = Some(volumes);
    template.spec = Some(spec);
    let labels = BTreeMap::from([
        (REVISION_LABEL.to_owned(), revision.to_owned()),
        (POD_NAME_LABEL.to_owned(), pod_name),
        (POD_INDEX_LABEL.to_owned(), ordinal.to_string()),
    ]);
    (template, labels)
}

/// The claims of the pod at `ordinal`: (claim name, claim object as JSON).
pub fn claims(sts: &StatefulSet, ordinal: i32) -> Vec<(String, Value)> {
    let name = sts.metadata.name.clone().unwrap_or_default();
    let namespace = sts.metadata.namespace.clone().unwrap_or_default();
    let spec = sts.spec.clone().unwrap_or_default();
    let delete_with_set = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let template_name = template.metadata.name.clone().unwrap_or_default();
            let claim_name = names::claim_name(&template_name, &name, ordinal);
            let mut labels = template.metadata.labels.clone().unwrap_or_default();
            labels.extend(spec.selector.match_labels.clone().unwrap_or_default());
            let mut metadata = json!({
                "name": claim_name,
                "namespace": namespace,
                "labels": labels,
            });
            if let Some(annotations) = &template.metadata.annotations {
                metadata["annotations"] = json!(annotations);
            }
            if delete_with_set {
                metadata["ownerReferences"] = json!([{
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": name,
                    "uid": sts.metadata.uid,
                    "blockOwnerDeletion": true,
                }]);
            }
            let claim = json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": metadata,
                "spec": template.spec,
            });
            (claim_name, claim)
        })
        .collect()
}

/// Whether claims of ordinals at or above `replicas` go when the set scales down.
pub fn delete_claims_when_scaled(sts: &StatefulSet) -> bool {
    sts.spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref())
        .and_then(|p| p.when_scaled.as_deref())
        == Some("Delete")
}

/// The templates of known revisions, kept across agent restarts.
pub struct Revisions {
    path: PathBuf,
    templates: HashMap<String, PodTemplateSpec>,
}

impl Revisions {
    pub fn load(path: PathBuf) -> Revisions {
        let templates = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Revisions { path, templates }
    }

    /// Remembers the template of `namespace/revision`.
    pub fn remember(&mut self, namespace: &str, revision: &str, template: &PodTemplateSpec) {
        let key = format!("{namespace}/{revision}");
        if self.templates.contains_key(&key) {
            return;
        }
        self.templates.insert(key, template.clone());
        self.save();
    }

    pub fn get(&self, namespace: &str, revision: &str) -> Option<&PodTemplateSpec> {
        self.templates.get(&format!("{namespace}/{revision}"))
    }

    /// Keeps only the revisions in `live` (`namespace/revision`).
    pub fn retain(&mut self, live: &std::collections::HashSet<String>) {
        let before = self.templates.len();
        self.templates.retain(|key, _| live.contains(key));
        if self.templates.len() != before {
            self.save();
        }
    }

    fn save(&self) {
        match serde_json::to_vec(&self.templates) {
            Ok(bytes) => {
                if let Err(error) = std::fs::write(&self.path, bytes) {
                    tracing::warn!(path = %self.path.display(), %error, "saving StatefulSet revisions");
                }
            }
            Err(error) => tracing::warn!(%error, "encoding StatefulSet revisions"),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{
        RollingUpdateStatefulSetStrategy, StatefulSetSpec, StatefulSetUpdateStrategy,
    };
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    use super::*;

    fn params(replicas: i32, parallel: bool, partition: Option<i32>) -> Params {
        Params {
            replicas,
            parallel,
            partition,
            update_revision: "s-new".into(),
            current_revision: "s-old".into(),
        }
    }

    fn pod(ordinal: i32, revision: &str, ready: bool) -> StsPod {
        StsPod {
            ordinal,
            revision: revision.into(),
            ready,
            available: ready,
        }
    }

    fn create(ordinal: i32, revision: &str) -> Action {
        Action::Create {
            ordinal,
            revision: revision.into(),
        }
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time() {
        let p = params(3, false, Some(0));
        assert_eq!(plan(&p, &[], &[]), vec![create(0, "s-new")]);
        assert_eq!(plan(&p, &[pod(0, "s-new", false)], &[]), vec![]);
        assert_eq!(
            plan(&p, &[pod(0, "s-new", true)], &[]),
            vec![create(1, "s-new")]
        );
        // A predecessor still stopping on the node blocks its successor.
        assert_eq!(plan(&p, &[], &[0]), vec![]);
    }

    #[test]
    fn parallel_creates_and_deletes_at_once() {
        let p = params(3, true, Some(0));
        assert_eq!(
            plan(&p, &[pod(1, "s-new", false)], &[]),
            vec![create(0, "s-new"), create(2, "s-new")]
        );
        let p = params(1, true, Some(0));
        assert_eq!(
            plan(
                &p,
                &[
                    pod(0, "s-new", true),
                    pod(1, "s-new", false),
                    pod(2, "s-new", true)
                ],
                &[]
            ),
            vec![Action::Delete { ordinal: 2 }, Action::Delete { ordinal: 1 }]
        );
    }

    #[test]
    fn ordered_scale_down_highest_first_when_healthy() {
        let p = params(1, false, Some(0));
        let pods = [
            pod(0, "s-new", true),
            pod(1, "s-new", true),
            pod(2, "s-new", true),
        ];
        assert_eq!(plan(&p, &pods, &[]), vec![Action::Delete { ordinal: 2 }]);
        let unhealthy = [pod(0, "s-new", false), pod(1, "s-new", true)];
        assert_eq!(plan(&p, &unhealthy, &[]), vec![]);
    }

    #[test]
    fn rolling_update_from_the_top_with_partition() {
        let p = params(3, false, Some(0));
        let pods = [
            pod(0, "s-old", true),
            pod(1, "s-old", true),
            pod(2, "s-old", true),
        ];
        assert_eq!(plan(&p, &pods, &[]), vec![Action::Delete { ordinal: 2 }]);
        // The replacement comes at the update revision; the next waits until it is ready.
        assert_eq!(plan(&p, &pods[..2], &[]), vec![create(2, "s-new")]);
        let pods = [
            pod(0, "s-old", true),
            pod(1, "s-old", true),
            pod(2, "s-new", false),
        ];
        assert_eq!(plan(&p, &pods, &[]), vec![]);
        let pods = [
            pod(0, "s-old", true),
            pod(1, "s-old", true),
            pod(2, "s-new", true),
        ];
        assert_eq!(plan(&p, &pods, &[]), vec![Action::Delete { ordinal: 1 }]);
        // Below the partition pods stay (and come back) at the current revision.
        let p = params(3, false, Some(2));
        let pods = [
            pod(0, "s-old", true),
            pod(1, "s-old", true),
            pod(2, "s-new", true),
        ];
        assert_eq!(plan(&p, &pods, &[]), vec![]);
        assert_eq!(plan(&p, &pods[1..], &[]), vec![create(0, "s-old")]);
        // OnDelete never deletes.
        let p = params(2, false, None);
        assert_eq!(
            plan(&p, &[pod(0, "s-old", true), pod(1, "s-old", true)], &[]),
            vec![]
        );
        assert_eq!(
            plan(&p, &[pod(0, "s-old", true)], &[]),
            vec![create(1, "s-new")]
        );
    }

    fn sts() -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("db".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(2),
                service_name: Some("db".into()),
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_owned(), "db".to_owned())])),
                    ..Default::default()
                },
                update_strategy: Some(StatefulSetUpdateStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateStatefulSetStrategy {
                        partition: Some(1),
                        max_unavailable: None,
                    }),
                }),
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("data".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn status_and_revisions() {
        let set = sts();
        let p = super::params(&set);
        assert_eq!(p.partition, Some(1));
        assert!(p.update_revision.starts_with("db-"));
        assert_eq!(p.current_revision, p.update_revision);
        let new = p.update_revision.clone();
        let s = status(&set, &p, &[pod(0, &new, true), pod(1, &new, false)]);
        assert_eq!(s["replicas"], 2);
        assert_eq!(s["readyReplicas"], 1);
        assert_eq!(s["availableReplicas"], 1);
        assert_eq!(s["updatedReplicas"], 2);
        assert_eq!(s["currentReplicas"], 2);
        assert_eq!(s["collisionCount"], 0);
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(s["labelSelector"], "app=db");
        // Mid-update: current stays until every pod is updated and ready.
        let mid = Params {
            current_revision: "db-old".into(),
            ..p.clone()
        };
        let s = status(&set, &mid, &[pod(0, "db-old", true), pod(1, &new, true)]);
        assert_eq!(s["currentRevision"], "db-old");
        assert_eq!(s["currentReplicas"], 1);
        let s = status(&set, &mid, &[pod(0, &new, true), pod(1, &new, true)]);
        assert_eq!(s["currentRevision"], new.as_str());
        assert_eq!(s["currentReplicas"], 2);
        let s = status(&set, &p, &[]);
        assert_eq!(s["availableReplicas"], 0);
        assert_eq!(s["readyReplicas"], Value::Null);
    }

    #[test]
    fn pods_and_claims() {
        let set = sts();
        let (template, labels) = pod_template(
            &set,
            &set.spec.clone().unwrap_or_default().template,
            1,
            "db-x",
        );
        let spec = template.spec.expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("db-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("db"));
        let volume = &spec.volumes.expect("volumes")[0];
        assert_eq!(
            volume
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-db-1")
        );
        assert_eq!(labels[REVISION_LABEL], "db-x");
        assert_eq!(labels[POD_NAME_LABEL], "db-1");
        assert_eq!(labels[POD_INDEX_LABEL], "1");
        let claims = claims(&set, 1);
        assert_eq!(claims[0].0, "data-db-1");
        assert_eq!(claims[0].1["metadata"]["labels"]["app"], "db");
        assert!(claims[0].1["metadata"].get("ownerReferences").is_none());
    }
}
