//! Deployments of the root shard, shards, front-proxies, cache servers and virtual-workspace
//! servers: the commands, flags,
//! mounts, probes and ports upstream renders, so either server image runs under this operator.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::api::common::DeploymentTemplate;
use crate::naming::{self, Certificate};
use crate::paths::{self, file};
use crate::validate::{
    CacheServerConfig, Etcd, FrontProxyConfig, Image, Owner, ServerConfig, ServerRole,
    VirtualWorkspaceConfig,
};

use super::flags::{self, flag};
use super::pod::{self, Fragment, Mount};

/// Names the root shard and its proxies accept as front-proxy identities.
const ROOT_REQUESTHEADER_ALLOWED_NAMES: &str = "kcp-front-proxy,kcp-root-shard-proxy";
const FRONT_PROXY_REQUESTHEADER_ALLOWED_NAMES: &str = "kcp-front-proxy,kcp-mounts-proxy";

fn requestheader_flags(allowed_names: &str) -> Vec<String> {
    vec![
        flag(
            "requestheader-client-ca-file",
            file(paths::REQUESTHEADER_CLIENT_CA_DIR, "tls.crt"),
        ),
        flag("requestheader-allowed-names", allowed_names),
        flag("requestheader-username-headers", "X-Remote-User"),
        flag("requestheader-group-headers", "X-Remote-Group"),
        flag("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
    ]
}

fn resources(
    cpu_request: &str,
    memory_request: &str,
    cpu_limit: &str,
    memory_limit: &str,
) -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.into())),
            ("memory".to_owned(), Quantity(memory.into())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities(cpu_request, memory_request)),
        limits: Some(quantities(cpu_limit, memory_limit)),
        ..Default::default()
    }
}

/// User resources overlay the defaults key by key.
fn overlay_resources(
    defaults: ResourceRequirements,
    user: Option<&ResourceRequirements>,
) -> ResourceRequirements {
    let Some(user) = user else {
        return defaults;
    };
    let merge = |base: Option<BTreeMap<String, Quantity>>,
                 over: &Option<BTreeMap<String, Quantity>>| {
        let mut merged = base.unwrap_or_default();
        merged.extend(over.clone().unwrap_or_default());
        (!merged.is_empty()).then_some(merged)
    };
    ResourceRequirements {
        requests: merge(defaults.requests, &user.requests),
        limits: merge(defaults.limits, &user.limits),
        ..user.clone()
    }
}

/// Arguments and mounts of a root shard or shard container.
pub fn server_fragment(config: &ServerConfig) -> Fragment {
    let names = config.names();
    let root = &config.root.names;
    let secret = |certificate| names.certificate_secret(certificate);
    let root_secret = |certificate| root.certificate_secret(certificate);
    let client_ca_secret = if config.client_ca_bundles.is_empty() {
        root_secret(Certificate::ClientCa)
    } else {
        names.merged_client_ca_secret()
    };

    let mut args = vec![
        flag("root-ca-file", file(paths::ROOT_CA_DIR, "tls.crt")),
        flag("client-ca-file", file(paths::CLIENT_CA_DIR, "tls.crt")),
    ];
    args.extend(requestheader_flags(ROOT_REQUESTHEADER_ALLOWED_NAMES));
    args.extend([
        flag(
            "tls-private-key-file",
            file(paths::SERVER_CERT_DIR, "tls.key"),
        ),
        flag("tls-cert-file", file(paths::SERVER_CERT_DIR, "tls.crt")),
        flag(
            "service-account-key-file",
            file(paths::SERVICE_ACCOUNT_CERT_DIR, "tls.crt"),
        ),
        flag(
            "service-account-private-key-file",
            file(paths::SERVICE_ACCOUNT_CERT_DIR, "tls.key"),
        ),
        flag("service-account-lookup", false),
        flag(
            "shard-client-key-file",
            file(paths::CLIENT_CERT_DIR, "tls.key"),
        ),
        flag(
            "shard-client-cert-file",
            file(paths::CLIENT_CERT_DIR, "tls.crt"),
        ),
    ]);
    if config.role == ServerRole::Shard {
        args.push(flag("shard-name", &names.instance));
    }
    args.push(flag("shard-base-url", &config.shard_base_url));
    args.push(flag("shard-external-url", config.root.external_url()));
    let client_kubeconfig = file(paths::CLIENT_KUBECONFIG_DIR, paths::KUBECONFIG_FILE);
    let cache_kubeconfig = file(paths::CACHE_KUBECONFIG_DIR, paths::KUBECONFIG_FILE);
    if config.role == ServerRole::Shard {
        args.push(flag("external-hostname", &config.root.external.hostname));
        // Without a cache server, shards use the root shard's embedded cache.
        args.push(flag(
            "cache-kubeconfig",
            if config.cache.is_some() {
                &cache_kubeconfig
            } else {
                &client_kubeconfig
            },
        ));
        args.push(flag("root-shard-kubeconfig-file", &client_kubeconfig));
    } else if config.cache.is_some() {
        args.push(flag("cache-kubeconfig", &cache_kubeconfig));
    }
    args.extend([
        flag(
            "logical-cluster-admin-kubeconfig",
            file(
                paths::LOGICAL_CLUSTER_ADMIN_KUBECONFIG_DIR,
                paths::KUBECONFIG_FILE,
            ),
        ),
        flag(
            "external-logical-cluster-admin-kubeconfig",
            file(
                paths::EXTERNAL_LOGICAL_CLUSTER_ADMIN_KUBECONFIG_DIR,
                paths::KUBECONFIG_FILE,
            ),
        ),
        flag("batteries-included", "workspace-types"),
        flag("root-directory", ""),
        flag("enable-leader-election", true),
        flag("logging-format", "json"),
    ]);
    if let Some(url) = &config.virtual_workspace_url {
        // As upstream: the VirtualWorkspace serves them, signed by the root server CA.
        args.extend([
            flag("run-virtual-workspaces", false),
            flag("shard-virtual-workspace-url", url),
            flag(
                "shard-virtual-workspace-ca-file",
                file(paths::SERVER_CA_DIR, "tls.crt"),
            ),
        ]);
    }
    if config.role == ServerRole::Shard {
        args.push(flag(
            "mount-proxy-client-cert-file",
            file(paths::MOUNTS_PROXY_CERT_DIR, "tls.crt"),
        ));
        args.push(flag(
            "mount-proxy-client-key-file",
            file(paths::MOUNTS_PROXY_CERT_DIR, "tls.key"),
        ));
    }

    let mut mounts = vec![
        Mount::secret(
            "kcp-ca",
            config.root.root_ca_secret.clone(),
            paths::ROOT_CA_DIR,
        ),
        Mount::secret(
            "server-ca",
            root_secret(Certificate::ServerCa),
            paths::SERVER_CA_DIR,
        ),
        Mount::secret(
            "service-account-ca",
            root_secret(Certificate::ServiceAccountCa),
            paths::SERVICE_ACCOUNT_CA_DIR,
        ),
        Mount::secret(
            "requestheader-client-ca",
            root_secret(Certificate::RequestHeaderClientCa),
            paths::REQUESTHEADER_CLIENT_CA_DIR,
        ),
        Mount::secret("client-ca", client_ca_secret, paths::CLIENT_CA_DIR),
        Mount::secret(
            "server-cert",
            secret(Certificate::Server),
            paths::SERVER_CERT_DIR,
        ),
        Mount::secret(
            "service-account-cert",
            secret(Certificate::ServiceAccount),
            paths::SERVICE_ACCOUNT_CERT_DIR,
        ),
        Mount::secret(
            "client-cert",
            secret(Certificate::Client),
            paths::CLIENT_CERT_DIR,
        ),
        Mount::secret(
            "logical-cluster-admin-cert",
            secret(Certificate::LogicalClusterAdmin),
            paths::LOGICAL_CLUSTER_ADMIN_CERT_DIR,
        ),
        Mount::secret(
            "external-logical-cluster-admin-cert",
            secret(Certificate::ExternalLogicalClusterAdmin),
            paths::EXTERNAL_LOGICAL_CLUSTER_ADMIN_CERT_DIR,
        ),
        Mount::secret(
            "logical-cluster-admin-kubeconfig",
            names.kubeconfig_secret(Certificate::LogicalClusterAdmin),
            paths::LOGICAL_CLUSTER_ADMIN_KUBECONFIG_DIR,
        ),
        Mount::secret(
            "external-logical-cluster-admin-kubeconfig",
            names.kubeconfig_secret(Certificate::ExternalLogicalClusterAdmin),
            paths::EXTERNAL_LOGICAL_CLUSTER_ADMIN_KUBECONFIG_DIR,
        ),
    ];
    if config.ca_bundle.is_some() {
        mounts.push(Mount::secret(
            "ca-bundle",
            names.merged_ca_bundle_secret(),
            paths::CA_BUNDLE_DIR,
        ));
    }
    if config.role == ServerRole::Shard {
        mounts.push(Mount::secret(
            "client-kubeconfig",
            names.kubeconfig_secret(Certificate::Client),
            paths::CLIENT_KUBECONFIG_DIR,
        ));
        mounts.push(Mount::secret(
            "mounts-proxy-cert",
            secret(Certificate::MountsProxy),
            paths::MOUNTS_PROXY_CERT_DIR,
        ));
    }
    if let Some(cache) = &config.cache {
        mounts.extend([
            Mount::secret(
                "cache-server-kubeconfig",
                cache.kubeconfig_secret(Certificate::Client),
                paths::CACHE_KUBECONFIG_DIR,
            ),
            Mount::secret(
                "cache-server-ca",
                cache.certificate_secret(Certificate::RootCa),
                paths::CACHE_CA_DIR,
            ),
            Mount::secret(
                "cache-server-client-cert",
                cache.certificate_secret(Certificate::Client),
                paths::CACHE_CLIENT_CERT_DIR,
            ),
        ]);
    }

    let mut fragment = Fragment { args, mounts };
    fragment
        .args
        .extend(flags::verbosity(config.spec.logging.as_ref()));
    fragment.extend(flags::etcd(&config.etcd, names));
    fragment.extend(flags::audit(config.spec.audit.as_ref()));
    fragment.extend(flags::authorization(config.spec.authorization.as_ref()));
    fragment.extend(flags::authentication(config.spec.auth.as_ref()));
    // Last, so that a user's flag overrides a generated one.
    fragment.args.extend(config.spec.extra_args.iter().cloned());
    fragment
}

/// How a component's pods are probed.
#[derive(Clone, Copy)]
enum Probes {
    /// kcp servers: a generous startup probe, then readiness and liveness.
    Server,
    /// Proxies and the cache server: readiness and liveness only.
    Light,
}

/// Everything that differs between the component Deployments.
struct Workload<'a> {
    owner: &'a Owner,
    image: &'a Image,
    replicas: i32,
    revision: &'a str,
    template: Option<&'a DeploymentTemplate>,
    container_name: &'static str,
    command: &'static [&'static str],
    fragment: Fragment,
    extra_volumes: &'a [Volume],
    extra_volume_mounts: &'a [VolumeMount],
    resources: Option<ResourceRequirements>,
    probes: Probes,
}

fn deployment(workload: Workload<'_>) -> Deployment {
    let Workload {
        owner,
        image,
        replicas,
        revision,
        template,
        container_name,
        command,
        fragment,
        extra_volumes,
        extra_volume_mounts,
        resources,
        probes,
    } = workload;
    let labels = owner.names.labels();
    let (volumes, volume_mounts) =
        pod::volumes(&fragment.mounts, extra_volumes, extra_volume_mounts);
    let (startup_probe, failure_threshold, initial_delay) = match probes {
        Probes::Server => (Some(pod::https_probe("/readyz", 60, 10, 5)), 6, 10),
        Probes::Light => (None, 3, 15),
    };
    let container = Container {
        name: container_name.into(),
        image: Some(image.reference.clone()),
        command: Some(command.iter().map(|part| (*part).to_owned()).collect()),
        args: Some(fragment.args),
        ports: Some(vec![https_port(naming::KCP_PORT)]),
        volume_mounts: Some(volume_mounts),
        resources,
        security_context: Some(pod::restricted_security_context()),
        startup_probe,
        readiness_probe: Some(pod::https_probe(
            "/readyz",
            failure_threshold,
            initial_delay,
            10,
        )),
        liveness_probe: Some(pod::https_probe(
            "/livez",
            failure_threshold,
            initial_delay,
            10,
        )),
        ..Default::default()
    };
    let mut pod = PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        image_pull_secrets: (!image.pull_secrets.is_empty()).then(|| image.pull_secrets.clone()),
        affinity: (replicas > 1).then(|| pod::spread_over_nodes(&labels)),
        ..Default::default()
    };
    pod::apply_pod_template(&mut pod, template);
    let metadata = pod::object_meta(
        owner,
        owner.names.workload(),
        pod::object_labels(labels.clone(), template.and_then(|t| t.metadata.as_ref())),
    );
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(pod::pod_template_meta(
                    &labels,
                    &image.version,
                    revision,
                    template,
                )),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn https_port(port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(naming::KCP_PORT_NAME.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// Deployment of a root shard or shard. `revision` hashes the content of everything mounted.
pub fn server_deployment(config: &ServerConfig, revision: &str) -> Deployment {
    deployment(Workload {
        owner: &config.owner,
        image: &config.image,
        replicas: config.replicas,
        revision,
        template: config.spec.deployment_template.as_ref(),
        container_name: "kcp",
        command: &["/kcp", "start"],
        fragment: server_fragment(config),
        extra_volumes: &config.spec.extra_volumes,
        extra_volume_mounts: &config.spec.extra_volume_mounts,
        resources: Some(overlay_resources(
            resources("1", "1Gi", "2", "2Gi"),
            config.spec.resources.as_ref(),
        )),
        probes: Probes::Server,
    })
}

/// Arguments and mounts of a front-proxy container.
pub fn front_proxy_fragment(config: &FrontProxyConfig) -> Fragment {
    let names = &config.owner.names;
    let root = &config.root.names;
    let kubeconfig = file(paths::FRONT_PROXY_KUBECONFIG_DIR, paths::KUBECONFIG_FILE);
    let mut args = vec![
        flag("secure-port", naming::KCP_PORT),
        flag("root-kubeconfig", &kubeconfig),
        flag("shards-kubeconfig", &kubeconfig),
        flag(
            "tls-private-key-file",
            file(paths::FRONT_PROXY_SERVER_CERT_DIR, "tls.key"),
        ),
        flag(
            "tls-cert-file",
            file(paths::FRONT_PROXY_SERVER_CERT_DIR, "tls.crt"),
        ),
        flag(
            "mapping-file",
            file(paths::FRONT_PROXY_CONFIG_DIR, paths::PATH_MAPPING_FILE),
        ),
        flag(
            "client-ca-file",
            file(paths::FRONT_PROXY_CLIENT_CA_DIR, "tls.crt"),
        ),
    ];
    args.extend(requestheader_flags(FRONT_PROXY_REQUESTHEADER_ALLOWED_NAMES));
    args.extend(flags::group_filters(config.spec.auth.as_ref()));
    args.extend(flags::verbosity(config.spec.logging.as_ref()));
    let mut mounts = vec![
        Mount::secret(
            "dynamic-kubeconfig",
            names.kubeconfig_secret(Certificate::Client),
            paths::FRONT_PROXY_KUBECONFIG_DIR,
        ),
        Mount::secret(
            "kubeconfig-client-cert",
            names.certificate_secret(Certificate::Client),
            paths::FRONT_PROXY_CLIENT_CERT_DIR,
        ),
        Mount::secret(
            "server-cert",
            names.certificate_secret(Certificate::Server),
            paths::FRONT_PROXY_SERVER_CERT_DIR,
        ),
        Mount::secret(
            "requestheader-cert",
            names.certificate_secret(Certificate::RequestHeader),
            paths::FRONT_PROXY_REQUESTHEADER_CERT_DIR,
        ),
        Mount::secret(
            "kcp-ca",
            config.root.root_ca_secret.clone(),
            paths::FRONT_PROXY_ROOT_CA_DIR,
        ),
        Mount::secret(
            "requestheader-client-ca",
            root.certificate_secret(Certificate::RequestHeaderClientCa),
            paths::REQUESTHEADER_CLIENT_CA_DIR,
        ),
        Mount::secret(
            "client-ca",
            names.merged_client_ca_secret(),
            paths::FRONT_PROXY_CLIENT_CA_DIR,
        ),
        Mount::config_map(
            "path-mapping",
            names.path_mapping_config_map(),
            paths::FRONT_PROXY_CONFIG_DIR,
        ),
    ];
    if config.spec.ca_bundle_secret_ref.is_some() {
        mounts.push(Mount::secret(
            "ca-bundle",
            names.merged_ca_bundle_secret(),
            paths::CA_BUNDLE_DIR,
        ));
    }
    let mut fragment = Fragment { args, mounts };
    fragment.extend(flags::authentication(config.spec.auth.as_ref()));
    fragment.args.extend(config.spec.extra_args.iter().cloned());
    fragment
}

pub fn front_proxy_deployment(config: &FrontProxyConfig, revision: &str) -> Deployment {
    deployment(Workload {
        owner: &config.owner,
        image: &config.image,
        replicas: config.replicas,
        revision,
        template: config.spec.deployment_template.as_ref(),
        container_name: "kcp-front-proxy",
        command: &["/kcp-front-proxy"],
        fragment: front_proxy_fragment(config),
        extra_volumes: &config.spec.extra_volumes,
        extra_volume_mounts: &config.spec.extra_volume_mounts,
        resources: config.spec.resources.clone(),
        probes: Probes::Light,
    })
}

/// Arguments and mounts of a cache-server container.
pub fn cache_server_fragment(config: &CacheServerConfig) -> Fragment {
    let names = &config.owner.names;
    let mut fragment = Fragment {
        args: vec![
            flag(
                "tls-cert-file",
                file(paths::CACHE_SERVER_CERT_DIR, "tls.crt"),
            ),
            flag(
                "tls-private-key-file",
                file(paths::CACHE_SERVER_CERT_DIR, "tls.key"),
            ),
            flag("root-directory", ""),
            flag("client-ca-file", file(paths::CACHE_CA_DIR, "tls.crt")),
        ],
        mounts: vec![
            Mount::secret(
                "serving-cert",
                names.certificate_secret(Certificate::Server),
                paths::CACHE_SERVER_CERT_DIR,
            ),
            Mount::secret("client-ca", config.ca_secret.clone(), paths::CACHE_CA_DIR),
        ],
    };
    match &config.etcd {
        Etcd::Embedded => {
            fragment.args.push(flag(
                "embedded-etcd-directory",
                paths::CACHE_EMBEDDED_ETCD_DIR,
            ));
            fragment.mounts.push(Mount::empty_dir(
                "etcd-scratch",
                paths::CACHE_EMBEDDED_ETCD_DIR,
            ));
        }
        external_or_managed => {
            let mut etcd = flags::etcd(external_or_managed, names);
            for arg in &mut etcd.args {
                *arg = arg.replace(paths::ETCD_CLIENT_CERT_DIR, paths::CACHE_ETCD_CERT_DIR);
            }
            for mount in &mut etcd.mounts {
                mount.path = paths::CACHE_ETCD_CERT_DIR.into();
            }
            fragment.extend(etcd);
        }
    }
    fragment
        .args
        .extend(flags::verbosity(config.spec.logging.as_ref()));
    fragment.args.extend(config.spec.extra_args.iter().cloned());
    fragment
}

pub fn cache_server_deployment(config: &CacheServerConfig, revision: &str) -> Deployment {
    deployment(Workload {
        owner: &config.owner,
        image: &config.image,
        replicas: config.replicas,
        revision,
        template: config.spec.deployment_template.as_ref(),
        container_name: "cache-server",
        command: &["/cache-server"],
        fragment: cache_server_fragment(config),
        extra_volumes: &config.spec.extra_volumes,
        extra_volume_mounts: &config.spec.extra_volume_mounts,
        resources: Some(overlay_resources(
            resources("500m", "1Gi", "1", "2Gi"),
            config.spec.resources.as_ref(),
        )),
        probes: Probes::Light,
    })
}

/// Arguments and mounts of a virtual-workspace server container: the flags `kcp
/// virtual-workspaces` accepts (the shard's kubeconfig, secure serving, the client CA) and, as
/// upstream renders them, the root shard's requestheader flags, so a front-proxy (or the root
/// shard's proxy) can forward its users with identity headers.
pub fn virtual_workspace_fragment(config: &VirtualWorkspaceConfig) -> Fragment {
    let names = &config.owner.names;
    let root = &config.root.names;
    let client_ca_secret = if config.client_ca_bundles.is_empty() {
        root.certificate_secret(Certificate::ClientCa)
    } else {
        names.merged_client_ca_secret()
    };
    let mut args = vec![
        flag(
            "kubeconfig",
            file(paths::CLIENT_KUBECONFIG_DIR, paths::KUBECONFIG_FILE),
        ),
        flag("bind-address", "0.0.0.0"),
        flag("secure-port", naming::KCP_PORT),
        flag("tls-cert-file", file(paths::SERVER_CERT_DIR, "tls.crt")),
        flag(
            "tls-private-key-file",
            file(paths::SERVER_CERT_DIR, "tls.key"),
        ),
        flag("client-ca-file", file(paths::CLIENT_CA_DIR, "tls.crt")),
        flag("root-directory", ""),
    ];
    args.extend(requestheader_flags(ROOT_REQUESTHEADER_ALLOWED_NAMES));
    args.extend(flags::verbosity(config.spec.logging.as_ref()));
    args.extend(config.spec.extra_args.iter().cloned());
    Fragment {
        args,
        mounts: vec![
            Mount::secret(
                "kubeconfig",
                names.kubeconfig_secret(Certificate::Client),
                paths::CLIENT_KUBECONFIG_DIR,
            ),
            Mount::secret(
                "client-cert",
                names.certificate_secret(Certificate::Client),
                paths::CLIENT_CERT_DIR,
            ),
            Mount::secret(
                "server-cert",
                names.certificate_secret(Certificate::Server),
                paths::SERVER_CERT_DIR,
            ),
            Mount::secret(
                "server-ca",
                root.certificate_secret(Certificate::ServerCa),
                paths::SERVER_CA_DIR,
            ),
            Mount::secret(
                "requestheader-client-ca",
                root.certificate_secret(Certificate::RequestHeaderClientCa),
                paths::REQUESTHEADER_CLIENT_CA_DIR,
            ),
            Mount::secret("client-ca", client_ca_secret, paths::CLIENT_CA_DIR),
        ],
    }
}

/// Runs `/virtual-workspaces`, the server image's multi-call name of `kcp virtual-workspaces`.
pub fn virtual_workspace_deployment(config: &VirtualWorkspaceConfig, revision: &str) -> Deployment {
    deployment(Workload {
        owner: &config.owner,
        image: &config.image,
        replicas: config.replicas,
        revision,
        template: config.spec.deployment_template.as_ref(),
        container_name: "virtual-workspaces",
        command: &["/virtual-workspaces"],
        fragment: virtual_workspace_fragment(config),
        extra_volumes: &config.spec.extra_volumes,
        extra_volume_mounts: &config.spec.extra_volume_mounts,
        resources: config.spec.resources.clone(),
        probes: Probes::Light,
    })
}
