//! TLS for the secure port: the serving certificate, optional client certificates verified against
//! the client CA (so both certificate users and, later, token users can connect), ALPN `h2` and
//! `http/1.1`. Only the `ring` provider is used: two providers in one process make rustls panic.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::server::ServerConfig as ApiServerConfig;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("serving certificate: {0}")]
    Certificate(String),
    #[error("serving key: {0}")]
    Key(String),
    #[error("client CA: {0}")]
    ClientCa(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate found in PEM data".into());
    }
    Ok(certs)
}

/// The rustls configuration of the secure port.
pub fn server_config(config: &ApiServerConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(&config.serving_cert_chain_pem).map_err(TlsError::Certificate)?;
    let key = PrivateKeyDer::from_pem_slice(config.serving_key_pem.as_bytes())
        .map_err(|e| TlsError::Key(e.to_string()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let client_cas: Vec<&String> = config
        .client_ca_pem
        .iter()
        .chain(&config.requestheader_ca_pem)
        .collect();
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for pem in client_cas {
            for ca in certificates(pem).map_err(TlsError::ClientCa)? {
                roots
                    .add(ca)
                    .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            }
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut tls = builder.with_single_cert(chain, key)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(tls))
}
