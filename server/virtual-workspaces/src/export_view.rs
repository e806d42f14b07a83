//! What the apiexport virtual workspace of one APIExport shows: the export's identity, the
//! resources it exports (v1alpha2 `spec.resources[]`) and the resources it claims
//! (`spec.permissionClaims[]`), and its consumers: the logical clusters bound to it (kcp-apis'
//! `endpoints` decides which bindings bind it) with the claims each accepted, as upstream's
//! apireconciler and forwarding storage decide them.

use std::collections::{BTreeMap, BTreeSet};

use kcp_apimachinery::meta;
use kcp_apis::claims::{self, AcceptedClaim, ExportedClaim};
use kcp_apis::endpoints::binds_export;
use serde_json::Value;

/// The annotation naming an object's logical cluster.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// An APIExport as its virtual workspace needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportView {
    /// `status.identityHash`: bound objects are stored (and listed across clusters) under it.
    pub identity: String,
    /// `(group, resource)` of each exported resource.
    pub resources: BTreeSet<(String, String)>,
    /// The export's permission claims.
    pub claims: Vec<ExportedClaim>,
}

impl ExportView {
    /// The view of an export (as served in v1alpha2); `None` before it has an identity.
    pub fn of(export: &Value) -> Option<ExportView> {
        let identity = export
            .pointer("/status/identityHash")
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())?
            .to_string();
        let resources = export
            .pointer("/spec/resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let group = r["group"].as_str().unwrap_or_default();
                let name = r["name"].as_str()?;
                Some((group.to_string(), name.to_string()))
            })
            .collect();
        Some(ExportView {
            identity,
            resources,
            claims: claims::exported_claims(export),
        })
    }

    /// Whether `group`/`resource` is one of the export's resources.
    pub fn exports(&self, group: &str, resource: &str) -> bool {
        self.resources
            .iter()
            .any(|(g, r)| g == group && r == resource)
    }

    /// The export's claim on `group`/`resource` (a built-in type, or one bound from another
    /// export: then the claim names its identity hash).
    pub fn claim(&self, group: &str, resource: &str) -> Option<&ExportedClaim> {
        self.claims
            .iter()
            .find(|c| c.resource.group == group && c.resource.resource == resource)
    }

    /// `(group, resource)` of everything the workspace shows: exported and claimed resources,
    /// and the consumers' APIBindings.
    pub fn shown(&self) -> BTreeSet<(String, String)> {
        let claimed = self
            .claims
            .iter()
            .map(|c| (c.resource.group.clone(), c.resource.resource.clone()));
        let bindings = (
            kcp_apis::GROUP.to_string(),
            kcp_apis::API_BINDINGS.to_string(),
        );
        self.resources
            .iter()
            .cloned()
            .chain(claimed)
            .chain([bindings])
            .collect()
    }
}

/// The logical clusters bound to an export, with the claims each accepted.
#[derive(Debug, Default)]
pub struct Consumers {
    pub accepted: BTreeMap<String, Vec<AcceptedClaim>>,
}

impl Consumers {
    /// The consumers of export `export_name` of `export_cluster` among `bindings`.
    pub fn of(bindings: &[Value], export_cluster: &str, export_name: &str) -> Consumers {
        let mut accepted: BTreeMap<String, Vec<AcceptedClaim>> = BTreeMap::new();
        for binding in bindings
            .iter()
            .filter(|b| binds_export(b, export_cluster, export_name))
        {
            if let Some(cluster) = meta::annotations(binding).get(CLUSTER_ANNOTATION) {
                accepted
                    .entry(cluster.clone())
                    .or_default()
                    .extend(claims::accepted_claims(binding));
            }
        }
        Consumers { accepted }
    }

    pub fn is_bound(&self, cluster: &str) -> bool {
        self.accepted.contains_key(cluster)
    }

    /// Any bound cluster.
    pub fn first(&self) -> Option<&String> {
        self.accepted.keys().next()
    }

    /// The claim `cluster` accepted on `claim`'s resource.
    pub fn accepted(&self, cluster: &str, claim: &ExportedClaim) -> Option<&AcceptedClaim> {
        self.accepted
            .get(cluster)?
            .iter()
            .find(|a| a.resource == claim.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(cluster: &str, export_cluster: &str, export: &str, bound: bool) -> Value {
        json!({
            "metadata": {"name": "b", "annotations": {CLUSTER_ANNOTATION: cluster}},
            "spec": {
                "reference": {"export": {"path": "root:provider", "name": export}},
                "permissionClaims": [{"group": "", "resource": "configmaps", "verbs": ["*"], "selector": {"matchAll": true}, "state": "Accepted"}],
            },
            "status": {
                "apiExportClusterName": export_cluster,
                "boundResources": if bound { json!([{"group": "example.com", "resource": "widgets"}]) } else { json!([]) },
            },
        })
    }

    #[test]
    fn an_export_without_identity_has_no_view() {
        assert_eq!(ExportView::of(&json!({"spec": {}})), None);
        assert_eq!(
            ExportView::of(&json!({"status": {"identityHash": ""}})),
            None
        );
    }

    #[test]
    fn the_view_lists_exported_and_claimed_resources() {
        let export = json!({
            "spec": {
                "resources": [
                    {"group": "example.com", "name": "widgets", "schema": "v1.widgets.example.com", "storage": {"crd": {}}},
                ],
                "permissionClaims": [
                    {"group": "", "resource": "configmaps", "verbs": ["get", "list"]},
                    {"group": "other.io", "resource": "things", "identityHash": "abc", "verbs": ["*"]},
                ],
            },
            "status": {"identityHash": "abc"},
        });
        let view = ExportView::of(&export).unwrap();
        assert_eq!(view.identity, "abc");
        assert!(view.exports("example.com", "widgets"));
        assert!(!view.exports("", "configmaps"));
        assert!(view.claim("", "configmaps").is_some());
        assert_eq!(
            view.claim("other.io", "things")
                .unwrap()
                .resource
                .identity_hash,
            "abc",
            "bound from another export"
        );
        assert!(
            view.shown()
                .contains(&(String::new(), "configmaps".to_string()))
        );
        assert!(
            view.shown()
                .contains(&("apis.kcp.io".to_string(), "apibindings".to_string()))
        );
    }

    #[test]
    fn only_bindings_of_this_export_that_bound_something_are_consumers() {
        let bindings = [
            binding("c1", "p", "widgets", true),
            binding("c2", "p", "widgets", false),
            binding("c3", "other", "widgets", true),
            binding("c4", "p", "gadgets", true),
            binding("c5", "p", "widgets", true),
        ];
        let consumers = Consumers::of(&bindings, "p", "widgets");
        assert_eq!(consumers.accepted.keys().collect::<Vec<_>>(), ["c1", "c5"]);
        let view = ExportView::of(&json!({
            "spec": {"permissionClaims": [{"group": "", "resource": "configmaps", "verbs": ["*"]}]},
            "status": {"identityHash": "abc"},
        }))
        .unwrap();
        let claim = view.claim("", "configmaps").unwrap();
        assert!(consumers.accepted("c1", claim).is_some());
        assert!(consumers.accepted("c2", claim).is_none());
    }
}
