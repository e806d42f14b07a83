//! `tenancy.kcp.io/v1alpha1` Workspaces and WorkspaceTypes and `core.kcp.io/v1alpha1`
//! LogicalClusters, served in every logical cluster, and `core.kcp.io/v1alpha1` Shards, served in
//! `root` only (upstream binds them there alone).
//!
//! Upstream kcp serves them from CRDs (system CRDs and APIExports of `root`); here they are built
//! from kcp-tenancy's CRD definitions with the same machinery as any CRD (schema validation and
//! defaults, status subresource, printer columns), but registered with the built-ins, so they
//! exist before the first request and cost nothing per logical cluster. What is special about them
//! (admission, scheduling, phases) lives in kcp-tenancy (the rules), the API server (admission) and kcp-controllers (scheduling, phases).
//!
//! Their labels that mirror other fields are derived on every write, status writes included:
//! a Workspace's and a LogicalCluster's `tenancy.kcp.io/phase` follows `status.phase`, and a
//! LogicalCluster's initializer and terminator labels follow its `status`. Upstream's
//! controllers set them in a write of their own after each status change; here the status write
//! carries them, so they never lag behind and a workspace costs three writes fewer.

use std::sync::Arc;

use kcp_apiextensions::CrdInfo;
use kcp_tenancy::{logical_cluster, workspace};

use super::{ResourceType, custom};

/// The fields a tenancy type derives from the rest of its objects.
fn derived_fields(info: &CrdInfo) -> Option<custom::DeriveFields> {
    match (info.group.as_str(), info.plural.as_str()) {
        (workspace::GROUP, workspace::RESOURCE) => Some(|object| {
            workspace::sync_phase_label(object);
        }),
        (logical_cluster::GROUP, logical_cluster::RESOURCE) => Some(|object| {
            logical_cluster::sync_metadata(object);
        }),
        _ => None,
    }
}

/// The served versions of the three types served everywhere.
pub fn resource_types() -> Vec<Arc<ResourceType>> {
    served(kcp_tenancy::crds::crds())
}

/// The served versions of the types served in `root` only (Shards).
pub fn root_resource_types() -> Vec<Arc<ResourceType>> {
    served(kcp_tenancy::crds::root_crds())
}

fn served(crds: Vec<serde_json::Value>) -> Vec<Arc<ResourceType>> {
    custom::system_types(&crds, |info| custom::Serving {
        derive: derived_fields(info),
        ..custom::Serving::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_types_are_served() {
        let types = resource_types();
        let served: Vec<(&str, &str)> = types
            .iter()
            .map(|t| (t.group.as_str(), t.plural.as_str()))
            .collect();
        for wanted in [
            ("tenancy.kcp.io", "workspaces"),
            ("tenancy.kcp.io", "workspacetypes"),
            ("core.kcp.io", "logicalclusters"),
        ] {
            assert!(served.contains(&wanted), "{wanted:?} in {served:?}");
        }
        assert!(!served.contains(&("core.kcp.io", "shards")));
        let root = root_resource_types();
        assert_eq!(root.len(), 1);
        assert_eq!(root[0].plural, "shards");
    }
}
