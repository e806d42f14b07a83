//! Which lists merge and by what key: the metadata strategic merge patch needs.
//!
//! Strategic merge patch differs from JSON merge patch only where a type says so: a list field
//! tagged `patchStrategy: merge` merges by `patchMergeKey` (or as a set of primitives), and a
//! field tagged `retainKeys` or `replace` changes how its map merges. Kubernetes reads these tags
//! from Go struct tags or from OpenAPI extensions (`x-kubernetes-patch-strategy`,
//! `x-kubernetes-patch-merge-key`). [`PatchSchema`] holds that knowledge as a tree keyed by field
//! name, built from OpenAPI, by hand, or from the table of built-in types this server serves.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::openapi_ref;

/// How one field is patched, and the schema of its children (map fields, or list elements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPatch {
    /// `patchStrategy: merge`: a list merges instead of being replaced.
    pub merge: bool,
    /// `patchStrategy: replace`: a map is replaced instead of merged.
    pub replace: bool,
    /// `patchStrategy: retainKeys`: the field honours `$retainKeys` (informational; the
    /// directive is applied wherever a patch carries it, as Kubernetes does).
    pub retain_keys: bool,
    /// `patchMergeKey`: the key identifying elements of a merged list of maps.
    pub merge_key: Option<String>,
    /// The schema of the field's children.
    pub schema: PatchSchema,
}

impl FieldPatch {
    /// Reads a `patchStrategy` value such as `merge`, `replace` or `merge,retainKeys`;
    /// unknown words are ignored.
    pub fn with_strategy(mut self, strategy: &str) -> Self {
        for word in strategy.split(',').map(str::trim) {
            match word {
                "merge" => self.merge = true,
                "replace" => self.replace = true,
                "retainKeys" => self.retain_keys = true,
                _ => {}
            }
        }
        self
    }
}

/// Patch metadata for the fields of one object level; fields not described patch as in JSON
/// merge patch (maps merge, lists are replaced).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchSchema {
    fields: BTreeMap<String, FieldPatch>,
    /// For map-typed levels (`additionalProperties`): the metadata of every value.
    values: Option<Box<FieldPatch>>,
}

/// The metadata of a field nothing is known about: maps merge, lists are replaced.
pub(super) static PLAIN_FIELD: FieldPatch = FieldPatch {
    merge: false,
    replace: false,
    retain_keys: false,
    merge_key: None,
    schema: PatchSchema {
        fields: BTreeMap::new(),
        values: None,
    },
};

/// Refs deeper than this are not expanded (recursive types such as JSONSchemaProps).
const MAX_REF_DEPTH: usize = 24;

impl PatchSchema {
    /// A schema with no special fields.
    pub fn new() -> Self {
        PatchSchema::default()
    }

    /// The metadata of field `name`, if described.
    pub fn field(&self, name: &str) -> Option<&FieldPatch> {
        self.fields.get(name).or(self.values.as_deref())
    }

    /// The node at a dot-separated path, created as needed.
    fn node_mut(&mut self, path: &str) -> &mut FieldPatch {
        let mut parts = path.split('.');
        let first = parts.next().unwrap_or_default();
        let mut node = self.fields.entry(first.to_string()).or_default();
        for part in parts {
            node = node.schema.fields.entry(part.to_string()).or_default();
        }
        node
    }

    /// Marks the list at `path` (dot-separated, list elements transparent: `spec.containers.ports`)
    /// as merging by `merge_key`.
    pub fn merge_list_by_key(mut self, path: &str, merge_key: &str) -> Self {
        let node = self.node_mut(path);
        node.merge = true;
        node.merge_key = Some(merge_key.to_string());
        self
    }

    /// Marks the primitive list at `path` as a merged set.
    pub fn merge_set(mut self, path: &str) -> Self {
        self.node_mut(path).merge = true;
        self
    }

    /// Marks the map at `path` as replaced rather than merged.
    pub fn replace_map(mut self, path: &str) -> Self {
        self.node_mut(path).replace = true;
        self
    }

    /// Marks the map at `path` as honouring `$retainKeys`.
    pub fn retain_keys(mut self, path: &str) -> Self {
        self.node_mut(path).retain_keys = true;
        self
    }

    /// Attaches `schema` as the children of the field at `path`.
    pub fn with_child(mut self, path: &str, schema: PatchSchema) -> Self {
        self.node_mut(path).schema = schema;
        self
    }

    /// What every object shares: `metadata.ownerReferences` merges by `uid` and
    /// `metadata.finalizers` is a merged set.
    pub fn object_meta() -> Self {
        PatchSchema::new()
            .merge_list_by_key("metadata.ownerReferences", "uid")
            .merge_set("metadata.finalizers")
    }

    /// The schema of a built-in type this server serves; unknown kinds get [`Self::object_meta`].
    /// ConfigMap, Secret, Event (both groups) and Lease have no special lists; Namespace merges
    /// `status.conditions` by `type` (its `spec.finalizers` is a plain list); ServiceAccount
    /// merges `secrets` by `name` (its `imagePullSecrets` is a plain list, as in Kubernetes).
    pub fn for_builtin(group: &str, kind: &str) -> Self {
        let meta = PatchSchema::object_meta();
        match (group, kind) {
            ("", "Namespace") => meta.merge_list_by_key("status.conditions", "type"),
            ("", "ServiceAccount") => meta.merge_list_by_key("secrets", "name"),
            _ => meta,
        }
    }

    /// Builds the schema of an OpenAPI (v2 definition or v3 component) object schema, reading
    /// `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`. `resolve` maps a `$ref`
    /// string (e.g. `#/definitions/io.k8s.api.core.v1.Container`) to its schema.
    pub fn from_openapi(schema: &Value, resolve: impl Fn(&str) -> Option<Value>) -> Self {
        OpenApiReader {
            resolve: &resolve,
            active: BTreeSet::new(),
        }
        .object(schema, 0)
    }
}

struct OpenApiReader<'a> {
    resolve: &'a dyn Fn(&str) -> Option<Value>,
    /// Refs being expanded on the current path, to stop on recursive types.
    active: BTreeSet<String>,
}

impl OpenApiReader<'_> {
    /// Follows `$ref` (directly or as the single `allOf` entry OpenAPI v3 uses) and calls `f`
    /// with the resolved schema.
    fn with_resolved<T: Default>(
        &mut self,
        schema: &Value,
        depth: usize,
        f: impl FnOnce(&mut Self, &Value) -> T,
    ) -> T {
        let Some(reference) = openapi_ref::reference(schema) else {
            return f(self, schema);
        };
        if depth >= MAX_REF_DEPTH || self.active.contains(reference) {
            return T::default();
        }
        let Some(resolved) = (self.resolve)(reference) else {
            return T::default();
        };
        self.active.insert(reference.to_string());
        let out = f(self, &resolved);
        self.active.remove(reference);
        out
    }

    fn object(&mut self, schema: &Value, depth: usize) -> PatchSchema {
        self.with_resolved(schema, depth, |reader, schema| {
            let mut out = PatchSchema::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    let field = reader.field(property, depth + 1);
                    if field != FieldPatch::default() {
                        out.fields.insert(name.clone(), field);
                    }
                }
            }
            if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                let field = reader.field(values, depth + 1);
                if field != FieldPatch::default() {
                    out.values = Some(Box::new(field));
                }
            }
            out
        })
    }

    fn field(&mut self, property: &Value, depth: usize) -> FieldPatch {
        let strategy = property
            .get("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let merge_key = property
            .get("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
            .map(str::to_string);
        let children = self.with_resolved(property, depth, |reader, resolved| {
            match resolved.get("items") {
                Some(items) => reader.object(items, depth + 1),
                None => reader.object(resolved, depth + 1),
            }
        });
        FieldPatch {
            merge_key,
            schema: children,
            ..FieldPatch::default()
        }
        .with_strategy(strategy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builder_paths() {
        let schema = PatchSchema::new()
            .merge_list_by_key("spec.containers", "name")
            .merge_list_by_key("spec.containers.ports", "containerPort")
            .retain_keys("spec.strategy")
            .replace_map("spec.selector");
        let containers = schema
            .field("spec")
            .and_then(|s| s.schema.field("containers"));
        assert_eq!(
            containers.and_then(|c| c.merge_key.as_deref()),
            Some("name")
        );
        let ports = containers.and_then(|c| c.schema.field("ports"));
        assert_eq!(ports.map(|p| p.merge), Some(true));
        assert!(
            schema
                .field("spec")
                .and_then(|s| s.schema.field("strategy"))
                .is_some_and(|f| f.retain_keys)
        );
        assert!(
            schema
                .field("spec")
                .and_then(|s| s.schema.field("selector"))
                .is_some_and(|f| f.replace)
        );
        assert!(schema.field("other").is_none());
    }

    #[test]
    fn builtins() {
        let meta = PatchSchema::object_meta();
        let m = meta
            .field("metadata")
            .map(|f| f.schema.clone())
            .unwrap_or_default();
        assert_eq!(
            m.field("ownerReferences")
                .and_then(|f| f.merge_key.as_deref()),
            Some("uid")
        );
        assert!(
            m.field("finalizers")
                .is_some_and(|f| f.merge && f.merge_key.is_none())
        );
        let sa = PatchSchema::for_builtin("", "ServiceAccount");
        assert_eq!(
            sa.field("secrets").and_then(|f| f.merge_key.as_deref()),
            Some("name")
        );
        assert!(sa.field("imagePullSecrets").is_none());
        let ns = PatchSchema::for_builtin("", "Namespace");
        assert!(ns.field("spec").is_none());
        assert!(
            ns.field("status")
                .and_then(|s| s.schema.field("conditions"))
                .is_some_and(|f| f.merge)
        );
        assert_eq!(
            PatchSchema::for_builtin("coordination.k8s.io", "Lease"),
            meta
        );
        assert_eq!(PatchSchema::for_builtin("example.com", "Widget"), meta);
    }

    #[test]
    fn from_openapi_v2_and_v3() {
        let definitions = json!({
            "PodSpec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": {"$ref": "#/definitions/Container"},
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
                "nodeName": {"type": "string"}
            }},
            "Container": {"type": "object", "properties": {
                "ports": {"type": "array", "items": {"$ref": "#/definitions/Port"},
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "containerPort"},
                "env": {"type": "array", "items": {"type": "object"},
                    "x-kubernetes-patch-strategy": "merge,retainKeys", "x-kubernetes-patch-merge-key": "name"}
            }},
            "Port": {"type": "object", "properties": {"containerPort": {"type": "integer"}}},
            "Node": {"type": "object", "properties": {"children": {"type": "array",
                "items": {"$ref": "#/definitions/Node"}, "x-kubernetes-patch-strategy": "merge",
                "x-kubernetes-patch-merge-key": "id"}}},
            "Labels": {"type": "object", "additionalProperties": {"allOf": [{"$ref": "#/definitions/Container"}]}}
        });
        let resolve = |r: &str| {
            definitions
                .get(r.trim_start_matches("#/definitions/"))
                .cloned()
        };
        let pod = PatchSchema::from_openapi(
            &json!({"type": "object", "properties": {
                "spec": {"allOf": [{"$ref": "#/definitions/PodSpec"}]}
            }}),
            resolve,
        );
        let containers = pod.field("spec").and_then(|s| s.schema.field("containers"));
        assert_eq!(
            containers.and_then(|c| c.merge_key.as_deref()),
            Some("name")
        );
        let ports = containers.and_then(|c| c.schema.field("ports"));
        assert_eq!(
            ports.and_then(|p| p.merge_key.as_deref()),
            Some("containerPort")
        );
        let env = containers.and_then(|c| c.schema.field("env"));
        assert!(env.is_some_and(|e| e.merge && e.retain_keys));
        assert!(
            pod.field("spec")
                .and_then(|s| s.schema.field("nodeName"))
                .is_none()
        );

        let recursive = PatchSchema::from_openapi(&json!({"$ref": "#/definitions/Node"}), resolve);
        let children = recursive.field("children");
        assert_eq!(children.and_then(|c| c.merge_key.as_deref()), Some("id"));

        let map = PatchSchema::from_openapi(&json!({"$ref": "#/definitions/Labels"}), resolve);
        assert!(
            map.field("anything")
                .and_then(|v| v.schema.field("ports"))
                .is_some()
        );
        assert_eq!(
            PatchSchema::from_openapi(&json!({"$ref": "#/missing"}), resolve),
            PatchSchema::new()
        );
    }
}
