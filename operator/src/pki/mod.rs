//! The operator's own PKI (rcgen), replacing upstream's cert-manager dependency.
//!
//! Everything here is pure: the controllers read the existing Secrets, ask this module what to
//! keep and what to (re-)issue, and write the result back. Keys are ECDSA P-256 (ring cannot
//! generate RSA keys); brought CAs may use RSA or ECDSA keys.

pub mod authority;
pub mod catalog;
pub mod inspect;
pub mod material;
mod pkcs1;
pub mod renewal;
pub mod request;
pub mod revision;
mod subject;

pub use authority::Authority;
pub use material::TlsMaterial;
pub use renewal::IssueReason;
pub use request::{CertificateRequest, Usage};

/// Failures of certificate generation or of reading stored material.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to generate a key pair")]
    KeyGeneration(#[source] rcgen::Error),
    #[error("failed to sign a certificate")]
    Signing(#[source] rcgen::Error),
    #[error("CA certificate is not a readable X.509 certificate")]
    InvalidCaCertificate(#[source] rcgen::Error),
    #[error("private key is not usable: {0}")]
    InvalidPrivateKey(&'static str),
    #[error("{0:?} is not a valid DNS name")]
    InvalidDnsName(String),
    #[error("certificate is not a readable X.509 certificate")]
    UnreadableCertificate,
    #[error("certificate validity is out of range")]
    TimeOutOfRange,
    #[error("failed to rewrite the certificate subject")]
    Subject(#[source] kcp_der::DerError),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jiff::{SignedDuration, Timestamp};
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    use x509_parser::pem::parse_x509_pem;

    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("valid timestamp")
    }

    fn der(pem: &str) -> Vec<u8> {
        parse_x509_pem(pem.as_bytes()).expect("PEM").1.contents
    }

    /// Verifies `child` was signed by `parent` with x509-parser's ring-backed verifier.
    fn assert_signed_by(child_pem: &str, parent_pem: &str) {
        let (child_der, parent_der) = (der(child_pem), der(parent_pem));
        let (_, child) = x509_parser::parse_x509_certificate(&child_der).expect("child parses");
        let (_, parent) = x509_parser::parse_x509_certificate(&parent_der).expect("parent parses");
        child
            .verify_signature(Some(parent.public_key()))
            .expect("signature verifies");
        assert_eq!(child.issuer(), parent.subject());
    }

    #[test]
    fn root_intermediate_and_leaf_chain_verifies() {
        let root =
            Authority::generate_root(&CertificateRequest::ca("root-ca"), now()).expect("root");
        let server_ca = root
            .issue_authority(&CertificateRequest::ca("server-ca"), now())
            .expect("intermediate");
        let leaf = server_ca
            .issue(
                &CertificateRequest::server("kcp", vec!["kcp.example.com".into()]),
                now(),
            )
            .expect("leaf");

        assert_signed_by(root.cert_pem(), root.cert_pem());
        assert_signed_by(server_ca.cert_pem(), root.cert_pem());
        assert_signed_by(&leaf.cert_pem, server_ca.cert_pem());
        assert_eq!(leaf.ca_pem, server_ca.cert_pem());
        assert!(
            leaf.cert_pem.ends_with(server_ca.cert_pem()),
            "tls.crt carries the intermediate"
        );
        assert!(
            !server_ca.cert_pem().contains(root.cert_pem().trim()),
            "the root stays out of chains"
        );
        assert_eq!(server_ca.material().ca_pem, root.cert_pem());
    }

    #[test]
    fn server_certificate_carries_usages_and_names() {
        let ca = Authority::generate_root(&CertificateRequest::ca("server-ca"), now()).expect("ca");
        let mut request =
            CertificateRequest::server("", vec!["a.example.com".into(), "localhost".into()]);
        request.ip_addresses.push("127.0.0.1".parse().expect("ip"));
        let leaf = ca.issue(&request, now()).expect("leaf");
        let leaf_der = der(&leaf.cert_pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&leaf_der).expect("parses");

        assert!(!cert.is_ca());
        let eku = cert
            .extended_key_usage()
            .expect("eku")
            .expect("eku present")
            .value;
        assert!(eku.server_auth && !eku.client_auth);
        let names: Vec<String> = cert
            .subject_alternative_name()
            .expect("san")
            .expect("san present")
            .value
            .general_names
            .iter()
            .map(|name| match name {
                GeneralName::DNSName(dns) => (*dns).to_owned(),
                GeneralName::IPAddress(ip) => format!("{ip:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names, vec!["a.example.com", "localhost", "[127, 0, 0, 1]"]);
        let has_authority_key_id = cert.extensions().iter().any(|ext| {
            matches!(
                ext.parsed_extension(),
                ParsedExtension::AuthorityKeyIdentifier(_)
            )
        });
        assert!(has_authority_key_id);
    }

    #[test]
    fn client_certificate_names_user_and_groups() {
        let ca = Authority::generate_root(&CertificateRequest::ca("client-ca"), now()).expect("ca");
        let request = CertificateRequest::client(
            "logical-cluster-admin",
            vec!["system:kcp:logical-cluster-admin".into()],
        );
        let leaf = ca.issue(&request, now()).expect("leaf");
        let summary = inspect::summarize(&leaf.cert_pem).expect("summary");
        assert_eq!(summary.common_name, "logical-cluster-admin");
        assert_eq!(
            summary.organizations,
            vec!["system:kcp:logical-cluster-admin"]
        );
        let leaf_der = der(&leaf.cert_pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&leaf_der).expect("parses");
        let eku = cert
            .extended_key_usage()
            .expect("eku")
            .expect("eku present")
            .value;
        assert!(eku.client_auth && !eku.server_auth);
        assert_eq!(
            summary.not_after.as_second() - now().as_second(),
            365 * 24 * 3600
        );
    }

    #[test]
    fn a_client_certificate_carries_every_group_and_still_verifies() {
        let root =
            Authority::generate_root(&CertificateRequest::ca("root-ca"), now()).expect("root");
        let client_ca = root
            .issue_authority(&CertificateRequest::ca("client-ca"), now())
            .expect("client ca");
        let groups = vec![
            "kubeconfig:alice".to_owned(),
            "system:kcp:admin".to_owned(),
            "team-a".to_owned(),
        ];
        let request = CertificateRequest::client("alice", groups.clone()).normalized();
        let leaf = client_ca.issue(&request, now()).expect("leaf");
        let summary = inspect::summarize(&leaf.cert_pem).expect("summary");
        assert_eq!(summary.common_name, "alice");
        assert_eq!(summary.organizations, groups);
        assert_signed_by(&leaf.cert_pem, client_ca.cert_pem());
        let leaf_der = der(&leaf.cert_pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&leaf_der).expect("parses");
        assert_eq!(cert.subject().iter_organization().count(), 3);
        assert_eq!(cert.issuer().to_string(), "CN=client-ca");
        let eku = cert
            .extended_key_usage()
            .expect("eku")
            .expect("eku present")
            .value;
        assert!(eku.client_auth);
        // The key in Secret matches the rewritten certificate.
        let key = rcgen::KeyPair::from_pem(&leaf.key_pem).expect("key");
        assert_eq!(
            rcgen::PublicKeyData::subject_public_key_info(&key),
            cert.public_key().raw.to_vec(),
            "same public key"
        );
        // A renewal check sees the certificate as matching its request.
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &request, client_ca.cert_pem(), now()),
            None
        );
    }

    #[test]
    fn a_reloaded_ca_keeps_signing_verifiable_certificates() {
        let original =
            Authority::generate_root(&CertificateRequest::ca("root-ca"), now()).expect("root");
        let stored = original.material().clone();
        let reloaded = Authority::load(stored.clone()).expect("reload");
        assert_eq!(reloaded.material(), &stored);
        let leaf = reloaded
            .issue(&CertificateRequest::client("someone", vec![]), now())
            .expect("leaf");
        assert_signed_by(&leaf.cert_pem, original.cert_pem());
    }

    #[test]
    fn a_brought_rsa_ca_with_a_pkcs1_key_signs_certificates() {
        let brought = TlsMaterial {
            cert_pem: include_str!("testdata/byo-rsa-ca.crt").to_owned(),
            key_pem: include_str!("testdata/byo-rsa-ca.key").to_owned(),
            ca_pem: String::new(),
        };
        let ca = Authority::load(brought).expect("PKCS#1 RSA CA loads");
        let intermediate = ca
            .issue_authority(&CertificateRequest::ca("server-ca"), now())
            .expect("intermediate");
        assert_signed_by(
            intermediate.cert_pem(),
            include_str!("testdata/byo-rsa-ca.crt"),
        );
    }

    #[test]
    fn loading_rejects_garbage_keys() {
        let original =
            Authority::generate_root(&CertificateRequest::ca("root-ca"), now()).expect("root");
        let broken = TlsMaterial {
            key_pem: "not a key".into(),
            ..original.material().clone()
        };
        assert!(matches!(
            Authority::load(broken),
            Err(Error::InvalidPrivateKey(_))
        ));
    }

    #[test]
    fn renewal_is_due_at_two_thirds_of_the_lifetime() {
        let ca = Authority::generate_root(&CertificateRequest::ca("ca"), now()).expect("ca");
        let request = CertificateRequest::client("user", vec![]);
        let leaf = ca.issue(&request, now()).expect("leaf");
        let due = |offset_days: i64| {
            let at = now() + SignedDuration::from_hours(24 * offset_days);
            renewal::leaf_issue_reason(Some(&leaf), &request, ca.cert_pem(), at)
        };
        assert_eq!(due(0), None);
        assert_eq!(due(240), None);
        assert_eq!(due(244), Some(IssueReason::RenewalDue));
    }

    #[test]
    fn renew_before_overrides_the_default_margin() {
        let ca = Authority::generate_root(&CertificateRequest::ca("ca"), now()).expect("ca");
        let mut request = CertificateRequest::client("user", vec![]);
        request.renew_before = Some(Duration::from_secs(7 * 24 * 3600));
        let leaf = ca.issue(&request, now()).expect("leaf");
        let at = |days: i64| now() + SignedDuration::from_hours(24 * days);
        assert_eq!(renewal::renewal_time(&leaf, &request), Some(at(358)));
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &request, ca.cert_pem(), at(300)),
            None
        );
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &request, ca.cert_pem(), at(359)),
            Some(IssueReason::RenewalDue)
        );
    }

    #[test]
    fn a_shortened_validity_forces_a_new_certificate() {
        let ca = Authority::generate_root(&CertificateRequest::ca("ca"), now()).expect("ca");
        let mut request = CertificateRequest::client("user", vec![]);
        let leaf = ca.issue(&request, now()).expect("leaf");
        request.validity = Duration::from_secs(2 * 3600);
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &request, ca.cert_pem(), now()),
            Some(IssueReason::ValidityShortened)
        );
        let short = ca.issue(&request, now()).expect("short leaf");
        assert_eq!(
            renewal::leaf_issue_reason(Some(&short), &request, ca.cert_pem(), now()),
            None,
            "a certificate issued for the new validity fits it"
        );
    }

    #[test]
    fn changed_names_or_issuer_force_a_new_certificate() {
        let ca = Authority::generate_root(&CertificateRequest::ca("ca"), now()).expect("ca");
        let other_ca =
            Authority::generate_root(&CertificateRequest::ca("other"), now()).expect("ca");
        let request = CertificateRequest::server("", vec!["b.example".into(), "a.example".into()]);
        let leaf = ca.issue(&request, now()).expect("leaf");

        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &request, ca.cert_pem(), now()),
            None
        );
        let moved = CertificateRequest::server("", vec!["c.example".into()]);
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &moved, ca.cert_pem(), now()),
            Some(IssueReason::RequestChanged)
        );
        let mut serving_and_client = request.clone();
        serving_and_client.usages = vec![Usage::ServerAuth, Usage::ClientAuth];
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &serving_and_client, ca.cert_pem(), now()),
            Some(IssueReason::RequestChanged),
            "a certificate without client authentication does not serve a request for it"
        );
        let both = ca.issue(&serving_and_client, now()).expect("leaf");
        assert_eq!(
            renewal::leaf_issue_reason(Some(&both), &serving_and_client, ca.cert_pem(), now()),
            None
        );
        assert_eq!(
            renewal::leaf_issue_reason(Some(&leaf), &request, other_ca.cert_pem(), now()),
            Some(IssueReason::IssuerChanged)
        );
        assert_eq!(
            renewal::leaf_issue_reason(None, &request, ca.cert_pem(), now()),
            Some(IssueReason::Missing)
        );
    }
}
