//! `--service-account-lookup` against another server: a service-account token whose signature and
//! claims are good is still refused once its ServiceAccount (or the token Secret it is bound to)
//! is gone or was recreated with another UID. A shard checks the tokens of the logical clusters
//! it holds in its own store; this asks a server that can read the token's logical cluster.
//!
//! Two callers, as upstream's two:
//! - the front-proxy asks the shard that holds the token's logical cluster (the index names it),
//!   with `--shards-kubeconfig`'s credentials. Upstream's proxy builds kube's service-account
//!   authenticator with a getter on `--root-kubeconfig` (`NewClusterGetterFromClient`), so a
//!   workspace on another shard than root fails its lookup there; here it does not.
//! - a shard asks, for a logical cluster it does not hold, through
//!   `--external-logical-cluster-admin-kubeconfig` (the front-proxy, which routes the request to
//!   the right shard), as upstream's shard does (`pkg/server/serviceaccount`'s cache over
//!   `pkg/shardlookup`: local logical clusters from its informers, others fetched with the
//!   external logical-cluster admin's client and kept in a TTL cache).
//!
//! Answers are kept by the token's claims: a success for [`SUCCESS_TTL`] (kube's token success
//! cache; upstream's shard keeps the fetched objects for 1 minute on top of it), a refusal (the
//! object is gone or recreated) for [`REFUSAL_TTL`] (upstream: 10 s). A lookup that fails (the
//! server cannot be reached, answers an error) is not kept, and refuses. So a deleted
//! ServiceAccount's token, or one bound to a deleted Secret, stops working within
//! [`SUCCESS_TTL`] wherever its workspace is.

use std::time::Duration;

use serde::Deserialize;

use crate::KeptAnswers;
use crate::service_account::{BoundObjectKind, ServiceAccountToken};

/// How long a successful lookup is believed (kube's `--token-success-cache-ttl` default).
pub const SUCCESS_TTL: Duration = Duration::from_secs(10);

/// How long a lookup that found the objects gone or recreated is believed.
pub const REFUSAL_TTL: Duration = Duration::from_secs(5);

/// Answers kept at most.
const MAX_KEPT: usize = 10_000;

/// Why a token's objects do not check out. Each is a 401; the text goes to the log.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LookupError {
    #[error("the token's logical cluster {0:?} is not routable")]
    UnknownCluster(String),
    #[error("{kind}/{name} no longer exists")]
    Gone { kind: &'static str, name: String },
    #[error("{kind}/{name} was recreated since the token was issued")]
    Recreated { kind: &'static str, name: String },
    #[error("looking up {kind}/{name}: {reason}")]
    Failed {
        kind: &'static str,
        name: String,
        reason: String,
    },
}

impl LookupError {
    /// Whether the answer says something about the objects (kept), not about the lookup.
    fn is_verdict(&self) -> bool {
        matches!(
            self,
            LookupError::Gone { .. } | LookupError::Recreated { .. }
        )
    }
}

/// `<base>/clusters/<cluster>`: where a logical cluster's objects are read on a server.
pub fn cluster_url(base: &str, cluster: &str) -> String {
    format!("{}/clusters/{cluster}", base.trim_end_matches('/'))
}

/// Checks service-account tokens against another server.
#[derive(Debug)]
pub struct ServiceAccountLookup {
    /// A client that may `get` ServiceAccounts and Secrets in every logical cluster.
    http: reqwest::Client,
    /// Verdicts by the token's claims.
    kept: KeptAnswers<Result<(), LookupError>>,
}

#[derive(Deserialize)]
struct Object {
    #[serde(default)]
    metadata: Metadata,
}

#[derive(Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    uid: String,
}

impl ServiceAccountLookup {
    pub fn new(http: reqwest::Client) -> ServiceAccountLookup {
        ServiceAccountLookup {
            http,
            kept: KeptAnswers::new(MAX_KEPT, |verdict| match verdict {
                Ok(()) => SUCCESS_TTL,
                Err(_) => REFUSAL_TTL,
            }),
        }
    }

    /// Whether the ServiceAccount `token` names (and its bound Secret) still exist with the
    /// UIDs it names, read under the URL `cluster_url` gives for the token's logical cluster
    /// (`None`: no server holds it). `cluster_url` is only called when no kept answer applies.
    pub async fn check(
        &self,
        token: &ServiceAccountToken,
        cluster_url: impl FnOnce() -> Option<String>,
    ) -> Result<(), LookupError> {
        let secret = token
            .bound_object
            .as_ref()
            .filter(|bound| bound.kind == BoundObjectKind::Secret);
        let key = format!(
            "{}/{}/{}/{}/{}",
            token.cluster,
            token.namespace,
            token.uid,
            token.name,
            secret.map_or("", |bound| bound.uid.as_str())
        );
        if let Some(verdict) = self.kept.get(&key) {
            return verdict;
        }
        let base =
            cluster_url().ok_or_else(|| LookupError::UnknownCluster(token.cluster.clone()))?;
        let namespace = format!("{base}/api/v1/namespaces/{}", token.namespace);
        let mut verdict = self
            .exists(&namespace, "serviceaccounts", &token.name, &token.uid)
            .await;
        if let (Ok(()), Some(secret)) = (&verdict, secret) {
            verdict = self
                .exists(&namespace, "secrets", &secret.name, &secret.uid)
                .await;
        }
        match &verdict {
            Ok(()) => self.kept.keep(key, Ok(())),
            Err(error) if error.is_verdict() => self.kept.keep(key, verdict.clone()),
            Err(_) => {}
        }
        verdict
    }

    async fn exists(
        &self,
        namespace: &str,
        kind: &'static str,
        name: &str,
        uid: &str,
    ) -> Result<(), LookupError> {
        let failed = |reason: String| LookupError::Failed {
            kind,
            name: name.to_owned(),
            reason,
        };
        let answer = self
            .http
            .get(format!("{namespace}/{kind}/{name}"))
            .send()
            .await
            .map_err(|error| failed(error.to_string()))?;
        match answer.status().as_u16() {
            200 => {}
            404 => {
                return Err(LookupError::Gone {
                    kind,
                    name: name.to_owned(),
                });
            }
            code => return Err(failed(format!("the server answered {code}"))),
        }
        let object: Object = answer
            .json()
            .await
            .map_err(|error| failed(error.to_string()))?;
        if object.metadata.uid == uid {
            Ok(())
        } else {
            Err(LookupError::Recreated {
                kind,
                name: name.to_owned(),
            })
        }
    }
}
