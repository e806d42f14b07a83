//! Writing roles and bindings: nobody grants more than they hold, unless allowed to escalate or
//! bind.

use kcp_rbac::escalation::{Escalation, may_bind, may_create_role};
use kcp_rbac::{PolicyIndex, User, bootstrap};
use serde_json::{Value, json};

use crate::common::*;

/// bob edits namespace `team` (through `edit`) and reads configmaps everywhere.
fn policy_of_bob(extra: Vec<Value>) -> PolicyIndex {
    let mut objects = bootstrap::default_policy();
    objects.extend([
        binding("team", "bob-edits", "ClusterRole", "edit", user("bob")),
        cluster_role("cm-reader", rules(&["get", "list"], "", &["configmaps"])),
        cluster_binding("bob-reads", "cm-reader", user("bob")),
    ]);
    objects.extend(extra);
    index(&objects)
}

fn new_role(namespace: &str, rules: Value) -> Value {
    role(namespace, "new", rules)
}

#[test]
fn holding_every_permission_lets_one_write_a_role() {
    let policy = policy_of_bob(Vec::new());
    let subset = new_role(
        "team",
        rules(&["get", "create"], "", &["secrets", "configmaps"]),
    );
    assert_eq!(may_create_role(&policy, &bob(), &subset, None), Ok(()));
    let cluster_wide = cluster_role("new", rules(&["list"], "", &["configmaps"]));
    assert_eq!(
        may_create_role(&policy, &bob(), &cluster_wide, None),
        Ok(())
    );
}

#[test]
fn missing_permissions_are_listed_as_kubernetes_lists_them() {
    let policy = policy_of_bob(Vec::new());
    let more = new_role(
        "other",
        json!([
            {"verbs": ["get", "list", "delete"], "apiGroups": [""], "resources": ["configmaps", "secrets"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]},
        ]),
    );
    let err = may_create_role(&policy, &bob(), &more, None).unwrap_err();
    assert_eq!(err.resource, "roles");
    assert_eq!(
        err.to_api_error().message,
        "roles.rbac.authorization.k8s.io \"new\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) \
         is attempting to grant RBAC permissions not currently held:\n\
         {APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n\
         {APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"a\"], Verbs:[\"get\"]}\n\
         {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"delete\"]}"
    );
    assert_eq!(err.to_api_error().code, 403);
}

#[test]
fn namespace_rules_count_only_in_their_namespace() {
    let policy = policy_of_bob(Vec::new());
    let secrets = rules(&["get"], "", &["secrets"]);
    assert!(may_create_role(&policy, &bob(), &new_role("team", secrets.clone()), None).is_ok());
    assert!(may_create_role(&policy, &bob(), &new_role("other", secrets.clone()), None).is_err());
    assert!(may_create_role(&policy, &bob(), &cluster_role("new", secrets), None).is_err());
}

#[test]
fn escalate_verb_allows_anything() {
    let policy = policy_of_bob(vec![
        cluster_role(
            "escalator",
            rules(
                &["escalate"],
                "rbac.authorization.k8s.io",
                &["clusterroles"],
            ),
        ),
        cluster_binding("bob-escalates", "escalator", user("bob")),
    ]);
    let everything = cluster_role("new", rules(&["*"], "*", &["*"]));
    assert_eq!(may_create_role(&policy, &bob(), &everything, None), Ok(()));
    // Escalating cluster roles is not escalating roles.
    let role_everything = new_role("team", rules(&["*"], "*", &["*"]));
    assert!(may_create_role(&policy, &bob(), &role_everything, None).is_err());
}

#[test]
fn escalate_restricted_to_a_name_applies_to_updates_of_that_role_only() {
    let mut named = rules(
        &["escalate"],
        "rbac.authorization.k8s.io",
        &["clusterroles"],
    );
    named[0]["resourceNames"] = json!(["new"]);
    let policy = policy_of_bob(vec![
        cluster_role("escalate-new", named),
        cluster_binding("bob-escalates-new", "escalate-new", user("bob")),
    ]);
    let old = cluster_role("new", json!([]));
    let everything = cluster_role("new", rules(&["*"], "*", &["*"]));
    assert!(may_create_role(&policy, &bob(), &everything, None).is_err());
    assert_eq!(
        may_create_role(&policy, &bob(), &everything, Some(&old)),
        Ok(())
    );
}

#[test]
fn masters_skip_the_check() {
    let policy = index(&[]);
    let root = User::new("root", &["system:masters"]);
    let everything = cluster_role("new", rules(&["*"], "*", &["*"]));
    assert_eq!(may_create_role(&policy, &root, &everything, None), Ok(()));
}

#[test]
fn garbage_collection_updates_skip_the_check() {
    let policy = index(&[]);
    let mut old = new_role("team", rules(&["*"], "*", &["*"]));
    old["metadata"]["resourceVersion"] = json!("7");
    let mut orphaned = old.clone();
    orphaned["metadata"]["ownerReferences"] = json!([{"name": "owner", "uid": "1"}]);
    orphaned["metadata"]["finalizers"] = json!(["example.com/x"]);
    assert_eq!(
        may_create_role(&policy, &bob(), &orphaned, Some(&old)),
        Ok(())
    );
    let mut changed = orphaned.clone();
    changed["rules"][0]["verbs"] = json!(["get"]);
    assert!(may_create_role(&policy, &bob(), &changed, Some(&old)).is_err());
}

#[test]
fn aggregation_rules_need_full_authority() {
    let policy = policy_of_bob(Vec::new());
    let mut aggregating = cluster_role("new", json!([]));
    aggregating["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]});
    let err = may_create_role(&policy, &bob(), &aggregating, None).unwrap_err();
    assert_eq!(err.cause, Escalation::AggregationRule);
    assert_eq!(
        err.to_api_error().message,
        "clusterroles.rbac.authorization.k8s.io \"new\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
    // Removing one needs the same.
    let plain = cluster_role("new", json!([]));
    assert!(may_create_role(&policy, &bob(), &plain, Some(&aggregating)).is_err());
    assert!(may_create_role(&policy, &bob(), &plain, None).is_ok());
    let admin = User::new("admin", &["system:kcp:admin"]);
    let kcp = index(&bootstrap::system_admin_policy());
    assert!(may_create_role(&kcp, &admin, &aggregating, None).is_ok());
}

#[test]
fn missing_roles_of_the_writer_are_mentioned() {
    let policy = index(&[cluster_binding("broken", "gone", user("bob"))]);
    let err = may_create_role(
        &policy,
        &bob(),
        &new_role("team", rules(&["get"], "", &["pods"])),
        None,
    )
    .unwrap_err();
    assert!(
        err.to_string().ends_with(
            "; resolution errors: [clusterrole.rbac.authorization.k8s.io \"gone\" not found]"
        ),
        "{err}"
    );
}

#[test]
fn binding_a_role_one_holds_is_allowed() {
    let policy = policy_of_bob(vec![role("team", "r", rules(&["get"], "", &["secrets"]))]);
    let bind_view = binding("team", "b", "ClusterRole", "view", user("alice"));
    assert_eq!(may_bind(&policy, &bob(), &bind_view, None), Ok(()));
    let bind_role = binding("team", "b", "Role", "r", user("alice"));
    assert_eq!(may_bind(&policy, &bob(), &bind_role, None), Ok(()));
}

#[test]
fn binding_a_role_one_does_not_hold_is_refused() {
    let policy = policy_of_bob(Vec::new());
    let bind_admin = binding("team", "b", "ClusterRole", "admin", user("bob"));
    let err = may_bind(&policy, &bob(), &bind_admin, None).unwrap_err();
    assert_eq!(err.resource, "rolebindings");
    let message = err.to_api_error().message;
    assert!(
        message
            .starts_with("rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"bob\""),
        "{message}"
    );
    assert!(
        message.contains(
            "{APIGroups:[\"rbac.authorization.k8s.io\"], Resources:[\"rolebindings\"], Verbs:"
        ),
        "{message}"
    );
    // Holding view in "team" is not holding it cluster-wide.
    let cluster_view = cluster_binding("b", "view", user("bob"));
    let err = may_bind(&policy, &bob(), &cluster_view, None).unwrap_err();
    assert_eq!(err.resource, "clusterrolebindings");
}

#[test]
fn bind_verb_allows_binding_that_role_only() {
    let mut bind_admin = rules(&["bind"], "rbac.authorization.k8s.io", &["clusterroles"]);
    bind_admin[0]["resourceNames"] = json!(["admin"]);
    let policy = policy_of_bob(vec![
        cluster_role("admin-binder", bind_admin),
        binding(
            "team",
            "bob-binds",
            "ClusterRole",
            "admin-binder",
            user("bob"),
        ),
    ]);
    let admin_in_team = binding("team", "b", "ClusterRole", "admin", user("alice"));
    assert_eq!(may_bind(&policy, &bob(), &admin_in_team, None), Ok(()));
    let admin_elsewhere = binding("other", "b", "ClusterRole", "admin", user("alice"));
    assert!(may_bind(&policy, &bob(), &admin_elsewhere, None).is_err());
    let cluster_admin = binding("team", "b", "ClusterRole", "cluster-admin", user("alice"));
    assert!(may_bind(&policy, &bob(), &cluster_admin, None).is_err());
}

#[test]
fn binding_a_missing_role_is_refused_with_the_lookup_error() {
    let policy = policy_of_bob(Vec::new());
    let missing = binding("team", "b", "Role", "nope", user("alice"));
    let err = may_bind(&policy, &bob(), &missing, None).unwrap_err();
    assert_eq!(
        err.cause,
        Escalation::RoleRef(r#"role.rbac.authorization.k8s.io "nope" not found"#.into())
    );
    assert_eq!(
        err.to_api_error().message,
        r#"rolebindings.rbac.authorization.k8s.io "b" is forbidden: role.rbac.authorization.k8s.io "nope" not found"#
    );
}

#[test]
fn checks_see_the_union_of_policies() {
    let kcp = index(&bootstrap::system_admin_policy());
    let local = index(&bootstrap::default_policy());
    let both = [&local, &kcp];
    let admin = User::new("admin", &["system:kcp:admin"]);
    let everything = cluster_role("new", rules(&["*"], "*", &["*"]));
    assert!(may_create_role(&local, &admin, &everything, None).is_err());
    assert_eq!(
        may_create_role(&both[..], &admin, &everything, None),
        Ok(())
    );
    let bind = cluster_binding("b", "cluster-admin", user("someone"));
    assert!(may_bind(&local, &admin, &bind, None).is_err());
    assert_eq!(may_bind(&both[..], &admin, &bind, None), Ok(()));
}
