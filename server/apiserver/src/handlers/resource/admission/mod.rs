//! Admission: the checks (and defaults) a write of some types needs beyond their schema, because
//! they depend on who writes and on other objects: RBAC's escalation checks ([`escalation`]) and
//! kcp's tenancy rules for Workspaces, LogicalClusters and WorkspaceTypes ([`tenancy`]), and the
//! rules of APIResourceSchemas, APIExports, APIBindings and the CRDs beside them ([`apis`]).
//!
//! The asynchronous part (reading the writer's policy, asking the authorizer about types) runs
//! before the write; what remains is synchronous, so it can also run inside the store's update
//! loop against each state it retries on.

mod apis;
mod escalation;
mod tenancy;

use kcp_apimachinery::ApiError;
use serde_json::Value;

use super::Resolved;
use escalation::EscalationCheck;

/// The admission of one write.
pub(super) enum Admission {
    None,
    Escalation(EscalationCheck),
    Workspace(tenancy::WorkspaceWrite),
    LogicalCluster(tenancy::LogicalClusterWrite),
    WorkspaceType(tenancy::WorkspaceTypeWrite),
    Apis(apis::ApisWrite),
}

impl Resolved<'_> {
    /// What this request's writes must pass.
    pub(super) async fn admission(&self) -> Result<Admission, ApiError> {
        if let Some(check) = self.escalation_check().await? {
            return Ok(Admission::Escalation(check));
        }
        if let Some(tenancy) = self.tenancy_admission() {
            return Ok(tenancy);
        }
        Ok(self.apis_admission().await?.unwrap_or(Admission::None))
    }

    /// Admits a new object (mutating it where admission defaults fields).
    pub(super) async fn admit_create(
        &self,
        admission: &Admission,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        match admission {
            Admission::None => Ok(()),
            Admission::Escalation(check) => check.check(object, None),
            Admission::Workspace(write) => write.admit_create(self, object).await,
            Admission::LogicalCluster(write) => write.admit_create(self),
            Admission::WorkspaceType(write) => write.admit(object),
            Admission::Apis(write) => write.admit_create(self, object).await,
        }
    }
}

impl Resolved<'_> {
    /// Admits the deletion of the object `name` (read first only for types that need it).
    pub(super) async fn admit_delete(&self, name: &str) -> Result<(), ApiError> {
        let admission = self.admission().await?;
        if matches!(admission, Admission::LogicalCluster(_)) {
            let current = self
                .scope
                .store
                .get(&self.rt, self.location()?, name)
                .await?;
            admission.admit_delete(&current.object)?;
        }
        Ok(())
    }
}

impl Admission {
    /// Admits an update of `old` to `new` (mutating `new` where admission does).
    pub(super) fn admit_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        match self {
            Admission::None => Ok(()),
            Admission::Escalation(check) => check.check(new, Some(old)),
            Admission::Workspace(write) => write.admit_update(new, old),
            Admission::LogicalCluster(write) => write.admit_update(new, old),
            Admission::WorkspaceType(write) => write.admit(new),
            Admission::Apis(write) => write.admit_update(new, old),
        }
    }

    /// Admits the deletion of `current`.
    pub(super) fn admit_delete(&self, current: &Value) -> Result<(), ApiError> {
        match self {
            Admission::LogicalCluster(write) => write.admit_delete(current),
            _ => Ok(()),
        }
    }
}

/// Whether `user` is in `system:masters`, whom admission lets do what it refuses others.
fn privileged(user: &kcp_authn::UserInfo) -> bool {
    user.groups.iter().any(|g| g == kcp_rbac::MASTERS_GROUP)
}

/// The authorizer as kcp-admission asks it: about the logical cluster being written to.
struct ClusterAuthorizer<'a> {
    authorizer: &'a crate::filters::authorization::Authorizer,
    cluster: &'a kcp_registry::ClusterTarget,
}

impl kcp_admission::sources::Authorizer for ClusterAuthorizer<'_> {
    fn allowed<'a>(
        &'a self,
        user: &'a kcp_authn::UserInfo,
        access: kcp_admission::sources::Access<'a>,
    ) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(async move {
            let attributes = kcp_rbac::Attributes::resource(
                crate::filters::authentication::rbac_user(user),
                access.verb,
                kcp_rbac::ResourceAttributes {
                    api_group: access.group.to_string(),
                    resource: access.resource.to_string(),
                    name: access.name.to_string(),
                    ..Default::default()
                },
            );
            matches!(
                self.authorizer.decide(self.cluster, &attributes).await,
                Ok(kcp_rbac::Decision::Allow(_))
            )
        })
    }
}

impl Resolved<'_> {
    /// The admission chain of this request's writes (kcp-admission): policies, webhooks, quota
    /// and CSR rules of the request's logical cluster. `options_kind` names the write's options
    /// (`CreateOptions`, `UpdateOptions`, `PatchOptions`, `DeleteOptions`) as AdmissionReviews
    /// carry them.
    pub(super) fn chain(
        &self,
        options_kind: &str,
        dry_run: bool,
    ) -> kcp_admission::chain::RequestAdmission<'_> {
        let mut options = serde_json::json!({"kind": options_kind, "apiVersion": "meta.k8s.io/v1"});
        if dry_run {
            options["dryRun"] = serde_json::json!(["All"]);
        }
        if let Some(manager) = self.request.query.get("fieldManager") {
            options["fieldManager"] = serde_json::json!(manager);
        }
        self.scope.admission.for_request(
            &self.request.user,
            Some(options),
            Box::new(ClusterAuthorizer {
                authorizer: self.scope.authorizer,
                cluster: &self.request.cluster,
            }),
        )
    }
}
