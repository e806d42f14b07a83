//! What the suite knows about one certificate (serial, validity), read from a
//! `kubernetes.io/tls` Secret the operator wrote or from what a Service serves in its TLS
//! handshake: how the rotation scenarios tell that pods run a re-issued certificate.

use std::process::{Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use x509_parser::pem::parse_x509_pem;

use super::NAMESPACE;
use crate::cluster::Cluster;

/// Serial and validity of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFacts {
    /// Colon-separated hex, as `openssl x509 -serial` prints it (with colons).
    pub serial: String,
    /// Seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
}

impl CertificateFacts {
    /// The first certificate of the PEM text `pem`.
    pub fn from_pem(pem: &[u8], what: &str) -> Result<CertificateFacts, String> {
        let (_, pem) = parse_x509_pem(pem).map_err(|e| format!("{what}: {e}"))?;
        let certificate = pem.parse_x509().map_err(|e| format!("{what}: {e}"))?;
        Ok(CertificateFacts {
            serial: certificate.raw_serial_as_string(),
            not_before: certificate.validity().not_before.timestamp(),
            not_after: certificate.validity().not_after.timestamp(),
        })
    }

    /// The certificate (`tls.crt`) of Secret `name` in the deployment's namespace.
    pub fn of_secret(admin: &Cluster, name: &str) -> Result<CertificateFacts, String> {
        let secret = admin
            .get(&["secret", "-n", NAMESPACE, name])?
            .ok_or_else(|| format!("no Secret {name}"))?;
        let pem = STANDARD
            .decode(
                secret["data"]["tls.crt"]
                    .as_str()
                    .ok_or_else(|| format!("Secret {name} has no tls.crt"))?,
            )
            .map_err(|e| format!("Secret {name}: {e}"))?;
        CertificateFacts::from_pem(&pem, &format!("Secret {name}"))
    }

    /// The certificate served at `address` (`host:port`) to a client asking for `server_name`
    /// (SNI), read with `openssl s_client` (no verification: only its identity matters here).
    pub fn served(address: &str, server_name: &str) -> Result<CertificateFacts, String> {
        let output = Command::new("openssl")
            .args(["s_client", "-connect", address, "-servername", server_name])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running openssl s_client: {e}"))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let begin = text.find("-----BEGIN CERTIFICATE-----").ok_or_else(|| {
            format!(
                "no certificate served at {address}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })?;
        CertificateFacts::from_pem(text[begin..].as_bytes(), &format!("served at {address}"))
    }

    /// Hours left before it expires.
    pub fn remaining_hours(&self) -> Result<f64, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_secs() as i64;
        Ok((self.not_after - now) as f64 / 3600.0)
    }
}
