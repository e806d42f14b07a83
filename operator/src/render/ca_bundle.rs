//! Merged CA bundles: the operator's CA plus CAs users bring, as one `tls.crt`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use crate::pki::material::TLS_CERT_KEY;
use crate::validate::Owner;

use super::pod;

/// Concatenates PEM bundles in order, each ending in a newline.
pub fn merged_bundle_secret(owner: &Owner, name: String, bundles: &[&str]) -> Secret {
    let merged: String = bundles
        .iter()
        .map(|pem| pem.trim())
        .filter(|pem| !pem.is_empty())
        .map(|pem| format!("{pem}\n"))
        .collect();
    Secret {
        metadata: pod::object_meta(owner, name, owner.names.labels()),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            TLS_CERT_KEY.to_owned(),
            ByteString(merged.into_bytes()),
        )])),
        ..Default::default()
    }
}
