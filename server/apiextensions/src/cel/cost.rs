//! An upper bound on the work a rule can do on the object at hand, computed before running it.
//!
//! The `cel` interpreter cannot be interrupted, so the runtime budget Kubernetes enforces while
//! evaluating (`PerCallLimit`, `RuntimeCELCostBudget`) is enforced up front instead: the rule's
//! AST is walked with the sizes of the actual `self`/`oldSelf` values, each comprehension
//! multiplying the cost of its body by the length of what it iterates. Nested loops over big lists
//! are therefore refused without being run, and the bound is charged against the per-object budget.

use std::collections::HashMap;

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

/// Kubernetes' limit for one rule evaluation (`celconfig.PerCallLimit`).
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' runtime budget for all rules of one object (`celconfig.RuntimeCELCostBudget`).
pub(crate) const RUNTIME_BUDGET: u64 = 10_000_000;

/// Calls whose cost does not depend on the size of their operands.
const CONSTANT_TIME: [&str; 8] = [
    "_&&_",
    "_||_",
    "!_",
    "_?_:_",
    "@not_strictly_false",
    "size",
    "has",
    "_[_]",
];

/// What is known about the value of a sub-expression: the concrete JSON values it can be, or
/// only a bound on its size (length of a list, map or string).
#[derive(Clone)]
enum Abstract<'a> {
    Known(Vec<&'a Value>),
    Sized(u64),
}

fn size_of(value: &Value) -> u64 {
    match value {
        Value::Array(items) => items.len() as u64,
        Value::Object(map) => map.len() as u64,
        Value::String(s) => s.chars().count() as u64,
        _ => 1,
    }
}

impl Abstract<'_> {
    fn size(&self) -> u64 {
        match self {
            Abstract::Known(values) => values.iter().map(|v| size_of(v)).max().unwrap_or(0),
            Abstract::Sized(n) => *n,
        }
    }
}

/// The total size of a JSON value: an upper bound for any list or string derived from it.
fn total_size(value: &Value) -> u64 {
    match value {
        Value::Array(items) => 1 + items.iter().map(total_size).sum::<u64>(),
        Value::Object(map) => {
            1 + map
                .iter()
                .map(|(k, v)| k.len() as u64 + total_size(v))
                .sum::<u64>()
        }
        Value::String(s) => s.len() as u64,
        _ => 1,
    }
}

struct Estimator<'a> {
    vars: HashMap<String, Abstract<'a>>,
    unknown: u64,
}

/// The estimated cost of evaluating `expr` with `self` (and `oldSelf`) bound to these values.
pub(crate) fn estimate(expr: &IdedExpr, this: &Value, old: Option<&Value>) -> u64 {
    let mut vars = HashMap::new();
    vars.insert("self".to_string(), Abstract::Known(vec![this]));
    if let Some(old) = old {
        vars.insert("oldSelf".to_string(), Abstract::Known(vec![old]));
    }
    let unknown = total_size(this) + old.map_or(0, total_size) + 1;
    let mut estimator = Estimator { vars, unknown };
    estimator.cost(expr).0
}

fn children<'a>(values: &[&'a Value]) -> Vec<&'a Value> {
    values
        .iter()
        .flat_map(|v| -> Vec<&'a Value> {
            match v {
                Value::Array(items) => items.iter().collect(),
                Value::Object(map) => map.values().collect(),
                _ => Vec::new(),
            }
        })
        .collect()
}

fn field<'a>(values: &[&'a Value], name: &str) -> Vec<&'a Value> {
    values
        .iter()
        .filter_map(|v| {
            let obj = v.as_object()?;
            obj.get(name).or_else(|| {
                obj.iter()
                    .find(|(k, _)| super::value::escape(k).as_deref() == Some(name))
                    .map(|(_, v)| v)
            })
        })
        .collect()
}

impl<'a> Estimator<'a> {
    /// (cost, abstract result) of `expr`.
    fn cost(&mut self, expr: &IdedExpr) -> (u64, Abstract<'a>) {
        match &expr.expr {
            Expr::Unspecified => (0, Abstract::Sized(0)),
            Expr::Literal(LiteralValue::String(s)) => (0, Abstract::Sized(s.inner().len() as u64)),
            Expr::Literal(_) => (0, Abstract::Sized(1)),
            Expr::Ident(name) => (
                1,
                self.vars
                    .get(name)
                    .cloned()
                    .unwrap_or(Abstract::Sized(self.unknown)),
            ),
            Expr::Select(select) => {
                let (cost, operand) = self.cost(&select.operand);
                let result = match operand {
                    Abstract::Known(values) => Abstract::Known(field(&values, &select.field)),
                    Abstract::Sized(_) => Abstract::Sized(self.unknown),
                };
                (cost.saturating_add(1), result)
            }
            Expr::List(list) => {
                let cost = list
                    .elements
                    .iter()
                    .map(|e| self.cost(e).0)
                    .fold(1u64, u64::saturating_add);
                (cost, Abstract::Sized(list.elements.len() as u64))
            }
            Expr::Map(map) => self.entries(map.entries.iter().map(|e| &e.expr)),
            Expr::Struct(st) => self.entries(st.entries.iter().map(|e| &e.expr)),
            Expr::Call(call) => {
                let mut cost = 1u64;
                let mut size = 1u64;
                let mut operands = Vec::new();
                let scans = !CONSTANT_TIME.contains(&call.func_name.as_str());
                for operand in call
                    .target
                    .iter()
                    .map(|t| t.as_ref())
                    .chain(call.args.iter())
                {
                    let (c, abs) = self.cost(operand);
                    cost = cost.saturating_add(c);
                    if scans {
                        cost = cost.saturating_add(abs.size());
                    }
                    size = size.saturating_add(abs.size());
                    operands.push(abs);
                }
                let result = match (call.func_name.as_str(), operands.as_slice()) {
                    ("_[_]", [Abstract::Known(values), _]) => Abstract::Known(children(values)),
                    _ => Abstract::Sized(size.min(self.unknown.saturating_mul(2))),
                };
                (cost, result)
            }
            Expr::Comprehension(comp) => {
                let (range_cost, range) = self.cost(&comp.iter_range);
                let (init_cost, _) = self.cost(&comp.accu_init);
                let element = match &range {
                    Abstract::Known(values) => Abstract::Known(children(values)),
                    Abstract::Sized(_) => Abstract::Sized(self.unknown),
                };
                let mut bound = vec![
                    (comp.iter_var.clone(), element.clone()),
                    (comp.accu_var.clone(), Abstract::Sized(1)),
                ];
                if let Some(var2) = &comp.iter_var2 {
                    bound.push((var2.clone(), element));
                }
                let saved: Vec<_> = bound
                    .into_iter()
                    .map(|(name, abs)| {
                        let old = self.vars.insert(name.clone(), abs);
                        (name, old)
                    })
                    .collect();
                let body = self
                    .cost(&comp.loop_cond)
                    .0
                    .saturating_add(self.cost(&comp.loop_step).0)
                    .saturating_add(1);
                let (result_cost, _) = self.cost(&comp.result);
                for (name, old) in saved {
                    match old {
                        Some(abs) => self.vars.insert(name, abs),
                        None => self.vars.remove(&name),
                    };
                }
                let cost = range_cost
                    .saturating_add(init_cost)
                    .saturating_add(range.size().max(1).saturating_mul(body))
                    .saturating_add(result_cost);
                (cost, Abstract::Sized(range.size()))
            }
        }
    }

    fn entries<'e>(&mut self, entries: impl Iterator<Item = &'e EntryExpr>) -> (u64, Abstract<'a>) {
        let mut cost = 1u64;
        let mut count = 0u64;
        for entry in entries {
            count += 1;
            cost = cost.saturating_add(match entry {
                EntryExpr::StructField(f) => self.cost(&f.value).0,
                EntryExpr::MapEntry(m) => self.cost(&m.key).0.saturating_add(self.cost(&m.value).0),
            });
        }
        (cost, Abstract::Sized(count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::cel::Program;
    use serde_json::json;

    fn cost(rule: &str, this: &Value) -> u64 {
        let program = Program::compile(rule).unwrap();
        estimate(program.expression(), this, None)
    }

    #[test]
    fn simple_rules_are_cheap() {
        assert!(cost("self.replicas <= 10", &json!({"replicas": 3})) < 20);
    }

    #[test]
    fn loops_scale_with_the_list() {
        let small = json!({"items": [1, 2, 3]});
        let big = json!({"items": (0..1000).collect::<Vec<_>>()});
        let rule = "self.items.all(x, x > 0)";
        assert!(cost(rule, &big) > 100 * cost(rule, &small) / 10);
        assert!(cost(rule, &big) < PER_CALL_LIMIT);
    }

    #[test]
    fn nested_loops_over_a_big_list_exceed_the_limit() {
        let big = json!({"items": (0..2000).collect::<Vec<_>>()});
        let rule = "self.items.all(x, self.items.all(y, x != y || x == y))";
        assert!(cost(rule, &big) > PER_CALL_LIMIT);
    }
}
