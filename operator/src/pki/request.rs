//! What a certificate should contain, independent of who signs it and when.

use std::time::Duration;

/// One year: the default lifetime of leaf certificates.
pub const DEFAULT_LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Ten years: the lifetime of generated CAs.
pub const DEFAULT_CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Without `renewBefore`, a certificate is renewed when this fraction (1/N) of its lifetime is
/// left, as cert-manager does: at two thirds of the lifetime.
pub const RENEWAL_LIFETIME_DIVISOR: u32 = 3;

/// Extended key usages a leaf certificate is issued for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Usage {
    ServerAuth,
    ClientAuth,
    /// Only signs service-account tokens (no extended key usage).
    Signing,
}

/// The subject, usages and names of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateRequest {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub is_ca: bool,
    pub usages: Vec<Usage>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<std::net::IpAddr>,
    pub validity: Duration,
    /// How long before expiry to renew; `None` renews at two thirds of the lifetime.
    pub renew_before: Option<Duration>,
}

impl CertificateRequest {
    /// A CA certificate valid for ten years.
    pub fn ca(common_name: impl Into<String>) -> Self {
        Self {
            common_name: common_name.into(),
            organizations: Vec::new(),
            is_ca: true,
            usages: Vec::new(),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            validity: DEFAULT_CA_VALIDITY,
            renew_before: None,
        }
    }

    /// A serving certificate for `dns_names`.
    pub fn server(common_name: impl Into<String>, dns_names: Vec<String>) -> Self {
        Self {
            dns_names,
            ..Self::leaf(common_name, Usage::ServerAuth)
        }
    }

    /// A client certificate: Kubernetes reads the user from CN and the groups from O.
    pub fn client(user: impl Into<String>, groups: Vec<String>) -> Self {
        Self {
            organizations: groups,
            ..Self::leaf(user, Usage::ClientAuth)
        }
    }

    /// A key pair whose certificate only carries the public key for token verification.
    pub fn signing(common_name: impl Into<String>) -> Self {
        Self::leaf(common_name, Usage::Signing)
    }

    fn leaf(common_name: impl Into<String>, usage: Usage) -> Self {
        Self {
            common_name: common_name.into(),
            organizations: Vec::new(),
            is_ca: false,
            usages: vec![usage],
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            validity: DEFAULT_LEAF_VALIDITY,
            renew_before: None,
        }
    }

    /// The time before expiry at which a renewal is due.
    pub fn renewal_margin(&self) -> Duration {
        self.renew_before
            .unwrap_or(self.validity / RENEWAL_LIFETIME_DIVISOR)
    }

    /// Sorted, deduplicated names, so that comparing with an issued certificate ignores order.
    pub fn normalized(mut self) -> Self {
        self.organizations.sort();
        self.organizations.dedup();
        self.dns_names.sort();
        self.dns_names.dedup();
        self.ip_addresses.sort();
        self.ip_addresses.dedup();
        self.usages.sort();
        self.usages.dedup();
        self
    }
}
