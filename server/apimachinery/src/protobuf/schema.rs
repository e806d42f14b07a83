//! The vocabulary of the message tables: what a field is on the wire and in JSON.
//!
//! A [`Message`] lists its fields in field-number order, which is also the order Go's generated
//! marshallers write them in, so the encoder walks the table top to bottom and produces the
//! bytes kube-apiserver would. The [`Label`] of each field records the Go shape behind it,
//! because that, not the `.proto` file (where everything is `optional`), decides what Go puts on
//! the wire: value fields are written even when empty, pointer fields only when set. Go's
//! embedded structs (`Volume` embeds `VolumeSource`, `Probe` embeds `ProbeHandler`) are one
//! field of their own on the wire but spread their keys into the enclosing JSON object.

/// One protobuf message: a name for error messages and its fields by ascending number.
#[derive(Debug)]
pub(super) struct Message {
    pub(super) name: &'static str,
    pub(super) fields: &'static [Field],
}

impl Message {
    pub(super) fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

/// One field: its number, its JSON key and how it is represented.
#[derive(Debug)]
pub(super) struct Field {
    pub(super) number: u32,
    pub(super) json: &'static str,
    pub(super) ty: FieldType,
    pub(super) label: Label,
}

impl Field {
    /// A Go value field: always written (empty when unset), omitted from JSON when zero.
    pub(super) const fn value(number: u32, json: &'static str, ty: FieldType) -> Field {
        Field {
            number,
            json,
            ty,
            label: Label::Value,
        }
    }

    /// A Go pointer field: written only when set, kept in JSON even when zero.
    pub(super) const fn optional(number: u32, json: &'static str, ty: FieldType) -> Field {
        Field {
            number,
            json,
            ty,
            label: Label::Optional,
        }
    }

    /// A list: one wire record per element, a JSON array.
    pub(super) const fn repeated(number: u32, json: &'static str, ty: FieldType) -> Field {
        Field {
            number,
            json,
            ty,
            label: Label::Repeated,
        }
    }

    /// A Go embedded struct (`json:""`): always written as one embedded message, whose fields
    /// sit beside the enclosing message's own in JSON.
    pub(super) const fn inline(
        number: u32,
        json: &'static str,
        message: &'static Message,
    ) -> Field {
        Field {
            number,
            json,
            ty: FieldType::Message(message),
            label: Label::Inline,
        }
    }

    /// A `map<string, ty>`: one entry message `{1: key, 2: value}` per key in key order, a
    /// JSON object.
    pub(super) const fn map(number: u32, json: &'static str, ty: FieldType) -> Field {
        Field {
            number,
            json,
            ty,
            label: Label::Map,
        }
    }
}

/// How many values a field holds and whether an unset one is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Label {
    Value,
    Optional,
    Repeated,
    Map,
    /// An embedded struct: `ty` is always a message, `json` only names it in error messages.
    Inline,
}

/// The type of one value, with its wire and JSON forms.
#[derive(Debug, Clone, Copy)]
pub(super) enum FieldType {
    /// `string` ↔ JSON string.
    String,
    /// `bytes` ↔ JSON base64 string.
    Bytes,
    /// `bool` ↔ JSON boolean.
    Bool,
    /// `int32` ↔ JSON number.
    Int32,
    /// `int64` ↔ JSON number.
    Int64,
    /// `double` (64-bit fixed) ↔ JSON number, printed without a fraction when it has none, as
    /// Go prints a `float64`.
    Double,
    /// `meta.v1.Time` `{1: seconds, 2: nanos}` ↔ RFC 3339 with whole seconds; an empty message
    /// is Go's zero time, JSON `null`.
    Time,
    /// `meta.v1.MicroTime`, the same message ↔ RFC 3339 with six fractional digits.
    MicroTime,
    /// `meta.v1.FieldsV1` `{1: raw}` where `raw` is JSON text ↔ that JSON value.
    FieldsV1,
    /// apiextensions/v1 `JSON` `{1: raw}` where `raw` is JSON text ↔ that JSON value (a schema's
    /// `default`, `example`, `enum` items).
    Json,
    /// apiextensions/v1 `JSONSchemaPropsOrArray` `{1: schema, 2: repeated schemas}` ↔ a schema
    /// object or an array of schemas; the message is `JSONSchemaProps`.
    SchemaOrArray(&'static Message),
    /// apiextensions/v1 `JSONSchemaPropsOrBool` `{1: allows, 2: schema}` ↔ a boolean or a schema
    /// object (which allows).
    SchemaOrBool(&'static Message),
    /// apiextensions/v1 `JSONSchemaPropsOrStringArray` `{1: schema, 2: repeated property}` ↔ a
    /// schema object or an array of strings.
    SchemaOrStringArray(&'static Message),
    /// `runtime.RawExtension` `{1: raw}` where `raw` is an enveloped protobuf object ↔ that
    /// object's JSON (watch events).
    Object,
    /// `resource.Quantity` `{1: string}` ↔ JSON string (`"500m"`, `"1Gi"`), passed through
    /// as written: Go would canonicalize it (`"1000m"` → `"1"`), this server keeps JSON as sent.
    Quantity,
    /// `intstr.IntOrString` `{1: type (0 int, 1 string), 2: intVal, 3: strVal}` ↔ JSON number
    /// or string.
    IntOrString,
    /// authentication/v1 and authorization/v1 `ExtraValue` `{1: repeated string items}` ↔ JSON
    /// array of strings: Go's `[]string` given a message of its own so that it can be the value
    /// of the `extra` maps, printed as the bare list.
    ExtraValue,
    /// An embedded message ↔ JSON object.
    Message(&'static Message),
}

/// A top-level kind: the message its envelope's `raw` holds, under which API versions.
pub(super) struct Registration {
    pub(super) api_versions: &'static [&'static str],
    pub(super) kind: &'static str,
    pub(super) message: &'static Message,
}

impl Registration {
    pub(super) const fn new(
        api_versions: &'static [&'static str],
        kind: &'static str,
        message: &'static Message,
    ) -> Registration {
        Registration {
            api_versions,
            kind,
            message,
        }
    }
}
