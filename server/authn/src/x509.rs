//! Client certificates (`--client-ca-file`): the certificate's CN is the user, its O values the
//! groups, as kube-apiserver maps them.
//!
//! The TLS layer asks for a client certificate without requiring one, and without checking it
//! against any particular CA: two CAs matter (the client CA and the front proxy's request-header
//! CA) and a request may well carry a bearer token instead. So each authenticator verifies the
//! chain against its own bundle here, with rustls' WebPKI verifier on the ring provider.

use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{CertificateError, RootCertStore};
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::error::AuthnError;
use crate::pem::{self, PemError};
use crate::user::UserInfo;

#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    #[error(transparent)]
    Pem(#[from] PemError),
    #[error("CA bundle holds no certificate")]
    NoCertificates,
    #[error("CA certificate rejected: {0}")]
    InvalidCa(String),
}

/// The subject fields authentication cares about, from a verified leaf certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    pub(crate) common_name: String,
    pub(crate) organizations: Vec<String>,
}

/// Verifies client chains against one CA bundle.
#[derive(Debug)]
pub(crate) struct ChainVerifier {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl ChainVerifier {
    pub(crate) fn from_pem(ca_bundle_pem: &str) -> Result<ChainVerifier, X509Error> {
        let mut roots = RootCertStore::empty();
        for block in pem::parse(ca_bundle_pem)? {
            if block.label == "CERTIFICATE" {
                roots
                    .add(CertificateDer::from(block.der))
                    .map_err(|error| X509Error::InvalidCa(error.to_string()))?;
            }
        }
        if roots.is_empty() {
            return Err(X509Error::NoCertificates);
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|error| X509Error::InvalidCa(error.to_string()))?;
        Ok(ChainVerifier { verifier })
    }

    /// `Ok(None)` when there is no certificate or it does not chain to this bundle; `Err` when it
    /// does chain but is unusable (expired, not yet valid, not for client auth, ...).
    pub(crate) fn verify(
        &self,
        chain: &[CertificateDer<'_>],
    ) -> Result<Option<Subject>, AuthnError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok(None);
        };
        match self
            .verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
        {
            Ok(_) => {}
            Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer | CertificateError::BadSignature,
            )) => return Ok(None),
            Err(error) => return Err(AuthnError::Certificate(error.to_string())),
        }
        let (_, certificate) = x509_parser::parse_x509_certificate(leaf)
            .map_err(|_| AuthnError::Certificate("unparsable certificate".to_owned()))?;
        let subject = certificate.subject();
        let text = |attribute: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            attribute.as_str().map(str::to_owned).ok()
        };
        Ok(Some(Subject {
            common_name: subject
                .iter_common_name()
                .next()
                .and_then(text)
                .unwrap_or_default(),
            organizations: subject.iter_organization().filter_map(text).collect(),
        }))
    }
}

/// Authenticates requests by their client certificate.
#[derive(Debug)]
pub struct CertificateAuthenticator {
    verifier: ChainVerifier,
}

impl CertificateAuthenticator {
    /// Trusts client certificates issued (directly or through intermediates) by the CAs in
    /// `ca_bundle_pem`.
    pub fn from_pem(ca_bundle_pem: &str) -> Result<CertificateAuthenticator, X509Error> {
        Ok(CertificateAuthenticator {
            verifier: ChainVerifier::from_pem(ca_bundle_pem)?,
        })
    }

    /// The user named by the leaf certificate. `Ok(None)` when there is no certificate, it is
    /// not from this CA, or it has no CN (kube ignores such certificates).
    pub fn authenticate(
        &self,
        chain: &[CertificateDer<'_>],
    ) -> Result<Option<UserInfo>, AuthnError> {
        let Some(subject) = self.verifier.verify(chain)? else {
            return Ok(None);
        };
        if subject.common_name.is_empty() {
            return Ok(None);
        }
        Ok(Some(UserInfo {
            name: subject.common_name,
            groups: subject.organizations,
            ..UserInfo::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::Ca;

    #[test]
    fn maps_cn_and_every_o() {
        let ca = Ca::new("client-ca");
        let authenticator = CertificateAuthenticator::from_pem(&ca.pem()).unwrap();
        let user = authenticator
            .authenticate(&[ca.client("alice", &["devs", "ops"])])
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["devs", "ops"]);
        assert_eq!(user.uid, "");
        assert_eq!(authenticator.authenticate(&[]).unwrap(), None);
    }

    #[test]
    fn certificates_of_other_cas_are_not_ours() {
        let ca = Ca::new("client-ca");
        let other = Ca::new("client-ca");
        let authenticator = CertificateAuthenticator::from_pem(&ca.pem()).unwrap();
        assert_eq!(
            authenticator
                .authenticate(&[other.client("mallory", &["system:masters"])])
                .unwrap(),
            None
        );
        let bundle = format!("{}{}", ca.pem(), other.pem());
        let both = CertificateAuthenticator::from_pem(&bundle).unwrap();
        assert!(
            both.authenticate(&[other.client("bob", &[])])
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn expired_certificates_of_this_ca_fail() {
        let ca = Ca::new("client-ca");
        let authenticator = CertificateAuthenticator::from_pem(&ca.pem()).unwrap();
        assert!(matches!(
            authenticator.authenticate(&[ca.expired_client("alice")]),
            Err(AuthnError::Certificate(_))
        ));
    }

    #[test]
    fn certificates_without_cn_are_ignored() {
        let ca = Ca::new("client-ca");
        let authenticator = CertificateAuthenticator::from_pem(&ca.pem()).unwrap();
        assert_eq!(
            authenticator
                .authenticate(&[ca.client("", &["g"])])
                .unwrap(),
            None
        );
    }

    #[test]
    fn bundles_need_a_certificate() {
        assert!(matches!(
            CertificateAuthenticator::from_pem("nothing"),
            Err(X509Error::NoCertificates)
        ));
    }
}
