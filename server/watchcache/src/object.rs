//! One object as the cache holds it: its JSON, encoded once when its change arrives.
//!
//! kube-apiserver's watch cache keeps decoded objects and, for watch events, a `cachingObject`
//! that remembers each serialization. Here only the JSON encoding is kept: a list in JSON without
//! selectors (the common case, and every informer's) copies bytes instead of encoding every item
//! again, and the memory a cached object costs is about its JSON's size (a decoded
//! `serde_json::Value` beside it took about five times that). Lists with selectors and lists in
//! other encodings decode the items they read, as storage does, without reading storage. Objects
//! are kept in their stored form (the `resourceVersion` of their
//! last write and the `kcp.io/cluster` annotation set, as `ObjectStore` reads them), under their key
//! relative to the type's root, `<cluster>/[<namespace>/]<name>`, whose byte order is storage's.

use bytes::Bytes;
use kcp_apimachinery::meta;
use kcp_registry::storage::objects::CLUSTER_ANNOTATION;
use serde_json::Value;

/// An object of the cache: its stored form as JSON.
#[derive(Debug)]
pub struct CachedObject {
    json: Bytes,
}

impl CachedObject {
    pub(crate) fn new(object: &Value) -> Result<CachedObject, serde_json::Error> {
        let json = Bytes::from(serde_json::to_vec(object)?);
        Ok(CachedObject { json })
    }

    /// The object as storage returns it (before the type's `storage_to_api`), decoded anew.
    pub fn decode(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// The object encoded as compact JSON, the bytes `serde_json::to_vec` makes of it.
    pub fn json(&self) -> &Bytes {
        &self.json
    }
}

/// The key of an object relative to its type's root, rebuilt from what decoding put in it: the
/// logical cluster (from the key, as the annotation), the namespace of namespaced types, the name.
pub(crate) fn relative_key(object: &Value, namespaced: bool) -> Option<String> {
    let cluster = object
        .get("metadata")?
        .get("annotations")?
        .get(CLUSTER_ANNOTATION)?
        .as_str()?;
    let name = meta::name(object)?;
    match meta::namespace(object).filter(|ns| namespaced && !ns.is_empty()) {
        Some(namespace) => Some(format!("{cluster}/{namespace}/{name}")),
        None => Some(format!("{cluster}/{name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_follow_the_storage_layout() {
        let cm = json!({"metadata": {"name": "x", "namespace": "default",
            "annotations": {"kcp.io/cluster": "abc"}}});
        assert_eq!(relative_key(&cm, true).as_deref(), Some("abc/default/x"));
        let ns = json!({"metadata": {"name": "default", "annotations": {"kcp.io/cluster": "abc"}}});
        assert_eq!(relative_key(&ns, false).as_deref(), Some("abc/default"));
        assert_eq!(
            relative_key(&json!({"metadata": {"name": "x"}}), false),
            None
        );
    }

    #[test]
    fn json_is_the_compact_encoding() {
        let object = json!({"b": 1, "a": [true, null]});
        let cached = CachedObject::new(&object).unwrap();
        assert_eq!(cached.json(), &serde_json::to_vec(&object).unwrap()[..]);
        assert_eq!(cached.decode().unwrap(), object);
    }
}
