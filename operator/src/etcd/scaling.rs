//! The scaling planner: from what the members API and the StatefulSet say, the next single step
//! towards the desired member count.
//!
//! etcd only stays available through a membership change when the change is one member at a
//! time and the cluster has settled in between: a new member is announced (`member add`) before
//! its pod starts with `--initial-cluster-state=existing`, and a leaving member is removed from
//! the cluster before its pod goes away. Members always occupy ordinals `0..n` of the
//! StatefulSet, so growing adds ordinal `n` and shrinking removes ordinal `n - 1`.
//!
//! The planner is pure; the controller calls the members API and applies the StatefulSet with
//! the replica count the plan names. Every step is safe to repeat after a crash: a member added
//! (or removed) whose StatefulSet change was never applied is finished first.

use crate::naming::Names;

/// One member as the members API lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    /// Empty until the member has started and joined.
    pub name: String,
    pub peer_urls: Vec<String>,
}

impl Member {
    fn started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// Whether members joining now form a new cluster or join a running one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterState {
    New,
    Existing,
}

impl ClusterState {
    /// Value of etcd's `--initial-cluster-state`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "new" => Some(ClusterState::New),
            "existing" => Some(ClusterState::Existing),
            _ => None,
        }
    }
}

/// What the controller observed before planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// `spec.replicas` of the StatefulSet; `None` before it exists.
    pub statefulset_replicas: Option<i32>,
    /// The cluster state the membership ConfigMap holds, if it exists.
    pub cluster_state: Option<ClusterState>,
    /// The member list; `None` when no member answered.
    pub members: Option<Vec<Member>>,
}

/// Why the planner holds still.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// No member answered the members API (pods still starting, or the cluster is down).
    MembersUnknown,
    /// A member was added but has not started yet.
    MemberStarting { ordinal: i32 },
    /// A member does not belong to the StatefulSet's ordinals; a person has to look.
    UnexpectedMember { peer_urls: Vec<String> },
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::MembersUnknown => write!(f, "no etcd member answered the members API"),
            WaitReason::MemberStarting { ordinal } => {
                write!(f, "etcd member {ordinal} was added and has not started yet")
            }
            WaitReason::UnexpectedMember { peer_urls } => write!(
                f,
                "etcd member with peer URLs {peer_urls:?} is not one of the StatefulSet's pods"
            ),
        }
    }
}

/// The next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No StatefulSet yet: start all desired members at once as a new cluster.
    Bootstrap,
    /// The StatefulSet trails the membership (an earlier step was interrupted): resize it.
    Resize,
    /// Announce member `ordinal` (`member add` with `peer_url`), then start its pod.
    Add {
        ordinal: i32,
        peer_url: String,
    },
    /// Remove member `ordinal` (`member remove` of `id`), then stop its pod.
    Remove {
        ordinal: i32,
        id: u64,
    },
    Wait(WaitReason),
    /// The membership has the desired size and every member has started.
    Steady,
}

/// A step together with the objects it implies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub step: Step,
    /// Replicas of the StatefulSet once the step is done.
    pub replicas: i32,
    /// Members listed in `--initial-cluster` for a pod that starts now (ordinals `0..n`).
    pub initial_members: i32,
    pub state: ClusterState,
}

/// The next step from `observed` towards `desired` members of the etcd `names` owns.
pub fn plan(names: &Names, desired: i32, observed: &Observed) -> Plan {
    let Some(current) = observed.statefulset_replicas else {
        return Plan {
            step: Step::Bootstrap,
            replicas: desired,
            initial_members: desired,
            state: ClusterState::New,
        };
    };
    let state = observed.cluster_state.unwrap_or(ClusterState::Existing);
    let hold = |step: Step, state: ClusterState| Plan {
        step,
        replicas: current,
        initial_members: current,
        state,
    };
    let Some(members) = &observed.members else {
        return hold(Step::Wait(WaitReason::MembersUnknown), state);
    };
    let mut ordinals = Vec::with_capacity(members.len());
    for member in members {
        match ordinal_of(names, member) {
            Some(ordinal) => ordinals.push((ordinal, member)),
            None => {
                let reason = WaitReason::UnexpectedMember {
                    peer_urls: member.peer_urls.clone(),
                };
                return hold(Step::Wait(reason), state);
            }
        }
    }
    ordinals.sort_by_key(|(ordinal, _)| *ordinal);
    let count = ordinals.len() as i32;
    // Ordinals must be exactly 0..n: a gap or a duplicate means someone changed the membership.
    let misplaced = ordinals
        .iter()
        .enumerate()
        .find(|(index, (ordinal, _))| *ordinal != *index as i32);
    if let Some((_, (_, member))) = misplaced {
        let reason = WaitReason::UnexpectedMember {
            peer_urls: member.peer_urls.clone(),
        };
        return hold(Step::Wait(reason), state);
    }
    if count != current {
        // An add or remove went through but the StatefulSet was not resized: finish it.
        return Plan {
            step: Step::Resize,
            replicas: count,
            initial_members: count,
            state: ClusterState::Existing,
        };
    }
    if let Some((ordinal, _)) = ordinals.iter().find(|(_, member)| !member.started()) {
        return hold(
            Step::Wait(WaitReason::MemberStarting { ordinal: *ordinal }),
            state,
        );
    }
    // Every member has started, so no pod bootstraps any more: later pods join.
    let state = ClusterState::Existing;
    if count < desired {
        return Plan {
            step: Step::Add {
                ordinal: count,
                peer_url: names.etcd_peer_url(count),
            },
            replicas: count + 1,
            initial_members: count + 1,
            state,
        };
    }
    if count > desired
        && let Some((ordinal, member)) = ordinals.last()
    {
        return Plan {
            step: Step::Remove {
                ordinal: *ordinal,
                id: member.id,
            },
            replicas: count - 1,
            initial_members: count - 1,
            state,
        };
    }
    hold(Step::Steady, state)
}

/// The StatefulSet ordinal a member runs as, from its peer URL (names are empty until start).
fn ordinal_of(names: &Names, member: &Member) -> Option<i32> {
    let prefix = format!("https://{}-", names.etcd());
    let suffix = format!(
        ".{}:{}",
        names.etcd_service_host(),
        crate::naming::ETCD_PEER_PORT
    );
    member.peer_urls.iter().find_map(|url| {
        url.strip_prefix(&prefix)?
            .strip_suffix(&suffix)?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::Kind;

    fn names() -> Names {
        Names::new(Kind::RootShard, "root", "kcp", None)
    }

    fn member(ordinal: i32, started: bool) -> Member {
        Member {
            id: 100 + ordinal as u64,
            name: if started {
                names().etcd_member_name(ordinal)
            } else {
                String::new()
            },
            peer_urls: vec![names().etcd_peer_url(ordinal)],
        }
    }

    fn observed(replicas: i32, members: Vec<Member>) -> Observed {
        Observed {
            statefulset_replicas: Some(replicas),
            cluster_state: Some(ClusterState::Existing),
            members: Some(members),
        }
    }

    #[test]
    fn a_missing_statefulset_bootstraps_every_member_as_a_new_cluster() {
        let none = Observed {
            statefulset_replicas: None,
            cluster_state: None,
            members: None,
        };
        let plan = plan(&names(), 3, &none);
        assert_eq!(plan.step, Step::Bootstrap);
        assert_eq!((plan.replicas, plan.initial_members), (3, 3));
        assert_eq!(plan.state, ClusterState::New);
    }

    #[test]
    fn bootstrap_stays_new_until_every_member_has_started() {
        let mut starting = observed(3, vec![member(0, true), member(1, true), member(2, true)]);
        starting.cluster_state = Some(ClusterState::New);
        starting.members = None;
        let waiting = plan(&names(), 3, &starting);
        assert_eq!(waiting.step, Step::Wait(WaitReason::MembersUnknown));
        assert_eq!((waiting.replicas, waiting.state), (3, ClusterState::New));

        starting.members = Some(vec![member(0, true), member(1, true), member(2, true)]);
        let settled = plan(&names(), 3, &starting);
        assert_eq!(settled.step, Step::Steady);
        assert_eq!(settled.state, ClusterState::Existing);
    }

    #[test]
    fn growing_announces_the_next_ordinal_before_its_pod_starts() {
        let plan = plan(&names(), 3, &observed(1, vec![member(0, true)]));
        assert_eq!(
            plan.step,
            Step::Add {
                ordinal: 1,
                peer_url:
                    "https://root-rootshard-etcd-1.root-rootshard-etcd.kcp.svc.cluster.local:2380"
                        .into()
            }
        );
        assert_eq!((plan.replicas, plan.initial_members), (2, 2));
        assert_eq!(plan.state, ClusterState::Existing);
    }

    #[test]
    fn no_second_member_is_added_while_one_is_starting() {
        let plan = plan(
            &names(),
            3,
            &observed(2, vec![member(0, true), member(1, false)]),
        );
        assert_eq!(
            plan.step,
            Step::Wait(WaitReason::MemberStarting { ordinal: 1 })
        );
        assert_eq!(plan.replicas, 2);
    }

    #[test]
    fn shrinking_removes_the_highest_ordinal_first() {
        let members = vec![member(0, true), member(1, true), member(2, true)];
        let plan = plan(&names(), 1, &observed(3, members));
        assert_eq!(
            plan.step,
            Step::Remove {
                ordinal: 2,
                id: 102
            }
        );
        assert_eq!(plan.replicas, 2);
    }

    #[test]
    fn an_interrupted_step_is_finished_by_resizing_the_statefulset() {
        let after_add = plan(
            &names(),
            3,
            &observed(1, vec![member(0, true), member(1, false)]),
        );
        assert_eq!((after_add.step, after_add.replicas), (Step::Resize, 2));
        let after_remove = plan(
            &names(),
            1,
            &observed(3, vec![member(0, true), member(1, true)]),
        );
        assert_eq!(
            (after_remove.step, after_remove.replicas),
            (Step::Resize, 2)
        );
    }

    #[test]
    fn a_foreign_or_misplaced_member_stops_the_planner() {
        let mut stranger = member(1, true);
        stranger.peer_urls = vec!["https://elsewhere:2380".into()];
        let plan_a = plan(&names(), 3, &observed(2, vec![member(0, true), stranger]));
        assert!(matches!(
            plan_a.step,
            Step::Wait(WaitReason::UnexpectedMember { .. })
        ));
        let gap = plan(
            &names(),
            3,
            &observed(2, vec![member(0, true), member(2, true)]),
        );
        assert!(matches!(
            gap.step,
            Step::Wait(WaitReason::UnexpectedMember { .. })
        ));
    }

    /// Drives a simulated cluster with the planner: 1 -> 3 -> 5 -> 3 -> 1, one member at a time.
    #[test]
    fn scaling_walks_one_member_at_a_time_in_both_directions() {
        let names = names();
        let mut replicas = 1;
        let mut members = vec![member(0, true)];
        let mut history = Vec::new();
        for desired in [3, 5, 3, 1] {
            for _ in 0..20 {
                let plan = plan(&names, desired, &observed(replicas, members.clone()));
                match &plan.step {
                    Step::Add { ordinal, .. } => {
                        members.push(member(*ordinal, false));
                        history.push(format!("+{ordinal}"));
                    }
                    Step::Remove { id, ordinal } => {
                        members.retain(|m| m.id != *id);
                        history.push(format!("-{ordinal}"));
                    }
                    Step::Wait(WaitReason::MemberStarting { ordinal }) => {
                        // The pod the StatefulSet started joins.
                        assert!(*ordinal < replicas, "pod {ordinal} runs");
                        members[*ordinal as usize] = member(*ordinal, true);
                    }
                    Step::Steady => break,
                    other => panic!("unexpected step {other:?}"),
                }
                replicas = plan.replicas;
                assert!(
                    (replicas - members.len() as i32).abs() <= 1,
                    "StatefulSet and membership never differ by more than one"
                );
            }
            assert_eq!((replicas, members.len() as i32), (desired, desired));
        }
        assert_eq!(history, ["+1", "+2", "+3", "+4", "-4", "-3", "-2", "-1"]);
    }
}
