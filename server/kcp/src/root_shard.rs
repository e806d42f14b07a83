//! A non-root shard's way to its `Shard` object in the root shard: the root shard's API over
//! HTTPS with the credentials of `--root-shard-kubeconfig-file`, as upstream's shards register
//! themselves through the root shard's admin kubeconfig.
//!
//! The kubeconfig's context `shard-base` (upstream's name) is used when it has one, else its
//! current context (see `shard_client`); requests go to
//! `/clusters/root/apis/core.kcp.io/v1alpha1/shards`. (The list of shards the scheduler places
//! over comes from the cache server instead, where the root shard replicates them.)

use std::path::Path;

use kcp_apimachinery::ApiError;
use kcp_controllers::shard_registration::ShardObjects;
use serde_json::Value;

use crate::shard_client::{self, ShardClient, ShardClientError};

/// How often an update lost to a concurrent write is retried.
const UPDATE_ATTEMPTS: usize = 5;
/// Who answers, in error messages.
const WHO: &str = "the root shard";

/// The root shard's `Shard`s, reached over HTTPS.
pub struct RootShards {
    client: reqwest::Client,
    collection: String,
}

impl RootShards {
    /// The client of shard `shard`'s registration, managing its `Shard` as `kcp`.
    pub fn from_kubeconfig(path: &Path, shard: &str) -> Result<RootShards, ShardClientError> {
        let client = ShardClient::from_kubeconfig(
            "root-shard-kubeconfig-file",
            path,
            "shard-base",
            &format!("kcp-shard+{shard}"),
        )?;
        Ok(RootShards {
            collection: format!(
                "{}/clusters/root/apis/{}/{}/{}",
                client.base_url(),
                kcp_tenancy::shard::GROUP,
                kcp_tenancy::shard::VERSION,
                kcp_tenancy::shard::RESOURCE
            ),
            client: client.http,
        })
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        shard_client::send(request, WHO).await
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
