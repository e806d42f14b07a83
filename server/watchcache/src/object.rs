//! One object as the cache holds it: its JSON, encoded once when its change arrives, and the
//! encodings it was served in.
//!
//! kube-apiserver's watch cache keeps decoded objects and, for watch events, a `cachingObject`
//! that remembers each serialization. Here the JSON encoding is kept: a list in JSON without
//! selectors (the common case, and every informer's) copies bytes instead of encoding every item
//! again, and the memory a cached object costs is about its JSON's size (a decoded
//! `serde_json::Value` beside it took about five times that). Lists with selectors and lists in
//! other encodings decode the items they read, as storage does, without reading storage. Types
//! whose API form differs from the stored one (custom resources get their version's apiVersion and
//! schema defaults on read) keep the JSON of the type last listed beside it, made once and reused
//! until another version, or a changed definition of the type, is listed; the protobuf encoding of
//! the served form is made the first time a protobuf watch (or list) sends the object, and kept
//! beside it the same way, so N protobuf watchers encode each event once. Objects are kept in their
//! stored form (the `resourceVersion` of their last write and the `kcp.io/cluster` annotation set,
//! as `ObjectStore` reads them), under their key relative to the type's root,
//! `<cluster>/[<namespace>/]<name>`, whose byte order is storage's.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use kcp_apimachinery::meta;
use kcp_apimachinery::protobuf::{self, ProtobufError};
use kcp_registry::ResourceType;
use kcp_registry::storage::objects::CLUSTER_ANNOTATION;
use serde_json::Value;

/// An object of the cache: its stored form as JSON, and its API form for the type last served.
#[derive(Debug)]
pub struct CachedObject {
    json: Bytes,
    served: Mutex<Option<Served>>,
}

/// Why a cached object could not be served in an encoding.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("protobuf: {0}")]
    Protobuf(#[from] ProtobufError),
}

/// The encodings of an object as one resource type (one served version of one definition)
/// returns it.
struct Served {
    /// Held weakly, so a type no longer served is not kept alive, and compared by address: the
    /// allocation stays while this points at it, so no other type can take its address.
    rt: Weak<ResourceType>,
    /// `None` when the type serves the stored form as it is.
    json: Option<Bytes>,
    /// The enveloped protobuf body, once asked for.
    protobuf: Option<Bytes>,
}

impl fmt::Debug for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
        write!(
            f,
            "Served({} JSON bytes, {} protobuf bytes)",
            size(&self.json),
            size(&self.protobuf)
        )
    }
}

impl CachedObject {
    /// An object in its stored form, as `ObjectStore` reads it.
    pub fn new(object: &Value) -> Result<CachedObject, serde_json::Error> {
        let json = encode(object)?;
        Ok(CachedObject {
            json,
            served: Mutex::new(None),
        })
    }

    /// The object as `rt` serves it (`storage_to_api`), as compact JSON: the stored bytes for types
    /// served as stored, else made on the first call for `rt` and kept until another type asks.
    pub fn served_json(&self, rt: &Arc<ResourceType>) -> Result<Bytes, EncodeError> {
        if rt.served_as_stored() {
            return Ok(self.json.clone());
        }
        if let Some(json) = self.kept(rt, |served| served.json.clone()) {
            return Ok(json);
        }
        let json = encode(&self.served_value(rt)?)?;
        // Most objects of such types read as they are stored (a system CRD's Workspaces and
        // LogicalClusters: apiVersion and defaults already there): keep the stored bytes, not a
        // second copy of them.
        let json = match json == self.json {
            true => self.json.clone(),
            false => json,
        };
        self.keep(rt, |served| served.json = Some(json.clone()));
        Ok(json)
    }

    /// The object as `rt` serves it, as an enveloped protobuf body (`k8s\0` + `runtime.Unknown`):
    /// made on the first call for `rt` and kept until another type asks.
    pub fn served_protobuf(&self, rt: &Arc<ResourceType>) -> Result<Bytes, EncodeError> {
        if let Some(protobuf) = self.kept(rt, |served| served.protobuf.clone()) {
            return Ok(protobuf);
        }
        let protobuf = Bytes::from(protobuf::encode(&self.served_value(rt)?)?);
        self.keep(rt, |served| served.protobuf = Some(protobuf.clone()));
        Ok(protobuf)
    }

    /// The object as `rt` serves it, decoded anew.
    pub fn served_value(&self, rt: &ResourceType) -> Result<Value, serde_json::Error> {
        Ok(rt.strategy.storage_to_api(self.decode()?))
    }

    /// The object as storage returns it (before the type's `storage_to_api`), decoded anew.
    pub fn decode(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// The object encoded as compact JSON, the bytes `serde_json::to_vec` makes of it.
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    /// Bytes the object holds: its JSON and the encodings kept beside it (a served form that is
    /// the stored bytes costs nothing more).
    pub fn size(&self) -> usize {
        let own = |b: &Bytes| match b.as_ptr() == self.json.as_ptr() {
            true => 0,
            false => b.len(),
        };
        let served = self.served.lock().map_or(0, |served| {
            served.as_ref().map_or(0, |s| {
                s.json.as_ref().map_or(0, own) + s.protobuf.as_ref().map_or(0, Bytes::len)
            })
        });
        self.json.len() + served
    }

    /// What `get` reads from the encodings kept for `rt`, if they are `rt`'s.
    fn kept(
        &self,
        rt: &Arc<ResourceType>,
        get: impl Fn(&Served) -> Option<Bytes>,
    ) -> Option<Bytes> {
        let served = self.served.lock().ok()?;
        served
            .as_ref()
            .filter(|served| served.rt.as_ptr() == Arc::as_ptr(rt))
            .and_then(get)
    }

    /// Keeps an encoding for `rt`, dropping those of another type.
    fn keep(&self, rt: &Arc<ResourceType>, set: impl FnOnce(&mut Served)) {
        if let Ok(mut served) = self.served.lock() {
            let current = served
                .as_ref()
                .is_some_and(|served| served.rt.as_ptr() == Arc::as_ptr(rt));
            if !current {
                *served = Some(Served {
                    rt: Arc::downgrade(rt),
                    json: None,
                    protobuf: None,
                });
            }
            if let Some(served) = served.as_mut() {
                set(served);
            }
        }
    }
}

/// Compact JSON in an allocation of its size (the encoder's buffer grows by doubling, and a cached
/// object keeps its bytes for as long as it lives).
fn encode(object: &Value) -> Result<Bytes, serde_json::Error> {
    let mut json = serde_json::to_vec(object)?;
    json.shrink_to_fit();
    Ok(Bytes::from(json))
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
    fn the_served_form_is_made_once_per_type() {
        let registry = kcp_registry::Registry::new();
        let core = registry.builtin_type("", "v1", "events").unwrap();
        let events = registry
            .builtin_type("events.k8s.io", "v1", "events")
            .unwrap();
        let stored = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"}, "reason": "Seen"});
        let cached = CachedObject::new(&stored).unwrap();
        let as_events = |cached: &CachedObject| cached.served_json(&events).unwrap();
        let expected = serde_json::to_vec(&events.strategy.storage_to_api(stored.clone())).unwrap();
        assert_eq!(as_events(&cached), &expected[..]);
        // The same bytes again, not a new encoding.
        assert_eq!(as_events(&cached).as_ptr(), as_events(&cached).as_ptr());
        // A served form equal to the stored one is the stored bytes, counted once.
        let as_stored = CachedObject::new(&events.strategy.storage_to_api(stored.clone())).unwrap();
        let size = as_stored.size();
        let served = as_events(&as_stored);
        assert_eq!(served.as_ptr(), as_stored.json().as_ptr());
        assert_eq!(as_stored.size(), size);
        // A type served as stored gets the stored bytes, and leaves the kept form alone.
        let as_core = cached.served_json(&core).unwrap();
        assert_eq!(as_core.as_ptr(), cached.json().as_ptr());
        assert_eq!(as_events(&cached).as_ptr(), as_events(&cached).as_ptr());
        // The protobuf encoding is kept beside the JSON of the same type.
        let protobuf = cached.served_protobuf(&events).unwrap();
        assert_eq!(
            protobuf,
            kcp_apimachinery::protobuf::encode(&events.strategy.storage_to_api(stored.clone()))
                .unwrap()
        );
        assert_eq!(
            cached.served_protobuf(&events).unwrap().as_ptr(),
            protobuf.as_ptr()
        );
        assert_eq!(
            cached.size(),
            cached.json().len() + expected.len() + protobuf.len()
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
