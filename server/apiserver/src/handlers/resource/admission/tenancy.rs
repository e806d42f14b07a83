//! kcp's tenancy admission (upstream's `tenancy.kcp.io/Workspace`, `WorkspaceTypeExists`,
//! `tenancy.kcp.io/WorkspaceType` and `core.kcp.io/LogicalCluster` plugins): the rules are
//! kcp-tenancy's; this module feeds them the parent's LogicalCluster and the WorkspaceTypes from
//! the tenancy index, and answers "may the creator `use` this type" with the authorizer of the
//! logical cluster holding the type. The object count limit annotation of a LogicalCluster is
//! reserved to privileged users, as upstream's `ReservedMetadata` plugin reserves it.

use std::collections::HashSet;

use kcp_admission::object_limit::MAX_OBJECTS_ANNOTATION;
use kcp_apimachinery::gofmt::quote;
use kcp_apimachinery::{ApiError, FieldError, meta};
use kcp_rbac::{Attributes, ResourceAttributes};
use kcp_tenancy::workspace::{self, CreateRequest};
use kcp_tenancy::{Creator, Phase, ResolvedType, TypeRef, logical_cluster, types};
use serde_json::Value;

use super::Admission;
use crate::filters::UserInfo;
use crate::filters::authentication::rbac_user;
use crate::handlers::resource::Resolved;
use kcp_registry::{ClusterTarget, LogicalClusterName};

/// When a full shard tells a scheduler to try again.
const FULL_RETRY_AFTER_SECONDS: u32 = 2;

pub(crate) struct WorkspaceWrite {
    cluster: LogicalClusterName,
    privileged: bool,
}

pub(crate) struct LogicalClusterWrite {
    cluster: LogicalClusterName,
    groups: Vec<String>,
}

pub(crate) struct WorkspaceTypeWrite {
    cluster: LogicalClusterName,
}

fn creator(user: &UserInfo) -> Creator {
    Creator {
        username: user.name.clone(),
        uid: user.uid.clone(),
        groups: user.groups.clone(),
        extra: user.extra.clone(),
    }
}

impl Resolved<'_> {
    /// The tenancy admission of a write of a tenancy type, if this is one.
    pub(super) fn tenancy_admission(&self) -> Option<Admission> {
        let ClusterTarget::One(cluster) = &self.request.cluster else {
            return None;
        };
        let cluster = cluster.clone();
        let user = &self.request.user;
        match (self.rt.group.as_str(), self.rt.plural.as_str()) {
            (workspace::GROUP, workspace::RESOURCE) => Some(Admission::Workspace(WorkspaceWrite {
                cluster,
                privileged: super::privileged(user),
            })),
            (logical_cluster::GROUP, logical_cluster::RESOURCE) => {
                Some(Admission::LogicalCluster(LogicalClusterWrite {
                    cluster,
                    groups: user.groups.clone(),
                }))
            }
            (workspace::GROUP, "workspacetypes") => {
                Some(Admission::WorkspaceType(WorkspaceTypeWrite { cluster }))
            }
            _ => None,
        }
    }
}

impl WorkspaceWrite {
    /// Defaults the type, records the owner, and checks type constraints and the `use` grant.
    pub(super) async fn admit_create(
        &self,
        r: &Resolved<'_>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        let name = meta::name(object).unwrap_or_default().to_string();
        let errors = workspace::validate_name(&name);
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                workspace::GROUP,
                "Workspace",
                &name,
                errors,
            ));
        }
        let index = &r.scope.tenancy;
        let Some(parent) = index.logical_cluster(&self.cluster) else {
            return Err(ApiError::forbidden(
                workspace::GROUP,
                workspace::RESOURCE,
                &name,
                &format!(
                    "workspaces can only be created in a workspace: logical cluster {} has no LogicalCluster",
                    self.cluster
                ),
            ));
        };
        if parent.phase() != Some(Phase::Ready) && parent.phase() != Some(Phase::Inactive) {
            return Err(ApiError::forbidden(
                workspace::GROUP,
                workspace::RESOURCE,
                &name,
                &format!(
                    "cannot create a workspace in workspace {:?} before it is Ready (phase {:?})",
                    index.path(&self.cluster),
                    parent.phase().map(Phase::as_str).unwrap_or_default()
                ),
            ));
        }
        let user = &r.request.user;
        let creator = creator(user);
        let parent = parent.object();
        let request = CreateRequest {
            creator: &creator,
            privileged: self.privileged,
            parent: &parent,
            parent_cluster: self.cluster.as_str(),
        };
        let lookup = |reference: &TypeRef| index.workspace_type(reference);
        workspace::admit_create(object, &request, &lookup).map_err(|e| e.forbidden(&name))?;
        let usable = self.usable_types(r, object, &lookup).await?;
        workspace::validate_create(object, &request, &lookup, &|alias: &ResolvedType| {
            usable.contains(&alias.reference.to_string())
        })
        .map_err(|e| e.forbidden(&name))
    }

    /// The aliases of the workspace's type the creator may `use` (asked in each type's cluster).
    async fn usable_types(
        &self,
        r: &Resolved<'_>,
        object: &Value,
        lookup: &impl Fn(&TypeRef) -> Option<Value>,
    ) -> Result<HashSet<String>, ApiError> {
        let mut usable = HashSet::new();
        let Some(reference) = object.pointer("/spec/type").and_then(TypeRef::from_json) else {
            return Ok(usable);
        };
        let index = &r.scope.tenancy;
        let Ok(parent_path) = kcp_tenancy::Path::parse(&index.path(&self.cluster)) else {
            return Ok(usable);
        };
        let Ok(resolved) = types::resolve_reference(&parent_path, &reference, lookup) else {
            return Ok(usable);
        };
        let Ok(aliases) = types::resolve_aliases(&resolved, lookup) else {
            return Ok(usable);
        };
        for alias in aliases {
            let Some(cluster) = index.resolve_with_copies(&alias.cluster) else {
                continue;
            };
            let attributes = Attributes::resource(
                rbac_user(&r.request.user),
                "use",
                ResourceAttributes {
                    api_group: workspace::GROUP.to_string(),
                    resource: "workspacetypes".to_string(),
                    name: alias.reference.name.clone(),
                    ..ResourceAttributes::default()
                },
            );
            // A type of another shard is authorized by the RBAC that shard replicated.
            let decision = match index.logical_cluster(&cluster) {
                Some(_) => {
                    r.scope
                        .authorizer
                        .decide(&ClusterTarget::One(cluster), &attributes)
                        .await?
                }
                None => {
                    r.scope
                        .authorizer
                        .decide_deep(&cluster, &attributes)
                        .await?
                }
            };
            if decision.is_allowed() {
                usable.insert(alias.reference.to_string());
            }
        }
        Ok(usable)
    }

    pub(super) fn admit_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        let name = meta::name(old).unwrap_or_default();
        workspace::validate_update(new, old, self.privileged).map_err(|e| e.forbidden(name))
    }
}

fn logical_cluster_forbidden(error: &logical_cluster::LogicalClusterError) -> ApiError {
    ApiError::forbidden(
        logical_cluster::GROUP,
        logical_cluster::RESOURCE,
        logical_cluster::NAME,
        &error.to_string(),
    )
}

impl LogicalClusterWrite {
    /// Only the system creates LogicalClusters; a shard full by `--max-logical-clusters` takes
    /// no new one (another shard's scheduler may have read a capacity that had not caught up):
    /// 429, which makes that scheduler place the workspace again.
    pub(super) fn admit_create(&self, r: &Resolved<'_>) -> Result<(), ApiError> {
        logical_cluster::validate_create(&self.groups)
            .map_err(|e| logical_cluster_forbidden(&e))?;
        let index = &r.scope.tenancy;
        let Some(max) = r.scope.max_logical_clusters else {
            return Ok(());
        };
        let count = index.logical_cluster_count();
        // One that exists already is the store's 409 (a retry must learn it exists).
        if count < max
            || self.cluster.as_str().starts_with("system:")
            || index.logical_cluster(&self.cluster).is_some()
        {
            return Ok(());
        }
        Err(ApiError::too_many_requests(
            &format!(
                "this shard is full ({count} of {max} logical clusters, --max-logical-clusters)"
            ),
            FULL_RETRY_AFTER_SECONDS,
        ))
    }

    pub(super) fn admit_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        logical_cluster::admit_update(new, old);
        self.check_admin_reserved(new, old)?;
        logical_cluster::validate_update(new, old, &self.groups)
            .map_err(|e| logical_cluster_forbidden(&e))
    }

    /// Only privileged users may set, change or remove the object count limit annotation.
    fn check_admin_reserved(&self, new: &Value, old: &Value) -> Result<(), ApiError> {
        let limit = |object: &Value| {
            object
                .pointer("/metadata/annotations")
                .and_then(|annotations| annotations.get(MAX_OBJECTS_ANNOTATION))
                .cloned()
        };
        if logical_cluster::is_privileged(&self.groups) || limit(new) == limit(old) {
            return Ok(());
        }
        Err(ApiError::forbidden(
            logical_cluster::GROUP,
            logical_cluster::RESOURCE,
            logical_cluster::NAME,
            &format!(
                "modification of admin-reserved annotation: {}",
                quote(MAX_OBJECTS_ANNOTATION)
            ),
        ))
    }

    pub(super) fn admit_delete(&self, current: &Value) -> Result<(), ApiError> {
        if self.cluster == LogicalClusterName::root() {
            return Err(ApiError::forbidden(
                logical_cluster::GROUP,
                logical_cluster::RESOURCE,
                logical_cluster::NAME,
                "the root logical cluster cannot be deleted",
            ));
        }
        logical_cluster::validate_delete(current, &self.groups)
            .map_err(|e| logical_cluster_forbidden(&e))
    }
}

impl WorkspaceTypeWrite {
    pub(super) fn admit(&self, object: &Value) -> Result<(), ApiError> {
        types::validate_workspace_type(object, self.cluster.as_str()).map_err(|e| {
            ApiError::invalid(
                workspace::GROUP,
                "WorkspaceType",
                meta::name(object).unwrap_or_default(),
                vec![FieldError::invalid("spec", Value::Null, &e.to_string())],
            )
        })
    }
}
