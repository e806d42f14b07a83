//! Builders for RBAC objects and requests, so each test shows only what it is about.

use kcp_rbac::{Attributes, PolicyIndex, ResourceAttributes, User};
use serde_json::{Value, json};

pub fn index(objects: &[Value]) -> PolicyIndex {
    PolicyIndex::build(objects).expect("RBAC objects index")
}

pub fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

pub fn role(namespace: &str, name: &str, rules: Value) -> Value {
    json!({"kind": "Role", "metadata": {"namespace": namespace, "name": name}, "rules": rules})
}

/// A ClusterRoleBinding to the ClusterRole `role`.
pub fn cluster_binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// A RoleBinding in `namespace` to a role of `kind` (`Role` or `ClusterRole`).
pub fn binding(namespace: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({
        "kind": "RoleBinding",
        "metadata": {"namespace": namespace, "name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": subjects,
    })
}

pub fn user(name: &str) -> Value {
    json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
}

pub fn group(name: &str) -> Value {
    json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
}

pub fn rules(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!([{"verbs": verbs, "apiGroups": [group], "resources": resources}])
}

/// A request by `who` for `verb` on `group/resource` (with `resource` possibly `res/sub`), in
/// `namespace` (empty: cluster scope), naming `name` (empty: none).
pub fn request(who: &User, verb: &str, resource: &str, namespace: &str, name: &str) -> Attributes {
    let (group, resource) = resource.rsplit_once(':').unwrap_or(("", resource));
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    Attributes::resource(
        who.clone(),
        verb,
        ResourceAttributes {
            api_group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
        },
    )
}

pub fn bob() -> User {
    User::new("bob", &["system:authenticated"])
}
