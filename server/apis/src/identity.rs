//! An APIExport's identity: a random key in a Secret of the export's logical cluster and its hash.
//!
//! Upstream generates a Secret named after the export in namespace `kcp-system`, data key `key` = a
//! random 256-bit string, and records `status.identityHash = hex(sha256(key))` once, never to change.
//! The hash names the storage of the export's resources in every consumer, so whoever holds the key
//! (and only they) can create another export sharing that storage.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The namespace of generated identity Secrets.
pub const SECRET_NAMESPACE: &str = "kcp-system";
/// The Secret's data key that holds the identity key.
pub const SECRET_KEY: &str = "key";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("secret is missing data.{SECRET_KEY}")]
    MissingKey,
    #[error("secret data.{SECRET_KEY} is not base64")]
    NotBase64,
}

/// A new random identity key: 256 random bits, base64-encoded.
pub fn new_key() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    STANDARD.encode(bytes)
}

/// `hex(sha256(key))`.
pub fn hash(key: &[u8]) -> String {
    Sha256::digest(key)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The identity hash of a stored Secret (its `data` values are base64).
pub fn hash_of_secret(secret: &Value) -> Result<String, IdentityError> {
    let encoded = secret
        .pointer(&format!("/data/{SECRET_KEY}"))
        .and_then(Value::as_str)
        .filter(|key| !key.is_empty())
        .ok_or(IdentityError::MissingKey)?;
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| IdentityError::NotBase64)?;
    if key.is_empty() {
        return Err(IdentityError::MissingKey);
    }
    Ok(hash(&key))
}

/// The identity Secret generated for the export `export_name`, holding `key`.
pub fn secret(export_name: &str, key: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": export_name, "namespace": SECRET_NAMESPACE},
        "type": "Opaque",
        "data": {SECRET_KEY: STANDARD.encode(key.as_bytes())},
    })
}

/// The `spec.identity.secretRef` an export gets when it names none.
pub fn default_secret_ref(export_name: &str) -> Value {
    json!({"name": export_name, "namespace": SECRET_NAMESPACE})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_hex_sha256_of_the_key() {
        assert_eq!(
            hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let key = new_key();
        assert_eq!(STANDARD.decode(&key).unwrap().len(), 32);
        assert_ne!(key, new_key());
        let secret = secret("widgets", &key);
        assert_eq!(hash_of_secret(&secret), Ok(hash(key.as_bytes())));
        assert_eq!(
            hash_of_secret(&json!({"data": {}})),
            Err(IdentityError::MissingKey)
        );
        assert_eq!(
            hash_of_secret(&json!({"data": {"key": "%%"}})),
            Err(IdentityError::NotBase64)
        );
    }
}
