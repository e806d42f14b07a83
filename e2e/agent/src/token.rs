//! Service-account tokens for pods, from the host's TokenRequest API
//! (`POST .../serviceaccounts/<sa>/token`), refreshed before they expire.
//!
//! Kubelet asks for a token per pod, audience and lifetime and rewrites the projected file once
//! 80% of its lifetime has passed; clients re-read the file (client-go does every minute). The
//! agent does the same so long-running pods (the operator) keep a valid token.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::Mutex;

use crate::error::{Error, Result};

/// The default lifetime kubelet asks for (one hour and a little, so it is recognisable).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3607;

struct Cached {
    token: String,
    refresh_at: Instant,
}

/// The tokens of one pod's service account.
pub struct Tokens {
    api: Api<ServiceAccount>,
    service_account: String,
    cache: Mutex<HashMap<(Option<String>, i64), Cached>>,
}

impl Tokens {
    pub fn new(client: kube::Client, namespace: &str, service_account: &str) -> Tokens {
        Tokens {
            api: Api::namespaced(client, namespace),
            service_account: service_account.to_owned(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// A valid token for `audience` (None: the API server's audiences), fetched when missing or
    /// past 80% of its lifetime.
    pub async fn get(&self, audience: Option<&str>, expiration_seconds: i64) -> Result<String> {
        let key = (audience.map(str::to_owned), expiration_seconds);
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.get(&key)
            && Instant::now() < cached.refresh_at
        {
            return Ok(cached.token.clone());
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audience.map(|a| vec![a.to_owned()]).unwrap_or_default(),
                expiration_seconds: Some(expiration_seconds),
                bound_object_ref: None,
            },
            ..Default::default()
        };
        let issued = Instant::now();
        let response = self
            .api
            .create_token_request(&self.service_account, &PostParams::default(), &request)
            .await
            .map_err(|error| {
                Error::Pod(format!(
                    "requesting a token for service account {:?}: {error}",
                    self.service_account
                ))
            })?;
        let status = response
            .status
            .ok_or_else(|| Error::Pod("the TokenRequest answer has no status".to_owned()))?;
        let lifetime = status
            .expiration_timestamp
            .0
            .duration_since(jiff::Timestamp::now())
            .try_into()
            .unwrap_or(Duration::from_secs(
                u64::try_from(expiration_seconds).unwrap_or(600),
            ));
        let refresh_at = issued + lifetime.mul_f64(0.8);
        cache.insert(
            key,
            Cached {
                token: status.token.clone(),
                refresh_at,
            },
        );
        Ok(status.token)
    }
}
