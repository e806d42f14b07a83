//! What a failed reconcile tells people: a short, valid Event note and a `Degraded` condition on
//! the custom resource. The full error chain (with the API server's whole Status) goes to the log
//! once; a real API server refuses an Event whose note is longer than 1024 characters (422), so
//! notes are one line and bounded, and the condition is written before (and regardless of) the
//! Event, so a failed reconcile is always visible in `kubectl get` (upstream kcp-operator also
//! reports reconcile errors in its conditions). `status::write_failure` writes the condition.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::conditions::DEGRADED;
use crate::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard, VirtualWorkspace};

use super::status::{Wanted, conditions};
use super::{Error, Watched};

/// The longest Event note a Kubernetes API server accepts.
pub const MAX_NOTE: usize = 1024;

/// `text` on one line and at most [`MAX_NOTE`] characters (cut with `...`).
pub fn bounded(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= MAX_NOTE {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_NOTE - 3).collect();
    cut.push_str("...");
    cut
}

/// One line for people: what failed and, for an API error, the server's message and code,
/// never a debug dump of its Status.
pub fn summary(error: &Error) -> String {
    let detail = match error {
        Error::Kube(kube::Error::Api(status)) | Error::Kcp(kube::Error::Api(status)) => {
            Some(format!("{} ({})", status.message, status.code))
        }
        Error::Kube(_) | Error::Kcp(_) => None,
        other => std::error::Error::source(other).map(ToString::to_string),
    };
    bounded(&match detail {
        Some(detail) => format!("{error}: {detail}"),
        None => error.to_string(),
    })
}

/// A custom resource whose status holds conditions.
pub trait Conditioned: Watched {
    fn conditions(&self) -> &[Condition];
}

macro_rules! conditioned {
    ($($kind:ty => $($field:ident).+),*) => {$(
        impl Conditioned for $kind {
            fn conditions(&self) -> &[Condition] {
                self.status.as_ref().map_or(&[], |status| &status.$($field).+)
            }
        }
    )*};
}

conditioned!(
    RootShard => component.conditions,
    Shard => conditions,
    FrontProxy => component.conditions,
    CacheServer => conditions,
    Kubeconfig => conditions,
    VirtualWorkspace => conditions
);

/// The conditions of `object` with `Degraded` set for `error` (the others kept as they are).
/// A `Degraded` condition that already names the same reason is kept as it is: each status
/// write triggers another reconcile, so a message that differs on every failure (a server's
/// message naming a resourceVersion) must not turn the backoff into a hot loop.
pub fn degraded<K: Conditioned>(object: &K, error: &Error, now: Timestamp) -> Vec<Condition> {
    let previous = object.conditions();
    let reason = error.reason();
    let known = previous.iter().any(|condition| {
        condition.type_ == DEGRADED
            && condition.status == "True"
            && condition.reason == reason
            && condition.observed_generation == object.meta().generation
    });
    if known {
        return previous.to_vec();
    }
    let wanted = Wanted::new(DEGRADED, true, reason, summary(error));
    let mut next: Vec<Condition> = previous
        .iter()
        .filter(|condition| condition.type_ != DEGRADED)
        .cloned()
        .collect();
    next.extend(conditions(
        previous,
        vec![wanted],
        object.meta().generation,
        now,
    ));
    next
}

#[cfg(test)]
mod tests {
    use kube::core::Status;
    use serde_json::json;

    use super::*;

    fn api_error(message: String) -> Error {
        Error::Kube(kube::Error::Api(Box::new(Status {
            code: 422,
            message,
            reason: "Invalid".into(),
            ..Status::default()
        })))
    }

    #[test]
    fn an_api_error_is_one_short_line_without_the_status_dump() {
        let note = summary(&api_error("events \"x\" is invalid\nsecond line".into()));
        assert_eq!(
            note,
            "Kubernetes API request failed: events \"x\" is invalid second line (422)"
        );
        let long = summary(&api_error("x".repeat(5000)));
        assert_eq!(long.chars().count(), MAX_NOTE);
        assert!(long.ends_with("..."));
        assert!(!long.contains("Status {"));
    }

    #[test]
    fn a_failure_sets_degraded_and_keeps_the_other_conditions() {
        let mut shard: Shard = serde_json::from_value(json!({
            "apiVersion": "operator.kcp.io/v1alpha1",
            "kind": "Shard",
            "metadata": {"name": "s", "namespace": "kcp", "generation": 2},
            "spec": {"rootShard": {"ref": {"name": "r"}}, "etcd": {"endpoints": ["https://etcd:2379"]}},
            "status": {"conditions": [
                {"type": "Available", "status": "True", "reason": "ReplicasUp", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]}
        }))
        .expect("shard");
        let now: Timestamp = "2026-02-01T00:00:00Z".parse().expect("time");
        let next = degraded(&shard, &api_error("boom".into()), now);
        assert_eq!(next.len(), 2);
        assert_eq!(next[0].type_, "Available");
        assert_eq!(
            (
                next[1].type_.as_str(),
                next[1].status.as_str(),
                next[1].reason.as_str()
            ),
            ("Degraded", "True", "ApiError")
        );
        assert_eq!(next[1].observed_generation, Some(2));
        if let Some(status) = shard.status.as_mut() {
            status.conditions = next.clone();
        }
        assert_eq!(
            degraded(&shard, &api_error("boom again".into()), now),
            next,
            "another failure of the same reason changes nothing"
        );
        let other = Error::Invalid("bad".into());
        assert_eq!(degraded(&shard, &other, now)[1].reason, "InvalidSpec");
    }
}
