//! The maximal permission policy of APIExports (upstream's `04-maxpermissionpolicy` authorizer):
//! a request on a resource bound from an export with `maximalPermissionPolicy.local` is authorized
//! again in the export's logical cluster for the user and groups prefixed with
//! `apis.kcp.io:binding:` (a deep SubjectAccessReview there: that cluster's RBAC), on top of the
//! consumer's own authorization, so the provider caps what consumers may do. Refused, it is the
//! usual 403 naming the user as they asked, with upstream's reason
//! (`API export "<cluster>"|"<name>" policy: ...`). `system:masters` is never capped, as upstream's
//! always-allow group comes first.

use kcp_apimachinery::ApiError;
use kcp_apis::binding::MAXIMAL_PERMISSION_POLICY_PREFIX as PREFIX;
use kcp_registry::ClusterTarget;

use super::Resolved;
use crate::filters::authentication::rbac_user;
use crate::filters::authorization::attributes;

impl Resolved<'_> {
    /// Checks the request against the maximal permission policy of its bound type, if it has one.
    pub(super) async fn check_maximal_permission_policy(&self) -> Result<(), ApiError> {
        // Wildcard requests (`<resource>:<identity>`) are the provider's, never capped.
        let (Some(policy), ClusterTarget::One(_)) = (&self.rt.bound_policy, &self.request.cluster)
        else {
            return Ok(());
        };
        let user = rbac_user(&self.request.user);
        if user.in_group(kcp_rbac::MASTERS_GROUP) {
            return Ok(());
        }
        let asked = attributes(user, &self.request.info, &http::Method::GET, "");
        let mut prefixed = asked.clone();
        prefixed.user.name = format!("{PREFIX}{}", asked.user.name);
        prefixed.user.groups = asked
            .user
            .groups
            .iter()
            .map(|g| format!("{PREFIX}{g}"))
            .collect();
        let decision = self
            .scope
            .authorizer
            .decide_deep(&policy.cluster, &prefixed)
            .await?;
        if decision.is_allowed() {
            return Ok(());
        }
        let reason = format!(
            "API export {:?}|{:?} policy: {}",
            policy.cluster.as_str(),
            policy.export,
            decision.reason()
        );
        Err(asked.forbidden_error(&reason))
    }
}
