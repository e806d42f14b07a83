//! The load phases: objects in a namespace of their own, driven at a fixed rate.
//!
//! ConfigMaps by default, because every Kubernetes server has them, they have no controller
//! reacting to them and no strategy beyond validation, so the figures measure the request path and
//! the store. `--resource widgets` loads custom resources instead: the phases first install the
//! `widgets.bench.kcp.io` CRD (typed fields, defaults, a CEL rule; see [`crate::crds`]), so the
//! figures include schema validation, pruning, defaulting and CEL. The phases run in a fixed order
//! (create, get, list, paged-list, update, watch) because later ones read what `create` wrote; the
//! namespace is deleted at the end, which also deletes the objects (and the CRD, if installed).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::ValueEnum;
use http::{Method, StatusCode};
use kcp_apimachinery::duration::parse_or_seconds;
use kcp_apimachinery::protobuf;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::client::{Client, ClientError, Media, Reply};
use crate::crds;
use crate::schedule::{self, Failure, Plan, PlanError};
use crate::server;
use crate::stats::{PhaseReport, micros_per, net_micros_per_event};
use crate::watchers::{self, Watchers};

/// A load phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Phase {
    Create,
    Get,
    List,
    /// The same list in pages of `--page-size` (one request is the whole walk).
    PagedList,
    Update,
    Watch,
}

/// What the phases create, read and list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Resource {
    /// core/v1 ConfigMaps.
    Configmaps,
    /// bench.kcp.io/v1 Widgets, a CRD the load installs first and deletes at the end.
    Widgets,
}

/// How hard and how long to load.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Namespace to create, load and delete (default: bench-<random>).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Requests per second, scheduled on a clock (open loop).
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// Rate of the list phase. Each list returns every ConfigMap `create` made (5000, ~2 MB at
    /// the defaults), so the rate of single-object requests would only measure a queue.
    #[arg(long, default_value_t = 5.0)]
    pub list_rate: f64,
    /// Length of each phase (e.g. 10s, 500ms, 1m).
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub duration: Duration,
    /// At most this many requests per phase (whichever of --duration and this is smaller).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Connections to the server (HTTP/2 multiplexes many requests on each).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Speak HTTP/1.1 (one request per connection at a time) instead of HTTP/2.
    #[arg(long)]
    pub http1: bool,
    /// What to load.
    #[arg(long, value_enum, default_value = "configmaps")]
    pub resource: Resource,
    /// Objects per page in the paged-list phase (`limit`, following `continue`).
    #[arg(long, default_value_t = 500)]
    pub page_size: u64,
    /// Which phases to run, comma separated; they always run in the order
    /// create,get,list,paged-list,update,watch.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "create,get,list,update,watch"
    )]
    pub phases: Vec<Phase>,
    /// Watch connections open during the watch phase.
    #[arg(long, default_value_t = 10)]
    pub watchers: usize,
    /// Bytes of data in each ConfigMap.
    #[arg(long, default_value_t = 256)]
    pub payload_bytes: usize,
    /// Speak Kubernetes protobuf in the create, get, list, update and watch phases (bodies and
    /// preferred responses), as client-go's typed clients do; ConfigMaps only (custom resources
    /// have no protobuf encoding: Widgets stay JSON).
    #[arg(long)]
    pub protobuf: bool,
    /// How long a phase waits for outstanding requests (and watch events) after the last is due.
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub drain: Duration,
}

/// Why the load could not run (failed requests inside a phase are figures, not errors).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{what}: the server answered {status}: {body}")]
    Unexpected {
        what: String,
        status: StatusCode,
        body: String,
    },
    #[error("{0} need ConfigMaps to work on: add create to --phases")]
    NeedsCreate(String),
    #[error("{0:?} is not a valid namespace name (lowercase letters, digits, '-', at most 63)")]
    Namespace(String),
    #[error("the list response has no metadata.resourceVersion")]
    NoResourceVersion,
    #[error("{what}: {established} of {expected} CRDs were Established within the time limit")]
    NotEstablished {
        what: String,
        established: u64,
        expected: u64,
    },
}

/// A namespace under load.
pub struct Workload {
    client: Arc<Client>,
    args: LoadArgs,
    namespace: String,
    payload: String,
    /// The CRD `prepare` installed (deleted again by `cleanup`).
    crd: Option<String>,
}

impl Workload {
    /// Creates the namespace.
    pub async fn prepare(client: Arc<Client>, args: LoadArgs) -> Result<Self, LoadError> {
        let reads: Vec<_> = args
            .phases
            .iter()
            .filter(|p| matches!(p, Phase::Get | Phase::Update))
            .map(|p| format!("{p:?}").to_lowercase())
            .collect();
        if !reads.is_empty() && !args.phases.contains(&Phase::Create) {
            return Err(LoadError::NeedsCreate(reads.join(" and ")));
        }
        // Fail on a bad rate before creating anything.
        Plan::new(args.rate, args.duration, args.requests)?;
        Plan::new(args.list_rate, args.duration, args.requests)?;
        let namespace = match &args.namespace {
            Some(ns) if !is_dns_label(ns) => return Err(LoadError::Namespace(ns.clone())),
            Some(ns) => ns.clone(),
            None => format!("bench-{:08x}", rand::random::<u32>()),
        };
        client.warm_up().await?;
        let crd = match args.resource {
            Resource::Configmaps => None,
            Resource::Widgets => Some(crds::install_widgets(&client, args.drain).await?),
        };
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        let reply = client
            .request(Method::POST, "/api/v1/namespaces", Some(to_bytes(&body)))
            .await?;
        check(&format!("creating namespace {namespace}"), reply)?;
        tracing::info!(%namespace, "created namespace");
        let payload = "x".repeat(args.payload_bytes);
        Ok(Self {
            client,
            args,
            namespace,
            payload,
            crd,
        })
    }

    /// Runs the selected phases in order; with the server's pid, also its CPU time per request.
    pub async fn run(&self, server_pid: Option<u32>) -> Result<Vec<PhaseReport>, LoadError> {
        let mut phases = self.args.phases.clone();
        phases.sort_unstable();
        phases.dedup();
        let mut reports = Vec::new();
        let mut created: Arc<Vec<String>> = Arc::new(Vec::new());
        for phase in phases {
            tracing::info!(?phase, "phase starting");
            let mut report = with_server_cpu(server_pid, async {
                Ok(match phase {
                    Phase::Create => {
                        let (report, names) = self.create("bench").await?;
                        created = Arc::new(names);
                        report
                    }
                    Phase::Get => self.get_or_update(Phase::Get, &created).await?,
                    Phase::Update => self.get_or_update(Phase::Update, &created).await?,
                    Phase::List => self.list().await?,
                    Phase::PagedList => self.paged_list().await?,
                    Phase::Watch => self.watch().await?,
                })
            })
            .await?;
            if let Some(watch) = &mut report.watch {
                // The watch phase's writes are creates too: what the create phase cost per
                // write is taken off to leave the fan-out alone.
                let create = reports
                    .iter()
                    .find(|r: &&PhaseReport| r.phase == "create")
                    .and_then(|r| r.server_cpu_us_per_request);
                watch.server_cpu_us_per_event_net = report
                    .server_cpu_us_per_request
                    .zip(create)
                    .and_then(|(total, create)| {
                        net_micros_per_event(total, create, report.ok, watch.delivered_events)
                    });
            }
            tracing::info!(
                ?phase,
                ok = report.ok,
                requests = report.requests,
                "phase done"
            );
            reports.push(report);
        }
        Ok(reports)
    }

    /// Deletes the namespace (and the CRD `prepare` installed) and waits until they are gone.
    pub async fn cleanup(&self) -> Result<(), LoadError> {
        let path = format!("/api/v1/namespaces/{}", self.namespace);
        delete_and_wait(&self.client, &path).await?;
        if let Some(crd) = &self.crd {
            delete_and_wait(&self.client, &crds::crd_path(crd)).await?;
        }
        Ok(())
    }

    fn collection(&self) -> String {
        match self.args.resource {
            Resource::Configmaps => format!("/api/v1/namespaces/{}/configmaps", self.namespace),
            Resource::Widgets => crds::widgets_collection(&self.namespace),
        }
    }

    fn plan(&self, rate: f64) -> Result<Plan, PlanError> {
        Plan::new(rate, self.args.duration, self.args.requests)
    }

    /// The encoding of the phases' requests: protobuf with `--protobuf` for ConfigMaps.
    fn media(&self) -> Media {
        if self.args.protobuf && self.args.resource == Resource::Configmaps {
            Media::Protobuf
        } else {
            Media::Json
        }
    }

    /// The object `name` as created (generation 0) or as the update phase writes it.
    fn object(&self, name: &str, generation: u64) -> Bytes {
        let object = match self.args.resource {
            Resource::Configmaps => json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace},
                "data": {"payload": self.payload, "generation": generation.to_string()},
            }),
            Resource::Widgets => crds::widget(&self.namespace, name, &self.payload, generation),
        };
        match self.media() {
            // A ConfigMap always has an encoding; JSON would only show up as a 400 in the figures.
            Media::Protobuf => protobuf::encode(&object)
                .map(Bytes::from)
                .unwrap_or_else(|_| to_bytes(&object)),
            Media::Json => to_bytes(&object),
        }
    }

    /// Creates `<prefix>-<i>` at the rate; returns the report and the names that were created.
    async fn create(&self, prefix: &str) -> Result<(PhaseReport, Vec<String>), LoadError> {
        let plan = self.plan(self.args.rate)?;
        let run = self
            .drive(&plan, |i| {
                (
                    Method::POST,
                    self.collection(),
                    Some(self.object(&format!("{prefix}-{i}"), 0)),
                )
            })
            .await;
        let names = run
            .samples
            .iter()
            .enumerate()
            .filter(|(_, s)| s.result.is_ok())
            .map(|(i, _)| format!("{prefix}-{i}"))
            .collect();
        Ok((PhaseReport::of("create", plan.rate(), &run), names))
    }

    /// GETs or unconditionally PUTs the created ConfigMaps round-robin.
    async fn get_or_update(
        &self,
        phase: Phase,
        names: &Arc<Vec<String>>,
    ) -> Result<PhaseReport, LoadError> {
        if names.is_empty() {
            return Err(LoadError::NeedsCreate(format!(
                "{phase:?} (create made none)"
            )));
        }
        let plan = self.plan(self.args.rate)?;
        let collection = self.collection();
        let run = self
            .drive(&plan, |i| {
                let name = &names[i as usize % names.len()];
                let path = format!("{collection}/{name}");
                match phase {
                    Phase::Update => (Method::PUT, path, Some(self.object(name, i + 1))),
                    _ => (Method::GET, path, None),
                }
            })
            .await;
        let label = if phase == Phase::Update {
            "update"
        } else {
            "get"
        };
        Ok(PhaseReport::of(label, plan.rate(), &run))
    }

    async fn list(&self) -> Result<PhaseReport, LoadError> {
        let plan = self.plan(self.args.list_rate)?;
        let run = self
            .drive(&plan, |_| (Method::GET, self.collection(), None))
            .await;
        Ok(PhaseReport::of("list", plan.rate(), &run))
    }

    /// Walks the whole collection in pages of `--page-size`; latency is the whole walk.
    async fn paged_list(&self) -> Result<PhaseReport, LoadError> {
        let plan = self.plan(self.args.list_rate)?;
        let page_size = self.args.page_size.max(1);
        let run = schedule::drive(&plan, self.args.drain, |_| {
            let client = self.client.clone();
            let collection = self.collection();
            async move { walk(&client, &collection, page_size).await }
        })
        .await;
        let pages = run
            .samples
            .iter()
            .find_map(|s| s.result.as_ref().ok().copied())
            .unwrap_or_default();
        let label = format!("list limit={page_size} ({pages} pages)");
        Ok(PhaseReport::of(&label, plan.rate(), &run))
    }

    /// Runs `request(i)` on the plan; success is any 2xx, and the response body is returned.
    async fn drive<F>(&self, plan: &Plan, request: F) -> schedule::Run<Bytes>
    where
        F: Fn(u64) -> (Method, String, Option<Bytes>),
    {
        let media = self.media();
        schedule::drive(plan, self.args.drain, |i| {
            let (method, path, body) = request(i);
            let client = self.client.clone();
            async move { outcome(client.request_as(media, method, &path, body).await) }
        })
        .await
    }

    /// Opens the watchers, creates `watch-<i>` at the rate and times each event from the
    /// create's response to its arrival on every watcher.
    async fn watch(&self) -> Result<PhaseReport, LoadError> {
        let plan = self.plan(self.args.rate)?;
        let collection = self.collection();
        let timeout = plan.span() + self.args.drain * 2;
        let watchers = Watchers::open(
            &self.client,
            &collection,
            self.args.watchers,
            timeout,
            watchers::written_revision,
        )
        .await?;
        let media = self.media();
        let run = schedule::drive(&plan, self.args.drain, |i| {
            let client = self.client.clone();
            let (path, body) = (collection.clone(), self.object(&format!("watch-{i}"), 0));
            async move {
                let reply = client.request_as(media, Method::POST, &path, Some(body));
                let reply = outcome(reply.await)?;
                let acked = Instant::now();
                let revision =
                    resource_version(&reply).ok_or(Failure::Transport("no resourceVersion"))?;
                Ok((revision, acked))
            }
        })
        .await;
        Ok(watchers.report("watch", &plan, &run, self.args.drain).await)
    }
}

/// Runs a phase; with the server's pid, adds the server's CPU time per successful request and,
/// for a watch phase, the server's and this client's CPU time per delivered event.
pub async fn with_server_cpu(
    server_pid: Option<u32>,
    phase: impl Future<Output = Result<PhaseReport, LoadError>>,
) -> Result<PhaseReport, LoadError> {
    let client_pid = std::process::id();
    let before = server_pid.and_then(server::cpu_time);
    let client_before = server::cpu_time(client_pid);
    let mut report = phase.await?;
    let server_cpu = match (before, server_pid.and_then(server::cpu_time)) {
        (Some(before), Some(after)) => after.checked_sub(before),
        _ => None,
    };
    let client_cpu = match (client_before, server::cpu_time(client_pid)) {
        (Some(before), Some(after)) => after.checked_sub(before),
        _ => None,
    };
    report.server_cpu_us_per_request = server_cpu.and_then(|cpu| micros_per(cpu, report.ok));
    if let Some(watch) = &mut report.watch {
        let delivered = watch.delivered_events;
        watch.server_cpu_us_per_event = server_cpu.and_then(|cpu| micros_per(cpu, delivered));
        watch.client_cpu_us_per_event = client_cpu.and_then(|cpu| micros_per(cpu, delivered));
    }
    Ok(report)
}

/// Lists `collection` page by page (at most [`MAX_PAGES`]); returns the number of pages.
async fn walk(client: &Client, collection: &str, page_size: u64) -> Result<u64, Failure> {
    let mut token: Option<String> = None;
    for page in 1..=MAX_PAGES {
        let path = match &token {
            None => format!("{collection}?limit={page_size}"),
            Some(token) => format!("{collection}?limit={page_size}&continue={token}"),
        };
        let body = outcome(client.request(Method::GET, &path, None).await)?;
        token = parse_json(&body).as_ref().and_then(continue_token);
        if token.is_none() {
            return Ok(page);
        }
    }
    Err(Failure::Transport("too many pages"))
}

/// The most pages one paged list follows.
const MAX_PAGES: u64 = 100_000;

/// The continue token of a list page, when there are more pages.
fn continue_token(list: &Value) -> Option<String> {
    list.pointer("/metadata/continue")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(percent_encode)
}

/// Percent-encodes everything but unreserved characters (continue tokens are base64).
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Deletes `path` and waits (up to a minute) until it is gone.
pub async fn delete_and_wait(client: &Client, path: &str) -> Result<(), LoadError> {
    let reply = client.request(Method::DELETE, path, None).await?;
    if reply.status == StatusCode::NOT_FOUND {
        return Ok(());
    }
    check(&format!("deleting {path}"), reply)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let reply = client.request(Method::GET, path, None).await?;
        if reply.status == StatusCode::NOT_FOUND {
            tracing::info!(%path, "deleted");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::warn!(%path, "still there 60s after its deletion");
    Ok(())
}

pub fn outcome(reply: Result<Reply, ClientError>) -> Result<Bytes, Failure> {
    match reply {
        Ok(reply) if reply.status.is_success() => Ok(reply.body),
        Ok(reply) => Err(Failure::Status(reply.status.as_u16())),
        Err(error) => Err(Failure::Transport(error.kind())),
    }
}

/// The body of a 2xx reply, or an error naming what was being done.
pub fn check(what: &str, reply: Reply) -> Result<Bytes, LoadError> {
    if reply.status.is_success() {
        Ok(reply.body)
    } else {
        Err(LoadError::Unexpected {
            what: what.to_owned(),
            status: reply.status,
            body: String::from_utf8_lossy(&reply.body).into_owned(),
        })
    }
}

/// A response body as JSON: JSON as is, Kubernetes protobuf (`k8s\0`...) decoded.
fn parse_json(body: &[u8]) -> Option<Value> {
    if body.starts_with(b"k8s\0") {
        return protobuf::decode(body).ok();
    }
    serde_json::from_slice(body).ok()
}

pub fn resource_version(body: &[u8]) -> Option<String> {
    parse_json(body)?
        .pointer("/metadata/resourceVersion")?
        .as_str()
        .map(str::to_owned)
}

pub fn to_bytes(value: &Value) -> Bytes {
    Bytes::from(value.to_string())
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names() {
        assert!(is_dns_label("bench-0a1b"));
        for bad in ["", "Bench", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn continue_tokens() {
        let list = json!({"metadata": {"continue": "eyJ2Ijo1fQ=="}});
        assert_eq!(continue_token(&list), Some("eyJ2Ijo1fQ%3D%3D".into()));
        assert_eq!(continue_token(&json!({"metadata": {"continue": ""}})), None);
        assert_eq!(continue_token(&json!({"metadata": {}})), None);
        assert_eq!(percent_encode("a-Z_0.~+/"), "a-Z_0.~%2B%2F");
    }

    #[test]
    fn list_resource_version() {
        let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"42"},"items":[]}"#;
        assert_eq!(resource_version(body), Some("42".into()));
        assert_eq!(resource_version(b"{}"), None);
        assert_eq!(resource_version(b"not json"), None);
    }
}
