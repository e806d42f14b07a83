//! admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration and MutatingWebhookConfiguration:
//! objects of their logical cluster, read by kcp-admission to call the webhooks they name on
//! writes in that cluster only.
//!
//! Defaults and validation are kube-apiserver's (`SetDefaults_*Webhook`,
//! `ValidateValidatingWebhookConfiguration`/`ValidateMutatingWebhookConfiguration` for v1), with
//! one kcp difference: a webhook is reached by `clientConfig.url` only, since a logical cluster
//! has no Services to route to, so `clientConfig.service` is refused. Match condition
//! expressions must compile with the CEL compiler kcp-admission installs
//! ([`super::admission_policies::EXPRESSION_COMPILER`]); without one only their presence is
//! checked, and kcp-admission applies the webhook's `failurePolicy` to a stored condition that
//! does not compile.

use std::collections::BTreeSet;

use kcp_apimachinery::FieldError;
use kcp_apimachinery::labels::LabelSelector;
use kcp_apimachinery::validation::{is_dns1123_subdomain, is_qualified_name};
use serde_json::{Value, json};

use super::admission_policies::{ExpressionScope, compile_expression};
use super::{Column, ResourceType, Strategy};

pub fn resources() -> Vec<ResourceType> {
    vec![
        super::resource(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            &[],
            Box::new(WebhookConfigurations { mutating: false }),
        ),
        super::resource(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            &[],
            Box::new(WebhookConfigurations { mutating: true }),
        ),
    ]
}

/// The most match conditions one webhook may have.
const MAX_MATCH_CONDITIONS: usize = 64;
/// kube's bounds of `timeoutSeconds`.
const TIMEOUT_SECONDS: std::ops::RangeInclusive<i64> = 1..=30;
/// The AdmissionReview versions this server sends.
const REVIEW_VERSIONS: [&str; 1] = ["v1"];

struct WebhookConfigurations {
    mutating: bool,
}

impl WebhookConfigurations {
    /// kube's defaults: `failurePolicy: Fail`, `matchPolicy: Equivalent`, selectors that select
    /// everything, `timeoutSeconds: 10`, `reinvocationPolicy: Never` (mutating), rule scope `*`.
    fn default_webhooks(&self, object: &mut Value) {
        let Some(webhooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
            return;
        };
        for webhook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
            let mut defaults = vec![
                ("failurePolicy", json!("Fail")),
                ("matchPolicy", json!("Equivalent")),
                ("namespaceSelector", json!({})),
                ("objectSelector", json!({})),
                ("timeoutSeconds", json!(10)),
            ];
            if self.mutating {
                defaults.push(("reinvocationPolicy", json!("Never")));
            }
            for (field, value) in defaults {
                let entry = webhook.entry(field).or_insert(Value::Null);
                if entry.is_null() {
                    *entry = value;
                }
            }
            let rules = webhook.get_mut("rules").and_then(Value::as_array_mut);
            for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
                let scope = rule.entry("scope").or_insert(Value::Null);
                if scope.is_null() {
                    *scope = json!("*");
                }
            }
        }
    }

    fn webhook_errors(&self, webhook: &Value, path: &str) -> Vec<FieldError> {
        let mut errors = name_errors(webhook.get("name"), &format!("{path}.name"));
        errors.extend(client_config_errors(
            webhook.get("clientConfig"),
            &format!("{path}.clientConfig"),
        ));
        for (index, rule) in list(webhook, "rules").iter().enumerate() {
            errors.extend(rule_errors(rule, &format!("{path}.rules[{index}]")));
        }
        let mut enums = vec![
            ("failurePolicy", &["Ignore", "Fail"][..]),
            ("matchPolicy", &["Exact", "Equivalent"][..]),
        ];
        if self.mutating {
            enums.push(("reinvocationPolicy", &["Never", "IfNeeded"][..]));
        }
        for (field, supported) in enums {
            errors.extend(enum_error(
                webhook.get(field),
                &format!("{path}.{field}"),
                supported,
            ));
        }
        errors.extend(side_effects_errors(
            webhook.get("sideEffects"),
            &format!("{path}.sideEffects"),
        ));
        if let Some(timeout) = webhook.get("timeoutSeconds").filter(|t| !t.is_null())
            && !timeout
                .as_i64()
                .is_some_and(|t| TIMEOUT_SECONDS.contains(&t))
        {
            errors.push(FieldError::invalid(
                &format!("{path}.timeoutSeconds"),
                timeout.clone(),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
        errors.extend(review_versions_errors(
            webhook.get("admissionReviewVersions"),
            &format!("{path}.admissionReviewVersions"),
        ));
        for field in ["namespaceSelector", "objectSelector"] {
            errors.extend(selector_errors(
                webhook.get(field),
                &format!("{path}.{field}"),
            ));
        }
        errors.extend(match_conditions_errors(
            list(webhook, "matchConditions"),
            &format!("{path}.matchConditions"),
        ));
        errors
    }
}

impl Strategy for WebhookConfigurations {
    fn prepare_for_create(&self, object: &mut Value) {
        self.default_webhooks(object);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value, _subresource: Option<&str>) {
        self.default_webhooks(new);
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut names = BTreeSet::new();
        for (index, webhook) in list(object, "webhooks").iter().enumerate() {
            let path = format!("webhooks[{index}]");
            errors.extend(self.webhook_errors(webhook, &path));
            if let Some(name) = webhook.get("name").and_then(Value::as_str)
                && !names.insert(name)
            {
                errors.push(FieldError::duplicate(&format!("{path}.name"), json!(name)));
            }
        }
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Webhooks",
            "integer",
            "Webhooks indicates the number of webhooks in the configuration.",
        )]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(list(object, "webhooks").len())]
    }
}

/// The array at `field`, empty when absent.
fn list<'a>(object: &'a Value, field: &str) -> &'a [Value] {
    object
        .get(field)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A webhook's name is a fully qualified name: a DNS subdomain of at least three segments.
fn name_errors(name: Option<&Value>, path: &str) -> Vec<FieldError> {
    let name = name.and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errors: Vec<FieldError> = is_dns1123_subdomain(name)
        .iter()
        .map(|message| FieldError::invalid(path, json!(name), message))
        .collect();
    if name.split('.').count() < 3 {
        errors.push(FieldError::invalid(
            path,
            json!(name),
            "should be a domain with at least three segments separated by dots",
        ));
    }
    errors
}

/// Exactly one of `url` and `service`; kcp refuses services, and a URL must be `https` with a
/// host and no user information, query or fragment.
fn client_config_errors(config: Option<&Value>, path: &str) -> Vec<FieldError> {
    let url = config.and_then(|c| c.get("url")).filter(|u| !u.is_null());
    let service = config
        .and_then(|c| c.get("service"))
        .filter(|s| !s.is_null());
    if service.is_some() {
        return vec![FieldError::forbidden(
            &format!("{path}.service"),
            "service references are not supported by kcp: a logical cluster has no Services to route to; use url",
        )];
    }
    let Some(url) = url else {
        return vec![FieldError::required(
            path,
            "exactly one of url or service is required",
        )];
    };
    let path = format!("{path}.url");
    let text = url.as_str().unwrap_or_default();
    url_problem(text)
        .map(|problem| FieldError::invalid(&path, url.clone(), &problem))
        .into_iter()
        .collect()
}

/// What is wrong with a webhook URL, as kube's `ValidateWebhookURL` words it.
fn url_problem(url: &str) -> Option<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!(
            "url must be a valid URL: parse \"{url}\": missing protocol scheme"
        ));
    };
    if scheme != "https" {
        return Some("'https' is the only allowed URL scheme".into());
    }
    if rest.contains('#') {
        return Some("fragments are not permitted in the URL".into());
    }
    if rest.contains('?') {
        return Some("query parameters are not permitted in the URL".into());
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Some("user information is not permitted in the URL".into());
    }
    if authority.is_empty() {
        return Some("host must be specified".into());
    }
    None
}

/// kube's checks of a RuleWithOperations (the policies' NamedRuleWithOperations share them).
pub(crate) fn rule_errors(rule: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let operations = strings(rule.get("operations"));
    if operations.is_empty() {
        errors.push(FieldError::required(&format!("{path}.operations"), ""));
    }
    if operations.len() > 1 && operations.contains(&"*") {
        errors.push(FieldError::invalid(
            &format!("{path}.operations"),
            json!(operations),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (index, operation) in operations.iter().enumerate() {
        if !["*", "CREATE", "UPDATE", "DELETE", "CONNECT"].contains(operation) {
            errors.push(FieldError::not_supported(
                &format!("{path}.operations[{index}]"),
                json!(operation),
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = strings(rule.get(field));
        if values.is_empty() {
            errors.push(FieldError::required(&format!("{path}.{field}"), ""));
        }
        if values.len() > 1 && values.contains(&"*") {
            errors.push(FieldError::invalid(
                &format!("{path}.{field}"),
                json!(values),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
    }
    for (index, version) in strings(rule.get("apiVersions")).iter().enumerate() {
        if version.is_empty() {
            errors.push(FieldError::required(
                &format!("{path}.apiVersions[{index}]"),
                "",
            ));
        }
    }
    errors.extend(resources_errors(
        &strings(rule.get("resources")),
        &format!("{path}.resources"),
    ));
    if let Some(scope) = rule.get("scope").filter(|s| !s.is_null())
        && !scope
            .as_str()
            .is_some_and(|s| ["*", "Cluster", "Namespaced"].contains(&s))
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.scope"),
            scope.clone(),
            &["*", "Cluster", "Namespaced"],
        ));
    }
    errors
}

/// Resources as kube checks them: present, non-empty resource and subresource parts, and a
/// wildcard alone among the entries it already covers.
fn resources_errors(resources: &[&str], path: &str) -> Vec<FieldError> {
    if resources.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errors = Vec::new();
    let has_all = resources.contains(&"*");
    let has_all_with_subresources = resources.contains(&"*/*");
    for (index, resource) in resources.iter().enumerate() {
        let entry = format!("{path}[{index}]");
        let (main, sub) = match resource.split_once('/') {
            Some((main, sub)) => (main, Some(sub)),
            None => (*resource, None),
        };
        if main.is_empty() {
            errors.push(FieldError::required(&entry, "resource must be non-empty"));
        }
        if sub.is_some_and(str::is_empty) {
            errors.push(FieldError::required(
                &entry,
                "subresource must be non-empty",
            ));
        }
        if has_all_with_subresources && *resource != "*/*" {
            errors.push(FieldError::invalid(
                &entry,
                json!(resource),
                "if '*/*' is present, must not specify other resources",
            ));
        } else if has_all && sub.is_none() && *resource != "*" {
            errors.push(FieldError::invalid(
                &entry,
                json!(resource),
                "if '*' is present, must not specify other resources without subresources",
            ));
        }
    }
    errors
}

fn enum_error(value: Option<&Value>, path: &str, supported: &[&str]) -> Option<FieldError> {
    let value = value.filter(|v| !v.is_null())?;
    let known = value.as_str().is_some_and(|v| supported.contains(&v));
    (!known).then(|| FieldError::not_supported(path, value.clone(), supported))
}

/// v1 requires a side-effect class this server can honour on dry runs.
fn side_effects_errors(value: Option<&Value>, path: &str) -> Option<FieldError> {
    const SUPPORTED: [&str; 2] = ["None", "NoneOnDryRun"];
    match value.filter(|v| !v.is_null()) {
        None => Some(FieldError::required(
            path,
            "must specify one of None, NoneOnDryRun",
        )),
        value => enum_error(value, path, &SUPPORTED),
    }
}

/// Present, without duplicates, and including the version this server sends.
fn review_versions_errors(value: Option<&Value>, path: &str) -> Vec<FieldError> {
    let versions = strings(value);
    if versions.is_empty() {
        return vec![FieldError::required(
            path,
            &format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        )];
    }
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (index, version) in versions.iter().enumerate() {
        if !seen.insert(*version) {
            errors.push(FieldError::duplicate(
                &format!("{path}[{index}]"),
                json!(version),
            ));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        errors.push(FieldError::invalid(
            path,
            json!(versions),
            &format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errors
}

/// A label selector that does not parse.
pub(crate) fn selector_errors(selector: Option<&Value>, path: &str) -> Option<FieldError> {
    let selector = selector.filter(|s| !s.is_null())?;
    LabelSelector::from_json(selector)
        .err()
        .map(|err| FieldError::invalid(path, selector.clone(), &err.to_string()))
}

/// At most 64 conditions, each with a unique qualified name and an expression.
fn match_conditions_errors(conditions: &[Value], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errors.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = BTreeSet::new();
    for (index, condition) in conditions.iter().enumerate() {
        let entry = format!("{path}[{index}]");
        let name = condition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{entry}.name"), ""));
        } else {
            for message in is_qualified_name(name) {
                errors.push(FieldError::invalid(
                    &format!("{entry}.name"),
                    json!(name),
                    &message,
                ));
            }
            if !names.insert(name) {
                errors.push(FieldError::duplicate(&format!("{entry}.name"), json!(name)));
            }
        }
        let expression = condition
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if expression.trim().is_empty() {
            errors.push(FieldError::required(&format!("{entry}.expression"), ""));
        } else if let Some(Err(err)) = compile_expression(expression, &ExpressionScope::default()) {
            errors.push(FieldError::invalid(
                &format!("{entry}.expression"),
                json!(expression),
                &format!("compilation failed: {err}"),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::super::admission_policies::EXPRESSION_COMPILER;
    use super::*;

    fn strategy(mutating: bool) -> WebhookConfigurations {
        WebhookConfigurations { mutating }
    }

    fn webhook() -> Value {
        json!({
            "name": "check.example.com",
            "clientConfig": {"url": "https://127.0.0.1:8443/check"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    fn config(webhooks: Vec<Value>) -> Value {
        json!({"metadata": {"name": "config"}, "webhooks": webhooks})
    }

    /// The `field: detail` lines of the errors of one webhook changed by `change`.
    fn errors_with(mutating: bool, change: impl FnOnce(&mut Value)) -> Vec<String> {
        let mut hook = webhook();
        change(&mut hook);
        let mut object = config(vec![hook]);
        let strategy = strategy(mutating);
        strategy.prepare_for_create(&mut object);
        strategy
            .validate(&object)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.detail))
            .collect()
    }

    #[test]
    fn defaults_are_kubes() {
        for mutating in [false, true] {
            let mut object = config(vec![webhook()]);
            strategy(mutating).prepare_for_create(&mut object);
            let hook = &object["webhooks"][0];
            assert_eq!(hook["failurePolicy"], "Fail");
            assert_eq!(hook["matchPolicy"], "Equivalent");
            assert_eq!(hook["namespaceSelector"], json!({}));
            assert_eq!(hook["objectSelector"], json!({}));
            assert_eq!(hook["timeoutSeconds"], 10);
            assert_eq!(hook["rules"][0]["scope"], "*");
            assert_eq!(
                hook.get("reinvocationPolicy").cloned(),
                mutating.then(|| json!("Never"))
            );
        }
        let mut set = webhook();
        set["failurePolicy"] = json!("Ignore");
        set["timeoutSeconds"] = json!(3);
        let mut object = config(vec![set]);
        strategy(true).prepare_for_create(&mut object);
        assert_eq!(object["webhooks"][0]["failurePolicy"], "Ignore");
        assert_eq!(object["webhooks"][0]["timeoutSeconds"], 3);
    }

    #[test]
    fn a_valid_configuration_passes() {
        assert!(errors_with(false, |_| {}).is_empty());
        assert!(errors_with(true, |h| h["reinvocationPolicy"] = json!("IfNeeded")).is_empty());
    }

    #[test]
    fn names_are_qualified_and_unique() {
        assert_eq!(
            errors_with(false, |h| h["name"] = json!("check")),
            ["webhooks[0].name: should be a domain with at least three segments separated by dots"]
        );
        assert_eq!(
            errors_with(false, |h| h["name"] = json!("")),
            ["webhooks[0].name: "]
        );
        assert!(
            errors_with(false, |h| h["name"] = json!("Bad_Name.example.com"))[0]
                .starts_with("webhooks[0].name: a lowercase RFC 1123 subdomain")
        );
        let object = config(vec![webhook(), webhook()]);
        let errors = strategy(false).validate(&object);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "webhooks[1].name");
    }

    #[test]
    fn client_config_takes_an_https_url_and_no_service() {
        let url = |u: &str| {
            let u = u.to_string();
            errors_with(false, move |h| h["clientConfig"]["url"] = json!(u))
        };
        assert_eq!(
            url("http://127.0.0.1/"),
            ["webhooks[0].clientConfig.url: 'https' is the only allowed URL scheme"]
        );
        assert_eq!(
            url("https://user@127.0.0.1/"),
            ["webhooks[0].clientConfig.url: user information is not permitted in the URL"]
        );
        assert_eq!(
            url("https://127.0.0.1/?a=b"),
            ["webhooks[0].clientConfig.url: query parameters are not permitted in the URL"]
        );
        assert_eq!(
            url("https://127.0.0.1/#top"),
            ["webhooks[0].clientConfig.url: fragments are not permitted in the URL"]
        );
        assert_eq!(
            url("https:///path"),
            ["webhooks[0].clientConfig.url: host must be specified"]
        );
        let service = errors_with(false, |h| {
            h["clientConfig"] = json!({"service": {"namespace": "default", "name": "hook"}})
        });
        assert_eq!(service.len(), 1);
        assert!(service[0].starts_with(
            "webhooks[0].clientConfig.service: service references are not supported by kcp"
        ));
        assert_eq!(
            errors_with(false, |h| h["clientConfig"] = json!({})),
            ["webhooks[0].clientConfig: exactly one of url or service is required"]
        );
    }

    #[test]
    fn rules_are_checked() {
        let rule = |r: Value| errors_with(false, move |h| h["rules"] = json!([r]));
        let errors = rule(json!({"operations": ["*", "CREATE"], "apiGroups": [],
            "apiVersions": ["v1"], "resources": ["*", "pods"], "scope": "Everywhere"}));
        assert_eq!(
            errors,
            [
                "webhooks[0].rules[0].operations: if '*' is present, must not specify other operations",
                "webhooks[0].rules[0].apiGroups: ",
                "webhooks[0].rules[0].resources[1]: if '*' is present, must not specify other resources without subresources",
                "webhooks[0].rules[0].scope: supported values: \"*\", \"Cluster\", \"Namespaced\"",
            ]
        );
        let errors = rule(json!({"operations": ["PATCH"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["pods/", "*/*", "/status"]}));
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(
            rule(
                json!({"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"],
            "resources": ["*", "*/status"], "scope": "Namespaced"})
            )
            .is_empty()
        );
    }

    #[test]
    fn policies_side_effects_timeouts_and_versions_are_checked() {
        assert_eq!(
            errors_with(false, |h| h["failurePolicy"] = json!("Maybe")),
            ["webhooks[0].failurePolicy: supported values: \"Ignore\", \"Fail\""]
        );
        assert_eq!(
            errors_with(false, |h| h["matchPolicy"] = json!("Fuzzy")),
            ["webhooks[0].matchPolicy: supported values: \"Exact\", \"Equivalent\""]
        );
        assert_eq!(
            errors_with(true, |h| h["reinvocationPolicy"] = json!("Always")),
            ["webhooks[0].reinvocationPolicy: supported values: \"Never\", \"IfNeeded\""]
        );
        assert_eq!(
            errors_with(false, |h| h["sideEffects"] = json!("Some")),
            ["webhooks[0].sideEffects: supported values: \"None\", \"NoneOnDryRun\""]
        );
        assert_eq!(
            errors_with(false, |h| {
                h.as_object_mut().unwrap().remove("sideEffects");
            }),
            ["webhooks[0].sideEffects: must specify one of None, NoneOnDryRun"]
        );
        for timeout in [0, 31] {
            assert_eq!(
                errors_with(false, |h| h["timeoutSeconds"] = json!(timeout)),
                ["webhooks[0].timeoutSeconds: the timeout value must be between 1 and 30 seconds"]
            );
        }
        assert_eq!(
            errors_with(false, |h| h["admissionReviewVersions"] = json!(["v1beta1"])),
            ["webhooks[0].admissionReviewVersions: must include at least one of v1"]
        );
        assert_eq!(
            errors_with(false, |h| h["admissionReviewVersions"] = json!([])),
            ["webhooks[0].admissionReviewVersions: must specify one of v1"]
        );
        assert_eq!(
            errors_with(false, |h| h["admissionReviewVersions"] =
                json!(["v1", "v1"])),
            ["webhooks[0].admissionReviewVersions[1]: "]
        );
    }

    #[test]
    fn selectors_and_match_conditions_are_checked() {
        let errors = errors_with(false, |h| {
            h["objectSelector"] = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})
        });
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("webhooks[0].objectSelector: "),
            "{errors:?}"
        );
        let errors = errors_with(false, |h| {
            h["matchConditions"] = json!([
                {"name": "one", "expression": "true"},
                {"name": "one", "expression": "true"},
                {"name": "", "expression": ""},
                {"name": "not a name", "expression": "true"},
            ])
        });
        assert_eq!(
            errors
                .iter()
                .map(|e| e.split(':').next().unwrap())
                .collect::<Vec<_>>(),
            [
                "webhooks[0].matchConditions[1].name",
                "webhooks[0].matchConditions[2].name",
                "webhooks[0].matchConditions[2].expression",
                "webhooks[0].matchConditions[3].name",
            ]
        );
        // With a compiler installed (kcp-admission's at start-up; one refusing `bad` here, like
        // the policy strategy's tests), expressions must compile.
        let _ = EXPRESSION_COMPILER.set(|source, _, _| {
            if source.contains("bad") {
                Err("ERROR: <input>: undeclared reference to 'bad'".into())
            } else {
                Ok(Vec::new())
            }
        });
        let errors = errors_with(false, |h| {
            h["matchConditions"] = json!([{"name": "broken", "expression": "bad.thing"}])
        });
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with(
                "webhooks[0].matchConditions[0].expression: compilation failed: ERROR: <input>: undeclared reference to 'bad'"
            ),
            "{errors:?}"
        );
        let many: Vec<Value> = (0..65)
            .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
            .collect();
        let errors = errors_with(false, |h| h["matchConditions"] = json!(many));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("webhooks[0].matchConditions: "),
            "{errors:?}"
        );
    }
}
