//! The `kcp-operator` command: `crds` prints the CRDs, `rbac` the ClusterRole and Role the
//! operator needs, `run` runs the controllers (with leader election, metrics and health
//! endpoints).

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "kcp-operator",
    version,
    about = "Runs kcp on a Kubernetes host cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition as a multi-document YAML stream.
    Crds,
    /// Print the ClusterRole the controllers need and the leader-election Role as YAML.
    Rbac {
        /// Namespace of the leader-election Role (where the operator runs).
        #[arg(long, default_value = "kcp-operator")]
        namespace: String,
    },
    /// Run the controllers against the cluster of the in-cluster config or $KUBECONFIG.
    Run(kcp_operator::manager::Options),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Crds => print_crds(),
        Command::Rbac { namespace } => print_rbac(&namespace),
        Command::Run(options) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(run(&options)),
            Err(error) => {
                eprintln!("failed to start the async runtime: {error}");
                ExitCode::FAILURE
            }
        },
    }
}

fn print_crds() -> ExitCode {
    match kcp_operator::crds::render_all() {
        Ok(yaml) => match std::io::stdout().write_all(yaml.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("failed to write CRDs: {error}");
                ExitCode::FAILURE
            }
        },
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn print_rbac(namespace: &str) -> ExitCode {
    match kcp_operator::rbac::render_all(namespace) {
        Ok(yaml) => match std::io::stdout().write_all(yaml.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("failed to write RBAC: {error}");
                ExitCode::FAILURE
            }
        },
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// JSON logs (level from `RUST_LOG`, default `info`); stops on SIGTERM or Ctrl-C after
/// in-flight reconciles finish; fails when the leader lease is lost.
async fn run(options: &kcp_operator::manager::Options) -> ExitCode {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(kcp_operator::manager::logs::filter(
            std::env::var("RUST_LOG").ok().as_deref(),
        ))
        .init();
    let metrics = std::sync::Arc::new(kcp_operator::controller::Metrics::default());
    let client = match kube::Config::infer().await.map(|mut config| {
        kcp_operator::controller::kcp::identify(&mut config);
        kube::client::ClientBuilder::try_from(config).map(|builder| {
            builder
                .with_layer(&kcp_operator::manager::api_requests::counting(
                    metrics.clone(),
                ))
                .build()
        })
    }) {
        Ok(Ok(client)) => client,
        Ok(Err(error)) => {
            tracing::error!(%error, "no Kubernetes client");
            return ExitCode::FAILURE;
        }
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client configuration");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        signal.cancel();
    });
    match kcp_operator::manager::run(client, metrics, options, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %kcp_operator::controller::error_chain(&error), "stopped");
            ExitCode::FAILURE
        }
    }
}

async fn wait_for_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
