//! `CacheServer`: the replication cache shards share, with its own CA.

use k8s_openapi::api::core::v1::{ResourceRequirements, Volume, VolumeMount};
use kube::CustomResource;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    CertificateTemplateMap, Certificates, ComponentStatus, DeploymentTemplate, EtcdConfig,
    ImageSpec, LoggingSpec, ServiceTemplate,
};

/// A kcp cache server.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[kube(
    group = "operator.kcp.io",
    version = "v1alpha1",
    kind = "CacheServer",
    namespaced,
    status = "ComponentStatus",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.currentVersion"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.replicas) || self.replicas <= 1 || has(self.etcd)").message("more than one replica needs an etcd: the embedded one is per pod"))]
pub struct CacheServerSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Default 1 with the embedded etcd, 2 with an etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LoggingSpec>,
    /// Optional here: the operator generates the cache CA unless `caSecretRef` brings one.
    #[serde(default)]
    pub certificates: Certificates,
    #[serde(default, skip_serializing_if = "CertificateTemplateMap::is_empty")]
    pub certificate_templates: CertificateTemplateMap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_template: Option<ServiceTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<DeploymentTemplate>,
    /// External or managed etcd; unset means an embedded etcd on an emptyDir (data lost on restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub extra_volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub extra_volume_mounts: Vec<VolumeMount>,
}
