//! `apis.kcp.io` APIResourceSchemas, APIExports, APIBindings, APIExportEndpointSlices and
//! APIConversions, served in every logical cluster (upstream: system CRDs, which no workspace
//! can shadow).
//!
//! Built from kcp-apis' CRD definitions with the same machinery as any CRD, registered with the
//! built-ins (they exist before the first request and cost nothing per logical cluster), with
//! kcp-apis' conversion between v1alpha1 and v1alpha2, whose shapes differ: APIExports and
//! APIBindings are stored as v1alpha2 and read in either version.

use std::sync::Arc;

use super::{ResourceType, custom};

/// The served versions of the five types.
pub fn resource_types() -> Vec<Arc<ResourceType>> {
    match kcp_apis::crds::crds() {
        Ok(crds) => custom::system_types(&crds, |_| custom::Serving {
            convert: Some(Arc::new(kcp_apis::conversion::convert)),
            ..custom::Serving::default()
        }),
        Err(error) => {
            tracing::error!(%error, "the apis.kcp.io CRDs do not parse; not serving them");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_version_is_served_and_exports_convert() {
        let types = resource_types();
        let served: Vec<(&str, &str)> = types
            .iter()
            .map(|t| (t.plural.as_str(), t.version.as_str()))
            .collect();
        assert_eq!(
            served,
            vec![
                ("apiresourceschemas", "v1alpha1"),
                ("apiexports", "v1alpha1"),
                ("apiexports", "v1alpha2"),
                ("apibindings", "v1alpha1"),
                ("apibindings", "v1alpha2"),
                ("apiexportendpointslices", "v1alpha1"),
                ("apiconversions", "v1alpha1"),
            ]
        );
        let v1 = &types[1];
        let written = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
            "metadata": {"name": "e"}, "spec": {"latestResourceSchemas": ["a.things.example.com"]}});
        let stored = v1.strategy.api_to_storage(written);
        assert_eq!(stored["apiVersion"], "apis.kcp.io/v1alpha2");
        assert_eq!(stored["spec"]["resources"][0]["name"], "things");
        let read = v1.strategy.storage_to_api(stored);
        assert_eq!(
            read["spec"]["latestResourceSchemas"],
            json!(["a.things.example.com"])
        );
    }
}
