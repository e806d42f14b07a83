//! Delegated token authentication, as k8s.io/apiserver's `DelegatingAuthenticationOptions` that
//! upstream's standalone `virtual-workspaces` server uses with `--authentication-kubeconfig`: a
//! bearer token no local authenticator knows is sent in a `TokenReview` to the server the
//! kubeconfig names, and its answer decides. Answers, accepted and refused alike, are kept for a
//! TTL (upstream's `--authentication-token-webhook-cache-ttl`, 10 s), keyed by the token's SHA-256,
//! so a controller's stream of requests costs one review per TTL; a review that fails (server
//! unreachable, an error status) is not kept.
//!
//! kcp: a service-account token is good only in its own logical cluster, so it is reviewed there
//! (the cluster its unverified `kubernetes.io.clusterName` claim names); any other token in
//! `root`, where every token the shard knows (token file, OIDC) authenticates.
//!
//! The same review serves kube's token webhook (`--authentication-token-webhook-config-file`,
//! `-version`, `-cache-ttl`, which upstream's front-proxy has among its generic authentication
//! options): the review goes to the URL the webhook's kubeconfig names, as written, in the
//! `authentication.k8s.io` version the flag names, and its answers are kept for the TTL too.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

use crate::error::AuthnError;
use crate::service_account::unverified_cluster;
use crate::user::UserInfo;

/// Where a token that names no logical cluster is reviewed.
const DEFAULT_CLUSTER: &str = "root";

/// Answers kept at most; past that, expired ones are dropped, and if none were, all.
const MAX_CACHED: usize = 10_000;

/// A token's SHA-256: what the cache keeps instead of the token.
type TokenDigest = [u8; 32];

/// A review's answer and when it was given.
#[derive(Debug, Clone)]
struct Answer {
    at: Instant,
    user: Option<UserInfo>,
}

/// Where reviews are sent.
#[derive(Debug)]
enum Endpoint {
    /// A kcp server, `https://host:port` without `/clusters/...`: reviews go to the token's
    /// logical cluster there, in `authentication.k8s.io/v1`.
    Kcp { base_url: String },
    /// A webhook: its URL as written, and the API version of `authentication.k8s.io` it speaks.
    Webhook { url: String, api_version: String },
}

/// Asks another server (a shard, a webhook) who a bearer token is.
#[derive(Debug)]
pub struct TokenReviewAuthenticator {
    http: reqwest::Client,
    endpoint: Endpoint,
    ttl: Duration,
    cache: Mutex<HashMap<TokenDigest, Answer>>,
}

/// The part of a TokenReview answer read here.
#[derive(Debug, Default, Deserialize)]
struct Review {
    #[serde(default)]
    status: ReviewStatus,
}

#[derive(Debug, Default, Deserialize)]
struct ReviewStatus {
    #[serde(default)]
    authenticated: bool,
    #[serde(default)]
    user: UserInfo,
}

impl TokenReviewAuthenticator {
    /// Reviews with `http` (its credentials may create TokenReviews) at `base_url`, keeping
    /// answers for `ttl`.
    pub fn new(http: reqwest::Client, base_url: &str, ttl: Duration) -> TokenReviewAuthenticator {
        let base_url = base_url.trim_end_matches('/').to_owned();
        Self::at(http, Endpoint::Kcp { base_url }, ttl)
    }

    /// A token webhook: reviews in `authentication.k8s.io/<api_version>` (`v1` or `v1beta1`)
    /// posted with `http` to `url`, answers kept for `ttl`.
    pub fn webhook(
        http: reqwest::Client,
        url: &str,
        api_version: &str,
        ttl: Duration,
    ) -> TokenReviewAuthenticator {
        let endpoint = Endpoint::Webhook {
            url: url.to_owned(),
            api_version: api_version.to_owned(),
        };
        Self::at(http, endpoint, ttl)
    }

    fn at(http: reqwest::Client, endpoint: Endpoint, ttl: Duration) -> TokenReviewAuthenticator {
        TokenReviewAuthenticator {
            http,
            endpoint,
            ttl,
            cache: Mutex::default(),
        }
    }

    /// The user `token` is, `None` when the server says it is nobody.
    pub async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        let digest = digest(token);
        if let Some(user) = self.cached(&digest) {
            return Ok(user);
        }
        let user = self.review(token).await?;
        self.keep(digest, user.clone());
        Ok(user)
    }

    fn cached(&self, digest: &TokenDigest) -> Option<Option<UserInfo>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(digest)
            .filter(|answer| answer.at.elapsed() < self.ttl)
            .map(|answer| answer.user.clone())
    }

    fn keep(&self, digest: TokenDigest, user: Option<UserInfo>) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, answer| answer.at.elapsed() < self.ttl);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(
            digest,
            Answer {
                at: Instant::now(),
                user,
            },
        );
    }

    async fn review(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        let (url, api_version) = match &self.endpoint {
            Endpoint::Kcp { base_url } => {
                let cluster =
                    unverified_cluster(token).unwrap_or_else(|| DEFAULT_CLUSTER.to_owned());
                let url = format!(
                    "{base_url}/clusters/{cluster}/apis/authentication.k8s.io/v1/tokenreviews"
                );
                (url, "v1")
            }
            Endpoint::Webhook { url, api_version } => (url.clone(), api_version.as_str()),
        };
        let review = json!({
            "apiVersion": format!("authentication.k8s.io/{api_version}"),
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let unavailable = |reason: String| AuthnError::TokenReviewUnavailable(reason);
        let answer = self
            .http
            .post(url)
            .json(&review)
            .send()
            .await
            .map_err(|error| unavailable(error.to_string()))?;
        let code = answer.status();
        if !code.is_success() {
            return Err(unavailable(format!("the server answered {code}")));
        }
        let review: Review = answer
            .json()
            .await
            .map_err(|error| unavailable(error.to_string()))?;
        Ok(review
            .status
            .authenticated
            .then_some(review.status.user)
            .filter(|user| !user.name.is_empty()))
    }
}

fn digest(token: &str) -> TokenDigest {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A reviewing server over plain HTTP: `good` is alice, anything else nobody; `broken`
    /// answers 500. Records every request's path and counts them.
    struct Reviewer {
        url: String,
        reviews: Arc<AtomicUsize>,
        paths: Arc<Mutex<Vec<String>>>,
    }

    async fn reviewer() -> Reviewer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let reviews = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (counted, seen) = (reviews.clone(), paths.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buffer = [0; 4096];
                let (head, body) = loop {
                    let read = stream.read(&mut buffer).await.unwrap();
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|n| n.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            break (head.to_owned(), body.to_owned());
                        }
                    }
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let path = head.split(' ').nth(1).unwrap_or_default();
                let review: Value = serde_json::from_str(&body).unwrap();
                let version = review["apiVersion"].as_str().unwrap_or_default();
                seen.lock().unwrap().push(format!("{path} {version}"));
                let (code, status) = match review["spec"]["token"].as_str() {
                    Some("broken") => ("500 Internal Server Error", json!({})),
                    Some(token) if token == "good" || token.contains('.') => (
                        "201 Created",
                        json!({"authenticated": true, "user": {"username": "alice", "groups": ["devs"]}}),
                    ),
                    _ => ("201 Created", json!({"authenticated": false})),
                };
                let answer = json!({"kind": "TokenReview", "status": status}).to_string();
                let response = format!(
                    "HTTP/1.1 {code}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                stream.write_all(response.as_bytes()).await.unwrap();
            }
        });
        Reviewer {
            url,
            reviews,
            paths,
        }
    }

    #[tokio::test]
    async fn answers_are_kept_for_the_ttl_and_failures_are_not() {
        let server = reviewer().await;
        let review = TokenReviewAuthenticator::new(
            reqwest::Client::new(),
            &server.url,
            Duration::from_secs(600),
        );
        for _ in 0..3 {
            let alice = review.authenticate("good").await.unwrap().unwrap();
            assert_eq!(
                (alice.name.as_str(), alice.groups.as_slice()),
                ("alice", &["devs".to_owned()][..])
            );
            assert_eq!(review.authenticate("bad").await.unwrap(), None);
        }
        assert_eq!(
            server.reviews.load(Ordering::SeqCst),
            2,
            "one review per token"
        );
        for _ in 0..2 {
            assert!(matches!(
                review.authenticate("broken").await,
                Err(AuthnError::TokenReviewUnavailable(_))
            ));
        }
        assert_eq!(
            server.reviews.load(Ordering::SeqCst),
            4,
            "failures are asked again"
        );

        let expiring =
            TokenReviewAuthenticator::new(reqwest::Client::new(), &server.url, Duration::ZERO);
        expiring.authenticate("good").await.unwrap();
        expiring.authenticate("good").await.unwrap();
        assert_eq!(
            server.reviews.load(Ordering::SeqCst),
            6,
            "expired answers are asked again"
        );
    }

    #[tokio::test]
    async fn a_service_account_token_is_reviewed_in_its_own_cluster() {
        use base64::Engine;
        let server = reviewer().await;
        let b64 = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        let claims = json!({"kubernetes.io": {"clusterName": "2abc"}});
        let token = format!("{}.{}.c2ln", b64(&json!({"alg": "RS256"})), b64(&claims));
        let review = TokenReviewAuthenticator::new(
            reqwest::Client::new(),
            &format!("{}/", server.url),
            Duration::from_secs(600),
        );
        review.authenticate(&token).await.unwrap().unwrap();
        review.authenticate("good").await.unwrap().unwrap();
        assert_eq!(
            *server.paths.lock().unwrap(),
            [
                "/clusters/2abc/apis/authentication.k8s.io/v1/tokenreviews authentication.k8s.io/v1",
                "/clusters/root/apis/authentication.k8s.io/v1/tokenreviews authentication.k8s.io/v1",
            ]
        );
    }

    #[tokio::test]
    async fn a_webhook_is_asked_at_its_url_in_its_version() {
        let server = reviewer().await;
        let webhook = TokenReviewAuthenticator::webhook(
            reqwest::Client::new(),
            &format!("{}/authenticate", server.url),
            "v1beta1",
            Duration::from_secs(600),
        );
        let alice = webhook.authenticate("good").await.unwrap().unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(webhook.authenticate("bad").await.unwrap(), None);
        assert_eq!(webhook.authenticate("bad").await.unwrap(), None);
        assert_eq!(
            *server.paths.lock().unwrap(),
            [
                "/authenticate authentication.k8s.io/v1beta1",
                "/authenticate authentication.k8s.io/v1beta1",
            ],
            "refusals are kept for the TTL as well"
        );
    }
}
