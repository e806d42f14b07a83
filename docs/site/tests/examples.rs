//! `docs/operator-examples.md` shows every field of every kind: each of its YAML manifests is
//! valid against its kind's CRD as this project's API server applies it (nothing pruned, so no
//! unknown or misspelt field; then defaults, validation and the CEL rules), and together the
//! manifests of a kind set every field the field reference lists under `spec` (fields of a
//! Kubernetes type count once, as a whole).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use kcp_apiextensions::StructuralSchema;
use kcp_docs::{reference, runnable};
use serde_json::Value;

fn crds() -> BTreeMap<String, Value> {
    kcp_operator::crds::definitions()
        .iter()
        .map(|crd| {
            let value = serde_json::to_value(crd).expect("CRD as JSON");
            (crd.spec.names.kind.clone(), value)
        })
        .collect()
}

fn manifests() -> Vec<(usize, Value)> {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../operator-examples.md"),
    )
    .expect("docs/operator-examples.md");
    runnable::blocks(&page)
        .into_iter()
        .filter(|block| block.info == "yaml")
        .map(|block| (block.line, yaml_value(&block.text, block.line)))
        .collect()
}

fn yaml_value(text: &str, line: usize) -> Value {
    yaml_serde::from_str(text).unwrap_or_else(|error| panic!("line {line}: {error}"))
}

/// The problems of one manifest against its CRD's schema.
fn problems(crd: &Value, manifest: &Value) -> Vec<String> {
    let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    let schema = StructuralSchema::new(&schema).expect("structural");
    let mut object = manifest.clone();
    schema.prune(&mut object);
    let mut problems = Vec::new();
    if object != *manifest {
        problems.push(format!("unknown fields: pruned to {object}"));
    }
    schema.apply_defaults(&mut object);
    problems.extend(
        schema
            .validate(&object)
            .into_iter()
            .map(|e| format!("{e:?}")),
    );
    problems.extend(
        schema
            .validate_cel(&object, None)
            .into_iter()
            .map(|e| format!("{e:?}")),
    );
    problems
}

#[test]
fn every_example_is_valid_against_its_crd() {
    let crds = crds();
    let mut failures = Vec::new();
    for (line, manifest) in manifests() {
        let kind = manifest["kind"].as_str().unwrap_or_default();
        let Some(crd) = crds.get(kind) else {
            failures.push(format!(
                "line {line}: kind {kind:?} is not an operator kind"
            ));
            continue;
        };
        for problem in problems(crd, &manifest) {
            failures.push(format!("line {line} ({kind}): {problem}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_field_of_every_kind_is_in_an_example() {
    let crds = crds();
    let mut set: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, manifest) in manifests() {
        let kind = manifest["kind"].as_str().unwrap_or_default().to_owned();
        if let Some(crd) = crds.get(&kind) {
            set.entry(kind)
                .or_default()
                .extend(reference::set_paths(crd, &manifest));
        }
    }
    let mut missing = Vec::new();
    for (kind, crd) in &crds {
        let covered = set.get(kind).cloned().unwrap_or_default();
        for path in reference::field_paths(crd) {
            if path.starts_with("spec.") && !covered.contains(&path) {
                missing.push(format!("{kind}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "fields in no example of docs/operator-examples.md: {missing:#?}"
    );
}

/// The checks can fail: a misspelt field, a wrong type and a broken CEL rule are reported.
#[test]
fn a_wrong_example_is_caught() {
    let crds = crds();
    let root = &crds["RootShard"];
    let bad = yaml_value(
        "apiVersion: operator.kcp.io/v1alpha1\nkind: RootShard\nmetadata: {name: r}\nspec:\n  replica: 2\n  external: {hostname: h, port: x}\n  etcd: {endpoints: [https://e:2379], managed: {replicas: 2, storage: {size: 1Gi}}}\n",
        0,
    );
    let found = problems(root, &bad);
    assert!(found.iter().any(|p| p.contains("pruned")), "{found:?}");
    assert!(found.len() >= 3, "{found:?}");
}
