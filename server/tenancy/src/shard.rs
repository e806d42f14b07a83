//! `core.kcp.io` Shards as pure decisions: the object a shard registers for itself in `root`, its
//! heartbeat and capacity, who may claim a shard name, and whether a full shard may take one
//! more logical cluster.
//!
//! Upstream kcp's shards create their own `Shard` object (named after `--shard-name`, label
//! `name=<shard>`, `spec.baseURL`, `externalURL` and `virtualWorkspaceURL`) in the root logical
//! cluster and keep it up to date. Ours adds `status.capacity` (`logicalClusters`, and
//! `maxLogicalClusters` when `--max-logical-clusters` limits them; the shape of upstream's
//! `ResourceList`, so upstream clients still decode it), a `Ready` condition whose
//! `lastHeartbeatTime` moves at every heartbeat, and an annotation naming the process that
//! holds the name: a second live process registering under a name whose heartbeat is fresh is
//! refused instead of silently sharing it; a process that stops gracefully sets `Ready=False`,
//! which frees the name at once.

use kcp_apimachinery::time::{format_rfc3339, parse_rfc3339};
use serde_json::{Value, json};

pub const GROUP: &str = "core.kcp.io";
pub const RESOURCE: &str = "shards";
pub const VERSION: &str = "v1alpha1";
/// The shard name label every shard sets on its own object, as upstream.
pub const NAME_LABEL: &str = "name";
/// The root shard's name (`kcp start --shard-name`'s default): the shard that holds `root`.
pub const ROOT_SHARD_NAME: &str = "root";
/// Which process holds the shard name (ours): host, process id and start time.
pub const PROCESS_ANNOTATION: &str = "internal.core.kcp.io/shard-process";
/// Upstream's condition type and reason for a Workspace no shard takes.
pub const SCHEDULED_CONDITION: &str = "WorkspaceScheduled";
pub const UNSCHEDULABLE_REASON: &str = "Unschedulable";
/// The condition a live shard keeps `True` with a moving heartbeat.
pub const READY_CONDITION: &str = "Ready";

/// How a shard is reached: `spec` of its `Shard`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Urls {
    pub base: String,
    pub external: String,
    pub virtual_workspace: String,
}

impl Urls {
    /// Upstream's defaults: the external and virtual workspace URLs default to the base URL.
    pub fn with_defaults(
        base: String,
        external: Option<String>,
        virtual_workspace: Option<String>,
    ) -> Urls {
        Urls {
            external: external.unwrap_or_else(|| base.clone()),
            virtual_workspace: virtual_workspace.unwrap_or_else(|| base.clone()),
            base,
        }
    }
}

/// How many logical clusters a shard holds and may hold (`None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub logical_clusters: u64,
    pub max_logical_clusters: Option<u64>,
}

impl Capacity {
    /// Whether one more logical cluster fits.
    pub fn has_room(&self) -> bool {
        self.max_logical_clusters
            .is_none_or(|max| self.logical_clusters < max)
    }

    /// `status.capacity` of a `Shard` (`None` when it has none, e.g. before its first heartbeat).
    pub fn of(shard: &Value) -> Option<Capacity> {
        let capacity = shard.pointer("/status/capacity")?;
        Some(Capacity {
            logical_clusters: quantity(capacity.get("logicalClusters")?)?,
            max_logical_clusters: capacity.get("maxLogicalClusters").and_then(quantity),
        })
    }

    /// Room for how many more logical clusters (`None`: unlimited).
    pub fn headroom(&self) -> Option<u64> {
        self.max_logical_clusters
            .map(|max| max.saturating_sub(self.logical_clusters))
    }

    fn to_json(self) -> Value {
        let mut capacity = json!({"logicalClusters": self.logical_clusters});
        if let Some(max) = self.max_logical_clusters {
            capacity["maxLogicalClusters"] = json!(max);
        }
        capacity
    }
}

/// A `ResourceList` quantity as a count: a number, or a string of digits as upstream writes them.
fn quantity(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

/// The `Shard` a shard named `name` registers: metadata and spec (status is written apart).
pub fn object(name: &str, process: &str, urls: &Urls) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Shard",
        "metadata": {
            "name": name,
            "labels": {NAME_LABEL: name},
            "annotations": {PROCESS_ANNOTATION: process},
        },
        "spec": {
            "baseURL": urls.base,
            "externalURL": urls.external,
            "virtualWorkspaceURL": urls.virtual_workspace,
        },
    })
}

/// `existing` with this process's claim, label and URLs (the rest of the object kept).
pub fn claimed(existing: &Value, name: &str, process: &str, urls: &Urls) -> Value {
    let mut updated = existing.clone();
    set_metadata_entry(&mut updated, "labels", NAME_LABEL, name);
    set_metadata_entry(&mut updated, "annotations", PROCESS_ANNOTATION, process);
    updated["spec"] = object(name, process, urls)["spec"].take();
    updated
}

fn set_metadata_entry(object: &mut Value, map: &str, key: &str, value: &str) {
    let metadata = &mut object["metadata"];
    if !metadata[map].is_object() {
        metadata[map] = json!({});
    }
    metadata[map][key] = json!(value);
}

/// Why a process may not take a shard name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClaimError {
    #[error(
        "shard {name:?} is registered by another live process ({holder}, heartbeat {heartbeat}); \
         stop it or give this shard another --shard-name"
    )]
    HeldByLiveProcess {
        name: String,
        holder: String,
        heartbeat: String,
    },
}

/// Whether `process` may take over the existing `Shard` named `name`: yes when no other process
/// holds it, or when the holder's last heartbeat is older than `stale_after_seconds` at `now`
/// (a process that stopped, or crashed, gives its name up by no longer beating).
pub fn check_claim(
    existing: &Value,
    name: &str,
    process: &str,
    now: jiff::Timestamp,
    stale_after_seconds: i64,
) -> Result<(), ClaimError> {
    let holder = existing
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PROCESS_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if holder.is_empty() || holder == process {
        return Ok(());
    }
    if !is_live(existing, now, stale_after_seconds) {
        return Ok(());
    }
    let heartbeat = heartbeat_of(existing).unwrap_or_default();
    Err(ClaimError::HeldByLiveProcess {
        name: name.into(),
        holder: holder.into(),
        heartbeat: heartbeat.into(),
    })
}

/// The `lastHeartbeatTime` of a `Ready=True` condition.
fn heartbeat_of(shard: &Value) -> Option<&str> {
    ready_condition(shard)
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|c| c.get("lastHeartbeatTime"))
        .and_then(Value::as_str)
}

/// Whether the shard's process is alive at `now`: `Ready=True` with a heartbeat no older than
/// `stale_after_seconds` (a heartbeat that cannot be read says nothing about liveness).
pub fn is_live(shard: &Value, now: jiff::Timestamp, stale_after_seconds: i64) -> bool {
    heartbeat_of(shard)
        .and_then(|beat| parse_rfc3339(beat).ok())
        .is_some_and(|beat| now.as_second() - beat.as_second() <= stale_after_seconds)
}

fn ready_condition(shard: &Value) -> Option<&Value> {
    shard
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(READY_CONDITION))
}

/// `shard`'s status at a heartbeat at `now`: `Ready=True` with `lastHeartbeatTime = now`
/// (`lastTransitionTime` moves only when the status changes) and the current capacity.
pub fn heartbeat(shard: &Value, capacity: Capacity, now: jiff::Timestamp) -> Value {
    let now = format_rfc3339(now);
    let transition = ready_condition(shard)
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|c| c.get("lastTransitionTime"))
        .cloned()
        .unwrap_or_else(|| json!(now));
    let mut conditions: Vec<Value> = shard
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .filter(|c| c.get("type").and_then(Value::as_str) != Some(READY_CONDITION))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    conditions.push(json!({
        "type": READY_CONDITION,
        "status": "True",
        "reason": "Heartbeat",
        "message": "the shard is serving and registered",
        "lastTransitionTime": transition,
        "lastHeartbeatTime": now,
    }));
    let mut updated = shard.clone();
    updated["status"] = json!({"conditions": conditions, "capacity": capacity.to_json()});
    updated
}

/// The `WorkspaceScheduled=False` condition of a Workspace no shard takes now, saying why
/// (see [`crate::placement::Unschedulable`]).
pub fn unschedulable_condition(message: &str, now: jiff::Timestamp) -> Value {
    json!({
        "type": SCHEDULED_CONDITION,
        "status": "False",
        "severity": "Error",
        "reason": UNSCHEDULABLE_REASON,
        "message": message,
        "lastTransitionTime": format_rfc3339(now),
    })
}

/// `shard`'s status when its process stops gracefully: `Ready=False`, so the name is free at once
/// (a restart need not wait for the heartbeat to go stale).
pub fn stopped(shard: &Value, now: jiff::Timestamp) -> Value {
    let mut updated = shard.clone();
    let mut ready = ready_condition(shard).cloned().unwrap_or_else(|| json!({}));
    ready["type"] = json!(READY_CONDITION);
    ready["status"] = json!("False");
    ready["reason"] = json!("Stopped");
    ready["message"] = json!("the shard's process stopped");
    ready["lastTransitionTime"] = json!(format_rfc3339(now));
    set_condition(&mut updated, ready);
    updated
}

/// `WorkspaceScheduled=True`, which replaces a waiting Workspace's `False` once it is scheduled.
pub fn scheduled_condition(now: jiff::Timestamp) -> Value {
    json!({"type": SCHEDULED_CONDITION, "status": "True", "lastTransitionTime": format_rfc3339(now)})
}

/// Puts `condition` in `status.conditions` in place of the one of its type; whether anything but
/// the time changed (an unchanged condition keeps its `lastTransitionTime`).
pub fn set_condition(object: &mut Value, condition: Value) -> bool {
    let kind = condition.get("type").cloned();
    let without_time = |c: &Value| {
        let mut c = c.clone();
        if let Some(map) = c.as_object_mut() {
            map.remove("lastTransitionTime");
        }
        c
    };
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = object["status"]["conditions"].as_array_mut() else {
        return false;
    };
    match conditions
        .iter_mut()
        .find(|c| c.get("type") == kind.as_ref())
    {
        Some(existing) if without_time(existing) == without_time(&condition) => false,
        Some(existing) => {
            *existing = condition;
            true
        }
        None => {
            conditions.push(condition);
            true
        }
    }
}

/// Whether `object` carries condition `kind` with status `False`.
pub fn condition_is_false(object: &Value, kind: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|all| {
            all.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("False")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> jiff::Timestamp {
        parse_rfc3339(s).unwrap()
    }

    fn urls() -> Urls {
        Urls::with_defaults("https://127.0.0.1:6443".into(), None, None)
    }

    #[test]
    fn urls_default_to_the_base_url() {
        let urls = Urls::with_defaults("https://a".into(), Some("https://proxy".into()), None);
        assert_eq!(urls.external, "https://proxy");
        assert_eq!(urls.virtual_workspace, "https://a");
    }

    #[test]
    fn capacity_has_room_until_the_limit() {
        let mut capacity = Capacity {
            logical_clusters: 2,
            max_logical_clusters: Some(3),
        };
        assert!(capacity.has_room());
        capacity.logical_clusters = 3;
        assert!(!capacity.has_room());
        capacity.max_logical_clusters = None;
        assert!(capacity.has_room());
    }

    #[test]
    fn the_object_is_named_and_labelled_after_the_shard() {
        let shard = object("shard-1", "host_1_a", &urls());
        assert_eq!(shard["metadata"]["labels"]["name"], "shard-1");
        assert_eq!(shard["spec"]["externalURL"], "https://127.0.0.1:6443");
        let mut edited = shard.clone();
        edited["metadata"]["labels"] = json!({"region": "eu"});
        edited["spec"]["baseURL"] = json!("https://old");
        let claimed = claimed(&edited, "shard-1", "host_2_b", &urls());
        assert_eq!(
            claimed["metadata"]["labels"],
            json!({"region": "eu", "name": "shard-1"})
        );
        assert_eq!(
            claimed["metadata"]["annotations"][PROCESS_ANNOTATION],
            "host_2_b"
        );
        assert_eq!(claimed["spec"]["baseURL"], "https://127.0.0.1:6443");
    }

    #[test]
    fn the_heartbeat_moves_and_the_transition_stays() {
        let shard = object("root", "p", &urls());
        let capacity = Capacity {
            logical_clusters: 1,
            max_logical_clusters: Some(5),
        };
        let first = heartbeat(&shard, capacity, at("2026-01-01T00:00:00Z"));
        let second = heartbeat(&first, capacity, at("2026-01-01T00:00:30Z"));
        let ready = &second["status"]["conditions"][0];
        assert_eq!(ready["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:30Z");
        assert_eq!(
            second["status"]["capacity"],
            json!({"logicalClusters": 1, "maxLogicalClusters": 5})
        );
    }

    #[test]
    fn a_fresh_heartbeat_of_another_process_refuses_the_claim() {
        let live = heartbeat(
            &object("shard-1", "first", &urls()),
            Capacity {
                logical_clusters: 0,
                max_logical_clusters: None,
            },
            at("2026-01-01T00:00:00Z"),
        );
        let error =
            check_claim(&live, "shard-1", "second", at("2026-01-01T00:00:40Z"), 90).unwrap_err();
        assert!(error.to_string().contains("another live process (first"));
        assert_eq!(
            check_claim(&live, "shard-1", "first", at("2026-01-01T00:00:40Z"), 90),
            Ok(())
        );
        assert_eq!(
            check_claim(&live, "shard-1", "second", at("2026-01-01T00:02:00Z"), 90),
            Ok(())
        );
        let released = stopped(&live, at("2026-01-01T00:00:10Z"));
        assert_eq!(
            check_claim(
                &released,
                "shard-1",
                "second",
                at("2026-01-01T00:00:20Z"),
                90
            ),
            Ok(())
        );
        assert_eq!(released["status"]["capacity"], live["status"]["capacity"]);
        let unclaimed = json!({"metadata": {"name": "shard-1"}});
        assert_eq!(
            check_claim(
                &unclaimed,
                "shard-1",
                "second",
                at("2026-01-01T00:00:00Z"),
                90
            ),
            Ok(())
        );
    }

    #[test]
    fn conditions_are_replaced_by_type_and_keep_their_time_when_unchanged() {
        let full = |now| unschedulable_condition("no room", now);
        let mut ws = json!({"metadata": {"name": "a"}, "status": {"phase": "Scheduling"}});
        assert!(set_condition(&mut ws, full(at("2026-01-01T00:00:00Z"))));
        assert!(!set_condition(&mut ws, full(at("2026-01-01T00:01:00Z"))));
        assert_eq!(
            ws["status"]["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
        assert!(condition_is_false(&ws, SCHEDULED_CONDITION));
        assert!(set_condition(
            &mut ws,
            scheduled_condition(at("2026-01-01T00:02:00Z"))
        ));
        assert!(!condition_is_false(&ws, SCHEDULED_CONDITION));
        assert_eq!(ws["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn capacity_is_read_back_from_the_status() {
        let shard = heartbeat(
            &object("a", "p", &urls()),
            Capacity {
                logical_clusters: 2,
                max_logical_clusters: Some(5),
            },
            at("2026-01-01T00:00:00Z"),
        );
        let capacity = Capacity::of(&shard).unwrap();
        assert_eq!(capacity.headroom(), Some(3));
        let upstream = json!({"status": {"capacity": {"logicalClusters": "4"}}});
        assert_eq!(
            Capacity::of(&upstream),
            Some(Capacity {
                logical_clusters: 4,
                max_logical_clusters: None
            })
        );
        assert_eq!(Capacity::of(&upstream).unwrap().headroom(), None);
        assert_eq!(Capacity::of(&json!({})), None);
    }

    #[test]
    fn a_shard_is_live_while_its_heartbeat_is_fresh() {
        let shard = heartbeat(
            &object("a", "p", &urls()),
            Capacity {
                logical_clusters: 0,
                max_logical_clusters: None,
            },
            at("2026-01-01T00:00:00Z"),
        );
        assert!(is_live(&shard, at("2026-01-01T00:01:30Z"), 90));
        assert!(!is_live(&shard, at("2026-01-01T00:01:31Z"), 90));
        let stopped = stopped(&shard, at("2026-01-01T00:00:01Z"));
        assert!(!is_live(&stopped, at("2026-01-01T00:00:02Z"), 90));
        assert!(!is_live(
            &object("a", "p", &urls()),
            at("2026-01-01T00:00:00Z"),
            90
        ));
    }
}
