//! The frames of a watch stream, in the negotiated format: JSON lines, or length-delimited
//! protobuf `WatchEvent`s.
//!
//! JSON watches (Table watches too) are `{"type": ..., "object": ...}` lines, as kube-apiserver's
//! watch encoder writes them; protobuf watches are 4-byte big-endian length-prefixed
//! `metav1.WatchEvent` frames. An event from the watch cache is framed around the encoding its
//! object keeps (one encoding per event and format, however many watchers send it); events read
//! from storage, Tables and PartialObjectMetadata are encoded per watcher.

use std::sync::Arc;

use bytes::Bytes;
use kcp_apimachinery::{ApiError, meta, protobuf};
use kcp_registry::storage::objects::ChangeType;
use kcp_registry::{ResourceType, table};
use kcp_storage::Revision;
use kcp_watchcache::{CachedObject, EncodeError, Event, FrameKey};
use serde_json::{Value, json};

use crate::handlers::negotiation::{Encoding, Output};

/// Turns objects into watch event frames in the negotiated encoding.
pub(super) struct Encoder {
    pub(super) output: Output,
    pub(super) rt: Arc<ResourceType>,
}

fn failed(error: impl std::fmt::Display) -> ApiError {
    ApiError::internal_error(&format!("encoding a watch event: {error}"))
}

impl Encoder {
    fn protobuf(&self) -> bool {
        matches!(
            self.output,
            Output::Protobuf | Output::PartialMetadata(Encoding::Protobuf)
        )
    }

    /// One `{type, object}` frame in the stream's format.
    fn frame(&self, kind: &str, object: &Value) -> Result<Bytes, ApiError> {
        if self.protobuf() {
            return protobuf::encode_watch_event(kind, object)
                .map(Bytes::from)
                .map_err(failed);
        }
        kcp_apimachinery::watch::json_event(kind, object)
            .map(Bytes::from)
            .map_err(failed)
    }

    /// The frame of an event about `object` (as the type serves it).
    pub(super) fn event(&self, kind: &str, object: &Value) -> Result<Bytes, ApiError> {
        match self.output {
            Output::Table(include) => {
                let metadata =
                    json!({"resourceVersion": meta::resource_version(object).unwrap_or_default()});
                self.frame(
                    kind,
                    &table::for_type(&self.rt, std::slice::from_ref(object), metadata, include),
                )
            }
            Output::PartialMetadata(_) => self.frame(kind, &table::partial_object_metadata(object)),
            Output::Protobuf | Output::Json | Output::Yaml => self.frame(kind, object),
        }
    }

    /// The frame of an event about a cached object: its kept JSON or protobuf encoding framed as
    /// they are, or (Tables, metadata only) the object decoded and encoded as [`Self::event`].
    pub(super) fn cached_event(
        &self,
        kind: &str,
        object: &CachedObject,
    ) -> Result<Bytes, ApiError> {
        match self.output {
            Output::Json => {
                let json = object.served_json(&self.rt).map_err(failed)?;
                let mut frame = Vec::with_capacity(json.len() + kind.len() + 22);
                frame.extend_from_slice(b"{\"type\":\"");
                frame.extend_from_slice(kind.as_bytes());
                frame.extend_from_slice(b"\",\"object\":");
                frame.extend_from_slice(&json);
                frame.extend_from_slice(b"}\n");
                Ok(Bytes::from(frame))
            }
            Output::Protobuf => {
                let enveloped = object.served_protobuf(&self.rt).map_err(failed)?;
                protobuf::watch_event_frame(kind, &enveloped)
                    .map(Bytes::from)
                    .map_err(failed)
            }
            Output::Table(_) | Output::PartialMetadata(_) | Output::Yaml => {
                let served = object
                    .served_value(&self.rt)
                    .map_err(|e| failed(EncodeError::from(e)))?;
                self.event(kind, &served)
            }
        }
    }

    /// The frame of a cached event reported as `kind`: in JSON and protobuf, made once per event
    /// and shared by every watcher that sends the same frame.
    pub(super) fn cached_change(&self, kind: ChangeType, event: &Event) -> Result<Bytes, ApiError> {
        let protobuf = match self.output {
            Output::Json => false,
            Output::Protobuf => true,
            Output::Table(_) | Output::PartialMetadata(_) | Output::Yaml => {
                return self.cached_event(kind.as_str(), &event.object);
            }
        };
        let key = FrameKey {
            rt: &self.rt,
            kind,
            protobuf,
        };
        event.frame(key, || self.cached_event(kind.as_str(), &event.object))
    }

    pub(super) fn bookmark(
        &self,
        revision: Revision,
        initial_events_end: bool,
    ) -> Result<Bytes, ApiError> {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.rt.kind, "apiVersion": self.rt.api_version(), "metadata": metadata});
        self.frame("BOOKMARK", &object)
    }

    /// The ERROR event that ends a stream (a Status, which every format can carry).
    pub(super) fn error(&self, error: &ApiError) -> Bytes {
        self.frame("ERROR", &error.to_status()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_registry::table::IncludeObject;

    fn encoder(output: Output, resource: &str) -> Encoder {
        let registry = kcp_registry::Registry::new();
        let rt = registry.builtin_type("", "v1", resource).unwrap();
        Encoder { output, rt }
    }

    #[test]
    fn include_object_none_is_still_a_row() {
        let encoder = encoder(Output::Table(IncludeObject::None), "configmaps");
        let event: Value = serde_json::from_slice(
            &encoder
                .event("ADDED", &json!({"metadata": {"name": "a"}}))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["kind"], "Table");
        assert!(event["object"]["rows"][0].get("object").is_none());
    }

    #[test]
    fn cached_frames_are_the_bytes_of_encoding_the_event() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": "7"},
            "data": {"k": "v"}});
        let cached = kcp_watchcache::CachedObject::new(&cm).unwrap();
        for output in [
            Output::Json,
            Output::Protobuf,
            Output::Table(IncludeObject::Metadata),
        ] {
            let encoder = encoder(output, "configmaps");
            for kind in ["ADDED", "MODIFIED", "DELETED"] {
                assert_eq!(
                    encoder.cached_event(kind, &cached).unwrap(),
                    encoder.event(kind, &cm).unwrap(),
                    "{kind}"
                );
            }
        }
    }
}
