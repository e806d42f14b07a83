//! CustomResourceDefinitions generated from the API types, one YAML file per kind under `crds/`.
//!
//! The checked-in files are what users `kubectl apply`; a test compares them with this rendering
//! so they can never drift from the Rust types.
//!
//! Like upstream kcp-operator's CRDs, a CacheServer needs no spec at all: upstream's sample has an
//! empty `spec:` (null, which the API server prunes), so its `spec` is optional and defaults to
//! `{}` (every field of `CacheServerSpec` has a default).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON,
};
use kube::CustomResourceExt;

use crate::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard, VirtualWorkspace};

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
        optional_spec(CacheServer::crd()),
        Kubeconfig::crd(),
        VirtualWorkspace::crd(),
    ]
}

/// `crd` with a `spec` that may be left out (or null): not required, defaulted to `{}`.
fn optional_spec(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|schema| schema.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        if let Some(required) = root.required.as_mut() {
            required.retain(|field| field != "spec");
        }
        if let Some(spec) = root
            .properties
            .as_mut()
            .and_then(|properties| properties.get_mut("spec"))
        {
            spec.default = Some(JSON(serde_json::json!({})));
        }
    }
    crd
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
