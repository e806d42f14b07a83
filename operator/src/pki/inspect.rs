//! What an issued certificate actually contains, read back with x509-parser.

use std::net::IpAddr;

use jiff::Timestamp;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

use super::Error;
use super::request::Usage;

/// The fields of a certificate that decide whether it still matches its request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateSummary {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub is_ca: bool,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    /// The extended key usages among those this operator issues, in [`Usage`] order.
    pub usages: Vec<Usage>,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// Parses the first certificate of a PEM bundle.
pub fn summarize(cert_pem: &str) -> Result<CertificateSummary, Error> {
    let (_, pem) = parse_x509_pem(cert_pem.as_bytes()).map_err(|_| Error::UnreadableCertificate)?;
    let certificate = pem.parse_x509().map_err(|_| Error::UnreadableCertificate)?;
    let subject = certificate.subject();
    let text = |attribute: &x509_parser::x509::AttributeTypeAndValue| {
        attribute.as_str().unwrap_or_default().to_owned()
    };
    let mut organizations: Vec<String> = subject.iter_organization().map(text).collect();
    organizations.sort();
    let mut dns_names = Vec::new();
    let mut ip_addresses = Vec::new();
    if let Ok(Some(san)) = certificate.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
                GeneralName::IPAddress(bytes) => ip_addresses.extend(ip_from_bytes(bytes)),
                _ => {}
            }
        }
    }
    dns_names.sort();
    ip_addresses.sort();
    let mut usages = Vec::new();
    if let Ok(Some(extended)) = certificate.extended_key_usage() {
        if extended.value.server_auth {
            usages.push(Usage::ServerAuth);
        }
        if extended.value.client_auth {
            usages.push(Usage::ClientAuth);
        }
    }
    let timestamp = |time: x509_parser::time::ASN1Time| {
        Timestamp::from_second(time.timestamp()).map_err(|_| Error::UnreadableCertificate)
    };
    Ok(CertificateSummary {
        common_name: subject
            .iter_common_name()
            .next()
            .map(text)
            .unwrap_or_default(),
        organizations,
        is_ca: certificate.is_ca(),
        dns_names,
        ip_addresses,
        usages,
        not_before: timestamp(certificate.validity().not_before)?,
        not_after: timestamp(certificate.validity().not_after)?,
    })
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}
