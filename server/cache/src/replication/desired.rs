//! What a shard wants in the cache for one replicated resource: the copies it wants now, then
//! each change of them, read from the shard's store.
//!
//! Most resources are copied whole ([`whole`]). LogicalClusters are copied as routing data, and
//! only those of logical clusters that hold a WorkspaceType or an APIExport ([`holders`]), as
//! upstream replicates just the LogicalClusters that replicated objects live in (its
//! `internal.kcp.io/replicate` marker, which we compute instead of storing): another shard needs
//! them to resolve a type reference's or an export reference's path (`root:org:special`),
//! nothing else. A cluster's copy is wanted from its first held object on and unwanted after its
//! last one (or its LogicalCluster) is gone, so every resource involved is followed. Only the
//! holders' routing data is kept in memory: a cluster's LogicalCluster is read from the store
//! when it gets its first held object, so a shard of 10,000 workspaces without types or exports
//! keeps nothing per workspace here. The holders are followed together with the RBAC
//! (`rbac.rs`), as whether a cluster is marked for replication decides whether its `access`
//! roles are.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kcp_apimachinery::{ApiError, meta};
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest, ObjectRef};
use kcp_tenancy::logical_cluster::{GROUP, NAME, PATH_ANNOTATION, RESOURCE, TYPE_ANNOTATION};
use serde_json::Value;

use super::stored::{self, Stored};
use super::{ObjectId, comparable};

/// One change of what the shard wants in the cache.
pub(super) enum Desired {
    Set(ObjectId, Value),
    Gone(ObjectId),
}

/// The copies wanted now, and their changes from then on.
pub(super) type Wanted = (
    BTreeMap<ObjectId, Value>,
    BoxStream<'static, Result<Desired, ApiError>>,
);

/// The copies wanted now and their changes for a replication that writes several resources
/// (its lanes): the copies of each lane, and each change with its lane.
pub(super) type Lanes = (
    Vec<BTreeMap<ObjectId, Value>>,
    BoxStream<'static, Result<(usize, Desired), ApiError>>,
);

/// A replication of one resource as one lane.
pub(super) fn one_lane((now, changes): Wanted) -> Lanes {
    let changes = changes.map(|change| change.map(|desired| (0, desired)));
    (vec![now], changes.boxed())
}

/// Every object under `prefix`, whole.
pub(super) async fn whole(local: &ObjectStore, prefix: &str) -> Result<Wanted, ApiError> {
    let page = local
        .list(ListRequest::everything(prefix), &|_| true)
        .await?;
    let now = page
        .items
        .iter()
        .filter_map(|object| Some((ObjectId::of(object)?, comparable(object))))
        .collect();
    let local = local.clone();
    let changes = stored::changes(&local, prefix, page.revision + 1)
        .await?
        .map(move |change| {
            let change = change?;
            if change.deleted {
                return Ok(Desired::Gone(change.id));
            }
            let id = change.id.clone();
            Ok(Desired::Set(id, comparable(&change.object(&local)?)))
        });
    Ok((now, changes.boxed()))
}

/// A LogicalCluster's routing data: its name, the annotations that place it (`kcp.io/cluster`,
/// `kcp.io/path`, `internal.tenancy.kcp.io/type`) and its phase. Its other changes (conditions,
/// initializers) are no change of the copy, so they cost the cache nothing.
fn routing_data(logical_cluster: &Value) -> Value {
    let annotations: serde_json::Map<String, Value> = meta::annotations(logical_cluster)
        .into_iter()
        .filter(|(key, _)| {
            [CLUSTER_ANNOTATION, PATH_ANNOTATION, TYPE_ANNOTATION].contains(&key.as_str())
        })
        .map(|(key, value)| (key, Value::String(value)))
        .collect();
    let mut copy = serde_json::json!({
        "apiVersion": logical_cluster.get("apiVersion"),
        "kind": logical_cluster.get("kind"),
        "metadata": {"name": meta::name(logical_cluster), "annotations": annotations},
    });
    if let Some(phase) = logical_cluster.pointer("/status/phase") {
        copy["status"] = serde_json::json!({"phase": phase});
    }
    comparable(&copy)
}

/// The LogicalClusters of the shard and the objects that make a cluster a holder, as far as the
/// copies need them.
#[derive(Default)]
struct Holders {
    /// Routing data of the LogicalClusters of the clusters in `held`, by logical cluster.
    logical_clusters: BTreeMap<String, (ObjectId, Value)>,
    /// The held objects (which held resource, name), by logical cluster.
    held: BTreeMap<String, BTreeSet<(usize, String)>>,
}

/// Which resource changed: LogicalClusters, or the held resource of that index.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Of {
    LogicalCluster,
    Held(usize),
}

/// A change of either resource: the object, whether it is gone, and what it is now when that
/// was decoded (a held object's identity is all that counts, as is a deletion's).
struct Seen {
    of: Of,
    id: ObjectId,
    deleted: bool,
    object: Option<Value>,
}

impl Seen {
    fn added(of: Of, object: Value) -> Option<Seen> {
        Some(Seen {
            of,
            id: ObjectId::of(&object)?,
            deleted: false,
            object: Some(object),
        })
    }
}

impl Holders {
    fn wanted(&self, cluster: &str) -> Option<&(ObjectId, Value)> {
        self.held
            .get(cluster)
            .filter(|names| !names.is_empty())
            .and(self.logical_clusters.get(cluster))
    }

    /// Whether `cluster` holds an object but its LogicalCluster's routing data is not known yet
    /// (to be read from the store).
    fn lacks_logical_cluster(&self, cluster: &str) -> bool {
        self.held.contains_key(cluster) && !self.logical_clusters.contains_key(cluster)
    }

    fn now(&self) -> BTreeMap<ObjectId, Value> {
        self.logical_clusters
            .keys()
            .filter_map(|cluster| self.wanted(cluster).cloned())
            .collect()
    }

    /// Records a change; what it changes of the wanted copies.
    fn apply(&mut self, seen: Seen) -> Vec<Desired> {
        let Seen {
            of,
            id,
            deleted,
            object,
        } = seen;
        let cluster = id.cluster.clone();
        let before = self.wanted(&cluster).map(|(id, _)| id.clone());
        match (of, object) {
            (Of::LogicalCluster, _) if deleted => {
                self.logical_clusters.remove(&cluster);
            }
            (Of::LogicalCluster, Some(object)) if self.held.contains_key(&cluster) => {
                let copy = routing_data(&object);
                self.logical_clusters.insert(cluster.clone(), (id, copy));
            }
            (Of::LogicalCluster, _) => return Vec::new(),
            (Of::Held(resource), _) => {
                let names = self.held.entry(cluster.clone()).or_default();
                if deleted {
                    names.remove(&(resource, id.name));
                } else {
                    names.insert((resource, id.name));
                }
                if names.is_empty() {
                    self.held.remove(&cluster);
                    self.logical_clusters.remove(&cluster);
                }
            }
        }
        match (self.wanted(&cluster), before) {
            (Some((id, copy)), _) => vec![Desired::Set(id.clone(), copy.clone())],
            (None, Some(id)) => vec![Desired::Gone(id)],
            (None, None) => Vec::new(),
        }
    }
}

/// A change the holders follow: of a LogicalCluster or of a held object.
pub(super) type HeldChange = (Of, Stored);

/// The holders of the shard's store, with the changes to follow: the routing data of the
/// LogicalClusters (under `logical_clusters`) of the logical clusters that hold an object under
/// one of the `held` prefixes. `rbac.rs` follows them together with the RBAC they mark.
pub(super) async fn holders(
    local: &ObjectStore,
    logical_clusters: &str,
    held: &[String],
) -> Result<
    (
        HoldersFollow,
        BoxStream<'static, Result<HeldChange, ApiError>>,
    ),
    ApiError,
> {
    let clusters = local
        .list(ListRequest::everything(logical_clusters), &|_| true)
        .await?;
    let mut holders = Holders::default();
    let mut streams = Vec::new();
    for (index, prefix) in held.iter().enumerate() {
        let page = local
            .list(ListRequest::everything(prefix), &|_| true)
            .await?;
        for seen in page
            .items
            .into_iter()
            .filter_map(|o| Seen::added(Of::Held(index), o))
        {
            holders.apply(seen);
        }
        let changes = stored::changes(local, prefix, page.revision + 1)
            .await?
            .map(move |change| change.map(|change| (Of::Held(index), change)));
        streams.push(changes.boxed());
    }
    for seen in (clusters.items.into_iter()).filter_map(|o| Seen::added(Of::LogicalCluster, o)) {
        holders.apply(seen);
    }
    let cluster_changes = stored::changes(local, logical_clusters, clusters.revision + 1)
        .await?
        .map(|change| change.map(|change| (Of::LogicalCluster, change)));
    streams.push(cluster_changes.boxed());
    let follow = HoldersFollow {
        holders,
        local: local.clone(),
        logical_clusters: logical_clusters.to_string(),
    };
    Ok((follow, stream::select_all(streams).boxed()))
}

/// A state that turns each change it follows into changes of the wanted copies (reading the
/// shard's store when it must).
pub(super) trait Follower: Send + 'static {
    type Change: Send + 'static;
    /// A change of the wanted copies ([`Desired`], or one with its lane).
    type Output: Send + 'static;
    fn step(
        &mut self,
        change: Self::Change,
    ) -> impl Future<Output = Result<Vec<Self::Output>, ApiError>> + Send;
}

/// The changes of the wanted copies: each of `changes` through `follower`, in order.
pub(super) fn followed<F: Follower>(
    follower: F,
    changes: BoxStream<'static, Result<F::Change, ApiError>>,
) -> BoxStream<'static, Result<F::Output, ApiError>> {
    stream::unfold(
        (follower, changes),
        |(mut follower, mut changes)| async move {
            let desired = match changes.next().await? {
                Ok(change) => match follower.step(change).await {
                    Ok(desired) => desired.into_iter().map(Ok).collect(),
                    Err(error) => vec![Err(error)],
                },
                Err(error) => vec![Err(error)],
            };
            Some((stream::iter(desired), (follower, changes)))
        },
    )
    .flatten()
    .boxed()
}

/// The holders, with the store a new holder's LogicalCluster is read from.
pub(super) struct HoldersFollow {
    holders: Holders,
    local: ObjectStore,
    /// The key prefix of LogicalClusters.
    logical_clusters: String,
}

impl HoldersFollow {
    /// The routing data wanted now.
    pub(super) fn now(&self) -> BTreeMap<ObjectId, Value> {
        self.holders.now()
    }

    /// Whether `cluster` is marked for replication: it holds a type or an export, and its
    /// LogicalCluster's routing data is copied (upstream's `internal.kcp.io/replicate` on it).
    pub(super) fn marked(&self, cluster: &str) -> bool {
        self.holders.wanted(cluster).is_some()
    }

    /// Every logical cluster [`HoldersFollow::marked`] now.
    pub(super) fn marked_clusters(&self) -> BTreeSet<String> {
        self.holders
            .logical_clusters
            .keys()
            .filter(|cluster| self.marked(cluster))
            .cloned()
            .collect()
    }
}

impl Follower for HoldersFollow {
    type Change = HeldChange;
    type Output = Desired;

    async fn step(&mut self, (of, change): HeldChange) -> Result<Vec<Desired>, ApiError> {
        // A LogicalCluster put counts, and is decoded, only while its logical cluster holds
        // something: a holder that appears later reads its LogicalCluster from the store.
        let decode = of == Of::LogicalCluster && !change.deleted;
        if decode && !self.holders.held.contains_key(&change.id.cluster) {
            return Ok(Vec::new());
        }
        let (id, deleted) = (change.id.clone(), change.deleted);
        let object = if decode {
            Some(change.object(&self.local)?)
        } else {
            None
        };
        let cluster = id.cluster.clone();
        let mut desired = self.holders.apply(Seen {
            of,
            id,
            deleted,
            object,
        });
        if self.holders.lacks_logical_cluster(&cluster) {
            let key = format!("{}{cluster}/{}", self.logical_clusters, NAME);
            let what = ObjectRef {
                group: GROUP,
                resource: RESOURCE,
                name: NAME,
            };
            if let Some(seen) = self.local.get(&key, what).await?
                && let Some(seen) = Seen::added(Of::LogicalCluster, seen.object)
            {
                desired.extend(self.holders.apply(seen));
            }
        }
        Ok(desired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen(of: Of, deleted: bool, object: Value) -> Seen {
        let added = Seen::added(of, object).unwrap();
        Seen { deleted, ..added }
    }

    fn seen_cluster(cluster: &str, deleted: bool) -> Seen {
        seen(
            Of::LogicalCluster,
            deleted,
            json!({"kind": "LogicalCluster", "metadata": {"name": "cluster",
                "annotations": {"kcp.io/cluster": cluster, "kcp.io/path": "root:org",
                    "kcp.io/owner": "dropped"}},
                "status": {"phase": "Ready", "conditions": []}}),
        )
    }

    fn seen_type(cluster: &str, name: &str, deleted: bool) -> Seen {
        seen(
            Of::Held(0),
            deleted,
            json!({"kind": "WorkspaceType", "metadata": {"name": name,
                "annotations": {"kcp.io/cluster": cluster}}}),
        )
    }

    fn seen_export(cluster: &str, name: &str, deleted: bool) -> Seen {
        seen(
            Of::Held(1),
            deleted,
            json!({"kind": "APIExport", "metadata": {"name": name,
                "annotations": {"kcp.io/cluster": cluster}}}),
        )
    }

    #[test]
    fn a_cluster_holding_a_type_or_an_export_is_copied_while_it_holds_either() {
        let mut holders = Holders::default();
        holders.apply(seen_export("abc", "widgets", false));
        assert_eq!(summary(holders.apply(seen_cluster("abc", false))).len(), 1);
        // A type and an export of the same name are two objects.
        holders.apply(seen_type("abc", "widgets", false));
        assert!(summary(holders.apply(seen_export("abc", "widgets", true)))[0].starts_with("set"));
        assert_eq!(holders.now().len(), 1);
        assert_eq!(
            summary(holders.apply(seen_type("abc", "widgets", true))),
            ["gone abc"]
        );
    }

    fn summary(desired: Vec<Desired>) -> Vec<String> {
        desired
            .into_iter()
            .map(|d| match d {
                Desired::Set(id, copy) => format!("set {} {}", id.cluster, copy["metadata"]),
                Desired::Gone(id) => format!("gone {}", id.cluster),
            })
            .collect()
    }

    #[test]
    fn a_cluster_is_copied_from_its_first_type_to_its_last() {
        let mut holders = Holders::default();
        assert!(summary(holders.apply(seen_cluster("abc", false))).is_empty());
        // Not kept before the cluster holds a type: read from the store when it gets one.
        assert!(summary(holders.apply(seen_type("abc", "a", false))).is_empty());
        assert!(holders.lacks_logical_cluster("abc"));
        let set = summary(holders.apply(seen_cluster("abc", false)));
        assert_eq!(
            set,
            [
                r#"set abc {"name":"cluster","annotations":{"kcp.io/cluster":"abc","kcp.io/path":"root:org"}}"#
            ]
        );
        assert_eq!(holders.now().len(), 1);
        holders.apply(seen_type("abc", "b", false));
        assert_eq!(summary(holders.apply(seen_type("abc", "a", true))).len(), 1);
        assert_eq!(
            summary(holders.apply(seen_type("abc", "b", true))),
            ["gone abc"]
        );
        assert!(holders.logical_clusters.is_empty());
        holders.apply(seen_type("abc", "c", false));
        assert!(holders.lacks_logical_cluster("abc"));
        assert_eq!(summary(holders.apply(seen_cluster("abc", false))).len(), 1);
        assert_eq!(
            summary(holders.apply(seen_cluster("abc", true))),
            ["gone abc"]
        );
        assert!(holders.now().is_empty());
    }
}
