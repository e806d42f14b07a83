//! The FieldsV1 wire form of a [`FieldSet`], as stored in `metadata.managedFields[].fieldsV1`.
//!
//! Each level is a JSON object whose keys are serialized path elements (`f:<name>`,
//! `k:<sorted JSON of the key fields>`, `v:<JSON value>`, `i:<index>`); a key maps to `{}` when
//! the path ends there, to a nested object when it goes deeper, and a nested object carries
//! `".": {}` when its node is also owned. Keys are emitted in structured-merge-diff's order
//! with `"."` first, which is what Kubernetes stores for built-in types, so the encoding here
//! matches it byte for byte once serialized compactly.

use serde_json::{Map, Value};
use thiserror::Error;

use super::element::PathElement;
use super::gojson;
use super::set::FieldSet;

/// A FieldsV1 document that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FieldsV1Error {
    #[error("fieldsV1 must be a JSON object, got {0}")]
    NotAnObject(String),
    #[error("key must be 2 characters long: {0:?}")]
    ShortKey(String),
    #[error("missing colon: {0}")]
    MissingColon(String),
    #[error("invalid path element {key:?}: {reason}")]
    Element { key: String, reason: String },
}

impl FieldSet {
    /// The FieldsV1 form of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !self.is_empty() {
            out.insert(".".to_string(), Value::Object(Map::new()));
        }
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let (pe, content) = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(m), Some((c, child))) if *m == *c => {
                    let item = (*m, child.emit(true));
                    members.next();
                    children.next();
                    item
                }
                (Some(m), Some((c, _))) if *m < *c => {
                    let item = (*m, Map::new());
                    members.next();
                    item
                }
                (Some(m), None) => {
                    let item = (*m, Map::new());
                    members.next();
                    item
                }
                (_, Some((c, child))) => {
                    let item = (*c, child.emit(false));
                    children.next();
                    item
                }
            };
            out.insert(serialize_element(pe), Value::Object(content));
        }
        out
    }

    /// Reads a FieldsV1 document; keys of unknown kinds are dropped, as Kubernetes does, so
    /// that a newer writer's additions do not break reading.
    pub fn from_fields_v1(fields: &Value) -> Result<FieldSet, FieldsV1Error> {
        let map = fields
            .as_object()
            .ok_or_else(|| FieldsV1Error::NotAnObject(fields.to_string()))?;
        Ok(read_level(map)?.0.unwrap_or_default())
    }
}

/// The children of one level, and whether the level's node itself is a member.
fn read_level(map: &Map<String, Value>) -> Result<(Option<FieldSet>, bool), FieldsV1Error> {
    let mut children: Option<FieldSet> = None;
    let mut is_member = false;
    for (key, value) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(pe) = deserialize_element(key)? else {
            continue;
        };
        let inner = value
            .as_object()
            .ok_or_else(|| FieldsV1Error::NotAnObject(value.to_string()))?;
        let (grandchildren, child_is_member) = read_level(inner)?;
        let level = children.get_or_insert_with(FieldSet::new);
        if child_is_member {
            level.members.insert(pe.clone());
        }
        if let Some(grandchildren) = grandchildren {
            level.children.insert(pe, grandchildren);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

/// The FieldsV1 key of a path element.
fn serialize_element(pe: &PathElement) -> String {
    match pe {
        PathElement::Field(name) => format!("f:{name}"),
        PathElement::Key(fields) => {
            let mut out = String::from("k:{");
            for (i, (name, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                gojson::write_json_string(&mut out, name);
                out.push(':');
                out.push_str(&gojson::to_json(value));
            }
            out.push('}');
            out
        }
        PathElement::Value(value) => format!("v:{}", gojson::to_json(value)),
        PathElement::Index(i) => format!("i:{i}"),
    }
}

/// The path element of a FieldsV1 key; `None` for kinds this version does not know.
fn deserialize_element(key: &str) -> Result<Option<PathElement>, FieldsV1Error> {
    let element_error = |reason: String| FieldsV1Error::Element {
        key: key.to_string(),
        reason,
    };
    let bytes = key.as_bytes();
    if bytes.len() < 2 {
        return Err(FieldsV1Error::ShortKey(key.to_string()));
    }
    if bytes[1] != b':' {
        return Err(FieldsV1Error::MissingColon(key.to_string()));
    }
    let body = &key[2..];
    let pe = match bytes[0] {
        b'f' => PathElement::Field(body.to_string()),
        b'v' => PathElement::Value(
            serde_json::from_str(body).map_err(|e| element_error(e.to_string()))?,
        ),
        b'k' => {
            let fields: Map<String, Value> =
                serde_json::from_str(body).map_err(|e| element_error(e.to_string()))?;
            PathElement::key(fields.into_iter().collect())
        }
        b'i' => PathElement::Index(body.parse().map_err(|e| element_error(format!("{e}")))?),
        _ => return Ok(None),
    };
    Ok(Some(pe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[PathElement]) -> Vec<PathElement> {
        elements.to_vec()
    }

    #[test]
    fn encodes_like_kubernetes() {
        let f = PathElement::field;
        let c = PathElement::key(vec![("name".into(), json!("c"))]);
        let mut set = FieldSet::new();
        set.insert(&path(&[f("metadata"), f("labels"), f("app")]));
        set.insert(&path(&[f("spec"), f("containers"), c.clone()]));
        set.insert(&path(&[f("spec"), f("containers"), c, f("image")]));
        let text = serde_json::to_string(&set.to_fields_v1()).unwrap();
        assert_eq!(
            text,
            r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{}}}}}"#
        );
        assert_eq!(FieldSet::from_fields_v1(&set.to_fields_v1()).unwrap(), set);
    }

    #[test]
    fn reads_every_element_kind() {
        let doc = json!({
            "f:data": {".": {}, "f:a": {}},
            "f:ports": {"k:{\"protocol\":\"TCP\",\"containerPort\":80}": {".": {}, "f:name": {}}},
            "f:finalizers": {"v:\"x\"": {}},
            "f:args": {"i:3": {}},
            "z:future": {}
        });
        let set = FieldSet::from_fields_v1(&doc).unwrap();
        let shown: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                ".data",
                ".args[3]",
                ".data.a",
                ".finalizers[=\"x\"]",
                ".ports[containerPort=80,protocol=\"TCP\"]",
                ".ports[containerPort=80,protocol=\"TCP\"].name"
            ]
        );
        // Re-encoding sorts key fields and orders keys the way Kubernetes writes them.
        assert_eq!(
            serde_json::to_string(&set.to_fields_v1()).unwrap(),
            r#"{"f:args":{"i:3":{}},"f:data":{".":{},"f:a":{}},"f:finalizers":{"v:\"x\"":{}},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{}}}}"#
        );
        assert_eq!(
            FieldSet::from_fields_v1(&json!({})).unwrap(),
            FieldSet::new()
        );
    }

    #[test]
    fn rejects_malformed_keys() {
        assert!(matches!(
            FieldSet::from_fields_v1(&json!({"f": {}})),
            Err(FieldsV1Error::ShortKey(_))
        ));
        assert!(matches!(
            FieldSet::from_fields_v1(&json!({"fx": {}})),
            Err(FieldsV1Error::MissingColon(_))
        ));
        assert!(matches!(
            FieldSet::from_fields_v1(&json!({"k:{bad": {}})),
            Err(FieldsV1Error::Element { .. })
        ));
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    }
}
