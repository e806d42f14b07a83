//! `front-proxy` (issue 20, "added latency of the proxy vs the shard directly, same run: GET and
//! CREATE p50/p99 at 500 req/s, and proxy CPU per request"; goals <= 0.3 ms added at p50 and
//! <= 100 µs of proxy CPU per request).
//!
//! It starts `kcp sharded --shards=1` (the [`Topology`]: cache server, root shard, front-proxy),
//! and runs the same create and get phases ([`Workload`]) twice with the same credentials (the
//! front-proxy context's `kcp-admin` certificate, which root's RBAC makes an admin either way):
//! first straight at the root shard, then through the proxy, each in a namespace of its own.
//! The added latency is the difference of the percentiles; the proxy's CPU per request is its
//! process's utime+stime over the proxied phase divided by the requests that succeeded. Client,
//! proxy and shard share the machine, so `/proc/loadavg` is reported too.

use std::sync::Arc;
use std::time::Duration;

use kcp_apimachinery::duration::parse_or_seconds;
use serde::Serialize;

use crate::client::{Client, Protocol};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{LoadArgs, LoadError, Phase, Resource, Workload};
use crate::server::{ServerArgs, ServerError, Stopped, loadavg};
use crate::sharded::Topology;
use crate::stats::PhaseReport;

/// The front-proxy's process and context in `kcp sharded`'s summary and kubeconfig.
const FRONT_PROXY: &str = "front-proxy";
const ROOT_SHARD: &str = "root";

/// Options of the `front-proxy` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct FrontProxyArgs {
    /// Requests per second of each phase, scheduled on a clock (open loop).
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// Length of each phase.
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub duration: Duration,
    /// HTTP/2 connections to each endpoint.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
}

/// Why the figures could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum FrontProxyError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("kcp sharded printed no {0} process (is the front-proxy in this build?)")]
    Missing(&'static str),
}

/// One phase straight at the shard and through the proxy.
#[derive(Debug, Serialize)]
pub struct Comparison {
    pub phase: String,
    /// Proxied minus direct, in ms (`None` without latencies on both sides).
    pub added_p50_ms: Option<f64>,
    pub added_p99_ms: Option<f64>,
    /// The proxy's utime+stime per successful proxied request.
    pub proxy_cpu_us_per_request: Option<f64>,
}

/// What `front-proxy` prints.
#[derive(Debug, Serialize)]
pub struct FrontProxyReport {
    pub comparisons: Vec<Comparison>,
    /// The phases at the root shard.
    pub direct: Vec<PhaseReport>,
    /// The phases through the front-proxy (server CPU: the proxy's).
    pub proxied: Vec<PhaseReport>,
    pub startup_ms: f64,
    /// /proc/loadavg (1, 5, 15 min) once the topology was ready.
    pub loadavg_at_start: String,
    /// /proc/loadavg at the end.
    pub loadavg: String,
    pub stopped: Stopped,
}

/// Starts the topology, measures, stops it.
pub async fn run(
    server: &ServerArgs,
    args: &FrontProxyArgs,
) -> Result<FrontProxyReport, FrontProxyError> {
    let topology = Topology::start(server, 1).await?;
    let loadavg_at_start = loadavg();
    let measured = measure(&topology, args).await;
    let startup_ms = topology.startup.as_secs_f64() * 1e3;
    let stopped = topology.stop().await?;
    let (direct, proxied) = measured?;
    Ok(FrontProxyReport {
        comparisons: compare(&direct, &proxied),
        direct,
        proxied,
        startup_ms,
        loadavg_at_start,
        loadavg: loadavg(),
        stopped,
    })
}

async fn measure(
    topology: &Topology,
    args: &FrontProxyArgs,
) -> Result<(Vec<PhaseReport>, Vec<PhaseReport>), FrontProxyError> {
    let process = |name: &'static str| {
        topology
            .summary
            .processes
            .iter()
            .find(|process| process.name == name)
            .ok_or(FrontProxyError::Missing(name))
    };
    let proxy = process(FRONT_PROXY)?;
    let shard = process(ROOT_SHARD)?;
    let through_proxy = Target::from_file(&topology.kubeconfig, Some(FRONT_PROXY))?;
    let direct = through_proxy.with_server(&format!("{}/clusters/root", shard.url))?;
    let direct = phases(direct, args, shard.pid).await?;
    let proxied = phases(through_proxy, args, proxy.pid).await?;
    Ok((direct, proxied))
}

/// Create then get in a namespace of their own, with `pid`'s CPU per request.
async fn phases(
    target: Target,
    args: &FrontProxyArgs,
    pid: u32,
) -> Result<Vec<PhaseReport>, FrontProxyError> {
    let client = Arc::new(Client::new(target, Protocol::Http2, args.concurrency)?);
    let load = LoadArgs {
        namespace: None,
        rate: args.rate,
        list_rate: 1.0,
        duration: args.duration,
        requests: None,
        concurrency: args.concurrency,
        http1: false,
        resource: Resource::Configmaps,
        page_size: 500,
        phases: vec![Phase::Create, Phase::Get],
        watchers: 0,
        payload_bytes: 256,
        protobuf: false,
        drain: Duration::from_secs(10),
    };
    let workload = Workload::prepare(client, load).await?;
    let reports = workload.run(Some(pid)).await;
    workload.cleanup().await?;
    Ok(reports?)
}

/// Each proxied phase against the direct phase of the same name.
fn compare(direct: &[PhaseReport], proxied: &[PhaseReport]) -> Vec<Comparison> {
    proxied
        .iter()
        .map(|through| {
            let straight = direct
                .iter()
                .find(|report| report.phase == through.phase)
                .and_then(|report| report.latency);
            let added = |pick: fn(&crate::stats::Latency) -> f64| {
                straight
                    .zip(through.latency)
                    .map(|(straight, through)| pick(&through) - pick(&straight))
            };
            Comparison {
                phase: through.phase.clone(),
                added_p50_ms: added(|latency| latency.p50_ms),
                added_p99_ms: added(|latency| latency.p99_ms),
                proxy_cpu_us_per_request: through.server_cpu_us_per_request,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::stats::Latency;

    fn report(phase: &str, p50_ms: f64, p99_ms: f64, cpu: Option<f64>) -> PhaseReport {
        PhaseReport {
            phase: phase.into(),
            requests: 10,
            ok: 10,
            errors: BTreeMap::new(),
            target_rate: 500.0,
            throughput: 500.0,
            elapsed_s: 1.0,
            latency: Some(Latency {
                p50_ms,
                p90_ms: p99_ms,
                p99_ms,
                max_ms: p99_ms,
            }),
            dispatch_lag_p99_ms: 0.0,
            server_cpu_us_per_request: cpu,
            watch: None,
        }
    }

    #[test]
    fn the_added_latency_is_proxied_minus_direct_per_phase() {
        let direct = [
            report("create", 1.0, 3.0, Some(200.0)),
            report("get", 0.5, 1.0, None),
        ];
        let proxied = [
            report("get", 0.7, 1.5, Some(40.0)),
            report("create", 1.25, 4.0, None),
        ];
        let compared = compare(&direct, &proxied);
        assert_eq!(compared[0].phase, "get");
        assert_eq!(compared[0].added_p50_ms, Some(0.7 - 0.5));
        assert_eq!(compared[0].added_p99_ms, Some(0.5));
        assert_eq!(compared[0].proxy_cpu_us_per_request, Some(40.0));
        assert_eq!(compared[1].added_p50_ms, Some(0.25));
        let unmatched = compare(&[], &proxied);
        assert_eq!(unmatched[0].added_p50_ms, None);
    }
}
