//! One webhook of a Validating- or MutatingWebhookConfiguration, read once per configuration
//! change into the shape the dispatcher needs, and kube-apiserver's decision whether a write calls
//! it (`generic.Webhook.ShouldCallHook`): admission configuration objects are never sent to
//! webhooks, then the namespace selector, the object selector and the rules decide, and an error
//! of a selector only counts when the rules match.
//!
//! `matchPolicy` needs no work here: kube's `Equivalent` also calls a webhook for the same
//! resource served in another version or group (converting the object), but this server serves
//! each resource in exactly one version, so `Exact` and `Equivalent` select the same writes.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, RuleWithOperations, ValidatingWebhook, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcp_apimachinery::ApiError;
use kcp_registry::admission::Operation;
use serde_json::Value;

use crate::Attributes;
use crate::cel::{Activation, MatchConditions};
use crate::matching::{Rule, namespace_selected, object_selected};

/// kube's default `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: i32 = 10;
/// kube's maximum `timeoutSeconds`.
const MAX_TIMEOUT_SECONDS: i32 = 30;

/// Resources of admission configuration, which webhooks never see (so a broken webhook cannot
/// lock its own configuration in place), as kube's `IsExemptAdmissionConfigurationResource`.
const EXEMPT_RESOURCES: [&str; 6] = [
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// Where a webhook is called: an `https` URL and the CA bundle that must sign its certificate
/// (absent: the system roots), or why it cannot be called (kcp allows no `service` references).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub url: Result<String, String>,
    pub ca_bundle: Option<Vec<u8>>,
}

impl From<&WebhookClientConfig> for Endpoint {
    fn from(config: &WebhookClientConfig) -> Endpoint {
        let url = match (&config.url, &config.service) {
            (Some(url), _) => Ok(url.clone()),
            (None, Some(_)) => Err("service references are not supported by kcp".to_string()),
            (None, None) => Err("webhook has no url".to_string()),
        };
        Endpoint {
            url,
            ca_bundle: config
                .ca_bundle
                .as_ref()
                .map(|bundle| bundle.0.clone())
                .filter(|bundle| !bundle.is_empty()),
        }
    }
}

/// One webhook, mutating or validating.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    pub name: String,
    pub endpoint: Endpoint,
    rules: Vec<Rule>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    /// The compiled `matchConditions`, or why they do not compile (kept rather than dropped,
    /// since a stored configuration is only ever checked when it was written).
    match_conditions: Result<MatchConditions, String>,
    /// `failurePolicy: Ignore`: a webhook that cannot be called is skipped.
    pub fail_open: bool,
    /// `sideEffects` is `None` or `NoneOnDryRun`: the webhook may see dry-run requests.
    pub dry_run_safe: bool,
    pub timeout: Duration,
    /// Speaks `admission.k8s.io/v1` AdmissionReview (the only version this server sends).
    pub accepts_v1: bool,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke: bool,
}

/// The fields both webhook kinds share, borrowed.
struct Fields<'a> {
    name: &'a str,
    client_config: &'a WebhookClientConfig,
    rules: Option<&'a Vec<RuleWithOperations>>,
    namespace_selector: Option<&'a LabelSelector>,
    object_selector: Option<&'a LabelSelector>,
    match_conditions: Option<&'a Vec<MatchCondition>>,
    failure_policy: Option<&'a str>,
    side_effects: &'a str,
    timeout_seconds: Option<i32>,
    admission_review_versions: &'a [String],
}

impl Hook {
    pub fn mutating(webhook: &MutatingWebhook) -> Hook {
        let mut hook = Hook::from_fields(Fields {
            name: &webhook.name,
            client_config: &webhook.client_config,
            rules: webhook.rules.as_ref(),
            namespace_selector: webhook.namespace_selector.as_ref(),
            object_selector: webhook.object_selector.as_ref(),
            match_conditions: webhook.match_conditions.as_ref(),
            failure_policy: webhook.failure_policy.as_deref(),
            side_effects: &webhook.side_effects,
            timeout_seconds: webhook.timeout_seconds,
            admission_review_versions: &webhook.admission_review_versions,
        });
        hook.reinvoke = webhook.reinvocation_policy.as_deref() == Some("IfNeeded");
        hook
    }

    pub fn validating(webhook: &ValidatingWebhook) -> Hook {
        Hook::from_fields(Fields {
            name: &webhook.name,
            client_config: &webhook.client_config,
            rules: webhook.rules.as_ref(),
            namespace_selector: webhook.namespace_selector.as_ref(),
            object_selector: webhook.object_selector.as_ref(),
            match_conditions: webhook.match_conditions.as_ref(),
            failure_policy: webhook.failure_policy.as_deref(),
            side_effects: &webhook.side_effects,
            timeout_seconds: webhook.timeout_seconds,
            admission_review_versions: &webhook.admission_review_versions,
        })
    }

    fn from_fields(fields: Fields<'_>) -> Hook {
        let seconds = fields
            .timeout_seconds
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        Hook {
            name: fields.name.to_string(),
            endpoint: Endpoint::from(fields.client_config),
            rules: fields.rules.into_iter().flatten().map(Rule::from).collect(),
            namespace_selector: fields.namespace_selector.cloned(),
            object_selector: fields.object_selector.cloned(),
            match_conditions: compile_conditions(fields.match_conditions),
            fail_open: fields.failure_policy == Some("Ignore"),
            dry_run_safe: matches!(fields.side_effects, "None" | "NoneOnDryRun"),
            timeout: Duration::from_secs(seconds.unsigned_abs().into()),
            accepts_v1: fields.admission_review_versions.iter().any(|v| v == "v1"),
            reinvoke: false,
        }
    }

    /// Whether the write's rules and selectors select this webhook (match conditions aside).
    /// `namespace` is the Namespace the object is in; for a write to a Namespace, its own labels
    /// select (the new object, or the old one on delete). A selector that cannot be evaluated
    /// fails the request (500), but only for a write the rules select.
    pub fn selects(
        &self,
        attrs: &Attributes,
        namespace: Option<&Value>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<bool, ApiError> {
        let namespace = if attrs.group.is_empty() && attrs.resource == "namespaces" {
            match attrs.operation {
                Operation::Delete => old,
                Operation::Create | Operation::Update => object,
            }
        } else {
            namespace
        };
        let by_namespace = namespace_selected(self.namespace_selector.as_ref(), attrs, namespace);
        let by_object = object_selected(self.object_selector.as_ref(), object, old);
        if matches!(by_namespace, Ok(false)) || matches!(by_object, Ok(false)) {
            return Ok(false);
        }
        if !self.rules.iter().any(|rule| rule.matches(attrs)) {
            return Ok(false);
        }
        by_namespace
            .and(by_object)
            .map_err(|err| ApiError::internal_error(&err))
    }
}

/// The result of a webhook's `matchConditions` on one write.
pub(crate) enum Conditions {
    Match,
    NoMatch,
    /// Some condition could not be evaluated and none was false; `failurePolicy` decides.
    Error(String),
}

impl Hook {
    /// Evaluates the match conditions (kube's webhook environment: `object`, `oldObject`,
    /// `request`): all true is a match, any false is not, otherwise the error.
    pub fn conditions(
        &self,
        object: Option<&Value>,
        old: Option<&Value>,
        request: &Value,
    ) -> Conditions {
        let conditions = match &self.match_conditions {
            Ok(conditions) if conditions.is_empty() => return Conditions::Match,
            Ok(conditions) => conditions,
            Err(err) => return Conditions::Error(err.clone()),
        };
        match conditions.matches(&Activation::new(object, old, request)) {
            Ok(true) => Conditions::Match,
            Ok(false) => Conditions::NoMatch,
            Err(err) => Conditions::Error(err),
        }
    }
}

fn compile_conditions(conditions: Option<&Vec<MatchCondition>>) -> Result<MatchConditions, String> {
    let pairs: Vec<(String, String)> = conditions
        .into_iter()
        .flatten()
        .map(|c| (c.name.clone(), c.expression.clone()))
        .collect();
    MatchConditions::compile(&pairs).map_err(|errors| errors.join("; "))
}

/// Whether the write is to an admission configuration object, which no webhook sees.
pub(crate) fn is_exempt(attrs: &Attributes) -> bool {
    attrs.group == "admissionregistration.k8s.io"
        && EXEMPT_RESOURCES.contains(&attrs.resource.as_str())
}
