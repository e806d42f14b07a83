//! The connections to one mapping's backends, pooled, verified against the mapping's
//! `backend_server_ca` and authenticated with its `proxy_client_cert` (the requestheader client
//! certificate shards accept identity headers from, CN `kcp-front-proxy` in kcp-operator's PKI).
//!
//! Two clients: requests that end soon go over HTTP/1.1 keep-alive connections, whose client
//! costs the proxy a third fewer instructions per request than an HTTP/2 stream's (no HPACK, no
//! stream bookkeeping or flow-control frames; about a tenth of the whole request's,
//! docs/performance.md "Front-proxy latency");
//! watches and followed logs, which hold their connection for as long as they last, are
//! multiplexed over HTTP/2 where the backend offers it (every kcp-rs shard does, by ALPN), as
//! upstream's proxy reaches its shards. Upgrades (`kubectl exec`, `port-forward`, `attach`:
//! SPDY or WebSocket) cannot travel over HTTP/2 and take the HTTP/1.1 client too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::mapping::PathMapping;

/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Why a mapping's TLS files are unusable.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("mapping {path:?}: reading {field} {}: {source}", file.display())]
    Read {
        path: String,
        field: &'static str,
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("mapping {path:?}: {field} {}: {reason}", file.display())]
    Invalid {
        path: String,
        field: &'static str,
        file: PathBuf,
        reason: String,
    },
    #[error("mapping {path:?}: TLS configuration: {source}")]
    Tls { path: String, source: rustls::Error },
}

/// The client type: hyper's pooling client over rustls, sending the client's body unchanged.
pub type HttpsClient = Client<HttpsConnector<HttpConnector>, Incoming>;

/// The clients of one mapping.
#[derive(Clone)]
pub struct Backend {
    /// HTTP/2 or HTTP/1.1 by ALPN: long-running requests (watches, followed logs).
    pub streams: HttpsClient,
    /// HTTP/1.1 only, keep-alive: every other request, upgrades included.
    pub http1: HttpsClient,
}

impl Backend {
    /// The clients of `mapping`, from its CA and client certificate files.
    pub fn new(mapping: &PathMapping) -> Result<Backend, BackendError> {
        let tls = client_config(mapping)?;
        let connector = || {
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            http.set_nodelay(true);
            http
        };
        let streams = HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(connector());
        let http1 = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector());
        let client = |connector| {
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .build(connector)
        };
        Ok(Backend {
            streams: client(streams),
            http1: client(http1),
        })
    }
}

fn client_config(mapping: &PathMapping) -> Result<ClientConfig, BackendError> {
    let read = |field: &'static str, file: &Path| {
        std::fs::read(file).map_err(|source| BackendError::Read {
            path: mapping.path.clone(),
            field,
            file: file.to_owned(),
            source,
        })
    };
    let invalid = |field: &'static str, file: &Path, reason: String| BackendError::Invalid {
        path: mapping.path.clone(),
        field,
        file: file.to_owned(),
        reason,
    };
    let certificates = |field: &'static str, file: &Path| {
        let pem = read(field, file)?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(field, file, e.to_string()))?;
        if certs.is_empty() {
            return Err(invalid(field, file, "no certificate in it".into()));
        }
        Ok(certs)
    };
    let mut roots = rustls::RootCertStore::empty();
    let ca_file = &mapping.backend_server_ca;
    for ca in certificates("backend_server_ca", ca_file)? {
        roots
            .add(ca)
            .map_err(|e| invalid("backend_server_ca", ca_file, e.to_string()))?;
    }
    let chain = certificates("proxy_client_cert", &mapping.proxy_client_cert)?;
    let key_file = &mapping.proxy_client_key;
    let key = PrivateKeyDer::from_pem_slice(&read("proxy_client_key", key_file)?)
        .map_err(|e| invalid("proxy_client_key", key_file, e.to_string()))?;
    let tls_error = |source| BackendError::Tls {
        path: mapping.path.clone(),
        source,
    };
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(tls_error)
}
