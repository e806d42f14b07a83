//! The served documents for one set of APIs, computed once and shared.
//!
//! Every logical cluster with the same kinds serves byte-identical documents, so they are
//! rendered and hashed up front; a request only copies bytes. Each group-version gets its own
//! v3 document holding its paths and the closure of the schemas they reference, as upstream
//! does, so a client that wants `ConfigMap` downloads `api/v1` and nothing else.
//!
//! Hashes are hex SHA-256 of the serialized bytes. Clients treat them as opaque cache keys:
//! kubectl caches `/openapi/v3/...?hash=` responses on disk keyed by URL, so a hash must change
//! whenever the bytes do, and may stay equal across restarts when they do not.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::definitions::{
    DELETE_OPTIONS, Definitions, ServedKind, V3_REF_PREFIX, WATCH_EVENT, gvk, list_schema,
};
use crate::operations::{self, PathItem};
use crate::proto;
use crate::swagger::schema_to_v2;

/// `info` of every document. The version names the Kubernetes API level of the schemas.
fn info() -> Value {
    json!({ "title": "kcp", "version": "v1.35" })
}

#[derive(Debug, Clone)]
struct GroupVersionDocument {
    json: Vec<u8>,
    hash: String,
}

/// Computed once for a set of APIs and shared by every logical cluster with the same set.
#[derive(Debug, Clone)]
pub struct OpenApiDocuments {
    v2_json: Vec<u8>,
    v2_protobuf: Vec<u8>,
    v2_hash: String,
    group_versions: BTreeMap<String, GroupVersionDocument>,
    content_hash: String,
}

impl OpenApiDocuments {
    /// Renders the v2 document and one v3 document per group-version of `kinds`.
    ///
    /// Each kind's definition gets its `x-kubernetes-group-version-kind`, and its list type
    /// (`<definition>List`) is synthesised when `defs` lacks it, so a custom resource needs only
    /// its own schema (see [`crate::custom_resource_schema`]). A kind whose definition is
    /// missing is published as an object that preserves unknown fields. `DeleteOptions` and
    /// `WatchEvent` list every served group-version in their group-version-kind extension.
    pub fn new(defs: &Definitions, kinds: &[ServedKind]) -> Self {
        let defs = complete(defs, kinds);

        let mut by_group_version: BTreeMap<String, Vec<PathItem>> = BTreeMap::new();
        for kind in kinds {
            let items = by_group_version
                .entry(kind.group_version_path())
                .or_insert_with(|| {
                    vec![operations::group_version_root(&kind.group, &kind.version)]
                });
            items.extend(operations::paths_of(kind));
        }

        let mut group_versions = BTreeMap::new();
        for (path, items) in &by_group_version {
            let schemas = closure(&defs, items);
            let document = json!({
                "openapi": "3.0.0",
                "info": info(),
                "paths": operations::render_v3(items),
                "components": { "schemas": schemas },
            });
            let json = serde_json::to_vec(&document).unwrap_or_default();
            let hash = sha256_hex(&json);
            group_versions.insert(path.clone(), GroupVersionDocument { json, hash });
        }

        let all_items: Vec<PathItem> = by_group_version.into_values().flatten().collect();
        let definitions: Map<String, Value> = closure(&defs, &all_items)
            .into_iter()
            .map(|(name, schema)| (name, schema_to_v2(&schema)))
            .collect();
        let v2 = json!({
            "swagger": "2.0",
            "info": info(),
            "paths": operations::render_v2(&all_items),
            "definitions": definitions,
        });
        let v2_json = serde_json::to_vec(&v2).unwrap_or_default();
        let v2_protobuf = proto::encode_document(&v2);
        let v2_hash = sha256_hex(&v2_json);

        let mut whole = Sha256::new();
        whole.update(v2_hash.as_bytes());
        for (path, document) in &group_versions {
            whole.update(path.as_bytes());
            whole.update(b"\n");
            whole.update(document.hash.as_bytes());
        }
        let content_hash = hex(&whole.finalize());

        Self {
            v2_json,
            v2_protobuf,
            v2_hash,
            group_versions,
            content_hash,
        }
    }

    /// The Swagger 2.0 document with every served path and definition (`/openapi/v2`, JSON).
    pub fn v2_json(&self) -> &[u8] {
        &self.v2_json
    }

    /// The same document as gnostic `openapi.v2.Document` protobuf, served for
    /// `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (also `.v2.v1.0`).
    /// client-go's `OpenAPISchema()` asks only for this encoding, and kubectl 1.27 and 1.28
    /// fetch it before every `apply`/`create` with client-side validation.
    pub fn v2_protobuf(&self) -> &[u8] {
        &self.v2_protobuf
    }

    /// Hash of the v2 document, usable as its ETag.
    pub fn v2_hash(&self) -> &str {
        &self.v2_hash
    }

    /// The `/openapi/v3` index. `base` is the prefix under which the client reached this logical
    /// cluster, exactly as in the request path (`""` or `"/clusters/root"`); each entry becomes
    /// `{base}/openapi/v3/{path}?hash={hash}`.
    ///
    /// Why the prefix belongs in the URL: client-go up to 1.27 resolves `serverRelativeURL`
    /// against the host alone; 1.28–1.32 use the client's own prefix only for URLs starting
    /// with `/openapi/v3` and the host otherwise; 1.33+ strip the client's prefix first. A URL
    /// carrying the full prefix works with all of them; one without it breaks 1.27.
    pub fn v3_index_json(&self, base: &str) -> Vec<u8> {
        let paths: Map<String, Value> = self
            .group_versions
            .iter()
            .map(|(path, document)| {
                let url = format!("{base}/openapi/v3/{path}?hash={}", document.hash);
                (path.clone(), json!({ "serverRelativeURL": url }))
            })
            .collect();
        serde_json::to_vec(&json!({ "paths": paths })).unwrap_or_default()
    }

    /// The v3 document of one group-version (`"api/v1"`, `"apis/coordination.k8s.io/v1"`) and
    /// its hash, or `None` if nothing is served there.
    pub fn v3_group_version_json(&self, path: &str) -> Option<(&[u8], &str)> {
        self.group_versions
            .get(path)
            .map(|document| (document.json.as_slice(), document.hash.as_str()))
    }

    /// The group-version paths that have a v3 document.
    pub fn v3_group_version_paths(&self) -> impl Iterator<Item = &str> {
        self.group_versions.keys().map(String::as_str)
    }

    /// Identifies the whole set of documents: equal exactly when every served byte is equal.
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }
}

/// Adds what the documents need beyond the caller's definitions (see [`OpenApiDocuments::new`]).
fn complete(defs: &Definitions, kinds: &[ServedKind]) -> Definitions {
    let mut defs = defs.clone();
    for kind in kinds {
        if !defs.contains(&kind.definition) {
            defs.insert(
                kind.definition.clone(),
                json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }),
            );
        }
        if let Some(schema) = defs.get_mut(&kind.definition) {
            add_gvk(schema, kind.gvk());
        }
        if !defs.contains(&kind.list_definition()) {
            defs.insert(kind.list_definition(), list_schema(kind));
        }
    }
    let group_versions: BTreeSet<(&str, &str)> = kinds
        .iter()
        .map(|kind| (kind.group.as_str(), kind.version.as_str()))
        .collect();
    for (definition, kind) in [
        (DELETE_OPTIONS, "DeleteOptions"),
        (WATCH_EVENT, "WatchEvent"),
    ] {
        if let Some(Value::Object(schema)) = defs.get_mut(definition) {
            let gvks: Vec<Value> = group_versions
                .iter()
                .map(|(group, version)| gvk(group, version, kind))
                .collect();
            schema.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
        }
    }
    defs
}

fn add_gvk(schema: &mut Value, gvk: Value) {
    let Value::Object(schema) = schema else {
        return;
    };
    let entry = schema
        .entry("x-kubernetes-group-version-kind")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Value::Array(gvks) = entry
        && !gvks.contains(&gvk)
    {
        gvks.push(gvk);
    }
}

/// The definitions the path items use, and everything those reference, transitively.
fn closure(defs: &Definitions, items: &[PathItem]) -> Map<String, Value> {
    let mut pending: Vec<String> = items
        .iter()
        .flat_map(operations::referenced_definitions)
        .collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(schema) = defs.get(&name) {
            collect_refs(schema, &mut pending);
        }
    }
    seen.into_iter()
        .filter_map(|name| defs.get(&name).map(|schema| (name, schema.clone())))
        .collect()
}

pub(crate) fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => {
                        if let Some(name) = reference.strip_prefix(V3_REF_PREFIX) {
                            out.push(name.to_owned());
                        }
                    }
                    // Extension values are data (e.g. a default object), never schemas.
                    (key, _) if key.starts_with("x-") => {}
                    _ => collect_refs(value, out),
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|value| collect_refs(value, out)),
        _ => {}
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02X}")).collect()
}
