//! Kubernetes Events about pods and workloads (`kubectl describe` and `kubectl get events` show
//! why a pod does not start: unknown image, failing probe, back-off).
//!
//! Events are best effort: they are sent from their own task and a failure is only logged at
//! debug level, so a slow API never delays a container.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Api;
use kube::api::PostParams;

/// Who an event is about.
#[derive(Debug, Clone)]
pub struct Regarding {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// e.g. `spec.containers{app}`.
    pub field_path: Option<String>,
}

#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    node_name: String,
}

impl Events {
    pub fn new(client: kube::Client, node_name: &str) -> Events {
        Events {
            client,
            node_name: node_name.to_owned(),
        }
    }

    /// Records `reason`/`message` (`warning` for type Warning) about `regarding`.
    pub fn emit(&self, regarding: &Regarding, warning: bool, reason: &str, message: &str) {
        let now = jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name,
                    now.as_nanosecond().unsigned_abs()
                )),
                namespace: Some(regarding.namespace.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(regarding.api_version.clone()),
                kind: Some(regarding.kind.clone()),
                name: Some(regarding.name.clone()),
                namespace: Some(regarding.namespace.clone()),
                uid: Some(regarding.uid.clone()),
                field_path: regarding.field_path.clone(),
                ..Default::default()
            },
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(if warning { "Warning" } else { "Normal" }.to_owned()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            reporting_component: Some("kcp-node-agent".to_owned()),
            reporting_instance: Some(self.node_name.clone()),
            action: Some(reason.to_owned()),
            source: Some(EventSource {
                component: Some("kubelet".to_owned()),
                host: Some(self.node_name.clone()),
            }),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &regarding.namespace);
        tokio::spawn(async move {
            if let Err(error) = api.create(&PostParams::default(), &event).await {
                tracing::debug!(%error, "recording an event");
            }
        });
    }
}
