//! Where a provider reaches its consumers: which APIBindings bind an APIExport (the clusters its
//! apiexport virtual workspace shows, the shards its APIExportEndpointSlice lists), and the URL
//! of that virtual workspace on a shard (upstream's `apiexportendpointsliceurls` controller:
//! `<shard's virtualWorkspaceURL>/services/apiexport/<export-cluster>/<export-name>`).

use serde_json::Value;

/// The name of the apiexport virtual workspace under `/services/`.
pub const APIEXPORT_VIRTUAL_WORKSPACE: &str = "apiexport";

/// Whether `binding` binds export `export_name` of logical cluster `export_cluster` and has
/// bound its resources (`status.apiExportClusterName`, `spec.reference.export.name`,
/// `status.boundResources`).
pub fn binds_export(binding: &Value, export_cluster: &str, export_name: &str) -> bool {
    binding
        .pointer("/status/apiExportClusterName")
        .and_then(Value::as_str)
        == Some(export_cluster)
        && binding
            .pointer("/spec/reference/export/name")
            .and_then(Value::as_str)
            == Some(export_name)
        && binding
            .pointer("/status/boundResources")
            .and_then(Value::as_array)
            .is_some_and(|bound| !bound.is_empty())
}

/// The URL of an export's virtual workspace on a shard whose virtual workspaces are served at
/// `virtual_workspace_url`.
pub fn apiexport_url(
    virtual_workspace_url: &str,
    export_cluster: &str,
    export_name: &str,
) -> String {
    format!(
        "{}/services/{APIEXPORT_VIRTUAL_WORKSPACE}/{export_cluster}/{export_name}",
        virtual_workspace_url.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(export_cluster: &str, export: &str, bound: bool) -> Value {
        json!({
            "spec": {"reference": {"export": {"path": "root:provider", "name": export}}},
            "status": {
                "apiExportClusterName": export_cluster,
                "boundResources": if bound { json!([{"group": "example.com", "resource": "widgets"}]) } else { json!([]) },
            },
        })
    }

    #[test]
    fn only_a_binding_of_the_export_that_bound_something_binds_it() {
        assert!(binds_export(&binding("p", "widgets", true), "p", "widgets"));
        assert!(!binds_export(
            &binding("p", "widgets", false),
            "p",
            "widgets"
        ));
        assert!(!binds_export(
            &binding("q", "widgets", true),
            "p",
            "widgets"
        ));
        assert!(!binds_export(
            &binding("p", "gadgets", true),
            "p",
            "widgets"
        ));
        assert!(!binds_export(&json!({}), "p", "widgets"));
    }

    #[test]
    fn the_url_is_the_shards_virtual_workspace_url_and_the_export() {
        assert_eq!(
            apiexport_url("https://shard:6443/", "2abc", "widgets"),
            "https://shard:6443/services/apiexport/2abc/widgets"
        );
    }
}
