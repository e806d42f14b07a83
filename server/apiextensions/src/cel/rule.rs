//! One `x-kubernetes-validations` entry: its admission checks and its compiled programs.
//!
//! A CRD whose rules do not compile must be rejected when it is created, at the rule's field path,
//! rather than fail every later request; and compiling happens exactly once per schema version.

use kcp_apimachinery::FieldError;
use kube_cel::cel::Program;
use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

use crate::path;
use crate::schema::fieldpath;
use crate::schema::node::{Node, Type};

/// The `reason` a failed rule is reported with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// A rule ready to run.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<Program>,
    pub reason: Reason,
    /// `fieldPath` as field-path segments relative to the rule's node.
    pub field_path: Vec<String>,
    pub optional_old_self: bool,
    pub uses_old_self: bool,
    pub program: Program,
}

impl CompiledRule {
    /// The rule as error messages cite it: its message, else its expression.
    pub fn error_string(&self) -> &str {
        self.message.as_deref().unwrap_or(self.rule.trim())
    }
}

/// Variables a rule may reference besides its own comprehension variables.
const ROOT_VARIABLES: [&str; 2] = ["self", "oldSelf"];
/// Type identifiers usable in `type(x) == int`-style rules.
const TYPE_NAMES: [&str; 11] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "optional_type",
];

fn has_newline(s: &str) -> bool {
    s.contains('\n')
}

/// Checks and compiles the rules of the node at `at`; `uncorrelatable` is the path of an
/// enclosing list that forbids `oldSelf`.
pub(crate) fn compile_all(
    rules: Option<&Value>,
    at: &str,
    node: &Node,
    uncorrelatable: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Vec<CompiledRule> {
    let Some(rules) = rules.and_then(Value::as_array) else {
        return Vec::new();
    };
    let rules_at = path::child(at, "x-kubernetes-validations");
    let mut compiled = Vec::new();
    for (i, raw) in rules.iter().enumerate() {
        let rule_at = path::index(&rules_at, i);
        if let Some(rule) = compile_one(raw, &rule_at, node, uncorrelatable, errors) {
            compiled.push(rule);
        }
    }
    compiled
}

fn text<'v>(raw: &'v Value, key: &str) -> Option<&'v str> {
    raw.get(key).and_then(Value::as_str)
}

fn compile_one(
    raw: &Value,
    at: &str,
    node: &Node,
    uncorrelatable: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Option<CompiledRule> {
    let before = errors.len();
    let rule = text(raw, "rule").unwrap_or_default();
    let message = text(raw, "message");
    let trimmed_message = message.map(str::trim).unwrap_or_default();
    let message_at = path::child(at, "message");
    if rule.trim().is_empty() {
        errors.push(FieldError::required(
            &path::child(at, "rule"),
            "rule is not specified",
        ));
    } else if message.is_some_and(|m| !m.is_empty()) && trimmed_message.is_empty() {
        errors.push(FieldError::invalid(
            &message_at,
            Value::from(message.unwrap_or_default()),
            "must be non-empty if specified",
        ));
    } else if has_newline(trimmed_message) {
        errors.push(FieldError::invalid(
            &message_at,
            Value::from(message.unwrap_or_default()),
            "must not contain line breaks",
        ));
    } else if has_newline(rule.trim()) && trimmed_message.is_empty() {
        errors.push(FieldError::required(
            &message_at,
            "message must be specified if rule contains line breaks",
        ));
    }
    let message_expression = text(raw, "messageExpression");
    if message_expression.is_some_and(|m| !m.is_empty() && m.trim().is_empty()) {
        errors.push(FieldError::required(
            &path::child(at, "messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    let reason = match text(raw, "reason") {
        None | Some("FieldValueInvalid") => Reason::Invalid,
        Some("FieldValueForbidden") => Reason::Forbidden,
        Some("FieldValueRequired") => Reason::Required,
        Some("FieldValueDuplicate") => Reason::Duplicate,
        Some(other) => {
            errors.push(FieldError::not_supported(
                &path::child(at, "reason"),
                Value::from(other),
                &REASONS,
            ));
            Reason::Invalid
        }
    };
    let field_path = check_field_path(raw, at, node, errors);
    if errors.len() > before {
        return None;
    }

    let rule_at = path::child(at, "rule");
    let program = match Program::compile(rule) {
        Ok(program) => program,
        Err(err) => {
            errors.push(FieldError::invalid(
                &rule_at,
                raw.clone(),
                &format!("compilation failed: {err}"),
            ));
            return None;
        }
    };
    if let Err(detail) = check_references(program.expression(), node) {
        errors.push(FieldError::invalid(
            &rule_at,
            raw.clone(),
            &format!("compilation failed: ERROR: <input>: {detail}"),
        ));
        return None;
    }
    let message_program = match message_expression.filter(|m| !m.trim().is_empty()) {
        None => None,
        Some(source) => match Program::compile(source) {
            Ok(program) => match check_references(program.expression(), node) {
                Ok(()) => Some(program),
                Err(detail) => {
                    errors.push(FieldError::invalid(
                        &path::child(at, "messageExpression"),
                        raw.clone(),
                        &format!("messageExpression compilation failed: ERROR: <input>: {detail}"),
                    ));
                    return None;
                }
            },
            Err(err) => {
                errors.push(FieldError::invalid(
                    &path::child(at, "messageExpression"),
                    raw.clone(),
                    &format!("messageExpression compilation failed: {err}"),
                ));
                return None;
            }
        },
    };
    let uses_old_self = program.references().has_variable("oldSelf");
    let optional_old_self = raw.get("optionalOldSelf").and_then(Value::as_bool);
    if uses_old_self {
        if let Some(within) = uncorrelatable {
            errors.push(FieldError::invalid(
                &rule_at,
                Value::from(rule),
                &format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"
                ),
            ));
            return None;
        }
    } else if let Some(flag) = optional_old_self {
        errors.push(FieldError::invalid(
            &path::child(at, "optionalOldSelf"),
            Value::Bool(flag),
            "may not be set if oldSelf is not used in rule",
        ));
        return None;
    }
    Some(CompiledRule {
        rule: rule.to_string(),
        message: Some(trimmed_message.to_string()).filter(|m| !m.is_empty()),
        message_expression: message_program,
        reason,
        field_path,
        optional_old_self: optional_old_self == Some(true),
        uses_old_self,
        program,
    })
}

fn check_field_path(
    raw: &Value,
    at: &str,
    node: &Node,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let Some(field_path) = text(raw, "fieldPath") else {
        return Vec::new();
    };
    let field_path_at = path::child(at, "fieldPath");
    let invalid =
        |detail: &str| FieldError::invalid(&field_path_at, Value::from(field_path), detail);
    if !field_path.is_empty() && field_path.trim().is_empty() {
        errors.push(invalid("must be non-empty if specified"));
        return Vec::new();
    }
    if has_newline(field_path) {
        errors.push(invalid("must not contain line breaks"));
        return Vec::new();
    }
    match fieldpath::resolve(node, field_path, true) {
        Ok(resolved) => resolved.segments,
        Err(_) => {
            errors.push(invalid("must be a valid path"));
            Vec::new()
        }
    }
}

/// Rejects identifiers that are not in scope and fields the schema does not declare, the two
/// mistakes Kubernetes' type checker catches that a parser alone does not.
pub(crate) fn check_references(expr: &IdedExpr, node: &Node) -> Result<(), String> {
    let mut bound: Vec<String> = Vec::new();
    walk_references(expr, node, &mut bound)
}

fn walk_references(expr: &IdedExpr, node: &Node, bound: &mut Vec<String>) -> Result<(), String> {
    match &expr.expr {
        Expr::Ident(name) => {
            if ROOT_VARIABLES.contains(&name.as_str())
                || TYPE_NAMES.contains(&name.as_str())
                || bound.iter().any(|b| b == name)
            {
                Ok(())
            } else {
                Err(format!(
                    "undeclared reference to '{name}' (in container '')"
                ))
            }
        }
        Expr::Select(select) => {
            if let Some(declared) = select_schema(&select.operand, node)
                && is_closed_object(declared)
                && !matches!(select.field.as_str(), "apiVersion" | "kind" | "metadata")
                && !declared.properties.iter().any(|(name, _)| {
                    super::value::escape(name).as_deref() == Some(select.field.as_str())
                })
            {
                return Err(format!("undefined field '{}'", select.field));
            }
            walk_references(&select.operand, node, bound)
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                walk_references(target, node, bound)?;
            }
            call.args
                .iter()
                .try_for_each(|arg| walk_references(arg, node, bound))
        }
        Expr::List(list) => list
            .elements
            .iter()
            .try_for_each(|e| walk_references(e, node, bound)),
        Expr::Map(map) => map.entries.iter().try_for_each(|e| match &e.expr {
            EntryExpr::MapEntry(entry) => {
                walk_references(&entry.key, node, bound)?;
                walk_references(&entry.value, node, bound)
            }
            EntryExpr::StructField(field) => walk_references(&field.value, node, bound),
        }),
        Expr::Struct(st) => st.entries.iter().try_for_each(|e| match &e.expr {
            EntryExpr::MapEntry(entry) => walk_references(&entry.value, node, bound),
            EntryExpr::StructField(field) => walk_references(&field.value, node, bound),
        }),
        Expr::Comprehension(comp) => {
            walk_references(&comp.iter_range, node, bound)?;
            walk_references(&comp.accu_init, node, bound)?;
            let depth = bound.len();
            bound.push(comp.iter_var.clone());
            bound.push(comp.accu_var.clone());
            if let Some(var2) = &comp.iter_var2 {
                bound.push(var2.clone());
            }
            let result = walk_references(&comp.loop_cond, node, bound)
                .and_then(|()| walk_references(&comp.loop_step, node, bound))
                .and_then(|()| walk_references(&comp.result, node, bound));
            bound.truncate(depth);
            result
        }
        Expr::Literal(_) | Expr::Unspecified => Ok(()),
    }
}

/// The schema of a `self.a.b` chain, when the chain starts at `self` and follows declared fields.
fn select_schema<'n>(expr: &IdedExpr, node: &'n Node) -> Option<&'n Node> {
    match &expr.expr {
        Expr::Ident(name) if name == "self" || name == "oldSelf" => Some(node),
        Expr::Select(select) if !select.test => {
            let parent = select_schema(&select.operand, node)?;
            parent
                .properties
                .iter()
                .find(|(name, _)| {
                    super::value::escape(name).as_deref() == Some(select.field.as_str())
                })
                .map(|(_, child)| child)
        }
        _ => None,
    }
}

/// An object whose fields are exactly its declared properties.
fn is_closed_object(node: &Node) -> bool {
    node.ty == Some(Type::Object)
        && !node.properties.is_empty()
        && !node.preserve_unknown
        && !node.embedded
        && matches!(node.additional, crate::schema::node::Additional::Absent)
}
