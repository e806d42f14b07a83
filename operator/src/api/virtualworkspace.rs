//! `VirtualWorkspace`: a standalone virtual-workspace server (`kcp virtual-workspaces`) for one
//! shard, with the field names of upstream kcp-operator's sixth kind.
//!
//! Upstream deploys one per shard (and one for the root shard); the shard it targets advertises
//! it through `--shard-virtual-workspace-url`. Upstream's options for custom servers (`command`,
//! `initContainers`, `kubeconfigSecretRef`, `caBundleSecretRef`) are not offered: this operator
//! deploys its own server only.

use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements, Volume, VolumeMount};
use kube::CustomResource;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    CertificateTemplateMap, ComponentStatus, DeploymentTemplate, ExternalConfig, ImageSpec,
    LoggingSpec, ServiceTemplate,
};

/// A virtual-workspace server beside a RootShard or a Shard.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq)]
#[kube(
    group = "operator.kcp.io",
    version = "v1alpha1",
    kind = "VirtualWorkspace",
    namespaced,
    status = "ComponentStatus",
    printcolumn = r#"{"name":"RootShard","type":"string","jsonPath":".spec.target.rootShardRef.name"}"#,
    printcolumn = r#"{"name":"Shard","type":"string","jsonPath":".spec.target.shardRef.name"}"#,
    printcolumn = r#"{"name":"ExternalHostname","type":"string","jsonPath":".spec.external.hostname"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.currentVersion"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualWorkspaceSpec {
    /// The shard whose virtual workspaces this server serves.
    pub target: VirtualWorkspaceTarget,
    /// Where clients reach the server: the URL the shard advertises for its virtual workspaces.
    pub external: ExternalConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "CertificateTemplateMap::is_empty")]
    pub certificate_templates: CertificateTemplateMap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_template: Option<ServiceTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<DeploymentTemplate>,
    /// Extra client CA (`tls.crt`) accepted from clients, beside the target's client CA.
    #[serde(
        rename = "clientCABundleRef",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_ca_bundle_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub extra_volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub extra_volume_mounts: Vec<VolumeMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LoggingSpec>,
    /// DNS domain of the host cluster's Services; default `cluster.local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_domain: Option<String>,
}

/// Exactly one of a RootShard or a Shard in the same namespace.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.rootShardRef) != has(self.shardRef)").message("Must specify exactly one of rootShardRef or shardRef"))]
pub struct VirtualWorkspaceTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_shard_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_ref: Option<LocalObjectReference>,
}
