//! PEM material of one certificate as stored in a `kubernetes.io/tls` Secret.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;

pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_PRIVATE_KEY_KEY: &str = "tls.key";
pub const CA_CERT_KEY: &str = "ca.crt";

/// `tls.crt`, `tls.key` and `ca.crt` (the issuing CA; the certificate itself for a self-signed root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsMaterial {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
}

impl TlsMaterial {
    /// Reads the material from Secret data; `None` when `tls.crt` or `tls.key` is missing.
    /// A missing `ca.crt` (common in Secrets users bring) reads as empty.
    pub fn from_secret_data(data: &BTreeMap<String, ByteString>) -> Option<Self> {
        let text = |key: &str| {
            data.get(key)
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        };
        Some(Self {
            cert_pem: text(TLS_CERT_KEY)?,
            key_pem: text(TLS_PRIVATE_KEY_KEY)?,
            ca_pem: text(CA_CERT_KEY).unwrap_or_default(),
        })
    }

    pub fn to_secret_data(&self) -> BTreeMap<String, ByteString> {
        [
            (TLS_CERT_KEY, &self.cert_pem),
            (TLS_PRIVATE_KEY_KEY, &self.key_pem),
            (CA_CERT_KEY, &self.ca_pem),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), ByteString(value.clone().into_bytes())))
        .collect()
    }
}
