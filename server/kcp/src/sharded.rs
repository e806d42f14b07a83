//! `kcp sharded`: a whole sharded kcp on one machine, for trying sharding out and for tests
//! (upstream's `sharded-test-server`, with a design of our own).
//!
//! It starts a standalone cache server (or, with `--cache in-process`, lets the root shard serve
//! the cache), the root shard, `--shards - 1` further shards (`shard-1`, ...) and a front-proxy
//! on 127.0.0.1 with one generated PKI, writes `admin.kubeconfig` with a context per shard and
//! the context `front-proxy` (current: users of a sharded kcp talk to the proxy, as in
//! production) once all are ready, prints what it started, and stops them all on SIGTERM or
//! Ctrl-C (then exits 0). When one of them exits on its own, it stops the others and fails naming it.
//! Running it again on the same directory reuses the PKI and every process's data.
//!
//! The parts: [`plan`] decides processes, flags, files and ports (pure); [`crate::pki::shared`]
//! generates the PKI; [`crate::kubeconfig::write_endpoints`] writes the kubeconfigs;
//! [`supervisor`] runs the processes; [`summary`] is what is printed.

pub mod plan;
pub mod summary;
pub mod supervisor;

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli;
use crate::kubeconfig::{self, KubeconfigError, ProxyEndpoint};
use crate::pki::PkiError;
use crate::pki::shared::{self, SharedPki};
use crate::private_file::{self, PrivateFileError};
use crate::start;
use plan::{
    CacheMode, KubeconfigFile, KubeconfigUser, Layout, MappingFile, PathMapping, Plan, PlanError,
    Ports, Process, Role,
};
use supervisor::{STOP_GRACE, Supervisor, SupervisorError};

/// The flags of `kcp sharded`.
#[derive(Debug, Clone, Args)]
pub struct ShardedOptions {
    /// How many shards: the root shard and N-1 more (shard-1, shard-2, ...).
    #[arg(long, value_name = "N", default_value_t = 2,
        value_parser = clap::value_parser!(u16).range(1..=64))]
    pub shards: u16,
    /// Directory for everything: the PKI, the kubeconfigs, one log and one data directory per
    /// process. Reused as it is on the next run.
    #[arg(long, value_name = "DIR", default_value = ".kcp-sharded")]
    pub root_directory: PathBuf,
    /// The root shard's port; shard-i listens on P+i and the cache server on P+N. 0 picks free
    /// ports (printed, and in admin.kubeconfig).
    #[arg(long, value_name = "P", default_value_t = 6443)]
    pub secure_port: u16,
    /// Comma-separated etcd URLs: every process stores in that etcd under its own prefix
    /// (/shard/<name>, /cache) instead of an embedded store in its directory.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// Where the shards' cache is: a standalone `kcp cache-server`, or the root shard's own
    /// (in-process, at /services/cache/).
    #[arg(long, value_enum, default_value = "standalone")]
    pub cache: CacheMode,
}

/// Why `kcp sharded` failed.
#[derive(Debug, thiserror::Error)]
pub enum ShardedError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("--root-directory {}: {source}", path.display())]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] PrivateFileError),
    #[error("removing the last run's {}: {source}", path.display())]
    RemoveStale {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("picking free ports: {0}")]
    Ports(std::io::Error),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("finding this executable to start the processes from: {0}")]
    Executable(std::io::Error),
    #[error("installing signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("writing the front-proxy's mapping file: {0}")]
    Mapping(yaml_serde::Error),
    #[error(transparent)]
    Supervisor(#[from] SupervisorError),
}

/// Why no cache server runs when this build has none (said on stderr and in the summary).
const NO_CACHE_SERVER: &str = "not started: this build has no `kcp cache-server` yet; the \
    shards' --cache-kubeconfig names its URL, where nothing answers";
/// The summary's line for the cache with `--cache in-process`.
const IN_PROCESS_CACHE: &str = "in-process: served by the root shard at /services/cache/";

/// Runs the topology until a signal (`Ok`) or until one process exits (`Err` naming it).
pub async fn run(options: ShardedOptions) -> Result<(), ShardedError> {
    let signal = start::shutdown_signal().map_err(ShardedError::Signals)?;
    tokio::pin!(signal);
    let dir =
        std::path::absolute(&options.root_directory).map_err(|source| ShardedError::Directory {
            path: options.root_directory.clone(),
            source,
        })?;
    private_file::create_dir(&dir)?;
    let ports = if options.secure_port == 0 {
        free_ports(options.shards)?
    } else {
        Ports::consecutive(options.secure_port, options.shards)?
    };
    let plan = Plan::new(&Layout {
        dir,
        etcd_servers: options.etcd_servers.clone(),
        ports,
        cache: options.cache,
        front_proxy: cli::builds(plan::FRONT_PROXY_PROGRAM),
    });
    // A script waiting for the file must not find the last run's.
    remove_if_present(&plan.admin_kubeconfig.path)?;
    let pki = shared::ensure(&plan.pki_dir)?;
    for file in &plan.kubeconfigs {
        write_kubeconfig(file, &pki, None)?;
    }
    write_mapping(&plan.mapping)?;
    let program = std::env::current_exe().map_err(ShardedError::Executable)?;
    let mut supervisor = Supervisor::new(&pki)?;

    let started = tokio::select! {
        started = start_all(&mut supervisor, &program, &plan) => Some(started),
        () = &mut signal => None,
    };
    let outcome = match started {
        Some(Ok(())) => serve(&mut supervisor, &plan, &pki, &mut signal).await,
        Some(Err(err)) => Err(err),
        // Stopped while starting: what started is stopped below, as on any signal.
        None => Ok(()),
    };
    if !supervisor.running().is_empty() {
        println!("stopping every process (SIGTERM, SIGKILL after {STOP_GRACE:?})");
    }
    for problem in supervisor.stop().await {
        eprintln!("warning: {problem}");
    }
    outcome
}

/// Announces the ready topology, then waits for a signal or a process's exit.
async fn serve(
    supervisor: &mut Supervisor,
    plan: &Plan,
    pki: &SharedPki,
    signal: &mut (impl Future<Output = ()> + Unpin),
) -> Result<(), ShardedError> {
    let proxy = plan
        .front_proxy_endpoint
        .as_ref()
        .map(|endpoint| ProxyEndpoint {
            endpoint,
            user: &pki.kcp_admin,
        });
    write_kubeconfig(&plan.admin_kubeconfig, pki, proxy)?;
    print!("{}", render_summary(supervisor, plan));
    tokio::select! {
        exited = supervisor.watch() => Err(exited.into()),
        () = signal => Ok(()),
    }
}

/// Starts the cache server, then the root shard, then the other shards, then the front-proxy,
/// each step once the previous one is ready (the front-proxy is ready once it has indexed every
/// shard).
async fn start_all(
    supervisor: &mut Supervisor,
    program: &Path,
    plan: &Plan,
) -> Result<(), ShardedError> {
    let mut shards = Vec::new();
    let mut proxies = Vec::new();
    for process in &plan.processes {
        match process.role {
            Role::Cache => start_cache(supervisor, program, process).await?,
            Role::Shard => shards.push(process),
            Role::FrontProxy => proxies.push(process),
        }
    }
    let (root, others) = shards.split_first().ok_or(PlanError::NoShards)?;
    supervisor.spawn(program, root)?;
    supervisor.wait_ready().await?;
    for shard in others {
        supervisor.spawn(program, shard)?;
    }
    supervisor.wait_ready().await?;
    for proxy in proxies {
        supervisor.spawn(program, proxy)?;
    }
    supervisor.wait_ready().await?;
    Ok(())
}

/// Starts the standalone cache server and waits until it is ready. A build without one says so
/// on stderr (and the summary shows it not started); the shards still start: they are given its
/// kubeconfig, but do not depend on it yet.
async fn start_cache(
    supervisor: &mut Supervisor,
    program: &Path,
    cache: &Process,
) -> Result<(), ShardedError> {
    if !cli::builds(plan::CACHE_SERVER_COMMAND) {
        eprintln!("warning: the cache server is {NO_CACHE_SERVER}");
        return Ok(());
    }
    supervisor.spawn(program, cache)?;
    supervisor.wait_ready().await?;
    Ok(())
}

fn render_summary(supervisor: &Supervisor, plan: &Plan) -> String {
    let pid_of = |name: &str| {
        supervisor
            .running()
            .iter()
            .find(|running| running.name == name)
            .map(supervisor::Running::pid)
    };
    let mut rows: Vec<summary::Row<'_>> = plan
        .processes
        .iter()
        .map(|process| summary::Row {
            name: &process.name,
            url: &process.url,
            pid: pid_of(&process.name),
            log: &process.log,
            note: NO_CACHE_SERVER,
        })
        .collect();
    if !plan
        .processes
        .iter()
        .any(|process| process.role == Role::Cache)
    {
        rows.insert(
            0,
            summary::Row {
                name: plan::CACHE,
                url: &plan.cache_url,
                pid: None,
                log: Path::new(""),
                note: IN_PROCESS_CACHE,
            },
        );
    }
    let shards: Vec<&str> = plan
        .admin_kubeconfig
        .endpoints
        .iter()
        .map(|endpoint| endpoint.name.as_str())
        .collect();
    let front_proxy = plan
        .front_proxy_endpoint
        .as_ref()
        .map(|endpoint| endpoint.name.as_str());
    summary::render(&rows, &plan.admin_kubeconfig.path, &shards, front_proxy)
}

fn write_kubeconfig(
    file: &KubeconfigFile,
    pki: &SharedPki,
    proxy: Option<ProxyEndpoint<'_>>,
) -> Result<(), KubeconfigError> {
    let user = match file.user {
        KubeconfigUser::ShardAdmin => &pki.admin,
        KubeconfigUser::LogicalClusterAdmin => &pki.logical_cluster_admin,
        KubeconfigUser::ExternalLogicalClusterAdmin => &pki.external_logical_cluster_admin,
    };
    kubeconfig::write_endpoints(&file.path, &pki.server_ca_pem, user, &file.endpoints, proxy)
}

/// Writes the front-proxy's mapping file (YAML, as upstream reads it).
fn write_mapping(mapping: &MappingFile) -> Result<(), ShardedError> {
    let entries: Vec<serde_json::Value> =
        mapping.entries.iter().map(PathMapping::to_json).collect();
    let yaml = yaml_serde::to_string(&entries).map_err(ShardedError::Mapping)?;
    private_file::write(&mapping.path, yaml.as_bytes())?;
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<(), ShardedError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ShardedError::RemoveStale {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Distinct loopback ports that were free a moment ago: one per shard, the cache server's and
/// the front-proxy's. All are held at once while picking, so they differ; another program may
/// still take one before its process binds it, which then fails to start and says so.
fn free_ports(shards: u16) -> Result<Ports, ShardedError> {
    let listeners = (0..shards + 2)
        .map(|_| TcpListener::bind((plan::BIND_ADDRESS, 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ShardedError::Ports)?;
    let mut ports = listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ShardedError::Ports)?;
    let front_proxy = ports.pop().ok_or(PlanError::NoShards)?;
    let cache = ports.pop().ok_or(PlanError::NoShards)?;
    Ok(Ports {
        shards: ports,
        cache,
        front_proxy,
    })
}
