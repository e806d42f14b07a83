//! The documents as kubectl reads them: index → group-version document → schema by GVK, paths
//! carrying the GVK and the PATCH content types, v2 obeying kube-openapi's proto parser rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_openapi::{
    Definitions, OpenApiDocuments, ServedKind, builtin, custom_resource_definition_name,
    custom_resource_schema,
};
use serde_json::{Value, json};

fn documents() -> (OpenApiDocuments, Vec<ServedKind>) {
    let (defs, kinds) = builtin();
    (OpenApiDocuments::new(&defs, &kinds), kinds)
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("valid JSON")
}

fn v3(documents: &OpenApiDocuments, path: &str) -> Value {
    let (bytes, _) = documents
        .v3_group_version_json(path)
        .expect("group-version served");
    parse(bytes)
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "kind": kind, "version": version })
}

/// Every `$ref` string below `value`, skipping extension values.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => out.push(reference.clone()),
                    (key, _) if key.starts_with("x-") => {}
                    _ => refs(value, out),
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|value| refs(value, out)),
        _ => {}
    }
}

/// The schema whose `x-kubernetes-group-version-kind` contains `gvk`, as kubectl finds it.
fn schema_by_gvk<'a>(schemas: &'a Value, gvk: &Value) -> Option<(&'a String, &'a Value)> {
    schemas.as_object()?.iter().find(|(_, schema)| {
        schema["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|gvks| gvks.contains(gvk))
    })
}

#[test]
fn index_lists_every_group_version_with_prefixed_hashed_urls() {
    let (documents, _) = documents();
    let index = parse(&documents.v3_index_json("/clusters/root"));
    let paths = index["paths"].as_object().unwrap();
    let names: Vec<&str> = paths.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "api/v1",
            "apis/authentication.k8s.io/v1",
            "apis/authorization.k8s.io/v1",
            "apis/coordination.k8s.io/v1",
            "apis/events.k8s.io/v1",
            "apis/rbac.authorization.k8s.io/v1"
        ]
    );
    for (path, entry) in paths {
        let (_, hash) = documents.v3_group_version_json(path).unwrap();
        assert_eq!(
            entry["serverRelativeURL"],
            json!(format!("/clusters/root/openapi/v3/{path}?hash={hash}"))
        );
    }
    let unprefixed = parse(&documents.v3_index_json(""));
    assert_eq!(
        unprefixed["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .split('?')
            .next(),
        Some("/openapi/v3/api/v1")
    );
    assert!(documents.v3_group_version_json("apis/apps/v1").is_none());
}

#[test]
fn every_ref_resolves_in_every_document() {
    let (documents, _) = documents();
    for path in documents.v3_group_version_paths() {
        let document = v3(&documents, path);
        let mut found = Vec::new();
        refs(&document, &mut found);
        assert!(!found.is_empty());
        for reference in found {
            let name = reference
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{path}: non-component ref {reference}"));
            assert!(
                document["components"]["schemas"].get(name).is_some(),
                "{path}: unresolved {reference}"
            );
        }
    }
    let v2 = parse(documents.v2_json());
    let mut found = Vec::new();
    refs(&v2, &mut found);
    for reference in found {
        let name = reference
            .strip_prefix("#/definitions/")
            .unwrap_or_else(|| panic!("v2: non-definition ref {reference}"));
        assert!(
            v2["definitions"].get(name).is_some(),
            "v2: unresolved {reference}"
        );
    }
}

#[test]
fn every_kind_is_findable_the_way_kubectl_explain_finds_it() {
    let (documents, kinds) = documents();
    for kind in &kinds {
        let document = v3(&documents, &kind.group_version_path());
        let expected = gvk(&kind.group, &kind.version, &kind.kind);
        // explain first reads the GVK from an operation on one of these paths ...
        let prefix = if kind.group.is_empty() {
            "/api".to_owned()
        } else {
            format!("/apis/{}", kind.group)
        };
        let collection = if kind.namespaced {
            format!(
                "{prefix}/{}/namespaces/{{namespace}}/{}",
                kind.version, kind.plural
            )
        } else {
            format!("{prefix}/{}/{}", kind.version, kind.plural)
        };
        for path in [collection.clone(), format!("{collection}/{{name}}")] {
            let get = &document["paths"][&path]["get"];
            assert_eq!(get["x-kubernetes-group-version-kind"], expected, "{path}");
        }
        // ... then the schema carrying it in its list of GVKs.
        let (name, schema) = schema_by_gvk(&document["components"]["schemas"], &expected)
            .unwrap_or_else(|| panic!("no schema for {expected}"));
        assert_eq!(name, &kind.definition);
        assert!(
            schema["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
        let list = gvk(&kind.group, &kind.version, &format!("{}List", kind.kind));
        let (list_name, _) = schema_by_gvk(&document["components"]["schemas"], &list).unwrap();
        assert_eq!(list_name, &kind.list_definition());
    }
}

#[test]
fn configmap_schema_has_what_explain_prints() {
    let (documents, _) = documents();
    let document = v3(&documents, "api/v1");
    let schemas = &document["components"]["schemas"];
    let configmap = &schemas["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        configmap["properties"]["data"]["additionalProperties"],
        json!({ "type": "string" })
    );
    assert!(
        configmap["properties"]["data"]["description"]
            .as_str()
            .unwrap()
            .contains("configuration data")
    );
    // Upstream never requires metadata; k8s-openapi's schema does.
    assert!(configmap.get("required").is_none());
    let metadata = &configmap["properties"]["metadata"];
    assert_eq!(
        metadata["allOf"],
        json!([{ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }])
    );
    assert!(metadata["description"].as_str().is_some());
    let labels =
        &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["labels"];
    assert_eq!(labels["additionalProperties"], json!({ "type": "string" }));
    assert!(labels["description"].as_str().is_some());
    assert!(schemas["io.k8s.api.core.v1.Secret"]["properties"]["type"]["description"].is_string());

    let lease = v3(&documents, "apis/coordination.k8s.io/v1");
    let lease_spec =
        &lease["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"]["properties"]["spec"];
    assert_eq!(
        lease_spec["allOf"][0]["$ref"],
        json!("#/components/schemas/io.k8s.api.coordination.v1.LeaseSpec")
    );
    assert!(lease["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"].is_null());
}

#[test]
fn patch_and_list_extensions_survive_into_both_versions() {
    let (documents, _) = documents();
    let v3 = v3(&documents, "api/v1");
    let v2 = parse(documents.v2_json());
    for schemas in [&v3["components"]["schemas"], &v2["definitions"]] {
        let meta = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-patch-merge-key"],
            json!("uid")
        );
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-patch-strategy"],
            json!("merge")
        );
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-list-map-keys"],
            json!(["uid"])
        );
        assert_eq!(meta["finalizers"]["x-kubernetes-list-type"], json!("set"));
        assert_eq!(
            meta["finalizers"]["x-kubernetes-patch-strategy"],
            json!("merge")
        );
        let account = &schemas["io.k8s.api.core.v1.ServiceAccount"]["properties"];
        assert_eq!(
            account["secrets"]["x-kubernetes-patch-merge-key"],
            json!("name")
        );
        assert_eq!(
            account["imagePullSecrets"]["x-kubernetes-list-type"],
            json!("atomic")
        );
        let status = &schemas["io.k8s.api.core.v1.NamespaceStatus"]["properties"];
        assert_eq!(
            status["conditions"]["x-kubernetes-patch-merge-key"],
            json!("type")
        );
    }
}

#[test]
fn patch_operations_advertise_field_validation_and_patch_types() {
    let (documents, kinds) = documents();
    for kind in &kinds {
        let document = v3(&documents, &kind.group_version_path());
        let expected = gvk(&kind.group, &kind.version, &kind.kind);
        let patches: Vec<&Value> = document["paths"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|item| item.get("patch"))
            .filter(|patch| patch["x-kubernetes-group-version-kind"] == expected)
            .collect();
        assert_eq!(patches.len(), 1, "{expected}");
        let patch = patches[0];
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        assert!(
            patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object()
        );
        assert_eq!(patch["x-kubernetes-action"], json!("patch"));
    }
    let v2 = parse(documents.v2_json());
    let patch = &v2["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert!(
        patch["consumes"]
            .as_array()
            .unwrap()
            .contains(&json!("application/strategic-merge-patch+json"))
    );
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        gvk("", "v1", "ConfigMap")
    );
}

/// Keywords of the OpenAPI 3.0 schema object, plus extensions.
const OPENAPI3_SCHEMA_KEYWORDS: &[&str] = &[
    "title",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "type",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "items",
    "properties",
    "additionalProperties",
    "description",
    "format",
    "default",
    "nullable",
    "discriminator",
    "readOnly",
    "writeOnly",
    "xml",
    "externalDocs",
    "example",
    "deprecated",
    "$ref",
];

fn check_openapi3_schema(schema: &Value, at: &str) {
    let object = schema
        .as_object()
        .unwrap_or_else(|| panic!("{at}: schema is not an object"));
    if object.contains_key("$ref") {
        assert_eq!(
            object.len(),
            1,
            "{at}: $ref with siblings is ignored by OpenAPI 3.0"
        );
    }
    for (key, value) in object {
        assert!(
            key.starts_with("x-") || OPENAPI3_SCHEMA_KEYWORDS.contains(&key.as_str()),
            "{at}: `{key}` is not an OpenAPI 3.0 schema keyword"
        );
        match key.as_str() {
            "type" => assert!(value.is_string(), "{at}: type must be a single string"),
            "properties" => {
                for (name, property) in value.as_object().unwrap() {
                    check_openapi3_schema(property, &format!("{at}.{name}"));
                }
            }
            "items" | "not" => check_openapi3_schema(value, &format!("{at}[]")),
            "additionalProperties" if value.is_object() => {
                check_openapi3_schema(value, &format!("{at}{{}}"))
            }
            "allOf" | "oneOf" | "anyOf" => {
                for sub in value.as_array().unwrap() {
                    check_openapi3_schema(sub, &format!("{at}/{key}"));
                }
            }
            _ => {}
        }
    }
}

#[test]
fn v3_schemas_use_only_openapi3_keywords() {
    let (documents, _) = documents();
    for path in documents.v3_group_version_paths() {
        let document = v3(&documents, path);
        assert_eq!(document["openapi"], json!("3.0.0"));
        for (name, schema) in document["components"]["schemas"].as_object().unwrap() {
            check_openapi3_schema(schema, name);
        }
    }
}

/// The constraints kube-openapi's v2 proto parser enforces on every definition.
fn check_v2_schema(schema: &Value, at: &str) {
    let object = schema.as_object().unwrap();
    for forbidden in ["nullable", "oneOf", "anyOf", "not", "$defs"] {
        assert!(!object.contains_key(forbidden), "{at}: {forbidden}");
    }
    if object.contains_key("$ref") {
        assert!(
            !object.contains_key("type") && !object.contains_key("properties"),
            "{at}"
        );
        return;
    }
    match object.get("type").map(|t| t.as_str().expect("single type")) {
        Some("array") => check_v2_schema(&object["items"], &format!("{at}[]")),
        Some("object") | None => {
            for (name, property) in object
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                check_v2_schema(property, &format!("{at}.{name}"));
            }
            if let Some(additional) = object.get("additionalProperties").filter(|a| a.is_object()) {
                check_v2_schema(additional, &format!("{at}{{}}"));
            }
        }
        Some(primitive) => assert!(
            ["string", "number", "integer", "boolean"].contains(&primitive),
            "{at}: {primitive}"
        ),
    }
}

#[test]
fn v2_contains_every_kind_and_parses_as_kubectl_1_27_would() {
    let (documents, kinds) = documents();
    let v2 = parse(documents.v2_json());
    assert_eq!(v2["swagger"], json!("2.0"));
    let definitions = &v2["definitions"];
    for (name, schema) in definitions.as_object().unwrap() {
        check_v2_schema(schema, name);
    }
    for kind in &kinds {
        let expected = gvk(&kind.group, &kind.version, &kind.kind);
        let (name, _) = schema_by_gvk(definitions, &expected).unwrap();
        assert_eq!(name, &kind.definition);
    }
    assert_eq!(
        definitions["io.k8s.api.core.v1.ConfigMap"]["properties"]["metadata"]["$ref"],
        json!("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    );
}

#[test]
fn hashes_are_stable_and_follow_content() {
    let (defs, kinds) = builtin();
    let first = OpenApiDocuments::new(&defs, &kinds);
    let second = OpenApiDocuments::new(&builtin().0, &builtin().1);
    assert_eq!(first.content_hash(), second.content_hash());
    assert_eq!(first.v3_index_json(""), second.v3_index_json(""));
    assert_eq!(first.v2_json(), second.v2_json());

    let fewer: Vec<ServedKind> = kinds
        .iter()
        .filter(|k| k.kind != "Lease")
        .cloned()
        .collect();
    let without_lease = OpenApiDocuments::new(&defs, &fewer);
    assert_ne!(first.content_hash(), without_lease.content_hash());
    assert!(
        without_lease
            .v3_group_version_json("apis/coordination.k8s.io/v1")
            .is_none()
    );
    // The core document does not mention leases, but DeleteOptions lists every group-version.
    assert_ne!(
        first.v3_group_version_json("api/v1").unwrap().1,
        without_lease.v3_group_version_json("api/v1").unwrap().1
    );
}

fn widget() -> (Definitions, Vec<ServedKind>) {
    let (mut defs, mut kinds) = builtin();
    let name = custom_resource_definition_name("stable.example.com", "v1", "Widget");
    let schema = custom_resource_schema(&json!({
        "type": "object",
        "description": "A widget.",
        "properties": {
            "spec": {
                "type": "object",
                "properties": { "size": { "type": "integer", "nullable": true } },
            },
        },
    }));
    defs.insert(name.clone(), schema);
    kinds.push(ServedKind {
        group: "stable.example.com".into(),
        version: "v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
        namespaced: true,
        definition: name,
        strategic_merge_patch: false,
    });
    (defs, kinds)
}

#[test]
fn custom_resources_get_metadata_list_and_no_strategic_merge_patch() {
    let (defs, kinds) = widget();
    let documents = OpenApiDocuments::new(&defs, &kinds);
    assert_ne!(
        documents.content_hash(),
        OpenApiDocuments::new(&builtin().0, &builtin().1).content_hash()
    );

    let document = v3(&documents, "apis/stable.example.com/v1");
    let schemas = &document["components"]["schemas"];
    let widget = &schemas["com.example.stable.v1.Widget"];
    assert_eq!(
        widget["x-kubernetes-group-version-kind"],
        json!([gvk("stable.example.com", "v1", "Widget")])
    );
    assert_eq!(
        widget["properties"]["metadata"]["allOf"][0]["$ref"],
        json!("#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    );
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    assert_eq!(
        schemas["com.example.stable.v1.WidgetList"]["properties"]["items"]["items"]["$ref"],
        json!("#/components/schemas/com.example.stable.v1.Widget")
    );
    let patch = &document["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/widgets/{name}"]
        ["patch"];
    let content = patch["requestBody"]["content"].as_object().unwrap();
    assert!(content.contains_key("application/merge-patch+json"));
    assert!(!content.contains_key("application/strategic-merge-patch+json"));

    let v2 = parse(documents.v2_json());
    let size = &v2["definitions"]["com.example.stable.v1.Widget"]["properties"]["spec"]["properties"]
        ["size"];
    assert_eq!(size, &json!({ "type": "integer" }));
}
