//! Which certificates each component gets: subject, groups, usages, DNS names and issuer, as
//! upstream issues them, with `certificateTemplates` applied and `clusterDomain` honoured
//! everywhere (upstream hard-codes `cluster.local` for the front-proxy).

use kcp_apimachinery::duration::{self, DurationError};

use crate::api::common::{CertificateTemplate, CertificateTemplateMap};
use crate::naming::{Certificate, Names};
use crate::validate::{
    CacheServerConfig, FrontProxyConfig, ServerConfig, ServerRole, VirtualWorkspaceConfig,
};

use super::request::{CertificateRequest, Usage};

/// Who signs a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Issuer {
    SelfSigned,
    /// The CA stored in this Secret.
    Secret(String),
}

/// One certificate to keep in a Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateSpec {
    pub certificate: Certificate,
    pub secret: String,
    pub issuer: Issuer,
    pub request: CertificateRequest,
}

/// Short and fully qualified names of a Service, plus `localhost` for probes and port-forwards.
fn service_dns_names(names: &Names) -> Vec<String> {
    let workload = names.workload();
    vec![
        "localhost".into(),
        workload.clone(),
        format!("{workload}.{}", names.namespace),
        format!("{workload}.{}.svc", names.namespace),
        names.service_host(),
    ]
}

fn url_host(url: &str) -> Option<String> {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = without_scheme.split('/').next()?;
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    (!host.is_empty()).then(|| host.to_owned())
}

fn apply_template(
    mut request: CertificateRequest,
    template: Option<&CertificateTemplate>,
) -> Result<CertificateRequest, DurationError> {
    if let Some(spec) = template.and_then(|t| t.spec.as_ref()) {
        request.dns_names.extend(spec.dns_names.iter().cloned());
        request.ip_addresses.extend(
            spec.ip_addresses
                .iter()
                .filter_map(|ip| ip.parse::<std::net::IpAddr>().ok()),
        );
        if let Some(subject) = &spec.subject {
            request
                .organizations
                .extend(subject.organizations.iter().cloned());
        }
        if let Some(lifetime) = &spec.duration {
            request.validity = duration::parse(lifetime)?;
        }
        if let Some(renew_before) = &spec.renew_before {
            request.renew_before = Some(duration::parse(renew_before)?);
        }
    }
    Ok(request.normalized())
}

struct Catalog<'a> {
    owner: &'a Names,
    templates: &'a CertificateTemplateMap,
    entries: Vec<CertificateSpec>,
}

impl<'a> Catalog<'a> {
    fn new(owner: &'a Names, templates: &'a CertificateTemplateMap) -> Self {
        Self {
            owner,
            templates,
            entries: Vec::new(),
        }
    }

    fn add(
        &mut self,
        certificate: Certificate,
        issuer: Issuer,
        request: CertificateRequest,
    ) -> Result<(), DurationError> {
        let request = apply_template(request, self.templates.get(certificate.template_key()))?;
        self.entries.push(CertificateSpec {
            certificate,
            secret: self.owner.certificate_secret(certificate),
            issuer,
            request,
        });
        Ok(())
    }
}

/// A root shard's CAs (unless its root CA is brought) and its own leaf certificates.
pub fn root_shard(config: &ServerConfig) -> Result<Vec<CertificateSpec>, DurationError> {
    let names = config.names();
    let mut catalog = Catalog::new(names, config.certificate_templates());
    if config.root.root_ca_secret == names.certificate_secret(Certificate::RootCa) {
        catalog.add(
            Certificate::RootCa,
            Issuer::SelfSigned,
            CertificateRequest::ca(config.root.root_ca_secret.clone()),
        )?;
    }
    let root_ca = Issuer::Secret(config.root.root_ca_secret.clone());
    for ca in [
        Certificate::ServerCa,
        Certificate::ClientCa,
        Certificate::RequestHeaderClientCa,
        Certificate::ServiceAccountCa,
    ] {
        catalog.add(
            ca,
            root_ca.clone(),
            CertificateRequest::ca(names.certificate_secret(ca)),
        )?;
    }
    server_leaves(&mut catalog, config)?;
    let client_ca = Issuer::Secret(names.certificate_secret(Certificate::ClientCa));
    catalog.add(
        Certificate::Operator,
        client_ca,
        CertificateRequest::client("system:kcp-operator", vec!["system:kcp:admin".into()]),
    )?;
    Ok(catalog.entries)
}

/// A shard's leaf certificates, signed by its root shard's CAs.
pub fn shard(config: &ServerConfig) -> Result<Vec<CertificateSpec>, DurationError> {
    let mut catalog = Catalog::new(config.names(), config.certificate_templates());
    server_leaves(&mut catalog, config)?;
    let requestheader_ca = Issuer::Secret(
        config
            .root
            .names
            .certificate_secret(Certificate::RequestHeaderClientCa),
    );
    catalog.add(
        Certificate::MountsProxy,
        requestheader_ca,
        CertificateRequest::client("kcp-mounts-proxy", vec![]),
    )?;
    Ok(catalog.entries)
}

fn server_leaves(catalog: &mut Catalog<'_>, config: &ServerConfig) -> Result<(), DurationError> {
    let names = config.names();
    let root = &config.root.names;
    let ca = |certificate| Issuer::Secret(root.certificate_secret(certificate));
    let mut dns_names = service_dns_names(names);
    dns_names.extend(url_host(&config.shard_base_url));
    if config.role == ServerRole::Root {
        dns_names.push(config.root.external.hostname.clone());
    }
    catalog.add(
        Certificate::Server,
        ca(Certificate::ServerCa),
        CertificateRequest::server(names.workload(), dns_names),
    )?;
    catalog.add(
        Certificate::ServiceAccount,
        ca(Certificate::ServiceAccountCa),
        CertificateRequest::signing(names.certificate_secret(Certificate::ServiceAccount)),
    )?;
    let (client_user, admin_suffix) = match config.role {
        ServerRole::Root => (names.instance.clone(), String::new()),
        ServerRole::Shard => (
            format!("shard-{}", names.instance),
            format!("-shard-{}", names.instance),
        ),
    };
    catalog.add(
        Certificate::Client,
        ca(Certificate::ClientCa),
        CertificateRequest::client(client_user, vec!["system:masters".into()]),
    )?;
    // Upstream's group alone, as upstream: the server's bootstrap policy lets it create
    // LogicalClusters on another shard and list and watch them across that shard's logical
    // clusters (docs/server.md, "Across shards").
    catalog.add(
        Certificate::LogicalClusterAdmin,
        ca(Certificate::ClientCa),
        CertificateRequest::client(
            format!("logical-cluster-admin{admin_suffix}"),
            vec!["system:kcp:logical-cluster-admin".into()],
        ),
    )?;
    catalog.add(
        Certificate::ExternalLogicalClusterAdmin,
        ca(Certificate::ClientCa),
        CertificateRequest::client(
            format!("external-logical-cluster-admin{admin_suffix}"),
            vec!["system:kcp:external-logical-cluster-admin".into()],
        ),
    )
}

/// A serving certificate for `dns_names` from the root server CA and a `system:masters` client
/// certificate for `user` from the root client CA: what a proxy in front of the shards needs.
fn serving_and_masters_client(
    catalog: &mut Catalog<'_>,
    root: &Names,
    dns_names: Vec<String>,
    user: &str,
) -> Result<(), DurationError> {
    let ca = |certificate| Issuer::Secret(root.certificate_secret(certificate));
    let workload = catalog.owner.workload();
    catalog.add(
        Certificate::Server,
        ca(Certificate::ServerCa),
        CertificateRequest::server(workload, dns_names),
    )?;
    catalog.add(
        Certificate::Client,
        ca(Certificate::ClientCa),
        CertificateRequest::client(user, vec!["system:masters".into()]),
    )
}

/// Serving, shard-client and requestheader certificates of a front-proxy.
pub fn front_proxy(config: &FrontProxyConfig) -> Result<Vec<CertificateSpec>, DurationError> {
    let names = &config.owner.names;
    let root = &config.root.names;
    let ca = |certificate| Issuer::Secret(root.certificate_secret(certificate));
    let mut catalog = Catalog::new(names, &config.spec.certificate_templates);
    let mut dns_names = service_dns_names(names);
    dns_names.push(config.root.external.hostname.clone());
    dns_names.extend(config.root.external.private_hostname.clone());
    dns_names.push(config.external_hostname.clone());
    serving_and_masters_client(&mut catalog, root, dns_names, "kcp-front-proxy")?;
    catalog.add(
        Certificate::RequestHeader,
        ca(Certificate::RequestHeaderClientCa),
        CertificateRequest::client("kcp-front-proxy", vec![]),
    )?;
    Ok(catalog.entries)
}

/// The cache server's own CA (unless brought), serving certificate and the client certificate shards use.
pub fn cache_server(config: &CacheServerConfig) -> Result<Vec<CertificateSpec>, DurationError> {
    let names = &config.owner.names;
    let mut catalog = Catalog::new(names, &config.spec.certificate_templates);
    if config.ca_secret == names.certificate_secret(Certificate::RootCa) {
        catalog.add(
            Certificate::RootCa,
            Issuer::SelfSigned,
            CertificateRequest::ca(config.ca_secret.clone()),
        )?;
    }
    let ca = Issuer::Secret(config.ca_secret.clone());
    catalog.add(
        Certificate::Server,
        ca.clone(),
        CertificateRequest::server(names.workload(), service_dns_names(names)),
    )?;
    catalog.add(
        Certificate::Client,
        ca,
        CertificateRequest::client("cache-client", vec!["system:masters".into()]),
    )?;
    Ok(catalog.entries)
}

/// A virtual-workspace server's serving certificate (its Service and external names) and the
/// `system:masters` client certificate it reaches its shard with, both from the root shard's
/// CAs, as upstream issues them (client common name `<name>-virtual-workspace`).
pub fn virtual_workspace(
    config: &VirtualWorkspaceConfig,
) -> Result<Vec<CertificateSpec>, DurationError> {
    let names = &config.owner.names;
    let mut catalog = Catalog::new(names, &config.spec.certificate_templates);
    let mut dns_names = service_dns_names(names);
    dns_names.push(config.external.hostname.clone());
    dns_names.extend(config.external.private_hostname.clone());
    serving_and_masters_client(
        &mut catalog,
        &config.root.names,
        dns_names,
        &format!("{}-virtual-workspace", names.instance),
    )?;
    Ok(catalog.entries)
}

/// A managed etcd's own CA, member certificates (serving and peer) and the client certificate of its owner.
pub fn managed_etcd(owner: &Names) -> Vec<CertificateSpec> {
    let ca_secret = owner.certificate_secret(Certificate::EtcdCa);
    let ca = Issuer::Secret(ca_secret.clone());
    let member_names = vec![
        "localhost".into(),
        owner.etcd_service_host(),
        format!("*.{}", owner.etcd_service_host()),
    ];
    let mut peer = CertificateRequest::server(owner.etcd(), member_names.clone());
    peer.usages = vec![Usage::ServerAuth, Usage::ClientAuth];
    let mut server = CertificateRequest::server(owner.etcd(), member_names);
    // etcd's gRPC gateway dials its own client port presenting this certificate: without client
    // authentication among its usages every member logs "rejected connection ... incompatible
    // key usage" for its own gateway.
    server.usages = vec![Usage::ServerAuth, Usage::ClientAuth];
    server
        .ip_addresses
        .push(std::net::Ipv4Addr::LOCALHOST.into());
    [
        (
            Certificate::EtcdCa,
            Issuer::SelfSigned,
            CertificateRequest::ca(ca_secret),
        ),
        (Certificate::EtcdServer, ca.clone(), server),
        (Certificate::EtcdPeer, ca.clone(), peer),
        (
            Certificate::EtcdClient,
            ca,
            CertificateRequest::client(owner.workload(), vec![]),
        ),
    ]
    .into_iter()
    .map(|(certificate, issuer, request)| CertificateSpec {
        certificate,
        secret: owner.certificate_secret(certificate),
        issuer,
        request: request.normalized(),
    })
    .collect()
}
