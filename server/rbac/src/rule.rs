//! One RBAC `PolicyRule`: whether it grants a request, and whether one rule covers another.
//!
//! Both questions follow Kubernetes to the letter because users write rules for Kubernetes and
//! expect the same reach here: `*` in verbs, groups and resources; `resource/subresource` and
//! `*/subresource`; resource names that only restrict requests naming an object; non-resource URLs
//! ending in `*` as prefixes. Covering (used by the escalation checks) is a different, stricter
//! relation than matching, as in Kubernetes: it compares rule to rule, not rule to request.

use serde_json::{Map, Value};

use crate::attributes::{Attributes, Target};

/// The wildcard of verbs, groups, resources and URLs.
const ALL: &str = "*";

/// A rule of a Role or ClusterRole. Empty lists mean "none", except resource names, where empty
/// means "every object".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(rule: &Value, field: &str) -> Vec<String> {
    rule.get(field)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == value)
}

fn has_all(list: &[String], values: &[String]) -> bool {
    values.iter().all(|value| has(list, value))
}

/// Go's `%q` of a string slice: `["a" "b"]`.
pub(crate) fn quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

impl PolicyRule {
    /// Reads a rule as stored (`verbs`, `apiGroups`, `resources`, `resourceNames`,
    /// `nonResourceURLs`); missing lists are empty.
    pub fn from_json(rule: &Value) -> PolicyRule {
        PolicyRule {
            verbs: strings(rule, "verbs"),
            api_groups: strings(rule, "apiGroups"),
            resources: strings(rule, "resources"),
            resource_names: strings(rule, "resourceNames"),
            non_resource_urls: strings(rule, "nonResourceURLs"),
        }
    }

    /// The rules of a role object (`rules`, absent or null meaning none).
    pub fn list_from_json(role: &Value) -> Vec<PolicyRule> {
        role.get("rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(PolicyRule::from_json).collect())
            .unwrap_or_default()
    }

    /// The rule as Kubernetes serializes it (empty lists omitted).
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        for (field, list) in [
            ("verbs", &self.verbs),
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !list.is_empty() || field == "verbs" {
                object.insert(field.to_string(), Value::from(list.clone()));
            }
        }
        Value::Object(object)
    }

    /// Whether this rule grants the request.
    pub fn allows(&self, attributes: &Attributes) -> bool {
        if !(has(&self.verbs, ALL) || has(&self.verbs, &attributes.verb)) {
            return false;
        }
        match &attributes.target {
            Target::Resource(r) => {
                (has(&self.api_groups, ALL) || has(&self.api_groups, &r.api_group))
                    && self.matches_resource(&r.resource, &r.subresource)
                    && (self.resource_names.is_empty() || has(&self.resource_names, &r.name))
            }
            Target::NonResource { path } => self
                .non_resource_urls
                .iter()
                .any(|url| url_covers(url, path)),
        }
    }

    /// `*`, the exact `resource` or `resource/subresource`, or `*/subresource`.
    fn matches_resource(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|granted| {
            if granted == ALL {
                return true;
            }
            if subresource.is_empty() {
                return granted == resource;
            }
            match granted.split_once('/') {
                Some((granted_resource, granted_sub)) => {
                    granted_sub == subresource
                        && (granted_resource == resource || granted_resource == ALL)
                }
                None => false,
            }
        })
    }

    /// Whether holding this rule means holding everything `other` grants (Kubernetes' covering
    /// relation, meant for the single-permission rules [`PolicyRule::breakdown`] yields).
    pub fn covers(&self, other: &PolicyRule) -> bool {
        let verbs = has(&self.verbs, ALL) || has_all(&self.verbs, &other.verbs);
        let groups = has(&self.api_groups, ALL) || has_all(&self.api_groups, &other.api_groups);
        let resources = self.covers_resources(&other.resources);
        let urls = other.non_resource_urls.iter().all(|path| {
            self.non_resource_urls
                .iter()
                .any(|url| url_covers(url, path))
        });
        let names = self.resource_names.is_empty()
            || (!other.resource_names.is_empty()
                && has_all(&self.resource_names, &other.resource_names));
        verbs && groups && resources && urls && names
    }

    fn covers_resources(&self, wanted: &[String]) -> bool {
        if has(&self.resources, ALL) {
            return true;
        }
        wanted.iter().all(|resource| {
            has(&self.resources, resource)
                || resource
                    .split_once('/')
                    .is_some_and(|(_, sub)| has(&self.resources, &format!("*/{sub}")))
        })
    }

    /// Splits the rule into rules of one verb, group, resource and name each (one verb and URL each
    /// for non-resource rules): the unit the escalation check asks about.
    pub fn breakdown(&self) -> Vec<PolicyRule> {
        let single = |value: &String| vec![value.clone()];
        let mut parts = Vec::new();
        for group in &self.api_groups {
            for resource in &self.resources {
                for verb in &self.verbs {
                    let base = PolicyRule {
                        verbs: single(verb),
                        api_groups: single(group),
                        resources: single(resource),
                        ..PolicyRule::default()
                    };
                    if self.resource_names.is_empty() {
                        parts.push(base);
                    } else {
                        parts.extend(self.resource_names.iter().map(|name| PolicyRule {
                            resource_names: single(name),
                            ..base.clone()
                        }));
                    }
                }
            }
        }
        for url in &self.non_resource_urls {
            for verb in &self.verbs {
                parts.push(PolicyRule {
                    verbs: single(verb),
                    non_resource_urls: single(url),
                    ..PolicyRule::default()
                });
            }
        }
        parts
    }

    /// The one-line form escalation errors list missing rules in:
    /// `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
    pub fn compact_string(&self) -> String {
        let parts: Vec<String> = [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ]
        .into_iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(label, list)| format!("{label}:{}", quote_list(list)))
        .collect();
        format!("{{{}}}", parts.join(", "))
    }

    /// For a rule of exactly one group and resource, at most one name and no URLs: the part that
    /// identifies what it is about, so rules differing only in verbs can be merged.
    fn simple_target(&self) -> Option<(&str, &str, Option<&str>)> {
        match (
            self.api_groups.as_slice(),
            self.resources.as_slice(),
            self.resource_names.as_slice(),
        ) {
            ([group], [resource], names)
                if names.len() <= 1 && self.non_resource_urls.is_empty() =>
            {
                Some((group, resource, names.first().map(String::as_str)))
            }
            _ => None,
        }
    }
}

/// Merges rules that differ only in their verbs (one group, one resource, at most one name), keeping
/// the others as they are: what Kubernetes does before listing missing permissions.
pub fn compact(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut others = Vec::new();
    let mut merged: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let Some(target) = rule.simple_target() else {
            others.push(rule.clone());
            continue;
        };
        match merged
            .iter_mut()
            .find(|existing| existing.simple_target() == Some(target))
        {
            Some(existing) => existing.verbs.extend(rule.verbs.iter().cloned()),
            None => merged.push(rule.clone()),
        }
    }
    others.extend(merged);
    others
}

/// A URL pattern grants a path when equal, when `*`, or when it ends in `*` and the path starts with
/// what precedes the stars.
fn url_covers(pattern: &str, path: &str) -> bool {
    pattern == ALL
        || pattern == path
        || (pattern.ends_with('*') && path.starts_with(pattern.trim_end_matches('*')))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::attributes::{ResourceAttributes, User};

    fn rule(value: Value) -> PolicyRule {
        PolicyRule::from_json(&value)
    }

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes::resource(
            User::new("u", &[]),
            verb,
            ResourceAttributes {
                api_group: group.into(),
                resource: resource.into(),
                subresource: sub.into(),
                namespace: "ns".into(),
                name: name.into(),
            },
        )
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes::non_resource(User::new("u", &[]), verb, path)
    }

    #[test]
    fn exact_rule_matches_only_its_verb_group_and_resource() {
        let r = rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}));
        assert!(r.allows(&request("get", "", "configmaps", "", "x")));
        assert!(!r.allows(&request("list", "", "configmaps", "", "")));
        assert!(!r.allows(&request("get", "apps", "configmaps", "", "x")));
        assert!(!r.allows(&request("get", "", "secrets", "", "x")));
    }

    #[test]
    fn wildcards_match_any_verb_group_and_resource() {
        let r = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(r.allows(&request(
            "escalate",
            "rbac.authorization.k8s.io",
            "roles",
            "",
            ""
        )));
        assert!(r.allows(&request("get", "", "pods", "log", "p")));
    }

    #[test]
    fn plain_resource_does_not_grant_its_subresources() {
        let r =
            rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["serviceaccounts"]}));
        assert!(!r.allows(&request("get", "", "serviceaccounts", "token", "sa")));
        let r = rule(
            json!({"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]}),
        );
        assert!(r.allows(&request("create", "", "serviceaccounts", "token", "sa")));
        assert!(!r.allows(&request("create", "", "serviceaccounts", "", "")));
    }

    #[test]
    fn star_slash_subresource_matches_that_subresource_of_every_resource() {
        let r = rule(json!({"verbs": ["update"], "apiGroups": ["*"], "resources": ["*/status"]}));
        assert!(r.allows(&request("update", "apps", "deployments", "status", "d")));
        assert!(!r.allows(&request("update", "apps", "deployments", "scale", "d")));
        assert!(!r.allows(&request("update", "apps", "deployments", "", "d")));
    }

    #[test]
    fn resource_names_restrict_to_named_objects() {
        let r = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
        );
        assert!(r.allows(&request("get", "", "configmaps", "", "a")));
        assert!(!r.allows(&request("get", "", "configmaps", "", "b")));
        // A list names no object, so a name-restricted rule does not grant it.
        assert!(!r.allows(&request("list", "", "configmaps", "", "")));
    }

    #[test]
    fn resource_rules_never_grant_paths_and_back() {
        let r = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(!r.allows(&path("get", "/healthz")));
        let u = rule(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
        assert!(!u.allows(&request("get", "", "configmaps", "", "")));
        assert!(u.allows(&path("post", "/anything")));
    }

    #[test]
    fn url_patterns_are_exact_or_star_suffixed_prefixes() {
        let r =
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/api", "/apis/*", "/version/"]}));
        assert!(r.allows(&path("get", "/api")));
        assert!(!r.allows(&path("get", "/api/v1")));
        assert!(r.allows(&path("get", "/apis/apps/v1")));
        assert!(r.allows(&path("get", "/apis/")));
        assert!(!r.allows(&path("get", "/apis")));
        assert!(!r.allows(&path("get", "/version")));
        assert!(!r.allows(&path("post", "/api")));
    }

    #[test]
    fn json_round_trip_omits_empty_lists_but_keeps_verbs() {
        let value = json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]});
        assert_eq!(rule(value.clone()).to_json(), value);
        assert_eq!(PolicyRule::default().to_json(), json!({"verbs": []}));
        assert!(PolicyRule::list_from_json(&json!({"rules": null})).is_empty());
    }

    #[test]
    fn breakdown_yields_one_permission_per_rule() {
        let r = rule(
            json!({"verbs": ["get", "list"], "apiGroups": ["", "apps"], "resources": ["a"], "resourceNames": ["x", "y"]}),
        );
        let parts = r.breakdown();
        assert_eq!(parts.len(), 8);
        assert!(
            parts
                .iter()
                .all(|p| p.verbs.len() == 1 && p.resource_names.len() == 1)
        );
        let urls = rule(json!({"verbs": ["get", "post"], "nonResourceURLs": ["/a", "/b"]}));
        assert_eq!(urls.breakdown().len(), 4);
    }

    #[test]
    fn covering_needs_every_verb_group_and_resource() {
        let owner = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps", "*/status"]}),
        );
        let wants = |v: Value| owner.covers(&rule(v));
        assert!(wants(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]})
        ));
        assert!(wants(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/status"]})
        ));
        assert!(!wants(
            json!({"verbs": ["watch"], "apiGroups": [""], "resources": ["configmaps"]})
        ));
        assert!(!wants(
            json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["configmaps"]})
        ));
        assert!(!wants(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})
        ));
    }

    #[test]
    fn covering_resource_names() {
        let everything =
            rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}));
        let named = rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
        );
        assert!(everything.covers(&named));
        assert!(!named.covers(&everything));
        assert!(named.covers(&named));
    }

    #[test]
    fn covering_urls_uses_prefixes() {
        let owner = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}));
        assert!(owner.covers(&rule(
            json!({"verbs": ["get"], "nonResourceURLs": ["/apis/apps"]})
        )));
        assert!(!owner.covers(&rule(
            json!({"verbs": ["get"], "nonResourceURLs": ["/api"]})
        )));
    }

    #[test]
    fn compact_string_lists_set_fields_in_kubernetes_order() {
        let r = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
        );
        assert_eq!(
            r.compact_string(),
            r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get" "list"]}"#
        );
        let u = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]}));
        assert_eq!(
            u.compact_string(),
            r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#
        );
    }

    #[test]
    fn compact_merges_verbs_of_rules_about_the_same_thing() {
        let rules = [
            rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]})),
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]})),
            rule(json!({"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"]})),
            rule(
                json!({"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
            ),
        ];
        let compacted = compact(&rules);
        assert_eq!(compacted.len(), 3);
        assert_eq!(compacted[0].non_resource_urls, ["/metrics"]);
        assert_eq!(compacted[1].verbs, ["get", "list"]);
        assert_eq!(compacted[2].resource_names, ["a"]);
    }
}
