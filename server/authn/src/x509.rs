//! Client certificates (`--client-ca-file`): the certificate's CN is the user, its O values the
//! groups, as kube-apiserver maps them.
//!
//! The TLS layer asks for a client certificate without requiring one, and without checking it
//! against any particular CA: two CAs matter (the client CA and the front proxy's request-header
//! CA) and a request may well carry a bearer token instead. So each authenticator verifies the
//! chain against its own bundle here, with rustls' WebPKI verifier on the ring provider.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
///
/// A client sends the same chain with every request of a connection (and usually of every
/// connection), and a signature check costs more than the rest of a GET, so verdicts are kept for
/// a short while, keyed by the chain's exact bytes and never past the leaf's expiry.
#[derive(Debug)]
pub(crate) struct ChainVerifier {
    verifier: Arc<dyn ClientCertVerifier>,
    recent: Mutex<HashMap<Vec<u8>, Verdict>>,
}

/// What a chain verified to, and until when that holds.
type Verdict = (Option<Subject>, Instant);

/// How long a verdict is reused.
const VERDICT_TTL: Duration = Duration::from_secs(60);
/// At most this many chains are remembered (then the memory starts over).
const VERDICTS_KEPT: usize = 1024;

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
        Ok(ChainVerifier {
            verifier,
            recent: Mutex::new(HashMap::new()),
        })
    }

    /// `Ok(None)` when there is no certificate or it does not chain to this bundle; `Err` when it
    /// does chain but is unusable (expired, not yet valid, not for client auth, ...).
    pub(crate) fn verify(
        &self,
        chain: &[CertificateDer<'_>],
    ) -> Result<Option<Subject>, AuthnError> {
        if chain.is_empty() {
            return Ok(None);
        }
        // Copied certificate by certificate: byte by byte, building the key cost more than
        // looking it up.
        let mut key = Vec::with_capacity(chain.iter().map(|c| c.len()).sum());
        for certificate in chain {
            key.extend_from_slice(certificate);
        }
        let now = Instant::now();
        {
            let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((verdict, until)) = recent.get(&key)
                && *until > now
            {
                return Ok(verdict.clone());
            }
        }
        let (verdict, valid_for) = self.verify_uncached(chain)?;
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= VERDICTS_KEPT {
            recent.clear();
        }
        recent.insert(key, (verdict.clone(), now + valid_for.min(VERDICT_TTL)));
        Ok(verdict)
    }

    /// The verdict and how long it holds (until the leaf expires; unbounded for foreign chains).
    fn verify_uncached(
        &self,
        chain: &[CertificateDer<'_>],
    ) -> Result<(Option<Subject>, Duration), AuthnError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok((None, VERDICT_TTL));
        };
        match self
            .verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
        {
            Ok(_) => {}
            Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer | CertificateError::BadSignature,
            )) => return Ok((None, VERDICT_TTL)),
            Err(error) => return Err(AuthnError::Certificate(error.to_string())),
        }
        let (_, certificate) = x509_parser::parse_x509_certificate(leaf)
            .map_err(|_| AuthnError::Certificate("unparsable certificate".to_owned()))?;
        let subject = certificate.subject();
        let text = |attribute: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            attribute.as_str().map(str::to_owned).ok()
        };
        let remaining = certificate
            .validity()
            .time_to_expiration()
            .and_then(|left| Duration::try_from(left).ok())
            .unwrap_or_default();
        let subject = Subject {
            common_name: subject
                .iter_common_name()
                .next()
                .and_then(text)
                .unwrap_or_default(),
            organizations: subject.iter_organization().filter_map(text).collect(),
        };
        Ok((Some(subject), remaining))
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
    fn verdicts_are_remembered_per_chain() {
        let ca = Ca::new("client-ca");
        let other = Ca::new("client-ca");
        let authenticator = CertificateAuthenticator::from_pem(&ca.pem()).unwrap();
        let alice = ca.client("alice", &[]);
        let first = authenticator
            .authenticate(std::slice::from_ref(&alice))
            .unwrap();
        let again = authenticator.authenticate(&[alice]).unwrap();
        assert_eq!(first, again);
        assert_eq!(first.unwrap().name, "alice");
        // A chain of another CA is remembered as not ours, and does not poison alice's entry.
        assert_eq!(
            authenticator
                .authenticate(&[other.client("alice", &[])])
                .unwrap(),
            None
        );
        assert_eq!(authenticator.verifier.recent.lock().unwrap().len(), 2);
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
