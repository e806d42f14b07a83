//! ClusterRole aggregation: a ClusterRole with an `aggregationRule` holds the union of the rules of
//! every other ClusterRole its label selectors pick.
//!
//! Kubernetes computes this in a controller that rewrites the stored role; here the policy index
//! computes it whenever it is built, so authorization never waits for a controller and a role
//! labelled `aggregate-to-view` extends `view` the moment it exists. Aggregated roles may pick other
//! aggregated roles (`admin` picks `edit`, which picks `view`), and even each other; the rules are
//! the fixpoint the controller would converge to.

use std::collections::BTreeMap;

use kcp_apimachinery::labels::LabelSelector;
use serde_json::Value;

use crate::rule::PolicyRule;

fn labels(role: &Value) -> BTreeMap<String, String> {
    role.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The selectors of an aggregated role, or `None` for a role that states its own rules. A selector
/// that does not parse picks nothing (the Kubernetes controller refuses to update such a role; the
/// API server's validation keeps them out in the first place).
fn selectors(role: &Value) -> Option<Vec<LabelSelector>> {
    let rule = role.get("aggregationRule")?.as_object()?;
    Some(
        rule.get("clusterRoleSelectors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|selector| LabelSelector::from_json(selector).ok())
            .collect(),
    )
}

/// Whether a ClusterRole aggregates others (an `aggregationRule` with at least one selector):
/// setting or changing one needs full authority.
pub fn has_aggregation_rule(role: &Value) -> bool {
    role.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|selectors| !selectors.is_empty())
}

/// The ClusterRoles of one policy, parsed for aggregation: each role's own rules and, for
/// aggregated roles, which other roles (by position) their selectors pick.
pub(crate) struct Aggregation {
    own: Vec<Vec<PolicyRule>>,
    /// `None` for roles that state their own rules; picked roles selector by selector.
    sources: Vec<Option<Vec<usize>>>,
}

impl Aggregation {
    /// Parses ClusterRoles given in name order.
    pub(crate) fn of(roles: &[&Value]) -> Aggregation {
        let role_labels: Vec<BTreeMap<String, String>> = roles.iter().map(|r| labels(r)).collect();
        let sources = roles
            .iter()
            .enumerate()
            .map(|(index, role)| {
                let picked = selectors(role)?
                    .iter()
                    .flat_map(|selector| {
                        role_labels
                            .iter()
                            .enumerate()
                            .filter(move |(other, labels)| {
                                *other != index && selector.matches(labels)
                            })
                            .map(|(other, _)| other)
                    })
                    .collect();
                Some(picked)
            })
            .collect::<Vec<Option<Vec<usize>>>>();
        let own = roles
            .iter()
            .zip(&sources)
            .map(|(role, sources)| match sources {
                Some(_) => Vec::new(),
                None => PolicyRule::list_from_json(role),
            })
            .collect();
        Aggregation { own, sources }
    }

    /// Which roles' effective rules include those of a `marked` role: the marked roles and every
    /// aggregated role that picks one of them, directly or through other aggregated roles.
    pub(crate) fn reaching(&self, marked: &[bool]) -> Vec<bool> {
        let mut reached = marked.to_vec();
        let mut grew = true;
        while grew {
            grew = false;
            for (index, sources) in self.sources.iter().enumerate() {
                let picks_reached = sources.iter().flatten().any(|source| reached[*source]);
                if picks_reached && !reached[index] {
                    reached[index] = true;
                    grew = true;
                }
            }
        }
        reached
    }

    /// The effective rules, in the order the roles were given: their own rules, or for aggregated
    /// roles the rules of the roles their selectors pick (selector by selector, picked roles in
    /// name order, each rule once).
    pub(crate) fn effective_rules(self) -> Vec<Vec<PolicyRule>> {
        let Aggregation { mut own, sources } = self;
        // Rounds work on references and clone only the final sets. Sets only grow from one round
        // to the next and are bounded, so rounds stop once no set grows; that is the state a
        // controller reconciling every role reaches.
        let mut picked: Vec<Vec<&PolicyRule>> =
            own.iter().map(|rules| rules.iter().collect()).collect();
        let mut grew = true;
        while grew {
            grew = false;
            for (index, sources) in sources.iter().enumerate() {
                let Some(sources) = sources else { continue };
                let mut collected: Vec<&PolicyRule> = Vec::new();
                for rule in sources.iter().flat_map(|source| &picked[*source]) {
                    if !collected.contains(rule) {
                        collected.push(rule);
                    }
                }
                grew |= collected.len() != picked[index].len();
                picked[index] = collected;
            }
        }
        let resolved: Vec<(usize, Vec<PolicyRule>)> = sources
            .iter()
            .enumerate()
            .filter(|(_, sources)| sources.is_some())
            .map(|(index, _)| {
                (
                    index,
                    picked[index].iter().map(|rule| (*rule).clone()).collect(),
                )
            })
            .collect();
        for (index, rules) in resolved {
            own[index] = rules;
        }
        own
    }
}

/// The effective rules of ClusterRoles given in name order (see [`Aggregation::effective_rules`]):
/// what Kubernetes' aggregation controller writes into each aggregated role's `rules`.
pub fn effective_rules(roles: &[&Value]) -> Vec<Vec<PolicyRule>> {
    Aggregation::of(roles).effective_rules()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    fn aggregating(name: &str, labels: Value, selectors: Value) -> Value {
        json!({
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "aggregationRule": {"clusterRoleSelectors": selectors},
            "rules": [{"verbs": ["stale"], "apiGroups": [""], "resources": ["ignored"]}],
        })
    }

    fn verbs(rules: &[PolicyRule]) -> Vec<&str> {
        rules.iter().map(|r| r.verbs[0].as_str()).collect()
    }

    fn rule(verb: &str) -> Value {
        json!([{"verbs": [verb], "apiGroups": [""], "resources": ["configmaps"]}])
    }

    #[test]
    fn plain_roles_keep_their_rules() {
        let a = role("a", json!({}), rule("get"));
        assert_eq!(verbs(&effective_rules(&[&a])[0]), ["get"]);
    }

    #[test]
    fn aggregated_role_replaces_its_rules_with_the_picked_ones() {
        let agg = aggregating("agg", json!({}), json!([{"matchLabels": {"pick": "true"}}]));
        let b = role("b", json!({"pick": "true"}), rule("get"));
        let c = role("c", json!({"pick": "false"}), rule("list"));
        let d = role("d", json!({"pick": "true"}), rule("watch"));
        let rules = effective_rules(&[&agg, &b, &c, &d]);
        assert_eq!(verbs(&rules[0]), ["get", "watch"]);
    }

    #[test]
    fn chains_resolve_transitively_in_any_order() {
        // admin <- edit <- view <- extra, listed so that one pass in order would miss rules.
        let admin = aggregating(
            "admin",
            json!({}),
            json!([{"matchLabels": {"to-admin": "true"}}]),
        );
        let edit = aggregating(
            "edit",
            json!({"to-admin": "true"}),
            json!([{"matchLabels": {"to-edit": "true"}}]),
        );
        let extra = role("extra", json!({"to-view": "true"}), rule("get"));
        let view = aggregating(
            "view",
            json!({"to-edit": "true"}),
            json!([{"matchLabels": {"to-view": "true"}}]),
        );
        let rules = effective_rules(&[&admin, &edit, &extra, &view]);
        assert_eq!(verbs(&rules[0]), ["get"]);
        assert_eq!(verbs(&rules[1]), ["get"]);
        assert_eq!(verbs(&rules[3]), ["get"]);
    }

    #[test]
    fn cycles_converge_to_the_union() {
        let a = aggregating(
            "a",
            json!({"ring": "x"}),
            json!([{"matchLabels": {"ring": "x"}}]),
        );
        let b = aggregating(
            "b",
            json!({"ring": "x"}),
            json!([{"matchLabels": {"ring": "x"}}]),
        );
        let c = role("c", json!({"ring": "x"}), rule("get"));
        let rules = effective_rules(&[&a, &b, &c]);
        assert_eq!(verbs(&rules[0]), ["get"]);
        assert_eq!(verbs(&rules[1]), ["get"]);
    }

    #[test]
    fn duplicate_rules_are_kept_once_and_selectors_in_order() {
        let agg = aggregating(
            "agg",
            json!({}),
            json!([{"matchLabels": {"second": "y"}}, {"matchLabels": {"first": "y"}}]),
        );
        let one = role("one", json!({"first": "y"}), rule("get"));
        let two = role("two", json!({"second": "y", "first": "y"}), rule("list"));
        let rules = effective_rules(&[&agg, &one, &two]);
        assert_eq!(verbs(&rules[0]), ["list", "get"]);
    }

    #[test]
    fn empty_selector_list_aggregates_nothing_and_bad_selectors_pick_nothing() {
        let none = aggregating("none", json!({}), json!([]));
        let bad = aggregating(
            "bad",
            json!({}),
            json!([{"matchExpressions": [{"key": "k", "operator": "Bogus"}]}]),
        );
        let other = role("other", json!({"k": "v"}), rule("get"));
        let rules = effective_rules(&[&none, &bad, &other]);
        assert!(rules[0].is_empty());
        assert!(rules[1].is_empty());
        assert!(!has_aggregation_rule(&none));
        assert!(has_aggregation_rule(&bad));
    }

    #[test]
    fn match_expressions_select_too() {
        let agg = aggregating(
            "agg",
            json!({}),
            json!([{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}]),
        );
        let a = role("a", json!({"tier": "a"}), rule("get"));
        let z = role("z", json!({"tier": "z"}), rule("list"));
        assert_eq!(verbs(&effective_rules(&[&agg, &a, &z])[0]), ["get"]);
    }

    #[test]
    fn reaching_follows_selectors_up_the_chain() {
        let admin = aggregating(
            "admin",
            json!({}),
            json!([{"matchLabels": {"to-admin": "true"}}]),
        );
        let edit = aggregating(
            "edit",
            json!({"to-admin": "true"}),
            json!([{"matchLabels": {"to-edit": "true"}}]),
        );
        let lone = aggregating(
            "lone",
            json!({}),
            json!([{"matchLabels": {"to-lone": "true"}}]),
        );
        let extra = role("extra", json!({"to-edit": "true"}), rule("get"));
        let aggregation = Aggregation::of(&[&admin, &edit, &extra, &lone]);
        assert_eq!(
            aggregation.reaching(&[false, false, true, false]),
            [true, true, true, false]
        );
        assert_eq!(
            aggregation.reaching(&[false, true, false, false]),
            [true, true, false, false]
        );
    }
}
