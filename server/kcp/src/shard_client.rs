//! An HTTPS client of other kcp shards built from a kubeconfig, as upstream's shards reach the
//! root shard (`--root-shard-kubeconfig-file`) and each other (`--logical-cluster-admin-kubeconfig`).
//!
//! The kubeconfig's preferred context (upstream's `shard-base` for the root shard) is used when it
//! has one, else its current context; its CA and client certificate are used as kubectl would
//! (embedded data or files). A server URL ending in `/clusters/<name>` is taken back to the
//! shard's base URL. An answer other than success becomes an `ApiError` carrying the remote
//! status code and message; a shard that cannot be reached is a 503.

use std::path::{Path, PathBuf};

use kcp_apimachinery::{ApiError, StatusReason};
use kcp_kubeconfig::Kubeconfig;
use serde_json::Value;

/// Why a kubeconfig cannot be used to reach a shard.
#[derive(Debug, thiserror::Error)]
pub enum ShardClientError {
    #[error("--{flag} {path}: {source}")]
    Kubeconfig {
        flag: &'static str,
        path: PathBuf,
        source: kcp_kubeconfig::KubeconfigError,
    },
    #[error("--{flag} {path}: {source}")]
    Context {
        flag: &'static str,
        path: PathBuf,
        source: kcp_kubeconfig::SelectError,
    },
    #[error("--{flag} {path}: {message}")]
    Client {
        flag: &'static str,
        path: PathBuf,
        message: String,
    },
}

/// A client with a kubeconfig's credentials, and the base URL that kubeconfig names.
pub struct ShardClient {
    pub http: reqwest::Client,
    base_url: String,
}

/// `server` without a trailing `/clusters/<name>`: the shard's base URL.
fn base_url(server: &str) -> &str {
    let server = server.trim_end_matches('/');
    match server.rfind("/clusters/") {
        Some(at) => &server[..at],
        None => server,
    }
}

impl ShardClient {
    /// Reads the kubeconfig given with `--{flag}`; its context `preferred_context` when it has
    /// one, else its current context.
    pub fn from_kubeconfig(
        flag: &'static str,
        path: &Path,
        preferred_context: &str,
    ) -> Result<ShardClient, ShardClientError> {
        let kubeconfig_error = |source| ShardClientError::Kubeconfig {
            flag,
            path: path.to_owned(),
            source,
        };
        let client_error = |message: String| ShardClientError::Client {
            flag,
            path: path.to_owned(),
            message,
        };
        let kubeconfig = Kubeconfig::read(path).map_err(kubeconfig_error)?;
        let context = kubeconfig
            .context(preferred_context)
            .map(|_| preferred_context);
        let selected = kubeconfig
            .select(context)
            .map_err(|source| ShardClientError::Context {
                flag,
                path: path.to_owned(),
                source,
            })?;
        let dir = kcp_kubeconfig::dir_of(path);
        let mut builder = reqwest::Client::builder().use_rustls_tls();
        if let Some(ca) = selected.cluster.ca_pem(dir).map_err(kubeconfig_error)? {
            let ca =
                reqwest::Certificate::from_pem(&ca).map_err(|e| client_error(e.to_string()))?;
            builder = builder.add_root_certificate(ca);
        }
        if let (Some(mut cert), Some(key)) = (
            selected
                .user
                .client_certificate_pem(dir)
                .map_err(kubeconfig_error)?,
            selected
                .user
                .client_key_pem(dir)
                .map_err(kubeconfig_error)?,
        ) {
            cert.push(b'\n');
            cert.extend_from_slice(&key);
            let identity =
                reqwest::Identity::from_pem(&cert).map_err(|e| client_error(e.to_string()))?;
            builder = builder.identity(identity);
        }
        let http = builder.build().map_err(|e| client_error(e.to_string()))?;
        Ok(ShardClient {
            http,
            base_url: base_url(selected.server()).to_string(),
        })
    }

    /// The base URL the kubeconfig names.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
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

/// The error for an answer other than success from `who`.
pub fn answered(who: &str, status: reqwest::StatusCode, body: &Value) -> ApiError {
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error"));
    remote_error(
        status.as_u16(),
        format!("{who} answered {}: {message}", status.as_u16()),
    )
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
    fn a_cluster_url_is_taken_back_to_the_base_url() {
        assert_eq!(
            base_url("https://127.0.0.1:6443/clusters/root"),
            "https://127.0.0.1:6443"
        );
        assert_eq!(base_url("https://root:6443/"), "https://root:6443");
        assert_eq!(
            base_url("https://proxy/prefix/clusters/root"),
            "https://proxy/prefix"
        );
    }

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
