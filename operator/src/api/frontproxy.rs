//! `FrontProxy`: the public entry point that routes `/clusters/<workspace>` to the right shard.

use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements, Volume, VolumeMount};
use kube::CustomResource;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    AuthSpec, CertificateTemplateMap, ComponentStatus, DeploymentTemplate, ExternalConfig,
    ImageSpec, LoggingSpec, RootShardConfig, ServiceTemplate, ShardReference,
};

/// A kcp front-proxy in front of a RootShard and its shards.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq)]
#[kube(
    group = "operator.kcp.io",
    version = "v1alpha1",
    kind = "FrontProxy",
    namespaced,
    status = "FrontProxyStatus",
    printcolumn = r#"{"name":"RootShard","type":"string","jsonPath":".spec.rootShard.ref.name"}"#,
    printcolumn = r#"{"name":"ExternalHostname","type":"string","jsonPath":".spec.external.hostname"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.currentVersion"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.externalHostname) && has(self.external))").message("externalHostname is deprecated; set only external"))]
pub struct FrontProxySpec {
    pub root_shard: RootShardConfig,
    /// Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.oidc) || (has(self.serviceAccount) && self.serviceAccount.enabled)").message("OIDC requires ServiceAccount authentication"))]
    pub auth: Option<AuthSpec>,
    /// Appended to the generated path mappings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_path_mappings: Vec<PathMappingEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Deprecated: use `external`. May carry `:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_template: Option<ServiceTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<DeploymentTemplate>,
    #[serde(default, skip_serializing_if = "CertificateTemplateMap::is_empty")]
    pub certificate_templates: CertificateTemplateMap,
    /// Extra CA (`tls.crt`) trusted for shard backends, e.g. when shards serve publicly signed certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_secret_ref: Option<LocalObjectReference>,
    /// Extra client CA (`tls.crt`) accepted from clients.
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
}

/// A FrontProxy's status: the component's, and the shards it routes to.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct FrontProxyStatus {
    #[serde(flatten)]
    pub component: ComponentStatus,
    /// The shards of its root shard (the root shard and every Shard that references it), sorted
    /// by name: the proxy routes their workspaces' requests to these URLs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub shards: Vec<ShardReference>,
}

/// One entry of the front-proxy's path-mapping file (snake_case keys, as kcp reads them).
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
pub struct PathMappingEntry {
    pub path: String,
    pub backend: String,
    pub backend_server_ca: String,
    pub proxy_client_cert: String,
    pub proxy_client_key: String,
}
