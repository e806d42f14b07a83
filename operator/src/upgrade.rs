//! Ordering of a version change across one kcp installation: CacheServer, then RootShard, then
//! Shards, then VirtualWorkspaces, then FrontProxies.
//!
//! kcp components talk to each other across versions only in one direction safely: shards
//! replicate into the cache and register with the root, a standalone virtual-workspace server
//! serves its shard's API, the front-proxy routes to every shard and virtual workspace.
//! So a component whose version changes keeps running its current version until every component
//! of an earlier stage is fully rolled out (its status reports the version it asks for, is
//! available and describes the latest generation). A rollout that gave up (the Deployment's
//! `ProgressDeadlineExceeded`) blocks every later stage until someone fixes it.
//!
//! Pure: the controllers read the statuses and apply the decision (see `controller::upgrade`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::common::ComponentStatus;
use crate::api::conditions::{AVAILABLE, PROGRESSING, ROLLOUT_FAILED, UPGRADE_BLOCKED};

/// Where a kind stands in the upgrade order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    CacheServer,
    RootShard,
    Shard,
    VirtualWorkspace,
    FrontProxy,
}

/// How far an earlier component has come, read from its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Available at the version its spec asks for, status up to date.
    RolledOut,
    /// Still on its way (or its status does not describe the latest spec yet).
    Pending(String),
    /// Its rollout gave up, or it is itself blocked.
    Stalled(String),
}

/// An earlier component as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// `Kind/name`, for messages.
    pub id: String,
    pub stage: Stage,
    pub progress: Progress,
}

impl Peer {
    /// A peer from its spec's version, its generation and its stored status.
    pub fn from_status(
        id: String,
        stage: Stage,
        target: &str,
        generation: Option<i64>,
        status: &ComponentStatus,
    ) -> Self {
        Self {
            id,
            stage,
            progress: progress(target, generation, status),
        }
    }
}

/// The component being reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject<'a> {
    pub stage: Stage,
    /// The version its status last reported as rolled out (`None` before its first rollout).
    pub current: Option<&'a str>,
    pub target: &'a str,
    /// The version its live Deployment's pod template carries, if it exists.
    pub deployed: Option<&'a str>,
}

impl Subject<'_> {
    /// Whether the spec asks for another version than the one running.
    pub fn is_upgrading(&self) -> bool {
        self.current.is_some_and(|current| current != self.target)
    }
}

/// What the component may render.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Render the target version.
    Proceed,
    /// Keep rendering `current`: an earlier stage is still rolling out.
    Wait { current: String, message: String },
    /// Keep rendering `current`: an earlier stage's rollout is stuck.
    Blocked { current: String, message: String },
}

impl Decision {
    /// The version to render instead of the target, if held back.
    pub fn held_version(&self) -> Option<&str> {
        match self {
            Decision::Proceed => None,
            Decision::Wait { current, .. } | Decision::Blocked { current, .. } => Some(current),
        }
    }
}

/// Decides whether `subject` may move to its target version, given every related component.
///
/// Nothing is held before a component's first rollout (there is no older version to keep) or
/// when its version does not change. A rollout that has already reached the Deployment is never
/// taken back, so a peer that becomes unavailable later does not flip the component back and
/// forth.
pub fn plan(subject: &Subject<'_>, peers: &[Peer]) -> Decision {
    let Some(current) = subject.current.filter(|_| subject.is_upgrading()) else {
        return Decision::Proceed;
    };
    if subject.deployed == Some(subject.target) {
        return Decision::Proceed;
    }
    let mut earlier: Vec<&Peer> = peers
        .iter()
        .filter(|peer| peer.stage < subject.stage)
        .collect();
    earlier.sort_by_key(|peer| peer.stage);
    if let Some((peer, message)) = earlier.iter().find_map(|peer| match &peer.progress {
        Progress::Stalled(message) => Some((peer, message)),
        _ => None,
    }) {
        return Decision::Blocked {
            current: current.to_owned(),
            message: format!(
                "staying at {current} instead of {}: {} is stuck: {message}",
                subject.target, peer.id
            ),
        };
    }
    if let Some((peer, message)) = earlier.iter().find_map(|peer| match &peer.progress {
        Progress::Pending(message) => Some((peer, message)),
        _ => None,
    }) {
        return Decision::Wait {
            current: current.to_owned(),
            message: format!(
                "staying at {current} until {} is rolled out: {message}",
                peer.id
            ),
        };
    }
    Decision::Proceed
}

fn condition<'a>(status: &'a ComponentStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Reads a component's progress towards `target` from its status.
pub fn progress(target: &str, generation: Option<i64>, status: &ComponentStatus) -> Progress {
    let progressing = condition(status, PROGRESSING);
    if let Some(stuck) = progressing.filter(|c| {
        c.status == "False" && (c.reason == ROLLOUT_FAILED || c.reason == UPGRADE_BLOCKED)
    }) {
        return Progress::Stalled(stuck.message.clone());
    }
    if status.observed_generation != generation || generation.is_none() {
        return Progress::Pending("its status does not describe its latest spec yet".into());
    }
    if status.current_version.as_deref() != Some(target) {
        return Progress::Pending(format!(
            "rolling out {target} (running {})",
            status.current_version.as_deref().unwrap_or("nothing yet")
        ));
    }
    let available = condition(status, AVAILABLE).is_some_and(|c| c.status == "True");
    if !available {
        return Progress::Pending(format!("{target} is not available"));
    }
    Progress::RolledOut
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    /// A status as the controllers write it.
    fn status(
        current: &str,
        target: &str,
        available: bool,
        progressing: Condition,
    ) -> ComponentStatus {
        ComponentStatus {
            phase: None,
            observed_generation: Some(1),
            current_version: Some(current.into()),
            target_version: Some(target.into()),
            conditions: vec![
                condition("Available", available, "ReplicasUp", ""),
                progressing,
            ],
            endpoints: None,
        }
    }

    fn rolled_out(version: &str) -> ComponentStatus {
        status(
            version,
            version,
            true,
            condition("Progressing", false, "RolledOut", ""),
        )
    }

    fn rolling(from: &str, to: &str) -> ComponentStatus {
        status(
            from,
            to,
            false,
            condition("Progressing", true, "RollingOut", "1 of 2 replicas ready"),
        )
    }

    fn stalled(from: &str, to: &str) -> ComponentStatus {
        status(
            from,
            to,
            false,
            condition(
                "Progressing",
                false,
                ROLLOUT_FAILED,
                "ReplicaSet \"x\" has timed out progressing",
            ),
        )
    }

    fn peer(id: &str, stage: Stage, target: &str, status: &ComponentStatus) -> Peer {
        Peer::from_status(id.into(), stage, target, Some(1), status)
    }

    fn subject<'a>(stage: Stage, current: &'a str, target: &'a str) -> Subject<'a> {
        Subject {
            stage,
            current: Some(current),
            target,
            deployed: Some(current),
        }
    }

    /// The whole installation moves v1 -> v2 one stage at a time: at every step exactly the
    /// next stage may proceed and every later one waits.
    #[test]
    fn an_upgrade_walks_the_stages_in_order() {
        let order = [
            ("CacheServer/c", Stage::CacheServer),
            ("RootShard/r", Stage::RootShard),
            ("Shard/s", Stage::Shard),
            ("VirtualWorkspace/v", Stage::VirtualWorkspace),
            ("FrontProxy/f", Stage::FrontProxy),
        ];
        for done in 0..order.len() {
            let peers: Vec<Peer> = order
                .iter()
                .enumerate()
                .map(|(index, (id, stage))| {
                    let status = if index < done {
                        rolled_out("v2")
                    } else {
                        rolled_out("v1")
                    };
                    peer(id, *stage, "v2", &status)
                })
                .collect();
            for (index, (_, stage)) in order.iter().enumerate().skip(done) {
                let decision = plan(&subject(*stage, "v1", "v2"), &peers);
                if index == done {
                    assert_eq!(decision, Decision::Proceed, "stage {stage:?} after {done}");
                } else {
                    assert_eq!(decision.held_version(), Some("v1"), "stage {stage:?}");
                    assert!(matches!(decision, Decision::Wait { .. }));
                }
            }
        }
    }

    #[test]
    fn a_component_waits_while_an_earlier_one_is_still_rolling_out() {
        let peers = [peer(
            "CacheServer/c",
            Stage::CacheServer,
            "v2",
            &rolling("v1", "v2"),
        )];
        let decision = plan(&subject(Stage::RootShard, "v1", "v2"), &peers);
        let Decision::Wait { current, message } = decision else {
            panic!("expected to wait, got {decision:?}");
        };
        assert_eq!(current, "v1");
        assert!(message.contains("CacheServer/c"), "{message}");
    }

    #[test]
    fn a_stalled_rollout_blocks_every_later_stage() {
        let peers = [
            peer("CacheServer/c", Stage::CacheServer, "v2", &rolled_out("v2")),
            peer("RootShard/r", Stage::RootShard, "v2", &stalled("v1", "v2")),
            peer("Shard/s", Stage::Shard, "v2", &rolled_out("v1")),
        ];
        for stage in [Stage::Shard, Stage::FrontProxy] {
            let decision = plan(&subject(stage, "v1", "v2"), &peers);
            let Decision::Blocked { current, message } = decision else {
                panic!("expected a block, got {decision:?}");
            };
            assert_eq!(current, "v1");
            assert!(message.contains("RootShard/r"), "{message}");
            assert!(message.contains("timed out progressing"), "{message}");
        }
        // A block further down is reported as stalled to the stage after it.
        let blocked = status(
            "v1",
            "v2",
            true,
            condition(
                "Progressing",
                false,
                UPGRADE_BLOCKED,
                "RootShard/r is stuck",
            ),
        );
        assert!(matches!(
            progress("v2", Some(1), &blocked),
            Progress::Stalled(_)
        ));
        // Earlier stages are not affected.
        assert_eq!(
            plan(&subject(Stage::CacheServer, "v1", "v2"), &peers),
            Decision::Proceed
        );
    }

    #[test]
    fn a_stale_status_is_not_rolled_out() {
        let status = rolled_out("v1");
        assert!(matches!(
            progress("v1", Some(2), &status),
            Progress::Pending(_)
        ));
        assert!(matches!(
            progress("v2", Some(1), &status),
            Progress::Pending(_)
        ));
        assert_eq!(progress("v1", Some(1), &status), Progress::RolledOut);
        let mut unavailable = rolled_out("v1");
        unavailable.conditions[0].status = "False".into();
        assert!(matches!(
            progress("v1", Some(1), &unavailable),
            Progress::Pending(_)
        ));
    }

    #[test]
    fn first_rollouts_unchanged_versions_and_started_upgrades_are_never_held() {
        let peers = [peer(
            "CacheServer/c",
            Stage::CacheServer,
            "v2",
            &stalled("v1", "v2"),
        )];
        let fresh = Subject {
            stage: Stage::RootShard,
            current: None,
            target: "v2",
            deployed: None,
        };
        assert_eq!(plan(&fresh, &peers), Decision::Proceed);
        assert_eq!(
            plan(&subject(Stage::RootShard, "v2", "v2"), &peers),
            Decision::Proceed
        );
        let started = Subject {
            deployed: Some("v2"),
            ..subject(Stage::RootShard, "v1", "v2")
        };
        assert_eq!(plan(&started, &peers), Decision::Proceed);
    }

    #[test]
    fn later_stages_do_not_hold_earlier_ones() {
        let peers = [peer(
            "FrontProxy/f",
            Stage::FrontProxy,
            "v2",
            &stalled("v1", "v2"),
        )];
        assert_eq!(
            plan(&subject(Stage::Shard, "v1", "v2"), &peers),
            Decision::Proceed
        );
    }
}
