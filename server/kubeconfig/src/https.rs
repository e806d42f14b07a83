//! An HTTPS client that connects as kubectl would with a kubeconfig (feature `https`): the server
//! of the selected context, its CA and its user's client certificate (embedded or files next to
//! the kubeconfig). Servers of kcp-rs that call other servers (a shard calling the root shard, a
//! shard calling the cache server) are handed kubeconfigs by flags; this is the one place that
//! turns such a file into a client.

use std::path::Path;

use crate::{Kubeconfig, KubeconfigError, SelectError, dir_of};

/// A client for the server a kubeconfig names.
#[derive(Debug, Clone)]
pub struct HttpsClient {
    pub client: reqwest::Client,
    /// The cluster's `server` URL, as written.
    pub server: String,
}

impl HttpsClient {
    /// The server without a trailing `/clusters/<name>` (kcp's admin kubeconfigs name a logical
    /// cluster): the base URL of the server, for callers that build their own paths.
    pub fn base_url(&self) -> &str {
        let server = self.server.trim_end_matches('/');
        match server.rfind("/clusters/") {
            Some(at) => &server[..at],
            None => server,
        }
    }
}

/// Why a kubeconfig gives no client.
#[derive(Debug, thiserror::Error)]
pub enum HttpsError {
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(transparent)]
    Context(#[from] SelectError),
    #[error("building the HTTPS client: {0}")]
    Client(String),
}

/// A client for the kubeconfig at `path`: its context `preferred_context` when it has one, else
/// its current context.
pub fn client(path: &Path, preferred_context: Option<&str>) -> Result<HttpsClient, HttpsError> {
    build(path, preferred_context, None)
}

/// Like [`client`], sending `user_agent` with every request: the API server names the field
/// manager of a write without `fieldManager` after the agent's first `/`-separated part, as
/// kube-apiserver does (a client without one writes as `unknown`).
pub fn client_with_user_agent(
    path: &Path,
    preferred_context: Option<&str>,
    user_agent: &str,
) -> Result<HttpsClient, HttpsError> {
    build(path, preferred_context, Some(user_agent))
}

fn build(
    path: &Path,
    preferred_context: Option<&str>,
    user_agent: Option<&str>,
) -> Result<HttpsClient, HttpsError> {
    let kubeconfig = Kubeconfig::read(path)?;
    let context = preferred_context.filter(|name| kubeconfig.context(name).is_some());
    let selected = kubeconfig.select(context)?;
    let dir = dir_of(path);
    let failed = |e: reqwest::Error| HttpsError::Client(e.to_string());
    let mut builder = reqwest::Client::builder().use_rustls_tls();
    if let Some(ca) = selected.cluster.ca_pem(dir)? {
        builder =
            builder.add_root_certificate(reqwest::Certificate::from_pem(&ca).map_err(failed)?);
    }
    if let (Some(mut cert), Some(key)) = (
        selected.user.client_certificate_pem(dir)?,
        selected.user.client_key_pem(dir)?,
    ) {
        cert.push(b'\n');
        cert.extend_from_slice(&key);
        builder = builder.identity(reqwest::Identity::from_pem(&cert).map_err(failed)?);
    }
    if let Some(user_agent) = user_agent {
        builder = builder.user_agent(user_agent);
    }
    Ok(HttpsClient {
        client: builder.build().map_err(failed)?,
        server: selected.server().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_server(server: &str) -> HttpsClient {
        HttpsClient {
            client: reqwest::Client::new(),
            server: server.to_owned(),
        }
    }

    #[test]
    fn a_cluster_url_is_taken_back_to_the_base_url() {
        for (server, base) in [
            (
                "https://127.0.0.1:6443/clusters/root",
                "https://127.0.0.1:6443",
            ),
            ("https://root:6443/", "https://root:6443"),
            ("https://proxy/prefix/clusters/root", "https://proxy/prefix"),
        ] {
            assert_eq!(with_server(server).base_url(), base);
        }
    }
}
