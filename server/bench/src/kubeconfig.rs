//! The part of a kubeconfig a benchmark needs: where the server is and how to prove who we are.
//!
//! kcp-bench talks to exactly one server through the current (or a named) context, with the CA and
//! client certificate from that context's cluster and user, embedded (`*-data`) or as file paths
//! (relative to the kubeconfig, as kubectl resolves them). A benchmark is load we aim at a machine,
//! so the server must be on loopback: anything else is refused here, before a connection is made.
//! Reading the file itself (model, context selection, material) is kcp-kubeconfig's.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use kcp_kubeconfig::{Kubeconfig, SelectError};

/// Why a kubeconfig could not be turned into a [`Target`].
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Parsing the file or reading the material it names.
    #[error(transparent)]
    File(#[from] kcp_kubeconfig::KubeconfigError),
    #[error("the kubeconfig has no current-context and no --context was given")]
    NoContext,
    #[error("context {0:?} is not in the kubeconfig")]
    UnknownContext(String),
    #[error("cluster {0:?} is not in the kubeconfig")]
    UnknownCluster(String),
    #[error("user {0:?} is not in the kubeconfig")]
    UnknownUser(String),
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
        Self::from_yaml(&text, context, kcp_kubeconfig::dir_of(path))
    }

    /// Parses kubeconfig text; relative file references resolve against `base`.
    pub fn from_yaml(
        text: &str,
        context: Option<&str>,
        base: &Path,
    ) -> Result<Self, KubeconfigError> {
        let config = Kubeconfig::from_yaml(text)?;
        let selected = config.select(context).map_err(|error| match error {
            SelectError::NoContext => KubeconfigError::NoContext,
            SelectError::UnknownContext(name) => KubeconfigError::UnknownContext(name),
            SelectError::UnknownCluster(name) => KubeconfigError::UnknownCluster(name),
        })?;
        let user_name = &selected.context.user;
        if !user_name.is_empty() && config.user(user_name).is_none() {
            return Err(KubeconfigError::UnknownUser(user_name.clone()));
        }
        let cluster = &selected.cluster;
        let (host, port, path_prefix) = parse_server_url(&cluster.server)?;
        if !is_loopback(&host) {
            return Err(KubeconfigError::NotLoopback(cluster.server.clone()));
        }
        let ca_pem = cluster.ca_pem(base)?.ok_or(KubeconfigError::NoCa)?;
        let user = &selected.user;
        let client_pem = user
            .client_certificate_pem(base)?
            .zip(user.client_key_pem(base)?);
        Ok(Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            host,
            path_prefix,
            ca_pem,
            client_pem,
        })
    }
}

impl Target {
    /// The same credentials and CA against another loopback server, e.g. the cache server of a
    /// `kcp sharded` topology, which trusts the admin certificate of the shards' kubeconfig.
    pub fn with_server(&self, url: &str) -> Result<Self, KubeconfigError> {
        let (host, port, path_prefix) = parse_server_url(url)?;
        if !is_loopback(&host) {
            return Err(KubeconfigError::NotLoopback(url.to_owned()));
        }
        Ok(Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            host,
            path_prefix,
            ..self.clone()
        })
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

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

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
    fn another_server_keeps_the_credentials() {
        let yaml = kcp_kubeconfig("https://localhost:41234");
        let target = Target::from_yaml(&yaml, None, Path::new("/")).unwrap();
        let cache = target.with_server("https://127.0.0.1:40001").unwrap();
        assert_eq!(cache.addr, "127.0.0.1:40001".parse().unwrap());
        assert_eq!(
            (cache.host.as_str(), cache.path_prefix.as_str()),
            ("127.0.0.1", "")
        );
        assert_eq!(
            (&cache.ca_pem, &cache.client_pem),
            (&target.ca_pem, &target.client_pem)
        );
        assert!(matches!(
            target.with_server("https://10.0.0.1:6443"),
            Err(KubeconfigError::NotLoopback(_))
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
