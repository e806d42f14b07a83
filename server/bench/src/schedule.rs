//! Open-loop request scheduling.
//!
//! Request `i` is due at `start + i / rate`, whatever happened to the requests before it, and its
//! latency is measured from that due time, not from when it was actually sent. A closed loop (send,
//! wait, send) slows down with the server and then reports only the fast requests it managed to
//! send ("coordinated omission"); here a slow server shows up as queueing in the latency, the way a
//! client population with its own clock experiences it.
//!
//! Every phase is bounded twice: at most `rate × duration` requests (or `--requests`, if fewer),
//! and after the last one is due, at most `drain` more time for the stragglers, which are then
//! counted as `timeout` errors.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The largest number of requests a phase may plan (keeps latency vectors bounded).
pub const MAX_REQUESTS: u64 = 10_000_000;
/// Requests in flight at once before the dispatcher waits (their latency still runs from the due
/// time, so waiting here is measured, not hidden).
const MAX_IN_FLIGHT: usize = 10_000;

/// Why a plan is not possible.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error("the rate must be a positive number of requests per second, not {0}")]
    Rate(f64),
    #[error("the phase would plan {0} requests; the limit is {MAX_REQUESTS}")]
    TooMany(u64),
}

/// When each request of a phase is due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    rate: f64,
    count: u64,
}

impl Plan {
    /// `rate` requests per second for `duration`, or `requests` if that is fewer.
    pub fn new(rate: f64, duration: Duration, requests: Option<u64>) -> Result<Self, PlanError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(PlanError::Rate(rate));
        }
        let by_time = (rate * duration.as_secs_f64()).floor();
        if by_time > MAX_REQUESTS as f64 {
            return Err(PlanError::TooMany(by_time as u64));
        }
        let by_time = by_time as u64;
        let count = requests.map_or(by_time, |r| r.min(by_time));
        Ok(Self { rate, count })
    }

    /// Exactly `count` requests at `rate` (as long as that stays within [`MAX_REQUESTS`]).
    pub fn exactly(rate: f64, count: u64) -> Result<Self, PlanError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(PlanError::Rate(rate));
        }
        if count > MAX_REQUESTS {
            return Err(PlanError::TooMany(count));
        }
        Ok(Self { rate, count })
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// When request `i` is due, relative to the start of the phase.
    pub fn offset(&self, i: u64) -> Duration {
        Duration::from_secs_f64(i as f64 / self.rate)
    }

    /// How long dispatching takes: when the last request is due.
    pub fn span(&self) -> Duration {
        self.offset(self.count.saturating_sub(1))
    }
}

/// One finished (or abandoned) request.
#[derive(Debug)]
pub struct Sample<T> {
    /// From the due time to the end of the response.
    pub latency: Duration,
    /// From the due time to the start of sending (how late the client was; should stay tiny).
    pub lag: Duration,
    pub result: Result<T, Failure>,
}

/// How a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The server answered with a non-2xx status.
    Status(u16),
    /// No HTTP answer: connection, TLS or protocol trouble (a short label).
    Transport(&'static str),
    /// Still running when the phase's drain time ran out.
    Timeout,
}

impl Failure {
    /// The key errors are counted under in reports.
    pub fn label(&self) -> String {
        match self {
            Self::Status(code) => code.to_string(),
            Self::Transport(kind) => (*kind).to_owned(),
            Self::Timeout => "timeout".to_owned(),
        }
    }
}

/// What a phase run produced, in due order, and how long it took.
pub struct Run<T> {
    pub samples: Vec<Sample<T>>,
    /// From the phase start to the last completion (or the drain deadline).
    pub elapsed: Duration,
}

/// Sends each request index when it is due, from a thread of its own.
///
/// tokio's timer has millisecond resolution, which would make requests up to 1 ms late (and
/// latencies up to 1 ms longer) against targets of 2 ms; a thread sleeping with the OS timer is
/// accurate to tens of microseconds. The thread stops after the last index or once the receiver is
/// gone.
fn ticker(plan: Plan, start: std::time::Instant) -> mpsc::UnboundedReceiver<u64> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for i in 0..plan.count() {
            let due = start + plan.offset(i);
            let now = std::time::Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if tx.send(i).is_err() {
                break;
            }
        }
    });
    rx
}

/// Runs `op(i)` for every request of `plan`, each started when it is due.
pub async fn drive<T, F, Fut>(plan: &Plan, drain: Duration, op: F) -> Run<T>
where
    T: Send + 'static,
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<T, Failure>> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    let mut finished: Vec<(u64, Sample<T>)> = Vec::with_capacity(plan.count() as usize);
    let mut last_done = start;
    let mut ticks = ticker(*plan, start.into_std());
    while let Some(i) = ticks.recv().await {
        let due = start + plan.offset(i);
        while let Some(Ok(done)) = tasks.try_join_next() {
            last_done = Instant::now();
            finished.push(done);
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let request = op(i);
        tasks.spawn(async move {
            let lag = due.elapsed();
            let result = request.await;
            drop(permit);
            let latency = due.elapsed();
            (
                i,
                Sample {
                    latency,
                    lag,
                    result,
                },
            )
        });
    }
    let deadline = start + plan.span() + drain;
    loop {
        match tokio::time::timeout_at(deadline, tasks.join_next()).await {
            Ok(Some(Ok(done))) => {
                last_done = Instant::now();
                finished.push(done);
            }
            Ok(Some(Err(_panicked))) => {}
            Ok(None) => break,
            Err(_deadline) => {
                last_done = deadline;
                break;
            }
        }
    }
    tasks.abort_all();
    let mut samples: Vec<Option<Sample<T>>> = (0..plan.count()).map(|_| None).collect();
    for (i, sample) in finished {
        if let Some(slot) = samples.get_mut(i as usize) {
            *slot = Some(sample);
        }
    }
    let samples = samples
        .into_iter()
        .enumerate()
        .map(|(i, sample)| {
            sample.unwrap_or_else(|| Sample {
                latency: deadline.saturating_duration_since(start + plan.offset(i as u64)),
                lag: Duration::ZERO,
                result: Err(Failure::Timeout),
            })
        })
        .collect();
    Run {
        samples,
        elapsed: last_done.saturating_duration_since(start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_rate_times_duration_capped_by_requests() {
        let plan = Plan::new(500.0, Duration::from_secs(10), None).unwrap();
        assert_eq!(plan.count(), 5000);
        let plan = Plan::new(500.0, Duration::from_secs(10), Some(100)).unwrap();
        assert_eq!(plan.count(), 100);
        let plan = Plan::new(500.0, Duration::from_secs(1), Some(100_000)).unwrap();
        assert_eq!(plan.count(), 500);
        let plan = Plan::new(3.0, Duration::from_millis(999), None).unwrap();
        assert_eq!(plan.count(), 2);
    }

    #[test]
    fn requests_are_evenly_spaced_from_zero() {
        let plan = Plan::new(500.0, Duration::from_secs(1), None).unwrap();
        assert_eq!(plan.offset(0), Duration::ZERO);
        assert_eq!(plan.offset(1), Duration::from_millis(2));
        assert_eq!(plan.offset(250), Duration::from_millis(500));
        assert_eq!(plan.span(), Duration::from_millis(998));
        let gaps: Vec<_> = (1..500)
            .map(|i| plan.offset(i) - plan.offset(i - 1))
            .collect();
        assert!(
            gaps.iter()
                .all(|g| g.abs_diff(Duration::from_millis(2)) < Duration::from_micros(1))
        );
    }

    #[test]
    fn exact_counts() {
        let plan = Plan::exactly(10.0, 50).unwrap();
        assert_eq!(plan.count(), 50);
        assert_eq!(plan.span(), Duration::from_millis(4900));
        assert_eq!(Plan::exactly(0.0, 1), Err(PlanError::Rate(0.0)));
        assert_eq!(
            Plan::exactly(1.0, MAX_REQUESTS + 1),
            Err(PlanError::TooMany(MAX_REQUESTS + 1))
        );
    }

    #[test]
    fn fractional_rates() {
        let plan = Plan::new(0.5, Duration::from_secs(10), None).unwrap();
        assert_eq!(plan.count(), 5);
        assert_eq!(plan.offset(3), Duration::from_secs(6));
    }

    #[test]
    fn bad_plans() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                Plan::new(rate, Duration::from_secs(1), None).is_err(),
                "{rate}"
            );
        }
        assert_eq!(
            Plan::new(1e6, Duration::from_secs(100), None),
            Err(PlanError::TooMany(100_000_000))
        );
        assert_eq!(
            Plan::new(1.0, Duration::ZERO, None).unwrap().span(),
            Duration::ZERO
        );
    }

    #[test]
    fn failure_labels() {
        assert_eq!(Failure::Status(409).label(), "409");
        assert_eq!(Failure::Transport("connect").label(), "connect");
        assert_eq!(Failure::Timeout.label(), "timeout");
    }
}
