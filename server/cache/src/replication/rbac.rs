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

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kcp_apimachinery::ApiError;
use kcp_apis::binding::MAXIMAL_PERMISSION_POLICY_PREFIX;
use kcp_rbac::PolicyRule;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{ChangeType, ListRequest, ObjectRef};
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

/// A ClusterRoleBinding as remembered: the role it binds and whether it binds a policy subject.
struct Binding {
    role: ObjectId,
    policy_subject: bool,
}

/// What the shard's RBAC objects make wanted: a few facts about every ClusterRole and
/// ClusterRoleBinding, and copies of the wanted objects of the replicated kind only (the
/// `workspace-admin` binding of each workspace costs a few names here, never a copy).
struct Granting {
    kind: RbacKind,
    /// Whether each ClusterRole grants across shards.
    roles: BTreeMap<ObjectId, bool>,
    bindings: BTreeMap<ObjectId, Binding>,
    /// The ClusterRoleBindings of each ClusterRole.
    by_role: BTreeMap<ObjectId, BTreeSet<ObjectId>>,
    /// The wanted copies of `kind`.
    copies: BTreeMap<ObjectId, Value>,
}

impl Granting {
    fn new(kind: RbacKind) -> Granting {
        Granting {
            kind,
            roles: BTreeMap::new(),
            bindings: BTreeMap::new(),
            by_role: BTreeMap::new(),
            copies: BTreeMap::new(),
        }
    }

    /// Whether the object `id` of `kind` is wanted in the cache.
    fn is_wanted(&self, id: &ObjectId) -> bool {
        match self.kind {
            RbacKind::ClusterRoles => {
                self.roles.get(id) == Some(&true)
                    || self.by_role.get(id).is_some_and(|bindings| {
                        bindings
                            .iter()
                            .any(|b| self.bindings.get(b).is_some_and(|b| b.policy_subject))
                    })
            }
            RbacKind::ClusterRoleBindings => self.bindings.get(id).is_some_and(|binding| {
                binding.policy_subject || self.roles.get(&binding.role) == Some(&true)
            }),
        }
    }

    /// Records a change of a ClusterRole or a ClusterRoleBinding; returns the objects of `kind`
    /// whose wanted state it may have changed.
    fn apply(&mut self, of: RbacKind, deleted: bool, object: &Value) -> Vec<ObjectId> {
        let Some(id) = ObjectId::of(object).filter(replicable) else {
            return Vec::new();
        };
        match of {
            RbacKind::ClusterRoles => {
                if deleted {
                    self.roles.remove(&id);
                } else {
                    self.roles.insert(id.clone(), grants_across_shards(object));
                }
                match self.kind {
                    RbacKind::ClusterRoles => vec![id],
                    RbacKind::ClusterRoleBindings => self
                        .by_role
                        .get(&id)
                        .map(|bindings| bindings.iter().cloned().collect())
                        .unwrap_or_default(),
                }
            }
            RbacKind::ClusterRoleBindings => {
                let mut roles = Vec::new();
                if let Some(old) = self.bindings.remove(&id) {
                    if let Some(bindings) = self.by_role.get_mut(&old.role) {
                        bindings.remove(&id);
                        if bindings.is_empty() {
                            self.by_role.remove(&old.role);
                        }
                    }
                    roles.push(old.role);
                }
                if !deleted && let Some(name) = bound_role(object) {
                    let role = ObjectId {
                        cluster: id.cluster.clone(),
                        namespace: None,
                        name,
                    };
                    self.by_role
                        .entry(role.clone())
                        .or_default()
                        .insert(id.clone());
                    let policy_subject = binds_policy_subject(object);
                    roles.push(role.clone());
                    self.bindings.insert(
                        id.clone(),
                        Binding {
                            role,
                            policy_subject,
                        },
                    );
                }
                match self.kind {
                    RbacKind::ClusterRoles => roles,
                    RbacKind::ClusterRoleBindings => vec![id],
                }
            }
        }
    }

    /// Whether `id` is wanted now, and updates its copy: `object` when it is that object, the
    /// copy already held, else the one `read` returns. The resulting change, if any.
    fn settle(
        &mut self,
        id: ObjectId,
        object: Option<&Value>,
        read: Option<Value>,
    ) -> Option<Desired> {
        if !self.is_wanted(&id) {
            return self.copies.remove(&id).map(|_| Desired::Gone(id));
        }
        let copy = match (object, read) {
            (Some(object), _) => copy(object, self.kind),
            (None, Some(read)) => copy(&read, self.kind),
            (None, None) => return None,
        };
        if self.copies.get(&id) == Some(&copy) {
            return None;
        }
        self.copies.insert(id.clone(), copy.clone());
        Some(Desired::Set(id, copy))
    }
}

/// A change of a ClusterRole or a ClusterRoleBinding: which, whether it is a deletion, the object.
type Change = (RbacKind, bool, Value);

/// The copies of `kind` wanted now and their changes, from the ClusterRoles under `roles` and
/// the ClusterRoleBindings under `bindings` of the shard's store. An object that becomes wanted
/// because of another one (a binding whose role starts granting) is read from the store.
pub(super) async fn granting(
    local: &ObjectStore,
    kind: RbacKind,
    roles: &str,
    bindings: &str,
) -> Result<Wanted, ApiError> {
    let mut granting = Granting::new(kind);
    let mut streams: Vec<BoxStream<'static, Result<Change, ApiError>>> = Vec::new();
    let mut own = Vec::new();
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
        if of == kind {
            own = page.items;
        }
        let changes = local.watch_current(prefix, page.revision + 1).await?;
        streams.push(
            changes
                .map(move |change| change.map(|c| (of, c.kind == ChangeType::Deleted, c.object)))
                .boxed(),
        );
    }
    for object in &own {
        if let Some(id) = ObjectId::of(object) {
            granting.settle(id, Some(object), None);
        }
    }
    drop(own);
    let now = granting.copies.clone();
    let follow = Follow {
        granting,
        changes: stream::select_all(streams).boxed(),
        local: local.clone(),
        prefix: match kind {
            RbacKind::ClusterRoles => roles.to_owned(),
            RbacKind::ClusterRoleBindings => bindings.to_owned(),
        },
    };
    let changes = stream::unfold(follow, |mut follow| async move {
        let desired = match follow.changes.next().await? {
            Ok(change) => match follow.step(change).await {
                Ok(desired) => desired.into_iter().map(Ok).collect(),
                Err(error) => vec![Err(error)],
            },
            Err(error) => vec![Err(error)],
        };
        Some((stream::iter(desired), follow))
    })
    .flatten();
    Ok((now, changes.boxed()))
}

/// The RBAC facts and the changes they follow, with the store an object that becomes wanted is
/// read from.
struct Follow {
    granting: Granting,
    changes: BoxStream<'static, Result<Change, ApiError>>,
    local: ObjectStore,
    /// The key prefix of the replicated kind (every logical cluster).
    prefix: String,
}

impl Follow {
    async fn step(&mut self, (of, deleted, object): Change) -> Result<Vec<Desired>, ApiError> {
        let changed = ObjectId::of(&object);
        let mut desired = Vec::new();
        for id in self.granting.apply(of, deleted, &object) {
            let this = (of == self.granting.kind && changed.as_ref() == Some(&id))
                .then_some(&object)
                .filter(|_| !deleted);
            let read = if this.is_none()
                && self.granting.is_wanted(&id)
                && !self.granting.copies.contains_key(&id)
            {
                read(&self.local, &self.prefix, self.granting.kind, &id).await?
            } else {
                None
            };
            desired.extend(self.granting.settle(id, this, read));
        }
        Ok(desired)
    }
}

/// The stored object `id` of `kind` (under `prefix`, every logical cluster), if it exists.
async fn read(
    local: &ObjectStore,
    prefix: &str,
    kind: RbacKind,
    id: &ObjectId,
) -> Result<Option<Value>, ApiError> {
    let resource = match kind {
        RbacKind::ClusterRoles => "clusterroles",
        RbacKind::ClusterRoleBindings => "clusterrolebindings",
    };
    let what = ObjectRef {
        group: "rbac.authorization.k8s.io",
        resource,
        name: &id.name,
    };
    let key = format!("{prefix}{}/{}", id.cluster, id.name);
    Ok(local.get(&key, what).await?.map(|stored| stored.object))
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

    /// Both replications of a shard as `granting` follows them, over an in-memory store.
    struct Both {
        store: BTreeMap<(bool, ObjectId), Value>,
        roles: Granting,
        bindings: Granting,
    }

    impl Both {
        fn new() -> Both {
            Both {
                store: BTreeMap::new(),
                roles: Granting::new(RbacKind::ClusterRoles),
                bindings: Granting::new(RbacKind::ClusterRoleBindings),
            }
        }

        fn apply(&mut self, of: RbacKind, deleted: bool, object: &Value) {
            let id = ObjectId::of(object).unwrap();
            let key = (of == RbacKind::ClusterRoles, id.clone());
            if deleted {
                self.store.remove(&key);
            } else {
                self.store.insert(key, object.clone());
            }
            for granting in [&mut self.roles, &mut self.bindings] {
                for affected in granting.apply(of, deleted, object) {
                    let this =
                        (of == granting.kind && affected == id && !deleted).then_some(object);
                    let read = self
                        .store
                        .get(&(granting.kind == RbacKind::ClusterRoles, affected.clone()))
                        .cloned();
                    granting.settle(affected, this, read);
                }
            }
        }

        fn copies(&self, kind: RbacKind) -> Vec<String> {
            let granting = match kind {
                RbacKind::ClusterRoles => &self.roles,
                RbacKind::ClusterRoleBindings => &self.bindings,
            };
            granting
                .copies
                .iter()
                .map(|(id, copy)| format!("{}/{} {}", id.cluster, id.name, copy["kind"]))
                .collect()
        }
    }

    #[test]
    fn bindings_follow_their_role() {
        let bind =
            json!({"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"], "verbs": ["bind"]});
        let (roles, bindings) = (RbacKind::ClusterRoles, RbacKind::ClusterRoleBindings);
        let mut both = Both::new();
        both.apply(bindings, false, &binding("c", "b", "binder"));
        both.apply(bindings, false, &binding("d", "b", "binder"));
        assert!(both.copies(bindings).is_empty());
        // The role starts granting: its binding in its own cluster is read and copied.
        both.apply(roles, false, &role("c", "binder", bind));
        assert_eq!(both.copies(roles), [r#"c/binder "ClusterRole""#]);
        assert_eq!(both.copies(bindings), [r#"c/b "ClusterRoleBinding""#]);
        both.apply(roles, false, &role("c", "binder", read_rule()));
        assert!(both.copies(roles).is_empty());
        assert!(both.copies(bindings).is_empty());
        // A binding of a maximal-permission-policy subject is replicated with its role.
        let mut policy = binding("c", "policy", "reader");
        policy["subjects"] = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
            "name": "apis.kcp.io:binding:alice"}]);
        both.apply(bindings, false, &policy);
        assert_eq!(both.copies(bindings), [r#"c/policy "ClusterRoleBinding""#]);
        assert!(both.copies(roles).is_empty(), "no such role yet");
        both.apply(roles, false, &role("c", "reader", read_rule()));
        assert_eq!(both.copies(roles), [r#"c/reader "ClusterRole""#]);
        both.apply(bindings, true, &policy);
        assert!(both.copies(roles).is_empty());
        assert!(both.copies(bindings).is_empty());
        let system = role(
            "system:admin",
            "x",
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
        );
        assert!(
            both.roles.apply(roles, false, &system).is_empty(),
            "system: clusters are left out"
        );
    }
}
