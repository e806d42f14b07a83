//! The load phases: ConfigMaps in a namespace of their own, driven at a fixed rate.
//!
//! ConfigMaps because every Kubernetes server has them, they have no controller reacting to them
//! and no strategy beyond validation, so the figures measure the request path and the store. The
//! phases run in a fixed order (create, get, list, update, watch) because later ones read what
//! `create` wrote; the namespace is deleted at the end, which also deletes the ConfigMaps.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clap::ValueEnum;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Client, ClientError, Reply};
use crate::schedule::{self, Failure, Plan, PlanError};
use crate::server;
use crate::stats::{self, Latency, PhaseReport, WatchReport};

/// A load phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Phase {
    Create,
    Get,
    List,
    Update,
    Watch,
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
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
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
    /// Which phases to run, comma separated; they always run in the order create,get,list,update,watch.
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
    /// How long a phase waits for outstanding requests (and watch events) after the last is due.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
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
}

/// Parses `10s`, `250ms`, `2m`, `1.5s` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 10s, 500ms or 2m"))?;
    let seconds = match unit {
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?} (use ms, s or m)"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// A namespace under load.
pub struct Workload {
    client: Arc<Client>,
    args: LoadArgs,
    namespace: String,
    payload: String,
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
            let cpu_before = server_pid.and_then(server::cpu_time);
            let mut report = match phase {
                Phase::Create => {
                    let (report, names) = self.create("bench").await?;
                    created = Arc::new(names);
                    report
                }
                Phase::Get => self.get_or_update(Phase::Get, &created).await?,
                Phase::Update => self.get_or_update(Phase::Update, &created).await?,
                Phase::List => self.list().await?,
                Phase::Watch => self.watch().await?,
            };
            if let (Some(before), Some(after)) = (cpu_before, server_pid.and_then(server::cpu_time))
                && report.ok > 0
            {
                report.server_cpu_us_per_request =
                    Some((after - before).as_secs_f64() * 1e6 / report.ok as f64);
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

    /// Deletes the namespace and waits (up to a minute) until it is gone.
    pub async fn cleanup(&self) -> Result<(), LoadError> {
        let path = format!("/api/v1/namespaces/{}", self.namespace);
        let reply = self.client.request(Method::DELETE, &path, None).await?;
        check(&format!("deleting namespace {}", self.namespace), reply)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let reply = self.client.request(Method::GET, &path, None).await?;
            if reply.status == StatusCode::NOT_FOUND {
                tracing::info!(namespace = %self.namespace, "namespace deleted");
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::warn!(namespace = %self.namespace, "namespace still terminating after 60s");
        Ok(())
    }

    fn collection(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.namespace)
    }

    fn plan(&self, rate: f64) -> Result<Plan, PlanError> {
        Plan::new(rate, self.args.duration, self.args.requests)
    }

    fn configmap(&self, name: &str, generation: u64) -> Bytes {
        to_bytes(&json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace},
            "data": {"payload": self.payload, "generation": generation.to_string()},
        }))
    }

    /// Creates `<prefix>-<i>` at the rate; returns the report and the names that were created.
    async fn create(&self, prefix: &str) -> Result<(PhaseReport, Vec<String>), LoadError> {
        let plan = self.plan(self.args.rate)?;
        let run = self
            .drive(&plan, |i| {
                (
                    Method::POST,
                    self.collection(),
                    Some(self.configmap(&format!("{prefix}-{i}"), 0)),
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
                    Phase::Update => (Method::PUT, path, Some(self.configmap(name, i + 1))),
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

    /// Runs `request(i)` on the plan; success is any 2xx, and the response body is returned.
    async fn drive<F>(&self, plan: &Plan, request: F) -> schedule::Run<Bytes>
    where
        F: Fn(u64) -> (Method, String, Option<Bytes>),
    {
        schedule::drive(plan, self.args.drain, |i| {
            let (method, path, body) = request(i);
            let client = self.client.clone();
            async move { outcome(client.request(method, &path, body).await) }
        })
        .await
    }

    /// Opens the watchers, creates `watch-<i>` at the rate and times each event from the
    /// create's response to its arrival on every watcher.
    async fn watch(&self) -> Result<PhaseReport, LoadError> {
        let plan = self.plan(self.args.rate)?;
        let list = self
            .client
            .request(Method::GET, &format!("{}?limit=1", self.collection()), None)
            .await?;
        let list = check("listing before the watch", list)?;
        let revision = resource_version(&list).ok_or(LoadError::NoResourceVersion)?;
        let timeout = (plan.span() + self.args.drain * 2).as_secs() + 1;
        let path = format!(
            "{}?watch=1&resourceVersion={revision}&timeoutSeconds={timeout}",
            self.collection()
        );
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut watchers = JoinSet::new();
        let mut counters = Vec::new();
        for _ in 0..self.args.watchers {
            let response = self.client.stream(&path).await?;
            if response.status() != StatusCode::OK {
                let status = response.status();
                let body = response.into_body().collect().await.map(|b| b.to_bytes());
                return Err(LoadError::Unexpected {
                    what: "opening a watch".into(),
                    status,
                    body: String::from_utf8_lossy(&body.unwrap_or_default()).into_owned(),
                });
            }
            let counter = Arc::new(AtomicU64::new(0));
            counters.push(counter.clone());
            watchers.spawn(receive(response.into_body(), counter, stop_rx.clone()));
        }

        let collection = self.collection();
        let run = schedule::drive(&plan, self.args.drain, |i| {
            let client = self.client.clone();
            let (path, body) = (collection.clone(), self.configmap(&format!("watch-{i}"), 0));
            async move {
                let reply = outcome(client.request(Method::POST, &path, Some(body)).await)?;
                let acked = Instant::now();
                let revision = parse_json(&reply)
                    .as_ref()
                    .and_then(|v| v.pointer("/metadata/resourceVersion"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or(Failure::Transport("no resourceVersion"))?;
                Ok((revision, acked))
            }
        })
        .await;

        let acks: HashMap<String, Instant> = run
            .samples
            .iter()
            .filter_map(|s| s.result.as_ref().ok().cloned())
            .collect();
        let expected = acks.len() as u64;
        let deadline = Instant::now() + self.args.drain;
        while Instant::now() < deadline
            && counters
                .iter()
                .any(|c| c.load(Ordering::Relaxed) < expected)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = stop_tx.send(true);
        let mut delivered = Vec::new();
        let mut before_ack = 0;
        while let Some(received) = watchers.join_next().await {
            let (latencies, early) =
                stats::delivery_latencies(&acks, &received.unwrap_or_default());
            delivered.extend(latencies);
            before_ack += early;
        }

        let mut report = PhaseReport::of("watch", plan.rate(), &run);
        report.watch = Some(WatchReport {
            watchers: self.args.watchers,
            expected_events: expected * self.args.watchers as u64,
            delivered_events: delivered.len() as u64,
            before_ack,
            write_latency: report.latency,
        });
        report.latency = Latency::of(delivered);
        Ok(report)
    }
}

/// Reads one watch stream until told to stop (or the server ends it), recording every event's
/// resourceVersion and arrival time.
async fn receive(
    mut body: hyper::body::Incoming,
    counter: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) -> Vec<(String, Instant)> {
    let mut received = Vec::new();
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            _ = stop.changed() => break,
        };
        let Some(Ok(frame)) = frame else { break };
        let arrived = Instant::now();
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let event: Option<Value> = serde_json::from_slice(&line).ok();
            let revision = event
                .as_ref()
                .filter(|e| matches!(e["type"].as_str(), Some("ADDED" | "MODIFIED")))
                .and_then(|e| e.pointer("/object/metadata/resourceVersion"))
                .and_then(Value::as_str);
            if let Some(revision) = revision {
                received.push((revision.to_owned(), arrived));
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    received
}

fn outcome(reply: Result<Reply, ClientError>) -> Result<Bytes, Failure> {
    match reply {
        Ok(reply) if reply.status.is_success() => Ok(reply.body),
        Ok(reply) => Err(Failure::Status(reply.status.as_u16())),
        Err(error) => Err(Failure::Transport(error.kind())),
    }
}

/// The body of a 2xx reply, or an error naming what was being done.
fn check(what: &str, reply: Reply) -> Result<Bytes, LoadError> {
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

fn parse_json(body: &[u8]) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

fn resource_version(body: &[u8]) -> Option<String> {
    parse_json(body)?
        .pointer("/metadata/resourceVersion")?
        .as_str()
        .map(str::to_owned)
}

fn to_bytes(value: &Value) -> Bytes {
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
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "s", "10h", "-1s", "ten"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn namespace_names() {
        assert!(is_dns_label("bench-0a1b"));
        for bad in ["", "Bench", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn list_resource_version() {
        let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"42"},"items":[]}"#;
        assert_eq!(resource_version(body), Some("42".into()));
        assert_eq!(resource_version(b"{}"), None);
        assert_eq!(resource_version(b"not json"), None);
    }
}
