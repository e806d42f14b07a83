//! A non-root shard's way to its `Shard` object in the root shard: the root shard's API over
//! HTTPS with the credentials of `--root-shard-kubeconfig-file`, as upstream's shards register
//! themselves through the root shard's admin kubeconfig.
//!
//! The kubeconfig's context `shard-base` (upstream's name) is used when it has one, else its
//! current context; a server URL ending in `/clusters/<name>` is taken back to the shard's base
//! URL, and requests go to `/clusters/root/apis/core.kcp.io/v1alpha1/shards`. Its CA and client
//! certificate are used as kubectl would (kcp-kubeconfig's `https::client`); an answer other than success
//! becomes an error carrying the root shard's status code and message.

use std::path::{Path, PathBuf};

use kcp_apimachinery::ApiError;
use kcp_controllers::shard_registration::ShardObjects;
use serde_json::Value;

/// How often an update lost to a concurrent write is retried.
const UPDATE_ATTEMPTS: usize = 5;

/// Why the root shard's kubeconfig cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("--root-shard-kubeconfig-file {path}: {source}")]
pub struct RootShardError {
    path: PathBuf,
    source: kcp_kubeconfig::https::HttpsError,
}

/// The root shard's `Shard`s, reached over HTTPS.
pub struct RootShards {
    client: reqwest::Client,
    collection: String,
}

impl RootShards {
    pub fn from_kubeconfig(path: &Path) -> Result<RootShards, RootShardError> {
        let target = kcp_kubeconfig::https::client(path, Some("shard-base")).map_err(|source| {
            RootShardError {
                path: path.to_owned(),
                source,
            }
        })?;
        Ok(RootShards {
            client: target.client.clone(),
            collection: format!(
                "{}/clusters/root/apis/{}/{}/{}",
                target.base_url(),
                kcp_tenancy::shard::GROUP,
                kcp_tenancy::shard::VERSION,
                kcp_tenancy::shard::RESOURCE
            ),
        })
    }

    /// Sends a request; the JSON answer on success, else an error with the root shard's code.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let response = request
            .send()
            .await
            .map_err(|e| ApiError::service_unavailable(&format!("the root shard: {e}")))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let mut error = ApiError::from_answer(status.as_u16(), &body);
        error.message = format!(
            "the root shard answered {}: {}",
            status.as_u16(),
            error.message
        );
        Err(error)
    }
}

impl ShardObjects for RootShards {
    async fn get(&self, name: &str) -> Result<Option<Value>, ApiError> {
        let request = self.client.get(format!("{}/{name}", self.collection));
        match self.send(request).await {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create(&self, object: Value) -> Result<(), ApiError> {
        let request = self.client.post(&self.collection).json(&object);
        self.send(request).await.map(|_| ())
    }

    async fn update(
        &self,
        name: &str,
        status: bool,
        change: &(dyn Fn(&Value) -> Value + Sync),
    ) -> Result<(), ApiError> {
        let url = format!("{}/{name}", self.collection);
        let target = if status {
            format!("{url}/status")
        } else {
            url.clone()
        };
        let mut last = ApiError::internal_error("no attempt");
        for _ in 0..UPDATE_ATTEMPTS {
            let current = self.send(self.client.get(&url)).await?;
            let request = self.client.put(&target).json(&change(&current));
            match self.send(request).await {
                Ok(_) => return Ok(()),
                Err(e) if e.code == 409 => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}
