//! Who may read the proxy's `/metrics`: upstream's front-proxy serves them itself (they are not
//! proxied) behind its own authentication and a delegated authorizer on the root logical
//! cluster (`newProtectedMetricsHandler` in `pkg/proxy/server.go`, `pkg/authorization/delegated`):
//! no user is 401, and an authenticated user (its groups as the proxy passes them on) must be
//! allowed `get` on the non-resource URL `/metrics` by a SubjectAccessReview in `root`, else 403.
//! So the binding that lets a scraper read a shard's metrics lets it read the proxy's too.
//!
//! As upstream's delegating authorizer, an allowed answer is kept for 5 minutes and a denied one
//! for 30 seconds, per user; a review that fails is not kept (and refuses).

use std::time::Duration;

use kcp_authn::{KeptAnswers, UserInfo};
use serde::Deserialize;
use serde_json::json;

/// How long an allowed answer is kept (upstream's `AllowCacheTTL` default).
pub const ALLOW_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a denied answer is kept (upstream's `DenyCacheTTL` default).
pub const DENY_TTL: Duration = Duration::from_secs(30);

/// Answers kept at most.
const MAX_KEPT: usize = 1_000;

/// A review that gave no answer: the proxy refuses (403) and logs it.
#[derive(Debug, thiserror::Error)]
#[error("SubjectAccessReview for /metrics in root: {0}")]
pub struct ReviewError(String);

/// Asks the root shard whether a user may `get /metrics`.
#[derive(Debug)]
pub struct MetricsAccess {
    /// `--root-kubeconfig`'s client.
    http: reqwest::Client,
    /// `<root shard>/clusters/root/apis/authorization.k8s.io/v1/subjectaccessreviews`.
    url: String,
    /// Decisions by the review's spec.
    decided: KeptAnswers<bool>,
}

#[derive(Deserialize)]
struct Review {
    #[serde(default)]
    status: ReviewStatus,
}

#[derive(Default, Deserialize)]
struct ReviewStatus {
    #[serde(default)]
    allowed: bool,
}

impl MetricsAccess {
    /// Reviews with `http` at the root shard `base_url` (`https://host:port`).
    pub fn new(http: reqwest::Client, base_url: &str) -> MetricsAccess {
        MetricsAccess {
            http,
            url: format!(
                "{}/clusters/root/apis/authorization.k8s.io/v1/subjectaccessreviews",
                base_url.trim_end_matches('/')
            ),
            decided: KeptAnswers::new(
                MAX_KEPT,
                |allowed| {
                    if *allowed { ALLOW_TTL } else { DENY_TTL }
                },
            ),
        }
    }

    /// Whether `user` may read `/metrics`.
    pub async fn allowed(&self, user: &UserInfo) -> Result<bool, ReviewError> {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.name,
                "uid": user.uid,
                "groups": user.groups,
                "extra": user.extra,
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        });
        let key = review["spec"].to_string();
        if let Some(allowed) = self.decided.get(&key) {
            return Ok(allowed);
        }
        let failed = |reason: String| ReviewError(reason);
        let answer = self
            .http
            .post(&self.url)
            .json(&review)
            .send()
            .await
            .map_err(|error| failed(error.to_string()))?;
        let code = answer.status();
        if !code.is_success() {
            return Err(failed(format!("the root shard answered {code}")));
        }
        let review: Review = answer
            .json()
            .await
            .map_err(|error| failed(error.to_string()))?;
        self.decided.keep(key, review.status.allowed);
        Ok(review.status.allowed)
    }
}
