//! Answers kept for a while, as kube keeps authentication and authorization answers (its token
//! cache, its delegating authorizer's cache): a front-proxy or a shard asks another shard whether
//! a service account still exists ([`crate::ServiceAccountLookup`]), the proxy asks whether a
//! user may read `/metrics`, and a scraper or a controller asks again every few seconds. Keyed by text; each answer has its own lifetime (allowed and
//! denied answers are kept for different times); bounded: past the bound, expired answers go,
//! and if none did, all.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Answers of type `V` by key.
#[derive(Debug)]
pub struct KeptAnswers<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
    bound: usize,
    /// How long an answer is believed.
    lifetime: fn(&V) -> Duration,
}

impl<V: Clone> KeptAnswers<V> {
    /// At most `bound` answers, each believed for `lifetime(answer)`.
    pub fn new(bound: usize, lifetime: fn(&V) -> Duration) -> KeptAnswers<V> {
        KeptAnswers {
            entries: Mutex::default(),
            bound,
            lifetime,
        }
    }

    /// The answer for `key`, while it is believed.
    pub fn get(&self, key: &str) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, answer) = entries.get(key)?;
        (at.elapsed() < (self.lifetime)(answer)).then(|| answer.clone())
    }

    /// Keeps `answer` for `key` from now.
    pub fn keep(&self, key: String, answer: V) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.bound {
            let lifetime = self.lifetime;
            entries.retain(|_, (at, answer)| at.elapsed() < lifetime(answer));
            if entries.len() >= self.bound {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_live_as_long_as_their_lifetime_and_the_bound_holds() {
        let kept = KeptAnswers::new(2, |allowed: &bool| {
            if *allowed {
                Duration::from_secs(600)
            } else {
                Duration::ZERO
            }
        });
        kept.keep("a".into(), true);
        kept.keep("b".into(), false);
        assert_eq!(kept.get("a"), Some(true));
        assert_eq!(kept.get("b"), None, "a zero lifetime is never believed");
        assert_eq!(kept.get("c"), None);
        // Full: the expired "b" goes, "a" stays.
        kept.keep("c".into(), true);
        assert_eq!((kept.get("a"), kept.get("c")), (Some(true), Some(true)));
        // Full of live answers: all go.
        kept.keep("d".into(), true);
        assert_eq!((kept.get("a"), kept.get("d")), (None, Some(true)));
    }
}
