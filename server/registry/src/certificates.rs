//! certificates.k8s.io/v1 CertificateSigningRequest, with the `status` and `approval`
//! subresources.

use serde_json::{Value, json};

use super::{ResourceType, Strategy};

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        false,
        &["csr"],
        Box::new(Requests),
    );
    t.subresources = vec!["status".into(), "approval".into()];
    t
}

struct Requests;

impl Strategy for Requests {
    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        if subresource.is_none() {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
        }
    }
}
