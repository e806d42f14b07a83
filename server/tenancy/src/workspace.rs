//! Workspaces: admission, phases and the values the system writes on them.
//!
//! A Workspace is a user's handle on a logical cluster: created in its parent's cluster, typed,
//! owned by its creator, and later bound to a scheduled logical cluster (`spec.cluster`,
//! `spec.URL`) that only the system may set. These are the rules of upstream's
//! `tenancy.kcp.io/Workspace` and `tenancy.kcp.io/WorkspaceTypeExists` admission plugins and of
//! the workspace phase reconciler; every error is a 403 Forbidden with upstream's message.

use std::collections::BTreeMap;
use std::fmt;

use kcp_apimachinery::validation::is_dns1123_label;
use kcp_apimachinery::{ApiError, FieldError};
use serde_json::{Map, Value, json};

use crate::logical_cluster::{PATH_ANNOTATION, REQUIRED_GROUPS_ANNOTATION, TYPE_ANNOTATION};
use crate::paths::{Path, PathError};
use crate::types::{self, ResolvedType, TypeError, TypeRef};

pub const GROUP: &str = "tenancy.kcp.io";
pub const RESOURCE: &str = "workspaces";
/// The creator of a workspace, as JSON `UserInfo`.
pub const OWNER_ANNOTATION: &str = "experimental.tenancy.kcp.io/owner";
/// Mirrors `status.phase` on Workspaces and LogicalClusters.
pub const PHASE_LABEL: &str = "tenancy.kcp.io/phase";
/// Holds a Workspace until its LogicalCluster is gone.
pub const LOGICAL_CLUSTER_FINALIZER: &str = "core.kcp.io/logicalcluster";
/// The shard a workspace is scheduled to.
pub const SHARD_ANNOTATION: &str = "core.kcp.io/shard";
/// Deprecated: 8-character base36 SHA-224 of the shard name ([`crate::names::shard_hash`]).
pub const SHARD_HASH_ANNOTATION: &str = "internal.tenancy.kcp.io/shard";
/// The logical cluster name chosen for a workspace before its LogicalCluster exists.
pub const SCHEDULED_CLUSTER_ANNOTATION: &str = "internal.tenancy.kcp.io/cluster";
/// Shards annotated so are never picked by the scheduler.
pub const UNSCHEDULABLE_SHARD_ANNOTATION: &str = "experimental.core.kcp.io/unschedulable";

/// The phase of a Workspace or LogicalCluster (`LogicalClusterPhaseType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Scheduling,
    Initializing,
    Ready,
    Unavailable,
    Inactive,
    Terminating,
    Deleting,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Scheduling,
        Phase::Initializing,
        Phase::Ready,
        Phase::Unavailable,
        Phase::Inactive,
        Phase::Terminating,
        Phase::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Scheduling => "Scheduling",
            Phase::Initializing => "Initializing",
            Phase::Ready => "Ready",
            Phase::Unavailable => "Unavailable",
            Phase::Inactive => "Inactive",
            Phase::Terminating => "Terminating",
            Phase::Deleting => "Deleting",
        }
    }

    pub fn parse(value: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|phase| phase.as_str() == value)
    }

    /// `status.phase` of a Workspace or LogicalCluster; `None` when unset or unknown.
    pub fn of(object: &Value) -> Option<Phase> {
        object
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .and_then(Phase::parse)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The user creating a workspace, as authentication saw them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Creator {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Creator {
    /// The owner annotation value: Go's `json.Marshal` of `authenticationv1.UserInfo` (fields
    /// username, uid, groups, extra, each omitted when empty; `<`, `>`, `&` escaped as Go does), so
    /// that the value compares equal to upstream's byte for byte.
    pub fn owner_annotation(&self) -> String {
        let mut info = Map::new();
        if !self.username.is_empty() {
            info.insert("username".into(), json!(self.username));
        }
        if !self.uid.is_empty() {
            info.insert("uid".into(), json!(self.uid));
        }
        if !self.groups.is_empty() {
            info.insert("groups".into(), json!(self.groups));
        }
        if !self.extra.is_empty() {
            info.insert("extra".into(), json!(self.extra));
        }
        go_html_escape(&Value::Object(info).to_string())
    }

    /// Reads an owner annotation back; `None` when it is not a JSON object.
    pub fn from_owner_annotation(value: &str) -> Option<Creator> {
        let info: Value = serde_json::from_str(value).ok()?;
        let text = |key: &str| {
            info.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let strings = |value: &Value| -> Vec<String> {
            value
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        info.as_object()?;
        Some(Creator {
            username: text("username"),
            uid: text("uid"),
            groups: info.get("groups").map(strings).unwrap_or_default(),
            extra: info
                .get("extra")
                .and_then(Value::as_object)
                .map(|extra| extra.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
                .unwrap_or_default(),
        })
    }

    /// `spec.createdBy` of a LogicalCluster (`OwnerUserInfo`, empty fields omitted).
    pub fn created_by(&self) -> Value {
        let mut info = Map::new();
        if !self.username.is_empty() {
            info.insert("username".into(), json!(self.username));
        }
        if !self.groups.is_empty() {
            info.insert("groups".into(), json!(self.groups));
        }
        if !self.uid.is_empty() {
            info.insert("uid".into(), json!(self.uid));
        }
        if !self.extra.is_empty() {
            info.insert("extra".into(), json!(self.extra));
        }
        Value::Object(info)
    }
}

/// Go's `encoding/json` escapes these even inside strings; they never occur outside strings.
fn go_html_escape(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Why a Workspace write is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    #[error("spec.Cluster can only be set by system privileged users")]
    ClusterSet,
    #[error("spec.URL can only be set by system privileged users")]
    UrlSet,
    #[error("spec.cluster cannot be unset")]
    ClusterUnset,
    #[error("spec.cluster can only be changed by system privileged users")]
    ClusterChanged,
    #[error("spec.URL can only be changed by system privileged users")]
    UrlChanged,
    #[error("spec.type is immutable")]
    TypeImmutable,
    #[error("spec.cluster must be set for phase {0}")]
    ClusterRequired(Phase),
    #[error("spec.URL must be set for phase {0}")]
    UrlRequired(Phase),
    #[error("expected user annotation {OWNER_ANNOTATION}={0}")]
    OwnerMismatch(String),
    #[error("missing required groups annotation {REQUIRED_GROUPS_ANNOTATION}={0}")]
    RequiredGroupsMismatch(String),
    #[error("spec.mount.{0} must be set")]
    MountFieldRequired(&'static str),
    #[error("spec.mount.{0} is immutable")]
    MountFieldImmutable(&'static str),
    #[error("spec.type cannot be set for mounted workspaces")]
    TypeOnMount,
    #[error("annotation {TYPE_ANNOTATION} on LogicalCluster must be set")]
    ParentTypeMissing,
    #[error("annotation {TYPE_ANNOTATION} on LogicalCluster must be in the form of cluster:name")]
    ParentTypeMalformed,
    #[error("parent type cannot be resolved: {0}")]
    ParentTypeUnresolved(TypeError),
    #[error("spec.defaultChildWorkspaceType of workspace type {0} must be set")]
    NoDefaultChildType(String),
    #[error("spec.type.path must be set")]
    TypePathRequired,
    #[error("unable to use workspace type {0}: missing verb='use' permission on workspacetype")]
    UseDenied(String),
    #[error(transparent)]
    Type(#[from] TypeError),
    #[error(transparent)]
    Path(#[from] PathError),
}

impl WorkspaceError {
    /// The 403 admission answers with for the workspace `name`.
    pub fn forbidden(&self, name: &str) -> ApiError {
        ApiError::forbidden(GROUP, RESOURCE, name, &self.to_string())
    }
}

/// A Workspace create as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct CreateRequest<'a> {
    pub creator: &'a Creator,
    /// The creator is in `system:masters`.
    pub privileged: bool,
    /// The LogicalCluster of the cluster the workspace is created in.
    pub parent: &'a Value,
    /// That cluster's logical cluster name.
    pub parent_cluster: &'a str,
}

impl CreateRequest<'_> {
    fn parent_annotation(&self, key: &str) -> Option<&str> {
        annotation(self.parent, key)
    }

    /// The parent's canonical path (`kcp.io/path`, else its cluster name).
    fn parent_path(&self) -> Result<Path, PathError> {
        Path::parse(
            self.parent_annotation(PATH_ANNOTATION)
                .unwrap_or(self.parent_cluster),
        )
    }

    /// The parent's type and its aliases, from its `internal.tenancy.kcp.io/type` annotation.
    fn parent_type(
        &self,
        lookup: &impl Fn(&TypeRef) -> Option<Value>,
    ) -> Result<ResolvedType, WorkspaceError> {
        let annotation = self
            .parent_annotation(TYPE_ANNOTATION)
            .ok_or(WorkspaceError::ParentTypeMissing)?;
        let reference = TypeRef::parse(annotation);
        if reference.path.is_empty() {
            return Err(WorkspaceError::ParentTypeMalformed);
        }
        lookup(&reference)
            .map(|object| ResolvedType::new(object, &reference))
            .ok_or_else(|| {
                WorkspaceError::ParentTypeUnresolved(TypeError::NotFound(reference.to_string()))
            })
    }
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(key)?
        .as_str()
}

fn spec_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("spec")
        .and_then(|spec| spec.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn mount(object: &Value) -> Option<&Value> {
    object
        .get("spec")
        .and_then(|spec| spec.get("mount"))
        .filter(|mount| !mount.is_null())
}

fn spec_type(object: &Value) -> Option<TypeRef> {
    object
        .get("spec")
        .and_then(|spec| spec.get("type"))
        .and_then(TypeRef::from_json)
}

fn object_map<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut current = object;
    for key in path {
        let map = current.as_object_mut()?;
        current = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if current.is_null() {
            *current = Value::Object(Map::new());
        }
    }
    current.as_object_mut()
}

/// Mutating admission of a create: records the owner (unless privileged), copies the parent's
/// required groups, and (unless mounted) defaults `spec.type` from the parent type's
/// `defaultChildWorkspaceType`, resolves it to a fully qualified reference and adds the type's
/// `additionalWorkspaceLabels` the workspace does not set itself.
pub fn admit_create(
    workspace: &mut Value,
    request: &CreateRequest<'_>,
    lookup: &impl Fn(&TypeRef) -> Option<Value>,
) -> Result<(), WorkspaceError> {
    if let Some(annotations) = object_map(workspace, &["metadata", "annotations"]) {
        if !request.privileged {
            annotations.insert(
                OWNER_ANNOTATION.into(),
                json!(request.creator.owner_annotation()),
            );
        }
        if !annotations.contains_key(REQUIRED_GROUPS_ANNOTATION) || !request.privileged {
            match request.parent_annotation(REQUIRED_GROUPS_ANNOTATION) {
                Some(groups) => {
                    annotations.insert(REQUIRED_GROUPS_ANNOTATION.into(), json!(groups));
                }
                None => {
                    annotations.remove(REQUIRED_GROUPS_ANNOTATION);
                }
            }
        }
    }
    if mount(workspace).is_some() {
        return Ok(());
    }
    let reference = match spec_type(workspace) {
        Some(reference) => reference,
        None => {
            let parent_type = request.parent_type(lookup)?;
            parent_type.default_child().ok_or_else(|| {
                WorkspaceError::NoDefaultChildType(parent_type.reference.to_string())
            })?
        }
    };
    let resolved = types::resolve_reference(&request.parent_path()?, &reference, lookup)?;
    let path = if reference.path.is_empty() {
        resolved.reference.path.clone()
    } else {
        reference.path.clone()
    };
    if let Some(spec) = object_map(workspace, &["spec"]) {
        spec.insert(
            "type".into(),
            TypeRef::new(&path, &reference.name).to_json(),
        );
    }
    if let Some(labels) = object_map(workspace, &["metadata", "labels"]) {
        for (key, value) in resolved.additional_workspace_labels() {
            labels.entry(key).or_insert(Value::String(value));
        }
    }
    Ok(())
}

/// Validating admission of a create (after [`admit_create`]). `may_use` answers whether the
/// creator has verb `use` on `workspacetypes/<name>` in the logical cluster of a type
/// (`alias.cluster`, `alias.reference.name`), asked for every alias of the workspace's type.
pub fn validate_create(
    workspace: &Value,
    request: &CreateRequest<'_>,
    lookup: &impl Fn(&TypeRef) -> Option<Value>,
    may_use: &impl Fn(&ResolvedType) -> bool,
) -> Result<(), WorkspaceError> {
    if !spec_str(workspace, "cluster").is_empty() && !request.privileged {
        return Err(WorkspaceError::ClusterSet);
    }
    if !spec_str(workspace, "URL").is_empty() && !request.privileged {
        return Err(WorkspaceError::UrlSet);
    }
    if !request.privileged {
        let expected = request.creator.owner_annotation();
        if annotation(workspace, OWNER_ANNOTATION) != Some(expected.as_str()) {
            return Err(WorkspaceError::OwnerMismatch(expected));
        }
        let expected = request
            .parent_annotation(REQUIRED_GROUPS_ANNOTATION)
            .unwrap_or_default();
        if annotation(workspace, REQUIRED_GROUPS_ANNOTATION).unwrap_or_default() != expected {
            return Err(WorkspaceError::RequiredGroupsMismatch(expected.to_string()));
        }
    }
    if let Some(mount) = mount(workspace) {
        for field in ["kind", "name", "apiVersion"] {
            let set = mount
                .pointer(&format!("/ref/{field}"))
                .and_then(Value::as_str)
                .is_some_and(|value| !value.is_empty());
            if !set {
                return Err(WorkspaceError::MountFieldRequired(field));
            }
        }
        if !request.privileged && spec_type(workspace).is_some() {
            return Err(WorkspaceError::TypeOnMount);
        }
        return Ok(());
    }
    let reference = spec_type(workspace).ok_or(WorkspaceError::TypePathRequired)?;
    let resolved = types::resolve_reference(&request.parent_path()?, &reference, lookup)?;
    let aliases = types::resolve_aliases(&resolved, lookup)?;
    if reference.path.is_empty() {
        return Err(WorkspaceError::TypePathRequired);
    }
    if let Some(denied) = aliases.iter().find(|alias| !may_use(alias)) {
        return Err(WorkspaceError::UseDenied(denied.reference.to_string()));
    }
    let parent_type = request.parent_type(lookup)?;
    let parent_aliases = types::resolve_aliases(&parent_type, lookup)?;
    types::check_parent_and_child(
        &parent_aliases,
        &aliases,
        &parent_type.reference.to_string(),
        &reference.to_string(),
    )?;
    Ok(())
}

/// Validating admission of an update (spec and status).
pub fn validate_update(new: &Value, old: &Value, privileged: bool) -> Result<(), WorkspaceError> {
    match mount(old) {
        None => {
            let (old_cluster, new_cluster) = (spec_str(old, "cluster"), spec_str(new, "cluster"));
            if !old_cluster.is_empty() && new_cluster.is_empty() {
                return Err(WorkspaceError::ClusterUnset);
            }
            if old_cluster != new_cluster && !privileged {
                return Err(WorkspaceError::ClusterChanged);
            }
            if spec_str(old, "URL") != spec_str(new, "URL") && !privileged {
                return Err(WorkspaceError::UrlChanged);
            }
            if spec_type(old) != spec_type(new) {
                return Err(WorkspaceError::TypeImmutable);
            }
            if Phase::of(old) != Some(Phase::Ready) && Phase::of(new) == Some(Phase::Ready) {
                if new_cluster.is_empty() {
                    return Err(WorkspaceError::ClusterRequired(Phase::Ready));
                }
                if spec_str(new, "URL").is_empty() {
                    return Err(WorkspaceError::UrlRequired(Phase::Ready));
                }
            }
        }
        Some(old_mount) => {
            let new_mount = mount(new).unwrap_or(&Value::Null);
            for field in ["kind", "name", "namespace", "apiVersion"] {
                let pointer = format!("/ref/{field}");
                if old_mount.pointer(&pointer) != new_mount.pointer(&pointer) {
                    return Err(WorkspaceError::MountFieldImmutable(field));
                }
            }
            if !privileged && spec_type(new).is_some() {
                return Err(WorkspaceError::TypeOnMount);
            }
            if !privileged && spec_type(old) != spec_type(new) {
                return Err(WorkspaceError::TypeImmutable);
            }
        }
    }
    Ok(())
}

/// Errors for a workspace name: it becomes a path segment, so a DNS-1123 label.
pub fn validate_name(name: &str) -> Vec<FieldError> {
    is_dns1123_label(name)
        .into_iter()
        .map(|message| FieldError::invalid("metadata.name", json!(name), &message))
        .collect()
}

/// The canonical path of workspace `name` created in the parent cluster `parent`.
pub fn canonical_path(parent: &Value, parent_cluster: &str, name: &str) -> Result<Path, PathError> {
    Path::parse(annotation(parent, PATH_ANNOTATION).unwrap_or(parent_cluster))?.join(name)
}

/// `spec.URL`: the shard's external URL with `/clusters/<canonical path>` appended to its path.
pub fn url(external_url: &str, path: &Path) -> String {
    let authority_start = external_url.find("://").map_or(0, |i| i + 3);
    let (origin, base) = match external_url[authority_start..].find('/') {
        Some(slash) => external_url.split_at(authority_start + slash),
        None => (external_url, ""),
    };
    format!(
        "{origin}{}{}",
        base.trim_end_matches('/'),
        path.request_path()
    )
}

/// Sets the `tenancy.kcp.io/phase` label to `status.phase`; whether anything changed.
pub fn sync_phase_label(object: &mut Value) -> bool {
    let phase = object
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match object_map(object, &["metadata", "labels"]) {
        Some(labels) if labels.get(PHASE_LABEL).and_then(Value::as_str) != Some(&phase) => {
            labels.insert(PHASE_LABEL.into(), json!(phase));
            true
        }
        _ => false,
    }
}

/// The workspace phase reconciler: moves `status` along with its LogicalCluster (`None` when it
/// does not exist). Returns whether the workspace changed.
pub fn reconcile_status(workspace: &mut Value, logical_cluster: Option<&Value>) -> bool {
    if mount(workspace).is_some() {
        return false;
    }
    let before = workspace.get("status").cloned();
    let deleting = workspace.pointer("/metadata/deletionTimestamp").is_some();
    let lc_list = |field: &str| {
        logical_cluster
            .and_then(|lc| lc.pointer(&format!("/status/{field}")))
            .cloned()
            .unwrap_or_else(|| json!([]))
    };
    let set = |workspace: &mut Value, field: &str, value: Value| {
        if let Some(status) = object_map(workspace, &["status"]) {
            let empty = value.as_array().is_some_and(Vec::is_empty);
            if empty {
                status.remove(field);
            } else {
                status.insert(field.into(), value);
            }
        }
    };
    match Phase::of(workspace) {
        Some(Phase::Scheduling) | None => {
            if !spec_str(workspace, "URL").is_empty() && !spec_str(workspace, "cluster").is_empty()
            {
                set(workspace, "phase", json!(Phase::Initializing.as_str()));
            }
        }
        Some(Phase::Initializing) => {
            if let Some(lc) = logical_cluster {
                set(workspace, "terminators", lc_list("terminators"));
                if !matches!(Phase::of(lc), None | Some(Phase::Scheduling)) {
                    let initializers = lc_list("initializers");
                    let done = initializers.as_array().is_some_and(Vec::is_empty);
                    set(workspace, "initializers", initializers);
                    if done {
                        set(workspace, "phase", json!(Phase::Ready.as_str()));
                    }
                }
            }
        }
        Some(Phase::Ready | Phase::Terminating | Phase::Deleting) if deleting => {
            if logical_cluster.is_some() {
                let terminators = lc_list("terminators");
                let phase = if terminators.as_array().is_some_and(|t| !t.is_empty()) {
                    Phase::Terminating
                } else {
                    Phase::Deleting
                };
                set(workspace, "terminators", terminators);
                set(workspace, "phase", json!(phase.as_str()));
            }
        }
        Some(_) => {}
    }
    workspace.get("status").cloned() != before
}

/// The Workspace the home-workspace handler answers `GET workspaces/~` with, synthesized from the
/// home LogicalCluster (`cluster` is its logical cluster name).
pub fn home_workspace(logical_cluster: &Value, cluster: &str) -> Value {
    let status = |field: &str| {
        logical_cluster
            .pointer(&format!("/status/{field}"))
            .cloned()
    };
    let mut status_map = Map::new();
    for field in ["phase", "conditions", "initializers"] {
        if let Some(value) = status(field) {
            status_map.insert(field.into(), value);
        }
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(crate::logical_cluster::NAME));
    if let Some(created) = logical_cluster.pointer("/metadata/creationTimestamp") {
        metadata.insert("creationTimestamp".into(), created.clone());
    }
    json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "Workspace",
        "metadata": metadata,
        "spec": {"cluster": cluster, "URL": status("URL").unwrap_or_else(|| json!(""))},
        "status": status_map,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::{self, Options};
    use std::collections::HashMap;

    fn alice() -> Creator {
        Creator {
            username: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["team-a".into(), "system:authenticated".into()],
            extra: BTreeMap::new(),
        }
    }

    fn root_lookup() -> impl Fn(&TypeRef) -> Option<Value> {
        let map: HashMap<TypeRef, Value> = bootstrap::workspace_types(&Options::default())
            .into_iter()
            .map(|t| {
                (
                    TypeRef::new("root", t["metadata"]["name"].as_str().unwrap()),
                    t,
                )
            })
            .collect();
        move |reference: &TypeRef| map.get(reference).cloned()
    }

    fn org_parent() -> Value {
        json!({"metadata": {"name": "cluster", "annotations": {"kcp.io/path": "root:acme", "internal.tenancy.kcp.io/type": "root:organization"}}})
    }

    fn request<'a>(creator: &'a Creator, parent: &'a Value, privileged: bool) -> CreateRequest<'a> {
        CreateRequest {
            creator,
            privileged,
            parent,
            parent_cluster: "c0ffee",
        }
    }

    #[test]
    fn phases_round_trip() {
        for phase in Phase::ALL {
            assert_eq!(Phase::parse(phase.as_str()), Some(phase));
        }
        assert_eq!(Phase::parse("Running"), None);
        assert_eq!(
            Phase::of(&json!({"status": {"phase": "Ready"}})),
            Some(Phase::Ready)
        );
    }

    #[test]
    fn owner_annotation_is_gos_user_info_json() {
        assert_eq!(
            alice().owner_annotation(),
            r#"{"username":"alice","uid":"u-1","groups":["team-a","system:authenticated"]}"#
        );
        let mut extra = alice();
        extra.uid.clear();
        extra
            .extra
            .insert("scopes".into(), vec!["cluster:a&b".into()]);
        assert_eq!(
            extra.owner_annotation(),
            r#"{"username":"alice","groups":["team-a","system:authenticated"],"extra":{"scopes":["cluster:a\u0026b"]}}"#
        );
        assert_eq!(
            Creator::from_owner_annotation(&extra.owner_annotation()),
            Some(extra)
        );
        assert_eq!(Creator::from_owner_annotation("nope"), None);
        assert_eq!(
            alice().created_by(),
            json!({"username": "alice", "groups": ["team-a", "system:authenticated"], "uid": "u-1"})
        );
    }

    #[test]
    fn create_defaults_type_and_records_owner() {
        let creator = alice();
        let parent = json!({"metadata": {"name": "cluster", "annotations": {"kcp.io/path": "root", "internal.tenancy.kcp.io/type": "root:root", "authorization.kcp.io/required-groups": "team-a"}}});
        let mut ws = json!({"metadata": {"name": "acme"}, "spec": {}});
        let lookup = root_lookup();
        admit_create(&mut ws, &request(&creator, &parent, false), &lookup).unwrap();
        assert_eq!(
            ws["spec"]["type"],
            json!({"name": "organization", "path": "root"})
        );
        assert_eq!(
            ws["metadata"]["annotations"][OWNER_ANNOTATION],
            json!(creator.owner_annotation())
        );
        assert_eq!(
            ws["metadata"]["annotations"][REQUIRED_GROUPS_ANNOTATION],
            "team-a"
        );
        assert_eq!(
            validate_create(&ws, &request(&creator, &parent, false), &lookup, &|_| true),
            Ok(())
        );
        assert_eq!(
            validate_create(
                &ws,
                &request(&creator, &parent, false),
                &lookup,
                &|alias| alias.reference.name != "universal"
            ),
            Err(WorkspaceError::UseDenied("root:universal".into()))
        );
        assert_eq!(
            WorkspaceError::UseDenied("root:universal".into()).to_string(),
            "unable to use workspace type root:universal: missing verb='use' permission on workspacetype"
        );
    }

    #[test]
    fn relative_types_get_their_path_and_labels() {
        let creator = alice();
        let parent = org_parent();
        let mut custom = TypeRef::new("root:acme", "custom");
        let lookup = {
            let root = root_lookup();
            let own = json!({"metadata": {"name": "custom", "annotations": {"kcp.io/path": "root:acme"}}, "spec": {"additionalWorkspaceLabels": {"tier": "gold", "keep": "type"}, "extend": {"with": [{"name": "universal", "path": "root"}]}}});
            let at = custom.clone();
            move |reference: &TypeRef| {
                if *reference == at {
                    Some(own.clone())
                } else {
                    root(reference)
                }
            }
        };
        let mut ws = json!({"metadata": {"name": "x", "labels": {"keep": "mine"}}, "spec": {"type": {"name": "custom"}}});
        admit_create(&mut ws, &request(&creator, &parent, false), &lookup).unwrap();
        assert_eq!(ws["spec"]["type"], custom.to_json());
        assert_eq!(
            ws["metadata"]["labels"],
            json!({"keep": "mine", "tier": "gold"})
        );
        assert_eq!(
            validate_create(&ws, &request(&creator, &parent, false), &lookup, &|_| true),
            Ok(())
        );
        custom.path.clear();
        assert_eq!(custom.to_string(), "custom");
    }

    #[test]
    fn constraints_and_missing_defaults_are_forbidden() {
        let creator = alice();
        let parent = org_parent();
        let lookup = root_lookup();
        let mut team =
            json!({"metadata": {"name": "t"}, "spec": {"type": {"name": "team", "path": "root"}}});
        admit_create(&mut team, &request(&creator, &parent, false), &lookup).unwrap();
        assert_eq!(
            validate_create(&team, &request(&creator, &parent, false), &lookup, &|_| {
                true
            }),
            Ok(())
        );
        let mut root =
            json!({"metadata": {"name": "r"}, "spec": {"type": {"name": "root", "path": "root"}}});
        admit_create(&mut root, &request(&creator, &parent, false), &lookup).unwrap();
        let err = validate_create(&root, &request(&creator, &parent, false), &lookup, &|_| {
            true
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "workspace type root:root cannot have any parent"
        );
        let home_parent = json!({"metadata": {"annotations": {"kcp.io/path": "user:alice", "internal.tenancy.kcp.io/type": "root:home"}}});
        let mut org = json!({"metadata": {"name": "o"}, "spec": {"type": {"name": "organization", "path": "root"}}});
        admit_create(&mut org, &request(&creator, &home_parent, false), &lookup).unwrap();
        assert_eq!(
            validate_create(
                &org,
                &request(&creator, &home_parent, false),
                &lookup,
                &|_| true
            )
            .unwrap_err()
            .to_string(),
            "workspace type root:organization only allows [root:root] parent workspaces, but parent type root:home only implements [root:home root:universal]"
        );
        let untyped_parent = json!({"metadata": {"annotations": {"internal.tenancy.kcp.io/type": "root:universal"}}});
        let no_default = |r: &TypeRef| {
            if r.name == "universal" {
                Some(json!({"metadata": {"name": "universal"}, "spec": {}}))
            } else {
                None
            }
        };
        let mut ws = json!({"metadata": {"name": "w"}, "spec": {}});
        assert_eq!(
            admit_create(
                &mut ws,
                &request(&creator, &untyped_parent, false),
                &no_default
            )
            .unwrap_err()
            .to_string(),
            "spec.defaultChildWorkspaceType of workspace type root:universal must be set"
        );
        let bare = json!({"metadata": {}});
        assert_eq!(
            admit_create(&mut ws, &request(&creator, &bare, false), &lookup),
            Err(WorkspaceError::ParentTypeMissing)
        );
    }

    #[test]
    fn only_privileged_users_set_cluster_url_and_other_owners() {
        let creator = alice();
        let parent = org_parent();
        let lookup = root_lookup();
        let mut ws = json!({"metadata": {"name": "w"}, "spec": {"cluster": "abc"}});
        admit_create(&mut ws, &request(&creator, &parent, false), &lookup).unwrap();
        assert_eq!(
            validate_create(&ws, &request(&creator, &parent, false), &lookup, &|_| true),
            Err(WorkspaceError::ClusterSet)
        );
        assert_eq!(
            validate_create(&ws, &request(&creator, &parent, true), &lookup, &|_| true),
            Ok(())
        );
        ws["spec"]["cluster"] = json!("");
        ws["metadata"]["annotations"][OWNER_ANNOTATION] = json!("{\"username\":\"mallory\"}");
        let err = validate_create(&ws, &request(&creator, &parent, false), &lookup, &|_| true)
            .unwrap_err();
        assert_eq!(
            err,
            WorkspaceError::OwnerMismatch(creator.owner_annotation())
        );
        assert_eq!(err.forbidden("w").code, 403);
    }

    #[test]
    fn updates_keep_type_cluster_and_url() {
        let old = json!({"spec": {"type": {"name": "universal", "path": "root"}, "cluster": "abc", "URL": "https://h/clusters/root:w"}, "status": {"phase": "Initializing"}});
        let mut new = old.clone();
        new["status"]["phase"] = json!("Ready");
        assert_eq!(validate_update(&new, &old, false), Ok(()));
        new["spec"]["type"]["name"] = json!("team");
        assert_eq!(
            validate_update(&new, &old, true),
            Err(WorkspaceError::TypeImmutable)
        );
        let mut new = old.clone();
        new["spec"]["URL"] = json!("https://evil");
        assert_eq!(
            validate_update(&new, &old, false),
            Err(WorkspaceError::UrlChanged)
        );
        assert_eq!(validate_update(&new, &old, true), Ok(()));
        new["spec"]["cluster"] = json!("");
        assert_eq!(
            validate_update(&new, &old, true),
            Err(WorkspaceError::ClusterUnset)
        );
        let scheduling = json!({"spec": {"type": {"name": "universal", "path": "root"}}, "status": {"phase": "Scheduling"}});
        let mut ready = scheduling.clone();
        ready["status"]["phase"] = json!("Ready");
        assert_eq!(
            validate_update(&ready, &scheduling, true)
                .unwrap_err()
                .to_string(),
            "spec.cluster must be set for phase Ready"
        );
    }

    #[test]
    fn mounts_skip_types() {
        let creator = alice();
        let parent = org_parent();
        let lookup = root_lookup();
        let mut ws = json!({"metadata": {"name": "m"}, "spec": {"mount": {"ref": {"apiVersion": "x/v1", "kind": "K", "name": "n"}}}});
        admit_create(&mut ws, &request(&creator, &parent, false), &lookup).unwrap();
        assert!(ws["spec"].get("type").is_none());
        assert_eq!(
            validate_create(&ws, &request(&creator, &parent, false), &lookup, &|_| false),
            Ok(())
        );
        let mut changed = ws.clone();
        changed["spec"]["mount"]["ref"]["name"] = json!("other");
        assert_eq!(
            validate_update(&changed, &ws, true),
            Err(WorkspaceError::MountFieldImmutable("name"))
        );
    }

    #[test]
    fn urls_paths_and_names() {
        let path = Path::parse("root:acme:w").unwrap();
        assert_eq!(
            url("https://kcp.example:6443", &path),
            "https://kcp.example:6443/clusters/root:acme:w"
        );
        assert_eq!(
            url("https://kcp.example/", &path),
            "https://kcp.example/clusters/root:acme:w"
        );
        assert_eq!(
            url("https://kcp.example/shard-1/", &path),
            "https://kcp.example/shard-1/clusters/root:acme:w"
        );
        assert_eq!(
            canonical_path(&org_parent(), "c0ffee", "w").unwrap(),
            Path::parse("root:acme:w").unwrap()
        );
        assert_eq!(
            canonical_path(&json!({}), "c0ffee", "w").unwrap().as_str(),
            "c0ffee:w"
        );
        assert!(validate_name("team-a").is_empty());
        assert_eq!(validate_name("Team").len(), 1);
    }

    #[test]
    fn status_follows_the_logical_cluster() {
        let mut ws = json!({"metadata": {"name": "w"}, "spec": {"cluster": "abc", "URL": "https://h/clusters/root:w"}, "status": {"phase": "Scheduling"}});
        assert!(reconcile_status(&mut ws, None));
        assert_eq!(Phase::of(&ws), Some(Phase::Initializing));
        let lc = json!({"status": {"phase": "Initializing", "initializers": ["root:universal"]}});
        assert!(reconcile_status(&mut ws, Some(&lc)));
        assert_eq!(ws["status"]["initializers"], json!(["root:universal"]));
        assert_eq!(Phase::of(&ws), Some(Phase::Initializing));
        let lc = json!({"status": {"phase": "Ready"}});
        assert!(reconcile_status(&mut ws, Some(&lc)));
        assert_eq!(Phase::of(&ws), Some(Phase::Ready));
        assert!(ws["status"].get("initializers").is_none());
        assert!(!reconcile_status(&mut ws, Some(&lc)));
        ws["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let lc = json!({"status": {"phase": "Terminating", "terminators": ["root:t"]}});
        assert!(reconcile_status(&mut ws, Some(&lc)));
        assert_eq!(Phase::of(&ws), Some(Phase::Terminating));
        assert!(sync_phase_label(&mut ws));
        assert_eq!(ws["metadata"]["labels"][PHASE_LABEL], "Terminating");
        assert!(!sync_phase_label(&mut ws));
    }

    #[test]
    fn home_workspace_is_synthesized_from_the_logical_cluster() {
        let lc = json!({"metadata": {"name": "cluster", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Ready", "URL": "https://h/clusters/user:alice"}});
        let ws = home_workspace(&lc, "v1u4alow0iv9");
        assert_eq!(
            ws["spec"],
            json!({"cluster": "v1u4alow0iv9", "URL": "https://h/clusters/user:alice"})
        );
        assert_eq!(ws["status"]["phase"], "Ready");
        assert_eq!(ws["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
    }
}
