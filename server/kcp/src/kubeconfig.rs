//! The admin kubeconfig `kcp start` writes, shaped like upstream kcp's.
//!
//! Tutorials, scripts and kubectl plugins written for upstream kcp switch between its contexts by
//! name (`root` for the root workspace, `base` for the server without a workspace, `system:admin`),
//! so the file keeps those names and `root` as the current context. Credentials and the CA are
//! embedded, so the file works from any directory and can be copied as one piece; because it then
//! holds a private key it is written like one (see [`crate::private_file`]). The file's model is
//! kcp-kubeconfig's; what is kcp's own here is the choice of contexts, users and servers.
//!
//! `kcp sharded` writes the same kind of file with one context per process instead
//! ([`write_endpoints`]): the admin kubeconfig of a whole topology, and the kubeconfigs its shards
//! are given to reach the root shard and the cache server.

use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_kubeconfig::{Cluster, Context, Kubeconfig, User};

use crate::pki::{PemPair, ServingMaterial};
use crate::private_file::{self, PrivateFileError};

/// Why the admin kubeconfig could not be written.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error(transparent)]
    Render(#[from] kcp_kubeconfig::KubeconfigError),
    #[error(transparent)]
    Write(#[from] PrivateFileError),
}

/// The host clients use for a server bound to `bind_address`: `localhost` for wildcard and
/// loopback addresses (it is in the serving certificate and works for IPv4 and IPv6), otherwise the
/// address itself.
pub fn server_host(bind_address: IpAddr) -> String {
    if bind_address.is_unspecified() || bind_address.is_loopback() {
        "localhost".to_owned()
    } else {
        bind_address.to_string()
    }
}

/// Writes the admin kubeconfig for a server reachable at `server_host:port` (pass the port the
/// listener actually bound, which differs from the flag with `--secure-port=0`).
pub fn write(
    path: &Path,
    material: &ServingMaterial,
    server_host: &str,
    port: u16,
) -> Result<(), KubeconfigError> {
    if material.admin_client.is_none() {
        tracing::warn!(
            kubeconfig = %path.display(),
            "no admin client certificate (--client-ca-file names a CA whose key kcp does not have): \
             the admin kubeconfig carries no credentials"
        );
    }
    let yaml = render(material, server_host, port)?;
    private_file::write(path, yaml.as_bytes())?;
    tracing::info!(kubeconfig = %path.display(), "wrote admin kubeconfig");
    Ok(())
}

const USER: &str = "admin";
/// The `user` battery's user and context (upstream's names).
const NON_ADMIN: &str = "user";

/// The cache server's kubeconfig (`kcp cache-server` writes `<root-directory>/cache.kubeconfig`):
/// one context `cache` naming the bare server (clients add `/services/cache`) and its admin
/// client certificate (group `system:masters`), if it generated one.
pub fn write_cache(
    path: &Path,
    server_ca_pem: &str,
    admin: Option<&PemPair>,
    server_host: &str,
    port: u16,
) -> Result<(), KubeconfigError> {
    const CACHE: &str = "cache";
    let mut config = Kubeconfig::new();
    config.set_cluster(CACHE, cluster(base_url(server_host, port), server_ca_pem));
    config.set_context(CACHE, context(CACHE, USER));
    config.set_user(USER, pem_user(admin));
    config.current_context = CACHE.to_owned();
    private_file::write(path, config.to_yaml()?.as_bytes())?;
    tracing::info!(kubeconfig = %path.display(), "wrote cache kubeconfig");
    Ok(())
}

/// `https://<host>:<port>`, IPv6 addresses in brackets.
fn base_url(server_host: &str, port: u16) -> String {
    let host = match server_host.parse::<Ipv6Addr>() {
        Ok(ip) => format!("[{ip}]"),
        Err(_) => server_host.to_owned(),
    };
    format!("https://{host}:{port}")
}

fn cluster(server: String, ca_pem: &str) -> Cluster {
    Cluster {
        server,
        certificate_authority_data: Some(STANDARD.encode(ca_pem)),
        ..Cluster::default()
    }
}

fn context(cluster: &str, user: &str) -> Context {
    Context {
        cluster: cluster.to_owned(),
        user: user.to_owned(),
        ..Context::default()
    }
}

fn pem_user(pair: Option<&PemPair>) -> User {
    User {
        client_certificate_data: pair.map(|pair| STANDARD.encode(&pair.cert_pem)),
        client_key_data: pair.map(|pair| STANDARD.encode(&pair.key_pem)),
        ..User::default()
    }
}

fn render(
    material: &ServingMaterial,
    server_host: &str,
    port: u16,
) -> Result<String, KubeconfigError> {
    let base_url = base_url(server_host, port);
    let cluster = |server: String| cluster(server, &material.server_ca_pem);
    let mut config = Kubeconfig::new();
    config.set_cluster("base", cluster(base_url.clone()));
    config.set_cluster("root", cluster(format!("{base_url}/clusters/root")));
    config.set_context("base", context("base", USER));
    config.set_context("root", context("root", USER));
    config.set_context("system:admin", context("base", USER));
    config.set_user(USER, pem_user(material.admin_client.as_ref()));
    if let Some(user) = &material.user_client {
        config.set_context(NON_ADMIN, context("root", NON_ADMIN));
        config.set_user(NON_ADMIN, pem_user(Some(user)));
    }
    config.current_context = "root".to_owned();
    Ok(config.to_yaml()?)
}

/// One server in a kubeconfig of several: a context and a cluster both called `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub server: String,
}

/// The user a front-proxy's context uses: the proxy drops `system:masters`, so the topology's
/// admin reaches it with a certificate in `system:kcp:admin` instead.
pub const PROXY_USER: &str = "kcp-admin";

/// A front-proxy in a kubeconfig of several servers: its context is current.
#[derive(Debug, Clone, Copy)]
pub struct ProxyEndpoint<'a> {
    pub endpoint: &'a Endpoint,
    pub user: &'a PemPair,
}

/// Writes a kubeconfig with one context per endpoint, all for the admin user `admin` (the CA and
/// client certificate embedded), the first endpoint's context current; with a `proxy`, also its
/// context for [`PROXY_USER`], which is then current.
pub fn write_endpoints(
    path: &Path,
    ca_pem: &str,
    admin: &PemPair,
    endpoints: &[Endpoint],
    proxy: Option<ProxyEndpoint<'_>>,
) -> Result<(), KubeconfigError> {
    private_file::write(
        path,
        render_endpoints(ca_pem, admin, endpoints, proxy)?.as_bytes(),
    )?;
    Ok(())
}

fn render_endpoints(
    ca_pem: &str,
    admin: &PemPair,
    endpoints: &[Endpoint],
    proxy: Option<ProxyEndpoint<'_>>,
) -> Result<String, KubeconfigError> {
    let mut config = Kubeconfig::new();
    for endpoint in endpoints {
        config.set_cluster(&endpoint.name, cluster(endpoint.server.clone(), ca_pem));
        config.set_context(&endpoint.name, context(&endpoint.name, USER));
    }
    config.set_user(USER, pem_user(Some(admin)));
    config.current_context = endpoints
        .first()
        .map(|endpoint| endpoint.name.clone())
        .unwrap_or_default();
    if let Some(ProxyEndpoint { endpoint, user }) = proxy {
        config.set_cluster(&endpoint.name, cluster(endpoint.server.clone(), ca_pem));
        config.set_context(&endpoint.name, context(&endpoint.name, PROXY_USER));
        config.set_user(PROXY_USER, pem_user(Some(user)));
        config.current_context = endpoint.name.clone();
    }
    Ok(config.to_yaml()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn material(admin: bool) -> ServingMaterial {
        ServingMaterial {
            serving_cert_chain_pem: "serving".into(),
            serving_key_pem: "serving key".into(),
            client_ca_pem: None,
            server_ca_pem: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n".into(),
            root_ca_pem: String::new(),
            service_account_signing_key_pem: String::new(),
            service_account_key_pems: Vec::new(),
            admin_client: admin.then(|| PemPair {
                cert_pem: "admin cert".into(),
                key_pem: "admin key".into(),
            }),
            user_client: None,
        }
    }

    fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
        let output = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .expect("kubectl must be installed (/usr/bin/kubectl)");
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    #[test]
    fn host_follows_the_bind_address() {
        assert_eq!(server_host("0.0.0.0".parse().unwrap()), "localhost");
        assert_eq!(server_host("::".parse().unwrap()), "localhost");
        assert_eq!(server_host("127.0.0.1".parse().unwrap()), "localhost");
        assert_eq!(server_host("10.1.2.3".parse().unwrap()), "10.1.2.3");
        assert_eq!(server_host("fd00::1".parse().unwrap()), "fd00::1");
    }

    #[test]
    fn kubectl_reads_the_upstream_contexts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/admin.kubeconfig");
        write(&path, &material(true), "localhost", 6443).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );

        let view: serde_json::Value =
            serde_json::from_str(&kubectl(&path, &["config", "view", "--raw", "-o", "json"]))
                .unwrap();
        assert_eq!(view["current-context"], "root");
        let clusters: Vec<(String, String)> = view["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let ca = STANDARD
                    .decode(c["cluster"]["certificate-authority-data"].as_str().unwrap())
                    .unwrap();
                assert_eq!(String::from_utf8(ca).unwrap(), material(true).server_ca_pem);
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["cluster"]["server"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            clusters,
            [
                ("base".to_owned(), "https://localhost:6443".to_owned()),
                (
                    "root".to_owned(),
                    "https://localhost:6443/clusters/root".to_owned()
                ),
            ]
        );
        let contexts: Vec<(String, String, String)> = view["contexts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["context"]["cluster"].as_str().unwrap().to_owned(),
                    c["context"]["user"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let expected: Vec<(String, String, String)> =
            [("base", "base"), ("root", "root"), ("system:admin", "base")]
                .iter()
                .map(|(name, cluster)| ((*name).into(), (*cluster).into(), "admin".into()))
                .collect();
        assert_eq!(contexts, expected);
        let user = &view["users"][0];
        assert_eq!(user["name"], "admin");
        let decode = |field: &str| {
            String::from_utf8(
                STANDARD
                    .decode(user["user"][field].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(decode("client-certificate-data"), "admin cert");
        assert_eq!(decode("client-key-data"), "admin key");

        let names = kubectl(&path, &["config", "get-contexts", "-o", "name"]);
        assert_eq!(
            names.lines().collect::<Vec<_>>(),
            ["base", "root", "system:admin"]
        );
        let current = kubectl(&path, &["config", "current-context"]);
        assert_eq!(current.trim(), "root");
    }

    #[test]
    fn the_user_battery_adds_a_user_context_in_root() {
        let mut with_user = material(true);
        with_user.user_client = Some(PemPair {
            cert_pem: "user cert".into(),
            key_pem: "user key".into(),
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        write(&path, &with_user, "localhost", 6443).unwrap();
        let names = kubectl(&path, &["config", "get-contexts", "-o", "name"]);
        assert_eq!(
            names.lines().collect::<Vec<_>>(),
            ["base", "root", "system:admin", "user"]
        );
        let of_user = |query: &str| kubectl(&path, &["config", "view", "--raw", "-o", query]);
        assert_eq!(
            of_user("jsonpath={.contexts[?(@.name==\"user\")].context.cluster}"),
            "root"
        );
        let cert = of_user("jsonpath={.users[?(@.name==\"user\")].user.client-certificate-data}");
        assert_eq!(STANDARD.decode(cert).unwrap(), b"user cert");
        assert_eq!(
            kubectl(&path, &["config", "current-context"]).trim(),
            "root"
        );
    }

    #[test]
    fn one_context_per_endpoint_the_first_current() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        let endpoint = |name: &str, port: u16| Endpoint {
            name: name.to_owned(),
            server: format!("https://127.0.0.1:{port}"),
        };
        let admin = PemPair {
            cert_pem: "admin cert".into(),
            key_pem: "admin key".into(),
        };
        let ca = material(true).server_ca_pem;
        write_endpoints(
            &path,
            &ca,
            &admin,
            &[endpoint("root", 6443), endpoint("shard-1", 6444)],
            None,
        )
        .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let names = kubectl(&path, &["config", "get-contexts", "-o", "name"]);
        assert_eq!(names.lines().collect::<Vec<_>>(), ["root", "shard-1"]);
        assert_eq!(
            kubectl(&path, &["config", "current-context"]).trim(),
            "root"
        );
        let view = |query: &str| kubectl(&path, &["config", "view", "--raw", "-o", query]);
        assert_eq!(
            view("jsonpath={.clusters[?(@.name==\"shard-1\")].cluster.server}"),
            "https://127.0.0.1:6444"
        );
        assert_eq!(
            view("jsonpath={.contexts[?(@.name==\"shard-1\")].context.user}"),
            "admin"
        );
        let key = view("jsonpath={.users[0].user.client-key-data}");
        assert_eq!(STANDARD.decode(key).unwrap(), b"admin key");
    }

    #[test]
    fn a_front_proxy_context_has_its_own_user_and_is_current() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        let pair = |what: &str| PemPair {
            cert_pem: format!("{what} cert"),
            key_pem: format!("{what} key"),
        };
        let proxy = Endpoint {
            name: "front-proxy".to_owned(),
            server: "https://127.0.0.1:6447/clusters/root".to_owned(),
        };
        let root = Endpoint {
            name: "root".to_owned(),
            server: "https://127.0.0.1:6443".to_owned(),
        };
        write_endpoints(
            &path,
            &material(true).server_ca_pem,
            &pair("admin"),
            &[root],
            Some(ProxyEndpoint {
                endpoint: &proxy,
                user: &pair("kcp-admin"),
            }),
        )
        .unwrap();
        let names = kubectl(&path, &["config", "get-contexts", "-o", "name"]);
        assert_eq!(names.lines().collect::<Vec<_>>(), ["front-proxy", "root"]);
        assert_eq!(
            kubectl(&path, &["config", "current-context"]).trim(),
            "front-proxy"
        );
        let view = |query: &str| kubectl(&path, &["config", "view", "--raw", "-o", query]);
        assert_eq!(
            view("jsonpath={.contexts[?(@.name==\"front-proxy\")].context.user}"),
            PROXY_USER
        );
        assert_eq!(
            view("jsonpath={.contexts[?(@.name==\"root\")].context.user}"),
            "admin"
        );
        let cert = view("jsonpath={.users[?(@.name==\"kcp-admin\")].user.client-certificate-data}");
        assert_eq!(STANDARD.decode(cert).unwrap(), b"kcp-admin cert");
    }

    #[test]
    fn ipv6_hosts_are_bracketed_and_missing_credentials_omitted() {
        let yaml = render(&material(false), "fd00::1", 0).unwrap();
        assert!(
            yaml.contains("server: https://[fd00::1]:0/clusters/root"),
            "{yaml}"
        );
        assert!(!yaml.contains("client-certificate-data"), "{yaml}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        write(&path, &material(false), "fd00::1", 6443).unwrap();
        let server = kubectl(
            &path,
            &[
                "config",
                "view",
                "-o",
                "jsonpath={.clusters[?(@.name==\"base\")].cluster.server}",
            ],
        );
        assert_eq!(server, "https://[fd00::1]:6443");
    }
}
