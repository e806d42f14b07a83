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
    /// Lower-case hex bytes separated by colons (`01:02:ab:cd`).
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
        let pem = first_certificate(&text).ok_or_else(|| {
            format!(
                "no certificate served at {address}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })?;
        CertificateFacts::from_pem(pem.as_bytes(), &format!("served at {address}"))
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

/// The first PEM certificate in `text` (`openssl s_client` prints the server's after its
/// connection details), up to the end of `text`.
fn first_certificate(text: &str) -> Option<&str> {
    text.find("-----BEGIN CERTIFICATE-----")
        .map(|begin| &text[begin..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl req -x509 -newkey ec ... -days 1 -subj /CN=e2e-test -set_serial 0x0102abcd`,
    /// valid 2026-11-26T11:23:29Z to 2026-11-27T11:23:29Z.
    const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----
MIIBbDCCARGgAwIBAgIEAQKrzTAKBggqhkjOPQQDAjATMREwDwYDVQQDDAhlMmUt
dGVzdDAeFw0yNjExMjYxMTIzMjlaFw0yNjExMjcxMTIzMjlaMBMxETAPBgNVBAMM
CGUyZS10ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEq4iJ7apXaQeflAnn
VMgSpcQ4ctuB/BGSnnyPOEVGz0G4U/yOyvKA1T4M/i0bE8de2rjx+P/gQtIjS2sB
VajFHaNTMFEwHQYDVR0OBBYEFJZLCKv6CJH/vh5DDOtgnwe48RAgMB8GA1UdIwQY
MBaAFJZLCKv6CJH/vh5DDOtgnwe48RAgMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZI
zj0EAwIDSQAwRgIhAJjBFRaQD4jUDaGR6LUx5eW9qcL+Tbw4Wmz6ZwCBgOGvAiEA
oLTfxeyL3M6BNVMt/BhuxEy6kSBVyZI46uxxCeWYVMo=
-----END CERTIFICATE-----
";

    #[test]
    fn the_served_certificate_is_read_from_s_client_output() {
        let output = format!(
            "CONNECTED(00000003)\n---\nCertificate chain\n---\nServer certificate\n{CERTIFICATE}subject=CN=e2e-test\n---\n"
        );
        let pem = first_certificate(&output).expect("a certificate");
        let facts = CertificateFacts::from_pem(pem.as_bytes(), "test").expect("parsed");
        assert_eq!(
            facts,
            CertificateFacts {
                serial: "01:02:ab:cd".into(),
                not_before: 1_795_692_209,
                not_after: 1_795_778_609,
            }
        );
    }

    #[test]
    fn output_without_a_certificate_has_none() {
        assert_eq!(
            first_certificate("CONNECTED(00000003)\nno peer certificate available\n"),
            None
        );
        assert!(CertificateFacts::from_pem(b"not a certificate", "test").is_err());
    }
}
