//! The default policy grants what Kubernetes' defaults grant, and no more.

use kcp_rbac::{Attributes, PolicyIndex, User, bootstrap};
use serde_json::Value;

use crate::common::*;

fn defaults_with(extra: Vec<Value>) -> PolicyIndex {
    let mut objects = bootstrap::default_policy();
    objects.extend(extra);
    index(&objects)
}

fn can(policy: &PolicyIndex, who: &User, verb: &str, resource: &str) -> bool {
    policy
        .authorize(&request(who, verb, resource, "team", "x"))
        .is_allowed()
}

fn get_path(policy: &PolicyIndex, who: &User, path: &str) -> bool {
    get_path_with(policy, who, "get", path)
}

fn get_path_with(policy: &PolicyIndex, who: &User, verb: &str, path: &str) -> bool {
    policy
        .authorize(&Attributes::non_resource(who.clone(), verb, path))
        .is_allowed()
}

#[test]
fn authenticated_users_discover_and_ask_about_themselves_only() {
    let policy = defaults_with(Vec::new());
    for path in [
        "/api",
        "/api/v1",
        "/apis/apps/v1",
        "/openapi/v3",
        "/version",
        "/healthz",
    ] {
        assert!(get_path(&policy, &bob(), path), "{path}");
    }
    assert!(!get_path(&policy, &bob(), "/metrics"));
    assert!(can(
        &policy,
        &bob(),
        "create",
        "authorization.k8s.io:selfsubjectaccessreviews"
    ));
    assert!(can(
        &policy,
        &bob(),
        "create",
        "authorization.k8s.io:selfsubjectrulesreviews"
    ));
    assert!(can(
        &policy,
        &bob(),
        "create",
        "authentication.k8s.io:selfsubjectreviews"
    ));
    assert!(!can(
        &policy,
        &bob(),
        "create",
        "authorization.k8s.io:subjectaccessreviews"
    ));
    assert!(!can(&policy, &bob(), "list", "configmaps"));
    assert!(!can(&policy, &bob(), "list", "namespaces"));
}

#[test]
fn anonymous_users_see_public_information_only() {
    let policy = defaults_with(Vec::new());
    let anonymous = User::new("system:anonymous", &["system:unauthenticated"]);
    for path in ["/healthz", "/livez", "/readyz", "/version", "/version/"] {
        assert!(get_path(&policy, &anonymous, path), "{path}");
    }
    assert!(!get_path(&policy, &anonymous, "/api"));
    assert!(!get_path(&policy, &anonymous, "/healthz/etcd"));
    assert!(!can(
        &policy,
        &anonymous,
        "create",
        "authorization.k8s.io:selfsubjectaccessreviews"
    ));
}

#[test]
fn masters_hold_cluster_admin_and_kcp_admins_only_in_system_admin_policy() {
    let masters = User::new("root", &["system:masters"]);
    let kcp_admin = User::new("admin", &["system:kcp:admin"]);
    let defaults = defaults_with(Vec::new());
    assert!(can(
        &defaults,
        &masters,
        "deletecollection",
        "apiextensions.k8s.io:customresourcedefinitions"
    ));
    assert!(get_path(&defaults, &masters, "/metrics"));
    assert!(!can(&defaults, &kcp_admin, "get", "configmaps"));
    let system_admin = index(&bootstrap::system_admin_policy());
    assert!(can(
        &system_admin,
        &kcp_admin,
        "escalate",
        "rbac.authorization.k8s.io:clusterroles"
    ));
    assert_eq!(
        system_admin
            .authorize(&Attributes::non_resource(kcp_admin, "get", "/metrics"))
            .reason(),
        r#"RBAC: allowed by ClusterRoleBinding "system:kcp:admin:cluster-admin" of ClusterRole "cluster-admin" to Group "system:kcp:admin""#
    );
}

#[test]
fn logical_cluster_admins_hold_upstreams_roles_everywhere() {
    let scheduler = User::new("shard-1", &[bootstrap::LOGICAL_CLUSTER_ADMIN]);
    let external = User::new("operator", &[bootstrap::EXTERNAL_LOGICAL_CLUSTER_ADMIN]);
    let system_admin = index(&bootstrap::system_admin_policy());
    assert!(can(
        &system_admin,
        &scheduler,
        "create",
        "core.kcp.io:logicalclusters"
    ));
    assert!(can(
        &system_admin,
        &scheduler,
        "update",
        "core.kcp.io:logicalclusters/status"
    ));
    assert!(can(
        &system_admin,
        &scheduler,
        "get",
        "tenancy.kcp.io:workspaces"
    ));
    assert!(!can(
        &system_admin,
        &scheduler,
        "create",
        "tenancy.kcp.io:workspaces"
    ));
    assert!(!can(&system_admin, &scheduler, "get", "secrets"));
    assert!(can(&system_admin, &external, "get", "secrets"));
    assert!(can(
        &system_admin,
        &external,
        "patch",
        "tenancy.kcp.io:workspaces"
    ));
    assert!(!can(
        &system_admin,
        &external,
        "create",
        "core.kcp.io:logicalclusters"
    ));
    assert!(get_path_with(&system_admin, &external, "access", "/"));
    let defaults = defaults_with(Vec::new());
    assert!(!can(
        &defaults,
        &scheduler,
        "create",
        "core.kcp.io:logicalclusters"
    ));
}

/// Binds `role` to bob in namespace `team` and checks what he may and may not do there.
fn check_role(role: &str, allowed: &[(&str, &str)], refused: &[(&str, &str)]) {
    let policy = defaults_with(vec![binding("team", "b", "ClusterRole", role, user("bob"))]);
    for (verb, resource) in allowed {
        assert!(
            can(&policy, &bob(), verb, resource),
            "{role} may {verb} {resource}"
        );
    }
    for (verb, resource) in refused {
        assert!(
            !can(&policy, &bob(), verb, resource),
            "{role} may not {verb} {resource}"
        );
    }
}

#[test]
fn view_reads_but_not_secrets() {
    check_role(
        "view",
        &[
            ("get", "configmaps"),
            ("watch", "serviceaccounts"),
            ("list", "events"),
            ("get", "namespaces"),
            ("list", "apps:deployments"),
            ("get", "apps:deployments/scale"),
            ("get", "batch:jobs/status"),
        ],
        &[
            ("get", "secrets"),
            ("create", "configmaps"),
            ("get", "rbac.authorization.k8s.io:roles"),
            ("list", "coordination.k8s.io:leases"),
        ],
    );
}

#[test]
fn edit_writes_workloads_and_secrets_but_not_rbac() {
    check_role(
        "edit",
        &[
            ("create", "secrets"),
            ("get", "secrets"),
            ("delete", "configmaps"),
            ("patch", "serviceaccounts"),
            ("create", "serviceaccounts/token"),
            ("impersonate", "serviceaccounts"),
            ("update", "coordination.k8s.io:leases"),
            ("deletecollection", "events"),
            ("create", "apps:deployments"),
            ("get", "configmaps"),
        ],
        &[
            ("create", "rbac.authorization.k8s.io:roles"),
            ("create", "authorization.k8s.io:localsubjectaccessreviews"),
            ("delete", "namespaces"),
        ],
    );
}

#[test]
fn admin_adds_roles_and_local_access_reviews() {
    check_role(
        "admin",
        &[
            ("create", "rbac.authorization.k8s.io:roles"),
            ("delete", "rbac.authorization.k8s.io:rolebindings"),
            ("create", "authorization.k8s.io:localsubjectaccessreviews"),
            ("create", "secrets"),
            ("get", "configmaps"),
        ],
        &[
            ("delete", "namespaces"),
            ("create", "apiextensions.k8s.io:customresourcedefinitions"),
            ("escalate", "rbac.authorization.k8s.io:roles"),
        ],
    );
}

#[test]
fn served_aggregated_roles_carry_their_rules_and_labels() {
    let objects = bootstrap::default_policy();
    let named = |name: &str| {
        objects
            .iter()
            .find(|o| o["metadata"]["name"] == name && o["kind"] == "ClusterRole")
            .expect("default role")
    };
    let policy = index(&objects);
    for name in ["admin", "edit", "view"] {
        let served: Vec<Value> = named(name)["rules"].as_array().expect("rules").clone();
        let effective: Vec<Value> = policy
            .cluster_role_rules(name)
            .expect("role")
            .iter()
            .map(|r| r.to_json())
            .collect();
        assert_eq!(served, effective, "{name}");
        assert!(!served.is_empty(), "{name}");
    }
    assert_eq!(
        named("edit")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert_eq!(
        named("view")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    assert_eq!(
        named("cluster-admin")["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );
    // admin holds everything edit and view hold.
    let admin = policy.cluster_role_rules("admin").expect("admin");
    let view = policy.cluster_role_rules("view").expect("view");
    assert!(view.iter().all(|rule| admin.contains(rule)));
}

#[test]
fn default_objects_are_complete_kubernetes_objects() {
    for object in bootstrap::system_admin_policy() {
        assert_eq!(object["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert!(object["metadata"]["name"].is_string());
        if object["kind"] == "ClusterRoleBinding" {
            assert_eq!(object["roleRef"]["kind"], "ClusterRole");
            assert!(!object["subjects"].as_array().expect("subjects").is_empty());
        }
    }
}
