//! Types shared by several kinds of the `operator.kcp.io/v1alpha1` API.
//!
//! Field names and JSON spellings follow upstream kcp-operator so that a manifest written for it
//! applies here unchanged. Fields that only configure cert-manager (`issuerRef`, `secretTemplate`,
//! `privateKey`) are accepted so such manifests stay valid; the controllers report them with a
//! warning condition because this operator issues certificates itself.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, HostAlias, LocalObjectReference, ResourceRequirements, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which image runs a component. Unset fields fall back to this project's server image.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Also the component's version: changing it starts an ordered upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
}

/// A reference to the RootShard a component belongs to (same namespace).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct RootShardConfig {
    #[serde(rename = "ref")]
    pub reference: LocalObjectReference,
}

/// Where a shard keeps its data: an external etcd (`endpoints`) or one this operator runs (`managed`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.endpoints) != has(self.managed)").message("exactly one of endpoints or managed must be set"))]
#[x_kube(validation = Rule::new("!(has(self.managed) && has(self.tlsConfig))").message("tlsConfig configures an external etcd; a managed etcd has its own PKI"))]
pub struct EtcdConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_config: Option<EtcdTlsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<ManagedEtcd>,
}

/// Client certificate for an external etcd: a Secret with `tls.crt`, `tls.key` and `ca.crt`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EtcdTlsConfig {
    pub secret_ref: LocalObjectReference,
}

/// An etcd cluster run by the operator as a StatefulSet, with TLS for clients and peers.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedEtcd {
    /// Number of members; scaling moves one member at a time through the members API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self in [1, 3, 5]").message("replicas must be 1, 3 or 5"))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<EtcdStorage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// The PersistentVolumeClaim template of each managed etcd member.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EtcdStorage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// How clients outside the host cluster reach kcp (normally through a FrontProxy).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalConfig {
    pub hostname: String,
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub private_port: Option<i32>,
}

/// Source of a root CA: generated (default), or brought along in a Secret of any name.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.issuerRef) && has(self.caSecretRef))").message("issuerRef and caSecretRef are mutually exclusive"))]
pub struct Certificates {
    /// cert-manager issuer; accepted for compatibility and ignored (the operator issues its own CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<ObjectReference>,
    /// A Secret with `tls.crt` and `tls.key` of a CA that signs every intermediate CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<LocalObjectReference>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ObjectReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One key of a Secret or ConfigMap.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct LocalDataKeyReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Per-certificate overrides, keyed by certificate name (`server`, `client`, `root-ca`, ...).
pub type CertificateTemplateMap = BTreeMap<String, CertificateTemplate>;

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct CertificateTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<CertificateSpecTemplate>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpecTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<X509Subject>,
    /// cert-manager only; ignored with a warning condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<ObjectReference>,
    /// Added to the default DNS names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Labels and annotations for the certificate's Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_template: Option<TemplateMetadata>,
    /// Go duration, e.g. `8760h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Go duration; renewal starts this long before expiry (default: at two thirds of the lifetime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
    /// cert-manager only; ignored with a warning condition (keys are always ECDSA P-256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<CertificatePrivateKeyTemplate>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct X509Subject {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizations: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizational_units: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub localities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provinces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub street_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub postal_codes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificatePrivateKeyTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
}

/// Labels and annotations merged into a generated object.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ServiceTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ServiceSpecTemplate>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpecTemplate {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(rename = "clusterIP", default, skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct DeploymentTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<DeploymentSpecTemplate>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct DeploymentSpecTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpecTemplate>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct PodTemplateSpecTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecTemplate>,
}

/// Pod scheduling fields a user may set. Unlike upstream, only fields that are set replace the
/// generated ones, so e.g. setting `hostAliases` keeps the image pull secrets.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_aliases: Option<Vec<HostAlias>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct LoggingSpec {
    /// Verbosity, passed as `-v=<level>` when not zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub level: Option<i32>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<AuthenticationWebhookSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_auth_file: Option<TokenAuthFileSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountAuthentication>,
    /// Groups the front-proxy removes from authenticated users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_groups: Vec<String>,
    /// Groups the front-proxy passes on even when they are system groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_on_groups: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OidcConfiguration {
    #[serde(rename = "issuerURL")]
    pub issuer_url: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Deprecated upstream and unused by kcp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_claim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file_ref: Option<LocalDataKeyReference>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationWebhookSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_authentication_ttl: Option<String>,
    pub config_secret_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["v1beta1", "v1"]))]
    pub version: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TokenAuthFileSpec {
    pub secret_name: String,
    /// Default `token.csv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ServiceAccountAuthentication {
    #[serde(default)]
    pub enabled: bool,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct AuditSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<AuditWebhookSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<AuditPolicySpec>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditPolicySpec {
    pub config_map: LocalDataKeyReference,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditWebhookSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_buffer_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max_wait: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_throttle_burst: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_throttle_enable: Option<bool>,
    #[serde(
        rename = "batchThrottleQPS",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub batch_throttle_qps: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_secret_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_backoff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["", "batch", "blocking", "blocking-strict"]))]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_max_batch_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_max_event_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct AuthorizationSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<AuthorizationWebhookSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationWebhookSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_paths: Vec<String>,
    #[serde(
        rename = "cacheAuthorizedTTL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_authorized_ttl: Option<String>,
    #[serde(
        rename = "cacheUnauthorizedTTL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_unauthorized_ttl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_secret_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Lifecycle summary shown in `kubectl get`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum Phase {
    Provisioning,
    Running,
    /// A rollout or a reference is broken; conditions say why.
    Degraded,
    Deleting,
}

/// Status shared by RootShard, Shard, FrontProxy and CacheServer.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Version (image tag) all replicas run and are available at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<String>,
    /// Version the spec asks for; differs from `currentVersion` while an upgrade is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Where the component is reached; absent until its spec was first rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Endpoints>,
}

/// The URLs of a component.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    /// Inside the host cluster: the Service (a shard's `shardBaseURL`).
    pub internal: String,
    /// What clients outside use (`external`), when the component has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<String>,
}

/// A shard by name and base URL, as RootShard and FrontProxy statuses list them.
#[derive(
    Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
pub struct ShardReference {
    pub name: String,
    /// The shard's base URL (where the front-proxy sends its workspaces' requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}
