//! `kcp cache-server` (and the program name `cache-server`): kcp-cache's store on a port of its
//! own, with upstream's flags (`cmd/cache-server`): `--root-directory` (default `.kcp-cache`),
//! `--bind-address`, `--secure-port`, `--tls-cert-file`/`--tls-private-key-file`,
//! `--client-ca-file`, `--etcd-*`, logging as `kcp start`.
//!
//! Certificates come from the same place as `kcp start`'s ([`crate::pki::transport`]): without
//! `--tls-cert-file` a serving certificate signed by a CA kept in the root directory; without
//! `--client-ca-file` a client CA there too, and `<root-directory>/cache.kubeconfig` with a client
//! certificate in `system:masters`, written once the port is bound (so it names the real port),
//! the one credential the cache accepts. The store is the embedded one
//! (`<root-directory>/store.redb`) unless `--etcd-servers` names an etcd.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kcp_apiserver::TlsMaterial;
use kcp_apiserver::listener::TlsListener;
use kcp_apiserver::services::Services;
use kcp_apiserver::standalone::ServicesServer;
use kcp_cache::CacheService;
use kcp_storage::StorageConfig;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::kubeconfig::{self, KubeconfigError};
use crate::options::{EtcdFlags, LoggingFlags, OptionsError, ServingFlags, non_empty, values};
use crate::pki::{self, PkiError, TransportOptions};

/// How long in-flight requests may take after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The kubeconfig written into the root directory.
pub const KUBECONFIG_FILE: &str = "cache.kubeconfig";

/// Every flag of `kcp cache-server`. Field docs are the help texts.
#[derive(Debug, Clone, Args)]
pub struct CacheServerOptions {
    #[command(flatten)]
    pub serving: ServingFlags,
    /// CA bundle client certificates are verified against; generated under --root-directory
    /// (with a system:masters client certificate in cache.kubeconfig) when not given.
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub client_ca_file: Option<PathBuf>,
    #[command(flatten)]
    pub etcd: EtcdFlags,
    /// First segment of every storage key.
    #[arg(long, default_value = kcp_cache::keys::DEFAULT_PREFIX, help_heading = "Storage")]
    pub etcd_prefix: String,
    /// Directory for generated files (store, certificates, cache.kubeconfig); empty keeps
    /// generated certificates in memory and writes no kubeconfig.
    #[arg(long, value_parser = values::path, default_value = ".kcp-cache", help_heading = "kcp")]
    pub root_directory: PathBuf,
    /// Directory of the embedded store (upstream: of its embedded etcd); default --root-directory.
    #[arg(long, value_parser = values::path, help_heading = "Storage")]
    pub embedded_etcd_directory: Option<PathBuf>,
    #[command(flatten)]
    pub logging: LoggingFlags,
}

/// Why `kcp cache-server` stopped.
#[derive(Debug, thiserror::Error)]
pub enum CacheServerError {
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    HalfTlsPair,
    #[error(transparent)]
    Storage(#[from] OptionsError),
    #[error("creating {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("--client-ca-file: {0}")]
    ClientCa(#[from] kcp_authn::X509Error),
    #[error("opening the store: {0}")]
    Open(#[from] kcp_storage::StorageError),
    #[error(transparent)]
    Serve(#[from] kcp_apiserver::ServeError),
    #[error("closing the store: {0}")]
    Close(kcp_storage::StorageError),
    #[error("installing signal handlers: {0}")]
    Signals(std::io::Error),
}

impl CacheServerOptions {
    /// Checks what clap cannot: pairs of flags and flags that need others.
    pub fn validate(&self) -> Result<(), CacheServerError> {
        if self.serving.tls_cert_file.is_some() != self.serving.tls_private_key_file.is_some() {
            return Err(CacheServerError::HalfTlsPair);
        }
        self.storage_config()?;
        Ok(())
    }

    /// `--root-directory`, unless it is empty.
    fn root_directory(&self) -> Option<PathBuf> {
        non_empty(Some(&self.root_directory))
    }

    fn storage_config(&self) -> Result<StorageConfig, OptionsError> {
        let directory = non_empty(self.embedded_etcd_directory.as_ref()).or(self.root_directory());
        self.etcd.storage_config(None, directory.as_deref())
    }
}

/// Runs the cache server until SIGTERM or SIGINT.
pub async fn run(options: CacheServerOptions) -> Result<(), CacheServerError> {
    options.validate()?;
    let storage_config = options.storage_config()?;
    let store_directory = match &storage_config {
        StorageConfig::Embedded { path } => path.parent().map(PathBuf::from),
        StorageConfig::Etcd(_) => None,
    };
    for directory in options.root_directory().iter().chain(&store_directory) {
        std::fs::create_dir_all(directory).map_err(|source| CacheServerError::Directory {
            path: directory.clone(),
            source,
        })?;
    }
    let tls = options.serving.cert_key_files();
    let transport = pki::transport(&TransportOptions {
        root_directory: options.root_directory().as_deref(),
        tls: tls.as_ref(),
        client_ca_file: options.client_ca_file.as_deref(),
        admin: true,
        user: false,
        bind_address: options.serving.bind_address,
        hosts: Vec::new(),
    })?;
    let client_ca_pem = transport.client_ca_pem.clone().unwrap_or_default();
    info!(storage = ?storage_config, prefix = %options.etcd_prefix, "starting the cache server");
    let storage = kcp_storage::open(&storage_config).await?;
    let stop_background = CancellationToken::new();
    let compactor = kcp_storage::compactor::spawn(
        storage.clone(),
        options.etcd.etcd_compaction_interval,
        stop_background.clone(),
    );

    let served = serve(&options, &transport, &client_ca_pem, storage.clone()).await;
    stop_background.cancel();
    if let Some(compactor) = compactor {
        let _ = compactor.await;
    }
    let closed = storage.close().await;
    served?;
    closed.map_err(CacheServerError::Close)?;
    info!("shutdown complete");
    Ok(())
}

async fn serve(
    options: &CacheServerOptions,
    transport: &pki::Transport,
    client_ca_pem: &str,
    storage: Arc<dyn kcp_storage::Storage>,
) -> Result<(), CacheServerError> {
    let stopping = CancellationToken::new();
    let cache = Arc::new(CacheService::new(storage, &options.etcd_prefix));
    let services = Services::default().with(kcp_cache::path::SERVICE_NAME, cache);
    let handler = ServicesServer::with_client_ca(services, client_ca_pem, stopping.clone())?;
    let listener = TlsListener::bind(
        SocketAddr::new(options.serving.bind_address, options.serving.secure_port),
        TlsMaterial {
            serving_cert_chain_pem: &transport.serving_cert_chain_pem,
            serving_key_pem: &transport.serving_key_pem,
            client_ca_pems: &[client_ca_pem],
        },
    )
    .await?;
    let port = listener
        .local_addr()
        .map_or(options.serving.secure_port, |address| address.port());
    if let (Some(admin), Some(root)) = (&transport.admin_client, options.root_directory()) {
        kubeconfig::write_cache(
            &root.join(KUBECONFIG_FILE),
            &transport.server_ca_pem,
            Some(admin),
            &kubeconfig::server_host(options.serving.bind_address),
            port,
        )?;
    }
    info!(address = %SocketAddr::new(options.serving.bind_address, port), "serving");
    let signals = crate::start::shutdown_signal().map_err(CacheServerError::Signals)?;
    listener
        .serve(Arc::new(handler), signals, &stopping, SHUTDOWN_GRACE)
        .await;
    Ok(())
}
