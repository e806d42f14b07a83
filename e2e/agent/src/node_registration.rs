//! The agent's `Node`, as kubelet registers its own: named by `--node-name`, with
//! `status.addresses` (`InternalIP`: the bridge address, where the kubelet port listens;
//! `Hostname`: the node name) and `status.daemonEndpoints.kubeletEndpoint.Port`, and a `Ready`
//! condition whose `lastHeartbeatTime` moves every [`HEARTBEAT`] (kubelet's
//! `nodeStatusUpdateFrequency`). The API server finds the kubelet port of a pod's node through
//! it, as kube-apiserver does. When the agent stops, `Ready` turns `False`; the object stays, as
//! a stopped kubelet's does.
//!
//! Written with server-side apply (manager `kcp-node-agent`): the object, then its status.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::error::Result;

/// How often the Ready condition's heartbeat is written.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

const MANAGER: &str = "kcp-node-agent";

/// What the Node says about this agent.
#[derive(Debug, Clone)]
pub struct NodeRecord {
    pub name: String,
    pub internal_ip: Ipv4Addr,
    /// The kubelet port (0 when the kubelet endpoints are not served).
    pub port: u16,
    /// When Ready last changed.
    pub since: jiff::Timestamp,
}

impl NodeRecord {
    /// The status to apply: addresses, kubelet port and the Ready condition.
    pub fn status(&self, ready: bool, now: jiff::Timestamp) -> Value {
        let (status, reason, message) = if ready {
            ("True", "KubeletReady", "kubelet is posting ready status")
        } else {
            ("False", "KubeletNotReady", "kcp-node-agent stopped")
        };
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": self.name },
            "status": {
                "addresses": [
                    { "type": "InternalIP", "address": self.internal_ip.to_string() },
                    { "type": "Hostname", "address": self.name },
                ],
                "daemonEndpoints": { "kubeletEndpoint": { "Port": self.port } },
                "conditions": [{
                    "type": "Ready",
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": now.to_string(),
                    "lastTransitionTime": self.since.to_string(),
                }],
            },
        })
    }
}

fn params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

async fn apply_status(api: &Api<Node>, record: &NodeRecord, ready: bool) -> Result<()> {
    let status = record.status(ready, jiff::Timestamp::now());
    api.patch_status(&record.name, &params(), &Patch::Apply(&status))
        .await?;
    Ok(())
}

/// Creates (or takes over) the Node and marks it Ready.
pub async fn register(client: &kube::Client, record: &NodeRecord) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let object = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": record.name },
    });
    api.patch(&record.name, &params(), &Patch::Apply(&object))
        .await?;
    apply_status(&api, record, true).await
}

/// Writes the heartbeat every [`HEARTBEAT`] until aborted.
pub fn heartbeat(client: kube::Client, record: NodeRecord) -> JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Node> = Api::all(client);
        loop {
            tokio::time::sleep(HEARTBEAT).await;
            if let Err(error) = apply_status(&api, &record, true).await {
                tracing::warn!(%error, node = %record.name, "writing the node heartbeat");
            }
        }
    })
}

/// Marks the Node not Ready (the agent is stopping).
pub async fn unregister(client: &kube::Client, mut record: NodeRecord) {
    record.since = jiff::Timestamp::now();
    let api: Api<Node> = Api::all(client.clone());
    if let Err(error) = apply_status(&api, &record, false).await {
        tracing::warn!(%error, node = %record.name, "marking the node not ready");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_names_the_kubelet_endpoint() {
        let record = NodeRecord {
            name: "n1".into(),
            internal_ip: Ipv4Addr::new(10, 0, 0, 1),
            port: 10250,
            since: "2026-01-01T00:00:00Z".parse().unwrap(),
        };
        let status = record.status(true, "2026-01-01T00:00:10Z".parse().unwrap());
        assert_eq!(status["metadata"]["name"], "n1");
        assert_eq!(
            status["status"]["addresses"][0],
            json!({ "type": "InternalIP", "address": "10.0.0.1" })
        );
        assert_eq!(
            status["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
        let ready = &status["status"]["conditions"][0];
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:10Z");
        assert_eq!(ready["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(
            record.status(false, record.since)["status"]["conditions"][0]["status"],
            "False"
        );
    }
}
