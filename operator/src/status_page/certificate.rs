//! A certificate Secret as the status page knows it: its name, the custom resource that owns it
//! and the validity of its `tls.crt`, read once when the Secret arrives; nothing else of the
//! Secret is kept. The renewal time uses the operator's own rule (`pki::request`): a renewal is
//! due when a third of the lifetime is left, as cert-manager (upstream's issuer) does.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use crate::pki::inspect::summarize;
use crate::pki::request::RENEWAL_LIFETIME_DIVISOR;

/// The Secret key holding the certificate.
const CERTIFICATE_KEY: &str = "tls.crt";
/// The API group whose owners the page shows certificates for.
const OPERATOR_GROUP_PREFIX: &str = "operator.kcp.io/";

/// The validity of one certificate Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateExpiry {
    pub namespace: String,
    pub secret: String,
    /// Kind and name of the operator object owning the Secret.
    pub owner_kind: String,
    pub owner_name: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// Where a certificate stands at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// Before its renewal time.
    Valid,
    /// Past its renewal time: the operator should have issued a new one (a warning).
    RenewalDue,
    Expired,
}

impl CertificateExpiry {
    /// The validity of `secret`'s `tls.crt`, when it is a certificate owned by an operator
    /// object.
    pub fn of_secret(secret: &Secret) -> Option<Self> {
        let owner = secret
            .owner_references()
            .iter()
            .find(|owner| owner.api_version.starts_with(OPERATOR_GROUP_PREFIX))?;
        let pem = secret.data.as_ref()?.get(CERTIFICATE_KEY)?;
        let summary = summarize(std::str::from_utf8(&pem.0).ok()?).ok()?;
        Some(Self {
            namespace: secret.namespace().unwrap_or_default(),
            secret: secret.name_any(),
            owner_kind: owner.kind.clone(),
            owner_name: owner.name.clone(),
            not_before: summary.not_before,
            not_after: summary.not_after,
        })
    }

    /// When the operator renews it: a third of its lifetime before `notAfter`.
    pub fn renews_at(&self) -> Timestamp {
        let lifetime = self.not_after.duration_since(self.not_before);
        let margin = lifetime / i32::try_from(RENEWAL_LIFETIME_DIVISOR).unwrap_or(i32::MAX);
        self.not_after.checked_sub(margin).unwrap_or(self.not_after)
    }

    pub fn validity(&self, now: Timestamp) -> Validity {
        if now >= self.not_after {
            Validity::Expired
        } else if now >= self.renews_at() {
            Validity::RenewalDue
        } else {
            Validity::Valid
        }
    }

    /// Whether it belongs to the object `kind`/`name` in `namespace`.
    pub fn owned_by(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.owner_kind == kind && self.namespace == namespace && self.owner_name == name
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;
    use crate::pki::{Authority, CertificateRequest};

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("timestamp")
    }

    fn secret(owner_api_version: &str, pem: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("root-rootshard-server".into()),
                namespace: Some("kcp".into()),
                owner_references: Some(vec![OwnerReference {
                    api_version: owner_api_version.into(),
                    kind: "RootShard".into(),
                    name: "root".into(),
                    uid: "u".into(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("tls.crt".to_owned(), ByteString(pem.as_bytes().to_vec())),
                ("tls.key".to_owned(), ByteString(b"secret key".to_vec())),
            ])),
            ..Secret::default()
        }
    }

    #[test]
    fn reads_the_validity_of_an_owned_certificate() {
        let now = Timestamp::now();
        let ca = Authority::generate_root(&CertificateRequest::ca("ca"), now).expect("ca");
        let pem = ca.cert_pem().to_owned();
        let expiry = CertificateExpiry::of_secret(&secret("operator.kcp.io/v1alpha1", &pem))
            .expect("a certificate");
        assert_eq!(expiry.secret, "root-rootshard-server");
        assert!(expiry.owned_by("RootShard", "kcp", "root"));
        assert!(!expiry.owned_by("Shard", "kcp", "root"));
        assert!(expiry.not_after > now);
        assert_eq!(expiry.validity(now), Validity::Valid);
        assert!(
            CertificateExpiry::of_secret(&secret("apps/v1", &pem)).is_none(),
            "not an operator object's Secret"
        );
        assert!(
            CertificateExpiry::of_secret(&secret("operator.kcp.io/v1alpha1", "junk")).is_none()
        );
    }

    #[test]
    fn renewal_is_due_with_a_third_of_the_lifetime_left() {
        let expiry = CertificateExpiry {
            namespace: "kcp".into(),
            secret: "s".into(),
            owner_kind: "Shard".into(),
            owner_name: "a".into(),
            not_before: at(0),
            not_after: at(3000),
        };
        assert_eq!(expiry.renews_at(), at(2000));
        assert_eq!(expiry.validity(at(1999)), Validity::Valid);
        assert_eq!(expiry.validity(at(2000)), Validity::RenewalDue);
        assert_eq!(expiry.validity(at(3000)), Validity::Expired);
    }
}
