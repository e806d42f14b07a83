//! Which writes a policy's `matchConstraints` or a binding's `matchResources` select, as kube's
//! policy matcher (`admission/plugin/policy/matching`): the namespace and object selectors, then
//! `excludeResourceRules`, then `resourceRules` (none: every resource), with selector errors
//! reported only when the rules select the write.
//!
//! `matchPolicy: Equivalent` (the default) also matches the same group and resource in another
//! version, the equivalence kcp can know without kube's converters (one group/resource is
//! served in one version per cluster, custom resources aside, whose objects are not converted).

use k8s_openapi::api::admissionregistration::{v1, v1beta1};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::Request;
use crate::matching::{Rule, namespace_selected, object_selected};

/// Compiled `MatchResources`.
#[derive(Debug, Clone, Default)]
pub(super) struct Constraints {
    rules: Vec<Rule>,
    exclude: Vec<Rule>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    equivalent: bool,
}

fn rules<R>(rules: Option<&Vec<R>>) -> Vec<Rule>
where
    for<'r> Rule: From<&'r R>,
{
    rules.into_iter().flatten().map(Rule::from).collect()
}

impl From<&v1::MatchResources> for Constraints {
    fn from(m: &v1::MatchResources) -> Constraints {
        Constraints {
            rules: rules(m.resource_rules.as_ref()),
            exclude: rules(m.exclude_resource_rules.as_ref()),
            namespace_selector: m.namespace_selector.clone(),
            object_selector: m.object_selector.clone(),
            equivalent: m.match_policy.as_deref() != Some("Exact"),
        }
    }
}

impl From<&v1beta1::MatchResources> for Constraints {
    fn from(m: &v1beta1::MatchResources) -> Constraints {
        Constraints {
            rules: rules(m.resource_rules.as_ref()),
            exclude: rules(m.exclude_resource_rules.as_ref()),
            namespace_selector: m.namespace_selector.clone(),
            object_selector: m.object_selector.clone(),
            equivalent: m.match_policy.as_deref() != Some("Exact"),
        }
    }
}

impl Constraints {
    /// Whether the write is selected; an error is a malformed selector of a selecting rule.
    pub(super) fn matches(&self, request: &Request<'_>) -> Result<bool, String> {
        let namespace = namespace_selected(
            self.namespace_selector.as_ref(),
            request.attrs,
            request.namespace,
        );
        if namespace == Ok(false) {
            return Ok(false);
        }
        let object = object_selected(self.object_selector.as_ref(), request.object, request.old);
        if object == Ok(false) {
            return Ok(false);
        }
        if self.any_rule_matches(&self.exclude, request) {
            return Ok(false);
        }
        if !self.rules.is_empty() && !self.any_rule_matches(&self.rules, request) {
            return Ok(false);
        }
        namespace?;
        object?;
        Ok(true)
    }

    fn any_rule_matches(&self, rules: &[Rule], request: &Request<'_>) -> bool {
        rules.iter().any(|rule| rule.matches(request.attrs))
            || (self.equivalent
                && rules
                    .iter()
                    .filter(|rule| !rule.api_versions.is_empty())
                    .any(|rule| {
                        let any_version = Rule {
                            api_versions: vec!["*".to_string()],
                            ..rule.clone()
                        };
                        any_version.matches(request.attrs)
                    }))
    }
}
