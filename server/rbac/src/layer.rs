//! The ClusterRoles a logical cluster's policy holds when its RBAC is layered over kcp's bootstrap
//! policy (the RBAC objects of `system:admin`).
//!
//! kcp resolves a binding's ClusterRole in the binding's own logical cluster first and in
//! `system:admin` after, so a RoleBinding to `edit` works in a cluster that stores no `edit`, and
//! a cluster's own roles labelled `aggregate-to-edit` extend `edit` there (a CRD author's roles).
//! There can be thousands of logical clusters and most store little RBAC, so a cluster's index must
//! not copy the bootstrap roles wholesale: it holds its own ClusterRoles and, from the base, only
//! the roles its bindings refer to and the aggregated roles its own roles extend (those differ from
//! the base's and so must be answered locally, by the authorizer and by the escalation checks).
//! Every other base role reads the same in every cluster, and the bootstrap index answers for it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::aggregation::Aggregation;
use crate::rule::PolicyRule;

/// The ClusterRoles a layered index holds, in name order, with their effective rules: every
/// `local` role (replacing a base role of the same name); the base roles named in `referenced`
/// that `local` does not define; and the base aggregated roles whose selectors pick a local role,
/// directly or through other aggregated roles. Aggregation runs over the base and local roles
/// together, and the base is not even looked at when there are neither local ClusterRoles nor
/// references.
pub(crate) fn cluster_roles<'a>(
    local: &BTreeMap<&'a str, &'a Value>,
    referenced: &BTreeSet<&'a str>,
    base: &[&'a Value],
) -> Vec<(&'a str, Vec<PolicyRule>)> {
    // Name -> (role, defined locally). A local role hides the base role of its name.
    let mut visible: BTreeMap<&'a str, (&'a Value, bool)> = local
        .iter()
        .map(|(name, role)| (*name, (*role, true)))
        .collect();
    if !visible.is_empty() || !referenced.is_empty() {
        let base_roles = base
            .iter()
            .filter(|object| object.get("kind").and_then(Value::as_str) == Some("ClusterRole"));
        for role in base_roles {
            let name = role
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // As in a plain index, a later object replaces an earlier one of its name.
            if !visible.get(name).is_some_and(|(_, local)| *local) {
                visible.insert(name, (role, false));
            }
        }
    }
    let roles: Vec<&Value> = visible.values().map(|(role, _)| *role).collect();
    let is_local: Vec<bool> = visible.values().map(|(_, local)| *local).collect();
    let aggregation = Aggregation::of(&roles);
    let extended = aggregation.reaching(&is_local);
    visible
        .keys()
        .zip(extended)
        .zip(aggregation.effective_rules())
        .filter(|((name, extended), _)| *extended || referenced.contains(*name))
        .map(|((name, _), rules)| (*name, rules))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::attributes::{Attributes, ResourceAttributes, User};
    use crate::bootstrap;
    use crate::escalation::may_bind;
    use crate::index::{PolicyIndex, RoleRef};
    use crate::policy::Policy;
    use crate::rule::PolicyRule;

    const RBAC: &str = "rbac.authorization.k8s.io";

    fn base_objects() -> Vec<serde_json::Value> {
        bootstrap::system_admin_policy()
    }

    fn layered(objects: &[serde_json::Value], base: &[serde_json::Value]) -> PolicyIndex {
        let base: Vec<&serde_json::Value> = base.iter().collect();
        match PolicyIndex::build_layered(objects, &base) {
            Ok(index) => index,
            Err(error) => panic!("layered index: {error}"),
        }
    }

    fn bootstrap_index(base: &[serde_json::Value]) -> PolicyIndex {
        match PolicyIndex::build(base) {
            Ok(index) => index,
            Err(error) => panic!("bootstrap index: {error}"),
        }
    }

    fn role_binding(name: &str, cluster_role: &str, user: &str) -> serde_json::Value {
        json!({
            "kind": "RoleBinding",
            "metadata": {"namespace": "default", "name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"kind": "User", "apiGroup": RBAC, "name": user}],
        })
    }

    fn widgets_role(name: &str, label: &str, verbs: &[&str]) -> serde_json::Value {
        json!({
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {label: "true"}},
            "rules": [{"verbs": verbs, "apiGroups": ["example.com"], "resources": ["widgets"]}],
        })
    }

    fn can(index: &PolicyIndex, user: &str, verb: &str, group: &str, resource: &str) -> bool {
        let attributes = Attributes::resource(
            User::new(user, &["system:authenticated"]),
            verb,
            ResourceAttributes {
                api_group: group.into(),
                resource: resource.into(),
                namespace: "default".into(),
                ..ResourceAttributes::default()
            },
        );
        index.authorize(&attributes).is_allowed()
    }

    fn cluster_role_ref(name: &str) -> RoleRef {
        RoleRef {
            api_group: RBAC.into(),
            kind: "ClusterRole".into(),
            name: name.into(),
        }
    }

    #[test]
    fn bindings_to_roles_the_cluster_lacks_use_the_base_role() {
        let base = base_objects();
        let index = layered(&[role_binding("b", "edit", "alice")], &base);
        assert!(can(&index, "alice", "create", "", "configmaps"));
        assert!(can(&index, "alice", "get", "apps", "deployments"));
        assert!(!can(&index, "alice", "create", RBAC, "rolebindings"));
        let edit = bootstrap_index(&base)
            .cluster_role_rules("edit")
            .map(<[_]>::to_vec);
        assert_eq!(index.cluster_role_rules("edit").map(<[_]>::to_vec), edit);
        // Only what the binding refers to was taken from the base.
        assert!(index.cluster_role_rules("view").is_none());
        assert!(index.cluster_role_rules("cluster-admin").is_none());
    }

    #[test]
    fn base_bindings_are_not_part_of_the_cluster() {
        let base = base_objects();
        let index = layered(&[role_binding("b", "view", "alice")], &base);
        let admin = User::new("root", &[bootstrap::KCP_ADMIN_GROUP]);
        assert!(index.rules_for(&admin, "default").rules.is_empty());
        assert!(
            index
                .rules_for(&User::new("bob", &["system:masters"]), "")
                .rules
                .is_empty()
        );
    }

    #[test]
    fn local_roles_extend_base_aggregated_roles_transitively() {
        let base = base_objects();
        let objects = [
            widgets_role("widgets-view", bootstrap::AGGREGATE_TO_VIEW, &["get"]),
            widgets_role("widgets-edit", bootstrap::AGGREGATE_TO_EDIT, &["create"]),
            role_binding("viewers", "view", "viola"),
            role_binding("editors", "edit", "eddie"),
            role_binding("admins", "admin", "ada"),
        ];
        let index = layered(&objects, &base);
        assert!(can(&index, "viola", "get", "example.com", "widgets"));
        assert!(!can(&index, "viola", "create", "example.com", "widgets"));
        for user in ["eddie", "ada"] {
            assert!(can(&index, user, "get", "example.com", "widgets"), "{user}");
            assert!(
                can(&index, user, "create", "example.com", "widgets"),
                "{user}"
            );
            assert!(can(&index, user, "create", "", "configmaps"), "{user}");
        }
        assert!(can(&index, "ada", "create", RBAC, "rolebindings"));
        assert!(!can(&index, "eddie", "create", RBAC, "rolebindings"));
    }

    #[test]
    fn extended_roles_are_held_even_when_nothing_binds_them() {
        // The escalation checks of a future binding to `edit` must see the extension.
        let base = base_objects();
        let objects = [widgets_role(
            "widgets-edit",
            bootstrap::AGGREGATE_TO_EDIT,
            &["create"],
        )];
        let index = layered(&objects, &base);
        let widgets = |name: &str| {
            index
                .cluster_role_rules(name)
                .is_some_and(|rules| rules.iter().any(|r| r.resources == ["widgets"]))
        };
        assert!(widgets("edit"));
        assert!(widgets("admin"));
        assert!(index.cluster_role_rules("view").is_none());
        assert!(index.cluster_role_rules("cluster-admin").is_none());
        // Another cluster's roles extend nothing here.
        let other = layered(&[role_binding("b", "edit", "eddie")], &base);
        assert!(!can(&other, "eddie", "create", "example.com", "widgets"));
    }

    #[test]
    fn a_local_role_replaces_the_base_role_of_its_name() {
        let base = base_objects();
        let objects = [
            json!({
                "kind": "ClusterRole",
                "metadata": {"name": "view"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}],
            }),
            role_binding("b", "view", "viola"),
            role_binding("e", "edit", "eddie"),
        ];
        let index = layered(&objects, &base);
        assert!(can(&index, "viola", "get", "", "secrets"));
        assert!(!can(&index, "viola", "get", "", "configmaps"));
        // `edit` aggregates the local `view` now, not the base one.
        assert!(can(&index, "eddie", "get", "", "secrets"));
        let missing = index.authorize(&Attributes::resource(
            User::new("nobody", &[]),
            "get",
            ResourceAttributes::default(),
        ));
        assert!(!missing.is_allowed());
    }

    #[test]
    fn bindings_to_roles_missing_everywhere_stay_broken() {
        let base = base_objects();
        let index = layered(&[role_binding("b", "nope", "alice")], &base);
        assert_eq!(
            index.rules_for(&User::new("alice", &[]), "default").errors,
            [r#"clusterrole.rbac.authorization.k8s.io "nope" not found"#]
        );
    }

    #[test]
    fn escalation_checks_resolve_base_roles_through_the_layers() {
        let base = base_objects();
        let bootstrap = bootstrap_index(&base);
        let viola = User::new("viola", &["system:authenticated"]);
        let new_binding = |role: &str| role_binding("new", role, "someone");
        // Viola holds `view` through a binding in the cluster: she may bind `view` (resolved from
        // the base by the bootstrap index, since the cluster holds no `view`), not `edit`.
        let local = layered(&[role_binding("v", "view", "viola")], &base);
        let policy = [&local, &bootstrap];
        assert_eq!(
            may_bind(&policy[..], &viola, &new_binding("view"), None),
            Ok(())
        );
        assert!(may_bind(&policy[..], &viola, &new_binding("edit"), None).is_err());
        let unbound = layered(&[], &base);
        let holder = layered(
            &[json!({
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "v"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "viola"}],
            })],
            &base,
        );
        assert!(
            unbound
                .role_ref_rules(&cluster_role_ref("view"), "default")
                .is_err()
        );
        assert_eq!(
            may_bind(
                &[&holder, &bootstrap][..],
                &viola,
                &new_binding("view"),
                None
            ),
            Ok(())
        );
    }

    #[test]
    fn escalation_checks_see_local_extensions_of_base_roles() {
        let base = base_objects();
        let bootstrap = bootstrap_index(&base);
        // Eddie holds exactly the base `edit` rules, through a role of his own.
        let edit_rules: Vec<serde_json::Value> = bootstrap
            .cluster_role_rules("edit")
            .unwrap_or_default()
            .iter()
            .map(PolicyRule::to_json)
            .collect();
        let objects = [
            json!({"kind": "ClusterRole", "metadata": {"name": "base-edit"}, "rules": edit_rules}),
            role_binding("e", "base-edit", "eddie"),
            widgets_role("widgets-edit", bootstrap::AGGREGATE_TO_EDIT, &["create"]),
        ];
        let local = layered(&objects, &base);
        let eddie = User::new("eddie", &[]);
        let binding = role_binding("new", "edit", "someone");
        // `edit` here includes widgets, which eddie does not hold.
        let refused = may_bind(&[&local, &bootstrap][..], &eddie, &binding, None);
        assert!(
            refused.is_err_and(|error| error.to_string().contains("widgets")),
            "binding the extended edit must be refused"
        );
        // In a cluster without the extension he may.
        let plain = layered(&objects[..2], &base);
        assert_eq!(
            may_bind(&[&plain, &bootstrap][..], &eddie, &binding, None),
            Ok(())
        );
    }

    #[test]
    fn role_references_resolve_in_the_local_layer_first() {
        let base = base_objects();
        let bootstrap = bootstrap_index(&base);
        let objects = [json!({
            "kind": "ClusterRole",
            "metadata": {"name": "view"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}],
        })];
        let local = layered(&objects, &base);
        let secrets =
            |rules: Vec<PolicyRule>| rules.len() == 1 && rules[0].resources == ["secrets"];
        let reference = cluster_role_ref("view");
        let local_first = [&local, &bootstrap][..].role_ref_rules(&reference, "default");
        assert!(local_first.is_ok_and(secrets));
    }
}
