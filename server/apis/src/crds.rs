//! The CustomResourceDefinitions of the five `apis.kcp.io` types served in every logical cluster
//! (upstream serves them as system CRDs from `system:system-crds`, which no workspace can shadow).
//!
//! The definitions are upstream's generated `config/crds/apis.kcp.io_*.yaml` with descriptions left
//! out (field names, types, enums, patterns, CEL rules, defaults, printer columns, categories), kept
//! as data files beside this module, so the server's CRD machinery serves them (pruning, defaults,
//! validation, CEL, tables, discovery, OpenAPI) with upstream's shapes.

use serde_json::Value;

/// A built-in definition that does not parse (a broken data file: the tests catch it).
#[derive(Debug, thiserror::Error)]
#[error("the built-in CRD {file} does not parse: {source}")]
pub struct CrdFileError {
    file: &'static str,
    source: yaml_serde::Error,
}

const FILES: [(&str, &str); 5] = [
    (
        "apiresourceschemas.yaml",
        include_str!("crds/apiresourceschemas.yaml"),
    ),
    ("apiexports.yaml", include_str!("crds/apiexports.yaml")),
    ("apibindings.yaml", include_str!("crds/apibindings.yaml")),
    (
        "apiexportendpointslices.yaml",
        include_str!("crds/apiexportendpointslices.yaml"),
    ),
    (
        "apiconversions.yaml",
        include_str!("crds/apiconversions.yaml"),
    ),
];

/// The five CRDs: apiresourceschemas, apiexports, apibindings, apiexportendpointslices,
/// apiconversions.
pub fn crds() -> Result<Vec<Value>, CrdFileError> {
    FILES
        .iter()
        .map(|&(file, text)| {
            yaml_serde::from_str(text).map_err(|source| CrdFileError { file, source })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_apiextensions::CrdInfo;

    #[test]
    fn every_definition_is_a_valid_crd_with_upstreams_versions() {
        let crds = crds().unwrap();
        let mut seen = Vec::new();
        for crd in &crds {
            let info = CrdInfo::from_crd(crd).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(info.group, crate::GROUP);
            assert_eq!(info.categories, vec!["kcp".to_string()]);
            let storage: Vec<String> = info
                .versions
                .iter()
                .filter(|v| v.storage)
                .map(|v| v.name.clone())
                .collect();
            seen.push((info.plural.clone(), storage));
        }
        assert_eq!(
            seen,
            vec![
                (
                    "apiresourceschemas".to_string(),
                    vec!["v1alpha1".to_string()]
                ),
                ("apiexports".to_string(), vec!["v1alpha2".to_string()]),
                ("apibindings".to_string(), vec!["v1alpha2".to_string()]),
                (
                    "apiexportendpointslices".to_string(),
                    vec!["v1alpha1".to_string()]
                ),
                ("apiconversions".to_string(), vec!["v1alpha1".to_string()]),
            ]
        );
    }
}
