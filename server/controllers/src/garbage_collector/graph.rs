//! Who owns whom: the part of the object graph the garbage collector needs, and nothing else.
//!
//! Only objects that carry `ownerReferences` are remembered (in a kcp shard almost nothing does,
//! so the graph costs nothing per workspace), indexed both ways: a dependent's owners, and an
//! owner's dependents by the owner's UID within its logical cluster. Owner references never cross
//! logical clusters, exactly as they never cross namespaces for namespaced dependents. The graph
//! is pure bookkeeping: it decides which keys need a pass, the controller does the I/O.

use std::collections::{HashMap, HashSet};

use kcp_apimachinery::meta;
use serde_json::Value;

use kcp_registry::LogicalClusterName;
use kcp_registry::store::Location;

/// One object, by what a client would name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    pub cluster: LogicalClusterName,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl Node {
    /// Where the object is, for the store.
    pub fn location(&self) -> Location<'_> {
        Location {
            cluster: &self.cluster,
            namespace: self.namespace.as_deref(),
        }
    }

    /// The reference of a stored object, which carries its logical cluster in an annotation.
    pub fn of(object: &Value, cluster: LogicalClusterName) -> Option<Node> {
        Some(Node {
            cluster,
            api_version: meta::api_version(object)?.to_string(),
            kind: meta::kind(object)?.to_string(),
            namespace: meta::namespace(object)
                .filter(|ns| !ns.is_empty())
                .map(str::to_string),
            name: meta::name(object)?.to_string(),
        })
    }
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub block_owner_deletion: bool,
}

impl OwnerRef {
    pub fn all(object: &Value) -> Vec<OwnerRef> {
        meta::owner_references(object)
            .iter()
            .filter_map(|owner| {
                Some(OwnerRef {
                    api_version: owner.get("apiVersion")?.as_str()?.to_string(),
                    kind: owner.get("kind")?.as_str()?.to_string(),
                    name: owner.get("name")?.as_str()?.to_string(),
                    uid: owner.get("uid")?.as_str()?.to_string(),
                    block_owner_deletion: owner
                        .get("blockOwnerDeletion")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                })
            })
            .collect()
    }
}

/// The finalizer an owner deleted with `propagationPolicy: Orphan` carries until its dependents
/// no longer point at it.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer an owner deleted with `propagationPolicy: Foreground` carries until its blocking
/// dependents are gone.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Work for the controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    /// Check that a dependent's owners still exist; delete it when none does.
    Dependent(Node),
    /// An owner being deleted with the orphan or foreground finalizer: settle its dependents.
    Owner(Node),
}

#[derive(Default)]
pub struct Graph {
    owners: HashMap<Node, Vec<OwnerRef>>,
    dependents: HashMap<(LogicalClusterName, String), HashSet<Node>>,
}

impl Graph {
    /// Takes in the current state of an object (listed, added or modified); returns the work it
    /// causes.
    pub fn observe(&mut self, object: &Value, cluster: LogicalClusterName) -> Vec<Work> {
        let Some(this) = Node::of(object, cluster) else {
            return Vec::new();
        };
        let mut work = Vec::new();
        let owners = OwnerRef::all(object);
        let changed = self.owners.get(&this) != Some(&owners);
        if changed {
            self.unlink(&this);
            if !owners.is_empty() {
                for owner in &owners {
                    self.dependents
                        .entry((this.cluster.clone(), owner.uid.clone()))
                        .or_default()
                        .insert(this.clone());
                }
                self.owners.insert(this.clone(), owners);
                work.push(Work::Dependent(this.clone()));
            }
        }
        if meta::deletion_timestamp(object).is_some() {
            let finalizers = meta::finalizers(object);
            if finalizers
                .iter()
                .any(|f| f == ORPHAN_FINALIZER || f == FOREGROUND_FINALIZER)
            {
                work.push(Work::Owner(this));
            }
        }
        work
    }

    /// Takes in a deleted object; returns its dependents (to check) and its owners (an owner in
    /// foreground deletion waits for it).
    pub fn forget(&mut self, object: &Value, cluster: LogicalClusterName) -> Vec<Work> {
        let mut work = Vec::new();
        if let Some(uid) = meta::uid(object)
            && let Some(dependents) = self.dependents.remove(&(cluster.clone(), uid.to_string()))
        {
            work.extend(dependents.into_iter().map(Work::Dependent));
        }
        if let Some(this) = Node::of(object, cluster) {
            for owner in self.unlink(&this) {
                work.push(Work::Owner(Node {
                    cluster: this.cluster.clone(),
                    api_version: owner.api_version,
                    kind: owner.kind,
                    namespace: this.namespace.clone(),
                    name: owner.name,
                }));
            }
        }
        work
    }

    /// Whether no object with owners is known (then no deletion can concern the collector).
    pub fn is_empty(&self) -> bool {
        self.dependents.is_empty()
    }

    /// The dependents recorded for an owner's UID.
    pub fn dependents_of(&self, cluster: &LogicalClusterName, uid: &str) -> Vec<Node> {
        self.dependents
            .get(&(cluster.clone(), uid.to_string()))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The owner references recorded for a dependent.
    pub fn owners_of(&self, dependent: &Node) -> &[OwnerRef] {
        self.owners.get(dependent).map_or(&[], Vec::as_slice)
    }

    fn unlink(&mut self, this: &Node) -> Vec<OwnerRef> {
        let Some(owners) = self.owners.remove(this) else {
            return Vec::new();
        };
        for owner in &owners {
            let key = (this.cluster.clone(), owner.uid.clone());
            if let Some(set) = self.dependents.get_mut(&key) {
                set.remove(this);
                if set.is_empty() {
                    self.dependents.remove(&key);
                }
            }
        }
        owners
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> LogicalClusterName {
        LogicalClusterName::root()
    }

    fn object(kind: &str, name: &str, uid: &str, owners: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": owners}
        })
    }

    fn owner_ref(name: &str, uid: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid})
    }

    #[test]
    fn a_deleted_owner_hands_its_dependents_to_the_controller() {
        let mut graph = Graph::default();
        let owner = object("ConfigMap", "owner", "u1", json!([]));
        let dependent = object("Secret", "child", "u2", json!([owner_ref("owner", "u1")]));
        assert!(graph.observe(&owner, cluster()).is_empty());
        let work = graph.observe(&dependent, cluster());
        let child = Node::of(&dependent, cluster()).expect("ref");
        assert_eq!(work, vec![Work::Dependent(child.clone())]);
        // Observing the same state again is no new work.
        assert!(graph.observe(&dependent, cluster()).is_empty());
        assert_eq!(
            graph.forget(&owner, cluster()),
            vec![Work::Dependent(child)]
        );
    }

    #[test]
    fn owners_are_per_logical_cluster() {
        let mut graph = Graph::default();
        let dependent = object("Secret", "child", "u2", json!([owner_ref("owner", "u1")]));
        graph.observe(&dependent, cluster());
        let other = LogicalClusterName::parse("abc").expect("name");
        let owner = object("ConfigMap", "owner", "u1", json!([]));
        assert!(graph.forget(&owner, other).is_empty());
        assert_eq!(graph.dependents_of(&cluster(), "u1").len(), 1);
    }

    #[test]
    fn dropping_owner_references_unlinks_the_dependent() {
        let mut graph = Graph::default();
        let dependent = object("Secret", "child", "u2", json!([owner_ref("owner", "u1")]));
        graph.observe(&dependent, cluster());
        let orphaned = object("Secret", "child", "u2", json!([]));
        assert!(graph.observe(&orphaned, cluster()).is_empty());
        assert!(graph.dependents_of(&cluster(), "u1").is_empty());
    }

    #[test]
    fn a_deleted_dependent_wakes_its_owners() {
        let mut graph = Graph::default();
        let dependent = object("Secret", "child", "u2", json!([owner_ref("owner", "u1")]));
        graph.observe(&dependent, cluster());
        let work = graph.forget(&dependent, cluster());
        assert_eq!(
            work,
            vec![Work::Owner(Node {
                cluster: cluster(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: "owner".into(),
            })]
        );
    }

    #[test]
    fn an_owner_in_foreground_deletion_is_work() {
        let mut graph = Graph::default();
        let mut owner = object("ConfigMap", "owner", "u1", json!([]));
        owner["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        owner["metadata"]["finalizers"] = json!([FOREGROUND_FINALIZER]);
        let work = graph.observe(&owner, cluster());
        assert!(matches!(work.as_slice(), [Work::Owner(_)]));
    }
}
