//! From raw samples to the figures a report shows: counts, errors by cause, throughput and
//! latency percentiles. Pure functions, so the arithmetic is tested without a server.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::time::Duration;

use serde::Serialize;

use crate::schedule::{Run, Sample};

/// Nearest-rank percentile (`p` in 0..=100) of ascending `sorted`; `None` when empty.
///
/// Nearest rank never invents a value between two samples, so p99 of 100 samples is the 99th
/// smallest and max is p100.
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p.clamp(0.0, 100.0) / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.max(1) - 1).copied()
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// `None` when there are no samples.
    pub fn of(mut latencies: Vec<Duration>) -> Option<Self> {
        latencies.sort_unstable();
        let ms = |p| percentile(&latencies, p).map(|d: Duration| d.as_secs_f64() * 1e3);
        Some(Self {
            p50_ms: ms(50.0)?,
            p90_ms: ms(90.0)?,
            p99_ms: ms(99.0)?,
            max_ms: ms(100.0)?,
        })
    }
}

/// One phase's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    pub phase: String,
    /// Requests issued (for watch: writes).
    pub requests: u64,
    pub ok: u64,
    /// Failed requests by status code or transport cause.
    pub errors: BTreeMap<String, u64>,
    /// The rate requests were scheduled at.
    pub target_rate: f64,
    /// Successful requests per second of phase time.
    pub throughput: f64,
    pub elapsed_s: f64,
    /// Latency of successful requests (for watch: event delivery); `None` without any.
    pub latency: Option<Latency>,
    /// p99 of how late the client started requests (a sanity check: large values mean the
    /// client, not the server, was short of CPU).
    pub dispatch_lag_p99_ms: f64,
    /// Server CPU time (all threads) per successful request, when the server is ours (`run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_request: Option<f64>,
    /// Watch phase only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchReport>,
}

/// Event delivery in a watch phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatchReport {
    pub watchers: usize,
    /// Acknowledged writes × watchers.
    pub expected_events: u64,
    pub delivered_events: u64,
    /// Events that arrived before the client had read the write's response (latency counted as 0).
    pub before_ack: u64,
    /// Latency of the writes themselves (due time to response).
    pub write_latency: Option<Latency>,
    /// Server CPU time (all threads) over the phase per delivered event, i.e. per event per
    /// watcher (the writes' own cost included), when the server is ours (`run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_event: Option<f64>,
    /// The same net of the writes' own cost: (CPU per write − the create phase's CPU per write)
    /// × writes / delivered events; present when the create phase ran on our server first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_event_net: Option<f64>,
    /// This client's CPU time over the phase per delivered event: when it approaches the
    /// server's, the client may be what limits delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_us_per_event: Option<f64>,
}

/// Microseconds per delivered event of a watch phase's CPU beyond what its `writes` cost on
/// their own (`create_per_write`, measured without watchers); `None` without events.
pub fn net_micros_per_event(
    per_write: f64,
    create_per_write: f64,
    writes: u64,
    delivered: u64,
) -> Option<f64> {
    (delivered > 0).then(|| (per_write - create_per_write) * writes as f64 / delivered as f64)
}

/// CPU time per item in microseconds; `None` without items.
pub fn micros_per(cpu: Duration, items: u64) -> Option<f64> {
    (items > 0).then(|| cpu.as_secs_f64() * 1e6 / items as f64)
}

impl PhaseReport {
    /// Summarises a request phase; latency covers the successful requests.
    pub fn of<T>(phase: &str, target_rate: f64, run: &Run<T>) -> Self {
        let mut errors = BTreeMap::new();
        let mut ok_latencies = Vec::with_capacity(run.samples.len());
        let mut lags: Vec<Duration> = run.samples.iter().map(|s| s.lag).collect();
        lags.sort_unstable();
        for Sample {
            latency, result, ..
        } in &run.samples
        {
            match result {
                Ok(_) => ok_latencies.push(*latency),
                Err(failure) => *errors.entry(failure.label()).or_insert(0) += 1,
            }
        }
        let ok = ok_latencies.len() as u64;
        let elapsed = run.elapsed.as_secs_f64();
        Self {
            phase: phase.to_owned(),
            requests: run.samples.len() as u64,
            ok,
            errors,
            target_rate,
            throughput: if elapsed > 0.0 {
                ok as f64 / elapsed
            } else {
                0.0
            },
            elapsed_s: elapsed,
            latency: Latency::of(ok_latencies),
            server_cpu_us_per_request: None,
            dispatch_lag_p99_ms: percentile(&lags, 99.0).unwrap_or_default().as_secs_f64() * 1e3,
            watch: None,
        }
    }
}

/// Delivery latencies: for every received event whose key was acknowledged, receipt − ack (0 when
/// the event overtook the response). Returns the latencies and how many were clamped to 0.
///
/// `T` is any clock value that can be subtracted into a [`Duration`] (tokio or std `Instant`).
pub fn delivery_latencies<K, T>(acks: &HashMap<K, T>, receipts: &[(K, T)]) -> (Vec<Duration>, u64)
where
    K: Eq + Hash,
    T: Copy + Ord + std::ops::Sub<Output = Duration>,
{
    let mut early = 0;
    let latencies = receipts
        .iter()
        .filter_map(|(key, received)| {
            let acked = *acks.get(key)?;
            if *received < acked {
                early += 1;
                Some(Duration::ZERO)
            } else {
                Some(*received - acked)
            }
        })
        .collect();
    (latencies, early)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Failure;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<_> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(ms(50)));
        assert_eq!(percentile(&sorted, 90.0), Some(ms(90)));
        assert_eq!(percentile(&sorted, 99.0), Some(ms(99)));
        assert_eq!(percentile(&sorted, 100.0), Some(ms(100)));
        assert_eq!(percentile(&sorted, 0.0), Some(ms(1)));
        assert_eq!(percentile(&[], 50.0), None);
        let one = [ms(7)];
        assert_eq!(percentile(&one, 99.0), Some(ms(7)));
        let ten: Vec<_> = (1..=10).map(ms).collect();
        assert_eq!(percentile(&ten, 99.0), Some(ms(10)));
        assert_eq!(percentile(&ten, 50.0), Some(ms(5)));
    }

    #[test]
    fn latency_sorts_its_input() {
        let latency = Latency::of(vec![ms(3), ms(1), ms(2), ms(4)]).unwrap();
        assert_eq!(latency.p50_ms, 2.0);
        assert_eq!(latency.max_ms, 4.0);
        assert_eq!(Latency::of(vec![]), None);
    }

    #[test]
    fn phase_report_counts_errors_by_label() {
        let sample = |latency, result| Sample {
            latency,
            lag: Duration::ZERO,
            result,
        };
        let run = Run {
            samples: vec![
                sample(ms(1), Ok(())),
                sample(ms(100), Err(Failure::Status(409))),
                sample(ms(2), Ok(())),
                sample(ms(100), Err(Failure::Status(409))),
                sample(ms(100), Err(Failure::Timeout)),
            ],
            elapsed: Duration::from_secs(2),
        };
        let report = PhaseReport::of("create", 500.0, &run);
        assert_eq!(report.requests, 5);
        assert_eq!(report.ok, 2);
        assert_eq!(report.errors.get("409"), Some(&2));
        assert_eq!(report.errors.get("timeout"), Some(&1));
        assert_eq!(report.throughput, 1.0);
        assert_eq!(
            report.latency.unwrap().max_ms,
            2.0,
            "errors are not in the latency"
        );
    }

    #[test]
    fn cpu_per_item() {
        assert_eq!(micros_per(ms(50), 1_000), Some(50.0));
        assert_eq!(micros_per(Duration::from_secs(2), 50_000), Some(40.0));
        assert_eq!(micros_per(ms(50), 0), None);
    }

    #[test]
    fn cpu_per_event_net_of_the_writes() {
        // 5,000 writes at 2,200 us each, 700 us of which a create costs alone, 100 watchers.
        assert_eq!(
            net_micros_per_event(2_200.0, 700.0, 5_000, 500_000),
            Some(15.0)
        );
        assert_eq!(net_micros_per_event(2_200.0, 700.0, 5_000, 0), None);
    }

    #[test]
    fn delivery_is_matched_by_key_and_clamped() {
        let base = std::time::Instant::now();
        let at = |v| base + ms(v);
        let acks = HashMap::from([("1", at(10)), ("2", at(20))]);
        let receipts = [("1", at(12)), ("2", at(19)), ("3", at(30)), ("1", at(15))];
        let (latencies, early) = delivery_latencies(&acks, &receipts);
        assert_eq!(latencies, vec![ms(2), Duration::ZERO, ms(5)]);
        assert_eq!(early, 1);
    }
}
