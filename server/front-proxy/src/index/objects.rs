//! The parts of `Shard`, `Workspace` and `LogicalCluster` objects the index reads, decoded
//! straight from the shards' JSON into small typed structs (serde skips every other field), so
//! a list of 10,000 objects never becomes a tree of `serde_json::Value`s.
//!
//! Upstream's index reads the same fields: a Shard's name, `spec.baseURL` and
//! `spec.virtualWorkspaceURL` (where `/services/` requests for its clusters go); a Workspace's
//! logical cluster (annotation `kcp.io/cluster`), name, `spec.cluster` (its own logical cluster)
//! and `status.phase`; a LogicalCluster's `kcp.io/cluster` annotation (the object itself is
//! always named `cluster`). kcp-rs also reads the Workspace's `core.kcp.io/shard` annotation,
//! the shard its logical cluster was scheduled to, to tell "that shard is gone" from "unknown".

use serde::Deserialize;

/// `metadata.name`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Named {
    #[serde(default)]
    pub name: String,
}

/// A `Shard` in root.
#[derive(Debug, Deserialize)]
pub(crate) struct ShardObject {
    pub metadata: Named,
    #[serde(default)]
    pub spec: ShardSpec,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ShardSpec {
    #[serde(rename = "baseURL", default)]
    pub base_url: String,
    #[serde(rename = "virtualWorkspaceURL", default)]
    pub virtual_workspace_url: String,
}

/// The annotations the index reads (literal keys: serde needs them here; a test compares them
/// with kcp-tenancy's constants).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Annotations {
    /// The logical cluster the object is stored in.
    #[serde(rename = "kcp.io/cluster")]
    pub cluster: Option<String>,
    /// On a Workspace: the shard its logical cluster was scheduled to.
    #[serde(rename = "core.kcp.io/shard")]
    pub shard: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub annotations: Annotations,
}

/// A `Workspace` of any logical cluster of a shard.
#[derive(Debug, Deserialize)]
pub(crate) struct WorkspaceObject {
    #[serde(default)]
    pub metadata: Metadata,
    #[serde(default)]
    pub spec: WorkspaceSpec,
    #[serde(default)]
    pub status: WorkspaceStatus,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WorkspaceSpec {
    /// The workspace's own logical cluster (empty until scheduled).
    #[serde(default)]
    pub cluster: String,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WorkspaceStatus {
    #[serde(default)]
    pub phase: String,
}

/// A `LogicalCluster` of a shard: only where it is stored matters.
#[derive(Debug, Deserialize)]
pub(crate) struct LogicalClusterObject {
    #[serde(default)]
    pub metadata: Metadata,
}

impl LogicalClusterObject {
    /// The logical cluster's name (its `kcp.io/cluster` annotation).
    pub fn cluster(&self) -> Option<&str> {
        self.metadata.annotations.cluster.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_tenancy::{logical_cluster, workspace};
    use serde_json::json;

    #[test]
    fn annotation_keys_are_kcp_tenancy_s() {
        let object = json!({"metadata": {"name": "a", "annotations": {
            logical_cluster::CLUSTER_ANNOTATION: "parent",
            workspace::SHARD_ANNOTATION: "shard-1",
            "other": "x",
        }}, "spec": {"cluster": "child", "type": {"name": "universal"}},
            "status": {"phase": "Ready", "conditions": []}});
        let decoded: WorkspaceObject = serde_json::from_value(object).unwrap();
        assert_eq!(decoded.metadata.name, "a");
        assert_eq!(
            decoded.metadata.annotations.cluster.as_deref(),
            Some("parent")
        );
        assert_eq!(
            decoded.metadata.annotations.shard.as_deref(),
            Some("shard-1")
        );
        assert_eq!(decoded.spec.cluster, "child");
        assert_eq!(decoded.status.phase, "Ready");
    }

    #[test]
    fn missing_fields_are_empty() {
        let decoded: WorkspaceObject =
            serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
        assert_eq!(decoded.spec.cluster, "");
        assert_eq!(decoded.status.phase, "");
        let shard: ShardObject = serde_json::from_value(json!({"metadata": {"name": "root"},
            "spec": {"baseURL": "https://r:1", "externalURL": "x"}}))
        .unwrap();
        assert_eq!(
            (shard.metadata.name.as_str(), shard.spec.base_url.as_str()),
            ("root", "https://r:1")
        );
    }
}
