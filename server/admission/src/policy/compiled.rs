//! What validating and mutating policies share once compiled: the param kind, match
//! constraints, match conditions, variables and failure policy, and how their expressions run.
//!
//! As in kube, an expression that does not compile does not disable its policy: it fails each
//! evaluation with `compilation error: ...`, which the failure policy then decides on (strategy
//! validation refuses such policies on write, so this covers objects stored before).

use kube_cel::cel as cel_value;

use super::Request;
use super::matcher::Constraints;
use crate::cel::{Activation, Converted, Environment, Expression, MatchConditions, Variables};

/// `failurePolicy`: what an error (compilation, evaluation, params, configuration) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailurePolicy {
    Fail,
    Ignore,
}

impl FailurePolicy {
    pub(super) fn parse(value: Option<&str>) -> FailurePolicy {
        match value {
            Some("Ignore") => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        }
    }
}

/// `paramKind`, as the `Objects` source reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ParamKind {
    pub api_version: String,
    pub kind: String,
}

/// One expression, or why it did not compile.
#[derive(Debug, Clone)]
pub(super) struct Compiled(Result<Expression, String>);

impl Compiled {
    pub(super) fn new(env: &Environment, source: &str) -> Compiled {
        Compiled(env.compile(source))
    }

    /// The expression as written, when it compiled.
    pub(super) fn source(&self) -> Option<&str> {
        self.0.as_ref().ok().map(Expression::source)
    }

    /// Evaluates; errors read as kube's (`compilation error: ...`, `expression '...' resulted
    /// in error: ...`).
    pub(super) fn evaluate(&self, activation: &Activation<'_>) -> Result<cel_value::Value, String> {
        let expression = self
            .0
            .as_ref()
            .map_err(|err| format!("compilation error: {err}"))?;
        expression.evaluate(activation).map_err(|err| {
            format!(
                "expression '{}' resulted in error: {err}",
                expression.source()
            )
        })
    }
}

/// The parts of a policy shared by both kinds.
#[derive(Debug, Clone)]
pub(super) struct Common {
    pub name: String,
    pub param_kind: Option<ParamKind>,
    pub constraints: Constraints,
    pub match_conditions: Result<MatchConditions, String>,
    pub variables: Vec<(String, Compiled)>,
    pub failure_policy: FailurePolicy,
}

impl Common {
    /// Compiles match conditions and variables (each variable may use the ones before it);
    /// `env` is the environment of the policy's other expressions, extended with the variables.
    pub(super) fn compile(
        name: &str,
        param_kind: Option<ParamKind>,
        constraints: Constraints,
        match_conditions: &[(String, String)],
        variables: &[(String, String)],
        failure_policy: Option<&str>,
        env: &mut Environment,
    ) -> Common {
        let match_conditions =
            MatchConditions::compile(match_conditions).map_err(|errors| errors.join("; "));
        let mut compiled_variables = Vec::new();
        for (variable, source) in variables {
            compiled_variables.push((variable.clone(), Compiled::new(env, source)));
            env.variables.push(variable.clone());
        }
        Common {
            name: name.to_string(),
            param_kind,
            constraints,
            match_conditions,
            variables: compiled_variables,
            failure_policy: FailurePolicy::parse(failure_policy),
        }
    }

    /// Whether the match conditions select the request with these params.
    pub(super) fn conditions_match(&self, activation: &Activation<'_>) -> Result<bool, String> {
        match &self.match_conditions {
            Ok(conditions) => conditions.matches(activation),
            Err(err) => Err(format!("compilation error: {err}")),
        }
    }

    /// The policy's variables, evaluated in order.
    pub(super) fn variables(&self, activation: &Activation<'_>) -> Variables {
        let mut variables = Variables::default();
        for (name, expression) in &self.variables {
            let result = expression.evaluate(&Activation {
                variables: Some(&variables),
                ..*activation
            });
            variables.insert(name, result);
        }
        variables
    }
}

/// The activation of one evaluation (without variables); its values are converted to CEL once,
/// into `converted`.
pub(super) fn activation<'a>(
    request: &'a Request<'a>,
    object: Option<&'a serde_json::Value>,
    params: Option<&'a serde_json::Value>,
    converted: &'a Converted,
) -> Activation<'a> {
    Activation {
        object,
        old_object: request.old,
        request: request.request,
        params,
        namespace_object: request.namespace_object,
        variables: None,
        converted: Some(converted),
    }
}
