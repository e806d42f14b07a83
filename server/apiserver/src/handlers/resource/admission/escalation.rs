//! RBAC's own guard: a user may only write a Role or ClusterRole whose permissions they hold (or
//! may `escalate`), and only bind a role whose permissions they hold (or may `bind`), judged by
//! the same policy layers that authorize their requests in this logical cluster. kube-apiserver
//! does this in the RBAC REST storage; here it wraps every write of the four RBAC types.

use kcp_apimachinery::{ApiError, meta};
use kcp_rbac::MASTERS_GROUP;
use kcp_rbac::escalation::{may_bind, may_create_role};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::filters::authentication::rbac_user;
use crate::handlers::resource::Resolved;
use kcp_controllers::policies::ClusterPolicy;
use kcp_rbac::escalation::RBAC_GROUP;
use kcp_registry::ClusterTarget;

/// The check for writes of one RBAC type by one user.
pub struct EscalationCheck {
    policy: Arc<ClusterPolicy>,
    user: kcp_rbac::User,
    kind: String,
    binding: bool,
    /// The namespace of the request (the body may not name it yet).
    namespace: Option<String>,
}

impl Resolved<'_> {
    /// The escalation check this write needs: `None` unless it writes an RBAC object.
    pub(super) async fn escalation_check(&self) -> Result<Option<EscalationCheck>, ApiError> {
        let rt = &self.rt;
        if rt.group != RBAC_GROUP {
            return Ok(None);
        }
        let ClusterTarget::One(cluster) = &self.request.cluster else {
            return Ok(None);
        };
        // system:masters may grant anything; don't build a policy to find that out.
        if self.request.user.groups.iter().any(|g| g == MASTERS_GROUP) {
            return Ok(None);
        }
        Ok(Some(EscalationCheck {
            policy: self.scope.authorizer.policies.policy(cluster).await?,
            user: rbac_user(&self.request.user),
            kind: rt.kind.clone(),
            binding: rt.kind.ends_with("Binding"),
            namespace: self.namespace().map(str::to_string),
        }))
    }
}

impl EscalationCheck {
    /// Refuses `new` (replacing `old`, if any) with kube's 403 when it grants more than allowed.
    pub(super) fn check(&self, new: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let mut new = new.clone();
        new["kind"] = json!(self.kind);
        if let Some(namespace) = &self.namespace {
            meta::metadata_mut(&mut new).insert("namespace".into(), json!(namespace));
        }
        let layers = self.policy.layers();
        let policy = layers.as_slice();
        let result = if self.binding {
            may_bind(policy, &self.user, &new, old)
        } else {
            may_create_role(policy, &self.user, &new, old)
        };
        result.map_err(|e| e.to_api_error())
    }
}
