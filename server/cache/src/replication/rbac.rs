//! Which RBAC objects a shard replicates, so that other shards can authorize requests about its
//! logical clusters: binding one of its APIExports from a workspace on another shard (`bind` at
//! APIBinding admission, `apiexports/content`), and using one of its WorkspaceTypes for a
//! workspace on another shard (`use`, `initialize`, `terminate`).
//!
//! Upstream marks such objects with `internal.kcp.io/replicate` (its `replicateclusterrole` and
//! `replicateclusterrolebinding` controllers of apis.kcp.io and tenancy.kcp.io) and replicates
//! what carries the marker. We compute the same rule while replicating instead of storing a
//! marker, as the routing data of the LogicalClusters holding types and exports is computed
//! (`desired.rs`): a ClusterRole is replicated when one of its rules grants `bind` on
//! `apiexports` or anything on `apiexports/content` (apis.kcp.io), or `use`, `initialize` or
//! `terminate` on `workspacetypes` (tenancy.kcp.io), wildcards included; a ClusterRoleBinding is
//! replicated when it binds such a ClusterRole of its own logical cluster, or when one of its
//! subjects is a user or group of an export's maximal permission policy (`apis.kcp.io:binding:`),
//! and then its ClusterRole too, so that another shard serving resources bound from an export
//! of this shard enforces the policy. `system:` clusters are left out (their policy is every
//! shard's own). Upstream's `access` roles of replicated clusters are not replicated.

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kcp_apimachinery::ApiError;
use kcp_apis::binding::MAXIMAL_PERMISSION_POLICY_PREFIX;
use kcp_rbac::PolicyRule;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{ChangeType, ListRequest};
use serde_json::{Value, json};

use super::desired::{Desired, Wanted};
use super::{ObjectId, comparable};

/// Which of the two RBAC resources a replication writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RbacKind {
    ClusterRoles,
    ClusterRoleBindings,
}

impl RbacKind {
    fn kind(self) -> &'static str {
        match self {
            RbacKind::ClusterRoles => "ClusterRole",
            RbacKind::ClusterRoleBindings => "ClusterRoleBinding",
        }
    }
}

/// Whether one of the role's rules grants what another shard authorizes (see the module doc).
pub fn grants_across_shards(role: &Value) -> bool {
    PolicyRule::list_from_json(role).iter().any(|rule| {
        let has = |list: &[String], item: &str| list.iter().any(|s| s == item || s == "*");
        let in_group = |group: &str| has(&rule.api_groups, group);
        let (resources, verbs) = (&rule.resources, &rule.verbs);
        let apis = in_group(kcp_apis::GROUP)
            && ((has(resources, "apiexports") && has(verbs, "bind"))
                || has(resources, "apiexports/content"));
        let tenancy = in_group(kcp_tenancy::workspace::GROUP)
            && has(resources, "workspacetypes")
            && ["use", "initialize", "terminate"]
                .iter()
                .any(|verb| has(verbs, verb));
        apis || tenancy
    })
}

/// The ClusterRole a ClusterRoleBinding binds, if it binds one.
fn bound_role(binding: &Value) -> Option<String> {
    (binding.pointer("/roleRef/kind") == Some(&json!("ClusterRole")))
        .then(|| {
            binding
                .pointer("/roleRef/name")?
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

fn replicable(id: &ObjectId) -> bool {
    !id.cluster.starts_with("system:")
}

/// The copy of a stored RBAC object: with its kind (stored objects may lack it), so that the
/// reading shard knows what it got.
fn copy(object: &Value, kind: RbacKind) -> Value {
    let mut copy = comparable(object);
    copy["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    copy["kind"] = json!(kind.kind());
    copy
}

/// Whether one of the binding's subjects is a user or group of a maximal permission policy.
fn binds_policy_subject(binding: &Value) -> bool {
    let subjects = binding.get("subjects").and_then(Value::as_array);
    subjects.into_iter().flatten().any(|subject| {
        let field = |name: &str| {
            subject
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        ["User", "Group"].contains(&field("kind"))
            && field("apiGroup") == "rbac.authorization.k8s.io"
            && field("name").starts_with(MAXIMAL_PERMISSION_POLICY_PREFIX)
    })
}

/// A ClusterRole as remembered: whether it grants across shards, and its copy.
struct Role {
    grants: bool,
    copy: Value,
}

/// A ClusterRoleBinding as remembered: the role it binds, whether it binds a policy subject,
/// and its copy.
struct Binding {
    role: ObjectId,
    policy_subject: bool,
    copy: Value,
}

/// What the shard's RBAC objects make wanted, as far as it must be remembered.
#[derive(Default)]
struct Granting {
    roles: BTreeMap<ObjectId, Role>,
    bindings: BTreeMap<ObjectId, Binding>,
}

impl Granting {
    fn role_grants(&self, role: &ObjectId) -> bool {
        self.roles.get(role).is_some_and(|role| role.grants)
    }

    /// The wanted copies of `kind`.
    fn wanted(&self, kind: RbacKind) -> BTreeMap<ObjectId, Value> {
        match kind {
            RbacKind::ClusterRoles => {
                let of_policy_subjects: Vec<&ObjectId> = self
                    .bindings
                    .values()
                    .filter(|binding| binding.policy_subject)
                    .map(|binding| &binding.role)
                    .collect();
                self.roles
                    .iter()
                    .filter(|(id, role)| role.grants || of_policy_subjects.contains(id))
                    .map(|(id, role)| (id.clone(), role.copy.clone()))
                    .collect()
            }
            RbacKind::ClusterRoleBindings => self
                .bindings
                .iter()
                .filter(|(_, binding)| binding.policy_subject || self.role_grants(&binding.role))
                .map(|(id, binding)| (id.clone(), binding.copy.clone()))
                .collect(),
        }
    }

    /// Records a change of a ClusterRole or a ClusterRoleBinding.
    fn apply(&mut self, of: RbacKind, deleted: bool, object: &Value) {
        let Some(id) = ObjectId::of(object).filter(replicable) else {
            return;
        };
        match (of, deleted) {
            (RbacKind::ClusterRoles, true) => {
                self.roles.remove(&id);
            }
            (RbacKind::ClusterRoles, false) => {
                let role = Role {
                    grants: grants_across_shards(object),
                    copy: copy(object, of),
                };
                self.roles.insert(id, role);
            }
            (RbacKind::ClusterRoleBindings, false) if let Some(name) = bound_role(object) => {
                let binding = Binding {
                    role: ObjectId {
                        cluster: id.cluster.clone(),
                        namespace: None,
                        name,
                    },
                    policy_subject: binds_policy_subject(object),
                    copy: copy(object, of),
                };
                self.bindings.insert(id, binding);
            }
            (RbacKind::ClusterRoleBindings, _) => {
                self.bindings.remove(&id);
            }
        }
    }
}

/// The differences between two sets of wanted copies, as changes.
fn differences(
    before: &BTreeMap<ObjectId, Value>,
    after: &BTreeMap<ObjectId, Value>,
) -> Vec<Desired> {
    let gone = before
        .keys()
        .filter(|id| !after.contains_key(*id))
        .map(|id| Desired::Gone(id.clone()));
    let set = after
        .iter()
        .filter(|(id, copy)| before.get(*id) != Some(*copy))
        .map(|(id, copy)| Desired::Set(id.clone(), copy.clone()));
    gone.chain(set).collect()
}

/// A change of a ClusterRole or a ClusterRoleBinding: which, whether it is a deletion, the object.
type Change = (RbacKind, bool, Value);

/// The copies of `kind` wanted now and their changes, from the ClusterRoles under `roles` and
/// the ClusterRoleBindings under `bindings` of the shard's store. Both are remembered (a role
/// that starts granting makes its bindings wanted, a binding of a policy subject its role).
pub(super) async fn granting(
    local: &ObjectStore,
    kind: RbacKind,
    roles: &str,
    bindings: &str,
) -> Result<Wanted, ApiError> {
    let mut granting = Granting::default();
    let mut streams: Vec<BoxStream<'static, Result<Change, ApiError>>> = Vec::new();
    for (of, prefix) in [
        (RbacKind::ClusterRoles, roles),
        (RbacKind::ClusterRoleBindings, bindings),
    ] {
        let page = local
            .list(ListRequest::everything(prefix), &|_| true)
            .await?;
        for object in &page.items {
            granting.apply(of, false, object);
        }
        let changes = local.watch_current(prefix, page.revision + 1).await?;
        streams.push(
            changes
                .map(move |change| change.map(|c| (of, c.kind == ChangeType::Deleted, c.object)))
                .boxed(),
        );
    }
    let now = granting.wanted(kind);
    let changes = stream::unfold(
        (granting, now.clone(), stream::select_all(streams)),
        move |(mut granting, mut wanted, mut changes)| async move {
            let desired = match changes.next().await? {
                Ok((of, deleted, object)) => {
                    granting.apply(of, deleted, &object);
                    let after = granting.wanted(kind);
                    let desired = differences(&wanted, &after);
                    wanted = after;
                    desired.into_iter().map(Ok).collect()
                }
                Err(error) => vec![Err(error)],
            };
            Some((stream::iter(desired), (granting, wanted, changes)))
        },
    )
    .flatten();
    Ok((now, changes.boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(cluster: &str, name: &str, rule: Value) -> Value {
        json!({"metadata": {"name": name, "annotations": {"kcp.io/cluster": cluster}},
            "rules": [rule]})
    }

    fn binding(cluster: &str, name: &str, role: &str) -> Value {
        json!({"metadata": {"name": name, "annotations": {"kcp.io/cluster": cluster}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": "alice"}]})
    }

    #[test]
    fn the_rule_matches_bind_content_and_use_grants_only() {
        let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| {
            role(
                "c",
                "r",
                json!({"apiGroups": groups, "resources": resources, "verbs": verbs}),
            )
        };
        assert!(grants_across_shards(&rule(
            &["apis.kcp.io"],
            &["apiexports"],
            &["bind"]
        )));
        assert!(grants_across_shards(&rule(&["*"], &["*"], &["*"])));
        assert!(grants_across_shards(&rule(
            &["apis.kcp.io"],
            &["apiexports/content"],
            &["get"]
        )));
        assert!(grants_across_shards(&rule(
            &["tenancy.kcp.io"],
            &["workspacetypes"],
            &["use"]
        )));
        assert!(!grants_across_shards(&rule(
            &["apis.kcp.io"],
            &["apiexports"],
            &["get"]
        )));
        assert!(!grants_across_shards(&rule(
            &["tenancy.kcp.io"],
            &["workspaces"],
            &["use"]
        )));
        assert!(!grants_across_shards(&rule(&[""], &["configmaps"], &["*"])));
    }

    fn read_rule() -> Value {
        json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]})
    }

    #[test]
    fn bindings_follow_their_role() {
        let bind =
            json!({"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"], "verbs": ["bind"]});
        let read = read_rule();
        let mut granting = Granting::default();
        granting.apply(
            RbacKind::ClusterRoleBindings,
            false,
            &binding("c", "b", "binder"),
        );
        granting.apply(
            RbacKind::ClusterRoleBindings,
            false,
            &binding("d", "b", "binder"),
        );
        assert!(granting.wanted(RbacKind::ClusterRoleBindings).is_empty());
        granting.apply(RbacKind::ClusterRoles, false, &role("c", "binder", bind));
        let bindings = granting.wanted(RbacKind::ClusterRoleBindings);
        assert_eq!(
            bindings.len(),
            1,
            "only the binding in the role's own cluster"
        );
        let copy = bindings.values().next().unwrap();
        assert_eq!(copy["kind"], "ClusterRoleBinding");
        granting.apply(RbacKind::ClusterRoles, false, &role("c", "binder", read));
        assert!(granting.wanted(RbacKind::ClusterRoles).is_empty());
        assert!(granting.wanted(RbacKind::ClusterRoleBindings).is_empty());
        // A binding of a maximal-permission-policy subject is replicated with its role.
        let mut policy = binding("c", "policy", "reader");
        policy["subjects"] = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
            "name": "apis.kcp.io:binding:alice"}]);
        granting.apply(RbacKind::ClusterRoleBindings, false, &policy);
        assert!(granting.wanted(RbacKind::ClusterRoles).is_empty());
        granting.apply(
            RbacKind::ClusterRoles,
            false,
            &role("c", "reader", read_rule()),
        );
        assert_eq!(granting.wanted(RbacKind::ClusterRoles).len(), 1);
        assert_eq!(granting.wanted(RbacKind::ClusterRoleBindings).len(), 1);
        granting.apply(RbacKind::ClusterRoleBindings, true, &policy);
        assert!(granting.wanted(RbacKind::ClusterRoles).is_empty());
        let system = role(
            "system:admin",
            "x",
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
        );
        granting.apply(RbacKind::ClusterRoles, false, &system);
        assert!(granting.wanted(RbacKind::ClusterRoles).is_empty());
    }
}
