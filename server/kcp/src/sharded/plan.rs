//! What `kcp sharded` starts, decided before anything starts: the processes with their flags, the
//! files they are given and the ports they listen on. Nothing here touches the machine, so the
//! whole topology is checked by unit tests.
//!
//! Upstream's `sharded-test-server` starts a cache server, a root shard and further shards that
//! share one PKI; so does this, with `kcp`'s own subcommands and flags: `kcp cache-server` and
//! `kcp start`, each with its own directory under the root directory (its embedded store, or its
//! own prefix on one etcd: `/shard/<name>` and `/cache`).
//!
//! Layout of the root directory:
//!
//! | Path | What |
//! |---|---|
//! | `pki/` | the shared PKI (see [`crate::pki::shared`]) |
//! | `<name>/` | each process's `--root-directory` (`cache`, `root`, `shard-1`, ...) |
//! | `<name>.log` | each process's output |
//! | `cache.kubeconfig` | the cache server, for every shard's `--cache-kubeconfig` |
//! | `root.kubeconfig` | the root shard (context `shard-base`, as upstream), for `--root-shard-kubeconfig-file` |
//! | `logical-cluster-admin.kubeconfig` | for `--logical-cluster-admin-kubeconfig` (upstream's `system:kcp:logical-cluster-admin`, no `system:masters`) |
//! | `front-proxy-mapping.yaml` | the front-proxy's `--mapping-file` |
//! | `admin.kubeconfig` | for people: one context per shard and `front-proxy` (current) |
//!
//! Ports with `--secure-port P`: the root shard `P`, `shard-i` `P+i`, the cache server `P+N`, the
//! front-proxy `P+N+1`.
//!
//! The front-proxy (`kcp front-proxy`, upstream's `kcp-front-proxy`) starts last and is what
//! people use, as in production: every shard accepts `X-Remote-*` identity headers only from its
//! client certificate (CN `kcp-front-proxy`, signed by the request-header CA), and the proxy
//! authenticates clients against the same client CA as the shards. Each shard's
//! `--shard-virtual-workspace-url` is `<proxy>/shards/<name>`, so the APIExportEndpointSlice
//! URLs users are handed go through the proxy to the shard that serves them
//! (`kcp_front_proxy::services`).
//!
//! With `--cache in-process` no cache server is started: the root shard runs without
//! `--cache-kubeconfig`, so it serves the cache itself at `/services/cache/` (upstream's in-process
//! cache), and `cache.kubeconfig` names the root shard for the other shards.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::kubeconfig::Endpoint;
use crate::pki::shared::{self, SharedPkiFiles};

/// Where every process listens.
pub const BIND_ADDRESS: &str = "127.0.0.1";
/// The root shard's name (`kcp start`'s default).
pub const ROOT: &str = "root";
/// The cache server's name: its directory, log and kubeconfig are named after it.
pub const CACHE: &str = "cache";
/// The cache server's subcommand, also its program name in upstream images.
pub const CACHE_SERVER_COMMAND: &str = "cache-server";
/// The file people use: one context per shard and the front-proxy's.
pub const ADMIN_KUBECONFIG: &str = "admin.kubeconfig";
/// The front-proxy's name: its directory, log and context are named after it.
pub const FRONT_PROXY: &str = "front-proxy";
/// The front-proxy's subcommand (upstream's program name is `kcp-front-proxy`).
pub const FRONT_PROXY_COMMAND: &str = "front-proxy";
/// The front-proxy's program name in upstream images: whether this build has it.
pub const FRONT_PROXY_PROGRAM: &str = "kcp-front-proxy";
/// The identity headers the shards accept from the front-proxy (upstream's names).
const USER_HEADER: &str = "X-Remote-User";
const GROUP_HEADER: &str = "X-Remote-Group";
const EXTRA_HEADER_PREFIX: &str = "X-Remote-Extra-";

/// Where the shards find the cache server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CacheMode {
    /// A `kcp cache-server` process of its own.
    Standalone,
    /// The root shard's own, at `/services/cache/`.
    InProcess,
}

/// The shape of a topology, as the command line gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Absolute, so the printed paths work from anywhere.
    pub dir: PathBuf,
    /// etcd URLs; empty: each process has its embedded store.
    pub etcd_servers: Vec<String>,
    pub ports: Ports,
    pub cache: CacheMode,
    /// Whether a front-proxy runs (this build has one): the shards' external URL is then the
    /// proxy's, so workspace URLs handed to users go through it.
    pub front_proxy: bool,
}

/// The ports of a topology: one per shard (the root shard first), the cache server's and the
/// front-proxy's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports {
    pub shards: Vec<u16>,
    pub cache: u16,
    pub front_proxy: u16,
}

/// Why a topology cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("--shards must be at least 1 (the root shard)")]
    NoShards,
    #[error(
        "--secure-port {first} with --shards {shards} needs ports up to {first}+{shards}+1, past 65535"
    )]
    PortsExhausted { first: u16, shards: u16 },
}

impl Ports {
    /// The root shard on `first`, `shard-i` on `first + i`, the cache server after the last
    /// shard, the front-proxy after the cache server.
    pub fn consecutive(first: u16, shards: u16) -> Result<Ports, PlanError> {
        if shards == 0 {
            return Err(PlanError::NoShards);
        }
        let exhausted = PlanError::PortsExhausted { first, shards };
        let cache = first.checked_add(shards).ok_or(exhausted.clone())?;
        let front_proxy = cache.checked_add(1).ok_or(exhausted)?;
        Ok(Ports {
            shards: (first..cache).collect(),
            cache,
            front_proxy,
        })
    }
}

/// Which program a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `kcp cache-server`.
    Cache,
    /// `kcp start`.
    Shard,
    /// `kcp front-proxy`.
    FrontProxy,
}

/// One process to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub name: String,
    pub role: Role,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// Arguments after the program (the subcommand first).
    pub args: Vec<OsString>,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
}

/// A kubeconfig to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigFile {
    pub path: PathBuf,
    pub endpoints: Vec<Endpoint>,
    /// Whose client certificate it carries.
    pub user: KubeconfigUser,
}

/// The identities of the shared PKI a kubeconfig can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeconfigUser {
    /// `system:masters`: the shards' own clients and the people's shard contexts.
    ShardAdmin,
    /// Upstream's `system:kcp:logical-cluster-admin`: the workspace scheduler towards other
    /// shards, which needs nothing more (its bootstrap policy).
    LogicalClusterAdmin,
    /// Upstream's `system:kcp:external-logical-cluster-admin`: the shards through the
    /// front-proxy (service accounts of workspaces on other shards).
    ExternalLogicalClusterAdmin,
}

/// One entry of the front-proxy's mapping file (upstream's `PathMapping`, snake_case keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMapping {
    pub path: &'static str,
    pub backend: String,
    pub backend_server_ca: PathBuf,
    pub proxy_client_cert: PathBuf,
    pub proxy_client_key: PathBuf,
}

impl PathMapping {
    /// The entry as the mapping file holds it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "path": self.path,
            "backend": self.backend,
            "backend_server_ca": self.backend_server_ca,
            "proxy_client_cert": self.proxy_client_cert,
            "proxy_client_key": self.proxy_client_key,
        })
    }
}

/// The front-proxy's mapping file: written before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingFile {
    pub path: PathBuf,
    pub entries: Vec<PathMapping>,
}

/// Everything `kcp sharded` does, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The shared PKI's directory.
    pub pki_dir: PathBuf,
    /// The front-proxy's `--mapping-file`.
    pub mapping: MappingFile,
    /// Written before any process starts (the processes read them at start).
    pub kubeconfigs: Vec<KubeconfigFile>,
    /// The start order: the cache server (when standalone), the root shard, the other shards,
    /// the front-proxy.
    pub processes: Vec<Process>,
    /// The server `cache.kubeconfig` names: the cache server's, or the root shard's.
    pub cache_url: String,
    /// Written once every process is ready.
    pub admin_kubeconfig: KubeconfigFile,
    /// The front-proxy's context in the admin kubeconfig (its root workspace), when it runs.
    pub front_proxy_endpoint: Option<Endpoint>,
}

/// The name of the `index`-th shard: `root`, then `shard-1`, `shard-2`, ...
pub fn shard_name(index: usize) -> String {
    if index == 0 {
        ROOT.to_owned()
    } else {
        format!("shard-{index}")
    }
}

fn url(port: u16) -> String {
    format!("https://{BIND_ADDRESS}:{port}")
}

/// `--name=value`.
fn flag(name: &str, value: impl AsRef<OsStr>) -> OsString {
    let mut flag = OsString::from(format!("--{name}="));
    flag.push(value);
    flag
}

impl Plan {
    pub fn new(layout: &Layout) -> Plan {
        let dir = &layout.dir;
        let pki_dir = dir.join("pki");
        let pki = SharedPkiFiles::in_dir(&pki_dir);
        let root_url = layout
            .ports
            .shards
            .first()
            .copied()
            .map(url)
            .unwrap_or_default();
        let single = |file: &str, name: &str, server: &str, user| KubeconfigFile {
            path: dir.join(file),
            endpoints: vec![Endpoint {
                name: name.to_owned(),
                server: server.to_owned(),
            }],
            user,
        };
        let cache_url = match layout.cache {
            CacheMode::Standalone => url(layout.ports.cache),
            CacheMode::InProcess => root_url.clone(),
        };
        let front_proxy_url = url(layout.ports.front_proxy);
        let external_url = |port: u16| {
            if layout.front_proxy {
                front_proxy_url.clone()
            } else {
                url(port)
            }
        };
        let cache_kubeconfig = single(
            "cache.kubeconfig",
            CACHE,
            &cache_url,
            KubeconfigUser::ShardAdmin,
        );
        let root_kubeconfig = single(
            "root.kubeconfig",
            "shard-base",
            &root_url,
            KubeconfigUser::ShardAdmin,
        );
        let logical_cluster_admin = single(
            "logical-cluster-admin.kubeconfig",
            "base",
            &root_url,
            KubeconfigUser::LogicalClusterAdmin,
        );
        // The shards through the proxy, as upstream's sharded-test-server writes it; only
        // written with a front-proxy.
        let external_logical_cluster_admin = single(
            "external-logical-cluster-admin.kubeconfig",
            "base",
            &front_proxy_url,
            KubeconfigUser::ExternalLogicalClusterAdmin,
        );

        let serving = |name: &str, port: u16| {
            vec![
                flag("root-directory", dir.join(name)),
                flag("bind-address", BIND_ADDRESS),
                flag("secure-port", port.to_string()),
                flag("tls-cert-file", &pki.serving_cert),
                flag("tls-private-key-file", &pki.serving_key),
                flag("client-ca-file", &pki.client_ca),
            ]
        };
        let storage = |prefix: String| {
            if layout.etcd_servers.is_empty() {
                Vec::new()
            } else {
                vec![
                    flag("etcd-servers", layout.etcd_servers.join(",")),
                    flag("etcd-prefix", prefix),
                ]
            }
        };
        let log = |name: &str| dir.join(format!("{name}.log"));

        let mut processes = Vec::new();
        if layout.cache == CacheMode::Standalone {
            let mut args = vec![OsString::from(CACHE_SERVER_COMMAND)];
            args.extend(serving(CACHE, layout.ports.cache));
            args.extend(storage(format!("/{CACHE}")));
            processes.push(Process {
                name: CACHE.to_owned(),
                role: Role::Cache,
                url: cache_url.clone(),
                args,
                log: log(CACHE),
            });
        }
        for (index, &port) in layout.ports.shards.iter().enumerate() {
            let name = shard_name(index);
            let mut args = vec![OsString::from("start"), flag("shard-name", &name)];
            args.extend(serving(&name, port));
            args.extend([
                flag("root-ca-file", &pki.server_ca),
                flag("service-account-private-key-file", &pki.service_account_key),
                // The shard cannot mint an admin certificate for a client CA it has no key of;
                // admin.kubeconfig of the topology is the one to use.
                flag("batteries-included", "-admin"),
                flag("shard-base-url", url(port)),
                flag("shard-external-url", external_url(port)),
                flag(
                    "logical-cluster-admin-kubeconfig",
                    &logical_cluster_admin.path,
                ),
                flag("requestheader-client-ca-file", &pki.request_header_ca),
                flag("requestheader-allowed-names", shared::FRONT_PROXY_USER),
                flag("requestheader-username-headers", USER_HEADER),
                flag("requestheader-group-headers", GROUP_HEADER),
                flag("requestheader-extra-headers-prefix", EXTRA_HEADER_PREFIX),
            ]);
            // Virtual-workspace URLs handed to users (APIExportEndpointSlice endpoints) go
            // through the proxy, which routes them to this shard by the marker.
            if layout.front_proxy {
                args.push(flag(
                    "shard-virtual-workspace-url",
                    kcp_front_proxy::services::shard_url(&front_proxy_url, &name),
                ));
                // Service-account tokens of workspaces on other shards are looked up there
                // through the proxy.
                args.push(flag(
                    "external-logical-cluster-admin-kubeconfig",
                    &external_logical_cluster_admin.path,
                ));
            }
            // Without it the root shard serves the cache in-process.
            if index > 0 || layout.cache == CacheMode::Standalone {
                args.push(flag("cache-kubeconfig", &cache_kubeconfig.path));
            }
            if index > 0 {
                args.push(flag("root-shard-kubeconfig-file", &root_kubeconfig.path));
            }
            args.extend(storage(format!("/shard/{name}")));
            processes.push(Process {
                log: log(&name),
                name,
                role: Role::Shard,
                url: url(port),
                args,
            });
        }
        let mapping = MappingFile {
            path: dir.join("front-proxy-mapping.yaml"),
            entries: ["/clusters/", "/services/"]
                .into_iter()
                .map(|path| PathMapping {
                    path,
                    backend: root_url.clone(),
                    backend_server_ca: pki.server_ca.clone(),
                    proxy_client_cert: pki.front_proxy_client_cert.clone(),
                    proxy_client_key: pki.front_proxy_client_key.clone(),
                })
                .collect(),
        };
        if layout.front_proxy {
            let mut args = vec![OsString::from(FRONT_PROXY_COMMAND)];
            args.extend(serving(FRONT_PROXY, layout.ports.front_proxy));
            args.extend([
                flag("mapping-file", &mapping.path),
                flag("root-kubeconfig", &root_kubeconfig.path),
                flag("shards-kubeconfig", &root_kubeconfig.path),
                flag("service-account-key-file", &pki.service_account_key),
            ]);
            processes.push(Process {
                name: FRONT_PROXY.to_owned(),
                role: Role::FrontProxy,
                url: front_proxy_url.clone(),
                args,
                log: log(FRONT_PROXY),
            });
        }
        let admin_kubeconfig = KubeconfigFile {
            path: dir.join(ADMIN_KUBECONFIG),
            endpoints: processes
                .iter()
                .filter(|process| process.role == Role::Shard)
                .map(|process| Endpoint {
                    name: process.name.clone(),
                    server: process.url.clone(),
                })
                .collect(),
            user: KubeconfigUser::ShardAdmin,
        };
        Plan {
            pki_dir,
            mapping,
            kubeconfigs: [cache_kubeconfig, root_kubeconfig, logical_cluster_admin]
                .into_iter()
                .chain(layout.front_proxy.then_some(external_logical_cluster_admin))
                .collect(),
            processes,
            cache_url,
            admin_kubeconfig,
            front_proxy_endpoint: layout.front_proxy.then(|| Endpoint {
                name: FRONT_PROXY.to_owned(),
                server: format!("{front_proxy_url}/clusters/root"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn layout(etcd_servers: &[&str]) -> Layout {
        Layout {
            dir: PathBuf::from("/t"),
            etcd_servers: etcd_servers.iter().map(|s| (*s).to_owned()).collect(),
            ports: Ports::consecutive(6443, 3).unwrap(),
            cache: CacheMode::Standalone,
            front_proxy: true,
        }
    }

    fn args(process: &Process) -> Vec<String> {
        process
            .args
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    fn process<'a>(plan: &'a Plan, name: &str) -> &'a Process {
        plan.processes.iter().find(|p| p.name == name).unwrap()
    }

    #[test]
    fn ports_are_consecutive_the_cache_after_the_shards() {
        let ports = Ports::consecutive(6443, 3).unwrap();
        assert_eq!(ports.shards, [6443, 6444, 6445]);
        assert_eq!(ports.cache, 6446);
        assert_eq!(ports.front_proxy, 6447);
        assert_eq!(
            Ports::consecutive(65534, 1),
            Err(PlanError::PortsExhausted {
                first: 65534,
                shards: 1
            })
        );
        assert_eq!(
            Ports::consecutive(65535, 1),
            Err(PlanError::PortsExhausted {
                first: 65535,
                shards: 1
            })
        );
        assert_eq!(Ports::consecutive(6443, 0), Err(PlanError::NoShards));
        assert_eq!(Ports::consecutive(65533, 1).unwrap().front_proxy, 65535);
    }

    #[test]
    fn the_cache_starts_first_then_root_then_the_shards_then_the_front_proxy() {
        let plan = Plan::new(&layout(&[]));
        let order: Vec<(&str, Role, &str)> = plan
            .processes
            .iter()
            .map(|p| (p.name.as_str(), p.role, p.url.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("cache", Role::Cache, "https://127.0.0.1:6446"),
                ("root", Role::Shard, "https://127.0.0.1:6443"),
                ("shard-1", Role::Shard, "https://127.0.0.1:6444"),
                ("shard-2", Role::Shard, "https://127.0.0.1:6445"),
                ("front-proxy", Role::FrontProxy, "https://127.0.0.1:6447"),
            ]
        );
        assert_eq!(process(&plan, "shard-1").log, Path::new("/t/shard-1.log"));
    }

    #[test]
    fn every_shard_gets_the_shared_pki_the_cache_and_its_urls() {
        let plan = Plan::new(&layout(&[]));
        assert_eq!(
            args(process(&plan, "shard-2")),
            [
                "start",
                "--shard-name=shard-2",
                "--root-directory=/t/shard-2",
                "--bind-address=127.0.0.1",
                "--secure-port=6445",
                "--tls-cert-file=/t/pki/apiserver.crt",
                "--tls-private-key-file=/t/pki/apiserver.key",
                "--client-ca-file=/t/pki/client-ca.crt",
                "--root-ca-file=/t/pki/ca.crt",
                "--service-account-private-key-file=/t/pki/sa.key",
                "--batteries-included=-admin",
                "--shard-base-url=https://127.0.0.1:6445",
                "--shard-external-url=https://127.0.0.1:6447",
                "--logical-cluster-admin-kubeconfig=/t/logical-cluster-admin.kubeconfig",
                "--requestheader-client-ca-file=/t/pki/requestheader-client-ca.crt",
                "--requestheader-allowed-names=kcp-front-proxy",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--shard-virtual-workspace-url=https://127.0.0.1:6447/shards/shard-2",
                "--external-logical-cluster-admin-kubeconfig=/t/external-logical-cluster-admin.kubeconfig",
                "--cache-kubeconfig=/t/cache.kubeconfig",
                "--root-shard-kubeconfig-file=/t/root.kubeconfig",
            ]
        );
        assert_eq!(plan.cache_url, "https://127.0.0.1:6446");
        let root = args(process(&plan, "root"));
        assert!(root.contains(&"--shard-name=root".to_owned()), "{root:?}");
        assert!(
            root.contains(&"--cache-kubeconfig=/t/cache.kubeconfig".to_owned()),
            "{root:?}"
        );
        assert!(
            !root
                .iter()
                .any(|a| a.starts_with("--root-shard-kubeconfig-file")),
            "{root:?}"
        );
        assert_eq!(
            args(process(&plan, "cache")),
            [
                "cache-server",
                "--root-directory=/t/cache",
                "--bind-address=127.0.0.1",
                "--secure-port=6446",
                "--tls-cert-file=/t/pki/apiserver.crt",
                "--tls-private-key-file=/t/pki/apiserver.key",
                "--client-ca-file=/t/pki/client-ca.crt",
            ]
        );
    }

    #[test]
    fn in_process_the_root_shard_is_the_cache() {
        let plan = Plan::new(&Layout {
            cache: CacheMode::InProcess,
            ..layout(&[])
        });
        let names: Vec<&str> = plan.processes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["root", "shard-1", "shard-2", "front-proxy"]);
        assert_eq!(plan.cache_url, "https://127.0.0.1:6443");
        assert_eq!(
            plan.kubeconfigs[0].endpoints[0].server,
            "https://127.0.0.1:6443"
        );
        let root = args(process(&plan, "root"));
        assert!(
            !root.iter().any(|a| a.starts_with("--cache-kubeconfig")),
            "{root:?}"
        );
        let shard = args(process(&plan, "shard-1"));
        assert!(
            shard.contains(&"--cache-kubeconfig=/t/cache.kubeconfig".to_owned()),
            "{shard:?}"
        );
    }

    #[test]
    fn the_front_proxy_routes_to_the_shards_with_its_own_certificate() {
        let plan = Plan::new(&layout(&[]));
        assert_eq!(
            args(process(&plan, "front-proxy")),
            [
                "front-proxy",
                "--root-directory=/t/front-proxy",
                "--bind-address=127.0.0.1",
                "--secure-port=6447",
                "--tls-cert-file=/t/pki/apiserver.crt",
                "--tls-private-key-file=/t/pki/apiserver.key",
                "--client-ca-file=/t/pki/client-ca.crt",
                "--mapping-file=/t/front-proxy-mapping.yaml",
                "--root-kubeconfig=/t/root.kubeconfig",
                "--shards-kubeconfig=/t/root.kubeconfig",
                "--service-account-key-file=/t/pki/sa.key",
            ]
        );
        let paths: Vec<&str> = plan.mapping.entries.iter().map(|m| m.path).collect();
        assert_eq!(paths, ["/clusters/", "/services/"]);
        assert_eq!(
            plan.mapping.entries[0].to_json(),
            serde_json::json!({
                "path": "/clusters/",
                "backend": "https://127.0.0.1:6443",
                "backend_server_ca": "/t/pki/ca.crt",
                "proxy_client_cert": "/t/pki/front-proxy-client.crt",
                "proxy_client_key": "/t/pki/front-proxy-client.key",
            })
        );
        let endpoint = plan.front_proxy_endpoint.unwrap();
        assert_eq!(
            (endpoint.name.as_str(), endpoint.server.as_str()),
            ("front-proxy", "https://127.0.0.1:6447/clusters/root")
        );
    }

    #[test]
    fn without_a_front_proxy_the_shards_are_their_own_external_urls() {
        let plan = Plan::new(&Layout {
            front_proxy: false,
            ..layout(&[])
        });
        assert!(plan.processes.iter().all(|p| p.role != Role::FrontProxy));
        assert!(plan.front_proxy_endpoint.is_none());
        assert!(
            args(process(&plan, "shard-1"))
                .contains(&"--shard-external-url=https://127.0.0.1:6444".to_owned())
        );
    }

    #[test]
    fn with_etcd_every_process_has_its_own_prefix() {
        let plan = Plan::new(&layout(&["http://127.0.0.1:2379", "http://127.0.0.1:2380"]));
        for (name, prefix) in [
            ("cache", "/cache"),
            ("root", "/shard/root"),
            ("shard-1", "/shard/shard-1"),
        ] {
            let args = args(process(&plan, name));
            let tail: Vec<&str> = args[args.len() - 2..].iter().map(String::as_str).collect();
            assert_eq!(
                tail,
                [
                    "--etcd-servers=http://127.0.0.1:2379,http://127.0.0.1:2380",
                    &format!("--etcd-prefix={prefix}"),
                ],
                "{name}"
            );
        }
        let embedded = Plan::new(&layout(&[]));
        assert!(
            embedded
                .processes
                .iter()
                .all(|p| !args(p).iter().any(|a| a.starts_with("--etcd"))),
            "without --etcd-servers every process keeps its embedded store"
        );
    }

    #[test]
    fn kubeconfigs_name_the_cache_the_root_shard_and_every_shard() {
        let plan = Plan::new(&layout(&[]));
        type Written = (PathBuf, Vec<(String, String)>, KubeconfigUser);
        let files: Vec<Written> = plan
            .kubeconfigs
            .iter()
            .chain([&plan.admin_kubeconfig])
            .map(|file| {
                (
                    file.path.clone(),
                    file.endpoints
                        .iter()
                        .map(|e| (e.name.clone(), e.server.clone()))
                        .collect(),
                    file.user,
                )
            })
            .collect();
        let endpoint = |name: &str, port: u16| (name.to_owned(), url(port));
        assert_eq!(
            files,
            [
                (
                    PathBuf::from("/t/cache.kubeconfig"),
                    vec![endpoint("cache", 6446)],
                    KubeconfigUser::ShardAdmin
                ),
                (
                    PathBuf::from("/t/root.kubeconfig"),
                    vec![endpoint("shard-base", 6443)],
                    KubeconfigUser::ShardAdmin
                ),
                (
                    PathBuf::from("/t/logical-cluster-admin.kubeconfig"),
                    vec![endpoint("base", 6443)],
                    KubeconfigUser::LogicalClusterAdmin
                ),
                (
                    PathBuf::from("/t/external-logical-cluster-admin.kubeconfig"),
                    vec![endpoint("base", 6447)],
                    KubeconfigUser::ExternalLogicalClusterAdmin
                ),
                (
                    PathBuf::from("/t/admin.kubeconfig"),
                    vec![
                        endpoint("root", 6443),
                        endpoint("shard-1", 6444),
                        endpoint("shard-2", 6445)
                    ],
                    KubeconfigUser::ShardAdmin
                ),
            ]
        );
        assert_eq!(plan.pki_dir, Path::new("/t/pki"));
    }
}
