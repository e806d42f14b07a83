//! CustomResourceDefinitions generated from the API types, one YAML file per kind under `crds/`.
//!
//! The checked-in files are what users `kubectl apply`; a test compares them with this rendering
//! so they can never drift from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard};

/// Failure to serialise a CRD.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise CRD {name} as YAML")]
pub struct RenderError {
    name: String,
    #[source]
    source: yaml_serde::Error,
}

/// Every CRD of the API, in a stable order.
pub fn definitions() -> Vec<CustomResourceDefinition> {
    vec![
        RootShard::crd(),
        Shard::crd(),
        FrontProxy::crd(),
        CacheServer::crd(),
        Kubeconfig::crd(),
    ]
}

/// The file name kubebuilder would use: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document.
pub fn render(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    yaml_serde::to_string(crd).map_err(|source| RenderError { name, source })
}

/// All CRDs as one multi-document YAML stream, for `kcp-operator crds | kubectl apply -f -`.
pub fn render_all() -> Result<String, RenderError> {
    let documents = definitions()
        .iter()
        .map(render)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(documents.iter().map(|doc| format!("---\n{doc}")).collect())
}
