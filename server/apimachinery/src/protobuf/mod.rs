//! The Kubernetes protobuf wire format (`application/vnd.kubernetes.protobuf`) for the kinds
//! this server serves, translated to and from the JSON objects the server keeps.
//!
//! client-go's typed clients, and with them `kubectl create configmap|secret|namespace|
//! serviceaccount|deployment|service|poddisruptionbudget|role|rolebinding|token` and
//! `kubectl auth can-i|whoami`, send request bodies only as protobuf and prefer protobuf
//! responses, so a server speaking only JSON cannot take their writes. That
//! holds for the workload kinds this server serves through CRDs (apps/v1, Service, Pod, ...) as
//! much as for its built-in ones, so both have tables. Rather than generated Rust structs, each
//! message is a table (field number → JSON key, type, Go shape) in `messages`, and one codec
//! walks those tables; a new kind is a new root of the table generator. Encoding reproduces Go's
//! marshaller byte for byte (field order, empty value fields, sorted maps), so responses equal
//! kube-apiserver's.
//! apiextensions.k8s.io/v1 (CustomResourceDefinition) and meta.k8s.io/v1
//! PartialObjectMetadata(List) have tables too; Table has none (kube serves it as JSON only),
//! and custom resources have none: a protobuf body for one is refused with 415, and a response
//! to a client that only prefers protobuf is JSON.
//!
//! Kubernetes version: the tables in `messages/generated.rs` are generated (by our generator,
//! `tests/protobuf_tables.rs`, a test that fails when the file is stale) from the crates.io
//! packages k8s-pb 0.9.0 (kube-rs's prost code for the Kubernetes 1.35 `.proto` files: field
//! numbers and types) and k8s-openapi `v1_35` (JSON keys, the version the rest of the server
//! follows), plus `go_shapes.txt`, the Go pointer and embedded fields no `.proto` records. Fields
//! on one side only: a JSON key with no table field (a field newer than 1.35, say) is not encoded,
//! so protobuf clients never see it; a field number with no table entry (a newer client's field)
//! is skipped when decoding, as Go's decoder skips unknown fields; a 1.35 proto field whose JSON
//! key k8s-openapi does not know fails the generator. `tests/protobuf_k8s_pb.rs` compares our
//! bytes for every field of every registered kind with prost's.
//!
//! A body is the four bytes `k8s\0` followed by a `runtime.Unknown` envelope
//! `{1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType}` whose
//! `raw` is the object's message. A list can be sent in pieces around the messages of its items
//! ([`ListFrame`]), as the watch cache sends its lists. Watch streams instead carry
//! length-prefixed `WatchEvent` frames whose `object` holds such an enveloped body
//! ([`encode_watch_event`]).

mod base64;
mod codec;
mod messages;
mod schema;
mod wire;

use serde_json::{Map, Value};
use thiserror::Error;

use codec::Path;
use wire::{Reader, WireValue, Writer};

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What every enveloped body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";

/// `runtime.TypeMeta`, the envelope's record of the object's type.
static TYPE_META: schema::Message = schema::Message {
    name: "TypeMeta",
    fields: &[
        schema::Field::value(1, "apiVersion", schema::FieldType::String),
        schema::Field::value(2, "kind", schema::FieldType::String),
    ],
};

/// Why a body could not be decoded or an object encoded.
#[derive(Debug, Error)]
pub enum ProtobufError {
    #[error("body is not a Kubernetes protobuf message: it does not start with \"k8s\\x00\"")]
    MissingMagic,
    #[error("protobuf message is truncated")]
    Truncated,
    #[error("protobuf varint is longer than 64 bits")]
    VarintOverflow,
    #[error("invalid protobuf field key {0}")]
    InvalidKey(u64),
    #[error("invalid protobuf wire type {0}")]
    InvalidWireType(u8),
    #[error("wrong wire type {wire_type} for {message}.{field}")]
    WrongWireType {
        message: &'static str,
        field: &'static str,
        wire_type: u8,
    },
    #[error("invalid {message}.{field}: {reason}")]
    InvalidField {
        message: &'static str,
        field: &'static str,
        reason: String,
    },
    #[error("object has no apiVersion or no kind")]
    MissingTypeMeta,
    #[error("watch frame announces {announced} bytes but holds {actual}")]
    FrameLength { announced: usize, actual: usize },
    /// The body is well-formed but its kind has no table here: the server should answer 415.
    #[error("no protobuf encoding for kind {kind:?} in {api_version:?}")]
    Unsupported { api_version: String, kind: String },
    /// The JSON handed to an encoder does not have the shape of its kind.
    #[error("cannot encode {path}: {reason}")]
    InvalidObject { path: String, reason: String },
}

impl ProtobufError {
    /// True when the kind is not supported (HTTP 415); every other decode error means the body
    /// is malformed (HTTP 400).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, ProtobufError::Unsupported { .. })
    }
}

/// Whether objects of `kind` in `api_version` can be decoded and encoded.
pub fn supports(api_version: &str, kind: &str) -> bool {
    messages::lookup(api_version, kind).is_some()
}

fn unsupported(api_version: &str, kind: &str) -> ProtobufError {
    ProtobufError::Unsupported {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    }
}

/// Decodes an enveloped protobuf body to the object's JSON, with `apiVersion` and `kind` set
/// from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or(ProtobufError::MissingMagic)?;
    let mut type_meta = Map::new();
    let mut raw: &[u8] = &[];
    let mut reader = Reader::new(envelope);
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire) {
            (1, WireValue::Len(b)) => codec::decode_message(&TYPE_META, b, &mut type_meta)?,
            (2, WireValue::Len(b)) => raw = b,
            (1 | 2, _) => {
                return Err(ProtobufError::WrongWireType {
                    message: "Unknown",
                    field: if number == 1 { "typeMeta" } else { "raw" },
                    wire_type: wire.wire_type(),
                });
            }
            // contentEncoding and contentType: Go ignores them when decoding, so do we.
            _ => {}
        }
    }
    let (Some(Value::String(api_version)), Some(Value::String(kind))) =
        (type_meta.get("apiVersion"), type_meta.get("kind"))
    else {
        return Err(ProtobufError::MissingTypeMeta);
    };
    let message =
        messages::lookup(api_version, kind).ok_or_else(|| unsupported(api_version, kind))?;
    let mut object = type_meta;
    codec::decode_message(message, raw, &mut object)?;
    Ok(Value::Object(object))
}

/// Encodes the JSON of a supported kind (chosen by its `apiVersion` and `kind`) to an
/// enveloped protobuf body.
pub fn encode(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let map = object
        .as_object()
        .ok_or_else(|| ProtobufError::InvalidObject {
            path: Path::Root.to_string(),
            reason: "expected a JSON object".to_string(),
        })?;
    let (Some(api_version), Some(kind)) = (
        map.get("apiVersion").and_then(Value::as_str),
        map.get("kind").and_then(Value::as_str),
    ) else {
        return Err(ProtobufError::MissingTypeMeta);
    };
    let message =
        messages::lookup(api_version, kind).ok_or_else(|| unsupported(api_version, kind))?;
    // One buffer for the whole body: nested messages are written in place.
    let mut body = Writer::with_prefix(MAGIC);
    codec::write_nested(&mut body, 1, &TYPE_META, map, &Path::Root)?;
    codec::write_nested(&mut body, 2, message, map, &Path::Root)?;
    end_envelope(&mut body);
    Ok(body.into_bytes())
}

/// The same body as [`encode`] makes of a list `{apiVersion, kind: list_kind, metadata, items}`,
/// from its items already encoded by [`encode`] (their enveloped bodies), in one buffer.
pub fn encode_list(
    api_version: &str,
    list_kind: &str,
    metadata: &Value,
    items: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, ProtobufError> {
    let messages = items
        .iter()
        .map(|item| enveloped_message(item.as_ref()))
        .collect::<Result<Vec<&[u8]>, _>>()?;
    let frame = ListFrame::new(
        api_version,
        list_kind,
        metadata,
        messages.iter().map(|m| m.len()),
    )?;
    let mut body = frame.head().to_vec();
    for message in messages {
        frame.item_header(message.len(), &mut body);
        body.extend_from_slice(message);
    }
    body.extend_from_slice(frame.tail());
    Ok(body)
}

/// The bytes of a list body around its items, for a body sent in pieces: [`ListFrame::head`],
/// then for each item [`ListFrame::item_header`] and the item's message ([`enveloped_message`] of
/// its body made by [`encode`]), then [`ListFrame::tail`] are the bytes [`encode_list`] makes.
/// A list served from the watch cache frames the encoding each object keeps instead of encoding
/// every item again. The envelope's `raw` field (the list message) announces its length before
/// its content, so the size of every item's message is needed before the first byte.
pub struct ListFrame {
    head: Vec<u8>,
    items_field: u32,
    tail: Vec<u8>,
}

impl ListFrame {
    /// The frame of a list `{apiVersion, kind: list_kind, metadata}` of items whose messages are
    /// `item_lengths` bytes long.
    pub fn new(
        api_version: &str,
        list_kind: &str,
        metadata: &Value,
        item_lengths: impl IntoIterator<Item = usize>,
    ) -> Result<ListFrame, ProtobufError> {
        let message = messages::lookup(api_version, list_kind)
            .ok_or_else(|| unsupported(api_version, list_kind))?;
        let items_field = message
            .fields
            .iter()
            .find(|field| field.json == "items")
            .ok_or_else(|| unsupported(api_version, list_kind))?
            .number;
        let type_meta = Map::from_iter([
            ("apiVersion".to_string(), Value::from(api_version)),
            ("kind".to_string(), Value::from(list_kind)),
        ]);
        let list_meta = Map::from_iter([("metadata".to_string(), metadata.clone())]);
        let mut list = Writer::default();
        codec::write_message(&mut list, message, &list_meta, &Path::Root)?;
        let list = list.into_bytes();
        let items: usize = item_lengths
            .into_iter()
            .map(|length| wire::field_header_len(items_field, length) + length)
            .sum();
        let mut head = Writer::with_prefix(MAGIC);
        codec::write_nested(&mut head, 1, &TYPE_META, &type_meta, &Path::Root)?;
        head.field_header(2, list.len() + items);
        let mut head = head.into_bytes();
        head.extend_from_slice(&list);
        let mut tail = Writer::default();
        end_envelope(&mut tail);
        Ok(ListFrame {
            head,
            items_field,
            tail: tail.into_bytes(),
        })
    }

    /// The magic, the envelope's type and the list's metadata: what comes before the items.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// Appends to `out` what comes before an item whose message is `length` bytes long.
    pub fn item_header(&self, length: usize, out: &mut Vec<u8>) {
        let mut w = Writer::appending(std::mem::take(out));
        w.field_header(self.items_field, length);
        *out = w.into_bytes();
    }

    /// What comes after the items: the rest of the envelope.
    pub fn tail(&self) -> &[u8] {
        &self.tail
    }
}

/// The envelope's fields after `raw`: Go always writes contentEncoding and contentType, empty for
/// a plain protobuf object.
fn end_envelope(w: &mut Writer) {
    w.bytes(3, b"");
    w.bytes(4, b"");
}

/// The message inside a body made by [`encode`] (`runtime.Unknown.raw`): what a list holds of
/// each item.
pub fn enveloped_message(body: &[u8]) -> Result<&[u8], ProtobufError> {
    let mut reader = Reader::new(
        body.strip_prefix(MAGIC)
            .ok_or(ProtobufError::MissingMagic)?,
    );
    while let Some((number, wire)) = reader.next_field()? {
        if let (2, WireValue::Len(raw)) = (number, wire) {
            return Ok(raw);
        }
    }
    Ok(&[])
}

/// Encodes one event of a protobuf watch stream as a complete frame: a 4-byte big-endian
/// length, then a `WatchEvent {type, object: RawExtension {raw: <enveloped object>}}`.
pub fn encode_watch_event(event_type: &str, object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let event = Map::from_iter([
        ("type".to_string(), Value::from(event_type)),
        ("object".to_string(), object.clone()),
    ]);
    let payload = codec::encode_message(&messages::WATCH_EVENT, &event, &Path::Root)?;
    let announced = u32::try_from(payload.len()).map_err(|_| ProtobufError::InvalidObject {
        path: Path::Root.to_string(),
        reason: "watch event larger than 4 GiB".to_string(),
    })?;
    let mut frame = announced.to_be_bytes().to_vec();
    frame.extend(payload);
    Ok(frame)
}

/// The same frame as [`encode_watch_event`] for an object already encoded by [`encode`] (its
/// enveloped body): a watch serving one event to many clients encodes the object once and frames
/// it for each, as the event type may differ per client (selectors turn a change into ADDED or
/// DELETED for some).
pub fn watch_event_frame(event_type: &str, enveloped: &[u8]) -> Result<Vec<u8>, ProtobufError> {
    let mut frame = Writer::with_prefix(&[0; 4]);
    frame.bytes(1, event_type.as_bytes());
    let object = frame.begin_nested(2);
    frame.bytes(1, enveloped);
    frame.end_nested(object);
    let mut frame = frame.into_bytes();
    let announced = u32::try_from(frame.len() - 4).map_err(|_| ProtobufError::InvalidObject {
        path: Path::Root.to_string(),
        reason: "watch event larger than 4 GiB".to_string(),
    })?;
    frame[..4].copy_from_slice(&announced.to_be_bytes());
    Ok(frame)
}

/// Decodes one complete watch frame (length prefix included) to its event type and object.
pub fn decode_watch_event(frame: &[u8]) -> Result<(String, Value), ProtobufError> {
    let (prefix, payload) = frame
        .split_first_chunk::<4>()
        .ok_or(ProtobufError::Truncated)?;
    let announced = u32::from_be_bytes(*prefix) as usize;
    if announced != payload.len() {
        return Err(ProtobufError::FrameLength {
            announced,
            actual: payload.len(),
        });
    }
    let mut event = Map::new();
    codec::decode_message(&messages::WATCH_EVENT, payload, &mut event)?;
    let event_type = match event.shift_remove("type") {
        Some(Value::String(t)) => t,
        _ => String::new(),
    };
    let object = event.shift_remove("object").unwrap_or(Value::Null);
    Ok((event_type, object))
}

/// Every `(apiVersion, kind)` with a protobuf encoding, in registration order: what the tests
/// that compare our bytes with another implementation walk.
#[doc(hidden)]
pub fn registered_kinds() -> Vec<(&'static str, &'static str)> {
    messages::REGISTRY
        .iter()
        .flat_map(|r| r.api_versions.iter().map(move |v| (*v, r.kind)))
        .collect()
}

/// For tests: a JSON object of a registered kind with every field of its table set to a
/// non-zero value (maps with two keys out of order, recursion cut at the second visit of a
/// message), except the fields `skip(message, json key)` names. `None` for unknown kinds.
#[doc(hidden)]
pub fn example_object(
    api_version: &str,
    kind: &str,
    skip: &dyn Fn(&str, &str) -> bool,
) -> Option<Value> {
    let message = messages::lookup(api_version, kind)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_string(), Value::from(api_version));
    object.insert("kind".to_string(), Value::from(kind));
    example::fill(message, &mut object, skip, &mut Vec::new());
    Some(Value::Object(object))
}

mod example {
    //! Fully populated example objects, built from the tables, for the wire comparison tests.

    use serde_json::{Map, Value, json};

    use super::schema::{FieldType, Label, Message};

    pub(super) fn fill(
        message: &'static Message,
        object: &mut Map<String, Value>,
        skip: &dyn Fn(&str, &str) -> bool,
        path: &mut Vec<&'static str>,
    ) {
        path.push(message.name);
        for field in message.fields {
            if skip(message.name, field.json) {
                continue;
            }
            match (field.label, field.ty) {
                (Label::Inline, FieldType::Message(nested)) => fill(nested, object, skip, path),
                (Label::Repeated, ty) => {
                    let items = vec![
                        value(ty, field.json, skip, path),
                        value(ty, "b", skip, path),
                    ];
                    object.insert(field.json.to_string(), Value::Array(items));
                }
                (Label::Map, ty) => {
                    let mut map = Map::new();
                    map.insert("zeta".to_string(), value(ty, "z", skip, path));
                    map.insert("alpha".to_string(), value(ty, "a", skip, path));
                    object.insert(field.json.to_string(), Value::Object(map));
                }
                (_, ty) => {
                    object.insert(field.json.to_string(), value(ty, field.json, skip, path));
                }
            }
        }
        path.pop();
    }

    fn recursive(message: &Message, path: &[&str]) -> bool {
        path.contains(&message.name)
    }

    fn value(
        ty: FieldType,
        name: &str,
        skip: &dyn Fn(&str, &str) -> bool,
        path: &mut Vec<&'static str>,
    ) -> Value {
        match ty {
            FieldType::String => Value::from(format!("{name}-value")),
            FieldType::Bytes => Value::from("Ynl0ZXM="),
            FieldType::Bool => Value::Bool(true),
            FieldType::Int32 => Value::from(-7),
            FieldType::Int64 => Value::from(1_234_567_890_123_i64),
            FieldType::Double => Value::from(1.5),
            FieldType::Time => Value::from("2026-01-02T03:04:05Z"),
            FieldType::MicroTime => Value::from("2026-01-02T03:04:05.123456Z"),
            FieldType::FieldsV1 => json!({"f:metadata": {"f:labels": {}}}),
            FieldType::Json => json!({"a": [1, "x"]}),
            FieldType::Object => json!({"apiVersion": "v1", "kind": "Status", "code": 410}),
            FieldType::Quantity => Value::from("500m"),
            FieldType::IntOrString => Value::from("25%"),
            FieldType::ExtraValue => json!(["x", "y"]),
            FieldType::SchemaOrArray(m) if recursive(m, path) => json!([{}, {}]),
            FieldType::SchemaOrBool(m) if recursive(m, path) => Value::Bool(true),
            FieldType::SchemaOrStringArray(m) if recursive(m, path) => json!(["p", "q"]),
            FieldType::Message(m) if recursive(m, path) => json!({}),
            FieldType::SchemaOrArray(m)
            | FieldType::SchemaOrBool(m)
            | FieldType::SchemaOrStringArray(m)
            | FieldType::Message(m) => {
                let mut object = Map::new();
                fill(m, &mut object, skip, path);
                Value::Object(object)
            }
        }
    }
}
