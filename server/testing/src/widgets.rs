//! An exported `Widget` type for tests of APIs as a service and their virtual workspaces: the
//! APIResourceSchema (`widgets.<group>`, namespaced, with a status subresource and descriptions
//! for `kubectl explain`), the APIExport `widgets` of it, an APIBinding of that export, and a
//! Widget. The manifests only; each suite creates them through its own client.

use serde_json::{Value, json};

/// The APIResourceSchema `v1.widgets.<group>`.
pub fn schema(group: &str) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": format!("v1.widgets.{group}")},
        "spec": {
            "group": group,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"type": "object", "description": "A Widget of the test provider.", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "description": "How big the widget is."}}},
                    "status": {"type": "object", "properties": {"observedSize": {"type": "integer"}}},
                }},
            }],
        },
    })
}

/// The APIExport `widgets` (v1alpha2) of the schema, making `claims` (its `permissionClaims`).
pub fn export(group: &str, claims: Value) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport",
        "metadata": {"name": "widgets"},
        "spec": {
            "resources": [{"group": group, "name": "widgets", "schema": format!("v1.widgets.{group}"), "storage": {"crd": {}}}],
            "permissionClaims": claims,
        },
    })
}

/// The APIBinding `widgets` of export `widgets` in the workspace at `provider_path`.
pub fn binding(provider_path: &str) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIBinding",
        "metadata": {"name": "widgets"},
        "spec": {"reference": {"export": {"path": provider_path, "name": "widgets"}}},
    })
}

/// Widget `name` of `size`.
pub fn widget(group: &str, name: &str, size: i64) -> Value {
    json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size},
    })
}
