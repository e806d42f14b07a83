//! Timing writes until their effect arrives on watches.
//!
//! Two phases measure "write acknowledged → event observed": the `watch` load phase (a ConfigMap or
//! custom resource create, seen by N watchers) and CRD installation (a CRD create, until a watch on
//! the CRDs reports `Established=True`). Both open their watches before the first write, key each
//! write by what its event will carry (a resourceVersion, a CRD's cluster and name), record the
//! acknowledgement time per key, and match the first arrival of every key on every watcher. The
//! `idle-watchers` command opens one watch per workspace with the same machinery.
//!
//! At 100 watchers × 500 writes/s the client reads 50,000 events/s on the same two cores as the
//! server, so an event is not decoded into a `serde_json::Value` (an allocation per field): the
//! keys read only the event type and the object's name and resourceVersion, borrowed from the
//! line, and skip the rest without building it.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::Client;
use crate::load::{LoadError, check, resource_version};
use crate::schedule::{Plan, Run};
use crate::stats::{self, Latency, PhaseReport, WatchReport};

/// What identifies the write an event (one line of a watch stream) is about; `None` for events
/// that do not count.
pub type EventKey = fn(&[u8]) -> Option<String>;

/// The parts of a watch event the keys read; everything else is skipped unbuilt.
#[derive(Debug, Deserialize)]
pub struct EventHead<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub object: ObjectHead<'a>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ObjectHead<'a> {
    #[serde(default, borrow)]
    pub metadata: MetadataHead<'a>,
}

#[derive(Debug, Default, Deserialize)]
pub struct MetadataHead<'a> {
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "resourceVersion")]
    pub resource_version: Option<Cow<'a, str>>,
}

impl<'a> EventHead<'a> {
    /// `None` if the line is not a JSON watch event.
    pub fn parse(line: &'a [u8]) -> Option<Self> {
        serde_json::from_slice(line).ok()
    }
}

/// The resourceVersion of an ADDED or MODIFIED event's object.
pub fn written_revision(line: &[u8]) -> Option<String> {
    let event = EventHead::parse(line)?;
    if !matches!(event.kind.as_ref(), "ADDED" | "MODIFIED") {
        return None;
    }
    event.object.metadata.resource_version.map(Cow::into_owned)
}

/// Where the watch streams run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streams {
    /// Each on a connection of its own (as many connections as watchers).
    OwnConnection,
    /// As HTTP/2 streams on the client's pooled connections, round-robin (as informers sharing a
    /// client do).
    Pooled,
}

/// Open watch streams on one collection, each recording when every key first arrived.
pub struct Watchers {
    /// Each watcher's index (in opening order) with what it received.
    tasks: JoinSet<(usize, Vec<(String, Instant)>)>,
    counters: Vec<Arc<AtomicU64>>,
    stop: watch::Sender<bool>,
}

impl Watchers {
    /// Opens `count` watches on `collection` (a path the client prefixes) from its current
    /// revision, each on a connection of its own; the server ends them after `timeout` at the
    /// latest.
    pub async fn open(
        client: &Client,
        collection: &str,
        count: usize,
        timeout: Duration,
        key: EventKey,
    ) -> Result<Self, LoadError> {
        let list = client
            .request(Method::GET, &format!("{collection}?limit=1"), None)
            .await?;
        let list = check("listing before the watch", list)?;
        let revision = resource_version(&list).ok_or(LoadError::NoResourceVersion)?;
        let path = format!(
            "{collection}?watch=1&resourceVersion={revision}&timeoutSeconds={}",
            timeout.as_secs() + 1
        );
        let paths = std::iter::repeat_n(path, count);
        Self::start(client, paths, Streams::OwnConnection, key).await
    }

    /// Opens one watch per path (each a complete watch request below the client's prefix),
    /// failing unless every one is answered 200.
    pub async fn start(
        client: &Client,
        paths: impl IntoIterator<Item = String>,
        streams: Streams,
        key: EventKey,
    ) -> Result<Self, LoadError> {
        let (stop, stop_rx) = watch::channel(false);
        let mut watchers = Self {
            tasks: JoinSet::new(),
            counters: Vec::new(),
            stop,
        };
        for path in paths {
            let response = match streams {
                Streams::OwnConnection => client.stream(&path).await?,
                Streams::Pooled => client.stream_pooled(&path).await?,
            };
            if response.status() != StatusCode::OK {
                let status = response.status();
                let body = response.into_body().collect().await.map(|b| b.to_bytes());
                return Err(LoadError::Unexpected {
                    what: format!("opening the watch {path}"),
                    status,
                    body: String::from_utf8_lossy(&body.unwrap_or_default()).into_owned(),
                });
            }
            let counter = Arc::new(AtomicU64::new(0));
            watchers.counters.push(counter.clone());
            let index = watchers.counters.len() - 1;
            let stop = stop_rx.clone();
            watchers.tasks.spawn(async move {
                (
                    index,
                    receive(response.into_body(), key, counter, stop).await,
                )
            });
        }
        Ok(watchers)
    }

    /// How many distinct keys each watcher has seen so far, in the order they were opened.
    pub fn seen(&self) -> Vec<u64> {
        self.counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Ends every stream (dropping it resets the HTTP/2 stream) and returns what each watcher
    /// received, in the order they were opened.
    pub async fn close(mut self) -> Vec<Vec<(String, Instant)>> {
        let _ = self.stop.send(true);
        let mut received = vec![Vec::new(); self.counters.len()];
        while let Some(joined) = self.tasks.join_next().await {
            if let Ok((index, keys)) = joined
                && let Some(slot) = received.get_mut(index)
            {
                *slot = keys;
            }
        }
        received
    }

    /// Waits (at most `limit`) until every watcher has seen `expected` distinct keys, stops them
    /// and returns what each received.
    async fn finish(self, expected: u64, limit: Duration) -> Vec<Vec<(String, Instant)>> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && self.seen().iter().any(|&n| n < expected) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.close().await
    }

    /// Turns a run of writes (each `Ok((key, acknowledged at))`) into a phase report whose latency
    /// is acknowledgement → first arrival on each watcher, waiting up to `drain` for stragglers.
    pub async fn report(
        self,
        phase: &str,
        plan: &Plan,
        run: &Run<(String, Instant)>,
        drain: Duration,
    ) -> PhaseReport {
        let acks: HashMap<String, Instant> = run
            .samples
            .iter()
            .filter_map(|s| s.result.as_ref().ok().cloned())
            .collect();
        let expected = acks.len() as u64;
        let watchers = self.counters.len();
        let mut delivered = Vec::new();
        let mut before_ack = 0;
        for received in self.finish(expected, drain).await {
            let (latencies, early) = stats::delivery_latencies(&acks, &received);
            delivered.extend(latencies);
            before_ack += early;
        }
        let mut report = PhaseReport::of(phase, plan.rate(), run);
        report.watch = Some(WatchReport {
            watchers,
            expected_events: expected * watchers as u64,
            delivered_events: delivered.len() as u64,
            before_ack,
            write_latency: report.latency,
            server_cpu_us_per_event: None,
            server_cpu_us_per_event_net: None,
            client_cpu_us_per_event: None,
        });
        report.latency = Latency::of(delivered);
        report
    }
}

/// Reads one watch stream until told to stop (or the server ends it), recording the first arrival
/// time of every key.
async fn receive(
    mut body: hyper::body::Incoming,
    key: EventKey,
    counter: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) -> Vec<(String, Instant)> {
    let mut received = Vec::new();
    let mut seen = HashSet::new();
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
        for line in take_lines(&mut buffer) {
            let Some(key) = key(&line) else {
                continue;
            };
            if seen.insert(key.clone()) {
                received.push((key, arrived));
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    received
}

/// Removes the complete (newline-terminated) lines from `buffer`, leaving a partial last line.
pub fn take_lines(buffer: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let Some(end) = buffer.iter().rposition(|&b| b == b'\n') else {
        return Vec::new();
    };
    let rest = buffer.split_off(end + 1);
    let complete = std::mem::replace(buffer, rest);
    complete
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(event: serde_json::Value) -> Vec<u8> {
        event.to_string().into_bytes()
    }

    #[test]
    fn lines_are_split_and_the_partial_one_kept() {
        let mut buffer = b"{\"a\":1}\n{\"b\":2}\n{\"c\"".to_vec();
        assert_eq!(
            take_lines(&mut buffer),
            vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]
        );
        assert_eq!(buffer, b"{\"c\"".to_vec());
        assert!(take_lines(&mut buffer).is_empty());
        buffer.extend_from_slice(b":3}\n");
        assert_eq!(take_lines(&mut buffer), vec![b"{\"c\":3}".to_vec()]);
        assert!(buffer.is_empty());
    }

    #[test]
    fn revisions_of_writes_only() {
        let event =
            |kind| line(json!({"type": kind, "object": {"metadata": {"resourceVersion": "7"}}}));
        assert_eq!(written_revision(&event("ADDED")), Some("7".into()));
        assert_eq!(written_revision(&event("MODIFIED")), Some("7".into()));
        assert_eq!(written_revision(&event("DELETED")), None);
        assert_eq!(written_revision(&event("BOOKMARK")), None);
        assert_eq!(written_revision(b"not json"), None);
    }

    #[test]
    fn event_heads_skip_the_rest_of_the_object() {
        let event = line(json!({"type": "ADDED", "object": {"kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": "12",
                "annotations": {"kcp.io/cluster": "x"}},
            "data": {"payload": "say \"hi\"", "nested": [1, {"resourceVersion": "99"}]}}}));
        let head = EventHead::parse(&event).unwrap();
        assert_eq!(head.kind, "ADDED");
        assert_eq!(head.object.metadata.name.as_deref(), Some("a"));
        assert_eq!(head.object.metadata.resource_version.as_deref(), Some("12"));
        let status = line(json!({"type": "ERROR", "object": {"kind": "Status", "code": 410}}));
        let head = EventHead::parse(&status).unwrap();
        assert_eq!(
            (head.kind.as_ref(), head.object.metadata.name),
            ("ERROR", None)
        );
    }
}
