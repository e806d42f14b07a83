//! The TLS client of the kubelet connections, from kube-apiserver's flags:
//! `--kubelet-client-certificate`/`--kubelet-client-key` (the identity the kubelet checks
//! against its `--client-ca-file`) and `--kubelet-certificate-authority` (verifies the kubelet's
//! serving certificate; without it, as kube-apiserver, the serving certificate is not verified).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// The kubelet client flags.
#[derive(Debug, Clone)]
pub struct KubeletClientFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub certificate_authority: Option<PathBuf>,
}

/// Why the kubelet client credentials are unusable.
#[derive(Debug, thiserror::Error)]
pub enum KubeletTlsError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("kubelet client TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

fn read(path: &Path) -> Result<Vec<u8>, KubeletTlsError> {
    std::fs::read(path).map_err(|source| KubeletTlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn invalid(path: &Path, reason: impl ToString) -> KubeletTlsError {
    KubeletTlsError::Invalid {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, KubeletTlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(path)?)
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(path, e))?;
    if certs.is_empty() {
        return Err(invalid(path, "no certificate in it"));
    }
    Ok(certs)
}

/// The client configuration (HTTP/1.1 only: the streaming protocols upgrade HTTP/1.1).
pub fn client_config(files: &KubeletClientFiles) -> Result<Arc<ClientConfig>, KubeletTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &files.certificate_authority {
        Some(ca_file) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in certificates(ca_file)? {
                roots.add(ca).map_err(|e| invalid(ca_file, e))?;
            }
            builder.with_root_certificates(roots)
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider))),
    };
    let chain = certificates(&files.certificate)?;
    let key =
        PrivateKeyDer::from_pem_slice(&read(&files.key)?).map_err(|e| invalid(&files.key, e))?;
    let mut config = builder.with_client_auth_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts any serving certificate (kube-apiserver without `--kubelet-certificate-authority`),
/// still checking that the handshake is signed by its key.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["client".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.join("c.crt"), dir.join("c.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    #[test]
    fn credentials_load_with_and_without_a_ca() {
        let dir = tempfile::tempdir().unwrap();
        let (certificate, key) = write_pair(dir.path());
        let files = KubeletClientFiles {
            certificate: certificate.clone(),
            key: key.clone(),
            certificate_authority: None,
        };
        assert!(client_config(&files).is_ok());
        let with_ca = KubeletClientFiles {
            certificate_authority: Some(certificate.clone()),
            ..files.clone()
        };
        assert!(client_config(&with_ca).is_ok());
        let missing = KubeletClientFiles {
            certificate: dir.path().join("missing.crt"),
            ..files.clone()
        };
        assert!(matches!(
            client_config(&missing),
            Err(KubeletTlsError::Read { .. })
        ));
        let not_a_key = KubeletClientFiles {
            key: certificate,
            ..files
        };
        assert!(matches!(
            client_config(&not_a_key),
            Err(KubeletTlsError::Invalid { .. })
        ));
    }
}
