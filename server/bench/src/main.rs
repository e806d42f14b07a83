//! kcp-bench: load and startup figures for the kcp server (recorded in docs/performance.md).
//!
//! Issue 2 sets latency, memory and startup targets; this tool produces the numbers the same way
//! every time, so a change can be compared with the last recorded run:
//!
//! - `load`: drive a running server (from a kubeconfig) through ConfigMap create, get, list, update
//!   and watch phases at a fixed open-loop rate, and report latency percentiles per phase (and,
//!   with `--server-pid`, that process's CPU per request).
//! - `run`: start a server itself (embedded store or etcd), report its startup time and memory
//!   idle and after the same load.
//! - `startup`: start a server N times, report start-to-`/readyz` time and idle memory.
//! - `crds` (issue 4): start a server, time N CRDs from create to `Established`, load custom
//!   resources of a CRD with a realistic schema, then measure memory per installed CRD per logical
//!   cluster on fresh servers.
//! - `authz` (issue 6): start a server, create 1,000 roles and bindings in `root`, and report the
//!   authorization overhead per request (a user RBAC evaluates minus `system:masters`), the refusal
//!   path and the first request after a policy change (index rebuild).
//! - `workspaces` (issue 7): start a server, create N workspaces at a fixed rate and time each to
//!   phase `Ready`, read the memory per empty workspace, delete them all and time that, and read
//!   the memory left afterwards. With `--shards N` (issue 19) over a `kcp sharded` topology,
//!   with every process's memory, where placement put the workspaces and each shard's figures.
//! - `idle-watchers` (issue 17): start a server, create N workspaces, open one informer-style
//!   watch per workspace, and report the memory and idle CPU per watcher, whether writes reach
//!   exactly their workspace's watcher (and how fast), and the memory left once they are closed.
//! - `type-replication` (issue 19): start `kcp sharded`, change a WorkspaceType on the root shard
//!   at a fixed rate and time each change until the cache's watch stream carries it, which is what
//!   every shard's read-back receives.
//! - `index-lag` (issue 20): start `kcp sharded` and the front-proxy's index, create N workspaces
//!   and time each from Ready to resolvable by the index; the index's memory per workspace.
//! - `front-proxy` (issue 20): start `kcp sharded --shards=1`, run create and get at a fixed rate
//!   straight at the root shard and then through the front-proxy, and report the added latency
//!   and the proxy's CPU per request.
//!
//! It only ever connects to loopback and every phase is bounded in requests and time.

mod admission;
mod apibindings;
mod authz;
mod client;
mod crds;
mod front_proxy;
mod idle_watchers;
mod index_lag;
mod kubeconfig;
mod load;
mod owned;
mod report;
mod schedule;
mod server;
mod shard_figures;
mod sharded;
mod stats;
mod type_replication;
mod visibility;
mod vw_watch;
mod watchers;
mod workspaces;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use admission::{AdmissionArgs, AdmissionError};
use authz::{AuthzArgs, AuthzError};
use client::{Client, ClientError, Protocol};
use crds::{CrdArgs, CrdError};
use idle_watchers::{IdleWatchersArgs, IdleWatchersError};
use index_lag::{IndexLagArgs, IndexLagError};
use kubeconfig::{KubeconfigError, Target};
use load::{LoadArgs, LoadError, Resource, Workload};
use report::{CrdsReport, LoadReport, Output, ServerReport, StartupReport, StartupRun};
use server::{Server, ServerArgs, ServerError};
use type_replication::{TypeReplicationArgs, TypeReplicationError};
use workspaces::{WorkspaceArgs, WorkspaceError};

#[derive(Parser)]
#[command(
    name = "kcp-bench",
    about = "Load and startup benchmarks for the kcp server"
)]
struct Cli {
    /// Output format.
    #[arg(long, value_enum, default_value = "table", global = true)]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load a running server named by a kubeconfig.
    Load {
        /// Kubeconfig of the server (its server URL must be on loopback).
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Context to use (default: the current context).
        #[arg(long)]
        context: Option<String>,
        /// A process whose utime+stime per request each phase reports (the server, or a proxy
        /// in front of it such as another front-proxy measured the same way as ours).
        #[arg(long)]
        server_pid: Option<u32>,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Start a server, load it, and report its startup time and memory too.
    Run {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Start a server repeatedly and report start-to-/readyz time and idle memory.
    Startup {
        #[command(flatten)]
        server: ServerArgs,
        /// How many times to start it.
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// Start a server; time CRDs to Established, load custom resources (the load options, always
    /// with --resource widgets), then memory per CRD per logical cluster on fresh servers.
    Crds {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        crds: CrdArgs,
    },
    /// Start a server with 1,000 roles and bindings in root; report the authorization overhead
    /// per request, the refusal path and the index rebuild after a policy change.
    Authz {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        authz: AuthzArgs,
    },
    /// Start a server; create ConfigMaps with nothing configured, with a validating webhook
    /// (served by this command) and with a ValidatingAdmissionPolicy; report what each adds.
    Admission {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        admission: AdmissionArgs,
    },
    /// Start a server; create workspaces at a fixed rate and time each to Ready, read memory per
    /// empty workspace, delete them all and read the memory left.
    Workspaces {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        workspaces: WorkspaceArgs,
    },
    /// Start a server; create N workspaces, open one watch per workspace (ConfigMaps, from a
    /// list's resourceVersion, with bookmarks, as an informer does) over a few HTTP/2
    /// connections, and report RSS before, with and after closing them (KiB per watcher), server
    /// CPU while they idle, and whether one write in each of K workspaces reaches exactly that
    /// workspace's watcher (latency p50/p99).
    IdleWatchers {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        idle: IdleWatchersArgs,
    },
    /// Start `kcp sharded`; change a WorkspaceType in root at a fixed rate and time each change
    /// from the write's response to its event in the cache's watch stream, which is what every
    /// shard's read-back watch receives (lag p50/p90/p99/max, changes not seen in time).
    TypeReplication {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        replication: TypeReplicationArgs,
    },
    /// Start `kcp sharded` and the front-proxy's index; create workspaces and time each from
    /// Ready to resolvable (by the index and through the proxy); memory per indexed workspace.
    IndexLag {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        index: IndexLagArgs,
    },
    /// Start `kcp sharded --shards=1`; run create and get straight at the root shard, then
    /// through the front-proxy; report the added latency (p50/p99) and the proxy's CPU per
    /// request.
    FrontProxy {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        proxy: front_proxy::FrontProxyArgs,
    },
    /// Start a server; bind N logical clusters to one APIExport; memory per binding beyond an
    /// empty cluster and bind -> Bound latency.
    Apibindings {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        bindings: apibindings::ApiBindingsArgs,
    },
    /// Start a server; bind N logical clusters to one APIExport; write across them and time the
    /// events on one watch through the export's virtual workspace.
    VwWatch {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        watch: vw_watch::VwWatchArgs,
    },
}

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Crd(#[from] CrdError),
    #[error(transparent)]
    Authz(#[from] AuthzError),
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    #[error(transparent)]
    Workspaces(#[from] WorkspaceError),
    #[error(transparent)]
    IdleWatchers(#[from] IdleWatchersError),
    #[error(transparent)]
    TypeReplication(#[from] TypeReplicationError),
    #[error(transparent)]
    IndexLag(#[from] IndexLagError),
    #[error(transparent)]
    FrontProxy(#[from] front_proxy::FrontProxyError),
    #[error(transparent)]
    ApiBindings(#[from] apibindings::ApiBindingsError),
    #[error(transparent)]
    VwWatch(#[from] vw_watch::VwWatchError),
    #[error("rendering the report: {0}")]
    Render(#[from] serde_json::Error),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("kcp-bench: starting the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(text) => {
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("kcp-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<String, BenchError> {
    let output = cli.output;
    match cli.command {
        Command::Load {
            kubeconfig,
            context,
            server_pid,
            load,
        } => {
            let target = Target::from_file(&kubeconfig, context.as_deref())?;
            let (_, report) = load_target(target, load, server_pid, || Ok(())).await?;
            Ok(report::render(&report, output)?)
        }
        Command::Run { server, load } => {
            let report = run_on_server(&server, load, None).await?;
            Ok(report::render(&report, output)?)
        }
        Command::Crds {
            server,
            mut load,
            crds,
        } => {
            load.resource = Resource::Widgets;
            let drain = load.drain;
            let report = run_on_server(&server, load, Some(&crds)).await?;
            let memory = if crds.skip_memory {
                Vec::new()
            } else {
                crds::memory(&server, &crds, drain).await?
            };
            Ok(report::render(
                &CrdsReport {
                    load: report,
                    memory,
                },
                output,
            )?)
        }
        Command::Admission { server, admission } => {
            let report = admission::run(&server, &admission).await?;
            Ok(report::render(&report, output)?)
        }
        Command::Authz { server, authz } => {
            let report = authz::run(&server, &authz).await?;
            Ok(report::render(&report, output)?)
        }
        Command::Workspaces { server, workspaces } => {
            let report = workspaces::run(&server, &workspaces).await?;
            Ok(report::render(&report, output)?)
        }
        Command::IdleWatchers { server, idle } => {
            let report = idle_watchers::run(&server, &idle).await?;
            Ok(report::render(&report, output)?)
        }
        Command::TypeReplication {
            server,
            replication,
        } => {
            let report = type_replication::run(&server, &replication).await?;
            Ok(report::render(&report, output)?)
        }
        Command::IndexLag { server, index } => Ok(report::render(
            &index_lag::run(&server, &index).await?,
            output,
        )?),
        Command::FrontProxy { server, proxy } => {
            let report = front_proxy::run(&server, &proxy).await?;
            Ok(report::render(&report, output)?)
        }
        Command::Apibindings { server, bindings } => Ok(report::render(
            &apibindings::run(&server, &bindings).await?,
            output,
        )?),
        Command::VwWatch { server, watch } => Ok(report::render(
            &vw_watch::run(&server, &watch).await?,
            output,
        )?),
        Command::Startup { server, runs } => {
            let mut report = StartupReport {
                backend: server.backend,
                idle_seconds: server.idle_seconds,
                runs: Vec::with_capacity(runs),
            };
            for i in 0..runs {
                let started = Server::start(&server).await?;
                tracing::info!(
                    run = i + 1,
                    startup_ms = started.startup.as_secs_f64() * 1e3,
                    "ready"
                );
                tokio::time::sleep(Duration::from_secs(server.idle_seconds)).await;
                let idle = started.memory()?;
                let startup_ms = started.startup.as_secs_f64() * 1e3;
                let stopped = started.stop().await?;
                report.runs.push(StartupRun {
                    startup_ms,
                    idle,
                    stopped,
                });
            }
            Ok(report::render(&report, output)?)
        }
    }
}

/// Starts a server, lets it idle, runs the time-to-Established phase (with `crds`) and the load,
/// and reports the load with the server's startup time and memory.
async fn run_on_server(
    server: &ServerArgs,
    load: LoadArgs,
    crds: Option<&CrdArgs>,
) -> Result<LoadReport, BenchError> {
    let started = Server::start(server).await?;
    tracing::info!(
        startup_ms = started.startup.as_secs_f64() * 1e3,
        "server ready"
    );
    tokio::time::sleep(Duration::from_secs(server.idle_seconds)).await;
    let idle = started.memory()?;
    let mut first = Vec::new();
    if let Some(crds) = crds.filter(|c| c.crds > 0) {
        let base = Target::from_file(&started.kubeconfig, Some("base"))?;
        let phase = crds::established(base, crds, load.drain, Some(started.pid())).await?;
        tracing::info!(ok = phase.ok, "CRDs established");
        first.push(phase);
    }
    let target = Target::from_file(&started.kubeconfig, None)?;
    let (after_load, mut report) =
        load_target(target, load, Some(started.pid()), || started.memory()).await?;
    let after_cleanup = started.memory()?;
    let startup_ms = started.startup.as_secs_f64() * 1e3;
    let stopped = started.stop().await?;
    report.phases.splice(0..0, first);
    report.server = Some(ServerReport {
        backend: server.backend,
        startup_ms,
        idle,
        after_load: Some(after_load),
        after_cleanup: Some(after_cleanup),
        stopped: Some(stopped),
    });
    Ok(report)
}

/// Creates the namespace, runs the phases, calls `after_phases` (before the namespace is deleted),
/// cleans up, and returns what `after_phases` returned with the report.
async fn load_target<T>(
    target: Target,
    load: LoadArgs,
    server_pid: Option<u32>,
    after_phases: impl FnOnce() -> Result<T, ServerError>,
) -> Result<(T, LoadReport), BenchError> {
    let protocol = if load.http1 {
        Protocol::Http1
    } else {
        Protocol::Http2
    };
    let concurrency = load.concurrency.max(1);
    let client = Arc::new(Client::new(target, protocol, concurrency)?);
    let workload = Workload::prepare(client, load).await?;
    let result = match workload.run(server_pid).await {
        Ok(phases) => after_phases()
            .map(|after| (after, phases))
            .map_err(BenchError::from),
        Err(error) => Err(error.into()),
    };
    // Clean up even when a phase failed, then report the first error.
    let cleanup = workload.cleanup().await;
    let (after, phases) = result?;
    cleanup?;
    Ok((
        after,
        LoadReport {
            protocol: match protocol {
                Protocol::Http1 => "HTTP/1.1",
                Protocol::Http2 => "HTTP/2",
            },
            concurrency,
            loadavg: server::loadavg(),
            server: None,
            phases,
        },
    ))
}
