//! LogicalClusters: the singleton `cluster` object inside every logical cluster.
//!
//! The LogicalCluster is what the server consults on every request to a cluster (does it exist,
//! is it ready, who owns it), so its content and its phase machine are the contract between the
//! scheduler (which creates it for a workspace), the initializers and terminators (which clear
//! themselves from its status), and the content authorizer. These are upstream's scheduler
//! (`createLogicalCluster`), the `core.kcp.io/LogicalCluster` admission plugin and the
//! LogicalCluster phase and metadata reconcilers.

use std::collections::BTreeSet;

use kcp_apimachinery::gofmt::quote;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha224};

use crate::paths::{self, Path};
use crate::workspace::{self, Creator, OWNER_ANNOTATION, Phase, SHARD_ANNOTATION};

pub const GROUP: &str = "core.kcp.io";
pub const RESOURCE: &str = "logicalclusters";
/// The only name a LogicalCluster may have.
pub const NAME: &str = "cluster";
/// The canonical path of the object's logical cluster (on LogicalClusters, WorkspaceTypes, ...).
pub const PATH_ANNOTATION: &str = "kcp.io/path";
/// The logical cluster an object belongs to, as the server reports it.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";
/// The cluster's workspace type, `path:name`.
pub const TYPE_ANNOTATION: &str = "internal.tenancy.kcp.io/type";
/// Groups a user needs to access the cluster (`;` = or, `,` = and), inherited by child workspaces.
pub const REQUIRED_GROUPS_ANNOTATION: &str = "authorization.kcp.io/required-groups";
/// `"true"` takes the cluster offline (phase Inactive).
pub const INACTIVE_ANNOTATION: &str = "core.kcp.io/inactive";
/// The deprecated spelling of [`INACTIVE_ANNOTATION`], still honoured.
pub const LEGACY_INACTIVE_ANNOTATION: &str = "internal.kcp.io/inactive";
/// Label key prefix mirroring each `status.initializers` entry.
pub const INITIALIZER_LABEL_PREFIX: &str = "initializer.internal.kcp.io/";
/// Label key prefix mirroring each `status.terminators` entry.
pub const TERMINATOR_LABEL_PREFIX: &str = "terminator.internal.kcp.io/";
/// The workspace type of home workspaces.
pub const HOME_TYPE: &str = "root:home";

/// Groups whose members bypass LogicalCluster admission (the system's own controllers).
pub const PRIVILEGED_GROUPS: [&str; 4] = [
    "system:masters",
    "system:kcp:logical-cluster-admin",
    "system:kcp:external-logical-cluster-admin",
    "system:kcp:tenancy:workspace-bootstrapper",
];

/// Why a LogicalCluster write is refused (403 Forbidden, upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogicalClusterError {
    #[error("LogicalCluster cannot be created")]
    Create,
    #[error("LogicalCluster cannot be deleted")]
    Delete,
    #[error("spec.createdBy is immutable")]
    CreatedByImmutable,
    #[error("spec.initializers is immutable")]
    InitializersImmutable,
    #[error("status.initializers do not equal spec.initializers")]
    InitializersNotCopied,
    #[error("status.initializers must not grow")]
    InitializersGrew,
    #[error("status.initializers is immutable after initialization")]
    InitializersImmutableAfterInitialization,
    #[error("status.initializers is not empty")]
    InitializersRemain,
    #[error("cannot transition from {} to {}", quote(.from), quote(.to))]
    Transition { from: String, to: String },
    #[error("LogicalCluster can only be marked inactive in phase \"Ready\", but is in phase {}", quote(.0))]
    InactiveOutsideReady(String),
    #[error("modification of reserved annotation: {}", quote(.0))]
    ReservedAnnotation(&'static str),
}

/// Whether `groups` bypass LogicalCluster admission.
pub fn is_privileged(groups: &[String]) -> bool {
    groups
        .iter()
        .any(|group| PRIVILEGED_GROUPS.contains(&group.as_str()))
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(key)?
        .as_str()
}

fn list(object: &Value, pointer: &str) -> Vec<String> {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn set_of(object: &Value, pointer: &str) -> BTreeSet<String> {
    list(object, pointer).into_iter().collect()
}

fn phase_string(object: &Value) -> &str {
    object
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `status.initializers`.
pub fn initializers(logical_cluster: &Value) -> Vec<String> {
    list(logical_cluster, "/status/initializers")
}

/// `status.terminators`.
pub fn terminators(logical_cluster: &Value) -> Vec<String> {
    list(logical_cluster, "/status/terminators")
}

/// Whether the cluster is marked inactive (either annotation `"true"`).
pub fn is_inactive(logical_cluster: &Value) -> bool {
    [INACTIVE_ANNOTATION, LEGACY_INACTIVE_ANNOTATION]
        .iter()
        .any(|key| annotation(logical_cluster, key) == Some("true"))
}

/// Everything the scheduler knows when it creates the LogicalCluster of a workspace.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// The Workspace (its name, uid, annotations and `spec.type` are used).
    pub workspace: &'a Value,
    /// The logical cluster the Workspace object lives in.
    pub workspace_cluster: &'a str,
    /// The new cluster's canonical path ([`workspace::canonical_path`]).
    pub path: &'a Path,
    pub shard: Option<&'a str>,
    /// From [`crate::types::initializers`] of the type's aliases.
    pub initializers: &'a [String],
    /// From [`crate::types::terminators`].
    pub terminators: &'a [String],
}

fn insert_nonempty(map: &mut Map<String, Value>, key: &str, items: &[String]) {
    if !items.is_empty() {
        map.insert(key.into(), json!(items));
    }
}

fn logical_cluster(annotations: Map<String, Value>, spec: Map<String, Value>) -> Value {
    json!({
        "apiVersion": "core.kcp.io/v1alpha1",
        "kind": "LogicalCluster",
        "metadata": {"name": NAME, "annotations": annotations},
        "spec": spec,
    })
}

/// The LogicalCluster created in a scheduled workspace's new logical cluster.
pub fn for_workspace(placement: &Placement<'_>) -> Value {
    let ws = placement.workspace;
    let meta = |field: &str| {
        ws.pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let type_ref = ws
        .pointer("/spec/type")
        .and_then(crate::types::TypeRef::from_json)
        .map(|reference| reference.to_string())
        .unwrap_or_default();
    let mut annotations = Map::new();
    annotations.insert(TYPE_ANNOTATION.into(), json!(type_ref));
    if let Some(shard) = placement.shard {
        annotations.insert(SHARD_ANNOTATION.into(), json!(shard));
    }
    annotations.insert(PATH_ANNOTATION.into(), json!(placement.path.as_str()));
    let mut spec = Map::new();
    spec.insert(
        "owner".into(),
        json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "resource": workspace::RESOURCE,
            "name": meta("name"),
            "cluster": placement.workspace_cluster,
            "uid": meta("uid"),
        }),
    );
    if let Some(owner) = annotation(ws, OWNER_ANNOTATION).filter(|owner| !owner.is_empty()) {
        if let Some(creator) = Creator::from_owner_annotation(owner) {
            spec.insert("createdBy".into(), creator.created_by());
        }
        annotations.insert(OWNER_ANNOTATION.into(), json!(owner));
    }
    if let Some(groups) = annotation(ws, REQUIRED_GROUPS_ANNOTATION) {
        annotations.insert(REQUIRED_GROUPS_ANNOTATION.into(), json!(groups));
    }
    insert_nonempty(&mut spec, "initializers", placement.initializers);
    insert_nonempty(&mut spec, "terminators", placement.terminators);
    logical_cluster(annotations, spec)
}

/// The LogicalCluster of `creator`'s home workspace (in [`crate::names::home_cluster_name`]),
/// with the initializers of `root:home`.
pub fn for_home(creator: &Creator, initializers: &[String]) -> Value {
    let mut annotations = Map::new();
    annotations.insert(OWNER_ANNOTATION.into(), json!(creator.owner_annotation()));
    annotations.insert(TYPE_ANNOTATION.into(), json!(HOME_TYPE));
    annotations.insert(
        PATH_ANNOTATION.into(),
        json!(paths::home_path(&creator.username)),
    );
    let mut spec = Map::new();
    spec.insert("createdBy".into(), creator.created_by());
    insert_nonempty(&mut spec, "initializers", initializers);
    logical_cluster(annotations, spec)
}

/// The phase the phase reconciler moves the cluster to, if it should move: Scheduling (or unset)
/// to Initializing; Initializing to Ready once `status.initializers` is empty; Ready and Inactive
/// following the inactive annotation; once deleted, Terminating while `status.terminators` remain,
/// then Deleting.
pub fn next_phase(logical_cluster: &Value) -> Option<Phase> {
    let current = Phase::of(logical_cluster);
    let next = if logical_cluster
        .pointer("/metadata/deletionTimestamp")
        .is_some()
    {
        if terminators(logical_cluster).is_empty() {
            Phase::Deleting
        } else {
            Phase::Terminating
        }
    } else {
        match current {
            None | Some(Phase::Scheduling) => Phase::Initializing,
            Some(Phase::Initializing) if initializers(logical_cluster).is_empty() => Phase::Ready,
            Some(Phase::Ready) if is_inactive(logical_cluster) => Phase::Inactive,
            Some(Phase::Inactive) if !is_inactive(logical_cluster) => Phase::Ready,
            _ => return None,
        }
    };
    (current != Some(next)).then_some(next)
}

/// Mutating admission of an update: on the transition to Initializing, `spec.initializers` and
/// `spec.terminators` are copied to `status`.
pub fn admit_update(new: &mut Value, old: &Value) {
    let entering = phase_string(old) != Phase::Initializing.as_str()
        && phase_string(new) == Phase::Initializing.as_str();
    if !entering {
        return;
    }
    let copy = |field: &str| new.pointer(&format!("/spec/{field}")).cloned();
    let (initializers, terminators) = (copy("initializers"), copy("terminators"));
    if let Some(status) = new
        .as_object_mut()
        .map(|object| object.entry("status").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    {
        for (field, value) in [("initializers", initializers), ("terminators", terminators)] {
            match value {
                Some(value) => status.insert(field.into(), value),
                None => status.remove(field),
            };
        }
    }
}

/// Creating a LogicalCluster through the API is reserved to the system.
pub fn validate_create(groups: &[String]) -> Result<(), LogicalClusterError> {
    if is_privileged(groups) {
        Ok(())
    } else {
        Err(LogicalClusterError::Create)
    }
}

/// Deleting one from inside is allowed when `spec.directlyDeletable`.
pub fn validate_delete(current: &Value, groups: &[String]) -> Result<(), LogicalClusterError> {
    let deletable = current
        .pointer("/spec/directlyDeletable")
        .and_then(Value::as_bool)
        == Some(true);
    if is_privileged(groups) || deletable {
        Ok(())
    } else {
        Err(LogicalClusterError::Delete)
    }
}

/// Phases ordered for "no going back"; other phases rank 0 as upstream's map lookup does.
fn phase_ordinal(phase: &str) -> u8 {
    match phase {
        "" => 1,
        "Scheduling" => 2,
        "Initializing" => 3,
        "Ready" => 4,
        _ => 0,
    }
}

/// The annotations the system sets on a LogicalCluster and then trusts: requests are routed by
/// `kcp.io/path`, what may be created inside follows the type, and entry needs the required
/// groups. The creator of a workspace is its cluster-admin and may edit the LogicalCluster, so
/// without this an admin could claim another workspace's path or change their own type.
const SYSTEM_ANNOTATIONS: [&str; 4] = [
    PATH_ANNOTATION,
    CLUSTER_ANNOTATION,
    TYPE_ANNOTATION,
    REQUIRED_GROUPS_ANNOTATION,
];

/// Validating admission of an update by a non-system user (after [`admit_update`]): initializers
/// may only be removed from `status` while Initializing, all of them before leaving it, phases
/// only move forward, and only a Ready cluster may be marked inactive.
pub fn validate_update(
    new: &Value,
    old: &Value,
    groups: &[String],
) -> Result<(), LogicalClusterError> {
    if is_privileged(groups) {
        return Ok(());
    }
    if let Some(key) = SYSTEM_ANNOTATIONS
        .into_iter()
        .find(|key| annotation(new, key) != annotation(old, key))
    {
        return Err(LogicalClusterError::ReservedAnnotation(key));
    }
    if new.pointer("/spec/createdBy") != old.pointer("/spec/createdBy") {
        return Err(LogicalClusterError::CreatedByImmutable);
    }
    let new_spec = set_of(new, "/spec/initializers");
    let old_status = set_of(old, "/status/initializers");
    let new_status = set_of(new, "/status/initializers");
    if set_of(old, "/spec/initializers") != new_spec {
        return Err(LogicalClusterError::InitializersImmutable);
    }
    let initializing = Phase::Initializing.as_str();
    let (old_phase, new_phase) = (phase_string(old), phase_string(new));
    let entering = old_phase != initializing && new_phase == initializing;
    if entering && new_spec != new_status {
        return Err(LogicalClusterError::InitializersNotCopied);
    }
    if !entering && new_phase == initializing && !new_status.is_subset(&old_status) {
        return Err(LogicalClusterError::InitializersGrew);
    }
    if new_phase != initializing && old_status != new_status {
        return Err(LogicalClusterError::InitializersImmutableAfterInitialization);
    }
    if old_phase == initializing && new_phase != initializing && !new_status.is_empty() {
        return Err(LogicalClusterError::InitializersRemain);
    }
    if phase_ordinal(old_phase) > phase_ordinal(new_phase) {
        return Err(LogicalClusterError::Transition {
            from: old_phase.to_string(),
            to: new_phase.to_string(),
        });
    }
    if new_phase != Phase::Ready.as_str() && !is_inactive(old) && is_inactive(new) {
        return Err(LogicalClusterError::InactiveOutsideReady(
            new_phase.to_string(),
        ));
    }
    Ok(())
}

/// Removes `entry` from `status.<field>` (what an initializer or terminator does when done);
/// whether it was there.
fn remove_from_status(logical_cluster: &mut Value, field: &str, entry: &str) -> bool {
    let Some(items) = logical_cluster
        .pointer_mut(&format!("/status/{field}"))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = items.len();
    items.retain(|item| item.as_str() != Some(entry));
    before != items.len()
}

/// An initializer clears itself from `status.initializers`.
pub fn remove_initializer(logical_cluster: &mut Value, initializer: &str) -> bool {
    remove_from_status(logical_cluster, "initializers", initializer)
}

/// A terminator clears itself from `status.terminators`.
pub fn remove_terminator(logical_cluster: &mut Value, terminator: &str) -> bool {
    remove_from_status(logical_cluster, "terminators", terminator)
}

/// The label mirroring one initializer or terminator: the key is the prefix plus as much of the
/// hex SHA-224 of the name as fits in 63 characters, the value the whole hash (hard to forge).
fn lifecycle_label(prefix: &str, name: &str) -> (String, String) {
    let hash: String = Sha224::digest(name.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let key_length = 63usize.saturating_sub(prefix.len()).min(hash.len());
    (format!("{prefix}{}", &hash[..key_length]), hash)
}

/// `InitializerToLabel`.
pub fn initializer_label(initializer: &str) -> (String, String) {
    lifecycle_label(INITIALIZER_LABEL_PREFIX, initializer)
}

/// `TerminatorToLabel`.
pub fn terminator_label(terminator: &str) -> (String, String) {
    lifecycle_label(TERMINATOR_LABEL_PREFIX, terminator)
}

/// The metadata reconciler: the phase label, one label per remaining initializer and terminator
/// (stale ones removed), and once Ready the owner annotation trimmed to the user name. Returns
/// whether anything changed.
pub fn sync_metadata(logical_cluster: &mut Value) -> bool {
    let mut changed = workspace::sync_phase_label(logical_cluster);
    let wanted: Vec<(String, String)> = initializers(logical_cluster)
        .iter()
        .map(|i| initializer_label(i))
        .chain(
            terminators(logical_cluster)
                .iter()
                .map(|t| terminator_label(t)),
        )
        .collect();
    let ready = Phase::of(logical_cluster) == Some(Phase::Ready);
    let Some(metadata) = logical_cluster
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    else {
        return changed;
    };
    if let Some(labels) = metadata
        .entry("labels")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        let before = labels.clone();
        labels.retain(|key, _| {
            !(key.starts_with(INITIALIZER_LABEL_PREFIX) || key.starts_with(TERMINATOR_LABEL_PREFIX))
                || wanted.iter().any(|(wanted, _)| wanted == key)
        });
        for (key, value) in wanted {
            labels.insert(key, json!(value));
        }
        changed |= *labels != before;
    }
    if ready
        && let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        && let Some(owner) = annotations.get(OWNER_ANNOTATION).and_then(Value::as_str)
    {
        let trimmed = Creator::from_owner_annotation(owner).map(|creator| {
            Creator {
                username: creator.username,
                ..Creator::default()
            }
            .owner_annotation()
        });
        match trimmed {
            Some(trimmed) if trimmed == owner => {}
            Some(trimmed) => {
                annotations.insert(OWNER_ANNOTATION.into(), json!(trimmed));
                changed = true;
            }
            None => {
                annotations.remove(OWNER_ANNOTATION);
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::SHARD_ANNOTATION;

    fn user() -> Vec<String> {
        vec!["system:authenticated".to_string()]
    }

    fn initializing() -> Value {
        json!({"metadata": {"name": "cluster"}, "spec": {"initializers": ["root:universal", "system:apibindings"]}, "status": {"phase": "Initializing", "initializers": ["root:universal", "system:apibindings"]}})
    }

    #[test]
    fn scheduled_workspaces_get_an_owned_logical_cluster() {
        let owner = Creator {
            username: "alice".into(),
            groups: vec!["g".into()],
            ..Creator::default()
        };
        let ws = json!({
            "metadata": {"name": "w", "uid": "uid-1", "annotations": {OWNER_ANNOTATION: owner.owner_annotation(), REQUIRED_GROUPS_ANNOTATION: "g"}},
            "spec": {"type": {"name": "universal", "path": "root"}},
        });
        let path = Path::parse("root:acme:w").unwrap();
        let lc = for_workspace(&Placement {
            workspace: &ws,
            workspace_cluster: "c0ffee",
            path: &path,
            shard: Some("root"),
            initializers: &["root:universal".to_string()],
            terminators: &[],
        });
        assert_eq!(lc["metadata"]["name"], NAME);
        assert_eq!(
            lc["metadata"]["annotations"],
            json!({
                TYPE_ANNOTATION: "root:universal",
                SHARD_ANNOTATION: "root",
                PATH_ANNOTATION: "root:acme:w",
                OWNER_ANNOTATION: owner.owner_annotation(),
                REQUIRED_GROUPS_ANNOTATION: "g",
            })
        );
        assert_eq!(
            lc["spec"],
            json!({
                "owner": {"apiVersion": "tenancy.kcp.io/v1alpha1", "resource": "workspaces", "name": "w", "cluster": "c0ffee", "uid": "uid-1"},
                "createdBy": {"username": "alice", "groups": ["g"]},
                "initializers": ["root:universal"],
            })
        );
    }

    #[test]
    fn home_logical_clusters_are_typed_home() {
        let alice = Creator {
            username: "alice".into(),
            ..Creator::default()
        };
        let lc = for_home(&alice, &["root:universal".to_string()]);
        assert_eq!(lc["metadata"]["annotations"][TYPE_ANNOTATION], HOME_TYPE);
        assert_eq!(lc["metadata"]["annotations"][PATH_ANNOTATION], "user:alice");
        assert_eq!(
            lc["metadata"]["annotations"][OWNER_ANNOTATION],
            r#"{"username":"alice"}"#
        );
        assert_eq!(lc["spec"]["createdBy"], json!({"username": "alice"}));
        assert!(lc["spec"].get("owner").is_none());
    }

    #[test]
    fn phase_machine() {
        assert_eq!(next_phase(&json!({})), Some(Phase::Initializing));
        assert_eq!(
            next_phase(&json!({"status": {"phase": "Scheduling"}})),
            Some(Phase::Initializing)
        );
        assert_eq!(next_phase(&initializing()), None);
        assert_eq!(
            next_phase(&json!({"status": {"phase": "Initializing"}})),
            Some(Phase::Ready)
        );
        assert_eq!(next_phase(&json!({"status": {"phase": "Ready"}})), None);
        let inactive = json!({"metadata": {"annotations": {INACTIVE_ANNOTATION: "true"}}, "status": {"phase": "Ready"}});
        assert_eq!(next_phase(&inactive), Some(Phase::Inactive));
        let legacy = json!({"metadata": {"annotations": {LEGACY_INACTIVE_ANNOTATION: "true"}}, "status": {"phase": "Ready"}});
        assert_eq!(next_phase(&legacy), Some(Phase::Inactive));
        assert_eq!(
            next_phase(&json!({"status": {"phase": "Inactive"}})),
            Some(Phase::Ready)
        );
        let deleted = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Ready", "terminators": ["root:t"]}});
        assert_eq!(next_phase(&deleted), Some(Phase::Terminating));
        let done = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Terminating"}});
        assert_eq!(next_phase(&done), Some(Phase::Deleting));
        let deleting =
            json!({"metadata": {"deletionTimestamp": "x"}, "status": {"phase": "Deleting"}});
        assert_eq!(next_phase(&deleting), None);
    }

    #[test]
    fn entering_initializing_copies_spec_to_status() {
        let old = json!({"spec": {"initializers": ["root:universal"], "terminators": ["root:t"]}, "status": {"phase": "Scheduling"}});
        let mut new = old.clone();
        new["status"]["phase"] = json!("Initializing");
        admit_update(&mut new, &old);
        assert_eq!(new["status"]["initializers"], json!(["root:universal"]));
        assert_eq!(new["status"]["terminators"], json!(["root:t"]));
        assert_eq!(validate_update(&new, &old, &user()), Ok(()));
        let mut again = new.clone();
        again["status"]["initializers"] = json!([]);
        admit_update(&mut again, &new);
        assert_eq!(again["status"]["initializers"], json!([]));
    }

    #[test]
    fn initializers_only_shrink_while_initializing() {
        let old = initializing();
        let mut cleared = old.clone();
        assert!(remove_initializer(&mut cleared, "root:universal"));
        assert!(!remove_initializer(&mut cleared, "root:universal"));
        assert_eq!(validate_update(&cleared, &old, &user()), Ok(()));
        let mut grown = old.clone();
        grown["status"]["initializers"] = json!(["root:universal", "system:apibindings", "x:y"]);
        assert_eq!(
            validate_update(&grown, &old, &user()),
            Err(LogicalClusterError::InitializersGrew)
        );
        let mut early = old.clone();
        early["status"]["phase"] = json!("Ready");
        assert_eq!(
            validate_update(&early, &old, &user())
                .unwrap_err()
                .to_string(),
            "status.initializers is not empty"
        );
        let ready =
            json!({"spec": {"initializers": ["root:universal"]}, "status": {"phase": "Ready"}});
        let mut readded = ready.clone();
        readded["status"]["initializers"] = json!(["root:universal"]);
        assert_eq!(
            validate_update(&readded, &ready, &user()),
            Err(LogicalClusterError::InitializersImmutableAfterInitialization)
        );
        let mut spec = old.clone();
        spec["spec"]["initializers"] = json!([]);
        assert_eq!(
            validate_update(&spec, &old, &user())
                .unwrap_err()
                .to_string(),
            "spec.initializers is immutable"
        );
        let system = vec!["system:kcp:logical-cluster-admin".to_string()];
        assert_eq!(validate_update(&spec, &old, &system), Ok(()));
    }

    #[test]
    fn phases_only_move_forward_and_inactive_needs_ready() {
        let ready = json!({"status": {"phase": "Ready"}});
        let mut back = ready.clone();
        back["status"]["phase"] = json!("Initializing");
        assert_eq!(
            validate_update(&back, &ready, &user())
                .unwrap_err()
                .to_string(),
            r#"cannot transition from "Ready" to "Initializing""#
        );
        let mut inactive = ready.clone();
        inactive["metadata"] = json!({"annotations": {INACTIVE_ANNOTATION: "true"}});
        assert_eq!(validate_update(&inactive, &ready, &user()), Ok(()));
        let init = json!({"status": {"phase": "Initializing"}});
        let mut inactive_init = init.clone();
        inactive_init["metadata"] = json!({"annotations": {INACTIVE_ANNOTATION: "true"}});
        assert_eq!(
            validate_update(&inactive_init, &init, &user())
                .unwrap_err()
                .to_string(),
            r#"LogicalCluster can only be marked inactive in phase "Ready", but is in phase "Initializing""#
        );
        let mut owner = ready.clone();
        owner["spec"] = json!({"createdBy": {"username": "mallory"}});
        assert_eq!(
            validate_update(&owner, &ready, &user()),
            Err(LogicalClusterError::CreatedByImmutable)
        );
    }

    #[test]
    fn system_annotations_are_the_systems_alone() {
        let ready = json!({
            "metadata": {"name": "cluster", "annotations": {PATH_ANNOTATION: "root:mine", TYPE_ANNOTATION: "root:team", "team": "a"}},
            "status": {"phase": "Ready"},
        });
        let mut other = ready.clone();
        other["metadata"]["annotations"]["team"] = json!("b");
        assert_eq!(validate_update(&other, &ready, &user()), Ok(()));
        for (key, value) in [
            (PATH_ANNOTATION, json!("root:yours")),
            (TYPE_ANNOTATION, json!("root:organization")),
            (CLUSTER_ANNOTATION, json!("c0ffee")),
            (REQUIRED_GROUPS_ANNOTATION, json!("")),
        ] {
            let mut changed = ready.clone();
            changed["metadata"]["annotations"][key] = value;
            let refused = validate_update(&changed, &ready, &user()).unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!("modification of reserved annotation: \"{key}\"")
            );
            let system = ["system:masters".to_string()];
            assert_eq!(validate_update(&changed, &ready, &system), Ok(()));
        }
        let mut removed = ready.clone();
        removed["metadata"]["annotations"] = json!({"team": "a"});
        assert_eq!(
            validate_update(&removed, &ready, &user()),
            Err(LogicalClusterError::ReservedAnnotation(PATH_ANNOTATION))
        );
    }

    #[test]
    fn create_and_delete_are_guarded() {
        assert_eq!(validate_create(&user()), Err(LogicalClusterError::Create));
        assert_eq!(validate_create(&["system:masters".to_string()]), Ok(()));
        assert_eq!(
            validate_delete(&json!({"spec": {}}), &user())
                .unwrap_err()
                .to_string(),
            "LogicalCluster cannot be deleted"
        );
        assert_eq!(
            validate_delete(&json!({"spec": {"directlyDeletable": true}}), &user()),
            Ok(())
        );
    }

    #[test]
    fn lifecycle_labels_hash_the_name() {
        let (key, value) = initializer_label("root:universal");
        assert_eq!(key.len(), 63);
        assert!(key.starts_with(INITIALIZER_LABEL_PREFIX));
        assert_eq!(value.len(), 56);
        assert!(value.starts_with(&key[INITIALIZER_LABEL_PREFIX.len()..]));
        let (key, _) = terminator_label("root:universal");
        assert_eq!(key.len(), 63);
        assert_ne!(initializer_label("a:b").1, initializer_label("a:c").1);
    }

    #[test]
    fn metadata_follows_status() {
        let mut lc = initializing();
        lc["metadata"]["labels"] = json!({"initializer.internal.kcp.io/stale": "x", "keep": "me"});
        lc["metadata"]["annotations"] =
            json!({OWNER_ANNOTATION: r#"{"username":"alice","groups":["g"]}"#});
        assert!(sync_metadata(&mut lc));
        let labels = lc["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels[PHASE_LABEL_KEY], "Initializing");
        assert_eq!(labels["keep"], "me");
        assert!(!labels.contains_key("initializer.internal.kcp.io/stale"));
        assert!(labels.contains_key(&initializer_label("root:universal").0));
        assert!(!sync_metadata(&mut lc));
        lc["status"] = json!({"phase": "Ready"});
        assert!(sync_metadata(&mut lc));
        assert_eq!(
            lc["metadata"]["annotations"][OWNER_ANNOTATION],
            r#"{"username":"alice"}"#
        );
        assert_eq!(lc["metadata"]["labels"].as_object().unwrap().len(), 2);
    }

    const PHASE_LABEL_KEY: &str = crate::workspace::PHASE_LABEL;
}
