//! The Swagger 2.0 document in gnostic's protobuf encoding (`openapi.v2.Document`).
//!
//! client-go's `DiscoveryClient.OpenAPISchema()` requests `/openapi/v2` only as protobuf and
//! feeds the bytes to `proto.Unmarshal`; kubectl 1.27 and 1.28 call it before every client-side
//! validated `apply`/`create`/`replace`, and later versions when the v3 documents do not settle
//! the question. No Rust crate carries these messages, and a protobuf compiler is not available
//! at build time, so the few messages are written by hand from their field numbers. The input is
//! the JSON document this crate renders: every key it contains is encoded; Swagger constructs it
//! never produces (response headers and examples, security, XML hints) are not.
//!
//! Vendor extensions and other free-form values travel as gnostic `Any { yaml }`; JSON text is
//! valid YAML, which is how the readers (`yaml.Unmarshal`) decode them.

use serde_json::{Map, Value};

/// One protobuf message being written; proto3 defaults (empty, zero, false) are omitted.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.bytes(field, value.as_bytes());
        }
    }

    fn bool(&mut self, field: u32, value: bool) {
        if value {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, value: i64) {
        if value != 0 {
            self.key(field, 0);
            self.varint(value as u64);
        }
    }

    fn double(&mut self, field: u32, value: f64) {
        if value != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// Nested messages are always written, even when empty: presence matters for some (an empty
    /// `properties` makes an object a struct, not a map, to kube-openapi).
    fn message(&mut self, field: u32, message: Message) {
        self.bytes(field, &message.0);
    }
}

#[derive(Clone, Copy)]
enum Scalar {
    Str,
    Strs,
    Bool,
    Int,
    Num,
    Any,
    Anys,
}

fn scalar(message: &mut Message, field: u32, kind: Scalar, value: &Value) {
    match kind {
        Scalar::Str => message.string(field, value.as_str().unwrap_or_default()),
        Scalar::Strs => {
            for item in value.as_array().into_iter().flatten() {
                message.bytes(field, item.as_str().unwrap_or_default().as_bytes());
            }
        }
        Scalar::Bool => message.bool(field, value.as_bool().unwrap_or_default()),
        Scalar::Int => message.int64(
            field,
            value
                .as_i64()
                .or_else(|| value.as_f64().map(|f| f as i64))
                .unwrap_or_default(),
        ),
        Scalar::Num => message.double(field, value.as_f64().unwrap_or_default()),
        Scalar::Any => message.message(field, any(value)),
        Scalar::Anys => {
            for item in value.as_array().into_iter().flatten() {
                message.message(field, any(item));
            }
        }
    }
}

/// Encodes the keys of `object` listed in `table` as (json key, field number, kind).
fn scalars(message: &mut Message, object: &Map<String, Value>, table: &[(&str, u32, Scalar)]) {
    for (key, field, kind) in table {
        if let Some(value) = object.get(*key) {
            scalar(message, *field, *kind, value);
        }
    }
}

/// `Any { yaml = 2 }`.
fn any(value: &Value) -> Message {
    let mut message = Message::default();
    message.string(2, &value.to_string());
    message
}

/// `repeated NamedAny` at `field` for every `x-` key.
fn vendor_extensions(message: &mut Message, field: u32, object: &Map<String, Value>) {
    for (name, value) in object.iter().filter(|(name, _)| name.starts_with("x-")) {
        let mut named = Message::default();
        named.string(1, name);
        named.message(2, any(value));
        message.message(field, named);
    }
}

fn object(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// Encodes a Swagger 2.0 JSON document as `openapi.v2.Document`.
pub(crate) fn encode_document(document: &Value) -> Vec<u8> {
    let document = object(document);
    let mut message = Message::default();
    scalars(
        &mut message,
        &document,
        &[
            ("swagger", 1, Scalar::Str),
            ("host", 3, Scalar::Str),
            ("basePath", 4, Scalar::Str),
            ("schemes", 5, Scalar::Strs),
            ("consumes", 6, Scalar::Strs),
            ("produces", 7, Scalar::Strs),
        ],
    );
    if let Some(info) = document.get("info") {
        let info = object(info);
        let mut out = Message::default();
        scalars(
            &mut out,
            &info,
            &[
                ("title", 1, Scalar::Str),
                ("version", 2, Scalar::Str),
                ("description", 3, Scalar::Str),
            ],
        );
        vendor_extensions(&mut out, 7, &info);
        message.message(2, out);
    }
    if let Some(paths) = document.get("paths") {
        let paths = object(paths);
        let mut out = Message::default();
        vendor_extensions(&mut out, 1, &paths);
        for (name, item) in paths.iter().filter(|(name, _)| !name.starts_with("x-")) {
            out.message(2, named(name, path_item(&object(item))));
        }
        message.message(8, out);
    }
    if let Some(definitions) = document.get("definitions") {
        let mut out = Message::default();
        for (name, definition) in object(definitions) {
            out.message(1, named(&name, schema(&object(&definition))));
        }
        message.message(9, out);
    }
    vendor_extensions(&mut message, 16, &document);
    message.0
}

/// The `Named*` pattern: `{ name = 1; value = 2 }`.
fn named(name: &str, value: Message) -> Message {
    let mut message = Message::default();
    message.string(1, name);
    message.message(2, value);
    message
}

fn path_item(item: &Map<String, Value>) -> Message {
    let mut message = Message::default();
    scalars(&mut message, item, &[("$ref", 1, Scalar::Str)]);
    for (method, field) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("options", 6),
        ("head", 7),
        ("patch", 8),
    ] {
        if let Some(operation) = item.get(method) {
            message.message(field, operation_message(&object(operation)));
        }
    }
    parameters(&mut message, 9, item);
    vendor_extensions(&mut message, 10, item);
    message
}

fn operation_message(operation: &Map<String, Value>) -> Message {
    let mut message = Message::default();
    scalars(
        &mut message,
        operation,
        &[
            ("tags", 1, Scalar::Strs),
            ("summary", 2, Scalar::Str),
            ("description", 3, Scalar::Str),
            ("operationId", 5, Scalar::Str),
            ("produces", 6, Scalar::Strs),
            ("consumes", 7, Scalar::Strs),
            ("schemes", 10, Scalar::Strs),
            ("deprecated", 11, Scalar::Bool),
        ],
    );
    if let Some(docs) = operation.get("externalDocs") {
        message.message(4, external_docs(&object(docs)));
    }
    parameters(&mut message, 8, operation);
    if let Some(responses) = operation.get("responses") {
        let responses = object(responses);
        let mut out = Message::default();
        for (code, response) in responses.iter().filter(|(code, _)| !code.starts_with("x-")) {
            let response = object(response);
            let mut value = Message::default();
            if response.contains_key("$ref") {
                value.message(2, json_reference(&response));
            } else {
                value.message(1, response_message(&response));
            }
            out.message(1, named(code, value));
        }
        vendor_extensions(&mut out, 2, &responses);
        message.message(9, out);
    }
    vendor_extensions(&mut message, 13, operation);
    message
}

fn response_message(response: &Map<String, Value>) -> Message {
    let mut message = Message::default();
    scalars(&mut message, response, &[("description", 1, Scalar::Str)]);
    if let Some(body) = response.get("schema") {
        let mut item = Message::default();
        item.message(1, schema(&object(body)));
        message.message(2, item);
    }
    vendor_extensions(&mut message, 5, response);
    message
}

fn json_reference(reference: &Map<String, Value>) -> Message {
    let mut message = Message::default();
    scalars(
        &mut message,
        reference,
        &[("$ref", 1, Scalar::Str), ("description", 2, Scalar::Str)],
    );
    message
}

fn external_docs(docs: &Map<String, Value>) -> Message {
    let mut message = Message::default();
    scalars(
        &mut message,
        docs,
        &[("description", 1, Scalar::Str), ("url", 2, Scalar::Str)],
    );
    vendor_extensions(&mut message, 3, docs);
    message
}

/// `repeated ParametersItem` from the `parameters` array of a path item or operation.
fn parameters(message: &mut Message, field: u32, owner: &Map<String, Value>) {
    for parameter in owner
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let parameter = object(parameter);
        let mut item = Message::default();
        if parameter.contains_key("$ref") {
            item.message(2, json_reference(&parameter));
        } else {
            item.message(1, parameter_message(&parameter));
        }
        message.message(field, item);
    }
}

/// `Parameter`: a body parameter, or a non-body one whose sub-schema depends on `in`.
fn parameter_message(parameter: &Map<String, Value>) -> Message {
    let location = parameter
        .get("in")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut message = Message::default();
    if location == "body" {
        let mut body = Message::default();
        scalars(
            &mut body,
            parameter,
            &[
                ("description", 1, Scalar::Str),
                ("name", 2, Scalar::Str),
                ("in", 3, Scalar::Str),
                ("required", 4, Scalar::Bool),
            ],
        );
        if let Some(value) = parameter.get("schema") {
            body.message(5, schema(&object(value)));
        }
        vendor_extensions(&mut body, 6, parameter);
        message.message(1, body);
        return message;
    }
    // Query and formData sub-schemas have `allowEmptyValue` at 5 and the primitive fields from
    // 6; header and path ones have the primitive fields from 5.
    let (variant, first_primitive) = match location {
        "header" => (1, 5),
        "formData" => (2, 6),
        "path" => (4, 5),
        _ => (3, 6),
    };
    let mut sub = Message::default();
    scalars(
        &mut sub,
        parameter,
        &[
            ("required", 1, Scalar::Bool),
            ("in", 2, Scalar::Str),
            ("description", 3, Scalar::Str),
            ("name", 4, Scalar::Str),
        ],
    );
    if first_primitive == 6 {
        scalars(&mut sub, parameter, &[("allowEmptyValue", 5, Scalar::Bool)]);
    }
    primitive_fields(&mut sub, parameter, first_primitive);
    let mut non_body = Message::default();
    non_body.message(variant, sub);
    message.message(2, non_body);
    message
}

/// The run of fields shared, in this order, by `PrimitivesItems` (from 1) and the non-body
/// parameter sub-schemas, followed by their vendor extensions.
fn primitive_fields(message: &mut Message, object_value: &Map<String, Value>, first: u32) {
    // `None` marks `items`, a nested `PrimitivesItems`.
    const ORDER: [(&str, Option<Scalar>); 17] = [
        ("type", Some(Scalar::Str)),
        ("format", Some(Scalar::Str)),
        ("items", None),
        ("collectionFormat", Some(Scalar::Str)),
        ("default", Some(Scalar::Any)),
        ("maximum", Some(Scalar::Num)),
        ("exclusiveMaximum", Some(Scalar::Bool)),
        ("minimum", Some(Scalar::Num)),
        ("exclusiveMinimum", Some(Scalar::Bool)),
        ("maxLength", Some(Scalar::Int)),
        ("minLength", Some(Scalar::Int)),
        ("pattern", Some(Scalar::Str)),
        ("maxItems", Some(Scalar::Int)),
        ("minItems", Some(Scalar::Int)),
        ("uniqueItems", Some(Scalar::Bool)),
        ("enum", Some(Scalar::Anys)),
        ("multipleOf", Some(Scalar::Num)),
    ];
    for (offset, (key, kind)) in (0u32..).zip(ORDER) {
        let Some(value) = object_value.get(key) else {
            continue;
        };
        match kind {
            Some(kind) => scalar(message, first + offset, kind, value),
            None => {
                let mut items = Message::default();
                primitive_fields(&mut items, &object(value), 1);
                message.message(first + offset, items);
            }
        }
    }
    vendor_extensions(message, first + 17, object_value);
}

fn schema(schema_value: &Map<String, Value>) -> Message {
    let mut message = Message::default();
    scalars(
        &mut message,
        schema_value,
        &[
            ("$ref", 1, Scalar::Str),
            ("format", 2, Scalar::Str),
            ("title", 3, Scalar::Str),
            ("description", 4, Scalar::Str),
            ("default", 5, Scalar::Any),
            ("multipleOf", 6, Scalar::Num),
            ("maximum", 7, Scalar::Num),
            ("exclusiveMaximum", 8, Scalar::Bool),
            ("minimum", 9, Scalar::Num),
            ("exclusiveMinimum", 10, Scalar::Bool),
            ("maxLength", 11, Scalar::Int),
            ("minLength", 12, Scalar::Int),
            ("pattern", 13, Scalar::Str),
            ("maxItems", 14, Scalar::Int),
            ("minItems", 15, Scalar::Int),
            ("uniqueItems", 16, Scalar::Bool),
            ("maxProperties", 17, Scalar::Int),
            ("minProperties", 18, Scalar::Int),
            ("required", 19, Scalar::Strs),
            ("enum", 20, Scalar::Anys),
            ("discriminator", 26, Scalar::Str),
            ("readOnly", 27, Scalar::Bool),
            ("example", 30, Scalar::Any),
        ],
    );
    match schema_value.get("additionalProperties") {
        Some(Value::Bool(allowed)) => {
            let mut item = Message::default();
            // A oneof member is present even when false, so write the varint directly.
            item.key(2, 0);
            item.varint(u64::from(*allowed));
            message.message(21, item);
        }
        Some(Value::Object(sub)) => {
            let mut item = Message::default();
            item.message(1, schema(sub));
            message.message(21, item);
        }
        _ => {}
    }
    if let Some(types) = schema_value.get("type") {
        let mut item = Message::default();
        match types {
            Value::Array(_) => scalar(&mut item, 1, Scalar::Strs, types),
            _ => item.bytes(1, types.as_str().unwrap_or_default().as_bytes()),
        }
        message.message(22, item);
    }
    if let Some(items) = schema_value.get("items") {
        let mut item = Message::default();
        match items {
            Value::Array(schemas) => {
                for sub in schemas {
                    item.message(1, schema(&object(sub)));
                }
            }
            _ => item.message(1, schema(&object(items))),
        }
        message.message(23, item);
    }
    for sub in schema_value
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        message.message(24, schema(&object(sub)));
    }
    if let Some(properties) = schema_value.get("properties") {
        let mut out = Message::default();
        for (name, property) in object(properties) {
            out.message(1, named(&name, schema(&object(&property))));
        }
        message.message(25, out);
    }
    if let Some(docs) = schema_value.get("externalDocs") {
        message.message(29, external_docs(&object(docs)));
    }
    vendor_extensions(&mut message, 31, schema_value);
    message
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A decoded field: varints and fixed64 as numbers, length-delimited as raw bytes.
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) enum Field {
        Varint(u64),
        Fixed64(u64),
        Bytes(Vec<u8>),
    }

    /// Generic wire-format decoder, enough to walk the encoded messages in tests.
    pub(crate) fn decode(mut bytes: &[u8]) -> Vec<(u32, Field)> {
        fn varint(bytes: &mut &[u8]) -> u64 {
            let mut value = 0u64;
            let mut shift = 0;
            loop {
                let byte = bytes[0];
                *bytes = &bytes[1..];
                value |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return value;
                }
                shift += 7;
            }
        }
        let mut fields = Vec::new();
        while !bytes.is_empty() {
            let key = varint(&mut bytes);
            let field = (key >> 3) as u32;
            let value = match key & 7 {
                0 => Field::Varint(varint(&mut bytes)),
                1 => {
                    let (head, tail) = bytes.split_at(8);
                    bytes = tail;
                    Field::Fixed64(u64::from_le_bytes(head.try_into().unwrap()))
                }
                2 => {
                    let len = varint(&mut bytes) as usize;
                    let (head, tail) = bytes.split_at(len);
                    bytes = tail;
                    Field::Bytes(head.to_vec())
                }
                other => panic!("unexpected wire type {other}"),
            };
            fields.push((field, value));
        }
        fields
    }

    pub(crate) fn bytes_of(fields: &[(u32, Field)], number: u32) -> Vec<Vec<u8>> {
        fields
            .iter()
            .filter(|(field, _)| *field == number)
            .filter_map(|(_, value)| match value {
                Field::Bytes(bytes) => Some(bytes.clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn string_of(fields: &[(u32, Field)], number: u32) -> String {
        bytes_of(fields, number)
            .first()
            .map(|bytes| String::from_utf8(bytes.clone()).unwrap())
            .unwrap_or_default()
    }

    #[test]
    fn builtin_document_round_trips_definitions_and_gvks() {
        let (defs, kinds) = crate::builtin();
        let documents = crate::OpenApiDocuments::new(&defs, &kinds);
        let json: Value = serde_json::from_slice(documents.v2_json()).unwrap();
        let document = decode(documents.v2_protobuf());
        assert_eq!(string_of(&document, 1), "2.0");
        let definitions = decode(&bytes_of(&document, 9)[0]);
        let named: Vec<Vec<(u32, Field)>> = bytes_of(&definitions, 1)
            .iter()
            .map(|b| decode(b))
            .collect();
        assert_eq!(named.len(), json["definitions"].as_object().unwrap().len());
        let configmap = named
            .iter()
            .find(|n| string_of(n, 1) == "io.k8s.api.core.v1.ConfigMap")
            .unwrap();
        let schema = decode(&bytes_of(configmap, 2)[0]);
        let gvk = bytes_of(&schema, 31)
            .iter()
            .map(|b| decode(b))
            .find(|e| string_of(e, 1) == "x-kubernetes-group-version-kind")
            .unwrap();
        let yaml = string_of(&decode(&bytes_of(&gvk, 2)[0]), 2);
        let value: Value = serde_json::from_str(&yaml).unwrap();
        assert_eq!(
            value,
            json!([{ "group": "", "kind": "ConfigMap", "version": "v1" }])
        );
        let paths = decode(&bytes_of(&document, 8)[0]);
        assert_eq!(
            bytes_of(&paths, 2).len(),
            json["paths"].as_object().unwrap().len()
        );
    }

    #[test]
    fn varints_and_defaults() {
        let mut message = Message::default();
        message.int64(1, 300);
        message.bool(2, false);
        message.string(3, "");
        message.double(4, 1.5);
        assert_eq!(
            decode(&message.0),
            vec![
                (1, Field::Varint(300)),
                (4, Field::Fixed64(1.5f64.to_bits()))
            ]
        );
    }

    #[test]
    fn schema_fields_and_extensions() {
        let encoded = schema(&object(&json!({
            "description": "d",
            "type": "array",
            "items": { "$ref": "#/definitions/x.Y" },
            "x-kubernetes-patch-merge-key": "uid",
            "additionalProperties": false,
        })));
        let fields = decode(&encoded.0);
        assert_eq!(string_of(&fields, 4), "d");
        let type_item = decode(&bytes_of(&fields, 22)[0]);
        assert_eq!(string_of(&type_item, 1), "array");
        let items = decode(&bytes_of(&fields, 23)[0]);
        let first = decode(&bytes_of(&items, 1)[0]);
        assert_eq!(string_of(&first, 1), "#/definitions/x.Y");
        let extension = decode(&bytes_of(&fields, 31)[0]);
        assert_eq!(string_of(&extension, 1), "x-kubernetes-patch-merge-key");
        let value = decode(&bytes_of(&extension, 2)[0]);
        assert_eq!(string_of(&value, 2), "\"uid\"");
        let additional = decode(&bytes_of(&fields, 21)[0]);
        assert_eq!(additional, vec![(2, Field::Varint(0))]);
    }

    #[test]
    fn query_and_path_parameters_use_their_own_numbering() {
        let query = parameter_message(&object(
            &json!({ "name": "limit", "in": "query", "type": "integer" }),
        ));
        let non_body = decode(&bytes_of(&decode(&query.0), 2)[0]);
        let sub = decode(&bytes_of(&non_body, 3)[0]);
        assert_eq!(string_of(&sub, 4), "limit");
        assert_eq!(string_of(&sub, 6), "integer");

        let path = parameter_message(&object(
            &json!({ "name": "name", "in": "path", "type": "string", "required": true }),
        ));
        let non_body = decode(&bytes_of(&decode(&path.0), 2)[0]);
        let sub = decode(&bytes_of(&non_body, 4)[0]);
        assert_eq!(string_of(&sub, 5), "string");
        assert!(sub.contains(&(1, Field::Varint(1))));
    }
}
