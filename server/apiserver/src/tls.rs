//! TLS for the secure port: the serving certificate, optional client certificates verified against
//! the client CA (so both certificate users and, later, token users can connect), ALPN `h2` and
//! `http/1.1`. Only the `ring` provider is used: two providers in one process make rustls panic.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

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

/// What a secure port presents and whom it asks for client certificates, as PEM.
#[derive(Debug, Clone, Copy)]
pub struct TlsMaterial<'a> {
    /// The serving certificate, leaf first.
    pub serving_cert_chain_pem: &'a str,
    pub serving_key_pem: &'a str,
    /// CA bundles client certificates may chain to (none: no client certificates are asked for).
    pub client_ca_pems: &'a [&'a str],
}

/// The rustls configuration of a secure port.
pub fn server_config(material: TlsMaterial<'_>) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(material.serving_cert_chain_pem).map_err(TlsError::Certificate)?;
    let key = PrivateKeyDer::from_pem_slice(material.serving_key_pem.as_bytes())
        .map_err(|e| TlsError::Key(e.to_string()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let client_cas = material.client_ca_pems;
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for pem in client_cas.iter().copied() {
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
