//! Which writes an admission configuration applies to: its rules (operations, API groups,
//! versions, resources with subresources, scope, resource names) and its namespace and object
//! label selectors. Webhooks and admission policies share these, as kube-apiserver's webhook
//! predicates (`predicates/rules`, `predicates/namespace`, `predicates/object`) and the policy
//! matcher share them upstream, with kube's semantics: `*` wildcards, `resource/subresource`,
//! scopes, cluster-scoped objects never excluded by a namespace selector (except a Namespace
//! itself, selected by its own labels), and an object selector that matches the new or the old
//! object.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::{v1, v1beta1};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcp_apimachinery::labels;
use kcp_registry::admission::Operation;
use serde_json::Value;

use crate::Attributes;

/// The wildcard of every rule list.
const ALL: &str = "*";

/// A rule in one shape for webhooks (v1 RuleWithOperations) and policies (v1 / v1beta1
/// NamedRuleWithOperations). Absent lists are empty, and an empty list matches nothing except
/// `resource_names`, where empty means every name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub operations: Vec<String>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    pub scope: Option<String>,
    pub resource_names: Vec<String>,
}

impl From<&v1::RuleWithOperations> for Rule {
    fn from(rule: &v1::RuleWithOperations) -> Rule {
        Rule {
            operations: rule.operations.clone().unwrap_or_default(),
            api_groups: rule.api_groups.clone().unwrap_or_default(),
            api_versions: rule.api_versions.clone().unwrap_or_default(),
            resources: rule.resources.clone().unwrap_or_default(),
            scope: rule.scope.clone(),
            resource_names: Vec::new(),
        }
    }
}

impl From<&v1::NamedRuleWithOperations> for Rule {
    fn from(rule: &v1::NamedRuleWithOperations) -> Rule {
        Rule {
            operations: rule.operations.clone().unwrap_or_default(),
            api_groups: rule.api_groups.clone().unwrap_or_default(),
            api_versions: rule.api_versions.clone().unwrap_or_default(),
            resources: rule.resources.clone().unwrap_or_default(),
            scope: rule.scope.clone(),
            resource_names: rule.resource_names.clone().unwrap_or_default(),
        }
    }
}

impl From<&v1beta1::NamedRuleWithOperations> for Rule {
    fn from(rule: &v1beta1::NamedRuleWithOperations) -> Rule {
        Rule {
            operations: rule.operations.clone().unwrap_or_default(),
            api_groups: rule.api_groups.clone().unwrap_or_default(),
            api_versions: rule.api_versions.clone().unwrap_or_default(),
            resources: rule.resources.clone().unwrap_or_default(),
            scope: rule.scope.clone(),
            resource_names: rule.resource_names.clone().unwrap_or_default(),
        }
    }
}

impl Rule {
    /// Whether the write described by `attrs` falls under this rule.
    pub fn matches(&self, attrs: &Attributes) -> bool {
        self.operation_matches(attrs.operation)
            && listed(&self.api_groups, &attrs.group)
            && listed(&self.api_versions, &attrs.version)
            && self.resource_matches(attrs)
            && self.scope_matches(attrs)
            && self.name_matches(&attrs.name)
    }

    fn operation_matches(&self, operation: Operation) -> bool {
        listed(&self.operations, operation.as_str())
    }

    /// `resource` alone matches the main resource only, `resource/sub` one subresource,
    /// `resource/*` the resource and all its subresources, `*/sub` that subresource of
    /// every resource, `*/*` everything.
    fn resource_matches(&self, attrs: &Attributes) -> bool {
        let subresource = attrs.subresource.as_deref().unwrap_or("");
        self.resources.iter().any(|entry| {
            let (resource, sub) = entry.split_once('/').unwrap_or((entry, ""));
            (resource == ALL || resource == attrs.resource) && (sub == ALL || sub == subresource)
        })
    }

    /// `Cluster` matches cluster-scoped objects, `Namespaced` namespaced ones, `*` or absent
    /// both. A Namespace is cluster-scoped even though kube's attributes name it as namespace.
    fn scope_matches(&self, attrs: &Attributes) -> bool {
        let cluster_scoped = is_namespace_resource(attrs) || attrs.namespace.is_none();
        match self.scope.as_deref() {
            None | Some(ALL) => true,
            Some("Cluster") => cluster_scoped,
            Some("Namespaced") => !cluster_scoped,
            Some(_) => false,
        }
    }

    fn name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name)
    }
}

/// Whether `value` is in `list` or the list holds the wildcard.
fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|entry| entry == ALL || entry == value)
}

/// Whether the write is to a core/v1 Namespace (not one of its subresources' objects).
fn is_namespace_resource(attrs: &Attributes) -> bool {
    attrs.group.is_empty() && attrs.resource == "namespaces"
}

/// Whether `labels` satisfy `selector`: every `matchLabels` pair and every `matchExpressions`
/// requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`), with kube's label selector rules
/// ([`kcp_apimachinery::labels`]). An absent or empty selector matches everything; a malformed
/// one is an error naming what is wrong.
pub fn label_selector_matches(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let Some(selector) = selector.filter(|s| !is_empty(Some(s))) else {
        return Ok(true);
    };
    let json = serde_json::to_value(selector).map_err(|err| err.to_string())?;
    let parsed = labels::LabelSelector::from_json(&json).map_err(|err| err.to_string())?;
    Ok(parsed.matches(labels))
}

/// Whether a namespace selector lets the write through. Cluster-scoped objects always match,
/// except a Namespace, which is matched by its own labels; namespaced objects are matched by the
/// labels of `namespace`, the Namespace object of the request (for a write to a Namespace, the
/// Namespace being written: the new object on create and update, the stored one on delete). A
/// namespace that could not be read (`None`) has no labels.
pub fn namespace_selected(
    selector: Option<&LabelSelector>,
    attrs: &Attributes,
    namespace: Option<&Value>,
) -> Result<bool, String> {
    if attrs.namespace.is_none() && !is_namespace_resource(attrs) {
        return Ok(true);
    }
    label_selector_matches(selector, &labels_of(namespace))
}

/// Whether an object selector lets the write through: the new object's labels or the old
/// object's match (an absent object never does, but an empty selector matches regardless).
pub fn object_selected(
    selector: Option<&LabelSelector>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<bool, String> {
    if is_empty(selector) {
        return Ok(true);
    }
    for candidate in [object, old].into_iter().flatten() {
        if label_selector_matches(selector, &labels_of(Some(candidate)))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether a selector selects everything (absent or with no requirements).
fn is_empty(selector: Option<&LabelSelector>) -> bool {
    selector.is_none_or(|s| {
        s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
    })
}

/// An object's `metadata.labels` (string values only; none when absent).
fn labels_of(object: Option<&Value>) -> BTreeMap<String, String> {
    object
        .and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use kcp_authn::UserInfo;
    use kcp_registry::LogicalClusterName;
    use serde_json::json;

    use super::*;

    fn attrs(resource: &str, subresource: Option<&str>, ns: Option<&str>) -> Attributes {
        Attributes {
            cluster: LogicalClusterName::root(),
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: resource.into(),
            subresource: subresource.map(str::to_string),
            namespace: ns.map(str::to_string),
            name: "cm".into(),
            operation: Operation::Create,
            user: UserInfo::default(),
            dry_run: false,
            options: None,
        }
    }

    fn rule(resources: &[&str]) -> Rule {
        Rule {
            operations: vec!["CREATE".into()],
            api_groups: vec![String::new()],
            api_versions: vec!["v1".into()],
            resources: resources.iter().map(|r| r.to_string()).collect(),
            scope: None,
            resource_names: Vec::new(),
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn conversions_keep_every_field() {
        let webhook = v1::RuleWithOperations {
            operations: Some(strings(&["CREATE"])),
            api_groups: Some(strings(&["apps"])),
            api_versions: Some(strings(&["v1"])),
            resources: Some(strings(&["deployments"])),
            scope: Some("Namespaced".into()),
        };
        let rule = Rule::from(&webhook);
        assert_eq!(rule.api_groups, ["apps"]);
        assert_eq!(rule.scope.as_deref(), Some("Namespaced"));
        assert!(rule.resource_names.is_empty());
        let named = v1::NamedRuleWithOperations {
            resource_names: Some(strings(&["a"])),
            resources: Some(strings(&["x"])),
            ..Default::default()
        };
        assert_eq!(Rule::from(&named).resource_names, ["a"]);
        assert_eq!(Rule::from(&named).resources, ["x"]);
        let beta = v1beta1::NamedRuleWithOperations {
            resource_names: Some(strings(&["b"])),
            operations: Some(strings(&["*"])),
            ..Default::default()
        };
        assert_eq!(Rule::from(&beta).resource_names, ["b"]);
        assert_eq!(Rule::from(&beta).operations, ["*"]);
    }

    #[test]
    fn operations_groups_and_versions_match_exactly_or_by_wildcard() {
        let a = attrs("configmaps", None, Some("ns"));
        assert!(rule(&["configmaps"]).matches(&a));
        let mut r = rule(&["configmaps"]);
        r.operations = strings(&["UPDATE", "DELETE"]);
        assert!(!r.matches(&a));
        r.operations = strings(&["*"]);
        assert!(r.matches(&a));
        r.api_groups = strings(&["apps"]);
        assert!(!r.matches(&a));
        r.api_groups = strings(&["*"]);
        r.api_versions = strings(&["v2"]);
        assert!(!r.matches(&a));
        r.api_versions = strings(&["*"]);
        assert!(r.matches(&a));
        r.operations.clear();
        assert!(!r.matches(&a), "no operations match nothing");
    }

    #[test]
    fn resources_and_subresources() {
        let main = attrs("configmaps", None, Some("ns"));
        let status = attrs("configmaps", Some("status"), Some("ns"));
        assert!(rule(&["configmaps"]).matches(&main));
        assert!(!rule(&["configmaps"]).matches(&status));
        assert!(!rule(&["secrets"]).matches(&main));
        assert!(rule(&["*"]).matches(&main));
        assert!(!rule(&["*"]).matches(&status));
        assert!(rule(&["*/status"]).matches(&status));
        assert!(!rule(&["*/status"]).matches(&main));
        assert!(rule(&["configmaps/status"]).matches(&status));
        assert!(!rule(&["configmaps/scale"]).matches(&status));
        assert!(rule(&["configmaps/*"]).matches(&status));
        assert!(rule(&["configmaps/*"]).matches(&main));
        assert!(rule(&["*/*"]).matches(&status));
        assert!(rule(&["secrets", "configmaps"]).matches(&main));
    }

    #[test]
    fn scopes() {
        let namespaced = attrs("configmaps", None, Some("ns"));
        let cluster = attrs("clusterroles", None, None);
        let namespace = attrs("namespaces", None, None);
        let mut r = rule(&["*"]);
        for (scope, ns, cl, nsobj) in [
            (None, true, true, true),
            (Some("*"), true, true, true),
            (Some("Namespaced"), true, false, false),
            (Some("Cluster"), false, true, true),
            (Some("Other"), false, false, false),
        ] {
            r.scope = scope.map(str::to_string);
            assert_eq!(r.matches(&namespaced), ns, "{scope:?}");
            assert_eq!(r.matches(&cluster), cl, "{scope:?}");
            assert_eq!(r.matches(&namespace), nsobj, "{scope:?}");
        }
        // A Namespace is cluster-scoped even when named as its own namespace.
        r.scope = Some("Namespaced".into());
        assert!(!r.matches(&attrs("namespaces", None, Some("ns"))));
    }

    #[test]
    fn resource_names() {
        let a = attrs("configmaps", None, Some("ns"));
        let mut r = rule(&["configmaps"]);
        r.resource_names = strings(&["other"]);
        assert!(!r.matches(&a));
        r.resource_names = strings(&["other", "cm"]);
        assert!(r.matches(&a));
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: (!values.is_empty()).then(|| strings(values)),
            }]),
            match_labels: None,
        }
    }

    #[test]
    fn label_selectors() {
        let l = labels(&[("env", "prod"), ("team", "a")]);
        assert_eq!(label_selector_matches(None, &l), Ok(true));
        let empty = LabelSelector::default();
        assert_eq!(label_selector_matches(Some(&empty), &l), Ok(true));
        let by_label = LabelSelector {
            match_labels: Some(BTreeMap::from([("env".into(), "prod".into())])),
            match_expressions: None,
        };
        assert_eq!(label_selector_matches(Some(&by_label), &l), Ok(true));
        assert_eq!(
            label_selector_matches(Some(&by_label), &labels(&[("env", "dev")])),
            Ok(false)
        );
        for (selector, want) in [
            (expression("env", "In", &["prod", "dev"]), true),
            (expression("env", "In", &["dev"]), false),
            (expression("env", "NotIn", &["dev"]), true),
            (expression("env", "NotIn", &["prod"]), false),
            (expression("missing", "NotIn", &["prod"]), true),
            (expression("team", "Exists", &[]), true),
            (expression("missing", "Exists", &[]), false),
            (expression("missing", "DoesNotExist", &[]), true),
            (expression("team", "DoesNotExist", &[]), false),
        ] {
            assert_eq!(
                label_selector_matches(Some(&selector), &l),
                Ok(want),
                "{selector:?}"
            );
        }
        let mut both = expression("team", "Exists", &[]);
        both.match_labels = Some(BTreeMap::from([("env".into(), "dev".into())]));
        assert_eq!(label_selector_matches(Some(&both), &l), Ok(false));
    }

    #[test]
    fn invalid_label_selectors_are_errors() {
        for selector in [
            expression("env", "In", &[]),
            expression("env", "NotIn", &[]),
            expression("env", "Exists", &["x"]),
            expression("env", "DoesNotExist", &["x"]),
            expression("env", "Equals", &["x"]),
        ] {
            assert!(
                label_selector_matches(Some(&selector), &BTreeMap::new()).is_err(),
                "{selector:?}"
            );
        }
    }

    #[test]
    fn namespace_selector_applies_to_namespaced_objects_and_namespaces() {
        let selector = expression("env", "In", &["prod"]);
        let prod = json!({"metadata": {"name": "ns", "labels": {"env": "prod"}}});
        let dev = json!({"metadata": {"name": "ns", "labels": {"env": "dev"}}});
        let namespaced = attrs("configmaps", None, Some("ns"));
        assert_eq!(
            namespace_selected(Some(&selector), &namespaced, Some(&prod)),
            Ok(true)
        );
        assert_eq!(
            namespace_selected(Some(&selector), &namespaced, Some(&dev)),
            Ok(false)
        );
        assert_eq!(
            namespace_selected(Some(&selector), &namespaced, None),
            Ok(false)
        );
        let cluster = attrs("clusterroles", None, None);
        assert_eq!(
            namespace_selected(Some(&selector), &cluster, None),
            Ok(true)
        );
        let namespace = attrs("namespaces", None, None);
        assert_eq!(
            namespace_selected(Some(&selector), &namespace, Some(&dev)),
            Ok(false)
        );
        assert_eq!(
            namespace_selected(Some(&selector), &namespace, Some(&prod)),
            Ok(true)
        );
        let invalid = expression("env", "In", &[]);
        assert!(namespace_selected(Some(&invalid), &namespaced, Some(&prod)).is_err());
    }

    #[test]
    fn object_selector_matches_new_or_old() {
        let selector = expression("env", "In", &["prod"]);
        let prod = json!({"metadata": {"labels": {"env": "prod"}}});
        let bare = json!({"metadata": {}});
        assert_eq!(
            object_selected(Some(&selector), Some(&prod), None),
            Ok(true)
        );
        assert_eq!(
            object_selected(Some(&selector), Some(&bare), Some(&prod)),
            Ok(true)
        );
        assert_eq!(
            object_selected(Some(&selector), None, Some(&prod)),
            Ok(true)
        );
        assert_eq!(
            object_selected(Some(&selector), Some(&bare), Some(&bare)),
            Ok(false)
        );
        assert_eq!(object_selected(Some(&selector), None, None), Ok(false));
        let empty = LabelSelector::default();
        assert_eq!(object_selected(Some(&empty), None, None), Ok(true));
        assert_eq!(object_selected(None, Some(&bare), None), Ok(true));
    }
}
