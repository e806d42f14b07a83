//! `kcp front-proxy` (and the program name `kcp-front-proxy`): kcp-front-proxy's proxy and index
//! on a secure port of their own, with upstream's flags (`cmd/kcp-front-proxy`,
//! `pkg/proxy/options`): `--mapping-file` and `--shards-kubeconfig` required, `--root-kubeconfig`,
//! `--root-directory` (default `.kcp`), secure serving (`--secure-port` defaults to 443), the
//! authentication flags `kcp start` has ([`AuthenticationArgs`], the token webhook's among
//! them), `--service-account-lookup`, `--authentication-drop-groups`
//! (default: upstream's privileged and synthetic groups) and `--authentication-pass-on-groups`,
//! logging as `kcp start`.
//!
//! Without `--tls-cert-file` the serving certificate comes from the same place as `kcp start`'s
//! ([`crate::pki::transport`]): generated under `--root-directory` and signed by the CA kept
//! there. Client certificates are asked for when `--client-ca-file` or
//! `--requestheader-client-ca-file` is given. The index follows the shards through
//! `--root-kubeconfig` (Shard objects) and `--shards-kubeconfig` (credentials for each shard);
//! `/readyz` turns ready once every shard has been listed; `/metrics` asks the root shard
//! (`--root-kubeconfig`) whether the user may `get /metrics` there.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{ArgAction, Args};
use kcp_apiserver::TlsMaterial;
use kcp_apiserver::listener::SharedPort;
use kcp_authn::ServiceAccountLookup;
use kcp_front_proxy::groups::{DEFAULT_DROP_GROUPS, GroupFilter};
use kcp_front_proxy::index::{self, IndexError, IndexSources};
use kcp_front_proxy::mapping::{MappingError, Mappings};
use kcp_front_proxy::metrics_access::MetricsAccess;
use kcp_front_proxy::{FrontProxy, ProxyConfig, ProxyError};
use kcp_kubeconfig::https::{self, HttpsClient, HttpsError};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::authentication::{self, AuthenticationSetupError};
use crate::options::{
    AuthenticationArgs, CertKeyFiles, LoggingFlags, OptionsError, ServingFlags, non_empty, values,
};
use crate::pki::{self, PkiError, TransportOptions};

/// The front-proxy's `--secure-port` default (upstream's).
pub const DEFAULT_SECURE_PORT: &str = "443";

/// Every flag of `kcp front-proxy`. Field docs are the help texts.
#[derive(Debug, Clone, Args)]
pub struct FrontProxyOptions {
    #[command(flatten)]
    pub serving: ServingFlags,
    /// YAML file mapping URL path prefixes to backends (upstream's PathMapping list).
    #[arg(long, required = true, value_parser = values::path, help_heading = "Front-proxy")]
    pub mapping_file: PathBuf,
    /// Kubeconfig whose CA and client certificate reach every shard; each shard's URL comes
    /// from its Shard object.
    #[arg(long, required = true, value_parser = values::path, help_heading = "Front-proxy")]
    pub shards_kubeconfig: PathBuf,
    /// Kubeconfig of the root shard, where Shard objects are watched (default
    /// --shards-kubeconfig).
    #[arg(long, value_parser = values::path, help_heading = "Front-proxy")]
    pub root_kubeconfig: Option<PathBuf>,
    /// Directory for generated files (the serving certificate without --tls-cert-file).
    #[arg(long, value_parser = values::path, default_value = ".kcp", help_heading = "Front-proxy")]
    pub root_directory: PathBuf,
    #[command(flatten)]
    pub authentication: AuthenticationArgs,
    /// Check that a service account token's ServiceAccount (and bound Secret) still exist, at
    /// the shard that holds its logical cluster.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Service accounts")]
    pub service_account_lookup: bool,
    /// Groups not passed on to the shards; "prefix*" matches every group with the prefix, and
    /// dropping wins over passing on.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, default_values = DEFAULT_DROP_GROUPS,
        help_heading = "Authentication")]
    pub authentication_drop_groups: Vec<String>,
    /// Groups passed on to the shards (empty: all); "prefix*" matches every group with the
    /// prefix.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, help_heading = "Authentication")]
    pub authentication_pass_on_groups: Vec<String>,
    #[command(flatten)]
    pub logging: LoggingFlags,
}

/// Why `kcp front-proxy` stopped.
#[derive(Debug, thiserror::Error)]
pub enum FrontProxyError {
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    HalfTlsPair,
    #[error("--mapping-file: {0}")]
    Mapping(#[from] MappingError),
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error("creating {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Authentication(#[from] AuthenticationSetupError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("--{flag} {}: {source}", path.display())]
    Kubeconfig {
        flag: &'static str,
        path: PathBuf,
        source: HttpsError,
    },
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    #[error(transparent)]
    Serve(#[from] kcp_apiserver::ServeError),
    #[error("installing signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("starting a serving thread: {0}")]
    Thread(std::io::Error),
    #[error("a serving thread panicked")]
    WorkerPanicked,
}

impl FrontProxyOptions {
    /// Checks what clap cannot: pairs of flags and flags that need others.
    pub fn validate(&self) -> Result<(), FrontProxyError> {
        let cert = non_empty(self.serving.tls_cert_file.as_ref());
        let key = non_empty(self.serving.tls_private_key_file.as_ref());
        if cert.is_some() != key.is_some() {
            return Err(FrontProxyError::HalfTlsPair);
        }
        self.authentication.validate(true, false)?;
        Ok(())
    }

    fn tls(&self) -> Option<CertKeyFiles> {
        non_empty(self.serving.tls_cert_file.as_ref())
            .zip(non_empty(self.serving.tls_private_key_file.as_ref()))
            .map(|(cert_file, key_file)| CertKeyFiles {
                cert_file,
                key_file,
            })
    }
}

/// One serving thread: a runtime of its own that accepts on the shared port and drives each
/// connection, and the backend connections its requests use, on this thread alone. Upstream's Go
/// proxy spreads goroutines over every core; here a request never waits for another thread to
/// be woken, which is most of the CPU a proxied request costs on a multi-threaded runtime.
fn serve_on_this_thread(
    port: SharedPort,
    proxy: FrontProxy,
    shutdown: CancellationToken,
) -> Result<(), FrontProxyError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(FrontProxyError::Thread)?;
    runtime.block_on(async move {
        let listener = port.into_listener()?;
        let stopping = CancellationToken::new();
        listener
            .serve(
                Arc::new(proxy),
                shutdown.cancelled_owned(),
                &stopping,
                crate::start::SHUTDOWN_GRACE,
            )
            .await;
        Ok(())
    })
}

/// A client for the kubeconfig a flag names.
fn kubeconfig_client(flag: &'static str, path: &Path) -> Result<HttpsClient, FrontProxyError> {
    https::client(path, None).map_err(|source| FrontProxyError::Kubeconfig {
        flag,
        path: path.to_owned(),
        source,
    })
}

/// Runs the front-proxy until SIGTERM or SIGINT.
pub async fn run(options: FrontProxyOptions) -> Result<(), FrontProxyError> {
    options.validate()?;
    let mappings = Mappings::load(&options.mapping_file)?;
    // No credentials: forwarded without identity, as upstream (never `system:anonymous`).
    let flags = options.authentication.validate(true, false)?;
    let root_directory = non_empty(Some(&options.root_directory));
    if let Some(directory) = &root_directory {
        std::fs::create_dir_all(directory).map_err(|source| FrontProxyError::Directory {
            path: directory.clone(),
            source,
        })?;
    }
    let tls = options.tls();
    let client_ca_file = non_empty(options.authentication.client_ca_file.as_ref());
    let transport = pki::transport(&TransportOptions {
        root_directory: root_directory.as_deref(),
        tls: tls.as_ref(),
        client_ca_file: client_ca_file.as_deref(),
        admin: false,
        user: false,
        bind_address: options.serving.bind_address,
        hosts: Vec::new(),
    })?;
    let requestheader_ca_pem = flags
        .request_header
        .client_ca_file
        .as_deref()
        .map(|path| authentication::read("requestheader-client-ca-file", path))
        .transpose()?;
    let key_pems = options
        .authentication
        .service_account_key_files()
        .iter()
        .map(|path| authentication::read("service-account-key-file", path))
        .collect::<Result<Vec<_>, _>>()?;
    let authenticators = authentication::authenticators(
        &flags,
        transport.client_ca_pem.as_deref(),
        authentication::verifying_keys_of(&key_pems)?,
    )?;

    let stop_index = CancellationToken::new();
    let index = index::start(
        IndexSources {
            root_kubeconfig: options
                .root_kubeconfig
                .clone()
                .unwrap_or_else(|| options.shards_kubeconfig.clone()),
            shards_kubeconfig: options.shards_kubeconfig.clone(),
        },
        stop_index.clone(),
    )?;
    let service_account_lookup = match (
        &authenticators.service_accounts,
        options.service_account_lookup,
    ) {
        (Some(_), true) => Some(ServiceAccountLookup::new(
            kubeconfig_client("shards-kubeconfig", &options.shards_kubeconfig)?.client,
        )),
        _ => None,
    };
    let root = kubeconfig_client(
        if options.root_kubeconfig.is_some() {
            "root-kubeconfig"
        } else {
            "shards-kubeconfig"
        },
        options
            .root_kubeconfig
            .as_ref()
            .unwrap_or(&options.shards_kubeconfig),
    )?;
    let metrics_access = MetricsAccess::new(root.client.clone(), root.base_url());
    let counted = index.clone();
    let proxy = FrontProxy::new(ProxyConfig {
        mappings,
        authenticators,
        service_account_lookup,
        groups: GroupFilter::new(
            &options.authentication_drop_groups,
            &options.authentication_pass_on_groups,
        ),
        resolver: index,
        index_counts: Some(Box::new(move || counted.counts())),
        metrics_access,
    })?;

    let client_ca_pems: Vec<&str> = transport
        .client_ca_pem
        .iter()
        .chain(&requestheader_ca_pem)
        .map(String::as_str)
        .collect();
    let address = SocketAddr::new(options.serving.bind_address, options.serving.secure_port);
    let port = SharedPort::bind(
        address,
        TlsMaterial {
            serving_cert_chain_pem: &transport.serving_cert_chain_pem,
            serving_key_pem: &transport.serving_key_pem,
            client_ca_pems: &client_ca_pems,
        },
    )?;
    let bound = port.local_addr().unwrap_or(address);
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    // One handle per thread and none kept here: the port closes as the threads stop accepting.
    let mut ports = (1..threads)
        .map(|_| port.try_clone())
        .collect::<Result<Vec<_>, _>>()?;
    ports.push(port);
    let mut proxies = (1..threads)
        .map(|_| proxy.worker())
        .collect::<Result<Vec<_>, _>>()?;
    proxies.push(proxy);
    let shutdown = CancellationToken::new();
    let workers = proxies
        .into_iter()
        .zip(ports)
        .enumerate()
        .map(|(n, (proxy, port))| {
            let shutdown = shutdown.clone();
            std::thread::Builder::new()
                .name(format!("front-proxy-{n}"))
                .spawn(move || serve_on_this_thread(port, proxy, shutdown))
                .map_err(FrontProxyError::Thread)
        })
        .collect::<Result<Vec<_>, _>>()?;
    info!(address = %bound, threads, "front-proxy serving");
    crate::start::shutdown_signal()
        .map_err(FrontProxyError::Signals)?
        .await;
    shutdown.cancel();
    for worker in workers {
        let joined = tokio::task::spawn_blocking(move || worker.join()).await;
        match joined {
            Ok(Ok(served)) => served?,
            _ => return Err(FrontProxyError::WorkerPanicked),
        }
    }
    stop_index.cancel();
    info!("shutdown complete");
    Ok(())
}
