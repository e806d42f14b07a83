//! The one place that names things: object names, labels, in-cluster URLs, ports and the
//! default image. Builders ask here and never format a name themselves.
//!
//! Scheme: `<instance>-<kind token>[-<purpose>]`, e.g. `alpha-shard` (Deployment and Service),
//! `alpha-shard-server` (Secret). Kind tokens never end in `-<other token>` and no purpose
//! contains a kind token, so two custom resources can never produce the same name (upstream's
//! `R-F-server` vs `F-...` scheme collides, kcp-operator#164). Instance names are limited to
//! [`MAX_INSTANCE_NAME_LENGTH`] so every derived Service name stays a DNS label.

use std::collections::BTreeMap;

/// This project's server image (the `kcp` multi-call binary); `image` on a resource overrides it.
pub const DEFAULT_IMAGE_REPOSITORY: &str = "ghcr.io/kcp-rs/kcp";
/// The server release this operator release was built and tested with.
pub const DEFAULT_IMAGE_TAG: &str = concat!("v", env!("CARGO_PKG_VERSION"));
/// Image of managed etcd members.
pub const DEFAULT_ETCD_IMAGE: &str = "quay.io/coreos/etcd:v3.5.21";
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// Field manager of every server-side apply and merge patch.
pub const FIELD_MANAGER: &str = "kcp-operator";
/// The User-Agent of every request the operator sends (to the host cluster and to kcp).
pub const USER_AGENT: &str = concat!("kcp-operator/", env!("CARGO_PKG_VERSION"));
/// The Lease the operator's replicas elect their leader with (in the operator's namespace).
pub const LEADER_LEASE: &str = "kcp-operator";
/// Longest accepted name of a RootShard, Shard, FrontProxy, CacheServer or VirtualWorkspace.
pub const MAX_INSTANCE_NAME_LENGTH: usize = 40;

pub const KCP_PORT: i32 = 6443;
pub const KCP_PORT_NAME: &str = "https";
pub const VIRTUAL_WORKSPACES_PORT: i32 = 6444;
pub const VIRTUAL_WORKSPACES_PORT_NAME: &str = "https-virtual-workspaces";
pub const ETCD_CLIENT_PORT: i32 = 2379;
pub const ETCD_PEER_PORT: i32 = 2380;
/// Plain-HTTP `/health` and `/metrics` of managed etcd members, for probes.
pub const ETCD_METRICS_PORT: i32 = 2381;

pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_VERSION: &str = "app.kubernetes.io/version";

/// Finalizer that removes the ClusterRoleBindings a Kubeconfig created inside kcp.
pub const KUBECONFIG_FINALIZER: &str = "operator.kcp.io/cleanup-rbac";
/// Label (value: the Kubeconfig's UID) on the ClusterRoleBindings a Kubeconfig created in kcp.
pub const LABEL_KUBECONFIG: &str = "operator.kcp.io/kubeconfig";
/// Finalizer that deregisters a Shard from its root shard.
pub const SHARD_FINALIZER: &str = "operator.kcp.io/cleanup-shard";
/// Annotation (value `"true"`) that lets a deleted Shard be deregistered while it still holds
/// logical clusters, orphaning their workspaces.
pub const FORCE_DELETE_ANNOTATION: &str = "operator.kcp.io/force-delete";
/// Group every Kubeconfig certificate carries, and the subject of the bindings it creates.
pub fn kubeconfig_group(kubeconfig_name: &str) -> String {
    format!("kubeconfig:{kubeconfig_name}")
}

/// The kinds that own named objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    RootShard,
    Shard,
    FrontProxy,
    CacheServer,
    /// Owns only its client certificate Secret.
    Kubeconfig,
    VirtualWorkspace,
}

impl Kind {
    /// Kind token in object names and value of the component label.
    pub fn token(self) -> &'static str {
        match self {
            Kind::RootShard => "rootshard",
            Kind::Shard => "shard",
            Kind::FrontProxy => "frontproxy",
            Kind::CacheServer => "cacheserver",
            Kind::Kubeconfig => "kubecfg",
            Kind::VirtualWorkspace => "virtualworkspace",
        }
    }
}

/// Certificates (and CAs) by their upstream template key, which is also their Secret suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Certificate {
    RootCa,
    ServerCa,
    ClientCa,
    RequestHeaderClientCa,
    ServiceAccountCa,
    Server,
    ServiceAccount,
    Client,
    RequestHeader,
    MountsProxy,
    LogicalClusterAdmin,
    ExternalLogicalClusterAdmin,
    Operator,
    EtcdCa,
    EtcdServer,
    EtcdPeer,
    EtcdClient,
}

impl Certificate {
    /// Key in `certificateTemplates`.
    pub fn template_key(self) -> &'static str {
        match self {
            Certificate::RootCa => "root-ca",
            Certificate::ServerCa => "server-ca",
            Certificate::ClientCa => "client-ca",
            Certificate::RequestHeaderClientCa => "requestheader-client-ca",
            Certificate::ServiceAccountCa => "service-account-ca",
            Certificate::Server => "server",
            Certificate::ServiceAccount => "service-account",
            Certificate::Client => "client",
            Certificate::RequestHeader => "requestheader",
            Certificate::MountsProxy => "mounts-proxy",
            Certificate::LogicalClusterAdmin => "logical-cluster-admin",
            Certificate::ExternalLogicalClusterAdmin => "external-logical-cluster-admin",
            Certificate::Operator => "kcp-operator",
            Certificate::EtcdCa => "etcd-ca",
            Certificate::EtcdServer => "etcd-server",
            Certificate::EtcdPeer => "etcd-peer",
            Certificate::EtcdClient => "etcd-client",
        }
    }

    fn secret_suffix(self) -> &'static str {
        match self {
            Certificate::RootCa => "ca",
            other => other.template_key(),
        }
    }
}

/// Everything named after one custom resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub kind: Kind,
    pub instance: String,
    pub namespace: String,
    pub cluster_domain: String,
}

impl Names {
    pub fn new(kind: Kind, instance: &str, namespace: &str, cluster_domain: Option<&str>) -> Self {
        Self {
            kind,
            instance: instance.to_owned(),
            namespace: namespace.to_owned(),
            cluster_domain: cluster_domain.unwrap_or(DEFAULT_CLUSTER_DOMAIN).to_owned(),
        }
    }

    /// Deployment and Service.
    pub fn workload(&self) -> String {
        format!("{}-{}", self.instance, self.kind.token())
    }

    fn derived(&self, purpose: &str) -> String {
        format!("{}-{purpose}", self.workload())
    }

    pub fn certificate_secret(&self, certificate: Certificate) -> String {
        self.derived(certificate.secret_suffix())
    }

    /// Secret with a file-based kubeconfig that uses `certificate`.
    pub fn kubeconfig_secret(&self, certificate: Certificate) -> String {
        self.derived(&format!("{}-kubeconfig", certificate.template_key()))
    }

    /// Client CA bundle: the root client CA plus user bundles.
    pub fn merged_client_ca_secret(&self) -> String {
        self.derived("merged-client-ca")
    }

    /// Server CA bundle: the root server CA plus a user bundle.
    pub fn merged_ca_bundle_secret(&self) -> String {
        self.derived("merged-ca-bundle")
    }

    /// Front-proxy path-mapping ConfigMap.
    pub fn path_mapping_config_map(&self) -> String {
        self.derived("config")
    }

    /// ConfigMap with the etcd membership new members start with.
    pub fn etcd_cluster_config_map(&self) -> String {
        self.derived("etcd-cluster")
    }

    /// StatefulSet, headless Service and PodDisruptionBudget of the managed etcd.
    pub fn etcd(&self) -> String {
        self.derived("etcd")
    }

    pub fn service_host(&self) -> String {
        format!(
            "{}.{}.svc.{}",
            self.workload(),
            self.namespace,
            self.cluster_domain
        )
    }

    /// `https://<service>.<namespace>.svc.<domain>:6443`.
    pub fn service_url(&self) -> String {
        format!("https://{}:{KCP_PORT}", self.service_host())
    }

    pub fn etcd_service_host(&self) -> String {
        format!(
            "{}.{}.svc.{}",
            self.etcd(),
            self.namespace,
            self.cluster_domain
        )
    }

    /// Stable DNS name of one etcd member (StatefulSet pod behind the headless Service).
    pub fn etcd_member_host(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}.{}", self.etcd(), self.etcd_service_host())
    }

    pub fn etcd_member_name(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.etcd())
    }

    /// URL other members reach member `ordinal` at.
    pub fn etcd_peer_url(&self, ordinal: i32) -> String {
        format!(
            "https://{}:{ETCD_PEER_PORT}",
            self.etcd_member_host(ordinal)
        )
    }

    /// URL clients reach member `ordinal` at.
    pub fn etcd_client_url(&self, ordinal: i32) -> String {
        format!(
            "https://{}:{ETCD_CLIENT_PORT}",
            self.etcd_member_host(ordinal)
        )
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        self.labels_for(self.kind.token())
    }

    pub fn etcd_labels(&self) -> BTreeMap<String, String> {
        self.labels_for(&format!("{}-etcd", self.kind.token()))
    }

    fn labels_for(&self, component: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_MANAGED_BY.to_owned(), FIELD_MANAGER.to_owned()),
            (LABEL_NAME.to_owned(), "kcp".to_owned()),
            (LABEL_INSTANCE.to_owned(), self.instance.clone()),
            (LABEL_COMPONENT.to_owned(), component.to_owned()),
        ])
    }
}

/// Checks an instance name against the limits the naming scheme relies on.
pub fn check_instance_name(name: &str) -> Result<(), String> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    let ends = name
        .chars()
        .last()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(valid_chars && starts && ends) {
        return Err(format!(
            "name {name:?} must be a DNS label starting with a letter"
        ));
    }
    if name.len() > MAX_INSTANCE_NAME_LENGTH {
        return Err(format!(
            "name {name:?} is longer than {MAX_INSTANCE_NAME_LENGTH} characters"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const KINDS: [Kind; 6] = [
        Kind::RootShard,
        Kind::Shard,
        Kind::FrontProxy,
        Kind::CacheServer,
        Kind::Kubeconfig,
        Kind::VirtualWorkspace,
    ];
    const CERTIFICATES: [Certificate; 17] = [
        Certificate::RootCa,
        Certificate::ServerCa,
        Certificate::ClientCa,
        Certificate::RequestHeaderClientCa,
        Certificate::ServiceAccountCa,
        Certificate::Server,
        Certificate::ServiceAccount,
        Certificate::Client,
        Certificate::RequestHeader,
        Certificate::MountsProxy,
        Certificate::LogicalClusterAdmin,
        Certificate::ExternalLogicalClusterAdmin,
        Certificate::Operator,
        Certificate::EtcdCa,
        Certificate::EtcdServer,
        Certificate::EtcdPeer,
        Certificate::EtcdClient,
    ];

    fn all_names(names: &Names) -> Vec<String> {
        let mut all = vec![
            names.workload(),
            names.merged_client_ca_secret(),
            names.merged_ca_bundle_secret(),
            names.path_mapping_config_map(),
            names.etcd_cluster_config_map(),
            names.etcd(),
        ];
        for certificate in CERTIFICATES {
            all.push(names.certificate_secret(certificate));
            all.push(names.kubeconfig_secret(certificate));
        }
        all
    }

    #[test]
    fn names_of_tricky_instances_never_collide() {
        // Instances chosen so that upstream's suffix scheme would collide (`a-shard` + `-kcp` ...).
        let instances = [
            "a",
            "a-shard",
            "a-rootshard",
            "a-root",
            "a-server",
            "a-frontproxy-server",
            "a-etcd",
            "a-ca",
        ];
        let mut seen = BTreeSet::new();
        for kind in KINDS {
            for instance in instances {
                let names = Names::new(kind, instance, "ns", None);
                for name in all_names(&names) {
                    assert!(seen.insert(name.clone()), "{name} produced twice");
                }
            }
        }
    }

    #[test]
    fn purposes_contain_no_kind_token() {
        let names = Names::new(Kind::Shard, "x", "ns", None);
        for name in all_names(&names) {
            let purpose = name.trim_start_matches("x-shard").trim_start_matches('-');
            for kind in KINDS {
                assert!(
                    !purpose.split('-').any(|part| part == kind.token()),
                    "{purpose} contains {}",
                    kind.token()
                );
            }
        }
    }

    #[test]
    fn urls_honour_the_cluster_domain() {
        let names = Names::new(Kind::Shard, "alpha", "kcp", Some("example.internal"));
        assert_eq!(
            names.service_url(),
            "https://alpha-shard.kcp.svc.example.internal:6443"
        );
        assert_eq!(
            names.etcd_member_host(2),
            "alpha-shard-etcd-2.alpha-shard-etcd.kcp.svc.example.internal"
        );
    }

    #[test]
    fn longest_instance_name_keeps_service_names_dns_labels() {
        let longest = "a".repeat(MAX_INSTANCE_NAME_LENGTH);
        assert!(check_instance_name(&longest).is_ok());
        for kind in KINDS {
            assert!(Names::new(kind, &longest, "ns", None).etcd().len() <= 63);
        }
        assert!(check_instance_name(&format!("{longest}a")).is_err());
        assert!(check_instance_name("Upper").is_err());
        assert!(check_instance_name("1abc").is_err());
    }
}
