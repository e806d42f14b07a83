//! Label selectors: which pods a Deployment, StatefulSet or Service selects, and the string form
//! written to `status.labelSelector`.
//!
//! The workload CRDs read the scale subresource's selector from `.status.labelSelector` (see
//! `e2e/workload-crds/README.md`), so the string must be what `metav1.LabelSelectorAsSelector(..)
//! .String()` prints: requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
//! `!k`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` satisfy `selector` (an empty selector selects everything, as in Kubernetes).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|expr| {
        let values = expr.values.as_deref().unwrap_or_default();
        match expr.operator.as_str() {
            "In" => labels.get(&expr.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&expr.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&expr.key),
            "DoesNotExist" => !labels.contains_key(&expr.key),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

/// Whether a map selector (a Service's `spec.selector`) selects `labels`; an empty or missing
/// Service selector selects nothing.
pub fn map_matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The string form of `selector`, as Kubernetes prints it.
pub fn to_string(selector: &LabelSelector) -> String {
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in selector.match_labels.iter().flatten() {
        requirements.push((key.clone(), format!("{key}={value}")));
    }
    for expr in selector.match_expressions.iter().flatten() {
        let mut values = expr.values.clone().unwrap_or_default();
        values.sort();
        values.dedup();
        let key = &expr.key;
        let text = match expr.operator.as_str() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        requirements.push((key.clone(), text));
    }
    // A stable sort by key, as `labels.Selector.Add` sorts.
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn string_form_sorts_by_key() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web"), ("tier", "front")])),
            match_expressions: Some(vec![
                requirement("env", "In", &["prod", "dev"]),
                requirement("zone", "NotIn", &["b", "a"]),
                requirement("canary", "DoesNotExist", &[]),
                requirement("owner", "Exists", &[]),
            ]),
        };
        assert_eq!(
            to_string(&selector),
            "app=web,!canary,env in (dev,prod),owner,tier=front,zone notin (a,b)"
        );
        assert_eq!(to_string(&LabelSelector::default()), "");
    }

    #[test]
    fn matching() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![requirement("env", "NotIn", &["dev"])]),
        };
        assert!(matches(&selector, &labels(&[("app", "web")])));
        assert!(matches(
            &selector,
            &labels(&[("app", "web"), ("env", "prod")])
        ));
        assert!(!matches(
            &selector,
            &labels(&[("app", "web"), ("env", "dev")])
        ));
        assert!(!matches(&selector, &labels(&[("app", "db")])));
        assert!(matches(&LabelSelector::default(), &labels(&[])));
        assert!(map_matches(
            &labels(&[("app", "web")]),
            &labels(&[("app", "web"), ("x", "y")])
        ));
        assert!(!map_matches(&labels(&[]), &labels(&[("app", "web")])));
    }
}
