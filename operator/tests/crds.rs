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
