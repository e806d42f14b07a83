//! The pod-template annotation that rolls pods when a mounted certificate or config changes.
//!
//! kcp reads its certificates at start, so a renewed Secret only takes effect after a restart.
//! Hashing the content of everything a pod mounts into one annotation makes the Deployment's
//! template change exactly when that content changes.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use sha2::{Digest, Sha256};

/// Pod-template annotation carrying the [`content_revision`].
pub const REVISION_ANNOTATION: &str = "operator.kcp.io/mounted-content-revision";

/// A short hash over named data maps (Secret or ConfigMap data), independent of map order.
pub fn content_revision<'a>(
    sources: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, ByteString>)>,
) -> String {
    let sorted: BTreeMap<&str, &BTreeMap<String, ByteString>> = sources.into_iter().collect();
    let mut hasher = Sha256::new();
    for (name, data) in sorted {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        for (key, value) in data {
            hasher.update(key.as_bytes());
            hasher.update([0]);
            hasher.update((value.0.len() as u64).to_be_bytes());
            hasher.update(&value.0);
        }
        hasher.update([0xff]);
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(value: &str) -> BTreeMap<String, ByteString> {
        BTreeMap::from([("tls.crt".to_owned(), ByteString(value.as_bytes().to_vec()))])
    }

    #[test]
    fn revision_ignores_order_and_follows_content() {
        let (a, b) = (data("one"), data("two"));
        let forward = content_revision([("a", &a), ("b", &b)]);
        let backward = content_revision([("b", &b), ("a", &a)]);
        assert_eq!(forward, backward);
        let renewed = data("three");
        assert_ne!(forward, content_revision([("a", &a), ("b", &renewed)]));
    }
}
