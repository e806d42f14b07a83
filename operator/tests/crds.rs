//! The CRDs under `crds/` must equal what the API types render. Run with `UPDATE_CRDS=1` to rewrite them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use kcp_operator::crds;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds")
}

#[test]
fn checked_in_crds_match_the_api_types() {
    let update = std::env::var_os("UPDATE_CRDS").is_some();
    let mut stale = Vec::new();
    for crd in crds::definitions() {
        let path = crds_dir().join(crds::file_name(&crd));
        let rendered = crds::render(&crd).expect("CRD renders");
        if update {
            std::fs::write(&path, &rendered).expect("write CRD");
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != rendered {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale CRDs (regenerate with UPDATE_CRDS=1 cargo test -p kcp-operator --test crds): {stale:?}"
    );
}

#[test]
fn every_kind_is_namespaced_with_a_status_subresource() {
    for crd in crds::definitions() {
        assert_eq!(crd.spec.group, "operator.kcp.io");
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let subresources = version.subresources.as_ref().expect("subresources");
        assert!(
            subresources.status.is_some(),
            "{} has no status subresource",
            crd.spec.names.kind
        );
    }
}

/// Every `format` in `schema` (recursively), with the path it is at.
fn formats(schema: &serde_json::Value, path: &str, found: &mut Vec<(String, String)>) {
    match schema {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                if key == "format"
                    && let Some(format) = value.as_str()
                {
                    found.push((path.to_owned(), format.to_owned()));
                }
                formats(value, &format!("{path}.{key}"), found);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                formats(item, path, found);
            }
        }
        _ => {}
    }
}

/// A real API server warns `unrecognized format "uint32"` on install: only formats Kubernetes
/// knows may appear.
#[test]
fn schemas_use_only_formats_kubernetes_knows() {
    const KNOWN: [&str; 6] = ["int32", "int64", "double", "float", "byte", "date-time"];
    for crd in crds::definitions() {
        let mut found = Vec::new();
        formats(
            &serde_json::to_value(&crd.spec.versions).expect("serialises"),
            &crd.spec.names.kind,
            &mut found,
        );
        let unknown: Vec<_> = found
            .iter()
            .filter(|(_, format)| !KNOWN.contains(&format.as_str()))
            .collect();
        assert!(unknown.is_empty(), "unknown formats: {unknown:?}");
    }
}

/// Upstream's CacheServer sample has an empty `spec:`; the server prunes the null, so the CRD
/// must neither require `spec` nor leave it absent (it defaults to `{}`).
#[test]
fn a_cache_server_needs_no_spec() {
    let crd = crds::definitions()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CacheServer")
        .expect("CacheServer CRD");
    let root = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|schema| schema.open_api_v3_schema.as_ref())
        .expect("schema");
    assert!(
        !root.required.iter().flatten().any(|field| field == "spec"),
        "spec is required"
    );
    let spec = &root.properties.as_ref().expect("properties")["spec"];
    assert_eq!(
        spec.default.as_ref().map(|default| &default.0),
        Some(&serde_json::json!({}))
    );
    assert!(
        spec.required.iter().flatten().next().is_none(),
        "an empty spec must be valid: {:?}",
        spec.required
    );
}

/// Upstream's CacheServer sample (`spec:` with nothing under it) through the CacheServer CRD's
/// structural schema as this project's API server applies it (prune, default, validate, CEL):
/// accepted, its spec defaulted to an object, and it validates with every default.
#[test]
fn upstreams_cache_server_sample_is_accepted_and_valid() {
    let sample: serde_json::Value = yaml_serde::from_str(
        "apiVersion: operator.kcp.io/v1alpha1\nkind: CacheServer\nmetadata:\n  name: cache\n  namespace: default\nspec:\n",
    )
    .expect("sample parses");
    assert!(sample["spec"].is_null(), "the sample's spec is null");
    let crd = crds::definitions()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CacheServer")
        .expect("CacheServer CRD");
    let schema = serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|schema| schema.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("serialises");
    let schema = kcp_apiextensions::StructuralSchema::new(&schema).expect("structural");
    let mut object = sample;
    schema.prune(&mut object);
    schema.apply_defaults(&mut object);
    assert_eq!(schema.validate(&object), Vec::new(), "{object}");
    assert_eq!(schema.validate_cel(&object, None), Vec::new(), "{object}");
    assert!(object["spec"].is_object(), "spec defaulted: {object}");
    object["metadata"]["uid"] = serde_json::json!("u-cache"); // what the server assigns
    let cache: kcp_operator::api::CacheServer =
        serde_json::from_value(object).expect("a CacheServer");
    kcp_operator::validate::cache_server(&cache).expect("valid with defaults");
}
