//! Kubeconfig Secrets: file-based ones that components mount (the certificate files sit next to
//! them in the pod), and self-contained ones for `Kubeconfig` resources.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use crate::naming::Certificate;
use crate::paths::{self, file};
use crate::validate::{CacheServerConfig, FrontProxyConfig, Owner, ServerConfig, ServerRole};

use super::pod;

/// Failure to serialise a kubeconfig.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise kubeconfig")]
pub struct Error(#[from] yaml_serde::Error);

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
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority": ca_file}}],
        "users": [{"name": context, "user": {
            "client-certificate": file(cert_dir, "tls.crt"),
            "client-key": file(cert_dir, "tls.key"),
        }}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    });
    Ok(yaml_serde::to_string(&document)?)
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

/// The front-proxy's kubeconfig for the root shard (and, through it, the shards).
pub fn front_proxy_kubeconfig(config: &FrontProxyConfig) -> Result<Secret, Error> {
    let names = &config.owner.names;
    Ok(kubeconfig_secret(
        &config.owner,
        names.kubeconfig_secret(Certificate::Client),
        file_based(KubeconfigFiles {
            context: "system:admin",
            server: config.root.shard_base_url.clone(),
            ca_file: file(paths::FRONT_PROXY_ROOT_CA_DIR, "tls.crt"),
            cert_dir: paths::FRONT_PROXY_CLIENT_CERT_DIR,
        })?,
    ))
}

/// Kubeconfig shards mount to reach this cache server.
pub fn cache_server_kubeconfig(config: &CacheServerConfig) -> Result<Secret, Error> {
    let names = &config.owner.names;
    Ok(kubeconfig_secret(
        &config.owner,
        names.kubeconfig_secret(Certificate::Client),
        file_based(KubeconfigFiles {
            context: "cache",
            server: names.service_url(),
            ca_file: file(paths::CACHE_CA_DIR, "tls.crt"),
            cert_dir: paths::CACHE_CLIENT_CERT_DIR,
        })?,
    ))
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
    let cluster = |server: String| json!({"server": server, "certificate-authority-data": b64(kubeconfig.ca_pem)});
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "default", "cluster": cluster(format!("{base_url}/clusters/{}", kubeconfig.workspace))},
            {"name": "base", "cluster": cluster(base_url.to_owned())},
        ],
        "users": [{"name": kubeconfig.username, "user": {
            "client-certificate-data": b64(kubeconfig.cert_pem),
            "client-key-data": b64(kubeconfig.key_pem),
        }}],
        "contexts": [
            {"name": "default", "context": {"cluster": "default", "user": kubeconfig.username}},
            {"name": "base", "context": {"cluster": "base", "user": kubeconfig.username}},
        ],
        "current-context": "default",
    });
    Ok(yaml_serde::to_string(&document)?)
}
