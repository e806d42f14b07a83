//! The RBAC authorizer: who is named by which binding, where a binding reaches, aggregation, and
//! the reasons given.

use kcp_rbac::{
    Attributes, Decision, Policy, PolicyIndex, RoleRef, User, bootstrap, service_account_groups,
    service_account_username,
};
use serde_json::json;

use crate::common::*;

fn allowed(policy: &PolicyIndex, attributes: &Attributes) -> bool {
    policy.authorize(attributes).is_allowed()
}

#[test]
fn cluster_role_binding_reaches_every_namespace_and_cluster_scope() {
    let policy = index(&[
        cluster_role(
            "reader",
            rules(&["get", "list"], "", &["configmaps", "namespaces"]),
        ),
        cluster_binding("read", "reader", user("bob")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "list", "configmaps", "a", "")
    ));
    assert!(allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "b", "x")
    ));
    assert!(allowed(
        &policy,
        &request(&bob(), "list", "namespaces", "", "")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "delete", "configmaps", "a", "x")
    ));
    let alice = User::new("alice", &["system:authenticated"]);
    assert!(!allowed(
        &policy,
        &request(&alice, "list", "configmaps", "a", "")
    ));
}

#[test]
fn allow_reason_names_binding_role_and_subject() {
    let policy = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding("read", "reader", user("bob")),
        role("ns", "local", rules(&["list"], "", &["configmaps"])),
        binding(
            "ns",
            "local-read",
            "Role",
            "local",
            group("system:authenticated"),
        ),
    ]);
    assert_eq!(
        policy.authorize(&request(&bob(), "get", "configmaps", "ns", "x")),
        Decision::Allow(
            r#"RBAC: allowed by ClusterRoleBinding "read" of ClusterRole "reader" to User "bob""#
                .into()
        )
    );
    assert_eq!(
        policy.authorize(&request(&bob(), "list", "configmaps", "ns", "")),
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "local-read/ns" of Role "local" to Group "system:authenticated""#
                .into()
        )
    );
}

#[test]
fn role_binding_reaches_only_its_namespace() {
    let policy = index(&[
        cluster_role("editor", rules(&["*"], "", &["configmaps"])),
        binding("team", "edit", "ClusterRole", "editor", user("bob")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "create", "configmaps", "team", "")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "create", "configmaps", "other", "")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "list", "configmaps", "", "")
    ));
}

#[test]
fn role_binding_uses_the_role_of_its_own_namespace() {
    let policy = index(&[
        role("a", "r", rules(&["get"], "", &["configmaps"])),
        role("b", "r", rules(&["get"], "", &["secrets"])),
        binding("a", "rb", "Role", "r", user("bob")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "a", "x")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "get", "secrets", "a", "x")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "get", "secrets", "b", "x")
    ));
}

#[test]
fn role_binding_grants_its_namespace_object() {
    // Kubernetes gives a request about namespace "team" the namespace "team".
    let policy = index(&[
        cluster_role("ns-reader", rules(&["get"], "", &["namespaces"])),
        binding("team", "rb", "ClusterRole", "ns-reader", user("bob")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "get", "namespaces", "team", "team")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "get", "namespaces", "", "other")
    ));
}

#[test]
fn groups_name_their_members() {
    let policy = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding("read", "reader", group("readers")),
    ]);
    let member = User::new("carol", &["readers"]);
    assert!(allowed(
        &policy,
        &request(&member, "get", "configmaps", "x", "y")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "x", "y")
    ));
}

#[test]
fn service_accounts_are_named_by_namespace_and_name() {
    let sa = |namespace: &str, name: &str| {
        let groups = service_account_groups(namespace);
        User::new(
            &service_account_username(namespace, name),
            &[&groups[0], &groups[1], "system:authenticated"],
        )
    };
    let policy = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        binding(
            "team",
            "explicit",
            "ClusterRole",
            "reader",
            json!([{"kind": "ServiceAccount", "namespace": "build", "name": "robot"}]),
        ),
        binding(
            "team",
            "implicit",
            "ClusterRole",
            "reader",
            json!([{"kind": "ServiceAccount", "name": "local"}]),
        ),
        cluster_binding(
            "nowhere",
            "reader",
            json!([{"kind": "ServiceAccount", "name": "local"}]),
        ),
        binding(
            "shared",
            "all-of-team",
            "ClusterRole",
            "reader",
            group("system:serviceaccounts:team"),
        ),
    ]);
    let get_in = |who: &User, namespace: &str| {
        policy.authorize(&request(who, "get", "configmaps", namespace, "x"))
    };
    assert_eq!(
        get_in(&sa("build", "robot"), "team").reason(),
        r#"RBAC: allowed by RoleBinding "explicit/team" of ClusterRole "reader" to ServiceAccount "robot/build""#
    );
    assert_eq!(
        get_in(&sa("team", "local"), "team").reason(),
        r#"RBAC: allowed by RoleBinding "implicit/team" of ClusterRole "reader" to ServiceAccount "local/team""#
    );
    // Without a namespace, a ClusterRoleBinding's service account names nobody.
    assert!(!get_in(&sa("team", "local"), "elsewhere").is_allowed());
    assert!(!get_in(&sa("build", "local"), "team").is_allowed());
    // Service-account groups are plain groups.
    assert!(get_in(&sa("team", "anyone"), "shared").is_allowed());
    assert!(!get_in(&sa("build", "robot"), "shared").is_allowed());
}

#[test]
fn unknown_subject_kinds_name_nobody() {
    let policy = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding("read", "reader", json!([{"kind": "Robot", "name": "bob"}])),
    ]);
    assert!(!allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "x", "y")
    ));
}

#[test]
fn first_matching_subject_of_a_binding_is_named() {
    let policy = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding(
            "read",
            "reader",
            json!([{"kind": "Group", "name": "system:authenticated"}, {"kind": "User", "name": "bob"}]),
        ),
    ]);
    assert_eq!(
        policy
            .authorize(&request(&bob(), "get", "configmaps", "x", "y"))
            .reason(),
        r#"RBAC: allowed by ClusterRoleBinding "read" of ClusterRole "reader" to Group "system:authenticated""#
    );
}

#[test]
fn paths_are_granted_by_cluster_role_bindings_only() {
    let metrics = json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]);
    let by_cluster = index(&[
        cluster_role("metrics", metrics.clone()),
        cluster_binding("m", "metrics", user("bob")),
    ]);
    let by_namespace = index(&[
        cluster_role("metrics", metrics),
        binding("default", "m", "ClusterRole", "metrics", user("bob")),
    ]);
    let get = Attributes::non_resource(bob(), "get", "/metrics");
    assert!(allowed(&by_cluster, &get));
    assert!(!allowed(&by_namespace, &get));
    assert!(!allowed(
        &by_cluster,
        &Attributes::non_resource(bob(), "post", "/metrics")
    ));
}

#[test]
fn missing_roles_are_the_reason_of_no_opinion() {
    let policy = index(&[
        cluster_binding("one", "gone", user("bob")),
        binding("ns", "two", "Role", "absent", user("bob")),
        binding("ns", "three", "Role", "absent", user("bob")),
    ]);
    assert_eq!(
        policy.authorize(&request(&bob(), "get", "configmaps", "", "x")),
        Decision::NoOpinion(
            r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#.into()
        )
    );
    let decision = policy.authorize(&request(&bob(), "get", "configmaps", "ns", "x"));
    assert_eq!(
        decision.reason(),
        r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, role.rbac.authorization.k8s.io "absent" not found]"#
    );
    assert_eq!(
        request(&bob(), "get", "configmaps", "ns", "x").forbidden_message(decision.reason()),
        r#"User "bob" cannot get resource "configmaps" in API group "" in the namespace "ns": RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, role.rbac.authorization.k8s.io "absent" not found]"#
    );
}

#[test]
fn a_missing_role_does_not_hide_a_grant() {
    let policy = index(&[
        cluster_binding("a-broken", "gone", user("bob")),
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding("b-works", "reader", user("bob")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "", "x")
    ));
}

#[test]
fn no_binding_means_no_opinion_without_reason() {
    let policy = index(&[]);
    assert_eq!(
        policy.authorize(&request(&bob(), "list", "configmaps", "default", "")),
        Decision::NoOpinion(String::new())
    );
}

#[test]
fn unsupported_role_reference_kinds_are_reported() {
    let mut odd = cluster_binding("odd", "x", user("bob"));
    odd["roleRef"]["kind"] = json!("Policy");
    let policy = index(&[odd]);
    assert_eq!(
        policy
            .authorize(&request(&bob(), "get", "configmaps", "", "x"))
            .reason(),
        r#"RBAC: unsupported role reference kind: "Policy""#
    );
}

#[test]
fn aggregated_roles_grant_what_they_collect() {
    let mut extra = cluster_role(
        "widgets-view",
        rules(&["get", "list"], "example.com", &["widgets"]),
    );
    extra["metadata"]["labels"] = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
    let mut objects = bootstrap::default_policy();
    objects.push(extra);
    objects.push(binding(
        "team",
        "viewers",
        "ClusterRole",
        "view",
        user("bob"),
    ));
    objects.push(binding(
        "team",
        "editors",
        "ClusterRole",
        "edit",
        user("eve"),
    ));
    let policy = index(&objects);
    assert!(allowed(
        &policy,
        &request(&bob(), "list", "example.com:widgets", "team", "")
    ));
    let eve = User::new("eve", &[]);
    assert!(allowed(
        &policy,
        &request(&eve, "get", "example.com:widgets", "team", "w")
    ));
    let view = policy.cluster_role_rules("view").expect("view exists");
    assert!(view.iter().any(|r| r.resources == ["widgets"]));
}

#[test]
fn later_objects_replace_earlier_ones() {
    let mut objects = bootstrap::default_policy();
    objects.push(cluster_role("view", rules(&["get"], "", &["secrets"])));
    objects.push(cluster_binding("v", "view", user("bob")));
    let policy = index(&objects);
    assert!(allowed(
        &policy,
        &request(&bob(), "get", "secrets", "x", "s")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "x", "c")
    ));
}

#[test]
fn objects_of_other_kinds_are_refused() {
    let err = PolicyIndex::build(&[json!({"kind": "ConfigMap"})]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#""ConfigMap" is not an RBAC kind (Role, ClusterRole, RoleBinding, ClusterRoleBinding)"#
    );
}

#[test]
fn rules_for_collects_cluster_and_namespace_rules() {
    let policy = index(&[
        cluster_role("c", rules(&["get"], "", &["configmaps"])),
        role("ns", "r", rules(&["list"], "", &["secrets"])),
        cluster_binding("c", "c", user("bob")),
        binding("ns", "r", "Role", "r", user("bob")),
        binding("ns", "broken", "Role", "gone", user("bob")),
    ]);
    let cluster = policy.rules_for(&bob(), "");
    assert_eq!(cluster.rules.len(), 1);
    assert!(cluster.errors.is_empty());
    let namespaced = policy.rules_for(&bob(), "ns");
    assert_eq!(namespaced.rules.len(), 2);
    assert_eq!(
        namespaced.errors,
        [r#"role.rbac.authorization.k8s.io "gone" not found"#]
    );
}

#[test]
fn role_references_resolve_by_kind_and_namespace() {
    let policy = index(&[
        cluster_role("c", rules(&["get"], "", &["configmaps"])),
        role("ns", "r", rules(&["list"], "", &["secrets"])),
    ]);
    let reference = |kind: &str, name: &str| RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    };
    assert_eq!(
        policy
            .role_ref_rules(&reference("ClusterRole", "c"), "any")
            .map(<[_]>::len),
        Ok(1)
    );
    assert_eq!(
        policy
            .role_ref_rules(&reference("Role", "r"), "ns")
            .map(<[_]>::len),
        Ok(1)
    );
    assert_eq!(
        policy.role_ref_rules(&reference("Role", "r"), "other"),
        Err(r#"role.rbac.authorization.k8s.io "r" not found"#.to_string())
    );
}

#[test]
fn a_slice_of_policies_answers_with_the_first_opinion() {
    let bootstrap_policy = index(&bootstrap::system_admin_policy());
    let local = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding("read", "reader", user("bob")),
    ]);
    let both = [&local, &bootstrap_policy];
    let kcp_admin = User::new("admin", &["system:kcp:admin", "system:authenticated"]);
    assert!(
        Policy::authorize(
            &both[..],
            &request(&kcp_admin, "delete", "secrets", "x", "y")
        )
        .is_allowed()
    );
    assert!(
        Policy::authorize(&both[..], &request(&bob(), "get", "configmaps", "x", "y")).is_allowed()
    );
    assert!(
        !Policy::authorize(&both[..], &request(&bob(), "get", "secrets", "x", "y")).is_allowed()
    );
    assert!(
        !local
            .authorize(&request(&kcp_admin, "delete", "secrets", "x", "y"))
            .is_allowed()
    );
    let held = Policy::rules_for(&both[..], &bob(), "");
    // bob's configmaps rule, plus system:basic-user, system:discovery, system:public-info-viewer.
    assert_eq!(held.rules.len(), 1 + 2 + 1 + 1);
}

#[test]
fn wildcard_and_subresource_rules_are_found_for_any_resource() {
    let policy = index(&[
        cluster_role(
            "status-writer",
            rules(&["update"], "*", &["*/status", "pods/log"]),
        ),
        cluster_role("everything-reader", rules(&["get"], "*", &["*"])),
        cluster_binding("s", "status-writer", user("bob")),
        cluster_binding("e", "everything-reader", group("readers")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "update", "apps:deployments/status", "ns", "d")
    ));
    assert!(allowed(
        &policy,
        &request(&bob(), "update", "pods/log", "ns", "p")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "update", "pods", "ns", "p")
    ));
    assert!(!allowed(
        &policy,
        &request(&bob(), "update", "apps:deployments/scale", "ns", "d")
    ));
    let reader = User::new("r", &["readers"]);
    assert!(allowed(
        &policy,
        &request(&reader, "get", "example.com:widgets/status", "", "w")
    ));
    assert!(!allowed(
        &policy,
        &request(&reader, "list", "configmaps", "", "")
    ));
}

#[test]
fn a_rule_with_resources_and_urls_grants_both() {
    let policy = index(&[
        cluster_role(
            "mixed",
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "nonResourceURLs": ["/metrics"]}]),
        ),
        cluster_binding("m", "mixed", user("bob")),
    ]);
    assert!(allowed(
        &policy,
        &request(&bob(), "get", "configmaps", "", "c")
    ));
    assert!(allowed(
        &policy,
        &Attributes::non_resource(bob(), "get", "/metrics")
    ));
}

#[test]
fn the_earliest_allowing_binding_is_named_whichever_subject_matched() {
    // "a" names bob's group and "b" bob himself; bindings are visited in name order.
    let policy = index(&[
        cluster_role("reader", rules(&["get"], "", &["configmaps"])),
        cluster_binding("b", "reader", user("bob")),
        cluster_binding("a", "reader", group("system:authenticated")),
        binding(
            "ns",
            "0-first-in-namespace",
            "ClusterRole",
            "reader",
            user("bob"),
        ),
    ]);
    assert_eq!(
        policy
            .authorize(&request(&bob(), "get", "configmaps", "ns", "c"))
            .reason(),
        r#"RBAC: allowed by ClusterRoleBinding "a" of ClusterRole "reader" to Group "system:authenticated""#
    );
}
