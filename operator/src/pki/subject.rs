//! Subjects with several organizations. Kubernetes reads a client certificate's groups from
//! all of its O attributes, but rcgen keeps one value per attribute type. So a certificate with
//! several groups is issued by rcgen with only the common name, then its subject is replaced by
//! one written here (CN, then one O per group, each its own RDN like rcgen writes them) and the
//! changed TBSCertificate is signed again with the same issuer key and algorithm.

use kcp_der::{self as der, DerError};
use rcgen::SigningKey;

use super::Error;

/// `id-at-commonName` (2.5.4.3) and `id-at-organizationName` (2.5.4.10), DER encoded.
const COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];
const ORGANIZATION: [u8; 3] = [0x55, 0x04, 0x0a];
/// Context tag `[0]` of the explicit version in a TBSCertificate.
const VERSION_TAG: u8 = 0xa0;

fn attribute(oid: &[u8], value: &str) -> Vec<u8> {
    let pair = [
        der::element(der::OID, oid),
        der::element(der::UTF8_STRING, value.as_bytes()),
    ]
    .concat();
    der::element(der::SET, &der::element(der::SEQUENCE, &pair))
}

/// `Name` with the common name and every organization.
fn name(common_name: &str, organizations: &[String]) -> Vec<u8> {
    let mut rdns = attribute(&COMMON_NAME, common_name);
    for organization in organizations {
        rdns.extend(attribute(&ORGANIZATION, organization));
    }
    der::element(der::SEQUENCE, &rdns)
}

/// `certificate` (DER) with its subject replaced, signed again by `issuer_key`.
pub fn with_organizations(
    certificate: &[u8],
    common_name: &str,
    organizations: &[String],
    issuer_key: &impl SigningKey,
) -> Result<Vec<u8>, Error> {
    let parts = der::elements(der::content(certificate, der::SEQUENCE).map_err(Error::Subject)?)
        .map_err(Error::Subject)?;
    let [tbs, algorithm, _signature] = parts.as_slice() else {
        return Err(Error::Subject(DerError::Structure(
            "certificate is not tbsCertificate, signatureAlgorithm, signature",
        )));
    };
    let mut fields = der::elements(der::content(tbs, der::SEQUENCE).map_err(Error::Subject)?)
        .map_err(Error::Subject)?;
    // version?, serialNumber, signature, issuer, validity, subject, ...
    let subject = if fields.first().and_then(|f| f.first()) == Some(&VERSION_TAG) {
        5
    } else {
        4
    };
    let replacement = name(common_name, organizations);
    let slot = fields
        .get_mut(subject)
        .ok_or(Error::Subject(DerError::Structure(
            "tbsCertificate has no subject",
        )))?;
    *slot = &replacement;
    let tbs = der::element(der::SEQUENCE, &fields.concat());
    let signature = issuer_key.sign(&tbs).map_err(Error::Signing)?;
    let signature = der::element(der::BIT_STRING, &[&[0u8][..], &signature].concat());
    Ok(der::element(
        der::SEQUENCE,
        &[tbs.as_slice(), algorithm, &signature].concat(),
    ))
}

/// PEM of a DER certificate.
pub fn pem(certificate: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(certificate);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}
