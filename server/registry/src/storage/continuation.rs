//! The `continue` token of paginated lists.
//!
//! Like kube-apiserver's, it is opaque base64 JSON holding the revision the first page was read at and
//! the key to continue after, so every page of one list comes from the same snapshot. A token for a
//! compacted revision answers `410 Expired`, which tells clients to restart the list.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kcp_apimachinery::ApiError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    /// Token format version, `meta.k8s.io/v1` like upstream.
    v: String,
    /// The revision the list is pinned to.
    rv: i64,
    /// The storage key to continue after, relative to the list prefix.
    start: String,
}

impl Continuation {
    pub fn new(revision: i64, after_relative_key: &str) -> Self {
        Continuation {
            v: "meta.k8s.io/v1".into(),
            rv: revision,
            start: after_relative_key.into(),
        }
    }

    pub fn revision(&self) -> i64 {
        self.rv
    }

    pub fn after(&self) -> &str {
        &self.start
    }

    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    pub fn decode(token: &str) -> Result<Continuation, ApiError> {
        let invalid = || {
            ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            )
        };
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid())?;
        let token: Continuation = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if token.v != "meta.k8s.io/v1" || token.rv <= 0 || token.start.contains("..") {
            return Err(invalid());
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let token = Continuation::new(42, "default/cm-3");
        assert_eq!(Continuation::decode(&token.encode()).unwrap(), token);
        assert_eq!(Continuation::decode("not-base64!").unwrap_err().code, 400);
        assert_eq!(
            Continuation::decode(&URL_SAFE_NO_PAD.encode(b"{}"))
                .unwrap_err()
                .code,
            400
        );
    }
}
