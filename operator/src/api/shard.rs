//! `Shard`: an additional kcp shard that registers with a RootShard and shares its PKI.

use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements, Volume, VolumeMount};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    AuditSpec, AuthSpec, AuthorizationSpec, CertificateTemplateMap, ComponentStatus,
    DeploymentTemplate, EtcdConfig, ImageSpec, LoggingSpec, RootShardConfig, ServiceTemplate,
};

/// Fields every kcp server (root shard or shard) has.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CommonShardSpec {
    /// Cluster DNS domain used in every in-cluster URL and DNS name (default `cluster.local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_domain: Option<String>,
    /// URL other shards and the front-proxy use to reach this shard; its host joins the server SANs.
    #[serde(
        rename = "shardBaseURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub shard_base_url: Option<String>,
    pub etcd: EtcdConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Default 2. Left unset on the Deployment only when it already exists, so an HPA can own it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<AuthorizationSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,
    #[serde(default, skip_serializing_if = "CertificateTemplateMap::is_empty")]
    pub certificate_templates: CertificateTemplateMap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_template: Option<ServiceTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<DeploymentTemplate>,
    /// Extra CA (`tls.crt`) trusted in the external logical-cluster-admin kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_secret_ref: Option<LocalObjectReference>,
    /// Extra client CA (`tls.crt`) merged with the root shard's client CA.
    #[serde(
        rename = "clientCABundleRef",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_ca_bundle_ref: Option<LocalObjectReference>,
    /// Appended to the generated kcp arguments.
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
    /// A VirtualWorkspace (same namespace) that serves this shard's virtual workspaces: the
    /// server then runs none in process and advertises the VirtualWorkspace's external URL.
    /// Unset: the virtual workspaces run in process (upstream's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kcp_virtual_workspace: Option<LocalObjectReference>,
}

/// A kcp shard besides the root shard.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "operator.kcp.io",
    version = "v1alpha1",
    kind = "Shard",
    namespaced,
    status = "ComponentStatus",
    printcolumn = r#"{"name":"RootShard","type":"string","jsonPath":".spec.rootShard.ref.name"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.currentVersion"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ShardSpec {
    #[serde(flatten)]
    pub common: CommonShardSpec,
    pub root_shard: RootShardConfig,
    /// Overrides the RootShard's cache server for this shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheReference>,
}

/// A reference to a CacheServer in the same namespace.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct CacheReference {
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<LocalObjectReference>,
}
