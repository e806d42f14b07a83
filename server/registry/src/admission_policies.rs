//! admissionregistration.k8s.io ValidatingAdmissionPolicy and its Binding (v1), and
//! MutatingAdmissionPolicy and its Binding (v1beta1, the version Kubernetes 1.35 serves): objects
//! of their logical cluster, evaluated by kcp-admission on writes in that cluster only.
//!
//! Defaults and validation are kube-apiserver's (`SetDefaults_*`, `ValidateValidatingAdmission
//! Policy[Binding]`, `ValidateMutatingAdmissionPolicy[Binding]`): required fields, enums, and
//! every CEL expression must compile (`spec.validations[0].expression: Invalid value: "...":
//! compilation failed: ...`). The CEL environment is kcp-admission's, which depends on this
//! crate, so it is installed here at start-up ([`EXPRESSION_COMPILER`]); until then only
//! the presence of expressions is checked. Two differences from kube: `paramRef`
//! defaults `parameterNotFoundAction` to `Deny` (kube requires it), and the contents of
//! resource rules are not checked here (rules that name nothing select nothing).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use kcp_apimachinery::validation::{is_dns1123_subdomain, is_qualified_name};
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Map, Value, json};

use super::admission_webhooks::{rule_errors, selector_errors};
use super::{Column, ResourceType, Strategy};

const GROUP: &str = "admissionregistration.k8s.io";

pub fn resources() -> Vec<ResourceType> {
    let mut validating = super::resource(
        GROUP,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
        &[],
        Box::new(Policies { mutating: false }),
    );
    validating.subresources = vec!["status".into()];
    let validating_binding = super::resource(
        GROUP,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
        &[],
        Box::new(Bindings { mutating: false }),
    );
    let mut mutating = super::resource(
        GROUP,
        "MutatingAdmissionPolicy",
        "mutatingadmissionpolicies",
        false,
        &[],
        Box::new(Policies { mutating: true }),
    );
    mutating.version = "v1beta1".into();
    let mut mutating_binding = super::resource(
        GROUP,
        "MutatingAdmissionPolicyBinding",
        "mutatingadmissionpolicybindings",
        false,
        &[],
        Box::new(Bindings { mutating: true }),
    );
    mutating_binding.version = "v1beta1".into();
    vec![validating, validating_binding, mutating, mutating_binding]
}

/// What an expression may use besides `object`, `oldObject`, `request`, `params` and
/// `namespaceObject`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpressionScope {
    /// The policy's variables declared before the expression (`variables.<name>`).
    pub variables: Vec<String>,
    /// Whether `Object{...}` and `JSONPatch{...}` may be built (mutations).
    pub object_types: bool,
}

/// Compiles one expression that may use these `variables` (and, with `object_types`,
/// `Object{...}`/`JSONPatch{...}`): the field paths it selects from `object` and `oldObject`, or
/// the compilation error (kube's detail after `compilation failed: `).
pub type ExpressionCompiler = fn(&str, &[String], bool) -> Result<Vec<Vec<String>>, String>;

/// The CEL compiler policies are validated with, installed once at start-up by kcp-admission.
pub static EXPRESSION_COMPILER: OnceLock<ExpressionCompiler> = OnceLock::new();

/// Compiles with the installed compiler; `None` when none is installed.
pub fn compile_expression(
    source: &str,
    scope: &ExpressionScope,
) -> Option<Result<Vec<Vec<String>>, String>> {
    EXPRESSION_COMPILER
        .get()
        .map(|compile| compile(source, &scope.variables, scope.object_types))
}

/// One CEL expression of a policy, where it is and what it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyExpression {
    /// Its field path (`spec.validations[0].expression`).
    pub field: String,
    pub source: String,
    pub scope: ExpressionScope,
}

fn items<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value
        .get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// Every non-empty expression of a policy's spec, in kube's validation order: match
/// conditions, variables, then validations, message expressions and audit annotation values
/// (ValidatingAdmissionPolicy) or mutations (MutatingAdmissionPolicy).
pub fn policy_expressions(spec: &Value, mutating: bool) -> Vec<PolicyExpression> {
    let mut scope = ExpressionScope {
        variables: Vec::new(),
        object_types: mutating,
    };
    let mut expressions = Vec::new();
    let mut push = |field: String, source: &str, scope: &ExpressionScope| {
        if !source.trim().is_empty() {
            expressions.push(PolicyExpression {
                field,
                source: source.to_string(),
                scope: scope.clone(),
            });
        }
    };
    let conditions_scope = ExpressionScope::default();
    for (i, condition) in items(spec, "matchConditions").iter().enumerate() {
        let field = format!("spec.matchConditions[{i}].expression");
        push(field, text(condition, "expression"), &conditions_scope);
    }
    for (i, variable) in items(spec, "variables").iter().enumerate() {
        let field = format!("spec.variables[{i}].expression");
        push(field, text(variable, "expression"), &scope);
        scope.variables.push(text(variable, "name").to_string());
    }
    if mutating {
        for (i, mutation) in items(spec, "mutations").iter().enumerate() {
            for part in ["applyConfiguration", "jsonPatch"] {
                if let Some(body) = mutation.get(part) {
                    let field = format!("spec.mutations[{i}].{part}.expression");
                    push(field, text(body, "expression"), &scope);
                }
            }
        }
        return expressions;
    }
    for (i, validation) in items(spec, "validations").iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        push(
            format!("{at}.expression"),
            text(validation, "expression"),
            &scope,
        );
        let message = text(validation, "messageExpression");
        push(format!("{at}.messageExpression"), message, &scope);
    }
    for (i, annotation) in items(spec, "auditAnnotations").iter().enumerate() {
        let field = format!("spec.auditAnnotations[{i}].valueExpression");
        push(field, text(annotation, "valueExpression"), &scope);
    }
    expressions
}

/// Sets `field` to `value` when absent or null.
fn default_field(object: &mut Map<String, Value>, field: &str, value: Value) {
    if object.get(field).is_none_or(Value::is_null) {
        object.insert(field.to_string(), value);
    }
}

/// kube's MatchResources defaults: `matchPolicy: Equivalent`, selectors selecting everything,
/// rule scope `*`.
fn default_match_resources(resources: Option<&mut Value>) {
    let Some(resources) = resources.and_then(Value::as_object_mut) else {
        return;
    };
    default_field(resources, "matchPolicy", json!("Equivalent"));
    default_field(resources, "namespaceSelector", json!({}));
    default_field(resources, "objectSelector", json!({}));
    for rules in ["resourceRules", "excludeResourceRules"] {
        let rules = resources.get_mut(rules).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            default_field(rule, "scope", json!("*"));
        }
    }
}

/// Generation 1 on create; one more on updates that change the spec.
fn set_generation(new: &mut Value, old: Option<&Value>) {
    let generation = match old {
        None => 1,
        Some(old) => {
            let current = meta::generation(old).unwrap_or(1);
            if new.get("spec") != old.get("spec") {
                current + 1
            } else {
                current
            }
        }
    };
    meta::set_generation(new, generation);
}

/// ValidatingAdmissionPolicy (its status, type checking, is written through `status` only) and
/// MutatingAdmissionPolicy (no status).
struct Policies {
    mutating: bool,
}

impl Policies {
    fn default_spec(&self, object: &mut Value) {
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        default_field(spec, "failurePolicy", json!("Fail"));
        if self.mutating {
            default_field(spec, "reinvocationPolicy", json!("Never"));
        }
        default_match_resources(spec.get_mut("matchConstraints"));
    }
}

impl Strategy for Policies {
    fn prepare_for_create(&self, object: &mut Value) {
        if !self.mutating {
            object["status"] = json!({});
        }
        set_generation(object, None);
        self.default_spec(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        if subresource.is_none() && !self.mutating {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
        }
        self.default_spec(new);
        set_generation(new, Some(old));
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        let mut errors = Vec::new();
        errors.extend(enum_error(
            spec.get("failurePolicy"),
            "spec.failurePolicy",
            &["Fail", "Ignore"],
            true,
        ));
        if let Some(kind) = spec.get("paramKind").filter(|k| !k.is_null()) {
            for field in ["apiVersion", "kind"] {
                if text(kind, field).is_empty() {
                    errors.push(FieldError::required(&format!("spec.paramKind.{field}"), ""));
                }
            }
        }
        match spec.get("matchConstraints").filter(|m| !m.is_null()) {
            None => errors.push(FieldError::required("spec.matchConstraints", "")),
            Some(constraints) => {
                errors.extend(match_resources_errors(constraints, "spec.matchConstraints"));
                if items(constraints, "resourceRules").is_empty() {
                    errors.push(FieldError::required(
                        "spec.matchConstraints.resourceRules",
                        "",
                    ));
                }
            }
        }
        errors.extend(match_conditions_errors(items(spec, "matchConditions")));
        errors.extend(variables_errors(items(spec, "variables")));
        if self.mutating {
            errors.extend(mutations_errors(items(spec, "mutations")));
            errors.extend(enum_error(
                spec.get("reinvocationPolicy"),
                "spec.reinvocationPolicy",
                &["IfNeeded", "Never"],
                true,
            ));
        } else {
            errors.extend(validations_errors(
                spec,
                meta::name(object).unwrap_or_default(),
            ));
        }
        errors.extend(compile_errors(spec, self.mutating));
        errors
    }

    fn columns(&self) -> Vec<Column> {
        let count = if self.mutating {
            Column::new(
                "Mutations",
                "integer",
                "Mutation indicates the number of mutations rules defined in this configuration",
            )
        } else {
            Column::new(
                "Validations",
                "integer",
                "Validations indicates the number of validation rules defined in this configuration",
            )
        };
        vec![
            count,
            Column::new(
                "ParamKind",
                "string",
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
        ]
    }

    /// kubectl's cells: the number of validations or mutations and `<apiVersion>/<kind>` of the
    /// params (`<unset>`).
    fn cells(&self, object: &Value) -> Vec<Value> {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        let count = items(
            spec,
            if self.mutating {
                "mutations"
            } else {
                "validations"
            },
        )
        .len();
        let param_kind = match spec.get("paramKind").filter(|k| !k.is_null()) {
            Some(kind) => format!("{}/{}", text(kind, "apiVersion"), text(kind, "kind")),
            None => "<unset>".to_string(),
        };
        vec![json!(count), json!(param_kind)]
    }
}

/// An enum field: one of `supported`, and present when `required`.
fn enum_error(
    value: Option<&Value>,
    path: &str,
    supported: &[&str],
    required: bool,
) -> Option<FieldError> {
    match value.filter(|v| !v.is_null()) {
        None => required.then(|| FieldError::required(path, "")),
        Some(value) => {
            let known = value.as_str().is_some_and(|v| supported.contains(&v));
            (!known).then(|| FieldError::not_supported(path, value.clone(), supported))
        }
    }
}

/// A `matchConstraints`/`matchResources`: its match policy and selectors.
fn match_resources_errors(resources: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    errors.extend(enum_error(
        resources.get("matchPolicy"),
        &format!("{path}.matchPolicy"),
        &["Equivalent", "Exact"],
        true,
    ));
    for selector in ["namespaceSelector", "objectSelector"] {
        let at = format!("{path}.{selector}");
        match resources.get(selector).filter(|s| !s.is_null()) {
            None => errors.push(FieldError::required(&at, "")),
            Some(value) => errors.extend(selector_errors(Some(value), &at)),
        }
    }
    for rules in ["resourceRules", "excludeResourceRules"] {
        for (index, rule) in items(resources, rules).iter().enumerate() {
            errors.extend(rule_errors(rule, &format!("{path}.{rules}[{index}]")));
        }
    }
    errors
}

/// Names present, qualified and unique; expressions present.
fn match_conditions_errors(conditions: &[Value]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = format!("spec.matchConditions[{i}]");
        let name = text(condition, "name");
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{at}.name"), ""));
        } else {
            for message in is_qualified_name(name) {
                errors.push(FieldError::invalid(
                    &format!("{at}.name"),
                    json!(name),
                    &message,
                ));
            }
            if !names.insert(name) {
                errors.push(FieldError::duplicate(&format!("{at}.name"), json!(name)));
            }
        }
        if text(condition, "expression").trim().is_empty() {
            errors.push(FieldError::required(&format!("{at}.expression"), ""));
        }
    }
    errors
}

fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !kcp_apiextensions::CEL_RESERVED_WORDS.contains(&name)
}

fn variables_errors(variables: &[Value]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, variable) in variables.iter().enumerate() {
        let at = format!("spec.variables[{i}]");
        let name = text(variable, "name");
        if name.trim().is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(name) {
            errors.push(FieldError::invalid(
                &format!("{at}.name"),
                json!(name),
                "name is not a valid CEL identifier",
            ));
        } else if !names.insert(name) {
            errors.push(FieldError::duplicate(&format!("{at}.name"), json!(name)));
        }
        if text(variable, "expression").trim().is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.expression"),
                "expression is not specified",
            ));
        }
    }
    errors
}

/// Validations, or audit annotations, must be present; messages, reasons and keys as kube.
fn validations_errors(spec: &Value, policy_name: &str) -> Vec<FieldError> {
    let validations = items(spec, "validations");
    let annotations = items(spec, "auditAnnotations");
    if validations.is_empty() && annotations.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        return vec![
            FieldError::required("spec.validations", detail),
            FieldError::required("spec.auditAnnotations", detail),
        ];
    }
    let mut errors = Vec::new();
    for (i, validation) in validations.iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        if text(validation, "expression").trim().is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.expression"),
                "expression is not specified",
            ));
        }
        let message_expression = text(validation, "messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errors.push(FieldError::invalid(
                &format!("{at}.messageExpression"),
                json!(message_expression),
                "must be non-empty if specified",
            ));
        }
        let message = text(validation, "message");
        if !message.is_empty() && message.trim().is_empty() {
            errors.push(FieldError::invalid(
                &format!("{at}.message"),
                json!(message),
                "message must be non-empty if specified",
            ));
        } else if message.trim().contains(['\n', '\r']) {
            errors.push(FieldError::invalid(
                &format!("{at}.message"),
                json!(message),
                "message must not contain line breaks",
            ));
        }
        errors.extend(enum_error(
            validation.get("reason"),
            &format!("{at}.reason"),
            &[
                "Forbidden",
                "Invalid",
                "RequestEntityTooLarge",
                "Unauthorized",
            ],
            false,
        ));
    }
    let mut keys = BTreeSet::new();
    for (i, annotation) in annotations.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        let key = text(annotation, "key");
        for message in is_qualified_name(&format!("{policy_name}/{key}")) {
            errors.push(FieldError::invalid(
                &format!("{at}.key"),
                json!(key),
                &message,
            ));
        }
        if !keys.insert(key) {
            errors.push(FieldError::duplicate(&format!("{at}.key"), json!(key)));
        }
        if text(annotation, "valueExpression").trim().is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.valueExpression"),
                "valueExpression is not specified",
            ));
        }
    }
    errors
}

/// At least one mutation, each with the expression its patch type needs.
fn mutations_errors(mutations: &[Value]) -> Vec<FieldError> {
    if mutations.is_empty() {
        return vec![FieldError::required(
            "spec.mutations",
            "mutations must contain at least one item",
        )];
    }
    let mut errors = Vec::new();
    for (i, mutation) in mutations.iter().enumerate() {
        let at = format!("spec.mutations[{i}]");
        let (wanted, other) = match text(mutation, "patchType") {
            "ApplyConfiguration" => ("applyConfiguration", "jsonPatch"),
            "JSONPatch" => ("jsonPatch", "applyConfiguration"),
            _ => {
                errors.extend(enum_error(
                    mutation.get("patchType"),
                    &format!("{at}.patchType"),
                    &["ApplyConfiguration", "JSONPatch"],
                    true,
                ));
                continue;
            }
        };
        match mutation.get(wanted).filter(|m| !m.is_null()) {
            None => errors.push(FieldError::required(&format!("{at}.{wanted}"), "")),
            Some(body) if text(body, "expression").trim().is_empty() => errors.push(
                FieldError::required(&format!("{at}.{wanted}.expression"), ""),
            ),
            Some(_) => {}
        }
        if mutation.get(other).is_some_and(|m| !m.is_null()) {
            errors.push(FieldError::forbidden(
                &format!("{at}.{other}"),
                &format!(
                    "must not be set when patchType is {}",
                    text(mutation, "patchType")
                ),
            ));
        }
    }
    errors
}

/// Every expression must compile (when a compiler is installed).
fn compile_errors(spec: &Value, mutating: bool) -> Vec<FieldError> {
    policy_expressions(spec, mutating)
        .into_iter()
        .filter_map(|expression| {
            let Some(Err(err)) = compile_expression(&expression.source, &expression.scope) else {
                return None;
            };
            Some(FieldError::invalid(
                &expression.field,
                json!(expression.source),
                &format!("compilation failed: {err}"),
            ))
        })
        .collect()
}

/// ValidatingAdmissionPolicyBinding and MutatingAdmissionPolicyBinding.
struct Bindings {
    mutating: bool,
}

impl Strategy for Bindings {
    fn prepare_for_create(&self, object: &mut Value) {
        set_generation(object, None);
        default_binding(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, _subresource: Option<&str>) {
        default_binding(new);
        set_generation(new, Some(old));
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        let mut errors = Vec::new();
        let policy = text(spec, "policyName");
        if policy.is_empty() {
            errors.push(FieldError::required("spec.policyName", ""));
        } else {
            for message in is_dns1123_subdomain(policy) {
                errors.push(FieldError::invalid(
                    "spec.policyName",
                    json!(policy),
                    &message,
                ));
            }
        }
        if let Some(param_ref) = spec.get("paramRef").filter(|p| !p.is_null()) {
            errors.extend(param_ref_errors(param_ref));
        }
        if let Some(resources) = spec.get("matchResources").filter(|m| !m.is_null()) {
            errors.extend(match_resources_errors(resources, "spec.matchResources"));
        }
        if !self.mutating {
            errors.extend(validation_actions_errors(spec.get("validationActions")));
        }
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new(
                "PolicyName",
                "string",
                "PolicyName indicates the policy definition which the policy binding binded to",
            ),
            Column::new(
                "ParamRef",
                "string",
                "ParamRef indicates the param resource which sets the configration param",
            ),
        ]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        vec![
            json!(text(spec, "policyName")),
            json!(param_ref_cell(spec.get("paramRef"))),
        ]
    }
}

/// kubectl's ParamRef cell: `<namespace>/<name>` (`*/<name>` without a namespace), the selector
/// as Go prints a `LabelSelector`, or `<unset>`.
fn param_ref_cell(param_ref: Option<&Value>) -> String {
    let Some(param_ref) = param_ref.filter(|p| !p.is_null()) else {
        return "<unset>".into();
    };
    let name = text(param_ref, "name");
    if !name.is_empty() {
        return match text(param_ref, "namespace") {
            "" => format!("*/{name}"),
            namespace => format!("{namespace}/{name}"),
        };
    }
    let Some(selector) = param_ref.get("selector").filter(|s| !s.is_null()) else {
        return "<unset>".into();
    };
    let mut labels: Vec<(&String, &str)> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
        .collect();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = items(selector, "matchExpressions")
        .iter()
        .map(|e| {
            let values: Vec<&str> = items(e, "values")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                text(e, "key"),
                text(e, "operator"),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

fn default_binding(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    default_match_resources(spec.get_mut("matchResources"));
    if let Some(param_ref) = spec.get_mut("paramRef").and_then(Value::as_object_mut) {
        default_field(param_ref, "parameterNotFoundAction", json!("Deny"));
    }
}

/// Exactly one of `name` and `selector`, and a known `parameterNotFoundAction`.
fn param_ref_errors(param_ref: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = text(param_ref, "name");
    let selector = param_ref.get("selector").filter(|s| !s.is_null());
    const EXCLUSIVE: &str = "name and selector are mutually exclusive";
    if !name.is_empty() && selector.is_some() {
        errors.push(FieldError::forbidden("spec.paramRef.name", EXCLUSIVE));
        errors.push(FieldError::forbidden("spec.paramRef.selector", EXCLUSIVE));
    }
    if let Some(selector) = selector {
        errors.extend(selector_errors(Some(selector), "spec.paramRef.selector"));
    }
    if name.is_empty() && selector.is_none() {
        errors.push(FieldError::required(
            "spec.paramRef",
            "one of name or selector must be specified",
        ));
    }
    errors.extend(enum_error(
        param_ref.get("parameterNotFoundAction"),
        "spec.paramRef.parameterNotFoundAction",
        &["Deny", "Allow"],
        true,
    ));
    errors
}

/// At least one of `Deny`, `Warn`, `Audit`, without duplicates, and not both Deny and Warn.
fn validation_actions_errors(actions: Option<&Value>) -> Vec<FieldError> {
    const PATH: &str = "spec.validationActions";
    let actions = actions
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, action) in actions.iter().enumerate() {
        let at = format!("{PATH}[{i}]");
        errors.extend(enum_error(
            Some(action),
            &at,
            &["Audit", "Deny", "Warn"],
            true,
        ));
        if !seen.insert(action.as_str().unwrap_or_default()) {
            errors.push(FieldError::duplicate(&at, action.clone()));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errors.push(FieldError::invalid(
            PATH,
            json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if actions.is_empty() {
        errors.push(FieldError::required(
            PATH,
            "at least one validation action is required",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn rules() -> Value {
        json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]})
    }

    fn prepared(strategy: &dyn Strategy, mut object: Value) -> Value {
        strategy.prepare_for_create(&mut object);
        object
    }

    fn errors(strategy: &dyn Strategy, object: Value) -> Vec<String> {
        let object = prepared(strategy, object);
        strategy
            .validate(&object)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    const VALIDATING: Policies = Policies { mutating: false };
    const MUTATING: Policies = Policies { mutating: true };
    const VALIDATING_BINDING: Bindings = Bindings { mutating: false };
    const MUTATING_BINDING: Bindings = Bindings { mutating: true };

    #[test]
    fn defaults_are_kubes() {
        let object = prepared(
            &VALIDATING,
            policy(json!({"matchConstraints": rules(), "validations": [{"expression": "true"}]})),
        );
        assert_eq!(object["spec"]["failurePolicy"], "Fail");
        let constraints = &object["spec"]["matchConstraints"];
        assert_eq!(constraints["matchPolicy"], "Equivalent");
        assert_eq!(constraints["namespaceSelector"], json!({}));
        assert_eq!(constraints["objectSelector"], json!({}));
        assert_eq!(constraints["resourceRules"][0]["scope"], "*");
        assert_eq!(object["status"], json!({}));
        assert_eq!(meta::generation(&object), Some(1));
        let mutating = prepared(&MUTATING, policy(json!({"matchConstraints": rules()})));
        assert_eq!(mutating["spec"]["reinvocationPolicy"], "Never");
        assert!(mutating.get("status").is_none());
        let binding = prepared(
            &VALIDATING_BINDING,
            json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": {"name": "x"},
                   "matchResources": {}, "validationActions": ["Deny"]}}),
        );
        assert_eq!(
            binding["spec"]["paramRef"]["parameterNotFoundAction"],
            "Deny"
        );
        assert_eq!(
            binding["spec"]["matchResources"]["matchPolicy"],
            "Equivalent"
        );
    }

    #[test]
    fn generation_moves_with_the_spec() {
        let old = prepared(
            &VALIDATING,
            policy(json!({"matchConstraints": rules(), "validations": [{"expression": "true"}]})),
        );
        let mut same = old.clone();
        same["metadata"]["labels"] = json!({"a": "b"});
        VALIDATING.prepare_for_update(&mut same, &old, None);
        assert_eq!(meta::generation(&same), Some(1));
        let mut changed = old.clone();
        changed["spec"]["validations"] = json!([{"expression": "false"}]);
        VALIDATING.prepare_for_update(&mut changed, &old, None);
        assert_eq!(meta::generation(&changed), Some(2));
    }

    #[test]
    fn required_fields_and_enums() {
        assert_eq!(
            errors(&VALIDATING, policy(json!({}))),
            [
                "spec.matchConstraints: Required value",
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
            ]
        );
        let found = errors(
            &VALIDATING,
            policy(json!({
                "failurePolicy": "Sometimes",
                "paramKind": {"kind": "ConfigMap"},
                "matchConstraints": {"matchPolicy": "Fuzzy"},
                "matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": ""}],
                "variables": [{"name": "not valid", "expression": "1"}],
                "validations": [{"expression": "true", "reason": "Teapot", "message": "a\nb"}],
            })),
        );
        for expected in [
            "spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
            "spec.paramKind.apiVersion: Required value",
            "spec.matchConstraints.matchPolicy: Unsupported value: \"Fuzzy\": supported values: \"Equivalent\", \"Exact\"",
            "spec.matchConstraints.resourceRules: Required value",
            "spec.matchConditions[1].name: Duplicate value: \"a\"",
            "spec.matchConditions[1].expression: Required value",
            "spec.variables[0].name: Invalid value: \"not valid\": name is not a valid CEL identifier",
            "spec.validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks",
        ] {
            assert!(
                found.iter().any(|f| f == expected),
                "{expected} not in {found:#?}"
            );
        }
        assert!(
            found
                .iter()
                .any(|f| f.starts_with("spec.validations[0].reason: Unsupported value"))
        );
    }

    #[test]
    fn resource_rules_are_checked_like_webhook_rules() {
        let found = errors(
            &VALIDATING,
            policy(json!({
                "matchConstraints": {
                    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["PATCH"], "resources": ["configmaps"]}],
                    "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["secrets"]}]},
                "validations": [{"expression": "true"}],
            })),
        );
        for expected in [
            "spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: \"PATCH\"",
            "spec.matchConstraints.excludeResourceRules[0].operations: Required value",
        ] {
            assert!(
                found.iter().any(|f| f.starts_with(expected)),
                "{expected} not in {found:#?}"
            );
        }
        assert!(
            errors(
                &VALIDATING,
                policy(json!({"matchConstraints": rules(),
            "validations": [{"expression": "true"}]}))
            )
            .is_empty()
        );
    }

    #[test]
    fn mutations_need_their_expression() {
        let found = errors(
            &MUTATING,
            policy(json!({"matchConstraints": rules(), "mutations": [
                {"patchType": "ApplyConfiguration"},
                {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}, "applyConfiguration": {"expression": "Object{}"}},
                {"patchType": "Merge"},
            ]})),
        );
        assert_eq!(
            found,
            [
                "spec.mutations[0].applyConfiguration: Required value",
                "spec.mutations[1].applyConfiguration: Forbidden: must not be set when patchType is JSONPatch",
                "spec.mutations[2].patchType: Unsupported value: \"Merge\": supported values: \"ApplyConfiguration\", \"JSONPatch\"",
            ]
        );
        let none = errors(&MUTATING, policy(json!({"matchConstraints": rules()})));
        assert_eq!(
            none,
            ["spec.mutations: Required value: mutations must contain at least one item"]
        );
    }

    #[test]
    fn bindings_need_a_policy_actions_and_one_param_source() {
        let binding = |spec: Value| json!({"metadata": {"name": "b"}, "spec": spec});
        assert_eq!(
            errors(&VALIDATING_BINDING, binding(json!({}))),
            [
                "spec.policyName: Required value",
                "spec.validationActions: Required value: at least one validation action is required",
            ]
        );
        let found = errors(
            &VALIDATING_BINDING,
            binding(
                json!({"policyName": "p", "validationActions": ["Deny", "Warn", "Deny"],
                           "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Maybe"}}),
            ),
        );
        for expected in [
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
            "spec.validationActions[2]: Duplicate value: \"Deny\"",
        ] {
            assert!(
                found.iter().any(|f| f == expected),
                "{expected} not in {found:#?}"
            );
        }
        assert!(
            found
                .iter()
                .any(|f| f.contains("must not contain both Deny and Warn"))
        );
        let neither = errors(
            &MUTATING_BINDING,
            binding(json!({"policyName": "p", "paramRef": {}})),
        );
        assert_eq!(
            neither,
            ["spec.paramRef: Required value: one of name or selector must be specified"]
        );
    }

    /// A stand-in for kcp-admission's compiler: `bad` does not compile (the webhook strategy's
    /// tests install the same one; the process has one compiler).
    fn fake_compiler(
        source: &str,
        _variables: &[String],
        _object_types: bool,
    ) -> Result<Vec<Vec<String>>, String> {
        if source.contains("bad") {
            return Err("ERROR: <input>: undeclared reference to 'bad'".into());
        }
        Ok(Vec::new())
    }

    #[test]
    fn expressions_must_compile() {
        let _ = EXPRESSION_COMPILER.set(fake_compiler);
        let found = errors(
            &VALIDATING,
            policy(json!({
                "matchConstraints": rules(),
                "variables": [{"name": "fine", "expression": "1"}],
                "validations": [{"expression": "bad == 1"}, {"expression": "variables.fine == 1"}],
                "auditAnnotations": [{"key": "k", "valueExpression": "bad"}],
            })),
        );
        assert_eq!(
            found,
            [
                "spec.validations[0].expression: Invalid value: \"bad == 1\": compilation failed: ERROR: <input>: undeclared reference to 'bad'",
                "spec.auditAnnotations[0].valueExpression: Invalid value: \"bad\": compilation failed: ERROR: <input>: undeclared reference to 'bad'",
            ]
        );
    }

    #[test]
    fn kubectl_columns_are_kubes() {
        let policy = policy(
            json!({"validations": [{"expression": "true"}, {"expression": "true"}],
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}),
        );
        assert_eq!(VALIDATING.cells(&policy), [json!(2), json!("v1/ConfigMap")]);
        assert_eq!(MUTATING.cells(&policy), [json!(0), json!("v1/ConfigMap")]);
        assert_eq!(VALIDATING.columns()[0].name, "Validations");
        let binding =
            |param_ref: Value| json!({"spec": {"policyName": "p", "paramRef": param_ref}});
        let cell = |b: Value| VALIDATING_BINDING.cells(&b)[1].clone();
        assert_eq!(VALIDATING_BINDING.cells(&binding(json!(null)))[0], "p");
        assert_eq!(cell(binding(json!(null))), "<unset>");
        assert_eq!(cell(binding(json!({"name": "x"}))), "*/x");
        assert_eq!(
            cell(binding(json!({"name": "x", "namespace": "ns"}))),
            "ns/x"
        );
        assert_eq!(
            cell(binding(
                json!({"selector": {"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}]}})
            )),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}"
        );
    }

    #[test]
    fn expressions_are_listed_with_their_scope() {
        let spec = json!({
            "matchConditions": [{"name": "c", "expression": "true"}],
            "variables": [{"name": "a", "expression": "1"}, {"name": "b", "expression": "variables.a"}],
            "validations": [{"expression": "variables.b == 1", "messageExpression": "'m'"}],
            "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}],
        });
        let listed: Vec<(String, Vec<String>)> = policy_expressions(&spec, false)
            .into_iter()
            .map(|e| (e.field, e.scope.variables))
            .collect();
        let ab = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            listed,
            [
                ("spec.matchConditions[0].expression".to_string(), vec![]),
                ("spec.variables[0].expression".to_string(), vec![]),
                (
                    "spec.variables[1].expression".to_string(),
                    vec!["a".to_string()]
                ),
                ("spec.validations[0].expression".to_string(), ab.clone()),
                (
                    "spec.validations[0].messageExpression".to_string(),
                    ab.clone()
                ),
                ("spec.auditAnnotations[0].valueExpression".to_string(), ab),
            ]
        );
        let mutations =
            json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]});
        let listed = policy_expressions(&mutations, true);
        assert_eq!(listed[0].field, "spec.mutations[0].jsonPatch.expression");
        assert!(listed[0].scope.object_types);
    }
}
