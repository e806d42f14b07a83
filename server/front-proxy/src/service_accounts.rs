//! `--service-account-lookup` at the proxy: a service-account token whose signature and claims
//! are good is still refused once its ServiceAccount (or the token Secret it is bound to) is gone
//! or was recreated with another UID, as at the shard.
//!
//! Upstream's proxy builds kube's service-account authenticator with a token getter on
//! `--root-kubeconfig` (`serviceaccountcontroller.NewClusterGetterFromClient`, informers never
//! started), so each lookup is a GET at the root shard under `/clusters/<clusterName claim>`,
//! and kube's token cache keeps a success for 10 s. A workspace on another shard is not at the
//! root shard, so there its tokens fail the lookup. Here the lookup goes to the shard that holds
//! the token's logical cluster (the index knows it), with `--shards-kubeconfig`'s credentials,
//! and a success is kept for the same 10 s: a deleted ServiceAccount's token stops working
//! through the proxy within that time, wherever its workspace is.

use std::time::Duration;

use kcp_authn::{BoundObjectKind, ServiceAccountToken};
use serde::Deserialize;

use crate::answers::KeptAnswers;
use crate::route::Resolve;

/// How long a successful lookup is believed (kube's `--token-success-cache-ttl` default).
pub const SUCCESS_TTL: Duration = Duration::from_secs(10);

/// Successes kept at most.
const MAX_KEPT: usize = 10_000;

/// Why a token's objects do not check out. Each is a 401 at the proxy; the text goes to the log.
#[derive(Debug, thiserror::Error)]
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

/// Checks service-account tokens against the shard that holds their logical cluster.
#[derive(Debug)]
pub struct ServiceAccountLookup {
    /// `--shards-kubeconfig`'s client (it may read every logical cluster).
    http: reqwest::Client,
    /// Tokens (by their claims) found good.
    found: KeptAnswers<()>,
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
            found: KeptAnswers::new(MAX_KEPT, |()| SUCCESS_TTL),
        }
    }

    /// Whether the ServiceAccount `token` names (and its bound Secret) still exist with the
    /// UIDs it names, on the shard `resolver` routes the token's logical cluster to.
    pub async fn check(
        &self,
        token: &ServiceAccountToken,
        resolver: &dyn Resolve,
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
        if self.found.get(&key).is_some() {
            return Ok(());
        }
        let route = resolver
            .resolve(&token.cluster)
            .map_err(|_| LookupError::UnknownCluster(token.cluster.clone()))?;
        let namespace = format!(
            "{}/clusters/{}/api/v1/namespaces/{}",
            route.base_url, route.cluster, token.namespace
        );
        self.exists(&namespace, "serviceaccounts", &token.name, &token.uid)
            .await?;
        if let Some(secret) = secret {
            self.exists(&namespace, "secrets", &secret.name, &secret.uid)
                .await?;
        }
        self.found.keep(key, ());
        Ok(())
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
            code => return Err(failed(format!("the shard answered {code}"))),
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
