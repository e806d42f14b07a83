//! What `kcp-operator run` runs around the controllers, like controller-runtime's manager:
//! leader election (`leader`), `/metrics` and the status page (`/`) on the metrics port, the
//! `/healthz` `/readyz` probes on their own port (`http`, `health`), and one shutdown for all
//! of them. The status page's watches start on every replica before the election, so a
//! standby serves it too.
//!
//! With leader election the controllers start only once this process holds the lease; losing
//! it drops them at once and [`run`] fails, so the process exits non-zero and its pod restarts
//! as a standby. A shutdown (SIGTERM) lets in-flight reconciles finish while the lease is still
//! renewed, then releases the lease and stops the HTTP endpoints last.

pub mod api_requests;
pub mod health;
pub mod http;
pub mod leader;
pub mod logs;
pub mod options;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::controller::{Context, Metrics, run::run as run_controllers};
use crate::status_page::Caches;
use health::{Health, Phase};
use leader::{Election, Lost};
pub use options::Options;
use options::{Timing, TimingError};

/// Where an in-cluster pod finds its namespace.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Why `run` stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid leader election flags")]
    Timing(#[from] TimingError),
    #[error("no namespace for the leader lease: set --leader-election-namespace or $POD_NAMESPACE")]
    NoNamespace,
    #[error("failed to listen on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("leader election lost")]
    LeaseLost(#[source] Lost),
}

/// Runs the endpoints and (while leading) the controllers until `shutdown` is cancelled.
/// `metrics` are where the controllers count (and the client counts its requests, see
/// [`api_requests::counting`]).
pub async fn run(
    client: Client,
    metrics: Arc<Metrics>,
    options: &Options,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let timing = options.timing()?;
    let ctx = Arc::new(Context::new(client).with_metrics(metrics));
    let health = Arc::new(Health::default());
    let endpoints = CancellationToken::new();
    let mut servers = Vec::new();
    if let Some(address) = options.metrics_bind_address.socket() {
        let metrics = ctx.metrics.clone();
        let (caches, watches) = Caches::start(&ctx.client, &endpoints);
        servers.extend(watches);
        let health = health.clone();
        servers.push(
            listen(address, &endpoints, move |path| {
                http::metrics_port_reply(
                    &metrics,
                    || caches.render(health.phase(), jiff::Timestamp::now()),
                    path,
                )
            })
            .await?,
        );
    }
    if let Some(address) = options.health_probe_bind_address.socket() {
        let health = health.clone();
        servers.push(
            listen(address, &endpoints, move |path| {
                http::health_reply(&health, path)
            })
            .await?,
        );
    }

    let result = if options.leader_elect {
        match lease_namespace(options) {
            Some(namespace) => lead(ctx, &health, &namespace, timing, shutdown).await,
            None => Err(Error::NoNamespace),
        }
    } else {
        ctx.metrics.set_leader(true);
        run_controllers(ctx, shutdown, || health.set(Phase::Synced)).await;
        Ok(())
    };

    endpoints.cancel();
    for server in servers {
        if let Err(error) = server.await {
            tracing::warn!(%error, "HTTP endpoint or status page watch task failed");
        }
    }
    result
}

fn lease_namespace(options: &Options) -> Option<String> {
    options::lease_namespace(
        options.leader_election_namespace.clone(),
        std::env::var("POD_NAMESPACE").ok(),
        std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE).ok(),
    )
}

/// Binds `address` and serves `reply` there until `stop` is cancelled.
async fn listen<R>(
    address: SocketAddr,
    stop: &CancellationToken,
    reply: R,
) -> Result<JoinHandle<()>, Error>
where
    R: Fn(&str) -> http::Reply + Clone + Send + Sync + 'static,
{
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| Error::Bind { address, source })?;
    tracing::info!(%address, "serving HTTP");
    Ok(tokio::spawn(http::serve(listener, reply, stop.clone())))
}

/// Waits for the lease, then runs the controllers while holding it.
async fn lead(
    ctx: Arc<Context>,
    health: &Health,
    namespace: &str,
    timing: Timing,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let election = Election::new(ctx.client.clone(), namespace, leader::identity(), timing);
    health.set(Phase::Standby);
    tracing::info!(
        identity = election.identity(),
        namespace,
        "waiting for the leader lease"
    );
    tokio::select! {
        () = election.acquire() => {}
        () = shutdown.cancelled() => {
            election.release().await;
            return Ok(());
        }
    }
    tracing::info!(identity = election.identity(), "became the leader");
    ctx.metrics.set_leader(true);
    health.set(Phase::Leading);
    let metrics = ctx.metrics.clone();
    let controllers = run_controllers(ctx, shutdown, || health.set(Phase::Synced));
    tokio::select! {
        () = controllers => {
            election.release().await;
            metrics.set_leader(false);
            Ok(())
        }
        lost = election.hold() => {
            metrics.set_leader(false);
            Err(Error::LeaseLost(lost))
        }
    }
}
