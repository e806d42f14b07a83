//! Names and hashes the controllers give the objects they make.
//!
//! Clients recognise workload pods by the shapes Kubernetes gives them (`<deploy>-<hash>-<xxxxx>`,
//! `<sts>-<ordinal>`, revision `<sts>-<hash>`), so the agent produces the same shapes with
//! Kubernetes' alphabet. The hash itself cannot be Kubernetes' (that one hashes Go's printed form
//! of the struct); FNV-32a over the template's JSON is as stable: the same template always gives
//! the same hash, any change gives a new one.

use rand::Rng;
use serde::Serialize;

/// Kubernetes' `rand` alphabet: no vowels (no words) and no look-alike characters.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bits.
pub fn fnv32a(data: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in data {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Kubernetes' `SafeEncodeString`: every character mapped into [`ALPHANUMS`].
pub fn safe_encode(text: &str) -> String {
    text.chars()
        .map(|c| char::from(ALPHANUMS[(c as usize) % ALPHANUMS.len()]))
        .collect()
}

/// The hash of a pod template (plus the collision count, as Kubernetes mixes it in), encoded the
/// way `pod-template-hash` labels look (e.g. `5d7f9c8b6`).
pub fn template_hash<T: Serialize>(template: &T, collision_count: i32) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if collision_count != 0 {
        bytes.extend_from_slice(collision_count.to_string().as_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

/// Five random characters, as `generateName` appends.
pub fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| char::from(ALPHANUMS[rng.random_range(0..ALPHANUMS.len())]))
        .collect()
}

/// `<deploy>-<hash>`: the name the Deployment's ReplicaSet would have.
pub fn replica_set_name(deployment: &str, hash: &str) -> String {
    format!("{deployment}-{hash}")
}

/// `<deploy>-<hash>-<xxxxx>`.
pub fn deployment_pod_name(deployment: &str, hash: &str) -> String {
    format!("{}-{}", replica_set_name(deployment, hash), random_suffix())
}

/// `<sts>-<ordinal>`.
pub fn stateful_pod_name(statefulset: &str, ordinal: i32) -> String {
    format!("{statefulset}-{ordinal}")
}

/// The ordinal of `pod` when it is named `<statefulset>-<ordinal>`.
pub fn ordinal_of(statefulset: &str, pod: &str) -> Option<i32> {
    let rest = pod.strip_prefix(statefulset)?.strip_prefix('-')?;
    if rest.is_empty()
        || !rest.bytes().all(|b| b.is_ascii_digit())
        || rest.starts_with('0') && rest.len() > 1
    {
        return None;
    }
    rest.parse().ok()
}

/// `<template>-<sts>-<ordinal>`: the claim of a StatefulSet's volumeClaimTemplate.
pub fn claim_name(template: &str, statefulset: &str, ordinal: i32) -> String {
    format!("{template}-{statefulset}-{ordinal}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_reference_vectors() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_uses_kubernetes_alphabet() {
        // '0' is 48, 48 % 27 = 21 -> '4'; '9' is 57, 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("09"), "4f");
        let hash = template_hash(&serde_json::json!({"spec": {"containers": []}}), 0);
        assert!(hash.bytes().all(|b| ALPHANUMS.contains(&b)), "{hash}");
        assert!(!hash.is_empty() && hash.len() <= 10);
    }

    #[test]
    fn template_hash_is_stable_and_sensitive() {
        let a = serde_json::json!({"metadata": {"labels": {"app": "a"}}, "spec": {"x": 1}});
        let b = serde_json::json!({"metadata": {"labels": {"app": "a"}}, "spec": {"x": 2}});
        assert_eq!(template_hash(&a, 0), template_hash(&a, 0));
        assert_ne!(template_hash(&a, 0), template_hash(&b, 0));
        assert_ne!(template_hash(&a, 0), template_hash(&a, 1));
    }

    #[test]
    fn pod_names() {
        let name = deployment_pod_name("web", "5d7f9c8b6");
        assert!(name.starts_with("web-5d7f9c8b6-"), "{name}");
        assert_eq!(name.len(), "web-5d7f9c8b6-".len() + 5);
        assert_eq!(stateful_pod_name("etcd", 2), "etcd-2");
        assert_eq!(ordinal_of("etcd", "etcd-2"), Some(2));
        assert_eq!(ordinal_of("etcd", "etcd-12"), Some(12));
        assert_eq!(ordinal_of("etcd", "etcd-02"), None);
        assert_eq!(ordinal_of("etcd", "etcd-x"), None);
        assert_eq!(ordinal_of("etcd", "etcdx-1"), None);
        assert_eq!(ordinal_of("etcd", "etcd-"), None);
        assert_eq!(claim_name("data", "etcd", 1), "data-etcd-1");
    }
}
