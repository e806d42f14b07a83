//! `kcp start`: bring a shard up from validated options and serve until SIGTERM/SIGINT.
//!
//! Order matters for users: the admin kubeconfig is written only once the port is bound (so it names
//! the real port, also with `--secure-port=0`), the root logical cluster exists (on the root shard;
//! a non-root shard holds none and first waits until it has read root's types back from the cache,
//! see `root_copies.rs`) and the shard's `Shard` object is registered, so a script that
//! waits for the file can use it at once. A shard
//! whose name another live process holds stops before serving (see `shard_registration`). The
//! cache server's side of the shard (the root shard's in-process cache, replication into the
//! cache) is in [`crate::cache`]. The shard publishes how it authenticates clients
//! (`kube-system/extension-apiserver-authentication`, [`crate::authentication_info`]) before it
//! registers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kcp_apiserver::{ApiServer, ServeError, ServerConfig};
use kcp_controllers::shard_directory::{ShardDirectory, Shards};
use kcp_controllers::shard_registration::{LocalShards, Registrar, RegistrationError};
use kcp_controllers::{ControllerMode, CrossShard, Election, Registration, Sharding};
use kcp_pod_streaming::KubeletConnector;
use kcp_tenancy::shard::{ROOT_SHARD_NAME, Urls};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::authentication::{self, AuthenticationSetupError};
use crate::authentication_info;
use crate::cache::{self, CacheSetupError};
use crate::kubeconfig::{self, KubeconfigError};
use crate::logical_cluster_admin::LogicalClusterAdmin;
use crate::memory;
use crate::options::ValidatedOptions;
use crate::options::batteries::Battery;
use crate::pki::{self, PkiError};
use crate::root_copies;
use crate::root_shard::RootShards;
use crate::shard_client::ShardClientError;
use crate::virtual_workspaces;

/// How long in-flight requests may take after a shutdown signal (every server of the binary).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Why `kcp start` stopped.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(transparent)]
    Authentication(#[from] AuthenticationSetupError),
    #[error("opening the store: {0}")]
    Storage(#[from] kcp_storage::StorageError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("closing the store: {0}")]
    Close(kcp_storage::StorageError),
    #[error("--requestheader-client-ca-file: {0}")]
    RequestHeaderCa(std::io::Error),
    #[error("installing signal handlers: {0}")]
    Signals(std::io::Error),
    #[error(transparent)]
    Shard(#[from] RegistrationError),
    #[error(transparent)]
    ShardClient(#[from] ShardClientError),
    #[error(transparent)]
    Cache(#[from] CacheSetupError),
    #[error("reading the shard's identity {}: {source}", path.display())]
    ShardIdentity {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] crate::private_file::PrivateFileError),
    #[error("--kubelet-client-certificate: {0}")]
    KubeletClient(#[from] kcp_pod_streaming::KubeletTlsError),
    #[error("publishing kube-system/extension-apiserver-authentication: {0}")]
    AuthenticationInfo(kcp_apimachinery::ApiError),
}

/// Runs the shard until it is told to stop.
pub async fn run(options: ValidatedOptions) -> Result<(), StartError> {
    if !options.inactive_flags().is_empty() {
        warn!(flags = %options.inactive_flags().join(","), "flags accepted but not active yet in this build");
    }
    let storage_config = options.storage_config();
    info!(shard = %options.shard_name, batteries = %options.batteries, storage = ?storage_config, "starting");
    let material = pki::bootstrap(&options)?;
    let authentication = authentication::build(&options, &material)?;
    let storage = kcp_storage::open(&storage_config).await?;

    let background = Background::start(&options, &storage);

    let in_process_cache = cache::in_process(&options, &storage);
    let config = ServerConfig {
        bind_address: SocketAddr::new(options.bind_address, options.secure_port),
        serving_cert_chain_pem: material.serving_cert_chain_pem.clone(),
        serving_key_pem: material.serving_key_pem.clone(),
        client_ca_pem: material.client_ca_pem.clone(),
        requestheader_ca_pem: options
            .authentication
            .request_header
            .client_ca_file
            .as_deref()
            .map(std::fs::read_to_string)
            .transpose()
            .map_err(StartError::RequestHeaderCa)?,
        storage_prefix: options.etcd_prefix.clone(),
        always_allow_paths: options.authorization_always_allow_paths.clone(),
        authorization_webhook: options.authorization_webhook.clone(),
        root_ca_pem: material.root_ca_pem.clone(),
        tenancy: kcp_tenancy::bootstrap::Options {
            holds_root: options.shard_name == ROOT_SHARD_NAME,
            workspace_types_battery: options.batteries.contains(Battery::WorkspaceTypes),
            ..kcp_tenancy::bootstrap::Options::default()
        },
        external_url: options
            .shard_external_url
            .as_ref()
            .map(|url| url.to_string().trim_end_matches('/').to_string()),
        shutdown_grace: SHUTDOWN_GRACE,
        logical_cluster_total_object_limit: options.logical_cluster_total_object_limit,
        logical_cluster_object_count_scan_interval: options
            .logical_cluster_object_count_scan_interval,
        max_logical_clusters: options.max_logical_clusters,
        shard_name: options.shard_name.clone(),
    };
    let kubelets = match &options.kubelet_client {
        Some(files) => KubeletConnector::new(files)?,
        None => KubeletConnector::without_credentials(),
    };
    let virtual_workspaces = virtual_workspaces::InProcess::new(options.run_virtual_workspaces);
    let services = virtual_workspaces
        .mount(cache::services(in_process_cache.as_ref()))
        .with_pod_connector(Arc::new(kubelets));
    let server = ApiServer::bind(config, authentication, storage.clone(), services).await?;
    virtual_workspaces.connect(&server);
    let port = server
        .local_addr()
        .map_or(options.secure_port, |a| a.port());
    let context = server.controller_context();
    publish_authentication_info(&options, &material, &context.store).await?;
    let registration = std::sync::Arc::new(registration(&options, port)?);
    let cache_links = cache::connect(
        &options,
        &context.store,
        &context.tenancy,
        in_process_cache.as_ref(),
        &registration.urls.virtual_workspace,
        &server.stopping(),
    )?;
    // Installed before the wait below, so that a shard told to stop while it waits stops cleanly.
    let mut signals = Box::pin(shutdown_signal().map_err(StartError::Signals)?);
    if options.shard_name != ROOT_SHARD_NAME {
        tokio::select! {
            () = root_copies::wait(&context.tenancy) => {}
            () = &mut signals => {
                server.stopping().cancel();
                for task in cache_links.tasks {
                    let _ = task.await;
                }
                background.stop().await;
                storage.close().await.map_err(StartError::Close)?;
                info!("stopped before serving");
                return Ok(());
            }
        }
    }
    // The root shard keeps its Shard in its own store, the others in the root shard's; the
    // list of shards the scheduler places over comes from the root shard's store there, and
    // from the copies the root shard replicated into the cache elsewhere.
    let (heartbeat, directory): (_, std::sync::Arc<dyn ShardDirectory>) = match &options
        .root_shard_kubeconfig_file
    {
        Some(path) if options.shard_name != ROOT_SHARD_NAME => {
            let root = RootShards::from_kubeconfig(path, &options.shard_name)?;
            let registrar = Registrar::new(root, context.tenancy.clone(), registration.clone());
            registrar.register().await?;
            (
                tokio::spawn(registrar.run(server.stopping())),
                cache_links.shards.clone(),
            )
        }
        _ => {
            let local = LocalShards::new(context.store.clone())?;
            let registrar = Registrar::new(local, context.tenancy.clone(), registration.clone());
            registrar.register().await?;
            (
                tokio::spawn(registrar.run(server.stopping())),
                std::sync::Arc::new(LocalShards::new(context.store.clone())?),
            )
        }
    };
    let cross_shard = match &options.logical_cluster_admin_kubeconfig {
        Some(path) => {
            Some(cross_shard(path, &options.shard_name, directory, server.stopping()).await?)
        }
        None => None,
    };
    // The controllers stop when the server starts shutting down, like its watches.
    let controllers = tokio::spawn(kcp_controllers::run(
        context,
        controller_mode(&options),
        Sharding {
            registration: Some(registration),
            cross_shard,
        },
        server.stopping(),
    ));
    if let Some(path) = &options.admin_kubeconfig_path {
        kubeconfig::write(
            path,
            &material,
            &kubeconfig::server_host(options.bind_address),
            port,
        )?;
    }
    info!(address = %SocketAddr::new(options.bind_address, port), "serving");
    let result = server.run(signals).await;
    let _ = controllers.await;
    let _ = heartbeat.await;
    for task in cache_links.tasks {
        let _ = task.await;
    }
    background.stop().await;
    let closed = storage.close().await;
    result?;
    closed.map_err(StartError::Close)?;
    info!("shutdown complete");
    Ok(())
}

/// The shard's housekeeping besides serving: returning memory to the system and compacting the
/// store, until [`Background::stop`].
struct Background {
    stop: CancellationToken,
    trimmer: tokio::task::JoinHandle<()>,
    compactor: Option<tokio::task::JoinHandle<()>>,
}

impl Background {
    fn start(options: &ValidatedOptions, storage: &Arc<dyn kcp_storage::Storage>) -> Background {
        let stop = CancellationToken::new();
        let trimmer = tokio::spawn(memory::trim_periodically(
            memory::TRIM_INTERVAL,
            stop.clone(),
        ));
        let compactor = kcp_storage::compactor::spawn(
            storage.clone(),
            options.etcd_compaction_interval,
            stop.clone(),
        );
        Background {
            stop,
            trimmer,
            compactor,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = self.trimmer.await;
        if let Some(compactor) = self.compactor {
            let _ = compactor.await;
        }
    }
}

/// Publishes how this shard authenticates clients for the servers that delegate to it
/// ([`authentication_info`]).
async fn publish_authentication_info(
    options: &ValidatedOptions,
    material: &pki::ServingMaterial,
    store: &kcp_registry::store::RestStore,
) -> Result<(), StartError> {
    let info = authentication_info::AuthenticationInfo {
        client_ca_pem: material.client_ca_pem.clone(),
        request_header: authentication::request_header_config(
            &options.authentication.request_header,
        )?,
    };
    authentication_info::publish(store, &info)
        .await
        .map_err(StartError::AuthenticationInfo)
}

/// Scheduling to other shards: their LogicalClusters reached with `path`'s credentials, the
/// list of shards read once now (so the first workspaces see every shard) and then kept fresh
/// until `stop`.
async fn cross_shard(
    path: &std::path::Path,
    shard_name: &str,
    directory: std::sync::Arc<dyn ShardDirectory>,
    stop: CancellationToken,
) -> Result<CrossShard, StartError> {
    let remote = LogicalClusterAdmin::from_kubeconfig(path, shard_name)?;
    let shards = std::sync::Arc::new(Shards::default());
    if let Err(error) = shards.refresh(directory.as_ref()).await {
        warn!(%error, "reading the list of shards failed, retrying in the background");
    }
    tokio::spawn(shards.clone().run(directory, stop));
    Ok(CrossShard {
        shards,
        remote: std::sync::Arc::new(remote),
    })
}

/// Who this shard is: its name, its URLs (upstream's defaults: the base URL is the server's own
/// address, the others default to it), its limit, and the identity of the process holding the
/// name. Replicas under one Lease share an identity (the Lease decides which of them works);
/// otherwise each root directory has its own, so a second process with the same name elsewhere
/// is refused while a process restarted on the same directory after a crash is not.
fn registration(options: &ValidatedOptions, port: u16) -> Result<Registration, StartError> {
    let url = |uri: &http::Uri| uri.to_string().trim_end_matches('/').to_string();
    let host = options
        .external_hostname
        .clone()
        .unwrap_or_else(|| kubeconfig::server_host(options.bind_address));
    let base = options
        .shard_base_url
        .as_ref()
        .map_or_else(|| format!("https://{host}:{port}"), url);
    let process = match (&options.leader_election, &options.root_directory) {
        (Some((namespace, name)), _) => format!("lease:{namespace}/{name}"),
        (None, Some(dir)) => directory_identity(dir)?,
        (None, None) => process_identity(),
    };
    Ok(Registration {
        name: options.shard_name.clone(),
        process,
        urls: Urls::with_defaults(
            base,
            options.shard_external_url.as_ref().map(url),
            options.shard_virtual_workspace_url.as_ref().map(url),
        ),
        max_logical_clusters: options.max_logical_clusters,
    })
}

/// The identity kept in `<root-directory>/shard-identity`, made once (from the first process's
/// [`process_identity`]): a shard restarted on its directory after a crash takes its name back at
/// once instead of waiting for its last heartbeat to go stale.
fn directory_identity(dir: &std::path::Path) -> Result<String, StartError> {
    let path = dir.join(SHARD_IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(kept) if !kept.trim().is_empty() => return Ok(kept.trim().to_owned()),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(StartError::ShardIdentity { path, source }),
    }
    let identity = process_identity();
    crate::private_file::write(&path, identity.as_bytes())?;
    Ok(identity)
}

/// Where a shard keeps the identity it registers its name with.
const SHARD_IDENTITY_FILE: &str = "shard-identity";

/// Unique per process, like client-go's leader election identities: host, process id, start time.
fn process_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "kcp".to_owned());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{host}_{}_{started:x}", std::process::id())
}

/// Completes on the first SIGTERM or SIGINT.
pub(crate) fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => info!("received SIGTERM"),
            _ = int.recv() => info!("received SIGINT"),
        }
    })
}

/// Whether this replica runs the controllers, and under which Lease. The identity names the host
/// (the pod, in a Deployment) and is unique per process, like client-go's.
fn controller_mode(options: &ValidatedOptions) -> ControllerMode {
    match (&options.leader_election, options.run_controllers) {
        (_, false) => ControllerMode::Off,
        (None, true) => ControllerMode::Always,
        (Some((namespace, name)), true) => ControllerMode::Elected(Election::new(
            namespace.clone(),
            name.clone(),
            process_identity(),
        )),
    }
}
