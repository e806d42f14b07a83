//! The one table-driven translation between protobuf messages and their JSON objects.
//!
//! Decoding follows Go's generated unmarshallers: unknown field numbers are skipped, a repeated
//! embedded message merges into the earlier one, repeated numbers are read packed or not, a
//! known field with the wrong wire type is an error. An embedded struct's fields land in the
//! enclosing JSON object. The JSON it produces is what kube-apiserver would print, minus the
//! zero values Go writes for value fields (`""`, `0`, `null` times, `{}`), which the server's
//! JSON never needs (a `Quantity` value field is the exception: Go prints its zero, `"0"`).
//!
//! Encoding follows Go's generated marshallers so that our bytes equal kube-apiserver's: fields
//! in table (field-number) order, value fields written even when absent from the JSON, pointer
//! fields only when present, map entries sorted by key.

use std::fmt;

use jiff::Timestamp;
use serde_json::{Map, Value};

use super::schema::{Field, FieldType, Label, Message};
use super::wire::{Reader, WireValue, Writer};
use super::{ProtobufError, base64};
use crate::time::{format_rfc3339, format_rfc3339_micro, parse_rfc3339};

/// `meta.v1.Timestamp`, the body of both `Time` and `MicroTime`.
static TIMESTAMP: Message = Message {
    name: "Timestamp",
    fields: &[
        Field::value(1, "seconds", FieldType::Int64),
        Field::value(2, "nanos", FieldType::Int32),
    ],
};

/// `resource.Quantity`: its canonical text in field 1.
static QUANTITY: Message = Message {
    name: "Quantity",
    fields: &[Field::optional(1, "string", FieldType::String)],
};

/// `intstr.IntOrString`: which of the two it holds, then both.
static INT_OR_STRING: Message = Message {
    name: "IntOrString",
    fields: &[
        Field::value(1, "type", FieldType::Int64),
        Field::value(2, "intVal", FieldType::Int32),
        Field::value(3, "strVal", FieldType::String),
    ],
};
/// `IntOrString.type` of a string; 0 is an integer.
const INT_OR_STRING_STRING: i64 = 1;

/// `ExtraValue`: its strings, one field 1 each.
static EXTRA_VALUE: Message = Message {
    name: "ExtraValue",
    fields: &[Field::repeated(1, "items", FieldType::String)],
};

/// What Go prints for a `Quantity` value field that was never set.
const ZERO_QUANTITY: &str = "0";

/// Seconds of Go's zero `time.Time` (0001-01-01T00:00:00Z), which Go writes as an empty message
/// and prints as JSON `null`.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_MICRO: i64 = 1_000;

// ---- decoding ----

/// Decodes `bytes` as `message` into `object`, merging with what `object` already holds.
pub(super) fn decode_message(
    message: &Message,
    bytes: &[u8],
    object: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let mut reader = Reader::new(bytes);
    while let Some((number, wire)) = reader.next_field()? {
        let Some(field) = message.field(number) else {
            continue;
        };
        match field.label {
            Label::Value | Label::Optional => match (field.ty, object.get_mut(field.json), wire) {
                (FieldType::Message(nested), Some(Value::Object(earlier)), WireValue::Len(b)) => {
                    decode_message(nested, b, earlier)?;
                }
                _ => {
                    let value = decode_value(message, field, wire)?;
                    object.insert(field.json.to_string(), value);
                }
            },
            Label::Inline => {
                let (FieldType::Message(nested), WireValue::Len(b)) = (field.ty, wire) else {
                    return Err(wrong_wire_type(message, field, wire));
                };
                decode_message(nested, b, object)?;
            }
            Label::Repeated => {
                let values = match (field.ty, wire) {
                    // Go writes repeated numbers unpacked (proto2) but reads both forms.
                    (FieldType::Bool | FieldType::Int32 | FieldType::Int64, WireValue::Len(b)) => {
                        decode_packed(message, field, b)?
                    }
                    _ => vec![decode_value(message, field, wire)?],
                };
                match object
                    .entry(field.json)
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    Value::Array(items) => items.extend(values),
                    other => *other = Value::Array(values),
                }
            }
            Label::Map => {
                let WireValue::Len(entry) = wire else {
                    return Err(wrong_wire_type(message, field, wire));
                };
                let (key, value) = decode_map_entry(message, field, entry)?;
                match object
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    Value::Object(map) => {
                        map.insert(key, value);
                    }
                    other => *other = Value::Object(Map::from_iter([(key, value)])),
                }
            }
        }
    }
    drop_unset(message, object);
    Ok(())
}

/// Removes what Go would have omitted or printed as `null`: zero value fields, unset times.
fn drop_unset(message: &Message, object: &mut Map<String, Value>) {
    for field in message.fields {
        let unset = match (field.label, object.get(field.json)) {
            (Label::Value, Some(value)) => is_zero(value),
            (Label::Optional, Some(value)) => value.is_null(),
            _ => false,
        };
        if unset {
            object.shift_remove(field.json);
        }
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
    }
}

/// The elements of a packed repeated number field: varints back to back, without keys.
fn decode_packed(
    message: &Message,
    field: &Field,
    bytes: &[u8],
) -> Result<Vec<Value>, ProtobufError> {
    let mut reader = Reader::new(bytes);
    let mut values = Vec::new();
    while let Some(v) = reader.next_packed_varint()? {
        values.push(decode_value(message, field, WireValue::Varint(v))?);
    }
    Ok(values)
}

/// One map entry `{1: key, 2: value}`; a missing key or value is its zero value, as in Go.
fn decode_map_entry(
    message: &Message,
    field: &Field,
    bytes: &[u8],
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(bytes);
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire) {
            (1, WireValue::Len(b)) => key = String::from_utf8_lossy(b).into_owned(),
            (1, _) => return Err(wrong_wire_type(message, field, wire)),
            (2, _) => value = Some(decode_value(message, field, wire)?),
            _ => {}
        }
    }
    let value = match value {
        Some(value) => value,
        None => decode_value(message, field, zero_wire(field.ty))?,
    };
    Ok((key, value))
}

/// What an absent value looks like on the wire, so that decoding it yields the zero value.
fn zero_wire(ty: FieldType) -> WireValue<'static> {
    match ty {
        FieldType::Bool | FieldType::Int32 | FieldType::Int64 => WireValue::Varint(0),
        FieldType::Double => WireValue::Fixed64(0),
        _ => WireValue::Len(&[]),
    }
}

/// One value of `field` (an element, for repeated fields and maps). Strings that are not UTF-8
/// are repaired with U+FFFD, which is what Go's JSON encoder prints for them.
fn decode_value(
    message: &Message,
    field: &Field,
    wire: WireValue<'_>,
) -> Result<Value, ProtobufError> {
    let invalid = |reason: String| ProtobufError::InvalidField {
        message: message.name,
        field: field.json,
        reason,
    };
    let value = match (field.ty, wire) {
        (FieldType::Bool, WireValue::Varint(v)) => Value::Bool(v != 0),
        // Protobuf int32 travels sign-extended to 64 bits; readers keep the low 32.
        (FieldType::Int32, WireValue::Varint(v)) => Value::from(v as i32),
        (FieldType::Int64, WireValue::Varint(v)) => Value::from(v as i64),
        (FieldType::Double, WireValue::Fixed64(bits)) => double_value(f64::from_bits(bits)),
        (FieldType::String, WireValue::Len(b)) => {
            Value::String(String::from_utf8_lossy(b).into_owned())
        }
        (FieldType::Bytes, WireValue::Len(b)) => Value::String(base64::encode(b)),
        (FieldType::Time, WireValue::Len(b)) => decode_time(b, false).map_err(invalid)?,
        (FieldType::MicroTime, WireValue::Len(b)) => decode_time(b, true).map_err(invalid)?,
        (FieldType::Quantity, WireValue::Len(b)) => {
            let mut quantity = Map::new();
            decode_message(&QUANTITY, b, &mut quantity)?;
            match quantity.shift_remove("string") {
                // Go's zero Quantity, which its marshaller writes as "0" anyway.
                None => Value::from(ZERO_QUANTITY),
                Some(Value::String(s)) if s.is_empty() => {
                    return Err(invalid("empty quantity".to_string()));
                }
                Some(text) => text,
            }
        }
        (FieldType::IntOrString, WireValue::Len(b)) => {
            let mut parts = Map::new();
            decode_message(&INT_OR_STRING, b, &mut parts)?;
            let part = |key: &str| parts.get(key).cloned();
            match parts.get("type").and_then(Value::as_i64).unwrap_or(0) {
                0 => part("intVal").unwrap_or_else(|| Value::from(0)),
                INT_OR_STRING_STRING => part("strVal").unwrap_or_else(|| Value::from("")),
                other => return Err(invalid(format!("unknown IntOrString type {other}"))),
            }
        }
        (FieldType::ExtraValue, WireValue::Len(b)) => {
            let mut extra = Map::new();
            decode_message(&EXTRA_VALUE, b, &mut extra)?;
            // Go reads no items as a nil list, which it prints as `null`; an empty list says
            // the same and keeps the key's JSON type stable.
            extra
                .shift_remove("items")
                .unwrap_or_else(|| Value::Array(Vec::new()))
        }
        (
            FieldType::SchemaOrArray(schema) | FieldType::SchemaOrStringArray(schema),
            WireValue::Len(b),
        ) => decode_schema_union(message, field, schema, b)?.schema_or_list(),
        (FieldType::SchemaOrBool(schema), WireValue::Len(b)) => {
            let union = decode_schema_union(message, field, schema, b)?;
            union.one.unwrap_or(Value::Bool(union.allows))
        }
        (FieldType::FieldsV1 | FieldType::Json, WireValue::Len(b)) => {
            match raw_field(message, field, b)? {
                Some(raw) => {
                    serde_json::from_slice(raw).map_err(|e| invalid(format!("not JSON: {e}")))?
                }
                None => Value::Null,
            }
        }
        (FieldType::Object, WireValue::Len(b)) => match raw_field(message, field, b)? {
            Some(raw) => super::decode(raw)?,
            None => Value::Null,
        },
        (FieldType::Message(nested), WireValue::Len(b)) => {
            let mut object = Map::new();
            decode_message(nested, b, &mut object)?;
            Value::Object(object)
        }
        _ => return Err(wrong_wire_type(message, field, wire)),
    };
    Ok(value)
}

/// A `float64` as Go's JSON encoder prints it: integral values without a fraction.
fn double_value(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact
    if f.fract() == 0.0 && f.abs() < EXACT {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// The parts of the apiextensions schema unions: field 1 (a schema, or `allows` of
/// `JSONSchemaPropsOrBool`) and field 2 (schemas, strings, or the schema of `OrBool`).
fn decode_schema_union(
    message: &Message,
    field: &Field,
    schema: &Message,
    bytes: &[u8],
) -> Result<SchemaUnion, ProtobufError> {
    let or_bool = matches!(field.ty, FieldType::SchemaOrBool(_));
    let mut one: Option<Map<String, Value>> = None;
    let mut many: Option<Vec<Value>> = None;
    let mut allows = false;
    let mut reader = Reader::new(bytes);
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire, or_bool) {
            (1, WireValue::Varint(v), true) => allows = v != 0,
            (1, WireValue::Len(b), false) | (2, WireValue::Len(b), true) => {
                decode_message(schema, b, one.get_or_insert_with(Map::new))?;
            }
            (2, WireValue::Len(b), false) => {
                let item = match field.ty {
                    FieldType::SchemaOrStringArray(_) => {
                        Value::String(String::from_utf8_lossy(b).into_owned())
                    }
                    _ => {
                        let mut object = Map::new();
                        decode_message(schema, b, &mut object)?;
                        Value::Object(object)
                    }
                };
                many.get_or_insert_with(Vec::new).push(item);
            }
            (1 | 2, _, _) => return Err(wrong_wire_type(message, field, wire)),
            _ => {}
        }
    }
    Ok(SchemaUnion {
        one: one.map(Value::Object),
        many,
        allows,
    })
}

/// What an apiextensions schema union holds on the wire.
struct SchemaUnion {
    /// The single schema.
    one: Option<Value>,
    /// The list, if any element was read.
    many: Option<Vec<Value>>,
    /// `JSONSchemaPropsOrBool.allows`.
    allows: bool,
}

impl SchemaUnion {
    /// The JSON of a schema-or-list union: the list when it has elements, else the schema.
    fn schema_or_list(self) -> Value {
        match (self.one, self.many) {
            (_, Some(items)) => Value::Array(items),
            (Some(one), None) => one,
            (None, None) => Value::Null,
        }
    }
}

/// Field 1 of a `{1: bytes raw}` wrapper (`FieldsV1`, `RawExtension`); `None` when empty.
fn raw_field<'a>(
    message: &Message,
    field: &Field,
    bytes: &'a [u8],
) -> Result<Option<&'a [u8]>, ProtobufError> {
    let mut raw = None;
    let mut reader = Reader::new(bytes);
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire) {
            (1, WireValue::Len(b)) => raw = Some(b),
            (1, _) => return Err(wrong_wire_type(message, field, wire)),
            _ => {}
        }
    }
    Ok(raw.filter(|b| !b.is_empty()))
}

/// A `Timestamp` body as RFC 3339: whole seconds for `Time` (Go drops its nanoseconds),
/// microseconds for `MicroTime`. Empty or Go's zero time is `null`.
fn decode_time(bytes: &[u8], micro: bool) -> Result<Value, String> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let mut fields = Map::new();
    decode_message(&TIMESTAMP, bytes, &mut fields).map_err(|e| e.to_string())?;
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = if micro {
        let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
        nanos - nanos % NANOS_PER_MICRO
    } else {
        0
    };
    // Go's time.Unix accepts nanoseconds outside [0, 1s) and carries them into the seconds.
    let seconds = seconds
        .checked_add(nanos.div_euclid(NANOS_PER_SECOND))
        .ok_or_else(|| format!("{seconds}s is out of range"))?;
    let nanos = nanos.rem_euclid(NANOS_PER_SECOND) as i32;
    if seconds == GO_ZERO_TIME_SECONDS && nanos == 0 {
        return Ok(Value::Null);
    }
    let t = Timestamp::new(seconds, nanos).map_err(|e| e.to_string())?;
    Ok(Value::String(if micro {
        format_rfc3339_micro(t)
    } else {
        format_rfc3339(t)
    }))
}

fn wrong_wire_type(message: &Message, field: &Field, wire: WireValue<'_>) -> ProtobufError {
    ProtobufError::WrongWireType {
        message: message.name,
        field: field.json,
        wire_type: wire.wire_type(),
    }
}

// ---- encoding ----

/// Where in the JSON object a value sits, for error messages; built on the stack as the
/// encoder descends and only rendered when something is wrong.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => f.write_str("object"),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

fn invalid_object(path: &Path<'_>, reason: impl Into<String>) -> ProtobufError {
    ProtobufError::InvalidObject {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Encodes `object` as `message`. JSON keys without a field in the table are not encoded.
pub(super) fn encode_message(
    message: &Message,
    object: &Map<String, Value>,
    path: &Path<'_>,
) -> Result<Vec<u8>, ProtobufError> {
    let mut w = Writer::default();
    write_message(&mut w, message, object, path)?;
    Ok(w.into_bytes())
}

/// Writes `object` as field `number` holding `message`, in place.
pub(super) fn write_nested(
    w: &mut Writer,
    number: u32,
    message: &Message,
    object: &Map<String, Value>,
    path: &Path<'_>,
) -> Result<(), ProtobufError> {
    let nested = w.begin_nested(number);
    write_message(w, message, object, path)?;
    w.end_nested(nested);
    Ok(())
}

/// Writes the fields of `object` as `message` to `w`.
pub(super) fn write_message(
    w: &mut Writer,
    message: &Message,
    object: &Map<String, Value>,
    path: &Path<'_>,
) -> Result<(), ProtobufError> {
    for field in message.fields {
        let value = object.get(field.json).filter(|v| !v.is_null());
        let at = Path::Key(path, field.json);
        match (field.label, value) {
            // The embedded struct's keys are this object's own.
            (Label::Inline, _) => {
                if let FieldType::Message(nested) = field.ty {
                    write_nested(w, field.number, nested, object, path)?;
                }
            }
            (Label::Value, None) => encode_value(w, field.number, field.ty, None, &at)?,
            (Label::Value | Label::Optional, Some(value)) => {
                encode_value(w, field.number, field.ty, Some(value), &at)?;
            }
            (Label::Repeated, Some(value)) => {
                let items = value
                    .as_array()
                    .ok_or_else(|| invalid_object(&at, "expected an array"))?;
                for (index, item) in items.iter().enumerate() {
                    let at = Path::Index(&at, index);
                    encode_value(w, field.number, field.ty, Some(item), &at)?;
                }
            }
            (Label::Map, Some(value)) => {
                let map = value
                    .as_object()
                    .ok_or_else(|| invalid_object(&at, "expected an object"))?;
                // Go's marshaller sorts map keys bytewise, as `str` ordering does.
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by_key(|(key, _)| *key);
                for (key, value) in entries {
                    let entry = w.begin_nested(field.number);
                    w.bytes(1, key.as_bytes());
                    let value = Some(value).filter(|v| !v.is_null());
                    encode_value(w, 2, field.ty, value, &Path::Key(&at, key))?;
                    w.end_nested(entry);
                }
            }
            (Label::Optional | Label::Repeated | Label::Map, None) => {}
        }
    }
    Ok(())
}

/// Writes one value as field `number`; `None` writes the type's zero value.
fn encode_value(
    w: &mut Writer,
    number: u32,
    ty: FieldType,
    value: Option<&Value>,
    path: &Path<'_>,
) -> Result<(), ProtobufError> {
    match ty {
        FieldType::String => w.bytes(number, expect_str(value, path)?.as_bytes()),
        FieldType::Bytes => {
            let bytes = base64::decode(expect_str(value, path)?)
                .ok_or_else(|| invalid_object(path, "expected a base64 string"))?;
            w.bytes(number, &bytes);
        }
        FieldType::Bool => {
            let b = match value {
                None => false,
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| invalid_object(path, "expected a boolean"))?,
            };
            w.varint(number, u64::from(b));
        }
        FieldType::Int32 => {
            let n = i32::try_from(expect_int(value, path)?)
                .map_err(|_| invalid_object(path, "out of range for int32"))?;
            w.varint(number, i64::from(n) as u64);
        }
        FieldType::Int64 => w.varint(number, expect_int(value, path)? as u64),
        FieldType::Double => {
            let f = match value {
                None => 0.0,
                Some(v) => v
                    .as_f64()
                    .ok_or_else(|| invalid_object(path, "expected a number"))?,
            };
            w.fixed64(number, f.to_bits());
        }
        FieldType::SchemaOrArray(schema) | FieldType::SchemaOrStringArray(schema) => {
            let mut union = Writer::default();
            match value {
                None => {}
                Some(Value::Object(object)) => write_nested(&mut union, 1, schema, object, path)?,
                Some(Value::Array(items)) => {
                    let item_type = match ty {
                        FieldType::SchemaOrStringArray(_) => FieldType::String,
                        _ => FieldType::Message(schema),
                    };
                    for (index, item) in items.iter().enumerate() {
                        let at = Path::Index(path, index);
                        encode_value(&mut union, 2, item_type, Some(item), &at)?;
                    }
                }
                Some(_) => return Err(invalid_object(path, "expected an object or an array")),
            }
            w.bytes(number, &union.into_bytes());
        }
        FieldType::SchemaOrBool(schema) => {
            let mut union = Writer::default();
            match value {
                None => union.varint(1, 0),
                Some(Value::Bool(b)) => union.varint(1, u64::from(*b)),
                Some(Value::Object(object)) => {
                    union.varint(1, 1);
                    write_nested(&mut union, 2, schema, object, path)?;
                }
                Some(_) => return Err(invalid_object(path, "expected a boolean or an object")),
            }
            w.bytes(number, &union.into_bytes());
        }
        FieldType::Time => w.bytes(number, &encode_time(value, false, path)?),
        FieldType::MicroTime => w.bytes(number, &encode_time(value, true, path)?),
        FieldType::Quantity => {
            let text = match value {
                None => ZERO_QUANTITY.to_string(),
                Some(Value::String(s)) => s.clone(),
                // Go's Quantity also takes a bare JSON number.
                Some(Value::Number(n)) => n.to_string(),
                Some(_) => return Err(invalid_object(path, "expected a quantity string")),
            };
            let mut quantity = Writer::default();
            quantity.bytes(1, text.as_bytes());
            w.bytes(number, &quantity.into_bytes());
        }
        FieldType::IntOrString => {
            let (kind, int, text) = match value {
                None => (0, 0, ""),
                Some(Value::String(s)) => (INT_OR_STRING_STRING, 0, s.as_str()),
                Some(v) => {
                    let n = v
                        .as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .ok_or_else(|| invalid_object(path, "expected an int32 or a string"))?;
                    (0, n, "")
                }
            };
            let mut parts = Writer::default();
            parts.varint(1, kind as u64);
            parts.varint(2, i64::from(int) as u64);
            parts.bytes(3, text.as_bytes());
            w.bytes(number, &parts.into_bytes());
        }
        FieldType::ExtraValue => {
            let mut extra = Writer::default();
            if let Some(v) = value {
                let items = v
                    .as_array()
                    .ok_or_else(|| invalid_object(path, "expected an array"))?;
                for (index, item) in items.iter().enumerate() {
                    let at = Path::Index(path, index);
                    encode_value(&mut extra, 1, FieldType::String, Some(item), &at)?;
                }
            }
            w.bytes(number, &extra.into_bytes());
        }
        FieldType::FieldsV1 | FieldType::Json => {
            let mut raw = Writer::default();
            if let Some(v) = value {
                let json =
                    serde_json::to_vec(v).map_err(|e| invalid_object(path, e.to_string()))?;
                raw.bytes(1, &json);
            }
            w.bytes(number, &raw.into_bytes());
        }
        FieldType::Object => {
            let mut raw = Writer::default();
            if let Some(v) = value {
                raw.bytes(1, &super::encode(v)?);
            }
            w.bytes(number, &raw.into_bytes());
        }
        FieldType::Message(nested) => {
            let empty = Map::new();
            let object = match value {
                None => &empty,
                Some(v) => v
                    .as_object()
                    .ok_or_else(|| invalid_object(path, "expected an object"))?,
            };
            write_nested(w, number, nested, object, path)?;
        }
    }
    Ok(())
}

fn expect_str<'v>(value: Option<&'v Value>, path: &Path<'_>) -> Result<&'v str, ProtobufError> {
    match value {
        None => Ok(""),
        Some(v) => v
            .as_str()
            .ok_or_else(|| invalid_object(path, "expected a string")),
    }
}

fn expect_int(value: Option<&Value>, path: &Path<'_>) -> Result<i64, ProtobufError> {
    match value {
        None => Ok(0),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| invalid_object(path, "expected an integer")),
    }
}

/// A `Timestamp` body from an RFC 3339 string, truncated as Go truncates: to whole seconds for
/// `Time`, to microseconds for `MicroTime`. Absent and Go's zero time encode as empty.
fn encode_time(
    value: Option<&Value>,
    micro: bool,
    path: &Path<'_>,
) -> Result<Vec<u8>, ProtobufError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let text = value
        .as_str()
        .ok_or_else(|| invalid_object(path, "expected an RFC 3339 string"))?;
    let t = parse_rfc3339(text).map_err(|e| invalid_object(path, e.to_string()))?;
    // jiff counts sub-second parts of pre-1970 times negative; Go counts them forward.
    let nanos = i64::from(t.subsec_nanosecond());
    let seconds = t.as_second() + nanos.div_euclid(NANOS_PER_SECOND);
    let nanos = if micro {
        let nanos = nanos.rem_euclid(NANOS_PER_SECOND);
        nanos - nanos % NANOS_PER_MICRO
    } else {
        0
    };
    if seconds == GO_ZERO_TIME_SECONDS && nanos == 0 {
        return Ok(Vec::new());
    }
    let mut w = Writer::default();
    w.varint(1, seconds as u64);
    w.varint(2, nanos as u64);
    Ok(w.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_time_text(text: &str, micro: bool) -> Vec<u8> {
        encode_time(Some(&Value::from(text)), micro, &Path::Root).unwrap()
    }

    #[test]
    fn times_round_trip_with_go_truncation() {
        let bytes = encode_time_text("2026-11-21T18:44:29.123456789Z", false);
        assert_eq!(decode_time(&bytes, false).unwrap(), "2026-11-21T18:44:29Z");
        let bytes = encode_time_text("2026-11-21T18:44:29.123456789Z", true);
        assert_eq!(
            decode_time(&bytes, true).unwrap(),
            "2026-11-21T18:44:29.123456Z"
        );
        let bytes = encode_time_text("1969-12-31T23:59:59.5Z", true);
        assert_eq!(
            decode_time(&bytes, true).unwrap(),
            "1969-12-31T23:59:59.500000Z"
        );
    }

    #[test]
    fn go_zero_time_is_empty_and_null() {
        assert!(encode_time_text("0001-01-01T00:00:00Z", false).is_empty());
        assert_eq!(decode_time(&[], false).unwrap(), Value::Null);
        // Explicit seconds of the zero time: still Go's zero time.
        let mut w = Writer::default();
        w.varint(1, GO_ZERO_TIME_SECONDS as u64);
        assert_eq!(decode_time(&w.into_bytes(), false).unwrap(), Value::Null);
        // The Unix epoch is a real time, not zero.
        assert_eq!(
            decode_time(&[0x08, 0x00, 0x10, 0x00], false).unwrap(),
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn out_of_range_times_are_errors() {
        let mut w = Writer::default();
        w.varint(1, i64::MAX as u64);
        assert!(decode_time(&w.into_bytes(), false).is_err());
        let err = encode_time(Some(&Value::from("soon")), false, &Path::Root).unwrap_err();
        assert!(err.to_string().contains("soon"), "{err}");
    }

    #[test]
    fn paths_render_like_json_paths() {
        let items = Path::Key(&Path::Root, "items");
        let second = Path::Index(&items, 2);
        let labels = Path::Key(&second, "labels");
        assert_eq!(labels.to_string(), "items[2].labels");
        assert_eq!(Path::Root.to_string(), "object");
    }
}
