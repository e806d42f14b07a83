//! Per-object exponential backoff for failed reconciles: 5 s, 10 s, 20 s ... up to 5 minutes,
//! reset by the next success. kube-runtime's error policy only returns an [`Action`], so the
//! failure count lives here, keyed by object.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

const FIRST: Duration = Duration::from_secs(5);
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

#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// The delay before retrying `key` after one more failure.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(key.to_owned()).or_insert(0);
        let delay = FIRST
            .checked_mul(1u32.checked_shl(*count).unwrap_or(u32::MAX))
            .map_or(LONGEST, |delay| delay.min(LONGEST));
        *count = count.saturating_add(1);
        delay
    }

    /// How many reconciles of `key` failed in a row.
    pub fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }

    /// The error-policy action for `key`.
    pub fn retry(&self, key: &str) -> Action {
        Action::requeue(self.failed(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_five_minutes_and_reset_on_success() {
        let backoff = Backoff::default();
        let delays: Vec<u64> = (0..9).map(|_| backoff.failed("a").as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(
            backoff.failed("b").as_secs(),
            5,
            "objects back off independently"
        );
        backoff.succeeded("a");
        assert_eq!(backoff.failed("a").as_secs(), 5);
    }
}
