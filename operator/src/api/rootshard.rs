//! `RootShard`: the first kcp shard, owner of the PKI every other component trusts.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Certificates, ComponentStatus, ExternalConfig, ShardReference};
use super::shard::CommonShardSpec;

/// A kcp root shard and its certificate authorities.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "operator.kcp.io",
    version = "v1alpha1",
    kind = "RootShard",
    namespaced,
    status = "RootShardStatus",
    printcolumn = r#"{"name":"Hostname","type":"string","jsonPath":".spec.external.hostname"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.currentVersion"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RootShardSpec {
    #[serde(flatten)]
    pub common: CommonShardSpec,
    pub external: ExternalConfig,
    /// Optional here: upstream requires `cache: {}` even though it only holds a reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<RootShardCacheConfig>,
    #[serde(default)]
    pub certificates: Certificates,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct RootShardCacheConfig {
    /// CacheServer used by this root shard and, unless they override it, by its shards.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<k8s_openapi::api::core::v1::LocalObjectReference>,
    /// Deprecated upstream and ignored: the embedded cache is used whenever `ref` is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedded: Option<EmbeddedCacheConfig>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct EmbeddedCacheConfig {
    #[serde(default)]
    pub enabled: bool,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct RootShardStatus {
    #[serde(flatten)]
    pub component: ComponentStatus,
    /// The Shards that reference this root shard (upstream's field), sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub shards: Vec<ShardReference>,
}
