//! Escalation and bind checks: nobody grants more than they hold.
//!
//! RBAC would be pointless if anyone allowed to write Roles could write themselves a role with
//! every permission and bind it. Kubernetes therefore checks writes of roles and bindings beyond
//! plain authorization, and so do we, the same way: a role may be written by someone who already
//! holds every permission in it (where the role applies) or who may `escalate` roles; a binding by
//! someone who holds every permission of the role it refers to or who may `bind` that role. Only
//! `system:masters` skips the checks, and so do updates that touch nothing but garbage-collection
//! metadata (owner references, finalizers), so that controllers can clean up. Setting or changing
//! an `aggregationRule` needs full authority, since a selector can collect anything later.

use std::fmt;

use kcp_apimachinery::ApiError;
use serde_json::Value;
use thiserror::Error;

use crate::aggregation::has_aggregation_rule;
use crate::attributes::{Attributes, MASTERS_GROUP, ResourceAttributes, User};
use crate::index::{RoleRef, aggregate_errors};
use crate::policy::Policy;
use crate::rule::{PolicyRule, compact, quote_list};

/// The API group of RBAC objects.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Permissions a writer would grant without holding them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotHeld {
    pub user: String,
    pub groups: Vec<String>,
    /// The missing permissions, compacted as Kubernetes lists them.
    pub missing: Vec<PolicyRule>,
    /// Roles the writer's bindings refer to that do not exist.
    pub resolution_errors: Vec<String>,
}

impl fmt::Display for NotHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines: Vec<String> = self
            .missing
            .iter()
            .map(PolicyRule::compact_string)
            .collect();
        lines.sort();
        lines.dedup();
        write!(
            f,
            "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            self.user,
            quote_list(&self.groups),
            lines.join("\n")
        )?;
        if !self.resolution_errors.is_empty() {
            write!(
                f,
                "; resolution errors: [{}]",
                aggregate_errors(&self.resolution_errors)
            )?;
        }
        Ok(())
    }
}

/// Why a write of a role or binding would grant more than the writer holds.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Escalation {
    #[error("{0}")]
    NotHeld(Box<NotHeld>),
    #[error("must have cluster-admin privileges to use the aggregationRule")]
    AggregationRule,
    /// The binding refers to a role that does not exist (or of an unknown kind).
    #[error("{0}")]
    RoleRef(String),
}

/// A refused write of a role or binding, with the object it was about.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{cause}")]
pub struct EscalationError {
    /// `roles`, `clusterroles`, `rolebindings` or `clusterrolebindings`.
    pub resource: &'static str,
    pub name: String,
    pub cause: Escalation,
}

impl EscalationError {
    /// The 403 Status kube-apiserver answers with
    /// (`roles.rbac.authorization.k8s.io "r" is forbidden: user "bob" ...`).
    pub fn to_api_error(&self) -> ApiError {
        ApiError::forbidden(
            RBAC_GROUP,
            self.resource,
            &self.name,
            &self.cause.to_string(),
        )
    }
}

/// The write being checked: its kind decides the resource and scope.
struct Write<'a> {
    resource: &'static str,
    /// Empty for cluster-scoped kinds.
    namespace: &'a str,
    name: &'a str,
}

impl<'a> Write<'a> {
    fn of(object: &'a Value, namespaced: &'static str, cluster: &'static str) -> Write<'a> {
        let field = |name: &str| {
            object
                .pointer(&format!("/metadata/{name}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let is_cluster = object
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.starts_with("Cluster"));
        Write {
            resource: if is_cluster { cluster } else { namespaced },
            namespace: if is_cluster { "" } else { field("namespace") },
            name: field("name"),
        }
    }

    fn refuse(&self, cause: Escalation) -> EscalationError {
        EscalationError {
            resource: self.resource,
            name: self.name.to_string(),
            cause,
        }
    }

    /// Whether the writer is asking for `verb` on an RBAC resource (`escalate` a role kind, `bind`
    /// a role) in the write's namespace.
    fn authorized<P: Policy + ?Sized>(
        &self,
        policy: &P,
        user: &User,
        verb: &str,
        target: ResourceAttributes,
    ) -> bool {
        let attributes = Attributes::resource(
            user.clone(),
            verb,
            ResourceAttributes {
                namespace: self.namespace.to_string(),
                ..target
            },
        );
        policy.authorize(&attributes).is_allowed()
    }
}

/// Drops nulls, empty lists and empty objects, which Kubernetes' semantic equality does not tell
/// apart from absent fields.
fn without_empty(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, value)| (key.clone(), without_empty(value)))
                .filter(|(_, value)| match value {
                    Value::Null => false,
                    Value::Array(items) => !items.is_empty(),
                    Value::Object(fields) => !fields.is_empty(),
                    _ => true,
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_empty).collect()),
        other => other.clone(),
    }
}

/// Whether an update changes nothing but the metadata garbage collection and bookkeeping write
/// (owner references, finalizers, self link, managed fields).
fn only_gc_fields_changed(new: &Value, old: &Value) -> bool {
    let mut stomped = new.clone();
    if let Some(metadata) = stomped.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["ownerReferences", "finalizers", "selfLink", "managedFields"] {
            match old.pointer(&format!("/metadata/{field}")) {
                Some(value) => metadata.insert(field.to_string(), value.clone()),
                None => metadata.remove(field),
            };
        }
    }
    without_empty(&stomped) == without_empty(old)
}

/// `system:masters` skips the checks, and so does an update that touches only garbage-collection
/// metadata.
fn exempt(user: &User, new: &Value, old: Option<&Value>) -> bool {
    user.in_group(MASTERS_GROUP) || old.is_some_and(|old| only_gc_fields_changed(new, old))
}

/// Everything: what setting an aggregation rule requires.
fn full_authority() -> [PolicyRule; 2] {
    let all = || vec!["*".to_string()];
    [
        PolicyRule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: all(),
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// Refuses when the user does not hold every permission of `rules` at the scope of `namespace`
/// (cluster-wide bindings always count; RoleBindings of `namespace` when it is set).
fn confirm_no_escalation<P: Policy + ?Sized>(
    policy: &P,
    user: &User,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), Escalation> {
    let held = policy.rules_for(user, namespace);
    let missing: Vec<PolicyRule> = rules
        .iter()
        .flat_map(PolicyRule::breakdown)
        .filter(|wanted| !held.rules.iter().any(|rule| rule.covers(wanted)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Escalation::NotHeld(Box::new(NotHeld {
        user: user.name.clone(),
        groups: user.groups.clone(),
        missing: compact(&missing),
        resolution_errors: held.errors,
    })))
}

/// May `user` create (`old` = `None`) or update a Role or ClusterRole to `role`? The object's
/// `kind` tells Roles from ClusterRoles.
pub fn may_create_role<P: Policy + ?Sized>(
    policy: &P,
    user: &User,
    role: &Value,
    old: Option<&Value>,
) -> Result<(), EscalationError> {
    let write = Write::of(role, "roles", "clusterroles");
    if exempt(user, role, old) {
        return Ok(());
    }
    // A create names no object in its URL, so only an update can match an escalate rule that is
    // restricted to resource names.
    let escalate = ResourceAttributes {
        api_group: RBAC_GROUP.to_string(),
        resource: write.resource.to_string(),
        name: if old.is_some() { write.name } else { "" }.to_string(),
        ..ResourceAttributes::default()
    };
    if write.authorized(policy, user, "escalate", escalate) {
        return Ok(());
    }
    let rules = PolicyRule::list_from_json(role);
    confirm_no_escalation(policy, user, write.namespace, &rules)
        .map_err(|cause| write.refuse(cause))?;
    let aggregates = has_aggregation_rule(role) || old.is_some_and(has_aggregation_rule);
    if write.resource == "clusterroles"
        && aggregates
        && confirm_no_escalation(policy, user, "", &full_authority()).is_err()
    {
        return Err(write.refuse(Escalation::AggregationRule));
    }
    Ok(())
}

/// May `user` create (`old` = `None`) or update a RoleBinding or ClusterRoleBinding to `binding`?
/// Yes if they may `bind` the referenced role (in the binding's namespace) or already hold all its
/// permissions there.
pub fn may_bind<P: Policy + ?Sized>(
    policy: &P,
    user: &User,
    binding: &Value,
    old: Option<&Value>,
) -> Result<(), EscalationError> {
    let write = Write::of(binding, "rolebindings", "clusterrolebindings");
    if exempt(user, binding, old) {
        return Ok(());
    }
    let role_ref = RoleRef::of_binding(binding);
    let role_resource = match role_ref.kind.as_str() {
        "ClusterRole" => Some("clusterroles"),
        "Role" => Some("roles"),
        _ => None,
    };
    if let Some(resource) = role_resource {
        let bind = ResourceAttributes {
            api_group: role_ref.api_group.clone(),
            resource: resource.to_string(),
            name: role_ref.name.clone(),
            ..ResourceAttributes::default()
        };
        if write.authorized(policy, user, "bind", bind) {
            return Ok(());
        }
    }
    let rules = policy
        .role_ref_rules(&role_ref, write.namespace)
        .map_err(|error| write.refuse(Escalation::RoleRef(error)))?;
    confirm_no_escalation(policy, user, write.namespace, &rules)
        .map_err(|cause| write.refuse(cause))
}
