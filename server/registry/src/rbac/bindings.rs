//! RoleBindings and ClusterRoleBindings: who (subjects) gets which role (`roleRef`).
//!
//! Defaulting and validation follow kube's `rbac/v1` defaults and `ValidateRoleBinding` /
//! `ValidateClusterRoleBinding`: clients routinely omit `apiGroup` (`kubectl create rolebinding`
//! sends none for service accounts, and hand-written YAML often none at all), and the authorizer
//! must never meet a binding whose role reference or subjects it cannot interpret. The role
//! reference is immutable, as in Kubernetes, because the escalation check that let a binding be
//! written was made against the role it referred to then.

use kcp_apimachinery::validation::{NameRule, is_dns1123_subdomain, is_valid_path_segment_name};
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Value, json};

use super::GROUP;
use crate::table::{AGE, age};
use crate::{Column, Strategy};

pub(super) fn strategy(namespaced: bool) -> Box<dyn Strategy> {
    Box::new(Bindings { namespaced })
}

/// The strategy of RoleBindings (`namespaced`) and ClusterRoleBindings.
struct Bindings {
    namespaced: bool,
}

const SERVICE_ACCOUNT: &str = "ServiceAccount";
const USER: &str = "User";
const GROUP_KIND: &str = "Group";

fn text<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn subjects(object: &Value) -> &[Value] {
    object
        .get("subjects")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The three fields of a `roleRef` that identify the role.
fn role_ref(object: &Value) -> [&str; 3] {
    let role_ref = object.get("roleRef").unwrap_or(&Value::Null);
    ["apiGroup", "kind", "name"].map(|field| text(role_ref, field))
}

/// Sets `apiGroup` of `object` to `group` when it is missing or empty.
fn default_api_group(object: &mut Value, group: &str) {
    if let Some(fields) = object.as_object_mut()
        && fields
            .get("apiGroup")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        fields.insert("apiGroup".to_string(), json!(group));
    }
}

/// kube's `rbac/v1` defaults: the role reference and User and Group subjects are in the RBAC group;
/// ServiceAccount subjects stay in the core group (`""`).
fn set_defaults(object: &mut Value) {
    if let Some(role_ref) = object.get_mut("roleRef") {
        default_api_group(role_ref, GROUP);
    }
    let subjects = object.get_mut("subjects").and_then(Value::as_array_mut);
    for subject in subjects.into_iter().flatten() {
        if matches!(text(subject, "kind"), USER | GROUP_KIND) {
            default_api_group(subject, GROUP);
        }
    }
}

/// kube's `ValidateRoleBindingSubject` for subject `index`.
fn subject_errors(subject: &Value, index: usize, namespaced: bool) -> Vec<FieldError> {
    let path = |field: &str| format!("subjects[{index}].{field}");
    let (name, api_group) = (text(subject, "name"), text(subject, "apiGroup"));
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError::required(&path("name"), ""));
    }
    match text(subject, "kind") {
        SERVICE_ACCOUNT => {
            if !name.is_empty() {
                errors.extend(
                    is_dns1123_subdomain(name)
                        .iter()
                        .map(|message| FieldError::invalid(&path("name"), json!(name), message)),
                );
            }
            if !api_group.is_empty() {
                errors.push(FieldError::not_supported(
                    &path("apiGroup"),
                    json!(api_group),
                    &[""],
                ));
            }
            if !namespaced && text(subject, "namespace").is_empty() {
                errors.push(FieldError::required(&path("namespace"), ""));
            }
        }
        USER | GROUP_KIND if api_group != GROUP => errors.push(FieldError::not_supported(
            &path("apiGroup"),
            json!(api_group),
            &[GROUP],
        )),
        USER | GROUP_KIND => {}
        other => errors.push(FieldError::not_supported(
            &path("kind"),
            json!(other),
            &[SERVICE_ACCOUNT, USER, GROUP_KIND],
        )),
    }
    errors
}

impl Bindings {
    /// The role kinds a binding of this type may refer to.
    fn role_kinds(&self) -> &'static [&'static str] {
        if self.namespaced {
            &["Role", "ClusterRole"]
        } else {
            &["ClusterRole"]
        }
    }

    fn role_ref_errors(&self, object: &Value) -> Vec<FieldError> {
        let [api_group, kind, name] = role_ref(object);
        let mut errors = Vec::new();
        if api_group != GROUP {
            errors.push(FieldError::not_supported(
                "roleRef.apiGroup",
                json!(api_group),
                &[GROUP],
            ));
        }
        if !self.role_kinds().contains(&kind) {
            errors.push(FieldError::not_supported(
                "roleRef.kind",
                json!(kind),
                self.role_kinds(),
            ));
        }
        if name.is_empty() {
            errors.push(FieldError::required("roleRef.name", ""));
        }
        errors.extend(
            is_valid_path_segment_name(name)
                .iter()
                .filter(|_| !name.is_empty())
                .map(|message| FieldError::invalid("roleRef.name", json!(name), message)),
        );
        errors
    }

    /// The descriptions of the Role, Users, Groups and ServiceAccounts columns.
    fn descriptions(&self) -> [&'static str; 4] {
        if self.namespaced {
            [
                "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
                "Users in the roleBinding",
                "Groups in the roleBinding",
                "ServiceAccounts in the roleBinding",
            ]
        } else {
            [
                "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
                "Users in the clusterRoleBinding",
                "Groups in the clusterRoleBinding",
                "ServiceAccounts in the clusterRoleBinding",
            ]
        }
    }
}

impl Strategy for Bindings {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn prepare_for_create(&self, object: &mut Value) {
        set_defaults(object);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value, _subresource: Option<&str>) {
        set_defaults(new);
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = self.role_ref_errors(object);
        for (index, subject) in subjects(object).iter().enumerate() {
            errors.extend(subject_errors(subject, index, self.namespaced));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        if role_ref(new) != role_ref(old) {
            errors.push(FieldError::invalid(
                "roleRef",
                new.get("roleRef").cloned().unwrap_or(Value::Null),
                "cannot change roleRef",
            ));
        }
        errors
    }

    /// As kube's printer: the role, the age, and (with `-o wide`) the subjects by kind.
    fn columns(&self) -> Vec<Column> {
        let [role, users, groups, service_accounts] = self.descriptions();
        let wide = |name, description| Column {
            priority: 1,
            ..Column::new(name, "string", description)
        };
        vec![
            Column::new("Role", "string", role),
            AGE,
            wide("Users", users),
            wide("Groups", groups),
            wide("ServiceAccounts", service_accounts),
        ]
    }

    /// The age sits before the subject columns, where kube puts it.
    fn age_column(&self) -> bool {
        false
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        let [_, kind, name] = role_ref(object);
        let mut by_kind: [Vec<String>; 3] = Default::default();
        for subject in subjects(object) {
            let (list, entry) = match text(subject, "kind") {
                USER => (0, text(subject, "name").to_string()),
                GROUP_KIND => (1, text(subject, "name").to_string()),
                SERVICE_ACCOUNT => (
                    2,
                    format!("{}/{}", text(subject, "namespace"), text(subject, "name")),
                ),
                _ => continue,
            };
            by_kind[list].push(entry);
        }
        let mut cells = vec![
            json!(format!("{kind}/{name}")),
            json!(age(meta::creation_timestamp(object))),
        ];
        cells.extend(by_kind.iter().map(|names| json!(names.join(", "))));
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE_BINDING: Bindings = Bindings { namespaced: true };
    const CLUSTER_ROLE_BINDING: Bindings = Bindings { namespaced: false };

    fn messages(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn binding(kind: &str, name: &str, subjects: Value) -> Value {
        json!({
            "roleRef": {"apiGroup": GROUP, "kind": kind, "name": name},
            "subjects": subjects,
        })
    }

    #[test]
    fn defaulting_fills_in_api_groups_as_kube_v1() {
        let mut object = json!({
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "Group", "name": "devs", "apiGroup": ""},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ns"},
                {"kind": "User", "name": "bob", "apiGroup": "example.com"},
            ],
        });
        ROLE_BINDING.prepare_for_create(&mut object);
        assert_eq!(object["roleRef"]["apiGroup"], GROUP);
        assert_eq!(object["subjects"][0]["apiGroup"], GROUP);
        assert_eq!(object["subjects"][1]["apiGroup"], GROUP);
        assert!(object["subjects"][2].get("apiGroup").is_none());
        assert_eq!(object["subjects"][3]["apiGroup"], "example.com");
        assert_eq!(ROLE_BINDING.validate(&object).len(), 1);
        let mut update = json!({"roleRef": {"kind": "Role", "name": "r"}});
        ROLE_BINDING.prepare_for_update(&mut update, &json!({}), None);
        assert_eq!(update["roleRef"]["apiGroup"], GROUP);
    }

    #[test]
    fn role_references_are_checked() {
        let object =
            json!({"roleRef": {"apiGroup": "example.com", "kind": "Thing", "name": "a/b"}});
        assert_eq!(
            messages(ROLE_BINDING.validate(&object)),
            [
                r#"roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io""#,
                r#"roleRef.kind: Unsupported value: "Thing": supported values: "Role", "ClusterRole""#,
                r#"roleRef.name: Invalid value: "a/b": may not contain '/'"#,
            ]
        );
        assert_eq!(
            messages(CLUSTER_ROLE_BINDING.validate(&binding("Role", "", json!([])))),
            [
                r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#,
                "roleRef.name: Required value",
            ]
        );
        assert!(
            ROLE_BINDING
                .validate(&binding("Role", "r", json!([])))
                .is_empty()
        );
    }

    #[test]
    fn subjects_are_checked_by_kind() {
        let subjects = json!([
            {"kind": "User", "apiGroup": GROUP, "name": "alice"},
            {"kind": "Group", "apiGroup": "", "name": "devs"},
            {"kind": "ServiceAccount", "apiGroup": GROUP, "name": "Bad_Name"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
            {"kind": "Robot", "name": ""},
        ]);
        let namespaced = messages(ROLE_BINDING.validate(&binding("Role", "r", subjects.clone())));
        assert_eq!(
            namespaced,
            [
                r#"subjects[1].apiGroup: Unsupported value: "": supported values: "rbac.authorization.k8s.io""#,
                r#"subjects[2].name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
                r#"subjects[2].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: """#,
                "subjects[4].name: Required value",
                r#"subjects[4].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group""#,
            ]
        );
        // Cluster-wide, a service account must name its namespace.
        let cluster = messages(CLUSTER_ROLE_BINDING.validate(&binding(
            "ClusterRole",
            "c",
            json!([{"kind": "ServiceAccount", "name": "sa"}]),
        )));
        assert_eq!(cluster, ["subjects[0].namespace: Required value"]);
    }

    #[test]
    fn the_role_reference_cannot_change() {
        let old = binding("ClusterRole", "view", json!([]));
        let same = binding(
            "ClusterRole",
            "view",
            json!([{"kind": "User", "apiGroup": GROUP, "name": "a"}]),
        );
        assert!(ROLE_BINDING.validate_update(&same, &old).is_empty());
        let changed = binding("ClusterRole", "edit", json!([]));
        let errors = ROLE_BINDING.validate_update(&changed, &old);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            (errors[0].field.as_str(), errors[0].detail.as_str()),
            ("roleRef", "cannot change roleRef")
        );
    }

    #[test]
    fn cells_show_the_role_age_and_subjects_by_kind() {
        let object = json!({
            "metadata": {"name": "b", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "edit"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
                {"kind": "User", "name": "bob"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "web"},
            ],
        });
        let cells = ROLE_BINDING.cells(&object);
        assert_eq!(cells[0], "ClusterRole/edit");
        assert_eq!(cells[1], age(Some("2020-01-01T00:00:00Z")));
        assert_eq!(
            &cells[2..],
            [
                json!("alice, bob"),
                json!("devs"),
                json!("ci/builder, web/default")
            ]
        );
        let empty = CLUSTER_ROLE_BINDING
            .cells(&json!({"roleRef": {"kind": "ClusterRole", "name": "view"}}));
        assert_eq!(empty[0], "ClusterRole/view");
        assert_eq!(&empty[2..], [json!(""), json!(""), json!("")]);
    }

    #[test]
    fn columns_are_kubes_with_subjects_only_in_wide_output() {
        let columns = ROLE_BINDING.columns();
        let shown: Vec<(&str, u32)> = columns.iter().map(|c| (&*c.name, c.priority)).collect();
        assert_eq!(
            shown,
            [
                ("Role", 0),
                ("Age", 0),
                ("Users", 1),
                ("Groups", 1),
                ("ServiceAccounts", 1)
            ]
        );
        assert_eq!(columns.len(), ROLE_BINDING.cells(&json!({})).len());
        assert!(!ROLE_BINDING.age_column());
        assert_eq!(
            CLUSTER_ROLE_BINDING.columns()[2].description,
            "Users in the clusterRoleBinding"
        );
    }
}
