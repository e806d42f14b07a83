//! An HTTPS client of other kcp shards built from a kubeconfig, as upstream's shards reach the
//! root shard (`--root-shard-kubeconfig-file`) and each other (`--logical-cluster-admin-kubeconfig`).
//!
//! The kubeconfig's preferred context (upstream's `shard-base` for the root shard) is used when it
//! has one, else its current context; its CA and client certificate are used as kubectl would
//! (kcp-kubeconfig's `https::client`, which the cache client uses too). A server URL ending in
//! `/clusters/<name>` is taken back to the shard's base URL. An answer other than success becomes an `ApiError` carrying the remote
//! status code and message; a shard that cannot be reached is a 503.

use std::path::{Path, PathBuf};

use kcp_apimachinery::{ApiError, StatusReason};
use serde_json::Value;

/// Why a kubeconfig cannot be used to reach a shard.
#[derive(Debug, thiserror::Error)]
#[error("--{flag} {path}: {source}")]
pub struct ShardClientError {
    flag: &'static str,
    path: PathBuf,
    source: kcp_kubeconfig::https::HttpsError,
}

/// A client with a kubeconfig's credentials, and the base URL that kubeconfig names.
pub struct ShardClient {
    pub http: reqwest::Client,
    base_url: String,
}

impl ShardClient {
    /// Reads the kubeconfig given with `--{flag}`; its context `preferred_context` when it has
    /// one, else its current context (kcp-kubeconfig's `https::client`). Requests carry the
    /// user agent of `component` ([`user_agent`]).
    pub fn from_kubeconfig(
        flag: &'static str,
        path: &Path,
        preferred_context: &str,
        component: &str,
    ) -> Result<ShardClient, ShardClientError> {
        let agent = user_agent(component);
        let target =
            kcp_kubeconfig::https::client_with_user_agent(path, Some(preferred_context), &agent)
                .map_err(|source| ShardClientError {
                    flag,
                    path: path.to_owned(),
                    source,
                })?;
        Ok(ShardClient {
            http: target.client.clone(),
            base_url: target.base_url().to_owned(),
        })
    }

    /// The base URL the kubeconfig names.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

/// The user agent of a kcp component calling another shard, shaped as upstream's clients send
/// it (`kcp/<version> (<os>/<arch>) .../<component>`): the shard written to records the writes
/// under the field manager `kcp`, as upstream's shards do, instead of `unknown`.
pub fn user_agent(component: &str) -> String {
    format!(
        "kcp/v{} ({}/{}) {component}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Sends a request to `who`; the JSON answer on success, else an error with the remote code
/// (503 when it cannot be reached).
pub async fn send(request: reqwest::RequestBuilder, who: &str) -> Result<Value, ApiError> {
    let response = request
        .send()
        .await
        .map_err(|e| ApiError::service_unavailable(&format!("{who}: {e}")))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body);
    }
    Err(answered(who, status, &body))
}

/// The error for an answer other than success from `who`: its `Status` (code, reason, message),
/// the message naming who answered.
pub fn answered(who: &str, status: reqwest::StatusCode, body: &Value) -> ApiError {
    let mut error = ApiError::from_answer(status.as_u16(), body);
    error.message = format!("{who} answered {}: {}", status.as_u16(), error.message);
    error
}

/// An error another shard reported with `code`, kept as that code.
pub fn remote_error(code: u16, message: String) -> ApiError {
    let reason = match code {
        404 => StatusReason::NotFound,
        409 => StatusReason::Conflict,
        410 => StatusReason::Expired,
        503 => StatusReason::ServiceUnavailable,
        _ => StatusReason::InternalError,
    };
    ApiError {
        code,
        reason,
        message,
        details: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_keeps_the_remote_code_and_message() {
        let error = answered(
            "the root shard",
            reqwest::StatusCode::FORBIDDEN,
            &serde_json::json!({"message": "no"}),
        );
        assert_eq!(error.code, 403);
        assert_eq!(error.message, "the root shard answered 403: no");
    }
}
