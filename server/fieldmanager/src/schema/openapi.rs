//! Reading merge rules out of OpenAPI schemas (v2 definitions, v3 components, CRD
//! `openAPIV3Schema`).
//!
//! Each `$ref` becomes one type, built once and shared by every use, so recursive definitions
//! (JSONSchemaProps) terminate: the ref is registered before its body is read. An `allOf` is
//! flattened into one schema; a single-`$ref` `allOf` (how v3 documents attach descriptions to
//! references) is the reference itself. Both rules are kcp-apimachinery's
//! ([`kcp_apimachinery::openapi_ref`]), shared with strategic merge patch's schema reader.

use std::collections::HashMap;

use kcp_apimachinery::openapi_ref::{flatten_all_of, reference};
use serde_json::Value;

use super::meta::push;
use super::{Atom, FieldType, ListKind, ListType, MapType, TypeId, UNTYPED};

/// Reads `schema` into `types`, returning its type.
pub(super) fn read(
    types: &mut Vec<Atom>,
    schema: &Value,
    resolve: &dyn Fn(&str) -> Option<Value>,
) -> TypeId {
    Reader {
        types,
        resolve,
        refs: HashMap::new(),
    }
    .build(schema)
}

struct Reader<'a> {
    types: &'a mut Vec<Atom>,
    resolve: &'a dyn Fn(&str) -> Option<Value>,
    refs: HashMap<String, TypeId>,
}

impl Reader<'_> {
    fn build(&mut self, schema: &Value) -> TypeId {
        if let Some(reference) = reference(schema) {
            let id = self.build_ref(reference);
            return self.with_map_type_override(id, schema);
        }
        let flat = flatten_all_of(schema, self.resolve);
        let atom = self.atom(&flat);
        push(self.types, atom)
    }

    fn build_ref(&mut self, reference: &str) -> TypeId {
        if let Some(id) = self.refs.get(reference) {
            return *id;
        }
        let Some(resolved) = (self.resolve)(reference) else {
            return UNTYPED;
        };
        let id = push(self.types, Atom::Untyped);
        self.refs.insert(reference.to_string(), id);
        let inner = self.build(&resolved);
        self.types[id] = self.types[inner].clone();
        id
    }

    /// A field may mark a referenced struct atomic (or granular) where it uses it.
    fn with_map_type_override(&mut self, id: TypeId, schema: &Value) -> TypeId {
        let Some(map_type) = schema.get("x-kubernetes-map-type").and_then(Value::as_str) else {
            return id;
        };
        match &self.types[id] {
            Atom::Map(map) if map.atomic != (map_type == "atomic") => {
                let mut map = map.clone();
                map.atomic = map_type == "atomic";
                push(self.types, Atom::Map(map))
            }
            _ => id,
        }
    }

    fn atom(&mut self, schema: &Value) -> Atom {
        let flag = |name: &str| schema.get(name).and_then(Value::as_bool) == Some(true);
        if flag("x-kubernetes-int-or-string") {
            return Atom::Scalar;
        }
        let ty = schema.get("type").and_then(Value::as_str);
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        if ty == Some("array") || (ty.is_none() && schema.get("items").is_some()) {
            let items = schema
                .get("items")
                .map_or(UNTYPED, |items| self.build(items));
            return Atom::List(ListType {
                items,
                kind: list_kind(schema),
            });
        }
        if ty == Some("object") || properties.is_some() || additional.is_some() {
            let mut fields = std::collections::BTreeMap::new();
            for (name, property) in properties.into_iter().flatten() {
                let ty = self.build(property);
                let default = property.get("default").cloned();
                fields.insert(name.clone(), FieldType { ty, default });
            }
            let elements = match additional {
                Some(Value::Bool(false)) => None,
                Some(Value::Bool(true)) => Some(UNTYPED),
                Some(schema @ Value::Object(_)) => Some(self.build(schema)),
                _ if flag("x-kubernetes-preserve-unknown-fields") || fields.is_empty() => {
                    Some(UNTYPED)
                }
                _ => None,
            };
            let atomic =
                schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
            return Atom::Map(MapType {
                fields,
                elements,
                atomic,
            });
        }
        match ty {
            Some("string" | "integer" | "number" | "boolean") => Atom::Scalar,
            _ => Atom::Untyped,
        }
    }
}

/// How a list merges: `x-kubernetes-list-type`, else a `merge` patch strategy, else atomic.
fn list_kind(schema: &Value) -> ListKind {
    let text = |name: &str| schema.get(name).and_then(Value::as_str);
    match text("x-kubernetes-list-type") {
        Some("set") => return ListKind::Set,
        Some("map") => {
            let keys: Vec<String> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect();
            return if keys.is_empty() {
                ListKind::Atomic
            } else {
                ListKind::Map(keys)
            };
        }
        Some(_) => return ListKind::Atomic,
        None => {}
    }
    let merges = text("x-kubernetes-patch-strategy")
        .is_some_and(|s| s.split(',').any(|word| word.trim() == "merge"));
    match (merges, text("x-kubernetes-patch-merge-key")) {
        (true, Some(key)) => ListKind::Map(vec![key.to_string()]),
        (true, None) => ListKind::Set,
        (false, _) => ListKind::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::super::TypeSchema;
    use super::*;
    use serde_json::json;

    fn field<'s>(schema: &'s TypeSchema, ty: TypeId, name: &str) -> (&'s Atom, TypeId) {
        match schema.atom(ty) {
            Atom::Map(map) => {
                let id = TypeSchema::field_type(map, name);
                (schema.atom(id), id)
            }
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn reads_list_and_map_types() {
        let definitions = json!({
            "PodSpec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": {"$ref": "#/definitions/Container"},
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
                "finalizers": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-patch-strategy": "merge"},
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {"allOf": [{"$ref": "#/definitions/Selector"}], "description": "d"},
                "node": {"$ref": "#/definitions/Node"}
            }},
            "Container": {"type": "object", "properties": {
                "name": {"type": "string"},
                "ports": {"type": "array", "items": {"$ref": "#/definitions/Port"},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["containerPort", "protocol"]}
            }},
            "Port": {"type": "object", "properties": {
                "containerPort": {"type": "integer"},
                "protocol": {"type": "string", "default": "TCP"}
            }},
            "Selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                "properties": {"matchLabels": {"type": "object"}}},
            "Node": {"type": "object", "properties": {"children": {"type": "array",
                "items": {"$ref": "#/definitions/Node"}, "x-kubernetes-list-type": "atomic"}}}
        });
        let resolve = |r: &str| {
            definitions
                .get(r.trim_start_matches("#/definitions/"))
                .cloned()
        };
        let schema = TypeSchema::from_openapi(
            &json!({"type": "object", "properties": {
                "spec": {"allOf": [{"$ref": "#/definitions/PodSpec"}]},
                "data": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}),
            resolve,
        );
        let (_, spec) = field(&schema, schema.root(), "spec");
        let (containers, _) = field(&schema, spec, "containers");
        let Atom::List(containers_list) = containers else {
            panic!("containers: {containers:?}");
        };
        assert_eq!(containers_list.kind, ListKind::Map(vec!["name".into()]));
        let (ports, _) = field(&schema, containers_list.items, "ports");
        let Atom::List(ports) = ports else {
            panic!("ports: {ports:?}")
        };
        assert_eq!(
            ports.kind,
            ListKind::Map(vec!["containerPort".into(), "protocol".into()])
        );
        let Atom::Map(port) = schema.atom(ports.items) else {
            panic!("port")
        };
        assert_eq!(port.fields["protocol"].default, Some(json!("TCP")));
        assert!(matches!(
            field(&schema, spec, "finalizers").0,
            Atom::List(ListType {
                kind: ListKind::Set,
                ..
            })
        ));
        assert!(matches!(
            field(&schema, spec, "args").0,
            Atom::List(ListType {
                kind: ListKind::Atomic,
                ..
            })
        ));
        assert!(matches!(field(&schema, spec, "selector").0, Atom::Map(m) if m.atomic));
        let (_, node) = field(&schema, spec, "node");
        let (children, _) = field(&schema, node, "children");
        assert!(matches!(children, Atom::List(l) if l.items == node));
        assert!(matches!(field(&schema, schema.root(), "data").0,
            Atom::Map(m) if m.elements.map(|e| schema.atom(e)) == Some(&Atom::Scalar)));
        assert!(matches!(field(&schema, schema.root(), "extra").0,
            Atom::Map(m) if m.elements == Some(UNTYPED)));
        // ObjectMeta rules are always there.
        let (_, meta) = field(&schema, schema.root(), "metadata");
        assert!(matches!(field(&schema, meta, "ownerReferences").0,
            Atom::List(ListType { kind: ListKind::Map(keys), .. }) if keys == &["uid"]));
    }
}
