//! Who a test is: client certificates signed by a CA the server trusts (its generated client CA or
//! one the test makes, e.g. a front-proxy CA), kubeconfigs for such users or for bearer tokens, and
//! ES256 JWTs signed with a given key (service-account tokens minted by hand).
//!
//! Authentication tests need many users with chosen names and groups; a client certificate with
//! CN = user and O = groups is the simplest way to be one, and the kubeconfig lets the real
//! kubectl be that user too.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use kcp_kubeconfig::{Cluster, Context, Kubeconfig, User};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SigningKey,
};
use serde_json::Value;

use crate::kcp::AdminCredentials;

/// A new self-signed CA certificate named `common_name` and its key, PEM (e.g. for a
/// `kubernetes.io/tls` Secret a user brings).
pub fn self_signed_ca_pem(common_name: &str) -> (String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    (ca.pem(), ca.key().serialize_pem())
}

/// A certificate authority that issues client certificates.
pub struct CertificateAuthority {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A client certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    pub cert_pem: String,
    pub key_pem: String,
}

impl CertificateAuthority {
    /// A new self-signed CA named `common_name`.
    pub fn generate(common_name: &str) -> CertificateAuthority {
        let (cert_pem, key_pem) = self_signed_ca_pem(common_name);
        CertificateAuthority::from_pem(&cert_pem, &key_pem)
    }

    /// The CA in `cert_path` (PEM) with its key in `key_path` (PEM), e.g. the `client-ca.crt` and
    /// `client-ca.key` a server generated.
    pub fn read(cert_path: &Path, key_path: &Path) -> CertificateAuthority {
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
        };
        CertificateAuthority::from_pem(&read(cert_path), &read(key_path))
    }

    fn from_pem(cert_pem: &str, key_pem: &str) -> CertificateAuthority {
        let key = KeyPair::from_pem(key_pem).expect("parsing a CA key");
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key).expect("parsing a CA certificate");
        CertificateAuthority {
            cert_pem: cert_pem.to_owned(),
            issuer,
        }
    }

    /// A client certificate (extendedKeyUsage clientAuth) with CN `user` and one O per group.
    pub fn client(&self, user: &str, groups: &[&str]) -> ClientIdentity {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        ClientIdentity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl ClientIdentity {
    /// Certificate then key, as `reqwest::Identity::from_pem` wants them.
    pub fn pem(&self) -> Vec<u8> {
        format!("{}{}", self.cert_pem, self.key_pem).into_bytes()
    }

    /// `server`'s address and CA with this identity: `.client()` is a client that is this user.
    pub fn credentials(&self, server: &AdminCredentials) -> AdminCredentials {
        AdminCredentials {
            server: server.server.clone(),
            ca_pem: server.ca_pem.clone(),
            identity_pem: self.pem(),
        }
    }
}

/// What a kubeconfig written by [`write_kubeconfig`] authenticates with.
pub enum KubeconfigUser<'a> {
    Certificate(&'a ClientIdentity),
    Token(&'a str),
}

/// Writes a kubeconfig for `server_url` (may end in `/clusters/<name>`) trusting `ca_pem`, as `user`.
pub fn write_kubeconfig(path: &Path, server_url: &str, ca_pem: &[u8], user: KubeconfigUser) {
    let user = match user {
        KubeconfigUser::Certificate(identity) => User {
            client_certificate_data: Some(STANDARD.encode(&identity.cert_pem)),
            client_key_data: Some(STANDARD.encode(&identity.key_pem)),
            ..User::default()
        },
        KubeconfigUser::Token(token) => User {
            token: Some(token.to_owned()),
            ..User::default()
        },
    };
    let mut config = Kubeconfig::new();
    config.set_cluster(
        "test",
        Cluster {
            server: server_url.to_owned(),
            certificate_authority_data: Some(STANDARD.encode(ca_pem)),
            ..Cluster::default()
        },
    );
    config.set_user("test", user);
    config.set_context(
        "test",
        Context {
            cluster: "test".to_owned(),
            user: "test".to_owned(),
            ..Context::default()
        },
    );
    config.current_context = "test".to_owned();
    config
        .write(path)
        .unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
}

/// A compact JWS (`header.claims.signature`) over `header` and `claims`, signed ES256 with the
/// ECDSA P-256 PKCS#8 PEM key `key_pem` (e.g. a server's `sa.key`).
pub fn sign_es256(key_pem: &str, header: &Value, claims: &Value) -> String {
    let key = KeyPair::from_pem(key_pem).expect("parsing an ECDSA P-256 key");
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let der = key.sign(signing_input.as_bytes()).expect("signing");
    let signature = ecdsa_der_to_fixed(&der);
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// The parts of a compact JWS, the header and claims decoded as JSON.
pub fn decode_jwt(token: &str) -> (Value, Value, String) {
    let parts: Vec<&str> = token.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "not a compact JWS: {token}");
    let json = |part: &str| -> Value {
        let bytes = URL_SAFE_NO_PAD
            .decode(part)
            .unwrap_or_else(|error| panic!("JWS part is not base64url ({error}): {token}"));
        serde_json::from_slice(&bytes).expect("JWS part is JSON")
    };
    (json(parts[0]), json(parts[1]), parts[2].to_owned())
}

/// ECDSA `Ecdsa-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }` to JOSE's fixed `r || s` (32 bytes
/// each for P-256).
fn ecdsa_der_to_fixed(der: &[u8]) -> Vec<u8> {
    assert_eq!(der[0], 0x30, "not a DER sequence");
    // P-256 signatures are short enough for one-byte lengths.
    let mut at = 2;
    let mut out = Vec::with_capacity(64);
    for _ in 0..2 {
        assert_eq!(der[at], 0x02, "not a DER integer");
        let len = der[at + 1] as usize;
        let mut int = &der[at + 2..at + 2 + len];
        while int.len() > 32 && int[0] == 0 {
            int = &int[1..];
        }
        out.extend(std::iter::repeat_n(0u8, 32 - int.len()));
        out.extend_from_slice(int);
        at += 2 + len;
    }
    out
}
