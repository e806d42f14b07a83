//! The RBAC policy of one logical cluster, indexed so that authorizing a request costs a few hash
//! lookups and a handful of rule checks, whatever the size of the policy.
//!
//! Everything that does not depend on the request is done once, when the index is built: roles get
//! their effective rules (aggregation resolved), bindings get their role resolved, and the rules a
//! binding gives are filed under each user or group it names (service accounts under their user
//! name), per scope (cluster-wide or one namespace), by the resource each rule names. A request
//! then looks up its user and groups at cluster scope and in its namespace, and checks only the
//! rules filed under its resource or under `*`: a group bound a thousand times costs no more than
//! the rules of those bindings that could match. The index is immutable; a changed policy is a new
//! index.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;
use thiserror::Error;

use crate::attributes::{Attributes, Decision, Target, User, service_account_username};
use crate::layer;
use crate::rule::PolicyRule;

/// Why RBAC objects cannot be indexed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    #[error("{0:?} is not an RBAC kind (Role, ClusterRole, RoleBinding, ClusterRoleBinding)")]
    UnknownKind(String),
}

/// A binding's `roleRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleRef {
    pub api_group: String,
    /// `ClusterRole` or `Role`.
    pub kind: String,
    pub name: String,
}

impl RoleRef {
    /// The `roleRef` of a binding object.
    pub fn of_binding(binding: &Value) -> RoleRef {
        let field = |name: &str| {
            binding
                .pointer(&format!("/roleRef/{name}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        RoleRef {
            api_group: field("apiGroup"),
            kind: field("kind"),
            name: field("name"),
        }
    }

    /// Kubernetes' error for a reference to a role that does not exist.
    pub fn not_found(&self) -> String {
        match self.kind.as_str() {
            "ClusterRole" => format!(
                "clusterrole.rbac.authorization.k8s.io {:?} not found",
                self.name
            ),
            "Role" => format!("role.rbac.authorization.k8s.io {:?} not found", self.name),
            other => format!("unsupported role reference kind: {other:?}"),
        }
    }
}

/// Rules a user holds through every binding that names them, and the errors met on the way
/// (bindings whose role does not exist).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldRules {
    pub rules: Vec<PolicyRule>,
    pub errors: Vec<String>,
}

/// Joins errors as Kubernetes' error aggregate prints them: one as is, several de-duplicated in
/// brackets.
pub(crate) fn aggregate_errors(errors: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::new();
    for error in errors {
        if !unique.contains(&error.as_str()) {
            unique.push(error);
        }
    }
    match unique.as_slice() {
        [single] => single.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// One binding: what it is (for reasons), its subjects (described), and its role.
#[derive(Debug)]
struct Binding {
    /// `ClusterRoleBinding "name" of ClusterRole "role"` or `RoleBinding "name/ns" of Role "role"`.
    description: String,
    subjects: Vec<String>,
    role: Result<usize, String>,
}

/// A subject of a binding: which binding (bindings are numbered cluster-wide first, then
/// namespaced, each by name) and which of its subjects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    binding: usize,
    subject: usize,
}

/// One rule a grant gives: the rule `rule` of role `role`. Ordered like Kubernetes visits them:
/// by binding, then rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    grant: Grant,
    role: usize,
    rule: usize,
}

/// Pushes unless the candidate was just pushed (a rule naming `pods` and `pods/log` is filed
/// once under `pods`).
fn push_once(bucket: &mut Vec<Candidate>, candidate: Candidate) {
    if bucket.last() != Some(&candidate) {
        bucket.push(candidate);
    }
}

/// Everything bindings give one user or group in one scope. Rules are filed by the resource they
/// name (without subresource), so a request only checks rules that could match it. Every list is
/// in binding order because bindings are filed in that order.
#[derive(Debug, Default)]
struct Filed {
    grants: Vec<Grant>,
    /// Grants whose role does not exist.
    broken: Vec<Grant>,
    by_resource: HashMap<String, Vec<Candidate>>,
    /// Rules naming `*` or `*/<subresource>`.
    any_resource: Vec<Candidate>,
    paths: Vec<Candidate>,
}

impl Filed {
    fn add(&mut self, grant: Grant, role: &Result<usize, String>, rules: &[Vec<PolicyRule>]) {
        self.grants.push(grant);
        let Ok(role) = *role else {
            self.broken.push(grant);
            return;
        };
        for (number, rule) in rules[role].iter().enumerate() {
            let candidate = Candidate {
                grant,
                role,
                rule: number,
            };
            if !rule.non_resource_urls.is_empty() {
                self.paths.push(candidate);
            }
            for resource in &rule.resources {
                let base = resource
                    .split_once('/')
                    .map_or(resource.as_str(), |(base, _)| base);
                let bucket = match base {
                    "*" => &mut self.any_resource,
                    base => self.by_resource.entry(base.to_string()).or_default(),
                };
                push_once(bucket, candidate);
            }
        }
    }

    /// The rules that could grant the request, as at most two runs in binding order.
    fn candidates(&self, target: &Target) -> [&[Candidate]; 2] {
        match target {
            Target::Resource(r) => [
                self.by_resource
                    .get(&r.resource)
                    .map_or(&[][..], Vec::as_slice),
                &self.any_resource,
            ],
            Target::NonResource { .. } => [&self.paths, &[]],
        }
    }
}

/// What bindings of one scope (cluster-wide, or one namespace) give, by user and by group.
#[derive(Debug, Default)]
struct SubjectIndex {
    users: HashMap<String, Filed>,
    groups: HashMap<String, Filed>,
}

impl SubjectIndex {
    fn for_user<'a>(&'a self, user: &'a User) -> impl Iterator<Item = &'a Filed> {
        let groups = user
            .groups
            .iter()
            .filter_map(|group| self.groups.get(group));
        self.users.get(&user.name).into_iter().chain(groups)
    }
}

/// The RBAC policy of one logical cluster.
#[derive(Debug, Default)]
pub struct PolicyIndex {
    /// Effective rules of every role, addressed by the maps below.
    rules: Vec<Vec<PolicyRule>>,
    cluster_roles: HashMap<String, usize>,
    roles: HashMap<String, HashMap<String, usize>>,
    bindings: Vec<Binding>,
    cluster_grants: SubjectIndex,
    namespace_grants: HashMap<String, SubjectIndex>,
}

fn meta<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|metadata| metadata.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// RBAC objects by kind, keyed so that iteration has a stable order (namespace, then name, where
/// Kubernetes uses its cache's order) and a later object replaces an earlier one of the same key.
#[derive(Default)]
struct Sorted<'a> {
    cluster_roles: BTreeMap<&'a str, &'a Value>,
    roles: BTreeMap<(&'a str, &'a str), &'a Value>,
    cluster_role_bindings: BTreeMap<&'a str, &'a Value>,
    role_bindings: BTreeMap<(&'a str, &'a str), &'a Value>,
}

impl<'a> Sorted<'a> {
    fn of(objects: impl IntoIterator<Item = &'a Value>) -> Result<Sorted<'a>, PolicyError> {
        let mut sorted = Sorted::default();
        for object in objects {
            let key = (meta(object, "namespace"), meta(object, "name"));
            match object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "ClusterRole" => sorted.cluster_roles.insert(key.1, object),
                "Role" => sorted.roles.insert(key, object),
                "ClusterRoleBinding" => sorted.cluster_role_bindings.insert(key.1, object),
                "RoleBinding" => sorted.role_bindings.insert(key, object),
                other => return Err(PolicyError::UnknownKind(other.to_string())),
            };
        }
        Ok(sorted)
    }

    /// The ClusterRoles the bindings refer to.
    fn referenced_cluster_roles(&self) -> BTreeSet<&'a str> {
        let bindings = self.cluster_role_bindings.values();
        bindings
            .chain(self.role_bindings.values())
            .filter(|binding| {
                binding.pointer("/roleRef/kind").and_then(Value::as_str) == Some("ClusterRole")
            })
            .filter_map(|binding| binding.pointer("/roleRef/name").and_then(Value::as_str))
            .collect()
    }
}

impl PolicyIndex {
    /// Indexes Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (told apart by `kind`).
    /// An object replaces an earlier one of the same kind, namespace and name, so the default
    /// policy can come first and the stored objects after it.
    pub fn build<'a>(
        objects: impl IntoIterator<Item = &'a Value>,
    ) -> Result<PolicyIndex, PolicyError> {
        PolicyIndex::build_layered(objects, &[])
    }

    /// Indexes the RBAC objects of one logical cluster layered over kcp's bootstrap policy, whose
    /// raw objects are `base` (those stored in `system:admin`); only `base`'s ClusterRoles matter.
    /// As in kcp, a ClusterRole the cluster does not define resolves to the base role of that name
    /// (aggregation resolved), the cluster's own ClusterRoles replace base roles of their name and
    /// extend the base's aggregated roles they are labelled into, and the base's bindings are left
    /// out: the bootstrap index, built from `base` alone, answers for them. The index copies from
    /// the base only the roles its bindings refer to and the aggregated roles its own roles extend,
    /// so a cluster without RBAC objects costs nothing; every other base role is the same in every
    /// cluster, and role references to it resolve in the bootstrap index. That is why a policy
    /// slice must list the cluster's index before the bootstrap index (`[&local, &bootstrap]`).
    pub fn build_layered<'a>(
        objects: impl IntoIterator<Item = &'a Value>,
        base: &[&'a Value],
    ) -> Result<PolicyIndex, PolicyError> {
        let sorted = Sorted::of(objects)?;
        let mut index = PolicyIndex::default();
        let referenced = sorted.referenced_cluster_roles();
        for (name, rules) in layer::cluster_roles(&sorted.cluster_roles, &referenced, base) {
            index
                .cluster_roles
                .insert(name.to_string(), index.rules.len());
            index.rules.push(rules);
        }
        for ((namespace, name), role) in &sorted.roles {
            index
                .roles
                .entry(namespace.to_string())
                .or_default()
                .insert(name.to_string(), index.rules.len());
            index.rules.push(PolicyRule::list_from_json(role));
        }
        for binding in sorted.cluster_role_bindings.values() {
            index.add_binding(binding, "");
        }
        for ((namespace, _), binding) in &sorted.role_bindings {
            index.add_binding(binding, namespace);
        }
        Ok(index)
    }

    fn resolve(&self, role_ref: &RoleRef, namespace: &str) -> Result<usize, String> {
        let found = match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            "Role" => self
                .roles
                .get(namespace)
                .and_then(|roles| roles.get(&role_ref.name)),
            _ => None,
        };
        found.copied().ok_or_else(|| role_ref.not_found())
    }

    /// Files a binding's subjects; `namespace` is empty for ClusterRoleBindings.
    fn add_binding(&mut self, binding: &Value, namespace: &str) {
        let role_ref = RoleRef::of_binding(binding);
        let name = meta(binding, "name");
        let description = if namespace.is_empty() {
            format!(
                "ClusterRoleBinding {name:?} of {} {:?}",
                role_ref.kind, role_ref.name
            )
        } else {
            format!(
                "RoleBinding {:?} of {} {:?}",
                format!("{name}/{namespace}"),
                role_ref.kind,
                role_ref.name
            )
        };
        let number = self.bindings.len();
        let role = self.resolve(&role_ref, namespace);
        let mut described = Vec::new();
        let index = if namespace.is_empty() {
            &mut self.cluster_grants
        } else {
            self.namespace_grants
                .entry(namespace.to_string())
                .or_default()
        };
        let subjects = binding.get("subjects").and_then(Value::as_array);
        for (position, subject) in subjects.into_iter().flatten().enumerate() {
            let field = |name: &str| {
                subject
                    .get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let (kind, subject_name) = (field("kind"), field("name"));
            // A service account without a namespace is in the binding's namespace; at cluster
            // scope it names nobody.
            let sa_namespace = match field("namespace") {
                "" => namespace,
                set => set,
            };
            let filed = match kind {
                "User" => Some(index.users.entry(subject_name.to_string())),
                "Group" => Some(index.groups.entry(subject_name.to_string())),
                "ServiceAccount" if !sa_namespace.is_empty() => Some(
                    index
                        .users
                        .entry(service_account_username(sa_namespace, subject_name)),
                ),
                _ => None,
            };
            if let Some(entry) = filed {
                let grant = Grant {
                    binding: number,
                    subject: position,
                };
                entry.or_default().add(grant, &role, &self.rules);
            }
            let text = match kind {
                "ServiceAccount" => format!("{subject_name}/{sa_namespace}"),
                _ => subject_name.to_string(),
            };
            described.push(format!("{kind} {text:?}"));
        }
        self.bindings.push(Binding {
            description,
            subjects: described,
            role,
        });
    }

    /// What the bindings naming the user give, at cluster scope and in `namespace` (if any).
    fn filed<'a>(&'a self, user: &'a User, namespace: &str) -> impl Iterator<Item = &'a Filed> {
        let namespaced = match namespace {
            "" => None,
            namespace => self.namespace_grants.get(namespace),
        };
        let namespaced = namespaced
            .into_iter()
            .flat_map(|index| index.for_user(user));
        self.cluster_grants.for_user(user).chain(namespaced)
    }

    /// Each binding picked by `pick` among those naming the user, once, with its first subject
    /// that names the user, in binding order.
    fn grants(
        &self,
        user: &User,
        namespace: &str,
        pick: impl Fn(&Filed) -> &[Grant],
    ) -> Vec<Grant> {
        let mut grants: Vec<Grant> = self
            .filed(user, namespace)
            .flat_map(|filed| pick(filed).iter().copied())
            .collect();
        grants.sort_unstable();
        grants.dedup_by_key(|grant| grant.binding);
        grants
    }

    fn role_error(&self, grant: &Grant) -> Option<String> {
        self.bindings[grant.binding].role.as_ref().err().cloned()
    }

    /// RBAC's decision: allow when a binding naming the user (ClusterRoleBindings, and RoleBindings
    /// of the request's namespace) grants a rule that matches, otherwise no opinion, RBAC never
    /// denies. The reason of an allow names the first such binding, its role and the subject; the
    /// reason of no opinion lists roles that bindings of the user refer to but that do not exist.
    pub fn authorize(&self, attributes: &Attributes) -> Decision {
        let mut first: Option<Candidate> = None;
        for filed in self.filed(&attributes.user, attributes.namespace()) {
            for run in filed.candidates(&attributes.target) {
                let earlier = |candidate: &&Candidate| first.is_none_or(|best| **candidate < best);
                if let Some(found) = run
                    .iter()
                    .take_while(earlier)
                    .find(|c| self.rules[c.role][c.rule].allows(attributes))
                {
                    first = Some(*found);
                }
            }
        }
        if let Some(Candidate { grant, .. }) = first {
            let binding = &self.bindings[grant.binding];
            return Decision::Allow(format!(
                "RBAC: allowed by {} to {}",
                binding.description, binding.subjects[grant.subject]
            ));
        }
        let errors: Vec<String> = self
            .grants(&attributes.user, attributes.namespace(), |f| &f.broken)
            .iter()
            .filter_map(|grant| self.role_error(grant))
            .collect();
        if errors.is_empty() {
            Decision::NoOpinion(String::new())
        } else {
            Decision::NoOpinion(format!("RBAC: {}", aggregate_errors(&errors)))
        }
    }

    /// Every rule the user holds at cluster scope and, when `namespace` is set, in that namespace:
    /// what escalation checks compare against and what SelfSubjectRulesReview lists.
    pub fn rules_for(&self, user: &User, namespace: &str) -> HeldRules {
        let mut held = HeldRules::default();
        for grant in self.grants(user, namespace, |f| &f.grants) {
            match &self.bindings[grant.binding].role {
                Ok(role) => held.rules.extend_from_slice(&self.rules[*role]),
                Err(error) => held.errors.push(error.clone()),
            }
        }
        held
    }

    /// The rules of the role a binding in `namespace` (empty for ClusterRoleBindings) refers to.
    pub fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<&[PolicyRule], String> {
        self.resolve(role_ref, namespace)
            .map(|role| self.rules[role].as_slice())
    }

    /// The effective rules of a ClusterRole, aggregation resolved: what a controller writes back
    /// into aggregated roles so that reading them shows what they grant. A layered index only
    /// knows the base roles it holds (see [`build_layered`](Self::build_layered)).
    pub fn cluster_role_rules(&self, name: &str) -> Option<&[PolicyRule]> {
        self.cluster_roles
            .get(name)
            .map(|role| self.rules[*role].as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap;

    #[test]
    fn an_empty_layered_index_holds_nothing_of_the_base() {
        let base = bootstrap::system_admin_policy();
        let base: Vec<&Value> = base.iter().collect();
        let index = PolicyIndex::build_layered([], &base).unwrap_or_default();
        assert!(index.rules.is_empty());
        assert!(index.cluster_roles.is_empty());
        assert!(index.bindings.is_empty());
        // The same objects as a plain policy do fill an index.
        let plain = PolicyIndex::build(base).unwrap_or_default();
        assert!(!plain.rules.is_empty());
        assert!(!plain.bindings.is_empty());
    }
}
