//! Server-side apply that writes nothing when nothing changed.
//!
//! Every child is read first; when the live object already contains every field the operator
//! wants (the server adds defaults, so "contains" rather than "equals"), no request is sent.
//! Otherwise the object is applied with field manager `kcp-operator` and `force`, so the
//! operator wins conflicts over fields it owns. Reading first keeps a quiet reconcile free of
//! writes (no audit noise, no resourceVersion churn) and tells creates from updates for events.

use std::fmt::Debug;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::Value;

use crate::naming::FIELD_MANAGER;
use crate::render::children::Child;

use super::{Error, Watched};

/// What applying one object did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
}

/// One applied object and the live version the server returned (or already had).
#[derive(Clone, Debug)]
pub struct Applied<K> {
    pub outcome: Outcome,
    pub live: K,
}

/// `true` when every field of `desired` has the same value in `live`; lists must match
/// element by element.
pub fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired.iter().all(|(key, value)| {
            live.get(key)
                .is_some_and(|live_value| contains(live_value, value))
                || (value.is_null() && !live.contains_key(key))
        }),
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len()
                && live
                    .iter()
                    .zip(desired)
                    .all(|(live, desired)| contains(live, desired))
        }
        (live, desired) => live == desired,
    }
}

/// Reads `object`, and applies it unless the live object already contains it.
pub async fn apply<K>(client: &Client, object: &K) -> Result<Applied<K>, Error>
where
    K: Watched + Serialize,
{
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    let existing = api.get_opt(&name).await.map_err(Error::Kube)?;
    let desired = serde_json::to_value(object).map_err(Error::Serialize)?;
    if let Some(live) = existing.as_ref() {
        let live_value = serde_json::to_value(live).map_err(Error::Serialize)?;
        if contains(&live_value, &desired) {
            return Ok(Applied {
                outcome: Outcome::Unchanged,
                live: live.clone(),
            });
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let live = api
        .patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(Error::Kube)?;
    tracing::info!(kind = K::kind(&()).as_ref(), %namespace, %name, created = existing.is_none(), "applied");
    Ok(Applied {
        outcome: if existing.is_none() {
            Outcome::Created
        } else {
            Outcome::Updated
        },
        live,
    })
}

/// The result of applying a list of children.
#[derive(Clone, Debug, Default)]
pub struct AppliedChildren {
    /// `Kind/name` of every object that did not exist before.
    pub created: Vec<String>,
    /// The workload's live Deployment, for availability.
    pub deployment: Option<k8s_openapi::api::apps::v1::Deployment>,
    /// The live StatefulSet of a managed etcd.
    pub statefulset: Option<k8s_openapi::api::apps::v1::StatefulSet>,
}

fn label(kind: &str, name: Option<&String>) -> String {
    format!("{kind}/{}", name.map(String::as_str).unwrap_or_default())
}

/// Applies children in order (configuration before the workloads that mount it).
pub async fn apply_children(client: &Client, children: &[Child]) -> Result<AppliedChildren, Error> {
    let mut result = AppliedChildren::default();
    for child in children {
        let (outcome, name) = match child {
            Child::Secret(o) => (
                apply(client, o).await?.outcome,
                label("Secret", o.metadata.name.as_ref()),
            ),
            Child::ConfigMap(o) => (
                apply(client, o).await?.outcome,
                label("ConfigMap", o.metadata.name.as_ref()),
            ),
            Child::Service(o) => (
                apply(client, o).await?.outcome,
                label("Service", o.metadata.name.as_ref()),
            ),
            Child::PodDisruptionBudget(o) => (
                apply(client, o).await?.outcome,
                label("PodDisruptionBudget", o.metadata.name.as_ref()),
            ),
            Child::Deployment(o) => {
                let applied = apply(client, o).await?;
                result.deployment = Some(applied.live);
                (
                    applied.outcome,
                    label("Deployment", o.metadata.name.as_ref()),
                )
            }
            Child::StatefulSet(o) => {
                let applied = apply(client, o).await?;
                result.statefulset = Some(applied.live);
                (
                    applied.outcome,
                    label("StatefulSet", o.metadata.name.as_ref()),
                )
            }
        };
        if outcome == Outcome::Created {
            result.created.push(name);
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::contains;

    #[test]
    fn server_defaults_do_not_count_as_a_change() {
        let live = json!({"spec": {"replicas": 2, "strategy": {"type": "RollingUpdate"}, "ports": [{"port": 1, "protocol": "TCP"}]}});
        assert!(contains(
            &live,
            &json!({"spec": {"replicas": 2, "ports": [{"port": 1}]}})
        ));
        assert!(!contains(&live, &json!({"spec": {"replicas": 3}})));
        assert!(!contains(
            &live,
            &json!({"spec": {"ports": [{"port": 1}, {"port": 2}]}})
        ));
        assert!(!contains(&live, &json!({"spec": {"paused": true}})));
    }
}
