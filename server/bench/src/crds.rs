//! CustomResourceDefinition figures (issue 4): time to `Established`, and memory per CRD.
//!
//! - **Established.** N distinct CRDs are created at a fixed rate in a logical cluster of their
//!   own, with a watch on the CRDs open from before the first create; each CRD's latency runs from
//!   its create's response to the first watch event showing `Established=True` (the same
//!   ack-to-event machinery as the `watch` load phase, [`crate::watchers`]).
//! - **Custom resources** are the ordinary load phases with `--resource widgets` ([`widget`] and
//!   [`widget_crd`]: typed fields, an enum, defaults, a pattern, a date-time and a CEL rule).
//! - **Memory.** For each number of logical clusters M, a fresh server: RSS idle, after touching M
//!   empty clusters (one namespace each), after installing K CRDs into each (and waiting until all
//!   are Established), and optionally after fetching every cluster's OpenAPI v2. The CRDs are
//!   either distinct per cluster (their schemas differ in a description, so every cluster has its
//!   own API set) or the same in every cluster (one shared API set).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::client::{Client, ClientError, Protocol};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{self, LoadError, check, outcome, to_bytes};
use crate::schedule::{self, Failure, Plan};
use crate::server::{Memory, Server, ServerArgs, ServerError};
use crate::stats::PhaseReport;
use crate::watchers::Watchers;

/// The API group of every CRD this tool installs.
pub const GROUP: &str = "bench.kcp.io";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Options of the `crds` command (besides the server and load options).
#[derive(Debug, Clone, clap::Args)]
pub struct CrdArgs {
    /// Distinct CRDs to create for the time-to-Established figure (0 skips it).
    #[arg(long, default_value_t = 50)]
    pub crds: u64,
    /// CRD creates per second (open loop), for Established and for the memory installs.
    #[arg(long, default_value_t = 10.0)]
    pub crd_rate: f64,
    /// Logical cluster counts M of the memory figure, comma separated (a fresh server for each).
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    pub memory_clusters: Vec<u64>,
    /// CRDs K installed into every logical cluster for the memory figure.
    #[arg(long, default_value_t = 10)]
    pub memory_crds: u64,
    /// Namespace and CRD creates per second while setting up the memory figure.
    #[arg(long, default_value_t = 100.0)]
    pub memory_rate: f64,
    /// Also fetch every cluster's OpenAPI v2 (built lazily per API set) and read RSS again.
    #[arg(long)]
    pub openapi: bool,
    /// Skip the memory figure.
    #[arg(long)]
    pub skip_memory: bool,
}

/// Why the CRD figures could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
}

/// The path of a CRD (below a cluster prefix).
pub fn crd_path(name: &str) -> String {
    format!("{CRDS}/{name}")
}

/// The collection of Widgets in a namespace.
pub fn widgets_collection(namespace: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{namespace}/widgets")
}

/// A namespaced CRD `<plural>.bench.kcp.io` with a realistic schema: an enum, integers with
/// bounds and defaults, a patterned string with a default, a date-time, a string map, a status
/// subresource, a printer column and a CEL rule across two fields. `description` only changes
/// the schema text (two CRDs that differ in it differ as API sets).
pub fn widget_crd(plural: &str, kind: &str, description: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.to_lowercase(),
                "kind": kind,
                "listKind": format!("{kind}List"),
            },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": description,
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "x-kubernetes-validations": [{
                                "rule": "self.minReplicas <= self.replicas",
                                "message": "minReplicas must not exceed replicas",
                            }],
                            "properties": {
                                "size": {"type": "string", "enum": ["small", "medium", "large"]},
                                "replicas": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 1},
                                "minReplicas": {"type": "integer", "minimum": 0, "default": 0},
                                "color": {"type": "string", "pattern": "^[a-z]+$", "default": "blue"},
                                "owner": {"type": "string", "maxLength": 63},
                                "created": {"type": "string", "format": "date-time"},
                                "payload": {"type": "string"},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            },
                        },
                        "status": {
                            "type": "object",
                            "properties": {"ready": {"type": "boolean"}},
                        },
                    },
                }},
            }],
        },
    })
}

/// A Widget (of [`widget_crd`]`("widgets", "Widget", ..)`) as created (generation 0) or updated.
pub fn widget(namespace: &str, name: &str, payload: &str, generation: u64) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "size": "medium",
            "replicas": 3,
            "owner": "kcp-bench",
            "created": "2026-01-01T00:00:00Z",
            "payload": payload,
            "labels": {"generation": generation.to_string()},
        },
    })
}

/// The key of a CRD event (a line of the watch) once it shows `Established=True`:
/// `<logical cluster>/<name>`.
pub fn established_key(line: &[u8]) -> Option<String> {
    let event: Value = serde_json::from_slice(line).ok()?;
    if !matches!(event["type"].as_str(), Some("ADDED" | "MODIFIED")) {
        return None;
    }
    let crd = &event["object"];
    let established = crd
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    if !established {
        return None;
    }
    let cluster = crd
        .pointer("/metadata/annotations/kcp.io~1cluster")?
        .as_str()?;
    let name = crd.pointer("/metadata/name")?.as_str()?;
    Some(format!("{cluster}/{name}"))
}

/// One CRD (or other object) to create.
pub(crate) struct Definition {
    /// Prefix of the logical cluster (`/clusters/<name>`, or empty for the client's own).
    pub cluster_path: String,
    /// What the watch's key function will report for it once it is ready.
    pub key: String,
    pub body: Bytes,
}

/// Creates `crds` at `rate` with a watch on `watch_collection` open, and reports create-response
/// to `Established=True` latencies.
async fn install(
    client: &Arc<Client>,
    watch_collection: &str,
    crds: Vec<Definition>,
    rate: f64,
    drain: Duration,
) -> Result<PhaseReport, LoadError> {
    let ready = Readiness {
        collection: CRDS,
        key: established_key,
        phase: "established",
    };
    create_until_ready(client, watch_collection, crds, &ready, rate, drain).await
}

/// What makes created objects ready: the collection they are created in (below the cluster
/// prefix) and the watch event key that says one is.
pub(crate) struct Readiness {
    pub collection: &'static str,
    pub key: fn(&[u8]) -> Option<String>,
    pub phase: &'static str,
}

/// Creates `objects` at `rate` with a watch on `watch_collection` open, and reports
/// create-response to ready latencies.
pub(crate) async fn create_until_ready(
    client: &Arc<Client>,
    watch_collection: &str,
    objects: Vec<Definition>,
    ready: &Readiness,
    rate: f64,
    drain: Duration,
) -> Result<PhaseReport, LoadError> {
    let objects = Arc::new(objects);
    let plan = Plan::exactly(rate, objects.len() as u64)?;
    let watchers = Watchers::open(
        client,
        watch_collection,
        1,
        plan.span() + drain * 2,
        ready.key,
    )
    .await?;
    let collection = ready.collection;
    let run = schedule::drive(&plan, drain, |i| {
        let (client, objects) = (client.clone(), objects.clone());
        async move {
            let object = objects
                .get(i as usize)
                .ok_or(Failure::Transport("no such object"))?;
            let path = format!("{}{collection}", object.cluster_path);
            outcome(
                client
                    .request(Method::POST, &path, Some(object.body.clone()))
                    .await,
            )?;
            Ok((object.key.clone(), Instant::now()))
        }
    })
    .await;
    Ok(watchers.report(ready.phase, &plan, &run, drain).await)
}

/// Fails unless every CRD (object) of the report was created and seen Established (ready).
pub(crate) fn all_established(what: &str, report: &PhaseReport) -> Result<(), LoadError> {
    let established = report.watch.as_ref().map_or(0, |w| w.delivered_events);
    if report.ok == report.requests && established == report.requests {
        Ok(())
    } else {
        Err(LoadError::NotEstablished {
            what: what.to_owned(),
            established,
            expected: report.requests,
        })
    }
}

/// Installs the Widget CRD for `--resource widgets` and waits until it is Established; returns its
/// name.
pub async fn install_widgets(client: &Arc<Client>, drain: Duration) -> Result<String, LoadError> {
    let crd = widget_crd("widgets", "Widget", "kcp-bench widgets");
    let name = format!("widgets.{GROUP}");
    let cluster = target_cluster(client);
    let report = install(
        client,
        CRDS,
        vec![Definition {
            cluster_path: String::new(),
            key: format!("{cluster}/{name}"),
            body: to_bytes(&crd),
        }],
        1.0,
        drain,
    )
    .await?;
    all_established("installing the Widget CRD", &report)?;
    tracing::info!(%name, "CRD established");
    Ok(name)
}

/// The logical cluster a client's kubeconfig URL points at (`root` without a `/clusters/` prefix).
fn target_cluster(client: &Client) -> String {
    cluster_of_prefix(&client.target().path_prefix)
}

fn cluster_of_prefix(prefix: &str) -> String {
    prefix
        .strip_prefix("/clusters/")
        .filter(|c| !c.is_empty() && !c.contains('/'))
        .unwrap_or("root")
        .to_owned()
}

/// The time-to-Established phase, in logical cluster `bench-established` of the server `base`
/// (a kubeconfig target without a cluster prefix) points at; deletes its CRDs afterwards.
pub async fn established(
    base: Target,
    args: &CrdArgs,
    drain: Duration,
    server_pid: Option<u32>,
) -> Result<PhaseReport, LoadError> {
    const CLUSTER: &str = "bench-established";
    let client = Arc::new(Client::new(base, Protocol::Http2, 4)?);
    client.warm_up().await?;
    let cluster_path = format!("/clusters/{CLUSTER}");
    let definitions = (0..args.crds)
        .map(|i| {
            let (plural, kind) = distinct_names(i);
            let crd = widget_crd(&plural, &kind, "kcp-bench time to Established");
            Definition {
                cluster_path: cluster_path.clone(),
                key: format!("{CLUSTER}/{plural}.{GROUP}"),
                body: to_bytes(&crd),
            }
        })
        .collect();
    let report = load::with_server_cpu(
        server_pid,
        install(
            &client,
            &format!("{cluster_path}{CRDS}"),
            definitions,
            args.crd_rate,
            drain,
        ),
    )
    .await;
    for i in 0..args.crds {
        let (plural, _) = distinct_names(i);
        let path = format!("{cluster_path}{}", crd_path(&format!("{plural}.{GROUP}")));
        let reply = client.request(Method::DELETE, &path, None).await?;
        if !reply.status.is_success() && reply.status != http::StatusCode::NOT_FOUND {
            check(&format!("deleting {path}"), reply)?;
        }
    }
    report
}

/// Plural and kind of the i-th distinct CRD.
fn distinct_names(i: u64) -> (String, String) {
    (format!("gadgets{i}"), format!("Gadget{i}"))
}

/// Whether every logical cluster gets its own CRDs or all share the same ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sharing {
    /// Schemas differ per cluster: one API set per cluster.
    Distinct,
    /// The same CRDs everywhere: one API set for all.
    Shared,
}

/// One memory scenario: K CRDs in each of M logical clusters of a fresh server.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    pub sharing: Sharing,
    pub clusters: u64,
    pub crds_per_cluster: u64,
    pub idle: Memory,
    /// After one namespace in each of the M clusters.
    pub empty_clusters: Memory,
    /// After the K×M CRDs are Established (and the server idled again).
    pub with_crds: Memory,
    /// After fetching every cluster's OpenAPI v2 (with `--openapi`).
    pub with_openapi: Option<Memory>,
    /// First CRD create to last `Established`.
    pub install_s: f64,
    /// Create response to Established, over all K×M CRDs.
    pub established: PhaseReport,
    pub costs: Costs,
}

/// RSS deltas per unit, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Costs {
    /// (empty clusters − idle) / M.
    pub per_empty_cluster_kib: f64,
    /// (with CRDs − empty clusters) / (K × M).
    pub per_crd_per_cluster_kib: f64,
    /// (with CRDs − empty clusters) / M.
    pub crds_per_cluster_kib: f64,
    /// (with OpenAPI − with CRDs) / M.
    pub openapi_per_cluster_kib: Option<f64>,
}

impl Costs {
    pub fn of(
        clusters: u64,
        crds_per_cluster: u64,
        idle: Memory,
        empty: Memory,
        with_crds: Memory,
        with_openapi: Option<Memory>,
    ) -> Costs {
        let kib = |after: Memory, before: Memory, units: u64| {
            (after.rss_mib - before.rss_mib) * 1024.0 / units.max(1) as f64
        };
        Costs {
            per_empty_cluster_kib: kib(empty, idle, clusters),
            per_crd_per_cluster_kib: kib(with_crds, empty, clusters * crds_per_cluster),
            crds_per_cluster_kib: kib(with_crds, empty, clusters),
            openapi_per_cluster_kib: with_openapi.map(|m| kib(m, with_crds, clusters)),
        }
    }
}

/// The scenarios: every M with distinct CRDs, and every M > 1 with shared ones.
pub fn scenarios(clusters: &[u64]) -> Vec<(Sharing, u64)> {
    let mut out = Vec::new();
    for &m in clusters.iter().filter(|&&m| m > 0) {
        out.push((Sharing::Distinct, m));
        if m > 1 {
            out.push((Sharing::Shared, m));
        }
    }
    out
}

/// Runs every memory scenario, each on a fresh server.
pub async fn memory(
    server: &ServerArgs,
    args: &CrdArgs,
    drain: Duration,
) -> Result<Vec<MemoryRow>, CrdError> {
    let mut rows = Vec::new();
    for (sharing, clusters) in scenarios(&args.memory_clusters) {
        tracing::info!(?sharing, clusters, "memory scenario");
        let started = Server::start(server).await?;
        let row = memory_scenario(&started, server, args, sharing, clusters, drain).await;
        started.stop().await?;
        rows.push(row?);
    }
    Ok(rows)
}

async fn memory_scenario(
    started: &Server,
    server: &ServerArgs,
    args: &CrdArgs,
    sharing: Sharing,
    clusters: u64,
    drain: Duration,
) -> Result<MemoryRow, CrdError> {
    let settle = Duration::from_secs(server.idle_seconds);
    let client = Arc::new(Client::new(
        Target::from_file(&started.kubeconfig, Some("base"))?,
        Protocol::Http2,
        4,
    )?);
    client.warm_up().await?;
    tokio::time::sleep(settle).await;
    let idle = started.memory()?;

    touch_clusters(&client, clusters, args.memory_rate, drain).await?;
    tokio::time::sleep(settle).await;
    let empty_clusters = started.memory()?;

    let k = args.memory_crds;
    let definitions = (0..clusters)
        .flat_map(|j| (0..k).map(move |i| (j, i)))
        .map(|(j, i)| {
            let cluster = cluster_name(j);
            let (plural, kind) = distinct_names(i);
            let description = match sharing {
                Sharing::Distinct => format!("kcp-bench memory, cluster {cluster}"),
                Sharing::Shared => "kcp-bench memory".to_owned(),
            };
            Definition {
                cluster_path: format!("/clusters/{cluster}"),
                key: format!("{cluster}/{plural}.{GROUP}"),
                body: to_bytes(&widget_crd(&plural, &kind, &description)),
            }
        })
        .collect();
    let began = Instant::now();
    let established = load::with_server_cpu(
        Some(started.pid()),
        install(
            &client,
            &format!("/clusters/*{CRDS}"),
            definitions,
            args.memory_rate,
            drain,
        ),
    )
    .await?;
    let install_s = began.elapsed().as_secs_f64();
    all_established("installing the memory CRDs", &established)?;
    tokio::time::sleep(settle).await;
    let with_crds = started.memory()?;

    let with_openapi = if args.openapi {
        for j in 0..clusters {
            let path = format!("/clusters/{}/openapi/v2", cluster_name(j));
            check(
                &format!("fetching {path}"),
                client.request(Method::GET, &path, None).await?,
            )?;
        }
        tokio::time::sleep(settle).await;
        Some(started.memory()?)
    } else {
        None
    };
    Ok(MemoryRow {
        sharing,
        clusters,
        crds_per_cluster: k,
        idle,
        empty_clusters,
        with_crds,
        with_openapi,
        install_s,
        costs: Costs::of(clusters, k, idle, empty_clusters, with_crds, with_openapi),
        established,
    })
}

/// Creates namespace `bench` in logical clusters `bench-0` .. `bench-<count - 1>` at `rate`, so
/// each exists (a logical cluster is made by its first object).
pub(crate) async fn touch_clusters(
    client: &Arc<Client>,
    count: u64,
    rate: f64,
    drain: Duration,
) -> Result<(), LoadError> {
    let plan = Plan::exactly(rate, count)?;
    let run = schedule::drive(&plan, drain, |j| {
        let client = client.clone();
        let body = to_bytes(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
        );
        async move {
            let path = format!("/clusters/{}/api/v1/namespaces", cluster_name(j));
            outcome(client.request(Method::POST, &path, Some(body)).await)
        }
    })
    .await;
    let namespaces = PhaseReport::of("namespaces", plan.rate(), &run);
    if namespaces.ok != count {
        return Err(LoadError::Unexpected {
            what: "creating a namespace in every cluster".into(),
            status: http::StatusCode::INTERNAL_SERVER_ERROR,
            body: format!("{:?}", namespaces.errors),
        });
    }
    Ok(())
}

pub(crate) fn cluster_name(j: u64) -> String {
    format!("bench-{j}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn established_only_with_the_condition() {
        let event = |kind, status| {
            json!({"type": kind, "object": {"metadata": {"name": "a.bench.kcp.io",
                "annotations": {"kcp.io/cluster": "lc"}},
                "status": {"conditions": [
                    {"type": "NamesAccepted", "status": "True"},
                    {"type": "Established", "status": status}]}}})
            .to_string()
            .into_bytes()
        };
        assert_eq!(
            established_key(&event("MODIFIED", "True")),
            Some("lc/a.bench.kcp.io".into())
        );
        assert_eq!(established_key(&event("MODIFIED", "False")), None);
        assert_eq!(established_key(&event("DELETED", "True")), None);
        assert_eq!(
            established_key(
                json!({"type": "ADDED", "object": {"metadata": {"name": "a"}}})
                    .to_string()
                    .as_bytes()
            ),
            None
        );
    }

    #[test]
    fn crds_differ_only_where_asked() {
        let a = widget_crd("gadgets1", "Gadget1", "x");
        assert_eq!(a["metadata"]["name"], "gadgets1.bench.kcp.io");
        assert_eq!(a["spec"]["names"]["listKind"], "Gadget1List");
        assert_eq!(a["spec"]["names"]["singular"], "gadget1");
        let b = widget_crd("gadgets1", "Gadget1", "y");
        assert_ne!(a["spec"], b["spec"]);
        assert_eq!(a["spec"]["names"], b["spec"]["names"]);
        assert_eq!(distinct_names(3), ("gadgets3".into(), "Gadget3".into()));
    }

    #[test]
    fn widgets_fit_their_schema() {
        let w = widget("ns", "w-1", "xx", 2);
        assert_eq!(w["apiVersion"], "bench.kcp.io/v1");
        assert_eq!(w["spec"]["labels"]["generation"], "2");
        let crd = widget_crd("widgets", "Widget", "");
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        for field in w["spec"].as_object().into_iter().flat_map(|m| m.keys()) {
            assert!(spec["properties"].get(field).is_some(), "{field}");
        }
        assert_eq!(
            widgets_collection("ns"),
            "/apis/bench.kcp.io/v1/namespaces/ns/widgets"
        );
    }

    #[test]
    fn cluster_prefixes() {
        assert_eq!(cluster_of_prefix("/clusters/root"), "root");
        assert_eq!(cluster_of_prefix("/clusters/team-a"), "team-a");
        assert_eq!(cluster_of_prefix(""), "root");
        assert_eq!(cluster_of_prefix("/clusters/a/b"), "root");
    }

    #[test]
    fn costs_per_unit() {
        let m = |rss_mib| Memory {
            rss_mib,
            peak_rss_mib: rss_mib,
        };
        let costs = Costs::of(10, 10, m(16.0), m(17.0), m(27.0), Some(m(47.0)));
        assert_eq!(costs.per_empty_cluster_kib, 102.4);
        assert_eq!(costs.per_crd_per_cluster_kib, 102.4);
        assert_eq!(costs.crds_per_cluster_kib, 1024.0);
        assert_eq!(costs.openapi_per_cluster_kib, Some(2048.0));
    }

    #[test]
    fn scenario_list() {
        assert_eq!(
            scenarios(&[1, 10, 0]),
            vec![
                (Sharing::Distinct, 1),
                (Sharing::Distinct, 10),
                (Sharing::Shared, 10)
            ]
        );
    }
}
