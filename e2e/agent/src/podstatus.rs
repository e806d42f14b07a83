//! What a running pod looks like: the runtime state the pod worker keeps, and the `Pod.status` it
//! is published as.
//!
//! The state is what the agent knows (phase, each container's state, probe results); the status
//! is what clients read (`kubectl get pods`, the Deployment and StatefulSet controllers, the
//! operator), in the shape kubelet writes it: conditions `PodReadyToStartContainers`,
//! `Initialized`, `Ready`, `ContainersReady`, `PodScheduled` with transition times, and
//! `containerStatuses` with `state`, `lastState`, `ready`, `started`, `restartCount`. Rendering is
//! pure so the shape is unit-tested.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::clock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// One state of a container, as `ContainerState` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerPhase {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: Timestamp,
    },
    Terminated {
        exit_code: i32,
        signal: Option<i32>,
        reason: String,
        message: Option<String>,
        started_at: Option<Timestamp>,
        finished_at: Timestamp,
    },
}

impl ContainerPhase {
    fn to_json(&self) -> Value {
        match self {
            ContainerPhase::Waiting { reason, message } => {
                let mut waiting = json!({ "reason": reason });
                if let Some(message) = message {
                    waiting["message"] = json!(message);
                }
                json!({ "waiting": waiting })
            }
            ContainerPhase::Running { started_at } => {
                json!({ "running": { "startedAt": clock::format(*started_at) } })
            }
            ContainerPhase::Terminated {
                exit_code,
                signal,
                reason,
                message,
                started_at,
                finished_at,
            } => {
                let mut terminated = json!({
                    "exitCode": exit_code,
                    "reason": reason,
                    "finishedAt": clock::format(*finished_at),
                });
                if let Some(signal) = signal {
                    terminated["signal"] = json!(signal);
                }
                if let Some(message) = message {
                    terminated["message"] = json!(message);
                }
                if let Some(started_at) = started_at {
                    terminated["startedAt"] = json!(clock::format(*started_at));
                }
                json!({ "terminated": terminated })
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    pub name: String,
    pub image: String,
    pub state: ContainerPhase,
    pub last_state: Option<ContainerPhase>,
    pub ready: bool,
    pub started: bool,
    pub restart_count: i32,
    pub pid: Option<u32>,
}

impl ContainerState {
    pub fn new(name: &str, image: &str) -> ContainerState {
        ContainerState {
            name: name.to_owned(),
            image: image.to_owned(),
            state: ContainerPhase::Waiting {
                reason: "ContainerCreating".into(),
                message: None,
            },
            last_state: None,
            ready: false,
            started: false,
            restart_count: 0,
            pid: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut status = json!({
            "name": self.name,
            "image": self.image,
            "imageID": format!("kcp-node-agent://{}", self.image),
            "ready": self.ready,
            "restartCount": self.restart_count,
            "started": self.started,
            "state": self.state.to_json(),
            "lastState": self.last_state.as_ref().map_or(json!({}), ContainerPhase::to_json),
        });
        if let Some(pid) = self.pid {
            status["containerID"] = json!(format!("kcp-node-agent://{pid}"));
        }
        status
    }
}

/// The pod as its worker knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodState {
    pub phase: Phase,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub start_time: Timestamp,
    pub sandbox_ready: bool,
    pub initialized: bool,
    pub init_containers: Vec<ContainerState>,
    pub containers: Vec<ContainerState>,
    /// Last transition time of each condition type and its status.
    transitions: BTreeMap<&'static str, (bool, Timestamp)>,
}

impl PodState {
    pub fn new(init_containers: Vec<ContainerState>, containers: Vec<ContainerState>) -> PodState {
        let now = clock::now();
        let mut state = PodState {
            phase: Phase::Pending,
            reason: None,
            message: None,
            start_time: now,
            sandbox_ready: false,
            initialized: false,
            init_containers,
            containers,
            transitions: BTreeMap::new(),
        };
        state.refresh_conditions_at(now);
        state
    }

    /// All containers ready (and there is at least one).
    pub fn containers_ready(&self) -> bool {
        !self.containers.is_empty() && self.containers.iter().all(|c| c.ready)
    }

    pub fn ready(&self) -> bool {
        self.phase == Phase::Running && self.initialized && self.containers_ready()
    }

    /// Records transitions after a change; call after every mutation.
    pub fn refresh_conditions(&mut self) {
        self.refresh_conditions_at(clock::now());
    }

    fn refresh_conditions_at(&mut self, now: Timestamp) {
        let values = [
            ("PodScheduled", true),
            ("PodReadyToStartContainers", self.sandbox_ready),
            ("Initialized", self.initialized),
            ("ContainersReady", self.containers_ready()),
            ("Ready", self.ready()),
        ];
        for (kind, value) in values {
            match self.transitions.get(kind) {
                Some((old, _)) if *old == value => {}
                _ => {
                    self.transitions.insert(kind, (value, now));
                }
            }
        }
    }

    /// When the Ready condition last changed, and to what.
    #[cfg(test)]
    pub fn ready_transition(&self) -> Option<(bool, Timestamp)> {
        self.transitions.get("Ready").copied()
    }

    /// The `status` object of the Pod; explicit nulls clear fields a merge patch would keep.
    pub fn to_status(&self, pod_ip: Option<Ipv4Addr>, host_ip: Ipv4Addr) -> Value {
        let condition = |kind: &'static str, reason: Option<&str>| {
            let (value, at) = self
                .transitions
                .get(kind)
                .copied()
                .unwrap_or((false, self.start_time));
            let mut c = json!({
                "type": kind,
                "status": if value { "True" } else { "False" },
                "lastProbeTime": null,
                "lastTransitionTime": clock::format(at),
            });
            if let (false, Some(reason)) = (value, reason) {
                c["reason"] = json!(reason);
            }
            c
        };
        let not_ready = self
            .containers
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>();
        let init_pending = self
            .init_containers
            .iter()
            .filter(|c| !matches!(c.state, ContainerPhase::Terminated { exit_code: 0, .. }))
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>();
        let mut conditions = vec![
            condition("PodReadyToStartContainers", None),
            condition("Initialized", Some("ContainersNotInitialized")),
            condition("Ready", Some("ContainersNotReady")),
            condition("ContainersReady", Some("ContainersNotReady")),
            condition("PodScheduled", None),
        ];
        if !self.initialized && !init_pending.is_empty() {
            conditions[1]["message"] = json!(format!(
                "containers with incomplete status: [{}]",
                init_pending.join(" ")
            ));
        }
        if !not_ready.is_empty() {
            let message = format!("containers with unready status: [{}]", not_ready.join(" "));
            conditions[2]["message"] = json!(message.clone());
            conditions[3]["message"] = json!(message);
        }
        let ip_list = |ip: Option<Ipv4Addr>| match ip {
            Some(ip) => json!([{ "ip": ip.to_string() }]),
            None => Value::Null,
        };
        json!({
            "phase": self.phase.as_str(),
            "reason": self.reason,
            "message": self.message,
            "conditions": conditions,
            "hostIP": host_ip.to_string(),
            "hostIPs": ip_list(Some(host_ip)),
            "podIP": pod_ip.map(|ip| ip.to_string()),
            "podIPs": ip_list(pod_ip),
            "startTime": clock::format(self.start_time),
            "qosClass": "BestEffort",
            "initContainerStatuses": if self.init_containers.is_empty() {
                Value::Null
            } else {
                Value::Array(self.init_containers.iter().map(ContainerState::to_json).collect())
            },
            "containerStatuses": self.containers.iter().map(ContainerState::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Whether a Pod object is ready, and whether it is available: ready for at least
/// `min_ready_seconds` at `now` (what the Deployment and StatefulSet controllers count).
pub fn ready_and_available(
    pod: &k8s_openapi::api::core::v1::Pod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> (bool, bool) {
    let ready_since = ready_since(pod);
    let available = ready_since.is_some_and(|since| {
        min_ready_seconds <= 0 || clock::seconds_between(since, now) >= f64::from(min_ready_seconds)
    });
    (ready_since.is_some(), available)
}

/// Whether a Pod object's status says Running and Ready, and since when it is Ready.
fn ready_since(pod: &k8s_openapi::api::core::v1::Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(
        ready
            .last_transition_time
            .as_ref()
            .map_or_else(clock::now, |t| t.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_then_ready() {
        let mut state = PodState::new(vec![], vec![ContainerState::new("app", "img:1")]);
        let host = Ipv4Addr::new(10, 0, 0, 1);
        let status = state.to_status(None, host);
        assert_eq!(status["phase"], "Pending");
        assert_eq!(status["podIP"], Value::Null);
        assert_eq!(status["conditions"][2]["type"], "Ready");
        assert_eq!(status["conditions"][2]["status"], "False");
        assert_eq!(status["conditions"][2]["reason"], "ContainersNotReady");
        assert_eq!(
            status["conditions"][2]["message"],
            "containers with unready status: [app]"
        );
        assert_eq!(
            status["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert!(state.ready_transition().is_some_and(|(ready, _)| !ready));

        state.phase = Phase::Running;
        state.sandbox_ready = true;
        state.initialized = true;
        state.containers[0].state = ContainerPhase::Running {
            started_at: clock::now(),
        };
        state.containers[0].ready = true;
        state.containers[0].started = true;
        state.containers[0].pid = Some(42);
        state.refresh_conditions();
        assert!(state.ready());
        let status = state.to_status(Some(Ipv4Addr::new(10, 0, 0, 5)), host);
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["podIP"], "10.0.0.5");
        assert_eq!(status["podIPs"][0]["ip"], "10.0.0.5");
        assert_eq!(status["hostIP"], "10.0.0.1");
        assert_eq!(status["conditions"][2]["status"], "True");
        assert!(status["conditions"][2].get("reason").is_none());
        assert_eq!(status["containerStatuses"][0]["ready"], true);
        assert_eq!(
            status["containerStatuses"][0]["containerID"],
            "kcp-node-agent://42"
        );
        assert_eq!(status["initContainerStatuses"], Value::Null);
        assert!(state.ready_transition().is_some_and(|(ready, _)| ready));
    }

    #[test]
    fn terminated_state_shape() {
        let state = ContainerPhase::Terminated {
            exit_code: 1,
            signal: None,
            reason: "Error".into(),
            message: None,
            started_at: None,
            finished_at: clock::parse("2024-01-01T00:00:00Z").expect("ts"),
        };
        assert_eq!(
            state.to_json(),
            json!({"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2024-01-01T00:00:00Z"}})
        );
    }
}
