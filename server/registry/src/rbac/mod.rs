//! `rbac.authorization.k8s.io/v1`: Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.
//!
//! Every logical cluster stores its own RBAC objects, and users write them with the usual tools
//! (`kubectl create role`, `kubectl create rolebinding --clusterrole=edit`, Helm charts), so the
//! four types accept, default and refuse exactly what kube-apiserver does, and print the same
//! columns. What a stored object grants, and who may write one, is not decided here: the
//! authorizer and the escalation checks of the write path use `kcp-rbac` for that.

mod bindings;
mod roles;

use super::{ResourceType, Strategy};

/// The API group of the four types.
const GROUP: &str = "rbac.authorization.k8s.io";

pub fn roles() -> ResourceType {
    rbac_type("Role", "roles", true, roles::strategy(true))
}

pub fn cluster_roles() -> ResourceType {
    rbac_type("ClusterRole", "clusterroles", false, roles::strategy(false))
}

pub fn role_bindings() -> ResourceType {
    rbac_type(
        "RoleBinding",
        "rolebindings",
        true,
        bindings::strategy(true),
    )
}

pub fn cluster_role_bindings() -> ResourceType {
    rbac_type(
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        bindings::strategy(false),
    )
}

fn rbac_type(
    kind: &str,
    plural: &str,
    namespaced: bool,
    strategy: Box<dyn Strategy>,
) -> ResourceType {
    super::resource(GROUP, kind, plural, namespaced, &[], strategy)
}
