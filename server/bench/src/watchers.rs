//! Timing writes until their effect arrives on watches.
//!
//! Two phases measure "write acknowledged → event observed": the `watch` load phase (a ConfigMap or
//! custom resource create, seen by N watchers) and CRD installation (a CRD create, until a watch on
//! the CRDs reports `Established=True`). Both open their watches before the first write, key each
//! write by what its event will carry (a resourceVersion, a CRD's cluster and name), record the
//! acknowledgement time per key, and match the first arrival of every key on every watcher.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::Client;
use crate::load::{LoadError, check, resource_version};
use crate::schedule::{Plan, Run};
use crate::stats::{self, Latency, PhaseReport, WatchReport};

/// What identifies the write an event is about; `None` for events that do not count.
pub type EventKey = fn(&Value) -> Option<String>;

/// The resourceVersion of an ADDED or MODIFIED event's object.
pub fn written_revision(event: &Value) -> Option<String> {
    if !matches!(event["type"].as_str(), Some("ADDED" | "MODIFIED")) {
        return None;
    }
    event
        .pointer("/object/metadata/resourceVersion")?
        .as_str()
        .map(str::to_owned)
}

/// Open watch streams on one collection, each recording when every key first arrived.
pub struct Watchers {
    tasks: JoinSet<Vec<(String, Instant)>>,
    counters: Vec<Arc<AtomicU64>>,
    stop: watch::Sender<bool>,
}

impl Watchers {
    /// Opens `count` watches on `collection` (a path the client prefixes) from its current
    /// revision; the server ends them after `timeout` at the latest.
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
        let (stop, stop_rx) = watch::channel(false);
        let mut watchers = Self {
            tasks: JoinSet::new(),
            counters: Vec::with_capacity(count),
            stop,
        };
        for _ in 0..count {
            let response = client.stream(&path).await?;
            if response.status() != StatusCode::OK {
                let status = response.status();
                let body = response.into_body().collect().await.map(|b| b.to_bytes());
                return Err(LoadError::Unexpected {
                    what: format!("opening a watch on {collection}"),
                    status,
                    body: String::from_utf8_lossy(&body.unwrap_or_default()).into_owned(),
                });
            }
            let counter = Arc::new(AtomicU64::new(0));
            watchers.counters.push(counter.clone());
            watchers
                .tasks
                .spawn(receive(response.into_body(), key, counter, stop_rx.clone()));
        }
        Ok(watchers)
    }

    /// Waits (at most `limit`) until every watcher has seen `expected` distinct keys, stops them
    /// and returns what each received.
    async fn finish(mut self, expected: u64, limit: Duration) -> Vec<Vec<(String, Instant)>> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline
            && self
                .counters
                .iter()
                .any(|c| c.load(Ordering::Relaxed) < expected)
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let _ = self.stop.send(true);
        let mut received = Vec::with_capacity(self.counters.len());
        while let Some(joined) = self.tasks.join_next().await {
            received.push(joined.unwrap_or_default());
        }
        received
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
            let Some(key) = serde_json::from_slice(&line).ok().as_ref().and_then(key) else {
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
        let event = |kind| json!({"type": kind, "object": {"metadata": {"resourceVersion": "7"}}});
        assert_eq!(written_revision(&event("ADDED")), Some("7".into()));
        assert_eq!(written_revision(&event("MODIFIED")), Some("7".into()));
        assert_eq!(written_revision(&event("DELETED")), None);
        assert_eq!(written_revision(&event("BOOKMARK")), None);
    }
}
