//! The part of a kubeconfig a benchmark needs: where the server is and how to prove who we are.
//!
//! kcp-bench talks to exactly one server through the current (or a named) context, with the CA and
//! client certificate from that context's cluster and user, embedded (`*-data`) or as file paths
//! (relative to the kubeconfig, as kubectl resolves them). A benchmark is load we aim at a machine,
//! so the server must be on loopback: anything else is refused here, before a connection is made.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

/// Why a kubeconfig could not be turned into a [`Target`].
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing the kubeconfig: {0}")]
    Parse(#[from] yaml_serde::Error),
    #[error("the kubeconfig has no current-context and no --context was given")]
    NoContext,
    #[error("context {0:?} is not in the kubeconfig")]
    UnknownContext(String),
    #[error("cluster {0:?} is not in the kubeconfig")]
    UnknownCluster(String),
    #[error("user {0:?} is not in the kubeconfig")]
    UnknownUser(String),
    #[error("{field} is not valid base64: {source}")]
    Base64 {
        field: &'static str,
        source: base64::DecodeError,
    },
    #[error("server URL {0:?} is not https://host[:port][/path]")]
    Url(String),
    #[error("server {0:?} is not on loopback; kcp-bench only loads 127.0.0.1 or localhost")]
    NotLoopback(String),
    #[error("the cluster has no certificate-authority(-data); kcp-bench verifies the server")]
    NoCa,
}

/// One server to load: its address, TLS name, path prefix and credentials (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Always 127.0.0.1 and the URL's port.
    pub addr: SocketAddr,
    /// The host as written in the URL, for SNI, certificate checks and the Host header.
    pub host: String,
    /// The URL path without a trailing slash, e.g. `/clusters/root` (or empty).
    pub path_prefix: String,
    pub ca_pem: Vec<u8>,
    /// Client certificate and key; `None` when the user has none.
    pub client_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl Target {
    /// Reads `path` and resolves `context` (default: the current context).
    pub fn from_file(path: &Path, context: Option<&str>) -> Result<Self, KubeconfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| KubeconfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_yaml(&text, context, base)
    }

    /// Parses kubeconfig text; relative file references resolve against `base`.
    pub fn from_yaml(
        text: &str,
        context: Option<&str>,
        base: &Path,
    ) -> Result<Self, KubeconfigError> {
        let config: Config = yaml_serde::from_str(text)?;
        let context_name = context
            .map(str::to_owned)
            .or(config.current_context)
            .filter(|name| !name.is_empty())
            .ok_or(KubeconfigError::NoContext)?;
        let ctx = find(&config.contexts, &context_name)
            .ok_or_else(|| KubeconfigError::UnknownContext(context_name.clone()))?;
        let cluster = find(&config.clusters, &ctx.cluster)
            .ok_or_else(|| KubeconfigError::UnknownCluster(ctx.cluster.clone()))?;
        let user = match &ctx.user {
            Some(name) => Some(
                find(&config.users, name)
                    .ok_or_else(|| KubeconfigError::UnknownUser(name.clone()))?,
            ),
            None => None,
        };

        let (host, port, path_prefix) = parse_server_url(&cluster.server)?;
        if !is_loopback(&host) {
            return Err(KubeconfigError::NotLoopback(cluster.server.clone()));
        }
        let ca_pem = material(
            "certificate-authority-data",
            &cluster.certificate_authority_data,
            &cluster.certificate_authority,
            base,
        )?
        .ok_or(KubeconfigError::NoCa)?;
        let client_pem = match user {
            Some(user) => {
                let cert = material(
                    "client-certificate-data",
                    &user.client_certificate_data,
                    &user.client_certificate,
                    base,
                )?;
                let key = material(
                    "client-key-data",
                    &user.client_key_data,
                    &user.client_key,
                    base,
                )?;
                cert.zip(key)
            }
            None => None,
        };
        Ok(Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            host,
            path_prefix,
            ca_pem,
            client_pem,
        })
    }
}

/// The embedded value of `field` if set, else the file it names, else `None`.
fn material(
    field: &'static str,
    data: &Option<String>,
    file: &Option<PathBuf>,
    base: &Path,
) -> Result<Option<Vec<u8>>, KubeconfigError> {
    if let Some(data) = data.as_deref().filter(|d| !d.is_empty()) {
        return STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|source| KubeconfigError::Base64 { field, source });
    }
    match file {
        Some(file) => {
            let path = base.join(file);
            std::fs::read(&path)
                .map(Some)
                .map_err(|source| KubeconfigError::Read { path, source })
        }
        None => Ok(None),
    }
}

/// Splits `https://host[:port][/path]` into host (IPv6 without brackets), port and path.
fn parse_server_url(url: &str) -> Result<(String, u16, String), KubeconfigError> {
    let bad = || KubeconfigError::Url(url.to_owned());
    let rest = url.strip_prefix("https://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse().map_err(|_| bad())?,
        None => 443,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_owned(), port, path.trim_end_matches('/').to_owned()))
}

/// `localhost` or an address in 127.0.0.0/8: what kcp-bench may connect to (always via 127.0.0.1).
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

fn find<'a, T>(named: &'a [Named<T>], name: &str) -> Option<&'a T> {
    named.iter().find(|n| n.name == name).map(|n| &n.value)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Config {
    current_context: Option<String>,
    #[serde(default = "Vec::new")]
    clusters: Vec<Named<Cluster>>,
    #[serde(default = "Vec::new")]
    contexts: Vec<Named<Context>>,
    #[serde(default = "Vec::new")]
    users: Vec<Named<User>>,
}

/// kubeconfig's `{name, <kind>: {...}}` entries; the value sits under `cluster`, `context` or `user`.
#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "context", alias = "user")]
    value: T,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority_data: Option<String>,
    certificate_authority: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Context {
    cluster: String,
    user: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate_data: Option<String>,
    client_certificate: Option<PathBuf>,
    client_key_data: Option<String>,
    client_key: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        STANDARD.encode(s)
    }

    /// The shape `kcp start` writes.
    fn kcp_kubeconfig(server: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: base\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n- name: root\n  cluster:\n    server: {server}/clusters/root\n    certificate-authority-data: {ca}\ncontexts:\n- name: base\n  context:\n    cluster: base\n    user: admin\n- name: root\n  context:\n    cluster: root\n    user: admin\n- name: system:admin\n  context:\n    cluster: base\n    user: admin\ncurrent-context: root\nusers:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
            ca = b64("CA"),
            cert = b64("CERT"),
            key = b64("KEY"),
        )
    }

    #[test]
    fn current_context_of_kcp_admin_kubeconfig() {
        let yaml = kcp_kubeconfig("https://localhost:41234");
        let target = Target::from_yaml(&yaml, None, Path::new("/")).unwrap();
        assert_eq!(target.addr, "127.0.0.1:41234".parse().unwrap());
        assert_eq!(target.host, "localhost");
        assert_eq!(target.path_prefix, "/clusters/root");
        assert_eq!(target.ca_pem, b"CA");
        assert_eq!(target.client_pem, Some((b"CERT".to_vec(), b"KEY".to_vec())));
    }

    #[test]
    fn named_context_overrides_current() {
        let yaml = kcp_kubeconfig("https://127.0.0.1:6443");
        let target = Target::from_yaml(&yaml, Some("system:admin"), Path::new("/")).unwrap();
        assert_eq!(target.path_prefix, "");
        assert_eq!(target.host, "127.0.0.1");
        assert!(matches!(
            Target::from_yaml(&yaml, Some("nope"), Path::new("/")),
            Err(KubeconfigError::UnknownContext(_))
        ));
    }

    #[test]
    fn files_resolve_relative_to_the_kubeconfig() {
        let dir = std::env::temp_dir().join(format!("kcp-bench-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "FILE CA").unwrap();
        std::fs::write(dir.join("admin.crt"), "FILE CERT").unwrap();
        std::fs::write(dir.join("admin.key"), "FILE KEY").unwrap();
        let yaml = "clusters:\n- name: c\n  cluster:\n    server: https://localhost\n    certificate-authority: ca.crt\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate: admin.crt\n    client-key: admin.key\n";
        let target = Target::from_yaml(yaml, None, &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(target.addr.port(), 443);
        assert_eq!(target.ca_pem, b"FILE CA");
        assert_eq!(
            target.client_pem,
            Some((b"FILE CERT".to_vec(), b"FILE KEY".to_vec()))
        );
    }

    #[test]
    fn refuses_servers_off_loopback() {
        for server in [
            "https://10.0.0.1:6443",
            "https://example.com",
            "https://[::2]:1",
        ] {
            let yaml = kcp_kubeconfig(server);
            assert!(
                matches!(
                    Target::from_yaml(&yaml, None, Path::new("/")),
                    Err(KubeconfigError::NotLoopback(_))
                ),
                "{server}"
            );
        }
    }

    #[test]
    fn server_urls() {
        assert_eq!(
            parse_server_url("https://localhost:1/clusters/root/").unwrap(),
            ("localhost".into(), 1, "/clusters/root".into())
        );
        assert_eq!(
            parse_server_url("https://[::1]:8443").unwrap(),
            ("::1".into(), 8443, String::new())
        );
        for bad in [
            "http://localhost:1",
            "https://:1",
            "https://localhost:x",
            "https://[::1",
        ] {
            assert!(parse_server_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn missing_pieces() {
        let no_ca = "clusters:\n- name: c\n  cluster: {server: 'https://localhost:1'}\ncontexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n";
        assert!(matches!(
            Target::from_yaml(no_ca, None, Path::new("/")),
            Err(KubeconfigError::NoCa)
        ));
        let no_current = "clusters: []\ncontexts: []\n";
        assert!(matches!(
            Target::from_yaml(no_current, None, Path::new("/")),
            Err(KubeconfigError::NoContext)
        ));
    }
}
