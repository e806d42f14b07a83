//! `apibindings` (issue 21, "1,000 workspaces bound to one export: memory per binding <= 10 KiB
//! beyond an empty workspace, bind -> Bound p99 <= 100 ms").
//!
//! It starts a server, exports one APIResourceSchema from logical cluster `bench-provider`, makes
//! `--clusters` logical clusters exist (one namespace each, as the `crds` memory figure does) and
//! reads RSS, then creates one APIBinding to the export in each at `--rate` with a watch on every
//! cluster's APIBindings open, timing each from its create's response to the first event showing
//! `phase: Bound` (the `crds` ack-to-event machinery), and reads RSS again once all are Bound. The
//! difference per binding is what a bound workspace costs beyond an empty one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde::Serialize;
use serde_json::{Value, json};

use crate::client::{Client, Protocol};
use crate::crds::{self, Definition, Readiness, cluster_name};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{LoadError, check, to_bytes};
use crate::report::Table;
use crate::server::{Memory, Server, ServerArgs, ServerError, Stopped};
use crate::stats::PhaseReport;

pub(crate) const PROVIDER: &str = "bench-provider";
const APIS_V1ALPHA1: &str = "/apis/apis.kcp.io/v1alpha1";
const APIS: &str = "/apis/apis.kcp.io/v1alpha2";
const BINDINGS: &str = "/apis/apis.kcp.io/v1alpha2/apibindings";
const SCHEMA: &str = "v1.gadgets.bench.kcp.io";

/// Options of the `apibindings` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct ApiBindingsArgs {
    /// Logical clusters, each binding the export once.
    #[arg(long, default_value_t = 1000)]
    pub clusters: u64,
    /// Namespace and APIBinding creates per second (open loop).
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// How long the last binding may take to be Bound.
    #[arg(long, default_value = "10", value_parser = kcp_apimachinery::duration::parse_or_seconds)]
    pub drain: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiBindingsError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("the export got no identity hash within {0:?}")]
    NoIdentity(Duration),
}

/// What `apibindings` prints.
#[derive(Debug, Serialize)]
pub struct ApiBindingsReport {
    pub clusters: u64,
    pub idle: Memory,
    pub empty_clusters: Memory,
    pub with_bindings: Memory,
    /// (with_bindings - empty_clusters) / clusters.
    pub kib_per_binding: f64,
    /// Create response -> watch event with `phase: Bound`.
    pub bound: PhaseReport,
    pub startup_ms: f64,
    pub stopped: Stopped,
}

/// Starts a server, measures, stops it.
pub async fn run(
    server: &ServerArgs,
    args: &ApiBindingsArgs,
) -> Result<ApiBindingsReport, ApiBindingsError> {
    let started = Server::start(server).await?;
    let measured = measure(&started, server, args).await;
    let startup_ms = started.startup.as_secs_f64() * 1e3;
    let stopped = started.stop().await?;
    let (idle, empty_clusters, with_bindings, bound) = measured?;
    let kib_per_binding =
        (with_bindings.rss_mib - empty_clusters.rss_mib) * 1024.0 / args.clusters.max(1) as f64;
    Ok(ApiBindingsReport {
        clusters: args.clusters,
        idle,
        empty_clusters,
        with_bindings,
        kib_per_binding,
        bound,
        startup_ms,
        stopped,
    })
}

async fn measure(
    started: &Server,
    server: &ServerArgs,
    args: &ApiBindingsArgs,
) -> Result<(Memory, Memory, Memory, PhaseReport), ApiBindingsError> {
    let settle = Duration::from_secs(server.idle_seconds);
    let client = connect(started).await?;
    export(&client).await?;
    tokio::time::sleep(settle).await;
    let idle = started.memory()?;
    crds::touch_clusters(&client, args.clusters, args.rate, args.drain).await?;
    tokio::time::sleep(settle).await;
    let empty_clusters = started.memory()?;
    let bound = bind_all(&client, args.clusters, args.rate, args.drain).await?;
    tokio::time::sleep(settle).await;
    let with_bindings = started.memory()?;
    Ok((idle, empty_clusters, with_bindings, bound))
}

/// A warmed-up HTTP/2 client of the started server as its admin.
pub(crate) async fn connect(started: &Server) -> Result<Arc<Client>, ApiBindingsError> {
    let client = Arc::new(
        Client::new(
            Target::from_file(&started.kubeconfig, Some("base"))?,
            Protocol::Http2,
            4,
        )
        .map_err(LoadError::from)?,
    );
    client.warm_up().await.map_err(LoadError::from)?;
    Ok(client)
}

/// Binds the export in the first `clusters` logical clusters at `rate`, timing each binding from
/// its create's response to the watch event showing it Bound; every one must be Bound.
pub(crate) async fn bind_all(
    client: &Arc<Client>,
    clusters: u64,
    rate: f64,
    drain: Duration,
) -> Result<PhaseReport, ApiBindingsError> {
    let bindings = (0..clusters)
        .map(|j| {
            let cluster = cluster_name(j);
            Definition {
                cluster_path: format!("/clusters/{cluster}"),
                key: format!("{cluster}/gadgets"),
                body: to_bytes(&json!({
                    "apiVersion": "apis.kcp.io/v1alpha2",
                    "kind": "APIBinding",
                    "metadata": {"name": "gadgets"},
                    "spec": {"reference": {"export": {"path": PROVIDER, "name": "gadgets"}}},
                })),
            }
        })
        .collect();
    let ready = Readiness {
        collection: BINDINGS,
        key: bound_key,
        phase: "bound",
    };
    let bound = crds::create_until_ready(
        client,
        &format!("/clusters/*{BINDINGS}"),
        bindings,
        &ready,
        rate,
        drain,
    )
    .await?;
    crds::all_established("binding every cluster", &bound)?;
    Ok(bound)
}

/// Creates the schema and the export in the provider cluster and waits for the export's identity.
pub(crate) async fn export(client: &Arc<Client>) -> Result<(), ApiBindingsError> {
    let provider = format!("/clusters/{PROVIDER}");
    let schema = json!({
        "apiVersion": "apis.kcp.io/v1alpha1",
        "kind": "APIResourceSchema",
        "metadata": {"name": SCHEMA},
        "spec": {
            "group": crds::GROUP,
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"size": {"type": "integer", "default": 1}}}}}}],
        },
    });
    let export = json!({
        "apiVersion": "apis.kcp.io/v1alpha2",
        "kind": "APIExport",
        "metadata": {"name": "gadgets"},
        "spec": {"resources": [{"group": crds::GROUP, "name": "gadgets", "schema": SCHEMA, "storage": {"crd": {}}}]},
    });
    for (collection, body) in [
        (format!("{APIS_V1ALPHA1}/apiresourceschemas"), schema),
        (format!("{APIS}/apiexports"), export),
    ] {
        let path = format!("{provider}{collection}");
        check(
            &format!("creating {path}"),
            client
                .request(Method::POST, &path, Some(to_bytes(&body)))
                .await
                .map_err(LoadError::from)?,
        )?;
    }
    const WAIT: Duration = Duration::from_secs(30);
    let deadline = tokio::time::Instant::now() + WAIT;
    let path = format!("{provider}{APIS}/apiexports/gadgets");
    while tokio::time::Instant::now() < deadline {
        let body: Bytes = check(
            &format!("reading {path}"),
            client
                .request(Method::GET, &path, None)
                .await
                .map_err(LoadError::from)?,
        )?;
        let export: Value = serde_json::from_slice(&body).unwrap_or_default();
        if export
            .pointer("/status/identityHash")
            .and_then(Value::as_str)
            .is_some_and(|h| !h.is_empty())
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(ApiBindingsError::NoIdentity(WAIT))
}

/// The key of an APIBinding event once it shows `phase: Bound`: `<logical cluster>/<resource>`.
fn bound_key(line: &[u8]) -> Option<String> {
    let event: Value = serde_json::from_slice(line).ok()?;
    let binding = &event["object"];
    if binding.pointer("/status/phase")? != "Bound" {
        return None;
    }
    let cluster = binding
        .pointer("/metadata/annotations/kcp.io~1cluster")?
        .as_str()?;
    Some(format!(
        "{cluster}/{}",
        binding.pointer("/metadata/name")?.as_str()?
    ))
}

impl Table for ApiBindingsReport {
    fn table(&self) -> String {
        let latency = self.bound.latency;
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        format!(
            "{} logical clusters bound to one export; start to /readyz {:.0} ms\n\
             RSS idle {:.1} MiB, {} empty clusters {:.1} MiB, all bound {:.1} MiB: {:.2} KiB per binding\n\
             bind -> Bound: {} of {} bound, p50 {} ms, p90 {} ms, p99 {} ms, max {} ms\n{}\n",
            self.clusters,
            self.startup_ms,
            self.idle.rss_mib,
            self.clusters,
            self.empty_clusters.rss_mib,
            self.with_bindings.rss_mib,
            self.kib_per_binding,
            self.bound.watch.as_ref().map_or(0, |w| w.delivered_events),
            self.bound.requests,
            ms(latency.map(|l| l.p50_ms)),
            ms(latency.map(|l| l.p90_ms)),
            ms(latency.map(|l| l.p99_ms)),
            ms(latency.map(|l| l.max_ms)),
            self.stopped.line(0),
        )
    }
}
