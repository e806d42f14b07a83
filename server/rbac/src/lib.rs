//! Kubernetes RBAC for one logical cluster, as pure functions of the RBAC objects (JSON values).
//!
//! Every logical cluster has its own Roles, ClusterRoles and bindings, so the server needs an
//! authorizer it can build per logical cluster from whatever the cluster stores, cheaply and
//! without I/O, and that answers exactly as kube-apiserver's RBAC authorizer would: users bring
//! their Kubernetes roles and tools (`kubectl auth can-i`) and expect the same answers and the same
//! denial messages. This crate is that authorizer ([`PolicyIndex`]), the default roles every
//! logical cluster starts with ([`bootstrap`]), and the escalation and bind checks that stop users
//! from granting more than they hold ([`escalation`]). Wiring (which objects, which caches, which
//! filter) is the API server's business.

mod aggregation;
mod attributes;
pub mod bootstrap;
pub mod escalation;
mod index;
mod layer;
mod policy;
mod rule;
mod scope;

pub use aggregation::{effective_rules, has_aggregation_rule};
pub use attributes::{
    AUTHENTICATED_GROUP, Attributes, Decision, MASTERS_GROUP, ResourceAttributes, Target,
    UNAUTHENTICATED_GROUP, User, service_account_groups, service_account_username,
};
pub use index::{HeldRules, PolicyError, PolicyIndex, RoleRef};
pub use policy::Policy;
pub use rule::PolicyRule;
pub use scope::{CLUSTER_NAME_EXTRA, SCOPES_EXTRA, as_seen_in, in_scope};
