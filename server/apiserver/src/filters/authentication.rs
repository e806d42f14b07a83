//! Who is asking: the identity in a verified client certificate (user = CN, groups = O), as
//! kube-apiserver's x509 authenticator derives it. Tokens, OIDC and front-proxy headers come with the
//! authentication issue; until then a request without a client certificate is anonymous.

use rustls_pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

/// Every authenticated user is in this group.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

impl UserInfo {
    /// The user named by a client certificate the TLS layer already verified against the client CA.
    pub fn from_certificate(certificate: &CertificateDer<'_>) -> Option<UserInfo> {
        let (_, parsed) = X509Certificate::from_der(certificate.as_ref()).ok()?;
        let subject = parsed.subject();
        let name = subject
            .iter_common_name()
            .next()?
            .as_str()
            .ok()?
            .to_string();
        if name.is_empty() {
            return None;
        }
        let mut groups: Vec<String> = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect();
        groups.push(AUTHENTICATED_GROUP.to_string());
        Some(UserInfo { name, groups })
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
