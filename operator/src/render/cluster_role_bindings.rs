//! The ClusterRoleBindings a Kubeconfig asks for (`authorization.clusterRoleBindings`), created
//! inside its kcp workspace: one per cluster role, named `<Kubeconfig UID>:<role>` and labelled
//! with the UID (so a Kubeconfig deleted and re-created under the same name never adopts the old
//! bindings), binding the group every certificate of the Kubeconfig carries.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::naming::{self, FIELD_MANAGER, LABEL_KUBECONFIG, LABEL_MANAGED_BY};

/// The label selector that finds every binding of the Kubeconfig with `uid`.
pub fn selector(uid: &str) -> String {
    format!("{LABEL_KUBECONFIG}={uid}")
}

/// The bindings for Kubeconfig `name` (with `uid`), one per cluster role, sorted by name.
pub fn desired(name: &str, uid: &str, cluster_roles: &[String]) -> Vec<ClusterRoleBinding> {
    let mut roles: Vec<&String> = cluster_roles.iter().collect();
    roles.sort();
    roles.dedup();
    roles
        .into_iter()
        .map(|role| ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{uid}:{role}")),
                labels: Some(BTreeMap::from([
                    (LABEL_KUBECONFIG.to_owned(), uid.to_owned()),
                    (LABEL_MANAGED_BY.to_owned(), FIELD_MANAGER.to_owned()),
                ])),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.clone(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Group".into(),
                name: naming::kubeconfig_group(name),
                namespace: None,
            }]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_binding_per_role_for_the_kubeconfig_group() {
        let roles = vec![
            "view".to_owned(),
            "cluster-admin".to_owned(),
            "view".to_owned(),
        ];
        let bindings = desired("alice", "u-1", &roles);
        let names: Vec<_> = bindings
            .iter()
            .map(|b| b.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["u-1:cluster-admin", "u-1:view"]);
        for binding in &bindings {
            let labels = binding.metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels[LABEL_KUBECONFIG], "u-1");
            let subjects = binding.subjects.clone().unwrap_or_default();
            assert_eq!(subjects.len(), 1);
            assert_eq!(subjects[0].kind, "Group");
            assert_eq!(subjects[0].name, "kubeconfig:alice");
            assert_eq!(binding.role_ref.kind, "ClusterRole");
        }
        assert_eq!(bindings[1].role_ref.name, "view");
        assert_eq!(selector("u-1"), "operator.kcp.io/kubeconfig=u-1");
    }

    #[test]
    fn no_roles_no_bindings() {
        assert!(desired("alice", "u-1", &[]).is_empty());
    }
}
