//! Running compiled rules over an object (and its previous version on update).
//!
//! The walk follows kube-apiserver: rules run on every non-null value their schema node applies
//! to; `oldSelf` is the correlated old value (same property, same map key, same list-map key), and
//! rules using it are skipped when there is none unless `optionalOldSelf` is set; a failure is
//! reported at the node's path (plus `fieldPath`) with its `message`, `messageExpression` or
//! `failed rule: <rule>`, and the estimated cost of all rules is charged against one budget.
//!
//! Ratcheting, as kube-apiserver's `CRDValidationRatcheting` (on by default since 1.30, GA in
//! 1.33): a value that is unchanged from its correlated old value (a property, a map value, a
//! list-map item) cannot fail its rules, so they are not run; an update that leaves a field alone
//! is never refused for a rule the field broke before, and a status write does not re-run every
//! rule of the spec. Items of atomic and set lists have no correlated old value and are always
//! checked, as in kube.

use std::sync::Arc;

use kcp_apimachinery::{FieldError, FieldErrorKind};
use kube_cel::KubeCelExt;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{self, Context};
use serde_json::Value;

use super::cost::{self, PER_CALL_LIMIT, RUNTIME_BUDGET};
use super::rule::{CompiledRule, Reason};
use super::value::to_cel;
use crate::path;
use crate::schema::node::{Additional, ListType, Node, Type};
use crate::schema::validate::{json_equal, list_map_key};

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

thread_local! {
    /// The standard library plus Kubernetes' extensions; building it costs more than most rules.
    static BASE: Context<'static> = {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx
    };
}

/// Walk state: the remaining cost budget and whether evaluation was cut off.
struct Run {
    remaining: u64,
    stopped: bool,
    errors: Vec<FieldError>,
}

/// Evaluates every rule of `root` against `object` (and `old` on update).
pub(crate) fn validate(root: &Node, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut run = Run {
        remaining: RUNTIME_BUDGET,
        stopped: false,
        errors: Vec::new(),
    };
    BASE.with(|base| walk(base, root, object, old, "", true, &mut run));
    run.errors
}

fn walk(
    base: &Context<'_>,
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    at: &str,
    resource_root: bool,
    run: &mut Run,
) {
    if run.stopped || value.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    if !node.rules.is_empty() && !old.is_some_and(|old| json_equal(value, old)) {
        evaluate(base, node, value, old, at, resource_root, run);
    }
    match value {
        Value::Object(map) => {
            for (name, prop) in &node.properties {
                if let Some(child) = map.get(name) {
                    let old_child = old.and_then(|o| o.get(name));
                    walk(
                        base,
                        prop,
                        child,
                        old_child,
                        &path::child(at, name),
                        false,
                        run,
                    );
                }
            }
            if let Additional::Schema(additional) = &node.additional {
                for (key, child) in map {
                    if node.property(key).is_some() {
                        continue;
                    }
                    let old_child = old.and_then(|o| o.get(key));
                    walk(
                        base,
                        additional,
                        child,
                        old_child,
                        &path::key(at, key),
                        false,
                        run,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(item_node) = &node.items else {
                return;
            };
            let old_items = old.and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                let old_item = match (node.list_type, old_items) {
                    (Some(ListType::Map), Some(old_items)) => correlate(node, item, old_items),
                    _ => None,
                };
                walk(
                    base,
                    item_node,
                    item,
                    old_item,
                    &path::index(at, i),
                    false,
                    run,
                );
            }
        }
        _ => {}
    }
}

/// The old list-map entry with the same key as `item`.
fn correlate<'o>(node: &Node, item: &Value, old_items: &'o [Value]) -> Option<&'o Value> {
    let key = Value::Object(list_map_key(node, item)?);
    old_items
        .iter()
        .find(|old| list_map_key(node, old).is_some_and(|k| json_equal(&Value::Object(k), &key)))
}

fn evaluate(
    base: &Context<'_>,
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    at: &str,
    resource_root: bool,
    run: &mut Run,
) {
    let type_name = Value::from(node.type_name());
    let this = to_cel(Some(node), value, resource_root);
    let old_cel = old.map(|o| to_cel(Some(node), o, resource_root));
    for rule in &node.rules {
        if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
            continue;
        }
        let estimate = cost::estimate(rule.program.expression(), value, old);
        if estimate > PER_CALL_LIMIT {
            run.errors.push(FieldError::invalid(
                at,
                type_name.clone(),
                &format!(
                    "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    rule.error_string()
                ),
            ));
            run.stopped = true;
            return;
        }
        if estimate > run.remaining {
            run.errors
                .push(FieldError::invalid(at, type_name.clone(), OUT_OF_BUDGET));
            run.stopped = true;
            return;
        }
        run.remaining -= estimate;

        let mut scope = base.new_inner_scope();
        scope.add_variable_from_value("self", this.clone());
        if rule.optional_old_self {
            let optional = match &old_cel {
                Some(o) => OptionalValue::of(o.clone()),
                None => OptionalValue::none(),
            };
            scope.add_variable_from_value("oldSelf", cel::Value::Opaque(Arc::new(optional)));
        } else if let Some(o) = &old_cel {
            scope.add_variable_from_value("oldSelf", o.clone());
        }
        match rule.program.execute(&scope) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                run.errors.push(failure(rule, node, value, at, &scope));
            }
            Ok(other) => run.errors.push(FieldError::invalid(
                at,
                type_name.clone(),
                &format!(
                    "rule returned {:?} instead of a boolean evaluating rule: {}",
                    other.type_of(),
                    rule.error_string()
                ),
            )),
            Err(err) => {
                let text = err.to_string();
                let detail = if text.starts_with("no such overload") {
                    format!(
                        "'{text}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                        rule.error_string()
                    )
                } else {
                    format!("{text} evaluating rule: {}", rule.error_string())
                };
                run.errors
                    .push(FieldError::invalid(at, type_name.clone(), &detail));
            }
        }
    }
}

/// The field error for a rule that evaluated to false.
fn failure(
    rule: &CompiledRule,
    node: &Node,
    value: &Value,
    at: &str,
    scope: &Context<'_>,
) -> FieldError {
    let mut field = at.to_string();
    for segment in &rule.field_path {
        field = path::child(&field, segment);
    }
    let detail = rule
        .message_expression
        .as_ref()
        .and_then(|program| match program.execute(scope) {
            Ok(cel::Value::String(s)) if !s.trim().is_empty() && !s.contains('\n') => {
                Some(s.trim().to_string())
            }
            _ => None,
        })
        .unwrap_or_else(|| match &rule.message {
            Some(message) => message.clone(),
            None => format!("failed rule: {}", rule.rule.trim()),
        });
    let shown = match node.ty {
        Some(Type::Object | Type::Array) => None,
        _ => Some(value.clone()),
    };
    match rule.reason {
        Reason::Forbidden => FieldError::forbidden(&field, &detail),
        Reason::Required => FieldError::required(&field, &detail),
        Reason::Duplicate => FieldError::duplicate(&field, shown.unwrap_or(Value::Null)),
        Reason::Invalid => FieldError {
            kind: FieldErrorKind::Invalid,
            field,
            value: shown,
            detail,
        },
    }
}
