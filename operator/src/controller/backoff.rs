//! Per-object exponential backoff for failed reconciles: 5 s, 10 s, 20 s ... up to 5 minutes,
//! reset by the next success, like controller-runtime's per-item rate limiter (whose first
//! retry upstream kcp-operator sees after 5 ms; ours waits 5 s so a broken object never
//! hot-loops). kube-runtime's error policy only returns an [`Action`], so the failure count
//! lives here, keyed by object.
//!
//! A failure only moves the backoff on when the retry it scheduled is due: a reconcile that a
//! watch event triggers earlier (the object's own children appearing) and that fails again keeps
//! the schedule, so the first retry comes 5 s after the first failure, not 10 s.
//!
//! Cleanups behind a finalizer count their own failures ([`Backoff::cleanup_failed`]), so that
//! unrelated reconcile failures before a deletion never use up the cleanup's attempts.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

/// The first retry's delay (docs/operator.md).
pub const FIRST: Duration = Duration::from_secs(5);
const LONGEST: Duration = Duration::from_secs(300);

/// `Kind/namespace/name`, the key of an object.
pub fn key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

/// The failures of one object in a row and when the retry they scheduled is due.
#[derive(Clone, Copy, Debug)]
struct Failing {
    count: u32,
    due: Instant,
}

#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, Failing>>,
    cleanups: Mutex<HashMap<String, u32>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The delay after the `count`-th failure in a row (1-based).
fn delay(count: u32) -> Duration {
    FIRST
        .checked_mul(
            1u32.checked_shl(count.saturating_sub(1))
                .unwrap_or(u32::MAX),
        )
        .map_or(LONGEST, |delay| delay.min(LONGEST))
}

impl Backoff {
    /// The delay before retrying `key` after a failure at `now`.
    pub fn failed(&self, key: &str, now: Instant) -> Duration {
        let mut failures = locked(&self.failures);
        match failures.get_mut(key) {
            Some(failing) if now < failing.due => failing.due.saturating_duration_since(now),
            Some(failing) => {
                failing.count = failing.count.saturating_add(1);
                let wait = delay(failing.count);
                failing.due = now + wait;
                wait
            }
            None => {
                failures.insert(
                    key.to_owned(),
                    Failing {
                        count: 1,
                        due: now + FIRST,
                    },
                );
                FIRST
            }
        }
    }

    /// A reconcile of `key` succeeded: the next failure starts over, and so does its cleanup.
    pub fn succeeded(&self, key: &str) {
        locked(&self.failures).remove(key);
        locked(&self.cleanups).remove(key);
    }

    /// Counts a failed cleanup of `key`; returns how many failed so far, this one included.
    pub fn cleanup_failed(&self, key: &str) -> u32 {
        let mut cleanups = locked(&self.cleanups);
        let count = cleanups.entry(key.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    /// The error-policy action for `key`.
    pub fn retry(&self, key: &str) -> Action {
        Action::requeue(self.failed(key, Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Failures each at the time their retry was due.
    fn delays(backoff: &Backoff, key: &str, start: Instant, count: usize) -> Vec<u64> {
        let mut now = start;
        (0..count)
            .map(|_| {
                let wait = backoff.failed(key, now);
                now += wait;
                wait.as_secs()
            })
            .collect()
    }

    #[test]
    fn delays_double_up_to_five_minutes_and_reset_on_success() {
        let backoff = Backoff::default();
        let start = Instant::now();
        assert_eq!(
            delays(&backoff, "a", start, 9),
            [5, 10, 20, 40, 80, 160, 300, 300, 300]
        );
        assert_eq!(
            backoff.failed("b", start).as_secs(),
            5,
            "objects back off independently"
        );
        backoff.succeeded("a");
        assert_eq!(backoff.failed("a", start).as_secs(), 5);
    }

    #[test]
    fn an_early_failure_keeps_the_first_retry_at_five_seconds() {
        let backoff = Backoff::default();
        let start = Instant::now();
        assert_eq!(backoff.failed("a", start), FIRST);
        // A watch event re-runs the reconcile a second later; it fails again.
        let early = backoff.failed("a", start + Duration::from_secs(1));
        assert_eq!(
            early,
            Duration::from_secs(4),
            "the retry stays 5 s after the first failure"
        );
        assert_eq!(backoff.failed("a", start + FIRST), Duration::from_secs(10));
    }

    #[test]
    fn cleanup_failures_count_apart_from_reconcile_failures() {
        let backoff = Backoff::default();
        let start = Instant::now();
        delays(&backoff, "a", start, 4);
        assert_eq!(backoff.cleanup_failed("a"), 1);
        assert_eq!(backoff.cleanup_failed("a"), 2);
        backoff.succeeded("a");
        assert_eq!(backoff.cleanup_failed("a"), 1);
    }
}
