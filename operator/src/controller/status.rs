//! Status from what was applied and observed: phase, conditions, versions.
//!
//! Conditions keep their `lastTransitionTime` while their status stays the same, so a reconcile
//! that observes nothing new computes exactly the stored status and writes nothing.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::Patch;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::api::common::{ComponentStatus, Endpoints, Phase};
use crate::api::conditions::{
    AVAILABLE, DEGRADED, ETCD_UNREACHABLE, IGNORED_FIELDS, PROGRESSING, REFERENCES_VALID,
    ROLLOUT_FAILED, UPGRADE_BLOCKED, UPGRADING,
};
use crate::upgrade::Decision;

use super::report::{Conditioned, degraded};
use super::{Error, Watched, merge_params};

/// How far a Deployment's rollout has come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollout {
    /// Every replica runs the current template and is available.
    Complete,
    InProgress {
        ready: i32,
        desired: i32,
    },
    /// The Deployment gave up (`ProgressDeadlineExceeded`).
    Failed(String),
}

pub fn rollout(deployment: &Deployment) -> Rollout {
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let failed = status.conditions.iter().flatten().find(|c| {
        c.type_ == "Progressing"
            && c.status == "False"
            && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    if let Some(condition) = failed {
        return Rollout::Failed(condition.message.clone().unwrap_or_default());
    }
    let observed =
        status.observed_generation.unwrap_or(0) >= deployment.metadata.generation.unwrap_or(0);
    let ready = status.ready_replicas.unwrap_or(0);
    let complete = observed
        && status.updated_replicas.unwrap_or(0) == desired
        && ready == desired
        && status.available_replicas.unwrap_or(0) == desired
        && status.replicas.unwrap_or(0) == desired;
    if complete {
        Rollout::Complete
    } else {
        Rollout::InProgress { ready, desired }
    }
}

/// A condition to set, without bookkeeping fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl Wanted {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// Conditions with transition times kept from `previous` where the status did not change.
pub fn conditions(
    previous: &[Condition],
    wanted: Vec<Wanted>,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    wanted
        .into_iter()
        .map(|wanted| {
            let status = if wanted.status { "True" } else { "False" };
            let last_transition_time = previous
                .iter()
                .find(|c| c.type_ == wanted.type_ && c.status == status)
                .map_or(Time(now), |c| c.last_transition_time.clone());
            Condition {
                type_: wanted.type_.to_owned(),
                status: status.to_owned(),
                reason: wanted.reason,
                message: wanted.message,
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// Why a spec, or something it references, is unusable: a CamelCase reason (the condition's and
/// the event's) and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub reason: &'static str,
    pub message: String,
}

impl Problem {
    /// A spec that cannot be rendered (`InvalidSpec`).
    pub fn invalid(message: impl std::fmt::Display) -> Problem {
        Problem {
            reason: "InvalidSpec",
            message: message.to_string(),
        }
    }
}

impl From<crate::validate::Error> for Problem {
    fn from(error: crate::validate::Error) -> Problem {
        Problem {
            reason: error.reason(),
            message: error.to_string(),
        }
    }
}

/// The observations a component status is made of.
#[derive(Clone, Debug)]
pub struct Observation {
    pub generation: Option<i64>,
    /// `Err` holds why the spec or its references are unusable.
    pub references: Result<(), Problem>,
    pub rollout: Option<Rollout>,
    /// Whether the upgrade order lets the target version through (see `upgrade`).
    pub upgrade: Decision,
    pub warnings: Vec<String>,
    pub target_version: String,
    /// Where the component is reached (`None` before the spec was first rendered).
    pub endpoints: Option<Endpoints>,
    /// Why no endpoint of the external etcd answers, when it was probed and none did.
    pub etcd_unreachable: Option<String>,
    /// Conditions of one kind only (a Shard's `CacheShared`); they leave the phase alone.
    pub advisories: Vec<Wanted>,
}

/// The status for `observation`, starting from the stored `previous` one.
pub fn component_status(
    previous: &ComponentStatus,
    observation: Observation,
    now: Timestamp,
) -> ComponentStatus {
    let Observation {
        generation,
        references,
        rollout,
        upgrade,
        warnings,
        target_version,
        endpoints,
        etcd_unreachable,
        advisories,
    } = observation;
    let upgrading = previous
        .current_version
        .as_ref()
        .is_some_and(|current| *current != target_version);
    let mut wanted = Vec::new();
    let references_valid = references.is_ok();
    wanted.push(match &references {
        Ok(()) => Wanted::new(REFERENCES_VALID, true, "Valid", "all references resolve"),
        Err(problem) => Wanted::new(
            REFERENCES_VALID,
            false,
            problem.reason,
            problem.message.clone(),
        ),
    });
    let (available, progressing, degraded) = match (&references, &rollout) {
        (Err(problem), _) => (
            Wanted::new(AVAILABLE, false, "Invalid", "the spec cannot be rendered"),
            Wanted::new(
                PROGRESSING,
                false,
                "Invalid",
                "nothing is rolled out until the spec is fixed",
            ),
            Wanted::new(DEGRADED, true, problem.reason, problem.message.clone()),
        ),
        (Ok(()), Some(Rollout::Complete)) => (
            Wanted::new(
                AVAILABLE,
                true,
                "ReplicasUp",
                "every replica is updated and available",
            ),
            Wanted::new(PROGRESSING, false, "RolledOut", "the rollout is complete"),
            Wanted::new(DEGRADED, false, "AsExpected", "no problems"),
        ),
        (Ok(()), Some(Rollout::InProgress { ready, desired })) => (
            match &etcd_unreachable {
                Some(message) => Wanted::new(
                    AVAILABLE,
                    false,
                    ETCD_UNREACHABLE,
                    format!("{ready} of {desired} replicas ready; {message}"),
                ),
                None => Wanted::new(
                    AVAILABLE,
                    false,
                    "ReplicasUnavailable",
                    format!("{ready} of {desired} replicas ready"),
                ),
            },
            if upgrading {
                Wanted::new(
                    PROGRESSING,
                    true,
                    UPGRADING,
                    format!("rolling out {target_version}: {ready} of {desired} replicas ready"),
                )
            } else {
                Wanted::new(
                    PROGRESSING,
                    true,
                    "RollingOut",
                    format!("{ready} of {desired} replicas ready"),
                )
            },
            match &etcd_unreachable {
                Some(message) => Wanted::new(DEGRADED, true, ETCD_UNREACHABLE, message.clone()),
                None => Wanted::new(DEGRADED, false, "AsExpected", "no problems"),
            },
        ),
        (Ok(()), Some(Rollout::Failed(message))) => (
            Wanted::new(AVAILABLE, false, ROLLOUT_FAILED, message.clone()),
            Wanted::new(PROGRESSING, false, ROLLOUT_FAILED, message.clone()),
            Wanted::new(DEGRADED, true, ROLLOUT_FAILED, message.clone()),
        ),
        (Ok(()), None) => (
            Wanted::new(
                AVAILABLE,
                false,
                "NotRendered",
                "the workload does not exist yet",
            ),
            Wanted::new(PROGRESSING, true, "Provisioning", "creating the workload"),
            Wanted::new(DEGRADED, false, "AsExpected", "no problems"),
        ),
    };
    // A held upgrade explains the Progressing condition, unless the spec is unusable or the
    // component's own rollout failed.
    let own_failure = references.is_err() || matches!(rollout, Some(Rollout::Failed(_)));
    let progressing = match &upgrade {
        Decision::Wait { message, .. } if !own_failure => {
            Wanted::new(PROGRESSING, true, UPGRADING, message.clone())
        }
        Decision::Blocked { message, .. } if !own_failure => {
            Wanted::new(PROGRESSING, false, UPGRADE_BLOCKED, message.clone())
        }
        _ => progressing,
    };
    let is_available = available.status;
    let is_degraded = degraded.status;
    wanted.extend([available, progressing, degraded]);
    wanted.extend(advisories);
    if !warnings.is_empty() {
        wanted.push(Wanted::new(
            IGNORED_FIELDS,
            true,
            "CertManagerFields",
            warnings.join("; "),
        ));
    }
    let phase = match (is_available, is_degraded || !references_valid) {
        (_, true) => Phase::Degraded,
        (true, false) => Phase::Running,
        (false, false) => Phase::Provisioning,
    };
    let rolled_out_at_target = rollout == Some(Rollout::Complete) && upgrade == Decision::Proceed;
    ComponentStatus {
        phase: Some(phase),
        observed_generation: generation,
        current_version: if rolled_out_at_target {
            Some(target_version.clone())
        } else {
            previous.current_version.clone()
        },
        target_version: Some(target_version),
        conditions: conditions(&previous.conditions, wanted, generation, now),
        endpoints,
    }
}

/// Writes `status` to the status subresource unless it is already stored.
pub async fn write<K, S>(client: &Client, object: &K, previous: &S, status: &S) -> Result<(), Error>
where
    K: Watched,
    S: PartialEq + serde::Serialize,
{
    if previous == status {
        return Ok(());
    }
    patch(client, object, json!({ "status": status })).await
}

/// Writes the `Degraded` condition for a failed reconcile unless the status already says so.
pub async fn write_failure<K: Conditioned>(
    client: &Client,
    object: &K,
    error: &Error,
) -> Result<(), Error> {
    let next = degraded(object, error, Timestamp::now());
    if next.as_slice() == object.conditions() {
        return Ok(());
    }
    patch(client, object, json!({"status": {"conditions": next}})).await
}

/// A merge patch of the status subresource.
async fn patch<K: Watched>(
    client: &Client,
    object: &K,
    body: serde_json::Value,
) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    api.patch_status(&object.name_any(), &merge_params(), &Patch::Merge(&body))
        .await
        .map_err(Error::Kube)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(rollout: Rollout, etcd_unreachable: Option<&str>) -> Observation {
        Observation {
            generation: Some(1),
            references: Ok(()),
            rollout: Some(rollout),
            upgrade: Decision::Proceed,
            warnings: Vec::new(),
            target_version: "v1".into(),
            endpoints: None,
            etcd_unreachable: etcd_unreachable.map(String::from),
            advisories: Vec::new(),
        }
    }

    fn condition<'a>(status: &'a ComponentStatus, type_: &str) -> &'a Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .expect("condition present")
    }

    #[test]
    fn an_unreachable_etcd_names_itself_and_clears_on_its_own() {
        let now = Timestamp::UNIX_EPOCH;
        let message = "no etcd endpoint accepts connections from the operator: \
                       https://etcd:2379: connection refused";
        let waiting = Rollout::InProgress {
            ready: 0,
            desired: 1,
        };
        let stuck = component_status(
            &ComponentStatus::default(),
            observation(waiting.clone(), Some(message)),
            now,
        );
        assert_eq!(stuck.phase, Some(Phase::Degraded));
        let available = condition(&stuck, AVAILABLE);
        assert_eq!(
            (available.status.as_str(), available.reason.as_str()),
            ("False", ETCD_UNREACHABLE)
        );
        assert!(available.message.contains("https://etcd:2379"));
        assert!(available.message.contains("0 of 1 replicas ready"));
        let degraded = condition(&stuck, DEGRADED);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", ETCD_UNREACHABLE)
        );
        assert_eq!(degraded.message, message);

        // The etcd answers again: the rollout is only in progress, nothing is degraded.
        let recovering = component_status(&stuck, observation(waiting.clone(), None), now);
        assert_eq!(recovering.phase, Some(Phase::Provisioning));
        assert_eq!(
            condition(&recovering, AVAILABLE).reason,
            "ReplicasUnavailable"
        );
        assert_eq!(condition(&recovering, DEGRADED).status, "False");

        let done = component_status(&recovering, observation(Rollout::Complete, None), now);
        assert_eq!(done.phase, Some(Phase::Running));
        assert_eq!(condition(&done, AVAILABLE).status, "True");
    }

    #[test]
    fn a_failed_rollout_outranks_an_unreachable_etcd() {
        let status = component_status(
            &ComponentStatus::default(),
            observation(
                Rollout::Failed("deadline exceeded".into()),
                Some("etcd down"),
            ),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(condition(&status, DEGRADED).reason, ROLLOUT_FAILED);
    }
}
