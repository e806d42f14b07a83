//! Whether a stored certificate can stay or must be issued again.
//!
//! CAs are never replaced while their Secret exists (a new CA would invalidate every credential
//! it signed); leaf certificates are re-issued when due, when their issuer changed, or when what
//! they should contain changed (e.g. a new external hostname).

use jiff::Timestamp;

use super::inspect::summarize;
use super::material::TlsMaterial;
use super::request::{CertificateRequest, Usage};

/// Why a leaf certificate is (re-)issued; shown in events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueReason {
    Missing,
    Unreadable,
    RenewalDue,
    IssuerChanged,
    RequestChanged,
    ValidityShortened,
}

impl std::fmt::Display for IssueReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IssueReason::Missing => "certificate does not exist yet",
            IssueReason::Unreadable => "stored certificate is unreadable",
            IssueReason::RenewalDue => "certificate is due for renewal",
            IssueReason::IssuerChanged => "issuing CA changed",
            IssueReason::RequestChanged => "subject, names or usages changed",
            IssueReason::ValidityShortened => "certificate outlives the shortened validity",
        })
    }
}

/// How much longer than the requested validity a certificate may live before it counts as
/// outliving it (clock skew between issuing and checking, the backdated `notBefore`).
const VALIDITY_SLACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(3600);

/// The usages of `usages` a certificate carries as extended key usages (signing-only
/// certificates carry none).
fn extended_usages(usages: &[Usage]) -> Vec<Usage> {
    usages
        .iter()
        .copied()
        .filter(|usage| *usage != Usage::Signing)
        .collect()
}

/// `None` when `existing` still serves `request` under `issuer_pem` at `now`.
pub fn leaf_issue_reason(
    existing: Option<&TlsMaterial>,
    request: &CertificateRequest,
    issuer_pem: &str,
    now: Timestamp,
) -> Option<IssueReason> {
    let Some(existing) = existing else {
        return Some(IssueReason::Missing);
    };
    let Ok(summary) = summarize(&existing.cert_pem) else {
        return Some(IssueReason::Unreadable);
    };
    if existing.ca_pem.trim() != issuer_pem.trim() {
        return Some(IssueReason::IssuerChanged);
    }
    let wanted = request.clone().normalized();
    if summary.common_name != wanted.common_name
        || summary.organizations != wanted.organizations
        || summary.dns_names != wanted.dns_names
        || summary.ip_addresses != wanted.ip_addresses
        || summary.is_ca != wanted.is_ca
        || summary.usages != extended_usages(&wanted.usages)
    {
        return Some(IssueReason::RequestChanged);
    }
    // A certificate valid for longer than the (shortened) validity asks for would keep serving
    // past what the policy allows: issue one that fits, as cert-manager does on a changed duration.
    if let Ok(validity) = jiff::SignedDuration::try_from(request.validity)
        && let Some(longest) = validity.checked_add(VALIDITY_SLACK)
        && let Ok(latest) = now.checked_add(longest)
        && summary.not_after > latest
    {
        return Some(IssueReason::ValidityShortened);
    }
    let margin = jiff::SignedDuration::try_from(request.renewal_margin())
        .unwrap_or(jiff::SignedDuration::MAX);
    let renew_at = summary
        .not_after
        .checked_sub(margin)
        .unwrap_or(Timestamp::MIN);
    (now >= renew_at).then_some(IssueReason::RenewalDue)
}

/// When a stored certificate should be looked at again: its renewal time.
pub fn renewal_time(existing: &TlsMaterial, request: &CertificateRequest) -> Option<Timestamp> {
    let summary = summarize(&existing.cert_pem).ok()?;
    let margin = jiff::SignedDuration::try_from(request.renewal_margin()).ok()?;
    summary.not_after.checked_sub(margin).ok()
}
