//! `Kubeconfig`: a client certificate for a user, wrapped in a kubeconfig Secret.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::CertificateTemplate;

/// A kubeconfig for `username` in `groups`, signed by the root shard's client CA.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq)]
#[kube(
    group = "operator.kcp.io",
    version = "v1alpha1",
    kind = "Kubeconfig",
    namespaced,
    status = "KubeconfigStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".status.targetName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.targetWorkspace) && has(self.authorization) && has(self.authorization.clusterRoleBindings.cluster))").message("authorization.clusterRoleBindings.cluster is deprecated; use only targetWorkspace"))]
pub struct KubeconfigSpec {
    pub target: KubeconfigTarget,
    /// Workspace path the kubeconfig points at (default `root`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
    ))]
    pub target_workspace: Option<String>,
    /// Common name of the client certificate.
    #[schemars(length(min = 1))]
    pub username: String,
    /// Organizations of the client certificate; `kubeconfig:<name>` is always added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Lifetime of the client certificate (Go duration, e.g. `8760h`).
    pub validity: String,
    /// Secret to write; it gets the key `kubeconfig` and is owned by this Kubeconfig.
    pub secret_ref: LocalObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_template: Option<CertificateTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<KubeconfigAuthorization>,
}

/// Exactly one of the references.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.rootShardRef), has(self.shardRef), has(self.frontProxyRef)].filter(x, x).size() == 1").message("set exactly one of rootShardRef, shardRef and frontProxyRef"))]
pub struct KubeconfigTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_shard_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_proxy_ref: Option<LocalObjectReference>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigAuthorization {
    pub cluster_role_bindings: ClusterRoleBindings,
}

/// ClusterRoleBindings the operator creates inside the target workspace for group `kubeconfig:<name>`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRoleBindings {
    /// Deprecated: use `targetWorkspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_roles: Vec<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum KubeconfigPhase {
    Provisioning,
    Ready,
    Failed,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<KubeconfigPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `RootShard/<name>`, `Shard/<name>` or `FrontProxy/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<KubeconfigAuthorizationStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigAuthorizationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_cluster: Option<String>,
}
