//! The front-proxy path-mapping ConfigMap: which URL prefixes go to which backend.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use crate::api::PathMappingEntry;
use crate::paths::{self, file};
use crate::validate::{FrontProxyConfig, GENERATED_PATH_MAPPINGS};

use super::pod;

/// Failure to serialise the mapping file.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise the path mapping")]
pub struct Error(#[from] yaml_serde::Error);

/// `/clusters/` and `/services/` to the root shard, then the user's additional mappings.
pub fn path_mappings(config: &FrontProxyConfig) -> Vec<PathMappingEntry> {
    let backend_server_ca = if config.spec.ca_bundle_secret_ref.is_some() {
        file(paths::CA_BUNDLE_DIR, "tls.crt")
    } else {
        file(paths::FRONT_PROXY_ROOT_CA_DIR, "tls.crt")
    };
    let entry = |path: &str| PathMappingEntry {
        path: path.to_owned(),
        backend: config.root.shard_base_url.clone(),
        backend_server_ca: backend_server_ca.clone(),
        proxy_client_cert: file(paths::FRONT_PROXY_REQUESTHEADER_CERT_DIR, "tls.crt"),
        proxy_client_key: file(paths::FRONT_PROXY_REQUESTHEADER_CERT_DIR, "tls.key"),
    };
    let mut entries: Vec<PathMappingEntry> = GENERATED_PATH_MAPPINGS
        .iter()
        .map(|path| entry(path))
        .collect();
    entries.extend(config.spec.additional_path_mappings.iter().cloned());
    entries
}

pub fn path_mapping_config_map(config: &FrontProxyConfig) -> Result<ConfigMap, Error> {
    let names = &config.owner.names;
    let mapping = yaml_serde::to_string(&path_mappings(config))?;
    Ok(ConfigMap {
        metadata: pod::object_meta(
            &config.owner,
            names.path_mapping_config_map(),
            names.labels(),
        ),
        data: Some(BTreeMap::from([(
            paths::PATH_MAPPING_FILE.to_owned(),
            mapping,
        )])),
        ..Default::default()
    })
}
