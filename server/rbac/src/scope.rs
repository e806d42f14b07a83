//! Identities from another logical cluster: who a user is for the RBAC of a cluster it does not
//! belong to.
//!
//! Upstream kcp (its fork of Kubernetes' RBAC validation, `IsInScope` and `EffectiveGroups`, and
//! the "Cross-Workspace" section of its authorizer docs): a service-account token names the
//! logical cluster it was issued in (extra [`CLUSTER_NAME_EXTRA`]), and a user can be scoped to
//! clusters (extra [`SCOPES_EXTRA`], `cluster:<name>` entries, every value must name the
//! cluster). Such a user is still authenticated everywhere, but in any other cluster the
//! authorizers see it only as `system:anonymous` in `system:authenticated` and
//! `system:cluster:<origin>` for each cluster it comes from: a binding there to the service
//! account, its namespace's groups or `system:serviceaccounts` does not apply, one to
//! `system:authenticated` or to `system:cluster:<origin>` does.

use crate::attributes::{AUTHENTICATED_GROUP, User};

/// Extra key naming the logical cluster a service account lives in (kcp's fork of the
/// service-account authenticator attaches it).
pub const CLUSTER_NAME_EXTRA: &str = "authentication.kubernetes.io/cluster-name";

/// Extra key limiting a user to some logical clusters (`cluster:<name>`, comma-separated), as
/// impersonation in kcp attaches it.
pub const SCOPES_EXTRA: &str = "authentication.kcp.io/scopes";

/// The user name a foreign identity has for the authorizers.
const FOREIGN_USER: &str = "system:anonymous";

/// The group of every identity from logical cluster `<name>` outside it.
const CLUSTER_GROUP_PREFIX: &str = "system:cluster:";

/// Whether `user` belongs to logical cluster `cluster`: not a service account of another cluster,
/// and every scope value (if any) names `cluster`.
pub fn in_scope(user: &User, cluster: &str) -> bool {
    if let Some(origins) = user.extra.get(CLUSTER_NAME_EXTRA)
        && !origins.iter().any(|origin| origin == cluster)
    {
        return false;
    }
    let Some(scopes) = user.extra.get(SCOPES_EXTRA) else {
        return true;
    };
    scopes.iter().all(|value| {
        value
            .split(',')
            .filter_map(|scope| scope.trim().strip_prefix("cluster:"))
            .any(|scoped| scoped == cluster)
    })
}

/// `user` as the authorizers of logical cluster `cluster` see it: unchanged when it belongs
/// there, else the foreign identity (`system:anonymous` in `system:authenticated` and
/// `system:cluster:<origin>`), its extras kept.
pub fn as_seen_in(user: &User, cluster: &str) -> Option<User> {
    if in_scope(user, cluster) {
        return None;
    }
    let origins = user.extra.get(CLUSTER_NAME_EXTRA).into_iter().flatten();
    let groups = std::iter::once(AUTHENTICATED_GROUP.to_owned())
        .chain(origins.map(|origin| format!("{CLUSTER_GROUP_PREFIX}{origin}")))
        .collect();
    Some(User {
        name: FOREIGN_USER.to_owned(),
        groups,
        extra: user.extra.clone(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn with_extra(key: &str, values: &[&str]) -> User {
        User {
            name: "system:serviceaccount:default:robot".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:default".into(),
                AUTHENTICATED_GROUP.into(),
            ],
            extra: BTreeMap::from([(
                key.to_owned(),
                values.iter().map(|v| v.to_string()).collect(),
            )]),
        }
    }

    #[test]
    fn a_service_account_is_itself_only_in_its_own_cluster() {
        let robot = with_extra(CLUSTER_NAME_EXTRA, &["abc"]);
        assert!(as_seen_in(&robot, "abc").is_none());
        let foreign = as_seen_in(&robot, "xyz").unwrap();
        assert_eq!(foreign.name, "system:anonymous");
        assert_eq!(
            foreign.groups,
            ["system:authenticated", "system:cluster:abc"]
        );
    }

    #[test]
    fn users_without_origin_or_scope_are_everywhere_themselves() {
        let alice = User::new("alice", &["devs"]);
        assert!(as_seen_in(&alice, "abc").is_none());
    }

    #[test]
    fn every_scope_value_must_name_the_cluster() {
        let scoped = with_extra(SCOPES_EXTRA, &["cluster:abc,cluster:def", "cluster:abc"]);
        assert!(in_scope(&scoped, "abc"));
        assert!(!in_scope(&scoped, "def"));
        let foreign = as_seen_in(&scoped, "def").unwrap();
        assert_eq!(foreign.groups, ["system:authenticated"]);
    }
}
