//! Kubeconfig Secrets: file-based ones that components mount (the certificate files sit next to
//! them in the pod), and self-contained ones for `Kubeconfig` resources. The file's model is
//! kcp-kubeconfig's; what is the operator's here is which contexts, servers and files.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kcp_kubeconfig::{Cluster, Context, Kubeconfig, KubeconfigError, User};

use crate::naming::Certificate;
use crate::paths::{self, file};
use crate::validate::{
    CacheServerConfig, FrontProxyConfig, Owner, ServerConfig, ServerRole, VirtualWorkspaceConfig,
};

use super::pod;

/// Failure to serialise a kubeconfig.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise kubeconfig")]
pub struct Error(#[from] KubeconfigError);

/// A kubeconfig whose one context `name` joins the cluster and user of the same name.
fn single_context(name: &str, cluster: Cluster, user: User) -> Kubeconfig {
    let mut config = Kubeconfig::new();
    config.set_cluster(name, cluster);
    config.set_user(name, user);
    config.set_context(
        name,
        Context {
            cluster: name.to_owned(),
            user: name.to_owned(),
            ..Context::default()
        },
    );
    config.current_context = name.to_owned();
    config
}

/// Where the client finds its server and credentials.
struct KubeconfigFiles<'a> {
    context: &'a str,
    server: String,
    ca_file: String,
    cert_dir: &'a str,
}

fn file_based(files: KubeconfigFiles<'_>) -> Result<String, Error> {
    let KubeconfigFiles {
        context,
        server,
        ca_file,
        cert_dir,
    } = files;
    let config = single_context(
        context,
        Cluster {
            server,
            certificate_authority: Some(ca_file),
            ..Cluster::default()
        },
        User {
            client_certificate: Some(file(cert_dir, "tls.crt")),
            client_key: Some(file(cert_dir, "tls.key")),
            ..User::default()
        },
    );
    Ok(config.to_yaml()?)
}

fn kubeconfig_secret(owner: &Owner, name: String, kubeconfig: String) -> Secret {
    Secret {
        metadata: pod::object_meta(owner, name, owner.names.labels()),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            paths::KUBECONFIG_FILE.to_owned(),
            ByteString(kubeconfig.into_bytes()),
        )])),
        ..Default::default()
    }
}

/// Logical-cluster-admin kubeconfigs (internal and external) and, on shards, the root-shard client kubeconfig.
pub fn server_kubeconfigs(config: &ServerConfig) -> Result<Vec<Secret>, Error> {
    let names = config.names();
    let server_ca = file(paths::SERVER_CA_DIR, "tls.crt");
    let external = &config.root.external;
    let external_server = match (&external.private_hostname, external.private_port) {
        (Some(host), port) => format!("https://{host}:{}", port.unwrap_or(external.port)),
        (None, _) => config.root.external_url(),
    };
    let external_ca = if config.ca_bundle.is_some() {
        file(paths::CA_BUNDLE_DIR, "tls.crt")
    } else {
        server_ca.clone()
    };
    let (internal_context, external_context) = match config.role {
        ServerRole::Root => ("shard-base", "shard-base"),
        ServerRole::Shard => ("logical-cluster", "external-logical-cluster"),
    };
    let mut secrets = vec![
        kubeconfig_secret(
            &config.owner,
            names.kubeconfig_secret(Certificate::LogicalClusterAdmin),
            file_based(KubeconfigFiles {
                context: internal_context,
                server: config.shard_base_url.clone(),
                ca_file: server_ca.clone(),
                cert_dir: paths::LOGICAL_CLUSTER_ADMIN_CERT_DIR,
            })?,
        ),
        kubeconfig_secret(
            &config.owner,
            names.kubeconfig_secret(Certificate::ExternalLogicalClusterAdmin),
            file_based(KubeconfigFiles {
                context: external_context,
                server: external_server,
                ca_file: external_ca,
                cert_dir: paths::EXTERNAL_LOGICAL_CLUSTER_ADMIN_CERT_DIR,
            })?,
        ),
    ];
    if config.role == ServerRole::Shard {
        secrets.push(kubeconfig_secret(
            &config.owner,
            names.kubeconfig_secret(Certificate::Client),
            file_based(KubeconfigFiles {
                context: "shard-base",
                server: config.root.shard_base_url.clone(),
                ca_file: server_ca,
                cert_dir: paths::CLIENT_CERT_DIR,
            })?,
        ));
    }
    Ok(secrets)
}

/// The Secret `<owner>-client-kubeconfig`: `files` with the owner's client certificate.
fn client_kubeconfig(owner: &Owner, files: KubeconfigFiles<'_>) -> Result<Secret, Error> {
    Ok(kubeconfig_secret(
        owner,
        owner.names.kubeconfig_secret(Certificate::Client),
        file_based(files)?,
    ))
}

/// The front-proxy's kubeconfig for the root shard (and, through it, the shards).
pub fn front_proxy_kubeconfig(config: &FrontProxyConfig) -> Result<Secret, Error> {
    client_kubeconfig(
        &config.owner,
        KubeconfigFiles {
            context: "system:admin",
            server: config.root.shard_base_url.clone(),
            ca_file: file(paths::FRONT_PROXY_ROOT_CA_DIR, "tls.crt"),
            cert_dir: paths::FRONT_PROXY_CLIENT_CERT_DIR,
        },
    )
}

/// Kubeconfig shards mount to reach this cache server.
pub fn cache_server_kubeconfig(config: &CacheServerConfig) -> Result<Secret, Error> {
    client_kubeconfig(
        &config.owner,
        KubeconfigFiles {
            context: "cache",
            server: config.owner.names.service_url(),
            ca_file: file(paths::CACHE_CA_DIR, "tls.crt"),
            cert_dir: paths::CACHE_CLIENT_CERT_DIR,
        },
    )
}

/// Kubeconfig a virtual-workspace server reaches its shard with (`--kubeconfig`).
pub fn virtual_workspace_kubeconfig(config: &VirtualWorkspaceConfig) -> Result<Secret, Error> {
    client_kubeconfig(
        &config.owner,
        KubeconfigFiles {
            context: "shard",
            server: config.shard_url.clone(),
            ca_file: file(paths::SERVER_CA_DIR, "tls.crt"),
            cert_dir: paths::CLIENT_CERT_DIR,
        },
    )
}

/// Credentials and endpoint of a self-contained kubeconfig.
pub struct EmbeddedKubeconfig<'a> {
    pub base_url: &'a str,
    pub workspace: &'a str,
    pub username: &'a str,
    pub ca_pem: &'a str,
    pub cert_pem: &'a str,
    pub key_pem: &'a str,
}

/// Contexts `default` (the workspace) and `base` (the server root), like upstream.
pub fn embedded(kubeconfig: &EmbeddedKubeconfig<'_>) -> Result<String, Error> {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let base_url = kubeconfig.base_url.trim_end_matches('/');
    let cluster = |server: String| Cluster {
        server,
        certificate_authority_data: Some(b64(kubeconfig.ca_pem)),
        ..Cluster::default()
    };
    let context = |cluster: &str| Context {
        cluster: cluster.to_owned(),
        user: kubeconfig.username.to_owned(),
        ..Context::default()
    };
    let mut config = Kubeconfig::new();
    config.set_cluster(
        "default",
        cluster(format!("{base_url}/clusters/{}", kubeconfig.workspace)),
    );
    config.set_cluster("base", cluster(base_url.to_owned()));
    config.set_user(
        kubeconfig.username,
        User {
            client_certificate_data: Some(b64(kubeconfig.cert_pem)),
            client_key_data: Some(b64(kubeconfig.key_pem)),
            ..User::default()
        },
    );
    config.set_context("default", context("default"));
    config.set_context("base", context("base"));
    config.current_context = "default".to_owned();
    Ok(config.to_yaml()?)
}
