//! `docs/operator-reference.md` is the field reference rendered from the operator's CRDs
//! (`kcp_operator::crds::definitions()`): the test fails when it is stale, and
//! `UPDATE_REFERENCE=1 cargo test -p kcp-docs --test reference` rewrites it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

const INTRO: &str = "# Field reference

<!-- Generated from the operator's CRDs by docs/site (kcp_docs::reference); do not edit.
Refresh with: UPDATE_REFERENCE=1 cargo test -p kcp-docs --test reference -->

Every field of the five `operator.kcp.io/v1alpha1` kinds, generated from their CRDs (so it is
what the API server validates). Paths use `[]` for list items and `<name>` for map values. Fields
of a Kubernetes core type (volumes, resources, affinity, tolerations, ...) are one row: the
Kubernetes API reference documents them. [Custom resources by example](operator-examples.md)
shows every field in a manifest; [The operator](operator.md) explains what the operator does with
them.
";

fn page() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../operator-reference.md")
}

#[test]
fn the_field_reference_is_generated_from_the_crds() {
    let crds: Vec<serde_json::Value> = kcp_operator::crds::definitions()
        .iter()
        .map(|crd| serde_json::to_value(crd).expect("CRD as JSON"))
        .collect();
    let wanted = kcp_docs::reference::render(INTRO, &crds);
    if std::env::var_os("UPDATE_REFERENCE").is_some() {
        std::fs::write(page(), &wanted).expect("write the reference");
    }
    let current = std::fs::read_to_string(page()).unwrap_or_default();
    assert!(
        current == wanted,
        "docs/operator-reference.md is stale; refresh with UPDATE_REFERENCE=1 cargo test -p kcp-docs --test reference"
    );
}
