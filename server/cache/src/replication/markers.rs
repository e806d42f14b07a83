//! How the shard of an export learns that another shard holds bindings of it, so that the
//! export's APIExportEndpointSlice lists that shard's apiexport virtual-workspace URL (upstream's
//! `apiexportendpointsliceurls` controller, which writes the slice from every shard through the
//! cache): each shard replicates one small marker per export its APIBindings bind, named like the
//! export and kept under the export's logical cluster, carrying the URL the slice should list.
//! The export's shard reads the markers back and adds or removes the URLs; a marker exists from
//! the shard's first binding of the export that bound something to its last one.
//!
//! Markers are no Kubernetes type: they live only in the cache, as `boundexports` of the group
//! [`MARKER_GROUP`], and cost one object per shard and bound export, never one per binding.

use std::collections::BTreeMap;

use kcp_apimachinery::ApiError;
use kcp_apis::endpoints::{apiexport_url, binds_export};
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use serde_json::{Value, json};

use super::desired::{Desired, Follower, Wanted, followed};
use super::stored::{self, Stored};
use super::{ObjectId, comparable};

/// The group of the markers in the cache.
pub const MARKER_GROUP: &str = "internal.apis.kcp.io";
/// Their kind.
pub const MARKER_KIND: &str = "BoundExport";

/// The export a binding binds, once it bound something: its logical cluster and name.
fn export_of(binding: &Value) -> Option<(String, String)> {
    let cluster = binding.pointer("/status/apiExportClusterName")?.as_str()?;
    let name = binding.pointer("/spec/reference/export/name")?.as_str()?;
    binds_export(binding, cluster, name).then(|| (cluster.to_owned(), name.to_owned()))
}

/// The marker of an export bound on a shard whose virtual workspaces are at
/// `virtual_workspace_url`.
fn marker(export: &(String, String), virtual_workspace_url: &str) -> (ObjectId, Value) {
    let (cluster, name) = export;
    let id = ObjectId {
        cluster: cluster.clone(),
        namespace: None,
        name: name.clone(),
    };
    let object = json!({"apiVersion": format!("{MARKER_GROUP}/v1alpha1"), "kind": MARKER_KIND,
        "metadata": {"name": name, "annotations": {CLUSTER_ANNOTATION: cluster}},
        "spec": {"url": apiexport_url(virtual_workspace_url, cluster, name)}});
    (id, comparable(&object))
}

/// Which export each binding of the shard binds.
#[derive(Default)]
struct Bound {
    export_of: BTreeMap<ObjectId, (String, String)>,
    bindings: BTreeMap<(String, String), usize>,
}

impl Bound {
    /// Records what a binding binds now (`None`: nothing, or it is gone); returns the export
    /// whose first binding came or last one went, with whether it is bound now.
    fn set(
        &mut self,
        binding: ObjectId,
        binds: Option<(String, String)>,
    ) -> Vec<((String, String), bool)> {
        let before = self.export_of.get(&binding).cloned();
        if before == binds {
            return Vec::new();
        }
        let mut flipped = Vec::new();
        if let Some(old) = before {
            self.export_of.remove(&binding);
            if let Some(count) = self.bindings.get_mut(&old) {
                *count -= 1;
                if *count == 0 {
                    self.bindings.remove(&old);
                    flipped.push((old, false));
                }
            }
        }
        if let Some(new) = binds {
            self.export_of.insert(binding, new.clone());
            let count = self.bindings.entry(new.clone()).or_default();
            *count += 1;
            if *count == 1 {
                flipped.push((new, true));
            }
        }
        flipped
    }
}

/// The markers of the exports the APIBindings under `bindings` bind, and their changes.
pub(super) async fn bound_exports(
    local: &ObjectStore,
    bindings: &str,
    virtual_workspace_url: &str,
) -> Result<Wanted, ApiError> {
    let page = local
        .list(ListRequest::everything(bindings), &|_| true)
        .await?;
    let mut bound = Bound::default();
    for binding in &page.items {
        if let Some(id) = ObjectId::of(binding) {
            bound.set(id, export_of(binding));
        }
    }
    let url = virtual_workspace_url.to_owned();
    let now = bound
        .bindings
        .keys()
        .map(|export| marker(export, &url))
        .collect();
    let changes = stored::changes(local, bindings, page.revision + 1).await?;
    let follow = Follow {
        bound,
        url,
        local: local.clone(),
    };
    Ok((now, followed(follow, changes)))
}

/// The bindings' exports, with the URL the markers carry and the store changes are decoded
/// with.
struct Follow {
    bound: Bound,
    url: String,
    local: ObjectStore,
}

impl Follower for Follow {
    type Change = Stored;
    type Output = Desired;

    async fn step(&mut self, change: Stored) -> Result<Vec<Desired>, ApiError> {
        let id = change.id.clone();
        // A deleted binding binds nothing: not decoded.
        let binds = if change.deleted {
            None
        } else {
            export_of(&change.object(&self.local)?)
        };
        Ok(self
            .bound
            .set(id, binds)
            .into_iter()
            .map(|(export, now_bound)| {
                let (id, object) = marker(&export, &self.url);
                if now_bound {
                    Desired::Set(id, object)
                } else {
                    Desired::Gone(id)
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(cluster: &str, name: &str) -> ObjectId {
        ObjectId {
            cluster: cluster.to_owned(),
            namespace: None,
            name: name.to_owned(),
        }
    }

    #[test]
    fn a_marker_lives_from_the_first_binding_to_the_last() {
        let export = ("provider".to_owned(), "widgets".to_owned());
        let mut bound = Bound::default();
        assert_eq!(
            bound.set(id("a", "b"), Some(export.clone())),
            vec![(export.clone(), true)]
        );
        assert!(bound.set(id("c", "b"), Some(export.clone())).is_empty());
        assert!(bound.set(id("a", "b"), None).is_empty());
        assert_eq!(bound.set(id("c", "b"), None), vec![(export.clone(), false)]);
        let (marker_id, object) = marker(&export, "https://shard-1:6443/");
        assert_eq!(marker_id, id("provider", "widgets"));
        assert_eq!(
            object["spec"]["url"],
            "https://shard-1:6443/services/apiexport/provider/widgets"
        );
    }
}
