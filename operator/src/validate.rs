//! Pure validation: a custom resource plus the objects it references become one resolved,
//! checked configuration, or an error that becomes a condition. Builders only ever see the
//! resolved form, so every default and every cross-reference is decided here, once.

use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};

use crate::api::common::{CertificateTemplateMap, EtcdConfig, ExternalConfig, ImageSpec};
use crate::api::{CacheServer, CommonShardSpec, FrontProxy, PathMappingEntry, RootShard, Shard};
use crate::naming::{self, Kind, Names};

mod virtual_workspace;

pub use virtual_workspace::{
    VirtualWorkspaceConfig, external_url, target_reference, virtual_workspace,
    with_virtual_workspace,
};

/// Replicas of a server, front-proxy or cache server with an etcd when the spec sets none.
pub const DEFAULT_SERVER_REPLICAS: i32 = 2;
const DEFAULT_ETCD_STORAGE: &str = "8Gi";

/// Why a custom resource cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("{0}")]
    InvalidName(String),
    #[error("object has no namespace")]
    MissingNamespace,
    #[error("object has no uid yet")]
    MissingUid,
    #[error("{kind} {name:?} referenced by this object does not exist")]
    ReferenceNotFound { kind: &'static str, name: String },
    #[error("etcd: exactly one of endpoints or managed must be set")]
    AmbiguousEtcd,
    #[error("etcd.managed.replicas must be 1, 3 or 5, not {0}")]
    InvalidEtcdReplicas(i32),
    #[error("etcd.endpoints: {0:?} is not an http:// or https:// URL with a host")]
    InvalidEtcdEndpoint(String),
    #[error("CacheServer with the embedded etcd runs at most one replica, not {0}")]
    EmbeddedCacheReplicas(i32),
    #[error("target: set exactly one of rootShardRef, shardRef and frontProxyRef")]
    NoKubeconfigTarget,
    #[error("validity: {0}")]
    InvalidValidity(String),
    #[error("target: set exactly one of rootShardRef and shardRef")]
    NoVirtualWorkspaceTarget,
    #[error("additionalPathMappings: mapping {path:?}: {reason}")]
    InvalidPathMapping { path: String, reason: String },
}

impl Error {
    /// CamelCase reason for conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::ReferenceNotFound { .. } => "ReferenceNotFound",
            Error::MissingNamespace | Error::MissingUid => "IncompleteObject",
            _ => "InvalidSpec",
        }
    }
}

/// Image reference and the version it stands for (its tag).
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub repository: String,
    pub reference: String,
    pub version: String,
    pub pull_secrets: Vec<LocalObjectReference>,
}

impl Image {
    pub fn resolve(spec: Option<&ImageSpec>) -> Self {
        let repository = spec
            .and_then(|s| s.repository.clone())
            .unwrap_or_else(|| naming::DEFAULT_IMAGE_REPOSITORY.into());
        let version = spec
            .and_then(|s| s.tag.clone())
            .unwrap_or_else(|| naming::DEFAULT_IMAGE_TAG.into());
        Self {
            reference: format!("{repository}:{version}"),
            repository,
            version,
            pull_secrets: spec
                .map(|s| s.image_pull_secrets.clone())
                .unwrap_or_default(),
        }
    }

    /// The same image at another version (tag): what an upgrade that is held back renders.
    pub fn at_version(&self, version: &str) -> Self {
        Self {
            reference: format!("{}:{version}", self.repository),
            version: version.to_owned(),
            ..self.clone()
        }
    }
}

/// Where a server keeps its data.
#[derive(Clone, Debug, PartialEq)]
pub enum Etcd {
    External {
        endpoints: Vec<String>,
        prefix: Option<String>,
        tls_secret: Option<String>,
    },
    Managed(ManagedEtcd),
    /// Only for the cache server: an etcd inside its pod, on an emptyDir.
    Embedded,
}

impl Etcd {
    /// The endpoints of an external etcd; none for a managed or embedded one.
    pub fn external_endpoints(&self) -> &[String] {
        match self {
            Etcd::External { endpoints, .. } => endpoints,
            Etcd::Managed(_) | Etcd::Embedded => &[],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ManagedEtcd {
    pub replicas: i32,
    pub image: String,
    pub storage_size: Quantity,
    pub storage_class: Option<String>,
    pub resources: Option<ResourceRequirements>,
    pub prefix: Option<String>,
}

fn resolve_etcd(config: &EtcdConfig) -> Result<Etcd, Error> {
    match (&config.managed, config.endpoints.is_empty()) {
        (Some(managed), true) => {
            let replicas = managed.replicas.unwrap_or(1);
            if ![1, 3, 5].contains(&replicas) {
                return Err(Error::InvalidEtcdReplicas(replicas));
            }
            Ok(Etcd::Managed(ManagedEtcd {
                replicas,
                image: managed
                    .image
                    .clone()
                    .unwrap_or_else(|| naming::DEFAULT_ETCD_IMAGE.into()),
                storage_size: managed
                    .storage
                    .as_ref()
                    .and_then(|s| s.size.clone())
                    .unwrap_or_else(|| Quantity(DEFAULT_ETCD_STORAGE.into())),
                storage_class: managed
                    .storage
                    .as_ref()
                    .and_then(|s| s.storage_class_name.clone()),
                resources: managed.resources.clone(),
                prefix: config.prefix.clone(),
            }))
        }
        (None, false) => {
            if let Some(bad) = config.endpoints.iter().find(|e| !is_endpoint_url(e)) {
                return Err(Error::InvalidEtcdEndpoint(bad.clone()));
            }
            Ok(Etcd::External {
                endpoints: config.endpoints.clone(),
                prefix: config.prefix.clone(),
                tls_secret: config
                    .tls_config
                    .as_ref()
                    .map(|tls| tls.secret_ref.name.clone()),
            })
        }
        _ => Err(Error::AmbiguousEtcd),
    }
}

/// `http(s)://host[:port]` as etcd clients take it: a scheme, a host, at most a numeric port and
/// nothing else (a path would be ignored by kcp, so it is a mistake).
/// The paths every FrontProxy maps itself (to the root shard); additional mappings may not repeat them.
pub const GENERATED_PATH_MAPPINGS: [&str; 2] = ["/clusters/", "/services/"];

/// What the front-proxy refuses at start (it would crash-loop): a path not starting with `/`,
/// a path mapped twice (generated ones included), a backend that is not an http(s) URL with a
/// host, an empty file field.
fn check_path_mappings(entries: &[PathMappingEntry]) -> Result<(), Error> {
    let mut seen: Vec<&str> = GENERATED_PATH_MAPPINGS.to_vec();
    for entry in entries {
        let invalid = |reason: String| Error::InvalidPathMapping {
            path: entry.path.clone(),
            reason,
        };
        if !entry.path.starts_with('/') {
            return Err(invalid("the path must start with '/'".into()));
        }
        if seen.contains(&entry.path.as_str()) {
            return Err(invalid("the path is mapped already".into()));
        }
        if !is_backend_url(&entry.backend) {
            return Err(invalid(format!(
                "backend {:?} is not an http:// or https:// URL with a host",
                entry.backend
            )));
        }
        for (field, value) in [
            ("backend_server_ca", &entry.backend_server_ca),
            ("proxy_client_cert", &entry.proxy_client_cert),
            ("proxy_client_key", &entry.proxy_client_key),
        ] {
            if value.is_empty() {
                return Err(invalid(format!("{field} must not be empty")));
            }
        }
        seen.push(&entry.path);
    }
    Ok(())
}

/// An http(s) URL with a host, any path after it.
fn is_backend_url(backend: &str) -> bool {
    let (scheme, rest) = backend.split_once("://").unwrap_or(("", backend));
    let authority = rest.split('/').next().unwrap_or_default();
    is_endpoint_url(&format!("{scheme}://{authority}"))
}

fn is_endpoint_url(endpoint: &str) -> bool {
    let Some(rest) = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
    else {
        return false;
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => (host, Some(port)),
        _ => (rest, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    host_ok && port_ok
}

/// Identity of a custom resource in the rendered objects.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub names: Names,
    pub reference: OwnerReference,
}

fn owner<K: Resource<DynamicType = ()>>(
    object: &K,
    kind: Kind,
    cluster_domain: Option<&str>,
) -> Result<Owner, Error> {
    let name = object.meta().name.clone().unwrap_or_default();
    naming::check_instance_name(&name).map_err(Error::InvalidName)?;
    let namespace = object
        .meta()
        .namespace
        .clone()
        .ok_or(Error::MissingNamespace)?;
    let reference = object.controller_owner_ref(&()).ok_or(Error::MissingUid)?;
    Ok(Owner {
        names: Names::new(kind, &name, &namespace, cluster_domain),
        reference,
    })
}

/// What every dependent of a RootShard needs to know about it.
#[derive(Clone, Debug, PartialEq)]
pub struct RootShardFacts {
    pub names: Names,
    /// Secret holding the root CA: generated, or the user's `caSecretRef`.
    pub root_ca_secret: String,
    pub external: ExternalConfig,
    pub shard_base_url: String,
    pub client_ca_bundle: Option<String>,
    pub cache: Option<Names>,
    pub version: String,
}

impl RootShardFacts {
    pub fn of(root: &RootShard) -> Result<Self, Error> {
        let namespace = root.namespace().ok_or(Error::MissingNamespace)?;
        let names = Names::new(
            Kind::RootShard,
            &root.name_any(),
            &namespace,
            root.spec.common.cluster_domain.as_deref(),
        );
        let root_ca_secret = match &root.spec.certificates.ca_secret_ref {
            Some(reference) => reference.name.clone(),
            None => names.certificate_secret(naming::Certificate::RootCa),
        };
        let cache = root
            .spec
            .cache
            .as_ref()
            .and_then(|cache| cache.reference.as_ref())
            .map(|reference| {
                Names::new(
                    Kind::CacheServer,
                    &reference.name,
                    &namespace,
                    Some(&names.cluster_domain),
                )
            });
        Ok(Self {
            shard_base_url: root
                .spec
                .common
                .shard_base_url
                .clone()
                .unwrap_or_else(|| names.service_url()),
            names,
            root_ca_secret,
            external: root.spec.external.clone(),
            client_ca_bundle: root
                .spec
                .common
                .client_ca_bundle_ref
                .as_ref()
                .map(|r| r.name.clone()),
            cache,
            version: Image::resolve(root.spec.common.image.as_ref()).version,
        })
    }

    pub fn external_url(&self) -> String {
        format!("https://{}:{}", self.external.hostname, self.external.port)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerRole {
    Root,
    Shard,
}

/// A root shard or shard, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    pub owner: Owner,
    pub role: ServerRole,
    pub root: RootShardFacts,
    pub image: Image,
    pub replicas: i32,
    pub shard_base_url: String,
    pub etcd: Etcd,
    pub cache: Option<Names>,
    /// User client CA bundles merged with the root client CA (RootShard's, then this shard's).
    pub client_ca_bundles: Vec<String>,
    pub ca_bundle: Option<String>,
    /// The external URL of the VirtualWorkspace of `spec.kcpVirtualWorkspace`, when one serves
    /// this shard's virtual workspaces (see [`with_virtual_workspace`]).
    pub virtual_workspace_url: Option<String>,
    pub spec: CommonShardSpec,
    pub warnings: Vec<String>,
    /// Why a Shard's own `cache.ref` is not its RootShard's cache (`None`: the same, or a root).
    pub cache_mismatch: Option<String>,
}

impl ServerConfig {
    pub fn names(&self) -> &Names {
        &self.owner.names
    }

    pub fn certificate_templates(&self) -> &CertificateTemplateMap {
        &self.spec.certificate_templates
    }
}

pub fn root_shard(root: &RootShard) -> Result<ServerConfig, Error> {
    let spec = &root.spec.common;
    let owner = owner(root, Kind::RootShard, spec.cluster_domain.as_deref())?;
    let facts = RootShardFacts::of(root)?;
    let mut warnings = cert_manager_warnings(&spec.certificate_templates);
    if root.spec.certificates.issuer_ref.is_some() {
        warnings.push(
            "certificates.issuerRef is ignored: the operator issues the root CA itself".into(),
        );
    }
    if root
        .spec
        .cache
        .as_ref()
        .is_some_and(|cache| cache.embedded.is_some())
    {
        warnings.push(
            "cache.embedded is ignored: the embedded cache is used whenever cache.ref is unset"
                .into(),
        );
    }
    Ok(ServerConfig {
        role: ServerRole::Root,
        image: Image::resolve(spec.image.as_ref()),
        replicas: spec.replicas.unwrap_or(DEFAULT_SERVER_REPLICAS),
        shard_base_url: facts.shard_base_url.clone(),
        etcd: resolve_etcd(&spec.etcd)?,
        cache: facts.cache.clone(),
        client_ca_bundles: facts.client_ca_bundle.iter().cloned().collect(),
        ca_bundle: spec.ca_bundle_secret_ref.as_ref().map(|r| r.name.clone()),
        virtual_workspace_url: None,
        spec: spec.clone(),
        root: facts,
        owner,
        warnings,
        cache_mismatch: None,
    })
}

/// Upstream kcp expects every shard to replicate into the cache its root shard uses: what a
/// shard writes to another cache (APIExports, workspace types, RBAC for them) the other shards
/// never see. It works for the shard itself, so it is reported, not refused.
fn cache_mismatch(cache: &Option<Names>, root: &RootShardFacts) -> Option<String> {
    if cache == &root.cache {
        return None;
    }
    let own = cache
        .as_ref()
        .map_or("none", |names| names.instance.as_str());
    let roots = root.cache.as_ref().map_or_else(
        || "its embedded cache".to_owned(),
        |names| format!("CacheServer {}", names.instance),
    );
    Some(format!(
        "cache.ref names CacheServer {own} but RootShard {} uses {roots}: what this shard \
         replicates (APIExports, workspace types, their RBAC) is invisible to the other shards",
        root.names.instance
    ))
}

/// `root` is `None` when the referenced RootShard does not exist.
pub fn shard(shard: &Shard, root: Option<&RootShard>) -> Result<ServerConfig, Error> {
    let spec = &shard.spec.common;
    let root = root.ok_or_else(|| Error::ReferenceNotFound {
        kind: "RootShard",
        name: shard.spec.root_shard.reference.name.clone(),
    })?;
    let facts = RootShardFacts::of(root)?;
    let owner = owner(shard, Kind::Shard, spec.cluster_domain.as_deref())?;
    let cache = match shard
        .spec
        .cache
        .as_ref()
        .and_then(|cache| cache.reference.as_ref())
    {
        Some(reference) => Some(Names::new(
            Kind::CacheServer,
            &reference.name,
            &owner.names.namespace,
            Some(&owner.names.cluster_domain),
        )),
        None => facts.cache.clone(),
    };
    let cache_mismatch = cache_mismatch(&cache, &facts);
    let client_ca_bundles = facts
        .client_ca_bundle
        .iter()
        .chain(spec.client_ca_bundle_ref.as_ref().map(|r| &r.name))
        .cloned()
        .collect();
    Ok(ServerConfig {
        role: ServerRole::Shard,
        image: Image::resolve(spec.image.as_ref()),
        replicas: spec.replicas.unwrap_or(DEFAULT_SERVER_REPLICAS),
        shard_base_url: spec
            .shard_base_url
            .clone()
            .unwrap_or_else(|| owner.names.service_url()),
        etcd: resolve_etcd(&spec.etcd)?,
        cache,
        client_ca_bundles,
        ca_bundle: spec.ca_bundle_secret_ref.as_ref().map(|r| r.name.clone()),
        virtual_workspace_url: None,
        spec: spec.clone(),
        root: facts,
        warnings: cert_manager_warnings(&spec.certificate_templates),
        cache_mismatch,
        owner,
    })
}

/// A front-proxy, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct FrontProxyConfig {
    pub owner: Owner,
    pub root: RootShardFacts,
    pub image: Image,
    pub replicas: i32,
    /// Hostname and port clients use; the Service listens on this port.
    pub external_hostname: String,
    pub external_port: i32,
    pub client_ca_bundles: Vec<String>,
    pub spec: crate::api::FrontProxySpec,
    pub warnings: Vec<String>,
}

pub fn front_proxy(
    proxy: &FrontProxy,
    root: Option<&RootShard>,
) -> Result<FrontProxyConfig, Error> {
    let root = root.ok_or_else(|| Error::ReferenceNotFound {
        kind: "RootShard",
        name: proxy.spec.root_shard.reference.name.clone(),
    })?;
    check_path_mappings(&proxy.spec.additional_path_mappings)?;
    let facts = RootShardFacts::of(root)?;
    let owner = owner(proxy, Kind::FrontProxy, Some(&facts.names.cluster_domain))?;
    let (external_hostname, external_port) =
        match (&proxy.spec.external, &proxy.spec.external_hostname) {
            (Some(external), _) => (external.hostname.clone(), external.port),
            (None, Some(deprecated)) => match deprecated
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<i32>()))
            {
                Some((host, Ok(port))) => (host.to_owned(), port),
                _ => (deprecated.clone(), facts.external.port),
            },
            (None, None) => (facts.external.hostname.clone(), facts.external.port),
        };
    let mut warnings = cert_manager_warnings(&proxy.spec.certificate_templates);
    if proxy.spec.external_hostname.is_some() {
        warnings
            .push("externalHostname is deprecated: use external.hostname and external.port".into());
    }
    let client_ca_bundles = facts
        .client_ca_bundle
        .iter()
        .chain(proxy.spec.client_ca_bundle_ref.as_ref().map(|r| &r.name))
        .cloned()
        .collect();
    Ok(FrontProxyConfig {
        image: Image::resolve(proxy.spec.image.as_ref()),
        replicas: proxy.spec.replicas.unwrap_or(DEFAULT_SERVER_REPLICAS),
        external_hostname,
        external_port,
        client_ca_bundles,
        spec: proxy.spec.clone(),
        root: facts,
        owner,
        warnings,
    })
}

/// A cache server, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheServerConfig {
    pub owner: Owner,
    pub image: Image,
    pub replicas: i32,
    pub etcd: Etcd,
    /// Secret holding the cache CA: generated, or the user's `caSecretRef`.
    pub ca_secret: String,
    pub spec: crate::api::CacheServerSpec,
    pub warnings: Vec<String>,
}

pub fn cache_server(cache: &CacheServer) -> Result<CacheServerConfig, Error> {
    let owner = owner(
        cache,
        Kind::CacheServer,
        cache.spec.cluster_domain.as_deref(),
    )?;
    let etcd = match &cache.spec.etcd {
        Some(config) => resolve_etcd(config)?,
        None => Etcd::Embedded,
    };
    let replicas = match (&etcd, cache.spec.replicas) {
        (Etcd::Embedded, Some(replicas)) if replicas > 1 => {
            return Err(Error::EmbeddedCacheReplicas(replicas));
        }
        (Etcd::Embedded, replicas) => replicas.unwrap_or(1),
        (_, replicas) => replicas.unwrap_or(DEFAULT_SERVER_REPLICAS),
    };
    let mut warnings = cert_manager_warnings(&cache.spec.certificate_templates);
    if cache.spec.certificates.issuer_ref.is_some() {
        warnings.push(
            "certificates.issuerRef is ignored: the operator issues the cache CA itself".into(),
        );
    }
    Ok(CacheServerConfig {
        image: Image::resolve(cache.spec.image.as_ref()),
        replicas,
        etcd,
        ca_secret: match &cache.spec.certificates.ca_secret_ref {
            Some(reference) => reference.name.clone(),
            None => owner.names.certificate_secret(naming::Certificate::RootCa),
        },
        spec: cache.spec.clone(),
        owner,
        warnings,
    })
}

/// What a Kubeconfig resolves to: its identity, its certificate and where it points.
#[derive(Clone, Debug, PartialEq)]
pub struct KubeconfigConfig {
    pub owner: Owner,
    pub root: RootShardFacts,
    /// Server URL without the workspace path.
    pub base_url: String,
    /// URL the operator reaches the target at from inside the host cluster (for bindings).
    pub internal_url: String,
    pub workspace: String,
    pub request: crate::pki::CertificateRequest,
    /// `Kind/name` of the target, for status.
    pub target_name: String,
}

/// The target a Kubeconfig points at, as read by the controller.
pub enum KubeconfigTarget<'a> {
    RootShard(&'a RootShard),
    Shard(&'a Shard, &'a RootShard),
    FrontProxy(&'a FrontProxy, &'a RootShard),
}

pub fn kubeconfig(
    kubeconfig: &crate::api::Kubeconfig,
    target: Option<KubeconfigTarget<'_>>,
) -> Result<KubeconfigConfig, Error> {
    let spec = &kubeconfig.spec;
    let owner = owner(kubeconfig, Kind::Kubeconfig, None)?;
    let reference = [
        ("RootShard", spec.target.root_shard_ref.as_ref()),
        ("Shard", spec.target.shard_ref.as_ref()),
        ("FrontProxy", spec.target.front_proxy_ref.as_ref()),
    ]
    .into_iter()
    .find_map(|(kind, reference)| reference.map(|r| (kind, r.name.clone())))
    .ok_or(Error::NoKubeconfigTarget)?;
    let target = target.ok_or_else(|| Error::ReferenceNotFound {
        kind: reference.0,
        name: reference.1.clone(),
    })?;
    let (root, base_url, internal_url) = match target {
        KubeconfigTarget::RootShard(root) => {
            let facts = RootShardFacts::of(root)?;
            let url = facts.shard_base_url.clone();
            (facts, url.clone(), url)
        }
        KubeconfigTarget::Shard(shard_object, root) => {
            let config = shard(shard_object, Some(root))?;
            let url = config.shard_base_url;
            (config.root, url.clone(), url)
        }
        KubeconfigTarget::FrontProxy(proxy, root) => {
            let config = front_proxy(proxy, Some(root))?;
            let url = format!(
                "https://{}:{}",
                config.external_hostname, config.external_port
            );
            let internal = format!(
                "https://{}:{}",
                config.owner.names.service_host(),
                config.external_port
            );
            (config.root, url, internal)
        }
    };
    let validity = kcp_apimachinery::duration::parse(&spec.validity)
        .map_err(|error| Error::InvalidValidity(error.to_string()))?;
    let mut groups = spec.groups.clone();
    groups.push(naming::kubeconfig_group(&owner.names.instance));
    let mut request = crate::pki::CertificateRequest::client(spec.username.clone(), groups);
    request.validity = validity;
    let workspace = spec
        .target_workspace
        .clone()
        .or_else(|| {
            spec.authorization
                .as_ref()
                .and_then(|a| a.cluster_role_bindings.cluster.clone())
        })
        .unwrap_or_else(|| "root".into());
    Ok(KubeconfigConfig {
        owner,
        root,
        base_url,
        internal_url,
        workspace,
        request: request.normalized(),
        target_name: format!("{}/{}", reference.0, reference.1),
    })
}

/// Fields of certificate templates only cert-manager understood.
fn cert_manager_warnings(templates: &CertificateTemplateMap) -> Vec<String> {
    templates
        .iter()
        .filter_map(|(key, template)| {
            let spec = template.spec.as_ref()?;
            let ignored: Vec<&str> = [
                spec.issuer_ref.as_ref().map(|_| "issuerRef"),
                spec.private_key.as_ref().map(|_| "privateKey"),
                spec.secret_template.as_ref().map(|_| "secretTemplate"),
            ]
            .into_iter()
            .flatten()
            .collect();
            (!ignored.is_empty()).then(|| {
                format!(
                    "certificateTemplates.{key}: {} only configure cert-manager and are ignored",
                    ignored.join(", ")
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{check_path_mappings, is_endpoint_url, shard};
    use crate::api::{PathMappingEntry, RootShard, Shard};

    fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        yaml_serde::from_str(yaml).expect("test CR parses")
    }

    fn root_with(cache: &str) -> RootShard {
        parse(&format!(
            "apiVersion: operator.kcp.io/v1alpha1\nkind: RootShard\n\
             metadata: {{name: root, namespace: kcp, uid: u1}}\n\
             spec: {{external: {{hostname: kcp.example.com, port: 6443}}, \
             etcd: {{endpoints: [\"http://etcd:2379\"]}}{cache}}}\n"
        ))
    }

    fn shard_with(cache: &str) -> Shard {
        parse(&format!(
            "apiVersion: operator.kcp.io/v1alpha1\nkind: Shard\n\
             metadata: {{name: beta, namespace: kcp, uid: u2}}\n\
             spec: {{rootShard: {{ref: {{name: root}}}}, \
             etcd: {{endpoints: [\"http://etcd:2379\"]}}{cache}}}\n"
        ))
    }

    #[test]
    fn a_shard_with_another_cache_than_its_root_shard_is_told_so() {
        let to = |name: &str| format!(", cache: {{ref: {{name: {name}}}}}");
        let mismatch = |root: &str, own: &str| {
            shard(&shard_with(own), Some(&root_with(root)))
                .expect("valid shard")
                .cache_mismatch
        };
        assert_eq!(mismatch("", ""), None, "both embedded: the root's");
        assert_eq!(mismatch(&to("c"), ""), None, "inherited");
        assert_eq!(mismatch(&to("c"), &to("c")), None, "named the same");
        let other = mismatch(&to("c"), &to("d")).expect("another CacheServer");
        assert!(
            other.contains("CacheServer d") && other.contains("uses CacheServer c"),
            "{other}"
        );
        let beside_embedded = mismatch("", &to("d")).expect("root shard without cache.ref");
        assert!(
            beside_embedded.contains("its embedded cache"),
            "{beside_embedded}"
        );
    }

    fn mapping(path: &str, backend: &str, key: &str) -> PathMappingEntry {
        PathMappingEntry {
            path: path.into(),
            backend: backend.into(),
            backend_server_ca: "/etc/ca.crt".into(),
            proxy_client_cert: "/etc/tls.crt".into(),
            proxy_client_key: key.into(),
        }
    }

    #[test]
    fn additional_path_mappings_the_front_proxy_would_refuse_are_invalid() {
        let good = mapping(
            "/extra/",
            "https://vw.kcp.svc:6443/services",
            "/etc/tls.key",
        );
        assert_eq!(check_path_mappings(std::slice::from_ref(&good)), Ok(()));
        for (entries, reason) in [
            (
                vec![mapping("extra/", "https://vw", "/k")],
                "must start with '/'",
            ),
            (
                vec![mapping("/clusters/", "https://vw", "/k")],
                "mapped already",
            ),
            (vec![good.clone(), good.clone()], "mapped already"),
            (
                vec![mapping("/extra/", "vw:6443", "/k")],
                "not an http:// or https://",
            ),
            (
                vec![mapping("/extra/", "https://", "/k")],
                "not an http:// or https://",
            ),
            (
                vec![mapping("/extra/", "https://vw", "")],
                "proxy_client_key must not be empty",
            ),
        ] {
            let error = check_path_mappings(&entries).expect_err(reason).to_string();
            assert!(error.contains(reason), "{error}");
            assert!(
                error.starts_with("additionalPathMappings: mapping"),
                "{error}"
            );
        }
    }

    #[test]
    fn etcd_endpoints_must_be_urls_with_a_host() {
        for good in [
            "https://etcd.kcp.svc.cluster.local:2379",
            "http://127.0.0.1:2379",
            "https://etcd:2379/",
            "https://[::1]:2379",
            "https://etcd",
        ] {
            assert!(is_endpoint_url(good), "{good}");
        }
        for bad in [
            "not a url",
            "etcd:2379",
            "https://",
            "https://etcd:notaport",
            "https://etcd:2379/path",
            "ftp://etcd:2379",
        ] {
            assert!(!is_endpoint_url(bad), "{bad}");
        }
    }
}
