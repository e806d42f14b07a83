//! Certificate authorities: generated, or loaded back from their Secret after a restart.

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::PrivatePkcs8KeyDer;
use time::OffsetDateTime;
use x509_parser::pem::Pem;

use super::Error;
use super::material::TlsMaterial;
use super::pkcs1::rsa_pkcs1_to_pkcs8;
use super::request::{CertificateRequest, Usage};
use super::subject;

/// Certificates start a little in the past so that nodes with a lagging clock accept them.
const CLOCK_SKEW_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// A CA that can sign certificates: its key, its certificate, and the chain above it.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    material: TlsMaterial,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("cert_pem", &self.material.cert_pem)
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// A new self-signed root CA.
    pub fn generate_root(request: &CertificateRequest, now: Timestamp) -> Result<Self, Error> {
        let key = KeyPair::generate().map_err(Error::KeyGeneration)?;
        let params = certificate_params(request, now)?;
        let certificate = params.self_signed(&key).map_err(Error::Signing)?;
        let cert_pem = certificate.pem();
        let material = TlsMaterial {
            ca_pem: cert_pem.clone(),
            cert_pem,
            key_pem: key.serialize_pem(),
        };
        Ok(Self {
            issuer: Issuer::new(params, key),
            material,
        })
    }

    /// A CA from its stored material, e.g. a Secret written earlier or brought by the user.
    pub fn load(material: TlsMaterial) -> Result<Self, Error> {
        let key = load_private_key(&material.key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&material.cert_pem, key)
            .map_err(Error::InvalidCaCertificate)?;
        Ok(Self { issuer, material })
    }

    pub fn material(&self) -> &TlsMaterial {
        &self.material
    }

    /// PEM of this CA's certificate, what clients put in their trust bundle.
    pub fn cert_pem(&self) -> &str {
        &self.material.cert_pem
    }

    /// Signs a new certificate (leaf or intermediate CA) with a fresh key.
    pub fn issue(
        &self,
        request: &CertificateRequest,
        now: Timestamp,
    ) -> Result<TlsMaterial, Error> {
        let key = KeyPair::generate().map_err(Error::KeyGeneration)?;
        let params = certificate_params(request, now)?;
        let certificate = params
            .signed_by(&key, &self.issuer)
            .map_err(Error::Signing)?;
        let certificate_pem = if request.organizations.len() > 1 {
            let der = subject::with_organizations(
                certificate.der(),
                &request.common_name,
                &request.organizations,
                self.issuer.key(),
            )?;
            subject::pem(&der)
        } else {
            certificate.pem()
        };
        // Like cert-manager, `tls.crt` carries the chain up to (not including) the root, so
        // clients that only trust the root CA accept certificates of intermediate CAs.
        let issued_by_root =
            self.material.ca_pem.is_empty() || self.material.ca_pem == self.material.cert_pem;
        let chain = if issued_by_root {
            String::new()
        } else {
            self.material.cert_pem.clone()
        };
        Ok(TlsMaterial {
            cert_pem: format!("{certificate_pem}{chain}"),
            key_pem: key.serialize_pem(),
            ca_pem: self.material.cert_pem.clone(),
        })
    }

    /// Signs a new intermediate CA and returns it ready to sign.
    pub fn issue_authority(
        &self,
        request: &CertificateRequest,
        now: Timestamp,
    ) -> Result<Authority, Error> {
        Authority::load(self.issue(request, now)?)
    }
}

fn to_offset_date_time(timestamp: Timestamp) -> Result<OffsetDateTime, Error> {
    OffsetDateTime::from_unix_timestamp(timestamp.as_second()).map_err(|_| Error::TimeOutOfRange)
}

fn certificate_params(
    request: &CertificateRequest,
    now: Timestamp,
) -> Result<CertificateParams, Error> {
    let validity =
        jiff::SignedDuration::try_from(request.validity).map_err(|_| Error::TimeOutOfRange)?;
    let skew =
        jiff::SignedDuration::try_from(CLOCK_SKEW_ALLOWANCE).map_err(|_| Error::TimeOutOfRange)?;
    let not_before = now.checked_sub(skew).map_err(|_| Error::TimeOutOfRange)?;
    let not_after = now
        .checked_add(validity)
        .map_err(|_| Error::TimeOutOfRange)?;

    let mut params = CertificateParams::default();
    params.not_before = to_offset_date_time(not_before)?;
    params.not_after = to_offset_date_time(not_after)?;
    params
        .distinguished_name
        .push(DnType::CommonName, request.common_name.as_str());
    // rcgen keeps one value per attribute type; several organizations are written by
    // `subject` after signing.
    if let [organization] = request.organizations.as_slice() {
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization.as_str());
    }
    params.use_authority_key_identifier_extension = true;
    if request.is_ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
    } else {
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = request
            .usages
            .iter()
            .filter_map(|usage| match usage {
                Usage::ServerAuth => Some(ExtendedKeyUsagePurpose::ServerAuth),
                Usage::ClientAuth => Some(ExtendedKeyUsagePurpose::ClientAuth),
                Usage::Signing => None,
            })
            .collect();
    }
    for dns_name in &request.dns_names {
        let name = dns_name
            .clone()
            .try_into()
            .map_err(|_| Error::InvalidDnsName(dns_name.clone()))?;
        params.subject_alt_names.push(SanType::DnsName(name));
    }
    params
        .subject_alt_names
        .extend(request.ip_addresses.iter().copied().map(SanType::IpAddress));
    Ok(params)
}

/// Reads a PKCS#8 key, or a PKCS#1 RSA key (`BEGIN RSA PRIVATE KEY`) after wrapping it.
fn load_private_key(key_pem: &str) -> Result<KeyPair, Error> {
    let pem = Pem::iter_from_buffer(key_pem.as_bytes())
        .next()
        .ok_or(Error::InvalidPrivateKey("no PEM block"))?
        .map_err(|_| Error::InvalidPrivateKey("malformed PEM"))?;
    match pem.label.as_str() {
        "PRIVATE KEY" => KeyPair::try_from(pem.contents.as_slice())
            .map_err(|_| Error::InvalidPrivateKey("unsupported PKCS#8 key")),
        "RSA PRIVATE KEY" => {
            let pkcs8 = PrivatePkcs8KeyDer::from(rsa_pkcs1_to_pkcs8(&pem.contents));
            KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_RSA_SHA256)
                .map_err(|_| Error::InvalidPrivateKey("unreadable PKCS#1 RSA key"))
        }
        "EC PRIVATE KEY" => Err(Error::InvalidPrivateKey(
            "SEC1 EC keys must be converted to PKCS#8",
        )),
        _ => Err(Error::InvalidPrivateKey("unexpected PEM label")),
    }
}
