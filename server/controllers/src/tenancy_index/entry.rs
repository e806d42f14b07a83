//! What the tenancy index keeps of one LogicalCluster: the few fields its readers decide from,
//! typed, instead of the whole object.
//!
//! Every shard keeps one entry per logical cluster it serves, so the entry's size is paid once per
//! workspace on every shard. A LogicalCluster parsed into a `serde_json::Value` (ordered maps, one
//! allocation per key and string) costs about 8 KB even without its `managedFields`, although
//! the decisions read only three annotations, the owner, the creation time and five status
//! fields (docs/performance.md, "Root shard memory, continued"). Upstream's informers keep whole
//! objects; this is our own economy and changes no answer. The readers: upstream's workspace
//! content authorizer (phase), the Workspace controller's status mirror (phase, initializers,
//! terminators), Workspace admission (the parent's phase and its path, type and required-groups
//! annotations), the home workspace (phase, conditions, initializers, URL, creation time), the
//! default APIBindings initializer (type, phase, initializers), and the index itself (path,
//! resourceVersion, owner).

use kcp_apimachinery::meta;
use kcp_registry::LogicalClusterName;
use kcp_tenancy::logical_cluster::{PATH_ANNOTATION, REQUIRED_GROUPS_ANNOTATION, TYPE_ANNOTATION};
use kcp_tenancy::workspace::Phase;
use serde_json::{Map, Value};

/// One LogicalCluster as the tenancy index records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedLogicalCluster {
    cluster: LogicalClusterName,
    /// `metadata.resourceVersion` as a number (0 before it was stored).
    revision: u64,
    /// The annotations read ([`KEPT_ANNOTATIONS`]), those set, as written.
    annotations: Box<[(&'static str, Box<str>)]>,
    /// `spec.owner`: the Workspace's cluster and name.
    owner: Option<(LogicalClusterName, Box<str>)>,
    creation_timestamp: Option<Box<str>>,
    /// `status.phase` as written (also a phase this server does not know).
    phase: Option<Box<str>>,
    initializers: Option<Box<[Box<str>]>>,
    terminators: Option<Box<[Box<str>]>>,
    /// `status.conditions` as compact JSON text (only the home workspace reads them).
    conditions: Option<Box<str>>,
    /// `status.URL`.
    url: Option<Box<str>>,
}

/// The annotations a reader reads: the canonical path, the workspace type, and the groups a
/// child workspace inherits (Workspace admission).
const KEPT_ANNOTATIONS: [&str; 3] = [PATH_ANNOTATION, TYPE_ANNOTATION, REQUIRED_GROUPS_ANNOTATION];

fn text(value: Option<&Value>) -> Option<Box<str>> {
    value.and_then(Value::as_str).map(Box::from)
}

fn names(value: Option<&Value>) -> Option<Box<[Box<str>]>> {
    let items = value?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(Value::as_str)
            .map(Box::from)
            .collect(),
    )
}

fn owner(logical_cluster: &Value) -> Option<(LogicalClusterName, Box<str>)> {
    let owner = logical_cluster.pointer("/spec/owner")?;
    let cluster = LogicalClusterName::parse(owner.get("cluster")?.as_str()?)?;
    Some((cluster, owner.get("name")?.as_str()?.into()))
}

impl IndexedLogicalCluster {
    /// The entry of `logical_cluster`, the LogicalCluster of `cluster`.
    pub fn new(cluster: &LogicalClusterName, logical_cluster: &Value) -> Self {
        let annotations = meta::annotations(logical_cluster);
        let status = |field: &str| logical_cluster.get("status")?.get(field);
        IndexedLogicalCluster {
            cluster: cluster.clone(),
            revision: meta::resource_version(logical_cluster)
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0),
            annotations: KEPT_ANNOTATIONS
                .iter()
                .filter_map(|key| Some((*key, annotations.get(*key)?.as_str().into())))
                .collect(),
            owner: owner(logical_cluster),
            creation_timestamp: text(logical_cluster.pointer("/metadata/creationTimestamp")),
            phase: text(status("phase")),
            initializers: names(status("initializers")),
            terminators: names(status("terminators")),
            conditions: status("conditions").map(|c| c.to_string().into()),
            url: text(status("URL")),
        }
    }

    /// The logical cluster this is the LogicalCluster of.
    pub fn cluster(&self) -> &LogicalClusterName {
        &self.cluster
    }

    pub(super) fn revision(&self) -> u64 {
        self.revision
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, value)| &**value)
    }

    /// The canonical path (`kcp.io/path`), or the cluster's name when it has none.
    pub fn path(&self) -> String {
        self.annotation(PATH_ANNOTATION)
            .filter(|p| !p.is_empty())
            .map_or_else(|| self.cluster.to_string(), str::to_string)
    }

    /// The workspace type annotation (`path:name`), when set and not empty.
    pub fn workspace_type(&self) -> Option<&str> {
        self.annotation(TYPE_ANNOTATION).filter(|t| !t.is_empty())
    }

    /// The owning Workspace's cluster and name (`spec.owner`).
    pub fn owner(&self) -> Option<(LogicalClusterName, String)> {
        self.owner
            .as_ref()
            .map(|(cluster, name)| (cluster.clone(), name.to_string()))
    }

    /// `status.phase` as written, empty when unset.
    pub fn raw_phase(&self) -> &str {
        self.phase.as_deref().unwrap_or_default()
    }

    pub fn phase(&self) -> Option<Phase> {
        self.phase.as_deref().and_then(Phase::parse)
    }

    /// `status.initializers` (none when unset).
    pub fn initializers(&self) -> impl Iterator<Item = &str> {
        self.initializers.iter().flatten().map(|i| &**i)
    }

    /// The LogicalCluster with only what the entry keeps (the annotations read, creation time
    /// and status), for the functions of `kcp_tenancy::workspace` that take one
    /// (`reconcile_status`, `home_workspace`, the parent in `CreateRequest`): they read nothing
    /// else.
    pub fn object(&self) -> Value {
        let list = |items: &[Box<str>]| Value::from(items.iter().map(|i| &**i).collect::<Vec<_>>());
        let mut status = Map::new();
        if let Some(phase) = &self.phase {
            status.insert("phase".into(), Value::from(&**phase));
        }
        if let Some(conditions) = &self.conditions {
            let conditions = serde_json::from_str(conditions).unwrap_or(Value::Null);
            status.insert("conditions".into(), conditions);
        }
        if let Some(initializers) = &self.initializers {
            status.insert("initializers".into(), list(initializers));
        }
        if let Some(terminators) = &self.terminators {
            status.insert("terminators".into(), list(terminators));
        }
        if let Some(url) = &self.url {
            status.insert("URL".into(), Value::from(&**url));
        }
        let mut metadata = Map::new();
        if let Some(created) = &self.creation_timestamp {
            metadata.insert("creationTimestamp".into(), Value::from(&**created));
        }
        if !self.annotations.is_empty() {
            let annotations = self
                .annotations
                .iter()
                .map(|(key, value)| ((*key).to_string(), Value::from(&**value)))
                .collect();
            metadata.insert("annotations".into(), Value::Object(annotations));
        }
        let mut object = Map::new();
        object.insert("metadata".into(), Value::Object(metadata));
        object.insert("status".into(), Value::Object(status));
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_tenancy::TypeRef;
    use kcp_tenancy::bootstrap::{self, Options};
    use kcp_tenancy::workspace::{
        CreateRequest, Creator, admit_create, home_workspace, reconcile_status,
    };
    use serde_json::json;

    /// A LogicalCluster as a shard stores one (with the fields nobody reads here too).
    fn stored() -> Value {
        json!({"apiVersion": "core.kcp.io/v1alpha1", "kind": "LogicalCluster",
            "metadata": {"name": "cluster", "uid": "u-1", "resourceVersion": "42",
                "creationTimestamp": "2026-11-26T10:00:00Z",
                "annotations": {"kcp.io/cluster": "abc", "kcp.io/path": "root:org:team",
                    "internal.tenancy.kcp.io/type": "root:universal",
                    "authorization.kcp.io/required-groups": "team-a",
                    "kcp.io/owner": "{\"username\":\"alice\"}"},
                "labels": {"initializer.internal.kcp.io/abc": "root:universal"},
                "managedFields": [{"manager": "kcp", "operation": "Update"}]},
            "spec": {"owner": {"apiVersion": "tenancy.kcp.io/v1alpha1", "resource": "workspaces",
                    "name": "team", "cluster": "parent", "uid": "w-1"},
                "initializers": ["root:universal"]},
            "status": {"phase": "Initializing", "initializers": ["root:universal"],
                "terminators": ["root:org:cleanup"],
                "conditions": [{"type": "Ready", "status": "False", "reason": "Initializing",
                    "lastTransitionTime": "2026-11-26T10:00:01Z"}],
                "URL": "https://shard/clusters/abc"}})
    }

    #[test]
    fn the_entry_holds_what_each_reader_reads() {
        let object = stored();
        let abc = LogicalClusterName::parse("abc").unwrap();
        let entry = IndexedLogicalCluster::new(&abc, &object);
        // The index: path, resourceVersion, owner; the default APIBindings: type.
        assert_eq!(entry.cluster(), &abc);
        assert_eq!(entry.path(), "root:org:team");
        assert_eq!(entry.revision(), 42);
        let parent = LogicalClusterName::parse("parent").unwrap();
        assert_eq!(entry.owner(), Some((parent, "team".to_string())));
        assert_eq!(entry.workspace_type(), Some("root:universal"));
        // The content authorizer, admission and the initializer: the phase, as written too.
        assert_eq!(entry.phase(), Some(Phase::Initializing));
        assert_eq!(entry.raw_phase(), "Initializing");
        assert_eq!(entry.initializers().collect::<Vec<_>>(), ["root:universal"]);
        // The Workspace status mirror and the home workspace derive the same from the entry as
        // from the whole object.
        let workspace = json!({"metadata": {"name": "team"},
            "spec": {"URL": "https://shard/clusters/abc", "cluster": "abc"},
            "status": {"phase": "Initializing"}});
        let (mut from_object, mut from_entry) = (workspace.clone(), workspace);
        let view = entry.object();
        assert_eq!(
            reconcile_status(&mut from_object, Some(&object)),
            reconcile_status(&mut from_entry, Some(&view))
        );
        assert_eq!(from_object, from_entry);
        assert_eq!(home_workspace(&object, "abc"), home_workspace(&view, "abc"));
        // Workspace admission, with the entry as the parent: the same type resolved from the
        // parent's, the same path and the same inherited groups.
        let types: Vec<Value> = bootstrap::workspace_types(&Options::default());
        let lookup = |reference: &TypeRef| {
            types
                .iter()
                .find(|t| reference.path == "root" && t["metadata"]["name"] == *reference.name)
                .cloned()
        };
        let creator = Creator {
            username: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["team-a".into()],
            extra: Default::default(),
        };
        let admitted = |parent: &Value| {
            let request = CreateRequest {
                creator: &creator,
                privileged: false,
                parent,
                parent_cluster: "abc",
            };
            let mut child = json!({"metadata": {"name": "child"},
                "spec": {"type": {"name": "universal", "path": "root"}}});
            let result = admit_create(&mut child, &request, &lookup).map_err(|e| e.to_string());
            (result, child)
        };
        let from_object = admitted(&object);
        assert!(from_object.0.is_ok(), "{from_object:?}");
        assert_eq!(from_object, admitted(&view));
    }

    #[test]
    fn absent_and_odd_fields_stay_as_they_were() {
        let abc = LogicalClusterName::parse("abc").unwrap();
        let bare = json!({"metadata": {"name": "cluster",
            "annotations": {"kcp.io/path": "", "internal.tenancy.kcp.io/type": ""}},
            "status": {"phase": "Sleeping", "initializers": []}});
        let entry = IndexedLogicalCluster::new(&abc, &bare);
        assert_eq!(entry.path(), "abc");
        assert_eq!(entry.revision(), 0);
        assert_eq!(entry.owner(), None);
        assert_eq!(entry.workspace_type(), None);
        assert_eq!(entry.phase(), None);
        assert_eq!(entry.raw_phase(), "Sleeping");
        assert_eq!(
            home_workspace(&bare, "abc"),
            home_workspace(&entry.object(), "abc")
        );
    }
}
