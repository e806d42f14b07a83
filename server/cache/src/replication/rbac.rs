//! Which RBAC objects a shard replicates, so that other shards can authorize requests about its
//! logical clusters: binding one of its APIExports from a workspace on another shard (`bind` at
//! APIBinding admission, `apiexports/content`), using one of its WorkspaceTypes for a
//! workspace on another shard (`use`, `initialize`, `terminate`), and entering one of its
//! replicated clusters through another shard (`access`, the workspace content authorizer).
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
//! shard's own). As upstream's core `replicateclusterrole` and `replicateclusterrolebinding`
//! controllers, a ClusterRole granting non-resource verb `access` (or `*`) on `/`, `/*` or `*` is
//! replicated while its logical cluster is marked for replication (its LogicalCluster is: it
//! holds a WorkspaceType or an APIExport, `desired.rs`), and so are the ClusterRoleBindings of
//! it in the same cluster, and the bindings there of a bootstrap role granting `access`
//! (`cluster-admin`: a `workspace-admin` binding) when the cluster stores no role of that name,
//! as upstream's binding controller then finds the role in `system:admin`. (Upstream does that
//! for `bind` too, which replicates every workspace's `workspace-admin` binding; not here.)
//!
//! The LogicalClusters' routing data and both RBAC kinds are replicated by one follower, three
//! lanes: whether a role is copied depends on the bindings, a binding on its role, and an
//! `access` role on its cluster's marking, so one watch of each resource and one decode of each
//! change feed the facts and the copies of all three (upstream's informers also decode each
//! object once). A cluster marked or unmarked has its `access` roles and their bindings read
//! again from the store.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kcp_apimachinery::ApiError;
use kcp_apis::binding::MAXIMAL_PERMISSION_POLICY_PREFIX;
use kcp_rbac::PolicyRule;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{ListRequest, ObjectRef};
use serde_json::{Value, json};

use super::desired::{self, Desired, Follower, HeldChange, HoldersFollow, Lanes, followed};
use super::stored::{self, Stored};
use super::{ObjectId, comparable};

/// One of the two RBAC resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RbacKind {
    ClusterRoles,
    ClusterRoleBindings,
}

impl RbacKind {
    /// Both, in the order of their lanes.
    const BOTH: [RbacKind; 2] = [RbacKind::ClusterRoles, RbacKind::ClusterRoleBindings];

    fn kind(self) -> &'static str {
        match self {
            RbacKind::ClusterRoles => "ClusterRole",
            RbacKind::ClusterRoleBindings => "ClusterRoleBinding",
        }
    }

    /// The lane of the replication's changes that carries this kind's copies.
    fn lane(self) -> usize {
        match self {
            RbacKind::ClusterRoles => 0,
            RbacKind::ClusterRoleBindings => 1,
        }
    }
}

/// How many lanes the RBAC replication has: ClusterRoles, then ClusterRoleBindings.
const LANES: usize = RbacKind::BOTH.len();

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

/// Whether one of the role's rules grants non-resource verb `access` (or `*`) on `/`, `/*` or
/// `*`: the role lets its subjects into its logical cluster (upstream's `HasAccessRule`, the same
/// sets of paths and verbs; other paths such as `/api` or `/healthz` do not count).
fn grants_access(role: &Value) -> bool {
    PolicyRule::list_from_json(role).iter().any(|rule| {
        let has =
            |list: &[String], items: &[&str]| list.iter().any(|s| items.contains(&s.as_str()));
        has(&rule.non_resource_urls, &["/", "/*", "*"]) && has(&rule.verbs, &["access", "*"])
    })
}

/// The names of the bootstrap policy's ClusterRoles (`system:admin`) that grant `access`
/// (`cluster-admin`, `system:kcp:workspace:access`): a binding of one in a marked cluster that
/// stores no role of that name is replicated, as upstream's binding controller finds the role in
/// `system:admin` then, and every shard's bootstrap policy resolves it the same way.
fn bootstrap_access_roles() -> BTreeSet<String> {
    kcp_rbac::bootstrap::system_admin_policy()
        .iter()
        .filter(|object| object.get("kind") == Some(&json!("ClusterRole")))
        .filter(|role| grants_access(role))
        .filter_map(|role| role.pointer("/metadata/name")?.as_str().map(str::to_owned))
        .collect()
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
    replicable_cluster(&id.cluster)
}

fn replicable_cluster(cluster: &str) -> bool {
    !cluster.starts_with("system:")
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

/// The ClusterRole a ClusterRoleBinding binds, as an object of the binding's logical cluster.
fn role_of(binding: &Value, id: &ObjectId) -> Option<ObjectId> {
    Some(ObjectId {
        cluster: id.cluster.clone(),
        namespace: None,
        name: bound_role(binding)?,
    })
}

/// What the shard's RBAC objects make wanted. Only the few objects that matter are remembered:
/// the ClusterRoles that grant across shards or grant `access`, the marked clusters, the
/// ClusterRoleBindings of policy subjects, and the copies; every other binding (the
/// `workspace-admin` binding of each workspace) costs nothing here. When a role starts being
/// replicated, its cluster's bindings are read from the store.
#[derive(Default)]
struct Granting {
    /// The ClusterRoles that grant across shards.
    granting_roles: BTreeSet<ObjectId>,
    /// The ClusterRoles that grant `access` ([`grants_access`]): copied while their logical
    /// cluster is marked.
    access_roles: BTreeSet<ObjectId>,
    /// The logical clusters marked for replication (holding a type or an export).
    marked: BTreeSet<String>,
    /// [`bootstrap_access_roles`].
    bootstrap_access: BTreeSet<String>,
    /// The ClusterRoles stored under the name of one of `bootstrap_access` (a cluster's own role
    /// of that name is the one its bindings bind).
    shadowing: BTreeSet<ObjectId>,
    /// The ClusterRoleBindings of policy subjects, and the role each binds.
    policy_bindings: BTreeMap<ObjectId, ObjectId>,
    /// The wanted copies of each kind, by lane.
    copies: [BTreeMap<ObjectId, Value>; LANES],
}

/// What a change asks to look at again: an object as it is now (`None`: gone), a ClusterRole
/// to be read from the store, or a role whose bindings must be read from the store.
enum Recheck {
    Object(RbacKind, ObjectId, Option<Value>),
    StoredRole(ObjectId),
    BindingsOf(ObjectId),
}

impl Granting {
    /// Whether the ClusterRole `role` is copied for what it grants (and its bindings with it).
    fn replicates(&self, role: &ObjectId) -> bool {
        self.granting_roles.contains(role)
            || (self.access_roles.contains(role) && self.marked.contains(&role.cluster))
    }

    /// Whether `role` names a bootstrap role granting `access` for a marked cluster that stores
    /// no role of that name.
    fn falls_back_to_bootstrap_access(&self, role: &ObjectId) -> bool {
        self.bootstrap_access.contains(&role.name)
            && self.marked.contains(&role.cluster)
            && !self.shadowing.contains(role)
    }

    /// Whether the bindings of the ClusterRole named `role` (in its cluster) are copied.
    fn replicates_bindings_of(&self, role: &ObjectId) -> bool {
        self.replicates(role) || self.falls_back_to_bootstrap_access(role)
    }

    /// Whether `object` (`id`, of `kind`) is wanted in the cache.
    fn wants(&self, kind: RbacKind, id: &ObjectId, object: &Value) -> bool {
        match kind {
            RbacKind::ClusterRoles => {
                self.replicates(id) || self.policy_bindings.values().any(|r| r == id)
            }
            RbacKind::ClusterRoleBindings => {
                binds_policy_subject(object)
                    || role_of(object, id).is_some_and(|role| self.replicates_bindings_of(&role))
            }
        }
    }

    /// Records that `cluster` is now marked for replication or no longer; what to look at again:
    /// its `access` roles, their bindings, and its bindings of bootstrap `access` roles.
    fn mark(&mut self, cluster: &str, marked: bool) -> Vec<Recheck> {
        if !marked {
            self.marked.remove(cluster);
        } else if replicable_cluster(cluster) {
            self.marked.insert(cluster.to_owned());
        }
        let own = (self.access_roles.iter())
            .filter(|role| role.cluster == cluster)
            .cloned();
        let bootstrap = self.bootstrap_access.iter().map(|name| ObjectId {
            cluster: cluster.to_owned(),
            namespace: None,
            name: name.clone(),
        });
        let roles: BTreeSet<ObjectId> = own.chain(bootstrap).collect();
        let stored: Vec<Recheck> = (roles.iter())
            .filter(|role| self.access_roles.contains(*role))
            .map(|role| Recheck::StoredRole(role.clone()))
            .collect();
        stored
            .into_iter()
            .chain(roles.into_iter().map(Recheck::BindingsOf))
            .collect()
    }

    /// Records a change of the ClusterRole or ClusterRoleBinding `id` (`object`: as it is now,
    /// `None`: gone); what to look at again.
    fn apply(&mut self, of: RbacKind, id: ObjectId, object: Option<&Value>) -> Vec<Recheck> {
        if !replicable(&id) {
            return Vec::new();
        }
        let now = object.cloned();
        match of {
            RbacKind::ClusterRoles => {
                let replicated = self.replicates_bindings_of(&id);
                let member = |set: &mut BTreeSet<ObjectId>, rule: fn(&Value) -> bool| {
                    if object.is_some_and(rule) {
                        set.insert(id.clone());
                    } else {
                        set.remove(&id);
                    }
                };
                member(&mut self.granting_roles, grants_across_shards);
                member(&mut self.access_roles, grants_access);
                if self.bootstrap_access.contains(&id.name) {
                    member(&mut self.shadowing, |_| true);
                }
                let bindings = (replicated != self.replicates_bindings_of(&id))
                    .then(|| Recheck::BindingsOf(id.clone()));
                std::iter::once(Recheck::Object(of, id, now))
                    .chain(bindings)
                    .collect()
            }
            RbacKind::ClusterRoleBindings => {
                let before = self.policy_bindings.remove(&id);
                let after = object
                    .filter(|object| binds_policy_subject(object))
                    .and_then(|object| role_of(object, &id));
                if let Some(role) = &after {
                    self.policy_bindings.insert(id.clone(), role.clone());
                }
                let roles = match before != after {
                    true => before.into_iter().chain(after).collect(),
                    false => Vec::new(),
                };
                std::iter::once(Recheck::Object(of, id, now))
                    .chain(roles.into_iter().map(Recheck::StoredRole))
                    .collect()
            }
        }
    }

    /// Records whether `id` of `kind` (`object`: as it is now, `None`: gone) is wanted and its
    /// copy; the resulting change of its lane, if any.
    fn settle(
        &mut self,
        kind: RbacKind,
        id: ObjectId,
        object: Option<&Value>,
    ) -> Option<(usize, Desired)> {
        let wanted = object.filter(|object| self.wants(kind, &id, object));
        let copies = &mut self.copies[kind.lane()];
        let desired = match wanted {
            None => copies.remove(&id).map(|_| Desired::Gone(id)),
            Some(object) => {
                let copy = copy(object, kind);
                if copies.get(&id) == Some(&copy) {
                    return None;
                }
                copies.insert(id.clone(), copy.clone());
                Some(Desired::Set(id, copy))
            }
        };
        desired.map(|desired| (kind.lane(), desired))
    }

    /// The copies held of the bindings of `role` (when it stops granting, they may go).
    fn copied_bindings_of(&self, role: &ObjectId) -> Vec<ObjectId> {
        self.copies[RbacKind::ClusterRoleBindings.lane()]
            .iter()
            .filter(|(id, copy)| role_of(copy, id).as_ref() == Some(role))
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// A change of a ClusterRole or a ClusterRoleBinding: which, and the change as stored.
type RbacChange = (RbacKind, Stored);

/// A change the replication follows: of a holder (a LogicalCluster or a held object), or of
/// the RBAC.
enum Change {
    Holders(HeldChange),
    Rbac(RbacChange),
}

/// The lane of the LogicalClusters' routing data; the RBAC kinds' lanes follow it.
const ROUTING_LANE: usize = 0;

/// An RBAC change of the lanes of [`RbacKind::lane`], as a change of the replication's lanes.
fn after_routing((lane, desired): (usize, Desired)) -> (usize, Desired) {
    (ROUTING_LANE + 1 + lane, desired)
}

/// What the marked logical clusters want in the cache, three lanes: the routing data of the
/// LogicalClusters (under `logical_clusters`) of the clusters holding an object under one of the
/// `held` prefixes (`desired.rs`), then the ClusterRoles under `roles` and the
/// ClusterRoleBindings under `bindings` of the shard's store that grant across shards or grant
/// `access` to a marked cluster. One replication, as whether an `access` role is copied depends
/// on its cluster's holdings: each resource is watched once.
pub(super) async fn marked(
    local: &ObjectStore,
    logical_clusters: &str,
    held: &[String],
    roles: &str,
    bindings: &str,
) -> Result<Lanes, ApiError> {
    let (holders, holder_changes) = desired::holders(local, logical_clusters, held).await?;
    let mut granting = Granting {
        marked: holders.marked_clusters(),
        bootstrap_access: bootstrap_access_roles(),
        ..Granting::default()
    };
    let mut streams: Vec<BoxStream<'static, Result<Change, ApiError>>> =
        vec![holder_changes.map(|c| c.map(Change::Holders)).boxed()];
    let mut listed = Vec::new();
    for (of, prefix) in RbacKind::BOTH.into_iter().zip([roles, bindings]) {
        let page = local
            .list(ListRequest::everything(prefix), &|_| true)
            .await?;
        for object in &page.items {
            if let Some(id) = ObjectId::of(object) {
                granting.apply(of, id, Some(object));
            }
        }
        let changes = stored::changes(local, prefix, page.revision + 1).await?;
        streams.push(
            changes
                .map(move |change| change.map(|change| Change::Rbac((of, change))))
                .boxed(),
        );
        listed.push((of, page.items));
    }
    for (of, objects) in listed {
        for object in &objects {
            if let Some(id) = ObjectId::of(object).filter(replicable) {
                granting.settle(of, id, Some(object));
            }
        }
    }
    let mut now = vec![holders.now()];
    now.extend(granting.copies.iter().cloned());
    let follow = Follow {
        holders,
        rbac: RbacFollow {
            granting,
            local: local.clone(),
            roles: roles.to_owned(),
            bindings: bindings.to_owned(),
        },
    };
    Ok((now, followed(follow, stream::select_all(streams).boxed())))
}

/// The holders and the RBAC, followed together.
struct Follow {
    holders: HoldersFollow,
    rbac: RbacFollow,
}

impl Follower for Follow {
    type Change = Change;
    type Output = (usize, Desired);

    async fn step(&mut self, change: Change) -> Result<Vec<(usize, Desired)>, ApiError> {
        match change {
            Change::Rbac(change) => self.rbac.step(change).await,
            Change::Holders(change) => {
                let cluster = change.1.id.cluster.clone();
                let marked = self.holders.marked(&cluster);
                let routing = self.holders.step(change).await?;
                let mut desired: Vec<_> = routing.into_iter().map(|d| (ROUTING_LANE, d)).collect();
                if marked != self.holders.marked(&cluster) {
                    let rechecks = self.rbac.granting.mark(&cluster, !marked);
                    desired.extend(self.rbac.recheck(rechecks).await?);
                }
                Ok(desired)
            }
        }
    }
}

/// The RBAC facts, with the store objects are read from when another object's change makes them
/// wanted.
struct RbacFollow {
    granting: Granting,
    local: ObjectStore,
    /// The key prefixes of ClusterRoles and ClusterRoleBindings (every logical cluster).
    roles: String,
    bindings: String,
}

impl RbacFollow {
    /// The changes of the replication's lanes an RBAC change makes.
    async fn step(&mut self, (of, change): RbacChange) -> Result<Vec<(usize, Desired)>, ApiError> {
        // Nothing of a deletion but the key counts, and `system:` clusters are never replicated:
        // neither is decoded.
        if !replicable(&change.id) {
            return Ok(Vec::new());
        }
        let id = change.id.clone();
        let object = if change.deleted {
            None
        } else {
            Some(change.object(&self.local)?)
        };
        let rechecks = self.granting.apply(of, id, object.as_ref());
        self.recheck(rechecks).await
    }

    /// Looks at `rechecks` again; the changes of the replication's lanes.
    async fn recheck(&mut self, rechecks: Vec<Recheck>) -> Result<Vec<(usize, Desired)>, ApiError> {
        let mut desired = Vec::new();
        let bindings = RbacKind::ClusterRoleBindings;
        for recheck in rechecks {
            match recheck {
                Recheck::Object(kind, id, now) => {
                    desired.extend(self.granting.settle(kind, id, now.as_ref()));
                }
                Recheck::StoredRole(id) => {
                    let stored = read_role(&self.local, &self.roles, &id).await?;
                    let kind = RbacKind::ClusterRoles;
                    desired.extend(self.granting.settle(kind, id, stored.as_ref()));
                }
                Recheck::BindingsOf(role) => {
                    let scope = format!("{}{}/", self.bindings, role.cluster);
                    let page = self
                        .local
                        .list(ListRequest::everything(&scope), &|_| true)
                        .await?;
                    let mut seen = BTreeSet::new();
                    for binding in &page.items {
                        if let Some(id) = ObjectId::of(binding)
                            && role_of(binding, &id).as_ref() == Some(&role)
                        {
                            seen.insert(id.clone());
                            desired.extend(self.granting.settle(bindings, id, Some(binding)));
                        }
                    }
                    for id in self.granting.copied_bindings_of(&role) {
                        if !seen.contains(&id) {
                            desired.extend(self.granting.settle(bindings, id, None));
                        }
                    }
                }
            }
        }
        Ok(desired.into_iter().map(after_routing).collect())
    }
}

/// The stored ClusterRole `id` (under `prefix`, every logical cluster), if it exists.
async fn read_role(
    local: &ObjectStore,
    prefix: &str,
    id: &ObjectId,
) -> Result<Option<Value>, ApiError> {
    let what = ObjectRef {
        group: "rbac.authorization.k8s.io",
        resource: "clusterroles",
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

    /// The replication of a shard's RBAC as `granting` follows it, over an in-memory store.
    #[derive(Default)]
    struct Both {
        store: BTreeMap<(bool, ObjectId), Value>,
        granting: Granting,
    }

    impl Both {
        fn new() -> Both {
            Both::default()
        }

        fn apply(&mut self, of: RbacKind, deleted: bool, object: &Value) {
            let id = ObjectId::of(object).unwrap();
            let key = (of == RbacKind::ClusterRoles, id.clone());
            if deleted {
                self.store.remove(&key);
            } else {
                self.store.insert(key, object.clone());
            }
            let rechecks = self.granting.apply(of, id, (!deleted).then_some(object));
            self.recheck(rechecks);
        }

        fn mark(&mut self, cluster: &str, marked: bool) {
            let rechecks = self.granting.mark(cluster, marked);
            self.recheck(rechecks);
        }

        fn recheck(&mut self, rechecks: Vec<Recheck>) {
            let (store, granting) = (&self.store, &mut self.granting);
            for recheck in rechecks {
                match recheck {
                    Recheck::Object(kind, id, now) => {
                        granting.settle(kind, id, now.as_ref());
                    }
                    Recheck::StoredRole(id) => {
                        let stored = store.get(&(true, id.clone())).cloned();
                        granting.settle(RbacKind::ClusterRoles, id, stored.as_ref());
                    }
                    Recheck::BindingsOf(role) => {
                        let of_role: Vec<(ObjectId, Value)> = store
                            .iter()
                            .filter(|((is_role, id), b)| {
                                !is_role && role_of(b, id).as_ref() == Some(&role)
                            })
                            .map(|((_, id), b)| (id.clone(), b.clone()))
                            .collect();
                        let bindings = RbacKind::ClusterRoleBindings;
                        for id in granting.copied_bindings_of(&role) {
                            granting.settle(bindings, id, None);
                        }
                        for (id, binding) in of_role {
                            granting.settle(bindings, id, Some(&binding));
                        }
                    }
                }
            }
        }

        fn copies(&self, kind: RbacKind) -> Vec<String> {
            self.granting.copies[kind.lane()]
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
        both.apply(roles, false, &system);
        assert!(
            both.copies(roles).is_empty(),
            "system: clusters are left out"
        );
    }

    fn access(urls: &[&str], verbs: &[&str]) -> Value {
        json!({"nonResourceURLs": urls, "verbs": verbs})
    }

    #[test]
    fn the_access_rule_matches_access_on_the_root_paths_only() {
        let grants = |rule: Value| grants_access(&role("c", "r", rule));
        assert!(grants(access(&["/"], &["access"])));
        assert!(grants(access(&["*"], &["access"])));
        assert!(grants(access(&["/*"], &["*"])));
        assert!(grants(access(&["/healthz", "/"], &["get", "access"])));
        assert!(!grants(access(&["/api"], &["access"])));
        assert!(!grants(access(&["/api/*"], &["*"])));
        assert!(!grants(access(&["/"], &["get"])));
        // Resources, every verb: no non-resource path, so no `access`.
        assert!(!grants(
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
        ));
        assert!(!grants_across_shards(&role(
            "c",
            "r",
            access(&["/"], &["access"])
        )));
    }

    #[test]
    fn access_roles_follow_the_marking_of_their_cluster() {
        let (roles, bindings) = (RbacKind::ClusterRoles, RbacKind::ClusterRoleBindings);
        let mut both = Both::new();
        let enter = role("c", "enter", access(&["/"], &["access"]));
        both.apply(roles, false, &enter);
        both.apply(bindings, false, &binding("c", "alice", "enter"));
        both.apply(roles, false, &role("d", "enter", access(&["*"], &["*"])));
        both.apply(bindings, false, &binding("d", "alice", "enter"));
        assert!(both.copies(roles).is_empty(), "no cluster is marked");
        both.mark("c", true);
        assert_eq!(both.copies(roles), [r#"c/enter "ClusterRole""#]);
        assert_eq!(both.copies(bindings), [r#"c/alice "ClusterRoleBinding""#]);
        // A binding of a marked cluster's access role is copied when it comes, and goes when it
        // is deleted.
        both.apply(bindings, false, &binding("c", "bob", "enter"));
        assert_eq!(both.copies(bindings).len(), 2);
        both.apply(bindings, true, &binding("c", "bob", "enter"));
        assert_eq!(both.copies(bindings), [r#"c/alice "ClusterRoleBinding""#]);
        // The role stops granting access: it and its bindings go, and come back.
        both.apply(roles, false, &role("c", "enter", read_rule()));
        assert!(both.copies(roles).is_empty());
        assert!(both.copies(bindings).is_empty());
        both.apply(roles, false, &enter);
        assert_eq!(both.copies(bindings).len(), 1);
        // The cluster no longer marked: nothing of it stays.
        both.mark("c", false);
        assert!(both.copies(roles).is_empty());
        assert!(both.copies(bindings).is_empty());
        both.mark("c", true);
        both.apply(roles, true, &enter);
        assert!(both.copies(roles).is_empty());
        assert!(both.copies(bindings).is_empty());
        // `system:` clusters are never marked.
        both.apply(
            roles,
            false,
            &role("system:admin", "enter", access(&["/"], &["access"])),
        );
        both.mark("system:admin", true);
        assert!(both.copies(roles).is_empty());
    }

    #[test]
    fn bindings_of_bootstrap_access_roles_follow_the_marking_unless_the_cluster_has_its_own() {
        let (roles, bindings) = (RbacKind::ClusterRoles, RbacKind::ClusterRoleBindings);
        let mut both = Both::new();
        both.granting.bootstrap_access = bootstrap_access_roles();
        let bootstrap = &both.granting.bootstrap_access;
        assert!(bootstrap.contains("cluster-admin"), "{bootstrap:?}");
        assert!(
            bootstrap.contains("system:kcp:workspace:access"),
            "{bootstrap:?}"
        );
        assert!(!bootstrap.contains("admin"), "{bootstrap:?}");
        both.apply(
            bindings,
            false,
            &binding("c", "workspace-admin", "cluster-admin"),
        );
        both.apply(bindings, false, &binding("c", "viewer", "view"));
        assert!(both.copies(bindings).is_empty(), "no cluster is marked");
        both.mark("c", true);
        assert_eq!(
            both.copies(bindings),
            [r#"c/workspace-admin "ClusterRoleBinding""#]
        );
        assert!(
            both.copies(roles).is_empty(),
            "a bootstrap role is every shard's own"
        );
        let enter = binding("c", "enter", "system:kcp:workspace:access");
        both.apply(bindings, false, &enter);
        assert_eq!(both.copies(bindings).len(), 2);
        both.apply(bindings, true, &enter);
        // The cluster's own role of that name is the one bound: granting no access, its binding
        // goes; granting access, both are copied; deleted, the bootstrap role is bound again.
        both.apply(roles, false, &role("c", "cluster-admin", read_rule()));
        assert!(both.copies(bindings).is_empty());
        let own = role("c", "cluster-admin", access(&["*"], &["*"]));
        both.apply(roles, false, &own);
        assert_eq!(both.copies(roles), [r#"c/cluster-admin "ClusterRole""#]);
        assert_eq!(both.copies(bindings).len(), 1);
        both.apply(roles, true, &own);
        assert!(both.copies(roles).is_empty());
        assert_eq!(both.copies(bindings).len(), 1);
        both.mark("c", false);
        assert!(both.copies(bindings).is_empty());
    }
}
