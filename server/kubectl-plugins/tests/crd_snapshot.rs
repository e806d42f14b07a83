//! `kubectl kcp crd snapshot`'s conversion on this repository's real CRDs (`crds/*.yaml`, the
//! operator's, and `e2e/workload-crds/*.yaml`, the workload types), checked against upstream's
//! rules: name `<prefix>.<crd name>`, group, names and scope copied, the same versions with
//! exactly one storage version, each version's schema carried as-is, subresources and printer
//! columns kept, conversion defaulted to `None`, and nothing of the CRD's metadata or status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use kcp_kubectl_plugins::documents::{Format, parse_stream, render};
use kcp_kubectl_plugins::snapshot::crd_to_schema;
use serde_json::{Value, json};

fn crd_files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["crds", "e2e/workload-crds"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Go's omitempty drops these, so a typed round trip cannot keep them.
fn zero(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) | Value::Bool(true) => false,
    }
}

/// Keywords of the generated workload CRDs that apiextensions' `JSONSchemaProps` has no field
/// for (strategic-merge hints), so upstream's typed round trip drops them.
const NOT_IN_JSON_SCHEMA_PROPS: &[&str] = &[
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
];

/// The schema carried as-is: equal up to zero values (absent or empty), number spelling
/// (`10.0` and `10` are one float64) and the keywords upstream cannot carry.
fn same_schema(out: &Value, input: &Value) -> bool {
    match (out, input) {
        (Value::Object(a), Value::Object(b)) => {
            // each key once: comparing from both sides would double the work at every level
            let only_in_input = b.iter().filter(|(k, _)| !a.contains_key(*k));
            a.iter().all(|(k, x)| match b.get(k) {
                Some(y) => same_schema(x, y) || (zero(x) && zero(y)),
                None => zero(x),
            }) && only_in_input
                .into_iter()
                .all(|(k, y)| zero(y) || NOT_IN_JSON_SCHEMA_PROPS.contains(&k.as_str()))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_schema(x, y))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

#[test]
fn every_repository_crd_becomes_an_upstream_shaped_schema() {
    let files = crd_files();
    assert!(files.len() >= 15, "found only {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let crds = parse_stream(&text).expect("parse");
        assert_eq!(crds.len(), 1, "{}", file.display());
        let crd = &crds[0];
        let schema = crd_to_schema(crd, "snap1").expect("convert");
        let at = file.display();

        assert_eq!(
            schema["metadata"],
            json!({"name": format!("snap1.{}", crd["metadata"]["name"].as_str().expect("name"))}),
            "{at}"
        );
        let spec = &schema["spec"];
        let crd_spec = &crd["spec"];
        assert_eq!(spec["group"], crd_spec["group"], "{at}");
        assert_eq!(spec["scope"], crd_spec["scope"], "{at}");
        for key in [
            "kind",
            "plural",
            "singular",
            "listKind",
            "shortNames",
            "categories",
        ] {
            if !crd_spec["names"][key].is_null() {
                assert_eq!(
                    spec["names"][key], crd_spec["names"][key],
                    "{at}: names.{key}"
                );
            }
        }
        assert_eq!(spec["conversion"], json!({"strategy": "None"}), "{at}");
        assert!(spec.get("preserveUnknownFields").is_none(), "{at}");

        let versions = spec["versions"].as_array().expect("versions");
        let crd_versions = crd_spec["versions"].as_array().expect("crd versions");
        assert_eq!(versions.len(), crd_versions.len(), "{at}");
        let storage = versions.iter().filter(|v| v["storage"] == true).count();
        assert_eq!(storage, 1, "{at}: exactly one storage version");
        for (version, crd_version) in versions.iter().zip(crd_versions) {
            assert_eq!(version["name"], crd_version["name"], "{at}");
            assert_eq!(version["served"], crd_version["served"], "{at}");
            assert_eq!(version["storage"], crd_version["storage"], "{at}");
            assert!(
                same_schema(
                    &version["schema"],
                    &crd_version["schema"]["openAPIV3Schema"]
                ),
                "{at}: schema of {} changed",
                version["name"]
            );
            assert!(version["schema"].is_object(), "{at}");
            let subresources = crd_version
                .get("subresources")
                .cloned()
                .unwrap_or(json!({}));
            assert_eq!(version["subresources"], subresources, "{at}");
            let columns = crd_version.get("additionalPrinterColumns");
            assert_eq!(version.get("additionalPrinterColumns"), columns, "{at}");
        }

        // the YAML upstream prints reads back as the same object
        let yaml = render(&schema, Format::Yaml).expect("render");
        let back: Value = yaml_serde::from_str(yaml.trim_end_matches("---\n")).expect("yaml");
        assert_eq!(back, schema, "{at}");
    }
}

#[test]
fn operator_crds_keep_their_subresources_and_columns() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text =
        std::fs::read_to_string(root.join("crds/operator.kcp.io_shards.yaml")).expect("read");
    let crd = &parse_stream(&text).expect("parse")[0];
    let schema = crd_to_schema(crd, "v1").expect("convert");
    let version = &schema["spec"]["versions"][0];
    assert_eq!(schema["metadata"]["name"], "v1.shards.operator.kcp.io");
    assert_eq!(schema["spec"]["group"], "operator.kcp.io");
    assert!(version["subresources"]["status"].is_object());
    assert!(version["schema"]["properties"]["spec"].is_object());
}
