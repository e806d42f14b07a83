//! Roles and ClusterRoles: lists of policy rules, validated as kube's `ValidateRole` and
//! `ValidateClusterRole` do, so a rule the authorizer could not interpret never gets stored.
//!
//! Kubernetes registers no printer for the two kinds, so `kubectl get` shows its default table:
//! the name and a `Created At` column holding the RFC 3339 creation time, and no age column.

use jiff::Timestamp;
use kcp_apimachinery::labels::LabelSelector;
use kcp_apimachinery::validation::NameRule;
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Value, json};

use crate::{Column, Strategy};

pub(super) fn strategy(namespaced: bool) -> Box<dyn Strategy> {
    Box::new(Roles { namespaced })
}

/// The strategy of Roles (`namespaced`) and ClusterRoles.
struct Roles {
    namespaced: bool,
}

/// What Go's `time.Time{}.Format(time.RFC3339)` prints for an unset creation time.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// A list of strings as stored; anything else counts as empty, as an absent list.
fn list(object: &Value, field: &str) -> Vec<Value> {
    object
        .get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// kube's `ValidatePolicyRule` for rule `index`.
fn rule_errors(rule: &Value, index: usize, namespaced: bool) -> Vec<FieldError> {
    let path = |field: &str| format!("rules[{index}].{field}");
    let mut errors = Vec::new();
    if list(rule, "verbs").is_empty() {
        errors.push(FieldError::required(
            &path("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = list(rule, "nonResourceURLs");
    if !urls.is_empty() {
        if namespaced {
            errors.push(FieldError::invalid(
                &path("nonResourceURLs"),
                Value::from(urls.clone()),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        let names_resources = ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|field| !list(rule, field).is_empty());
        if names_resources {
            errors.push(FieldError::invalid(
                &path("nonResourceURLs"),
                Value::from(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errors;
    }
    if list(rule, "apiGroups").is_empty() {
        errors.push(FieldError::required(
            &path("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if list(rule, "resources").is_empty() {
        errors.push(FieldError::required(
            &path("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errors
}

/// kube's checks of a ClusterRole's `aggregationRule`: at least one selector, each a valid label
/// selector.
fn aggregation_rule_errors(rule: &Value) -> Vec<FieldError> {
    const FIELD: &str = "aggregationRule.clusterRoleSelectors";
    let selectors = list(rule, "clusterRoleSelectors");
    if selectors.is_empty() {
        return vec![FieldError::required(
            FIELD,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        )];
    }
    selectors
        .iter()
        .enumerate()
        .filter(|(_, selector)| LabelSelector::from_json(selector).is_err())
        .map(|(index, selector)| {
            FieldError::invalid(
                &format!("{FIELD}[{index}]"),
                selector.clone(),
                "invalid label selector.",
            )
        })
        .collect()
}

impl Strategy for Roles {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors: Vec<FieldError> = list(object, "rules")
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| rule_errors(rule, index, self.namespaced))
            .collect();
        if let Some(rule) = object
            .get("aggregationRule")
            .filter(|_| !self.namespaced)
            .filter(|rule| !rule.is_null())
        {
            errors.extend(aggregation_rule_errors(rule));
        }
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Created At",
            "date",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        )]
    }

    fn age_column(&self) -> bool {
        false
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        let created = meta::creation_timestamp(object)
            .and_then(|stamp| stamp.parse::<Timestamp>().ok())
            .map_or_else(
                || ZERO_TIME.to_string(),
                |stamp| stamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            );
        vec![json!(created)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(strategy: &Roles, object: Value) -> Vec<String> {
        strategy
            .validate(&object)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const ROLE: Roles = Roles { namespaced: true };
    const CLUSTER_ROLE: Roles = Roles { namespaced: false };

    #[test]
    fn well_formed_rules_pass() {
        let object = json!({"rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
        ]});
        assert!(messages(&ROLE, object.clone()).is_empty());
        let urls = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert!(messages(&CLUSTER_ROLE, urls).is_empty());
        assert!(messages(&ROLE, json!({})).is_empty());
    }

    #[test]
    fn resource_rules_need_verbs_groups_and_resources() {
        assert_eq!(
            messages(
                &ROLE,
                json!({"rules": [{}, {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, {"verbs": "get"}]})
            ),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
                "rules[2].verbs: Required value: verbs must contain at least one value",
                "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].resources: Required value: resource rules must supply at least one resource",
            ]
        );
    }

    #[test]
    fn non_resource_urls_are_cluster_wide_and_exclusive() {
        let rule = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"], "resources": ["pods"]}]});
        assert_eq!(
            messages(&ROLE, rule.clone()),
            [
                r#"rules[0].nonResourceURLs: Invalid value: []string{"/metrics"}: namespaced rules cannot apply to non-resource URLs"#,
                r#"rules[0].nonResourceURLs: Invalid value: []string{"/metrics"}: rules cannot apply to both regular resources and non-resource URLs"#,
            ]
        );
        assert_eq!(messages(&CLUSTER_ROLE, rule).len(), 1);
        // Resource names alone also mix the two kinds of rule.
        let names = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"], "resourceNames": ["n"]}]});
        assert_eq!(messages(&CLUSTER_ROLE, names).len(), 1);
    }

    #[test]
    fn aggregation_rules_need_valid_selectors() {
        let empty = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(
            messages(&CLUSTER_ROLE, empty),
            [
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
        let selectors = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
            {"matchExpressions": [{"key": "k", "operator": "Bogus"}]},
            {"matchLabels": {"bad key!": "x"}},
        ]}});
        let errors = CLUSTER_ROLE.validate(&selectors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "aggregationRule.clusterRoleSelectors[1]",
                "aggregationRule.clusterRoleSelectors[2]"
            ]
        );
        assert!(errors.iter().all(|e| e.detail == "invalid label selector."));
        // A null aggregation rule is no aggregation rule.
        assert!(messages(&CLUSTER_ROLE, json!({"aggregationRule": null})).is_empty());
    }

    #[test]
    fn created_at_is_rfc3339_and_there_is_no_age() {
        let object =
            json!({"metadata": {"name": "r", "creationTimestamp": "2024-03-01T10:20:30Z"}});
        assert_eq!(ROLE.cells(&object), [json!("2024-03-01T10:20:30Z")]);
        assert_eq!(CLUSTER_ROLE.cells(&json!({})), [json!(ZERO_TIME)]);
        let columns = ROLE.columns();
        assert_eq!(columns.len(), 1);
        assert_eq!(
            (&*columns[0].name, &*columns[0].type_),
            ("Created At", "date")
        );
        assert!(!ROLE.age_column());
        assert_eq!(ROLE.name_rule(), NameRule::PathSegment);
    }
}
