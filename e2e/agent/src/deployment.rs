//! The Deployment controller: pods `<deploy>-<hash>-<xxxxx>` from the template, rolled out with
//! the RollingUpdate or Recreate strategy, and the status kube-controller-manager writes.
//!
//! There are no ReplicaSet objects: the pods of one template hash (label `pod-template-hash`)
//! play the ReplicaSet `<deploy>-<hash>`, and the condition messages name it as the real
//! controller does. A rolling update takes one step per pass, as the real controller does one
//! per sync: scale the new set up within `maxSurge`, or scale old pods down while at least
//! `replicas - maxUnavailable` stay available (unavailable old pods first). With the defaults
//! (25% / 25%: surge rounds up, unavailable down) a Deployment of 1 or 2 replicas surges one new
//! pod and removes an old one only after the new one is available, so a Service in front of it
//! never runs out of ready endpoints.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::clock;
use crate::controller::{self, omit_zero};
use crate::names;
use crate::podstatus;
use crate::selector;

pub const TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// The rollout strategy with its numbers resolved against `replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Recreate,
    Rolling {
        max_surge: i32,
        max_unavailable: i32,
    },
}

/// `intstr.GetScaledValueFromIntOrPercent`: a number, or a percentage of `total` rounded up or
/// down.
pub fn scaled(value: Option<&IntOrString>, default: &str, total: i32, round_up: bool) -> i32 {
    let text = match value {
        Some(IntOrString::Int(n)) => return *n,
        Some(IntOrString::String(s)) => s.as_str(),
        None => default,
    };
    let Some(percent) = text.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
        return text.parse().unwrap_or(0);
    };
    let product = percent * i64::from(total);
    let value = if round_up {
        (product + 99) / 100
    } else {
        product / 100
    };
    i32::try_from(value).unwrap_or(i32::MAX)
}

pub fn replicas(deployment: &Deployment) -> i32 {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
}

pub fn strategy(deployment: &Deployment) -> Strategy {
    let total = replicas(deployment);
    let spec = deployment.spec.as_ref().and_then(|s| s.strategy.as_ref());
    if spec.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return Strategy::Recreate;
    }
    let rolling = spec.and_then(|s| s.rolling_update.as_ref());
    let max_surge = scaled(
        rolling.and_then(|r| r.max_surge.as_ref()),
        "25%",
        total,
        true,
    );
    let mut max_unavailable = scaled(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        "25%",
        total,
        false,
    );
    if max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    Strategy::Rolling {
        max_surge,
        max_unavailable: max_unavailable.min(total),
    }
}

/// A pod of the Deployment as planning sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub name: String,
    pub hash: String,
    pub ready: bool,
    pub available: bool,
    /// Creation order (later is newer).
    pub created: i64,
}

/// What to do in this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub create: i32,
    pub delete: Vec<String>,
}

/// Deletion order: unavailable before available, not ready before ready, newest first.
fn deletion_order(pods: &mut [&PodInfo]) {
    pods.sort_by(|a, b| {
        (a.available, a.ready, std::cmp::Reverse(a.created)).cmp(&(
            b.available,
            b.ready,
            std::cmp::Reverse(b.created),
        ))
    });
}

fn take_names(pods: &[&PodInfo], count: i32) -> Vec<String> {
    pods.iter()
        .take(usize::try_from(count.max(0)).unwrap_or(0))
        .map(|p| p.name.clone())
        .collect()
}

/// One pass of the controller. `old_terminating` counts pods of this Deployment still stopping
/// on the node (Recreate waits for them).
pub fn plan(
    replicas: i32,
    strategy: Strategy,
    paused: bool,
    new_hash: &str,
    pods: &[PodInfo],
    old_terminating: usize,
) -> Plan {
    let (new, old): (Vec<&PodInfo>, Vec<&PodInfo>) = pods.iter().partition(|p| p.hash == new_hash);
    let new_count = i32::try_from(new.len()).unwrap_or(i32::MAX);
    let total = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let mut plan = Plan::default();
    if strategy == Strategy::Recreate && new.is_empty() && old_terminating > 0 {
        // Recreate: no new pod while an old one still runs.
        return plan;
    }
    if old.is_empty() || paused {
        // Scaling only.
        let current = if paused { total } else { new_count };
        if current < replicas {
            if !(paused && new.is_empty() && !old.is_empty()) {
                plan.create = replicas - current;
            }
        } else if current > replicas {
            let mut candidates: Vec<&PodInfo> = if paused { pods.iter().collect() } else { new };
            deletion_order(&mut candidates);
            plan.delete = take_names(&candidates, current - replicas);
        }
        return plan;
    }
    match strategy {
        Strategy::Recreate => {
            let mut old = old;
            deletion_order(&mut old);
            plan.delete = take_names(&old, i32::try_from(old.len()).unwrap_or(i32::MAX));
            if plan.delete.is_empty() && old_terminating == 0 && new_count < replicas {
                plan.create = replicas - new_count;
            }
            plan
        }
        Strategy::Rolling {
            max_surge,
            max_unavailable,
        } => {
            // Scale the new set up within the surge; a pass that scales up does nothing else.
            if new_count < replicas {
                let allowed = replicas + max_surge - total;
                if allowed > 0 {
                    plan.create = allowed.min(replicas - new_count);
                    return plan;
                }
            } else if new_count > replicas {
                let mut extra = new.clone();
                deletion_order(&mut extra);
                plan.delete = take_names(&extra, new_count - replicas);
                return plan;
            }
            // Scale old pods down while enough stay available.
            let min_available = replicas - max_unavailable;
            let new_unavailable =
                i32::try_from(new.iter().filter(|p| !p.available).count()).unwrap_or(0);
            let max_scaled_down = total - min_available - new_unavailable;
            if max_scaled_down <= 0 {
                return plan;
            }
            let mut old_sorted = old.clone();
            deletion_order(&mut old_sorted);
            let unhealthy: Vec<&PodInfo> = old_sorted
                .iter()
                .copied()
                .filter(|p| !p.available)
                .collect();
            let cleanup = take_names(&unhealthy, max_scaled_down);
            let cleaned = i32::try_from(cleanup.len()).unwrap_or(0);
            plan.delete = cleanup;
            let available = i32::try_from(pods.iter().filter(|p| p.available).count()).unwrap_or(0);
            if available > min_available {
                let healthy: Vec<&PodInfo> =
                    old_sorted.iter().copied().filter(|p| p.available).collect();
                let more = (available - min_available).min(max_scaled_down - cleaned);
                plan.delete.extend(take_names(&healthy, more));
            }
            plan
        }
    }
}

/// The replica counts of a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
}

pub fn counts(new_hash: &str, pods: &[PodInfo]) -> Counts {
    let count = |f: &dyn Fn(&PodInfo) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(0)
    };
    Counts {
        replicas: count(&|_| true),
        updated: count(&|p| p.hash == new_hash),
        ready: count(&|p| p.ready),
        available: count(&|p| p.available),
    }
}

fn condition(
    kind: &str,
    status: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `SetDeploymentCondition`: no change when status and reason are the same; the transition
/// time is kept while the status is; the changed condition moves to the end.
fn set_condition(conditions: &mut Vec<DeploymentCondition>, mut new: DeploymentCondition) {
    if let Some(existing) = conditions.iter().find(|c| c.type_ == new.type_) {
        if existing.status == new.status && existing.reason == new.reason {
            return;
        }
        if existing.status == new.status {
            new.last_transition_time = existing.last_transition_time.clone();
        }
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
}

/// The status the real controller would write after this pass.
pub fn status(deployment: &Deployment, new_hash: &str, counts: Counts, now: Timestamp) -> Value {
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(0);
    let desired = replicas(deployment);
    let old = deployment.status.clone().unwrap_or_default();
    let rs_name = names::replica_set_name(&name, new_hash);
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let progressing = conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .cloned();
    let names_new_rs = progressing
        .as_ref()
        .and_then(|c| c.message.as_deref())
        .is_some_and(|m| m.contains(&format!("\"{rs_name}\"")));
    if !names_new_rs {
        set_condition(
            &mut conditions,
            condition(
                "Progressing",
                true,
                "NewReplicaSetCreated",
                format!("Created new replica set \"{rs_name}\""),
                now,
            ),
        );
    }
    let max_unavailable = match strategy(deployment) {
        Strategy::Rolling {
            max_unavailable, ..
        } if desired > 0 => max_unavailable,
        _ => 0,
    };
    if counts.available >= desired - max_unavailable {
        set_condition(
            &mut conditions,
            condition(
                "Available",
                true,
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                now,
            ),
        );
    } else {
        set_condition(
            &mut conditions,
            condition(
                "Available",
                false,
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                now,
            ),
        );
    }
    let current = conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .cloned();
    let complete_before = counts.replicas == counts.updated
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
    let deadline = deployment
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .unwrap_or(600);
    if deadline != i32::MAX && !complete_before {
        let complete =
            counts.updated == desired && counts.replicas == desired && counts.available == desired;
        let old_old = old.replicas.unwrap_or(0) - old.updated_replicas.unwrap_or(0);
        let new_old = counts.replicas - counts.updated;
        let progressed = counts.updated > old.updated_replicas.unwrap_or(0)
            || new_old < old_old
            || counts.ready > old.ready_replicas.unwrap_or(0)
            || counts.available > old.available_replicas.unwrap_or(0);
        if complete {
            set_condition(
                &mut conditions,
                condition(
                    "Progressing",
                    true,
                    "NewReplicaSetAvailable",
                    format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
                    now,
                ),
            );
        } else if progressed {
            let mut updated = condition(
                "Progressing",
                true,
                "ReplicaSetUpdated",
                format!("ReplicaSet \"{rs_name}\" is progressing."),
                now,
            );
            if let Some(current) = &current {
                if current.status == "True" {
                    updated.last_transition_time = current.last_transition_time.clone();
                }
                conditions.retain(|c| c.type_ != "Progressing");
            }
            set_condition(&mut conditions, updated);
        } else if let Some(current) = &current {
            let reason = current.reason.as_deref();
            let since = current.last_update_time.as_ref().map(|t| t.0);
            let timed_out = reason == Some("ProgressDeadlineExceeded")
                || (reason != Some("NewReplicaSetAvailable")
                    && since.is_some_and(|t| clock::seconds_between(t, now) > f64::from(deadline)));
            if timed_out {
                set_condition(
                    &mut conditions,
                    condition(
                        "Progressing",
                        false,
                        "ProgressDeadlineExceeded",
                        format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                        now,
                    ),
                );
            }
        }
    }
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|c| {
            json!({
                "type": c.type_,
                "status": c.status,
                "lastUpdateTime": c.last_update_time.as_ref().map(|t| clock::format(t.0)),
                "lastTransitionTime": c.last_transition_time.as_ref().map(|t| clock::format(t.0)),
                "reason": c.reason,
                "message": c.message,
            })
        })
        .collect();
    let selector = deployment
        .spec
        .as_ref()
        .map(|s| selector::to_string(&s.selector))
        .unwrap_or_default();
    json!({
        "observedGeneration": generation,
        "replicas": omit_zero(counts.replicas),
        "updatedReplicas": omit_zero(counts.updated),
        "readyReplicas": omit_zero(counts.ready),
        "availableReplicas": omit_zero(counts.available),
        "unavailableReplicas": omit_zero((counts.replicas - counts.available).max(0)),
        "conditions": conditions,
        "labelSelector": selector,
    })
}

/// A pod of the Deployment for planning: hash from its label, readiness and availability
/// (`minReadySeconds`) from its status.
pub fn pod_info(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> PodInfo {
    let (ready, available) = podstatus::ready_and_available(pod, min_ready_seconds, now);
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        hash: controller::label(&pod.metadata, TEMPLATE_HASH_LABEL),
        ready,
        available,
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(i64::MAX, |t| t.0.as_millisecond()),
    }
}

/// The template hash of a Deployment (its pod template, with the collision count).
pub fn template_hash(deployment: &Deployment) -> String {
    let template = deployment.spec.as_ref().map(|s| &s.template);
    let collisions = deployment
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    names::template_hash(&template, collisions)
}

/// The labels the pods of hash `hash` carry besides the template's.
pub fn pod_labels(hash: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned())])
}

/// Pods owned by the Deployment (cache and expectations), as planning sees them.
pub fn infos(pods: &[Arc<Pod>], min_ready_seconds: i32, now: Timestamp) -> Vec<PodInfo> {
    pods.iter()
        .map(|p| pod_info(p, min_ready_seconds, now))
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{
        DeploymentSpec, DeploymentStatus, DeploymentStrategy, RollingUpdateDeployment,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    use super::*;

    fn pod(name: &str, hash: &str, available: bool, created: i64) -> PodInfo {
        PodInfo {
            name: name.into(),
            hash: hash.into(),
            ready: available,
            available,
            created,
        }
    }

    /// The condition of type `kind` in a rendered status.
    fn condition(status: &Value, kind: &str) -> Value {
        status["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .find(|c| c["type"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no condition {kind}"))
    }

    fn rolling(surge: i32, unavailable: i32) -> Strategy {
        Strategy::Rolling {
            max_surge: surge,
            max_unavailable: unavailable,
        }
    }

    fn deployment(replicas: i32, strategy: Option<DeploymentStrategy>) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy,
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                    ..Default::default()
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn strategy_rounding() {
        assert_eq!(scaled(None, "25%", 2, true), 1);
        assert_eq!(scaled(None, "25%", 2, false), 0);
        assert_eq!(scaled(None, "25%", 10, true), 3);
        assert_eq!(scaled(None, "25%", 10, false), 2);
        assert_eq!(scaled(Some(&IntOrString::Int(3)), "25%", 10, false), 3);
        assert_eq!(
            scaled(Some(&IntOrString::String("50%".into())), "25%", 3, true),
            2
        );
        assert_eq!(strategy(&deployment(2, None)), rolling(1, 0));
        assert_eq!(strategy(&deployment(1, None)), rolling(1, 0));
        let both_zero = DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(0)),
                max_unavailable: Some(IntOrString::Int(0)),
            }),
        };
        assert_eq!(strategy(&deployment(4, Some(both_zero))), rolling(0, 1));
        let recreate = DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        };
        assert_eq!(strategy(&deployment(4, Some(recreate))), Strategy::Recreate);
    }

    #[test]
    fn scale_up_and_down() {
        assert_eq!(
            plan(2, rolling(1, 0), false, "n", &[], 0),
            Plan {
                create: 2,
                delete: vec![]
            }
        );
        let pods = vec![
            pod("a", "n", true, 1),
            pod("b", "n", false, 2),
            pod("c", "n", true, 3),
        ];
        // Scale down removes the unavailable pod first, then the newest.
        assert_eq!(
            plan(1, rolling(1, 0), false, "n", &pods, 0).delete,
            vec!["b", "c"]
        );
    }

    /// Replicas 2, defaults (surge 1, unavailable 0): never fewer than 2 available pods.
    #[test]
    fn rolling_update_keeps_availability() {
        let strategy = rolling(1, 0);
        let mut pods = vec![pod("o1", "old", true, 1), pod("o2", "old", true, 2)];
        // Step 1: surge one new pod.
        assert_eq!(
            plan(2, strategy, false, "new", &pods, 0),
            Plan {
                create: 1,
                delete: vec![]
            }
        );
        pods.push(pod("n1", "new", false, 3));
        // While it is not available nothing else happens.
        assert_eq!(plan(2, strategy, false, "new", &pods, 0), Plan::default());
        pods[2].available = true;
        pods[2].ready = true;
        // Now one old pod goes (the newest old one).
        assert_eq!(plan(2, strategy, false, "new", &pods, 0).delete, vec!["o2"]);
        pods.remove(1);
        assert_eq!(plan(2, strategy, false, "new", &pods, 0).create, 1);
        pods.push(pod("n2", "new", false, 4));
        assert_eq!(plan(2, strategy, false, "new", &pods, 0), Plan::default());
        pods[2].available = true;
        assert_eq!(plan(2, strategy, false, "new", &pods, 0).delete, vec!["o1"]);
    }

    #[test]
    fn rolling_update_cleans_unhealthy_old_pods_first() {
        let pods = vec![
            pod("o1", "old", true, 1),
            pod("o2", "old", false, 2),
            pod("n1", "new", true, 3),
        ];
        // maxUnavailable 1 of 2: minAvailable 1, maxScaledDown = 3 - 1 - 0 = 2.
        let result = plan(2, rolling(0, 1), false, "new", &pods, 0);
        assert_eq!(result.delete, vec!["o2", "o1"]);
    }

    #[test]
    fn recreate_waits_for_old_pods() {
        let pods = vec![pod("o1", "old", true, 1)];
        assert_eq!(
            plan(1, Strategy::Recreate, false, "new", &pods, 0).delete,
            vec!["o1"]
        );
        assert_eq!(
            plan(1, Strategy::Recreate, false, "new", &[], 1),
            Plan::default()
        );
        assert_eq!(plan(1, Strategy::Recreate, false, "new", &[], 0).create, 1);
    }

    #[test]
    fn paused_does_not_roll() {
        let pods = vec![pod("o1", "old", true, 1)];
        assert_eq!(
            plan(1, rolling(1, 0), true, "new", &pods, 0),
            Plan::default()
        );
    }

    #[test]
    fn status_like_the_real_controller() {
        let now = clock::parse("2024-01-01T00:00:00Z").expect("now");
        let mut d = deployment(2, None);
        let hash = "abc";
        // Just created: pods exist, none available.
        let s = status(
            &d,
            hash,
            Counts {
                replicas: 2,
                updated: 2,
                ready: 0,
                available: 0,
            },
            now,
        );
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(s["replicas"], 2);
        assert_eq!(s["readyReplicas"], Value::Null);
        assert_eq!(s["unavailableReplicas"], 2);
        assert_eq!(s["labelSelector"], "app=web");
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| c["type"].as_str().unwrap_or_default())
            .collect();
        // A condition that changes moves to the end, as SetDeploymentCondition does.
        assert_eq!(types, vec!["Available", "Progressing"]);
        assert_eq!(s["conditions"][1]["reason"], "ReplicaSetUpdated");
        assert_eq!(
            s["conditions"][1]["message"],
            "ReplicaSet \"web-abc\" is progressing."
        );
        assert_eq!(s["conditions"][0]["reason"], "MinimumReplicasUnavailable");
        // Feed it back as the old status, then everything is available.
        d.status =
            Some(serde_json::from_value::<DeploymentStatus>(without_labels(&s)).expect("status"));
        let later = clock::parse("2024-01-01T00:00:10Z").expect("later");
        let s = status(
            &d,
            hash,
            Counts {
                replicas: 2,
                updated: 2,
                ready: 2,
                available: 2,
            },
            later,
        );
        assert_eq!(s["availableReplicas"], 2);
        assert_eq!(s["unavailableReplicas"], Value::Null);
        let available = condition(&s, "Available");
        assert_eq!(available["status"], "True");
        assert_eq!(available["reason"], "MinimumReplicasAvailable");
        assert_eq!(available["message"], "Deployment has minimum availability.");
        let progressing = condition(&s, "Progressing");
        assert_eq!(progressing["reason"], "NewReplicaSetAvailable");
        assert_eq!(
            progressing["message"],
            "ReplicaSet \"web-abc\" has successfully progressed."
        );
        // The transition time stays while the status stays True.
        assert_eq!(progressing["lastTransitionTime"], "2024-01-01T00:00:00Z");
        assert_eq!(progressing["lastUpdateTime"], "2024-01-01T00:00:10Z");
    }

    /// The first status of a new Deployment, before its pods exist.
    #[test]
    fn first_status_names_the_new_replica_set() {
        let now = clock::parse("2024-01-01T00:00:00Z").expect("now");
        let s = status(&deployment(2, None), "abc", Counts::default(), now);
        assert_eq!(s["replicas"], Value::Null);
        assert_eq!(s["conditions"][0]["type"], "Progressing");
        assert_eq!(s["conditions"][0]["reason"], "NewReplicaSetCreated");
        assert_eq!(
            s["conditions"][0]["message"],
            "Created new replica set \"web-abc\""
        );
        assert_eq!(s["conditions"][1]["type"], "Available");
        assert_eq!(s["conditions"][1]["status"], "False");
    }

    fn without_labels(status: &Value) -> Value {
        let mut status = crate::controller::without_nulls(status);
        if let Some(map) = status.as_object_mut() {
            map.remove("labelSelector");
        }
        status
    }

    #[test]
    fn pods_are_available_after_min_ready_seconds() {
        use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
        let since = clock::parse("2024-01-01T00:00:00Z").expect("since");
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                labels: Some(pod_labels("h")),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(since)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        let at = |s: &str| clock::parse(s).expect("ts");
        let info = pod_info(&pod, 5, at("2024-01-01T00:00:03Z"));
        assert!(info.ready && !info.available);
        assert_eq!(info.hash, "h");
        assert!(pod_info(&pod, 5, at("2024-01-01T00:00:05Z")).available);
        assert!(pod_info(&pod, 0, at("2024-01-01T00:00:00Z")).available);
    }
}
