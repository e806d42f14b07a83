//! ValidatingAdmissionPolicy evaluation, as kube's `validatingadmissionpolicy` plugin
//! (`admission/plugin/policy/validating`): for each binding of a matching policy, for each
//! param, the match conditions, then the variables, validations and audit annotations.
//!
//! A failed validation (or, under `failurePolicy: Fail`, an error) is acted on by the binding's
//! `validationActions`: `Deny` fails the request with the first such decision, `Warn` adds
//! `Validation failed for ValidatingAdmissionPolicy '<p>' with binding '<b>': <message>`, `Audit`
//! records the `validation.policy.admission.k8s.io/validation_failure` audit annotation.
//! Binding errors (selectors, params) deny directly under `Fail`, as kube's configuration errors.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1;
use kcp_apimachinery::StatusReason;
use kube_cel::cel as cel_value;
use serde_json::json;

use super::compiled::{Common, Compiled, FailurePolicy, ParamKind, activation};
use super::matcher::Constraints;
use super::params::{self, ParamRef};
use super::{Denial, Request};
use crate::Outcome;
use crate::cel::{Activation, Converted, Environment};
use crate::sources::Objects;

/// Kube's cap on a message produced by `messageExpression`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// Kube's cap on an audit annotation value.
const MAX_ANNOTATION_BYTES: usize = 10 * 1024;
/// The audit annotation of `Audit` validation actions.
const VALIDATION_FAILURE_ANNOTATION: &str = "validation.policy.admission.k8s.io/validation_failure";

/// One `validations` entry.
#[derive(Debug, Clone)]
struct Validation {
    expression: Compiled,
    source: String,
    message: Option<String>,
    message_expression: Option<Compiled>,
    reason: StatusReason,
}

/// A binding of a validating policy.
#[derive(Debug, Clone)]
pub(super) struct ValidatingBinding {
    name: String,
    constraints: Option<Constraints>,
    param_ref: Option<ParamRef>,
    actions: Vec<String>,
}

impl ValidatingBinding {
    /// The binding and the name of its policy; `None` without a spec or policy name.
    pub(super) fn new(binding: &v1::ValidatingAdmissionPolicyBinding) -> Option<(String, Self)> {
        let spec = binding.spec.as_ref()?;
        let policy = spec.policy_name.clone().filter(|p| !p.is_empty())?;
        let binding = ValidatingBinding {
            name: binding.metadata.name.clone().unwrap_or_default(),
            constraints: spec.match_resources.as_ref().map(Constraints::from),
            param_ref: spec.param_ref.as_ref().map(ParamRef::from),
            actions: spec.validation_actions.clone().unwrap_or_default(),
        };
        Some((policy, binding))
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }
}

/// A compiled ValidatingAdmissionPolicy with its bindings.
#[derive(Debug, Clone)]
pub(super) struct ValidatingPolicy {
    common: Common,
    validations: Vec<Validation>,
    audit_annotations: Vec<(String, Compiled)>,
    pub(super) bindings: Vec<ValidatingBinding>,
}

/// The status reason (and so the code) of a failed validation.
fn reason(reason: Option<&str>) -> StatusReason {
    match reason {
        Some("Unauthorized") => StatusReason::Unauthorized,
        Some("Forbidden") => StatusReason::Forbidden,
        Some("RequestEntityTooLarge") => StatusReason::RequestEntityTooLarge,
        _ => StatusReason::Invalid,
    }
}

/// The HTTP code of a denial with this reason (kube's `reasonToCode`).
fn code(reason: StatusReason) -> u16 {
    match reason {
        StatusReason::Unauthorized => 401,
        StatusReason::Forbidden => 403,
        StatusReason::RequestEntityTooLarge => 413,
        _ => 422,
    }
}

/// What one evaluation (one binding, one param) decided.
#[derive(Default)]
struct Evaluation {
    /// Failed validations and errors to act on: (validation index, message, reason).
    failures: Vec<(usize, String, StatusReason)>,
    /// Published audit annotations (key, value).
    annotations: Vec<(String, String)>,
    /// Audit annotation errors under `Fail`, which deny.
    annotation_errors: Vec<String>,
}

impl ValidatingPolicy {
    /// Compiles a policy; `None` without a spec or `matchConstraints` (which kube requires).
    pub(super) fn new(policy: &v1::ValidatingAdmissionPolicy) -> Option<ValidatingPolicy> {
        let spec = policy.spec.as_ref()?;
        let constraints = Constraints::from(spec.match_constraints.as_ref()?);
        let param_kind = spec.param_kind.as_ref().and_then(|kind| {
            Some(ParamKind {
                api_version: kind.api_version.clone()?,
                kind: kind.kind.clone()?,
            })
        });
        let conditions: Vec<(String, String)> = spec
            .match_conditions
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.expression.clone()))
            .collect();
        let variables: Vec<(String, String)> = spec
            .variables
            .iter()
            .flatten()
            .map(|v| (v.name.clone(), v.expression.clone()))
            .collect();
        let mut env = Environment::default();
        let common = Common::compile(
            policy.metadata.name.as_deref().unwrap_or_default(),
            param_kind,
            constraints,
            &conditions,
            &variables,
            spec.failure_policy.as_deref(),
            &mut env,
        );
        let validations = spec
            .validations
            .iter()
            .flatten()
            .map(|v| Validation {
                expression: Compiled::new(&env, &v.expression),
                source: v.expression.clone(),
                message: v.message.clone(),
                message_expression: v
                    .message_expression
                    .as_deref()
                    .filter(|m| !m.trim().is_empty())
                    .map(|m| Compiled::new(&env, m)),
                reason: reason(v.reason.as_deref()),
            })
            .collect();
        let audit_annotations = spec
            .audit_annotations
            .iter()
            .flatten()
            .map(|a| (a.key.clone(), Compiled::new(&env, &a.value_expression)))
            .collect();
        Some(ValidatingPolicy {
            common,
            validations,
            audit_annotations,
            bindings: Vec::new(),
        })
    }

    pub(super) fn name(&self) -> &str {
        &self.common.name
    }

    /// Runs the policy on one request, recording the first denial, warnings and annotations.
    pub(super) async fn validate(
        &self,
        objects: &dyn Objects,
        request: &Request<'_>,
        denials: &mut Vec<Denial>,
        outcome: &mut Outcome,
    ) {
        if self.common.constraints.matches(request) != Ok(true) {
            return;
        }
        let fail = self.common.failure_policy == FailurePolicy::Fail;
        let mut annotations: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for binding in &self.bindings {
            let denial = |message: String, reason: StatusReason| Denial {
                message: format!(
                    "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
                    self.name(),
                    binding.name
                ),
                reason,
                code: code(reason),
            };
            let selected = match binding.constraints.as_ref().map(|c| c.matches(request)) {
                Some(Ok(false)) => continue,
                Some(Err(err)) => Err(err),
                _ => {
                    params::collect(
                        objects,
                        self.common.param_kind.as_ref(),
                        binding.param_ref.as_ref(),
                        request.attrs.namespace.as_deref(),
                    )
                    .await
                }
            };
            let params = match selected {
                Ok(params) => params,
                Err(err) => {
                    if fail {
                        denials.push(denial(
                            format!("failed to configure binding: {err}"),
                            StatusReason::Invalid,
                        ));
                    }
                    continue;
                }
            };
            for param in &params {
                let evaluation = self.evaluate(request, param.as_ref());
                for (index, message, reason) in evaluation.failures {
                    for action in &binding.actions {
                        match action.as_str() {
                            "Deny" => denials.push(denial(message.clone(), reason)),
                            "Warn" => outcome.warn(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                                self.name(),
                                binding.name
                            )),
                            "Audit" => {
                                let value = json!([{
                                    "message": message,
                                    "policy": self.name(),
                                    "binding": binding.name,
                                    "expressionIndex": index,
                                    "validationActions": binding.actions,
                                }]);
                                outcome
                                    .audit_annotations
                                    .entry(VALIDATION_FAILURE_ANNOTATION.to_string())
                                    .or_insert_with(|| value.to_string());
                            }
                            _ => {}
                        }
                    }
                }
                for error in evaluation.annotation_errors {
                    denials.push(denial(error, StatusReason::Invalid));
                }
                for (key, value) in evaluation.annotations {
                    let values = annotations.entry(key).or_default();
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
            }
        }
        for (key, values) in annotations {
            outcome
                .audit_annotations
                .insert(format!("{}/{key}", self.name()), values.join(", "));
        }
    }

    /// Evaluates the policy for one param.
    fn evaluate(&self, request: &Request<'_>, param: Option<&serde_json::Value>) -> Evaluation {
        let fail = self.common.failure_policy == FailurePolicy::Fail;
        let mut evaluation = Evaluation::default();
        let converted = Converted::default();
        let base = activation(request, request.object, param, &converted);
        match self.common.conditions_match(&base) {
            Ok(true) => {}
            Ok(false) => return evaluation,
            Err(err) => {
                if fail {
                    evaluation.failures.push((0, err, StatusReason::Invalid));
                }
                return evaluation;
            }
        }
        let variables = self.common.variables(&base);
        let activation = Activation {
            variables: Some(&variables),
            ..base
        };
        for (index, validation) in self.validations.iter().enumerate() {
            match validation.expression.evaluate(&activation) {
                Ok(cel_value::Value::Bool(true)) => {}
                Ok(cel_value::Value::Bool(false)) => evaluation.failures.push((
                    index,
                    validation.message(&activation),
                    validation.reason,
                )),
                Ok(other) => {
                    if fail {
                        evaluation.failures.push((
                            index,
                            format!(
                                "expression '{}' resulted in error: expected a bool, got {}",
                                validation.source,
                                other.type_of()
                            ),
                            StatusReason::Invalid,
                        ));
                    }
                }
                Err(err) => {
                    if fail {
                        evaluation
                            .failures
                            .push((index, err, StatusReason::Invalid));
                    }
                }
            }
        }
        for (key, expression) in &self.audit_annotations {
            match annotation_value(expression, &activation) {
                Ok(Some(value)) => evaluation.annotations.push((key.clone(), value)),
                Ok(None) => {}
                Err(err) => {
                    if fail {
                        evaluation.annotation_errors.push(err);
                    }
                }
            }
        }
        evaluation
    }
}

impl Validation {
    /// The failure message: `messageExpression` (a non-empty single line), else `message`,
    /// else `failed expression: <expression>`.
    fn message(&self, activation: &Activation<'_>) -> String {
        let evaluated = self
            .message_expression
            .as_ref()
            .and_then(|m| match m.evaluate(activation) {
                Ok(cel_value::Value::String(s)) => Some(s.trim().to_string()),
                _ => None,
            })
            .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
        evaluated
            .or_else(|| {
                self.message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| format!("failed expression: {}", self.source.trim()))
    }
}

/// An audit annotation's value: a trimmed non-empty string, nothing (empty or null), or an error.
fn annotation_value(
    expression: &Compiled,
    activation: &Activation<'_>,
) -> Result<Option<String>, String> {
    match expression.evaluate(activation)? {
        cel_value::Value::String(s) => {
            let mut value = s.trim().to_string();
            if value.len() > MAX_ANNOTATION_BYTES {
                let mut end = MAX_ANNOTATION_BYTES;
                while !value.is_char_boundary(end) {
                    end -= 1;
                }
                value.truncate(end);
            }
            Ok(Some(value).filter(|v| !v.is_empty()))
        }
        cel_value::Value::Null => Ok(None),
        other => Err(format!(
            "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
            expression.source().unwrap_or_default(),
            other.type_of()
        )),
    }
}
