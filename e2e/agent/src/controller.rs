//! What the Deployment and StatefulSet controllers share: pods from templates, the pods a
//! workload owns, status writing, and *expectations*.
//!
//! Watch caches lag behind the controller's own writes: right after creating a pod the cache may
//! not show it, and a second pass would create another. Like kube-controller-manager, the
//! controllers remember the creations and deletions they made until the cache shows them (or a
//! bound passes), and plan against the cache corrected by those.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::Value;

use crate::context::Cache;

/// After this long an expectation is dropped even if the cache never confirmed it.
const EXPECTATION_TTL: Duration = Duration::from_secs(30);

/// The field manager of every write the agent makes.
pub const MANAGER: &str = "kcp-node-agent";

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The controlling owner's uid of `meta`.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// A controller owner reference to `kind` `name` (`uid`).
pub fn owner_reference(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A pod made from `template`, named `name`, owned by `owner`, scheduled on `node`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    name: &str,
    owner: OwnerReference,
    extra_labels: BTreeMap<String, String>,
    node: &str,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.extend(extra_labels);
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.node_name = Some(node.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[derive(Default)]
pub struct Expectations {
    /// Pods created and not yet seen in the cache.
    creates: HashMap<String, (Arc<Pod>, Instant)>,
    /// uids deleted and still in the cache.
    deletes: HashMap<String, Instant>,
}

impl Expectations {
    /// Forgets what the cache now confirms, and what is too old.
    pub fn observe(&mut self, cache: &Cache) {
        let now = Instant::now();
        let pods = cache.pods.state();
        self.creates.retain(|key, (_, at)| {
            now.duration_since(*at) < EXPECTATION_TTL && !pods.iter().any(|p| pod_key(p) == *key)
        });
        self.deletes.retain(|uid, at| {
            now.duration_since(*at) < EXPECTATION_TTL
                && pods
                    .iter()
                    .any(|p| p.metadata.uid.as_deref() == Some(uid.as_str()))
        });
    }

    /// The pods controlled by `owner_uid`: the cache, plus pending creations, minus pending
    /// deletions.
    pub fn owned_pods(&self, cache: &Cache, owner_uid: &str) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = cache
            .pods
            .state()
            .into_iter()
            .filter(|p| controller_uid(&p.metadata) == Some(owner_uid))
            .filter(|p| {
                p.metadata
                    .uid
                    .as_ref()
                    .is_none_or(|uid| !self.deletes.contains_key(uid))
            })
            .collect();
        for (key, (pod, _)) in &self.creates {
            if controller_uid(&pod.metadata) == Some(owner_uid)
                && !pods.iter().any(|p| pod_key(p) == *key)
            {
                pods.push(pod.clone());
            }
        }
        pods
    }

    /// Whether the pod with `uid` was deleted by a controller and the cache still shows it.
    pub fn deleting(&self, uid: &str) -> bool {
        self.deletes.contains_key(uid)
    }

    /// Creates `pod` and remembers it.
    pub async fn create_pod(&mut self, client: &kube::Client, pod: Pod) -> Result<(), kube::Error> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let created = api.create(&PostParams::default(), &pod).await?;
        tracing::info!(pod = %pod_key(&created), "created pod");
        self.creates
            .insert(pod_key(&created), (Arc::new(created), Instant::now()));
        Ok(())
    }

    /// Deletes `pod` (only that incarnation: uid precondition) and remembers it.
    pub async fn delete_pod(
        &mut self,
        client: &kube::Client,
        pod: &Pod,
    ) -> Result<(), kube::Error> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(error) => return Err(error),
        }
        tracing::info!(pod = %pod_key(pod), "deleted pod");
        if let Some(uid) = &pod.metadata.uid {
            self.deletes.insert(uid.clone(), Instant::now());
        }
        self.creates.remove(&pod_key(pod));
        Ok(())
    }
}

/// Label `key` of `meta`, empty when unset.
pub fn label(meta: &ObjectMeta, key: &str) -> String {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

/// A status count as the real controllers write it: zero is omitted (`null` deletes it in a
/// merge patch).
pub fn omit_zero(value: i32) -> Value {
    if value == 0 {
        Value::Null
    } else {
        serde_json::json!(value)
    }
}

/// Merge-patches the status subresource of `api`'s `name`.
pub async fn patch_status<K>(api: &Api<K>, name: &str, status: Value) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// Replaces `null` members (which a merge patch uses to delete) so two statuses compare by what
/// the object will hold.
pub fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Whether `current` (the object's status) already holds everything in `desired`.
pub fn status_matches(current: &Value, desired: &Value) -> bool {
    let desired = without_nulls(desired);
    let Value::Object(fields) = &desired else {
        return current == &desired;
    };
    let current_fields = current.as_object();
    // Every desired field equal, and no field present that desired deletes.
    fields.iter().all(|(k, v)| current.get(k) == Some(v))
        && current_fields.is_none_or(|c| {
            c.keys()
                .all(|k| fields.contains_key(k) || !managed_status_field(k))
        })
}

/// Status fields the agent writes (others, written by someone else, are left alone).
fn managed_status_field(name: &str) -> bool {
    matches!(
        name,
        "observedGeneration"
            | "replicas"
            | "updatedReplicas"
            | "readyReplicas"
            | "availableReplicas"
            | "unavailableReplicas"
            | "currentReplicas"
            | "currentRevision"
            | "updateRevision"
            | "collisionCount"
            | "conditions"
            | "labelSelector"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_comparison_ignores_nulls() {
        let current = serde_json::json!({"replicas": 2, "observedGeneration": 1});
        assert!(status_matches(
            &current,
            &serde_json::json!({"replicas": 2, "observedGeneration": 1, "readyReplicas": null})
        ));
        assert!(!status_matches(
            &current,
            &serde_json::json!({"replicas": 2, "observedGeneration": 2})
        ));
        // A field the desired status deletes is a difference.
        assert!(!status_matches(
            &serde_json::json!({"replicas": 2, "readyReplicas": 1}),
            &serde_json::json!({"replicas": 2, "readyReplicas": null})
        ));
    }

    #[test]
    fn pods_from_templates() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                ..Default::default()
            }),
            spec: Some(Default::default()),
        };
        let pod = pod_from_template(
            &template,
            "ns",
            "web-abc-xyz12",
            owner_reference("apps/v1", "Deployment", "web", "u1"),
            BTreeMap::from([("pod-template-hash".to_owned(), "abc".to_owned())]),
            "node",
        );
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels["pod-template-hash"], "abc");
        assert_eq!(controller_uid(&pod.metadata), Some("u1"));
        assert_eq!(pod.spec.and_then(|s| s.node_name).as_deref(), Some("node"));
    }
}
