//! `vw-watch` (issue 22, "1,000 consumer workspaces, 500 writes/s spread over them: event delivery
//! p99 through one apiexport virtual-workspace watch (goal <= 50 ms) and server CPU per delivered
//! event").
//!
//! It starts a server, exports the `apibindings` command's schema, makes `--clusters` logical
//! clusters exist (namespace `bench` in each) and binds the export in every one, then opens one
//! watch through the export's virtual workspace across all of them
//! (`/services/apiexport/<provider>/gadgets/clusters/*/apis/bench.kcp.io/v1/gadgets`) and creates
//! gadgets at `--rate`, round-robin over the clusters, timing each from its create's response to
//! its arrival on the watch (the `watch` load phase's machinery), with the server's CPU time per
//! delivered event. Then, with `--get-rate`, it GETs one gadget through the virtual workspace of
//! one cluster (`.../clusters/<cluster>/apis/bench.kcp.io/v1/namespaces/bench/gadgets/g-0`) at
//! that rate for `--duration`: a controller reading its objects one by one, which pays whatever
//! the workspace does per request (authorization, knowing the export and its consumers).

use std::time::Duration;

use http::Method;
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use crate::apibindings::{self, ApiBindingsError, PROVIDER};
use crate::crds::{self, cluster_name};
use crate::load::{self, LoadError, outcome, resource_version, to_bytes};
use crate::report::Table;
use crate::schedule::{self, Failure, Plan};
use crate::server::{Server, ServerArgs, Stopped};
use crate::stats::PhaseReport;
use crate::watchers::{self, Watchers};

/// Options of the `vw-watch` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct VwWatchArgs {
    /// Consumer logical clusters, each binding the export.
    #[arg(long, default_value_t = 1000)]
    pub clusters: u64,
    /// Namespace and APIBinding creates per second while preparing.
    #[arg(long, default_value_t = 50.0)]
    pub bind_rate: f64,
    /// Gadget creates per second, spread over the clusters (open loop).
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// How long the writes go on.
    #[arg(long, default_value = "20", value_parser = kcp_apimachinery::duration::parse_or_seconds)]
    pub duration: Duration,
    /// How long the last event may take to arrive.
    #[arg(long, default_value = "10", value_parser = kcp_apimachinery::duration::parse_or_seconds)]
    pub drain: Duration,
    /// GETs per second of one gadget through one cluster's virtual workspace, after the watch
    /// phase (0: no such phase).
    #[arg(long, default_value_t = 0.0)]
    pub get_rate: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum VwWatchError {
    #[error(transparent)]
    Setup(#[from] ApiBindingsError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    #[error(transparent)]
    Plan(#[from] schedule::PlanError),
}

/// What `vw-watch` prints.
#[derive(Debug, Serialize)]
pub struct VwWatchReport {
    pub clusters: u64,
    /// Create response -> event on the virtual-workspace watch.
    pub delivery: PhaseReport,
    /// GETs through one cluster's virtual workspace, with `--get-rate`.
    pub gets: Option<PhaseReport>,
    pub stopped: Stopped,
}

/// Starts a server, measures, stops it.
pub async fn run(server: &ServerArgs, args: &VwWatchArgs) -> Result<VwWatchReport, VwWatchError> {
    let started = Server::start(server).await?;
    let measured = measure(&started, args).await;
    let stopped = started.stop().await?;
    let (delivery, gets) = measured?;
    Ok(VwWatchReport {
        clusters: args.clusters,
        delivery,
        gets,
        stopped,
    })
}

async fn measure(
    started: &Server,
    args: &VwWatchArgs,
) -> Result<(PhaseReport, Option<PhaseReport>), VwWatchError> {
    let client = apibindings::connect(started).await?;
    apibindings::export(&client).await?;
    crds::touch_clusters(&client, args.clusters, args.bind_rate, args.drain)
        .await
        .map_err(ApiBindingsError::from)?;
    apibindings::bind_all(&client, args.clusters, args.bind_rate, args.drain).await?;
    let plan = Plan::new(args.rate, args.duration, None)?;
    let workspace = format!("/services/apiexport/{PROVIDER}/gadgets/clusters");
    let collection = format!("{workspace}/*/apis/{}/v1/gadgets", crds::GROUP);
    let timeout = plan.span() + args.drain * 2;
    let watchers =
        Watchers::open(&client, &collection, 1, timeout, watchers::written_revision).await?;
    let clusters = args.clusters.max(1);
    let phase = async {
        let run = schedule::drive(&plan, args.drain, |i| {
            let client = client.clone();
            let path = format!(
                "/clusters/{}/apis/{}/v1/namespaces/bench/gadgets",
                cluster_name(i % clusters),
                crds::GROUP
            );
            let body = to_bytes(&json!({
                "apiVersion": format!("{}/v1", crds::GROUP), "kind": "Gadget",
                "metadata": {"name": format!("g-{i}")}, "spec": {"size": 1},
            }));
            async move {
                let reply = outcome(client.request(Method::POST, &path, Some(body)).await)?;
                let acked = Instant::now();
                let revision =
                    resource_version(&reply).ok_or(Failure::Transport("no resourceVersion"))?;
                Ok((revision, acked))
            }
        })
        .await;
        Ok(watchers
            .report("virtual-workspace watch", &plan, &run, args.drain)
            .await)
    };
    let delivery = load::with_server_cpu(Some(started.pid()), phase).await?;
    let gets = if args.get_rate > 0.0 {
        let gadget = format!(
            "{workspace}/{}/apis/{}/v1/namespaces/bench/gadgets/g-0",
            cluster_name(0),
            crds::GROUP
        );
        let plan = Plan::new(args.get_rate, args.duration, None)?;
        let phase = async {
            let run = schedule::drive(&plan, args.drain, |_| {
                let (client, gadget) = (client.clone(), gadget.clone());
                async move { outcome(client.request(Method::GET, &gadget, None).await).map(|_| ()) }
            })
            .await;
            Ok(PhaseReport::of("virtual-workspace get", plan.rate(), &run))
        };
        Some(load::with_server_cpu(Some(started.pid()), phase).await?)
    } else {
        None
    };
    Ok((delivery, gets))
}

impl Table for VwWatchReport {
    fn table(&self) -> String {
        let d = &self.delivery;
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let latency = d.latency;
        let watch = d.watch.as_ref();
        format!(
            "{} consumer clusters bound to one export; {:.0} writes/s asked, {} written\n\
             delivered through one /services/apiexport/.../clusters/* watch: {} of {}, \
             p50 {} ms, p90 {} ms, p99 {} ms, max {} ms\n\
             server CPU per delivered event (writes included): {} us\n{}{}\n",
            self.clusters,
            d.target_rate,
            d.ok,
            watch.map_or(0, |w| w.delivered_events),
            watch.map_or(0, |w| w.expected_events),
            ms(latency.map(|l| l.p50_ms)),
            ms(latency.map(|l| l.p90_ms)),
            ms(latency.map(|l| l.p99_ms)),
            ms(latency.map(|l| l.max_ms)),
            ms(watch.and_then(|w| w.server_cpu_us_per_event)),
            self.gets.as_ref().map_or_else(String::new, |g| {
                let latency = g.latency;
                format!(
                    "GETs through one cluster's virtual workspace: {} of {} at {:.0}/s, \
                     p50 {} ms, p99 {} ms, server CPU {} us per GET\n",
                    g.ok,
                    g.requests,
                    g.target_rate,
                    ms(latency.map(|l| l.p50_ms)),
                    ms(latency.map(|l| l.p99_ms)),
                    ms(g.server_cpu_us_per_request),
                )
            }),
            self.stopped.line(0),
        )
    }
}
