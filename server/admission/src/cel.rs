//! The CEL environment of Kubernetes admission: what match conditions of webhooks and the
//! expressions of ValidatingAdmissionPolicy and MutatingAdmissionPolicy see, as kube-apiserver's
//! `k8s.io/apiserver/pkg/admission/plugin/cel` environment.
//!
//! Expressions see `object` and `oldObject` (null when absent), `request` (the AdmissionReview v1
//! request), `params`, `namespaceObject`, and `variables.<name>` (a policy's variables; a
//! variable whose evaluation failed fails only the expressions that use it, as kube's lazy
//! variables). Kubernetes' function libraries come from kube-cel. What differs from kube:
//! - `authorizer` is refused at compilation (kube-cel has no authorizer library);
//! - the type checker is replaced by a scope check: unknown identifiers, undeclared variables
//!   and unknown struct types fail to compile, field names are checked at run time;
//! - `Object{...}` and `JSONPatch{...}` (mutations only) evaluate to maps, which the mutation
//!   code applies structurally;
//! - objects are maps: any field is selectable, and escaped property names (`x__dash__y`,
//!   `__namespace__`) select the property they stand for;
//! - the runtime cost limit (kube's `PerCallLimit`) is a work budget charged while evaluating:
//!   every comprehension step and every call that builds a value is charged for itself and the
//!   size of what it built, and the evaluation stops with kube's "operation cancelled: actual cost limit
//!   exceeded" when the budget is spent, so a pathological expression cannot hang a request.

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{
    CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::parser::Parser;
use kube_cel::cel::{self, Context, ExecutionError};
use serde_json::Value;

/// The work one evaluation may do, kube's `PerCallLimit`: one unit per function call and
/// comprehension step, plus one per [`SIZE_PER_UNIT`] elements (or bytes) of what it built.
pub const WORK_BUDGET: u64 = 1_000_000;

/// Copying an element is much cheaper than interpreting a call, so sizes are charged in blocks.
const SIZE_PER_UNIT: u64 = 16;

/// Kube's message when an evaluation exceeds its cost limit.
pub const COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// The stack of the threads that parse expressions and evaluate deep ones: the generated parser
/// and the interpreter recurse at least once per nesting level, with frames of tens of KiB in
/// debug builds (an async worker's 2 MiB overflow at about 40 levels, which would abort).
const DEEP_STACK: usize = 64 << 20;
/// The deepest expression tree evaluated on the caller's stack (about 35 KiB per level in debug
/// builds).
const SHALLOW_DEPTH: usize = 16;
/// The deepest expression tree accepted (cel-go's default parser recursion limit).
const MAX_DEPTH: usize = 250;

/// Runs `work` on a scoped thread with [`DEEP_STACK`].
fn on_deep_stack<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(DEEP_STACK)
            .spawn_scoped(scope, work)
            .map_err(|err| format!("cannot start a CEL thread: {err}"))?
            .join()
            .map_err(|_| "the expression could not be evaluated".to_string())
    })
}

/// The depth of an expression tree.
fn depth(expr: &IdedExpr) -> usize {
    let entries = |entries: &[IdedEntryExpr]| {
        entries
            .iter()
            .map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => depth(&e.key).max(depth(&e.value)),
                EntryExpr::StructField(f) => depth(&f.value),
            })
            .max()
            .unwrap_or(0)
    };
    1 + match &expr.expr {
        Expr::Call(call) => call
            .target
            .iter()
            .map(|t| depth(t))
            .chain(call.args.iter().map(depth))
            .max()
            .unwrap_or(0),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .map(depth)
        .max()
        .unwrap_or(0),
        Expr::List(list) => list.elements.iter().map(depth).max().unwrap_or(0),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(st) => entries(&st.entries),
        Expr::Select(select) => depth(&select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 0,
    }
}

/// The function every call and comprehension step is wrapped in to charge the budget; its name
/// cannot be written in an expression.
const CHARGE: &str = "@kcp.charge";

/// Operators that build nothing (their work is bounded by the expression's size, or charged as
/// comprehension steps), left uncharged to keep the interpreter's recursion shallow.
const FREE_CALLS: [&str; 13] = [
    "_&&_",
    "_||_",
    "!_",
    "_?_:_",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "@in",
    "_[_]",
    "@not_strictly_false",
];

/// Variables every admission expression may use.
const ROOT_VARIABLES: [&str; 6] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
];

/// Prefixes of Kubernetes' namespaced functions (`lists.range(3)`, `format.dns1123Label()`).
const FUNCTION_NAMESPACES: [&str; 8] = [
    "base64",
    "format",
    "ip",
    "jsonpatch",
    "lists",
    "math",
    "sets",
    "strings",
];

/// Type identifiers usable in `type(x) == int`-style expressions.
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

thread_local! {
    /// The standard library, Kubernetes' extensions and the budget charge.
    static BASE: Context<'static> = {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx.add_function(CHARGE, charge);
        ctx.add_function("lists.range", bounded_range);
        ctx
    };
    /// Work left in the evaluation running on this thread.
    static REMAINING: Cell<u64> = const { Cell::new(WORK_BUDGET) };
}

fn size_of(value: &cel::Value) -> u64 {
    match value {
        cel::Value::List(items) => items.len() as u64,
        cel::Value::Map(map) => map.map.len() as u64,
        cel::Value::String(s) => s.len() as u64,
        cel::Value::Bytes(b) => b.len() as u64,
        _ => 0,
    }
}

fn charge(value: cel::Value) -> Result<cel::Value, ExecutionError> {
    let cost = 1 + size_of(&value) / SIZE_PER_UNIT;
    let remaining = REMAINING.get();
    if cost > remaining {
        REMAINING.set(0);
        return Err(ExecutionError::function_error("cost", COST_EXCEEDED));
    }
    REMAINING.set(remaining - cost);
    Ok(value)
}

/// `lists.range(n)`, refusing lists larger than the budget before building them.
fn bounded_range(n: i64) -> Result<cel::Value, ExecutionError> {
    if n < 0 {
        return Err(ExecutionError::function_error(
            "lists.range",
            "argument must not be negative",
        ));
    }
    if n as u64 > REMAINING.get() {
        return Err(ExecutionError::function_error("lists.range", COST_EXCEEDED));
    }
    Ok(cel::Value::List(Arc::new(
        (0..n).map(cel::Value::Int).collect(),
    )))
}

/// A JSON value as the CEL value expressions see (objects are maps keyed by field name).
pub fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(obj) => cel::Value::Map(Map {
            map: Arc::new(
                obj.iter()
                    .map(|(k, v)| (Key::from(k.clone()), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

pub use kcp_apiextensions::cel_to_json as to_json;

/// The variables of one policy evaluation, each the result of its expression.
#[derive(Debug, Default)]
pub struct Variables {
    values: HashMap<String, Result<cel::Value, String>>,
}

impl Variables {
    /// Records the result of variable `name`'s expression.
    pub fn insert(&mut self, name: &str, result: Result<cel::Value, String>) {
        self.values.insert(name.to_string(), result);
    }

    fn as_cel(&self) -> cel::Value {
        cel::Value::Map(Map {
            map: Arc::new(
                self.values
                    .iter()
                    .filter_map(|(name, result)| {
                        let value = result.as_ref().ok()?;
                        Some((Key::from(name.clone()), value.clone()))
                    })
                    .collect(),
            ),
        })
    }
}

/// What an evaluation sees.
#[derive(Debug, Clone, Copy)]
pub struct Activation<'a> {
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
    pub request: &'a Value,
    pub params: Option<&'a Value>,
    pub namespace_object: Option<&'a Value>,
    pub variables: Option<&'a Variables>,
    /// Where the root variables' CEL values are kept once converted, so the expressions of one
    /// evaluation (a policy's variables and validations) convert each JSON value once;
    /// `None`: converted per expression.
    pub converted: Option<&'a Converted>,
}

/// The root variables of one activation as CEL values, converted on first use. Only valid for
/// the activation (the same JSON values) it was made for.
#[derive(Debug, Default)]
pub struct Converted {
    object: OnceLock<cel::Value>,
    old_object: OnceLock<cel::Value>,
    request: OnceLock<cel::Value>,
    params: OnceLock<cel::Value>,
    namespace_object: OnceLock<cel::Value>,
}

impl<'a> Activation<'a> {
    /// An activation with only the request's objects and `request`.
    pub fn new(
        object: Option<&'a Value>,
        old_object: Option<&'a Value>,
        request: &'a Value,
    ) -> Self {
        Activation {
            object,
            old_object,
            request,
            params: None,
            namespace_object: None,
            variables: None,
            converted: None,
        }
    }
}

/// Which declarations an expression may use beyond the root variables.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// Names usable as `variables.<name>` (a policy's variables declared before the expression).
    pub variables: Vec<String>,
    /// Whether `Object{...}` and `JSONPatch{...}` values may be built (mutations).
    pub object_types: bool,
}

impl Environment {
    /// Parses and scope-checks `source`; the error reads as kube's compile errors.
    pub fn compile(&self, source: &str) -> Result<Expression, String> {
        on_deep_stack(|| self.compile_here(source))?
    }

    fn compile_here(&self, source: &str) -> Result<Expression, String> {
        let parsed = catch_unwind(|| Parser::default().parse(source))
            .map_err(|_| "ERROR: <input>: the expression cannot be parsed".to_string())?
            .map_err(|err| err.to_string())?;
        let depth = depth(&parsed);
        if depth > MAX_DEPTH {
            return Err(format!(
                "ERROR: <input>: expression recursion limit exceeded: {MAX_DEPTH}"
            ));
        }
        let mut checker = Checker {
            env: self,
            bound: Vec::new(),
            variables_used: BTreeSet::new(),
            object_paths: Vec::new(),
            roots_used: BTreeSet::new(),
        };
        let ast = checker
            .rewrite(parsed)
            .map_err(|detail| format!("ERROR: <input>: {detail}"))?;
        let paths = &checker.object_paths;
        let object_paths = paths
            .iter()
            .filter(|path| {
                !paths
                    .iter()
                    .any(|longer| longer.len() > path.len() && longer.starts_with(path))
            })
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        Ok(Expression {
            source: source.to_string(),
            depth: self::depth(&ast),
            ast,
            variables_used: checker.variables_used.into_iter().collect(),
            object_paths,
            roots_used: checker.roots_used,
        })
    }
}

/// Scope checking and rewriting of a parsed expression.
struct Checker<'e> {
    env: &'e Environment,
    /// Comprehension variables in scope.
    bound: Vec<String>,
    variables_used: BTreeSet<String>,
    /// Field paths selected from `object` and `oldObject`.
    object_paths: Vec<Vec<String>>,
    /// The root variables it reads.
    roots_used: BTreeSet<String>,
}

/// The property an escaped field name stands for, as Kubernetes escapes property names that are
/// not CEL identifiers (`x__dash__y` is `x-y`, `__namespace__` is `namespace`); `None` when the
/// name has no escape.
fn unescape(field: &str) -> Option<String> {
    if let Some(keyword) = field.strip_prefix("__").and_then(|f| f.strip_suffix("__"))
        && kcp_apiextensions::CEL_RESERVED_WORDS.contains(&keyword)
    {
        return Some(keyword.to_string());
    }
    let mut unescaped = String::new();
    let mut rest = field;
    while let Some(at) = rest.find("__") {
        unescaped.push_str(&rest[..at]);
        let after = &rest[at..];
        let escape = [
            ("__underscores__", "__"),
            ("__dot__", "."),
            ("__dash__", "-"),
            ("__slash__", "/"),
        ]
        .into_iter()
        .find(|(escape, _)| after.starts_with(escape));
        match escape {
            Some((escape, replacement)) => {
                unescaped.push_str(replacement);
                rest = &after[escape.len()..];
            }
            None => {
                unescaped.push_str("__");
                rest = &after[2..];
            }
        }
    }
    unescaped.push_str(rest);
    (unescaped != field).then_some(unescaped)
}

/// The property a selected field names.
fn property(field: &str) -> String {
    unescape(field).unwrap_or_else(|| field.to_string())
}

fn string_literal(id: u64, s: &str) -> IdedExpr {
    IdedExpr {
        id,
        expr: Expr::Literal(LiteralValue::String(s.to_string().into())),
    }
}

fn charged(expr: IdedExpr) -> IdedExpr {
    IdedExpr {
        id: expr.id,
        expr: Expr::Call(CallExpr {
            func_name: CHARGE.to_string(),
            target: None,
            args: vec![expr],
        }),
    }
}

impl Checker<'_> {
    fn rewrite(&mut self, expr: IdedExpr) -> Result<IdedExpr, String> {
        let id = expr.id;
        let rewritten = match expr.expr {
            Expr::Ident(name) => {
                self.check_ident(&name)?;
                if ROOT_VARIABLES.contains(&name.as_str()) && !self.bound.contains(&name) {
                    self.roots_used.insert(name.clone());
                }
                Expr::Ident(name)
            }
            Expr::Select(mut select) => {
                if let Some(mut path) = self.object_path(&select.operand) {
                    path.push(property(&select.field));
                    self.object_paths.push(path);
                }
                if let Expr::Ident(root) = &select.operand.expr
                    && root == "variables"
                    && !self.bound.contains(root)
                {
                    if !self.env.variables.contains(&select.field) {
                        return Err(format!("undefined field '{}'", select.field));
                    }
                    self.variables_used.insert(select.field.clone());
                    *select.operand = self.rewrite(*select.operand)?;
                    return Ok(IdedExpr {
                        id,
                        expr: Expr::Select(select),
                    });
                }
                *select.operand = self.rewrite(*select.operand)?;
                match unescape(&select.field) {
                    // `has(a.x__dash__y)` is `'x-y' in a`, `a.x__dash__y` is `a['x-y']`.
                    Some(name) if select.test => Expr::Call(CallExpr {
                        func_name: "@in".into(),
                        target: None,
                        args: vec![string_literal(id, &name), *select.operand],
                    }),
                    Some(name) => Expr::Call(CallExpr {
                        func_name: "_[_]".into(),
                        target: None,
                        args: vec![*select.operand, string_literal(id, &name)],
                    }),
                    None => Expr::Select(select),
                }
            }
            Expr::Call(mut call) => {
                if let Some(target) = call.target.take() {
                    call.target = Some(match &target.expr {
                        Expr::Ident(prefix) if self.is_function_namespace(prefix) => target,
                        _ => Box::new(self.rewrite(*target)?),
                    });
                }
                call.args = self.rewrite_all(call.args)?;
                let free = FREE_CALLS.contains(&call.func_name.as_str());
                let call = IdedExpr {
                    id,
                    expr: Expr::Call(call),
                };
                return Ok(if free { call } else { charged(call) });
            }
            Expr::List(mut list) => {
                list.elements = self.rewrite_all(list.elements)?;
                Expr::List(list)
            }
            Expr::Map(map) => Expr::Map(MapExpr {
                entries: self.rewrite_entries(map.entries)?,
            }),
            Expr::Struct(st) => {
                let known = self.env.object_types
                    && (st.type_name == "Object"
                        || st.type_name.starts_with("Object.")
                        || st.type_name == "JSONPatch");
                if !known {
                    return Err(format!("undeclared reference to '{}'", st.type_name));
                }
                Expr::Map(MapExpr {
                    entries: self.rewrite_entries(st.entries)?,
                })
            }
            Expr::Comprehension(mut comp) => {
                comp.iter_range = self.rewrite(comp.iter_range)?;
                comp.accu_init = self.rewrite(comp.accu_init)?;
                let depth = self.bound.len();
                self.bound.push(comp.iter_var.clone());
                self.bound.push(comp.accu_var.clone());
                if let Some(var2) = &comp.iter_var2 {
                    self.bound.push(var2.clone());
                }
                let body = (|| -> Result<(), String> {
                    comp.loop_cond = self.rewrite(std::mem::take(&mut comp.loop_cond))?;
                    comp.loop_step = charged(self.rewrite(std::mem::take(&mut comp.loop_step))?);
                    comp.result = self.rewrite(std::mem::take(&mut comp.result))?;
                    Ok(())
                })();
                self.bound.truncate(depth);
                body?;
                Expr::Comprehension(comp)
            }
            Expr::Literal(literal) => Expr::Literal(literal),
            Expr::Unspecified => return Err("incomplete expression".to_string()),
        };
        Ok(IdedExpr {
            id,
            expr: rewritten,
        })
    }

    /// The fields `expr` selects from `object` or `oldObject` (`object.spec` is `[spec]`).
    fn object_path(&self, expr: &IdedExpr) -> Option<Vec<String>> {
        match &expr.expr {
            Expr::Ident(root)
                if (root == "object" || root == "oldObject")
                    && !self.bound.iter().any(|b| b == root) =>
            {
                Some(Vec::new())
            }
            Expr::Select(select) => {
                let mut path = self.object_path(&select.operand)?;
                path.push(property(&select.field));
                Some(path)
            }
            _ => None,
        }
    }

    fn is_function_namespace(&self, prefix: &str) -> bool {
        FUNCTION_NAMESPACES.contains(&prefix) && !self.bound.iter().any(|b| b == prefix)
    }

    fn check_ident(&self, name: &str) -> Result<(), String> {
        if name == "authorizer" && !self.bound.iter().any(|b| b == name) {
            return Err(
                "undeclared reference to 'authorizer': authorization checks in CEL are not supported by this server"
                    .to_string(),
            );
        }
        if ROOT_VARIABLES.contains(&name)
            || TYPE_NAMES.contains(&name)
            || self.bound.iter().any(|b| b == name)
        {
            Ok(())
        } else {
            Err(format!(
                "undeclared reference to '{name}' (in container '')"
            ))
        }
    }

    fn rewrite_all(&mut self, exprs: Vec<IdedExpr>) -> Result<Vec<IdedExpr>, String> {
        exprs.into_iter().map(|e| self.rewrite(e)).collect()
    }

    /// Map and struct entries as map entries (struct fields keyed by their name).
    fn rewrite_entries(
        &mut self,
        entries: Vec<IdedEntryExpr>,
    ) -> Result<Vec<IdedEntryExpr>, String> {
        entries
            .into_iter()
            .map(|entry| {
                let expr = match entry.expr {
                    EntryExpr::MapEntry(map_entry) => MapEntryExpr {
                        key: self.rewrite(map_entry.key)?,
                        value: self.rewrite(map_entry.value)?,
                        optional: map_entry.optional,
                    },
                    EntryExpr::StructField(field) => MapEntryExpr {
                        key: string_literal(entry.id, &field.field),
                        value: self.rewrite(field.value)?,
                        optional: field.optional,
                    },
                };
                Ok(IdedEntryExpr {
                    id: entry.id,
                    expr: EntryExpr::MapEntry(expr),
                })
            })
            .collect()
    }
}

/// A compiled expression.
#[derive(Debug, Clone)]
pub struct Expression {
    source: String,
    ast: IdedExpr,
    /// The `variables.<name>` it reads.
    variables_used: Vec<String>,
    /// The longest field paths it selects from `object` or `oldObject`.
    object_paths: Vec<Vec<String>>,
    /// The root variables it reads (only these are converted to CEL for an evaluation).
    roots_used: BTreeSet<String>,
    /// The depth of its tree, which decides the stack it is evaluated on.
    depth: usize,
}

impl Expression {
    /// Compiles `source` with the root variables only (no policy variables, no object types).
    pub fn compile(source: &str) -> Result<Expression, String> {
        Environment::default().compile(source)
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The field paths it selects from `object` or `oldObject` (`object.spec.replicas` is
    /// `["spec", "replicas"]`; only the longest of nested selections), for type checking.
    pub fn object_paths(&self) -> &[Vec<String>] {
        &self.object_paths
    }

    /// Evaluates the expression; the error is the runtime error's text (without the expression).
    pub fn evaluate(&self, activation: &Activation<'_>) -> Result<cel::Value, String> {
        if let Some(variables) = activation.variables {
            for name in &self.variables_used {
                if let Some(Err(err)) = variables.values.get(name) {
                    return Err(err.clone());
                }
            }
        }
        if self.depth <= SHALLOW_DEPTH {
            self.evaluate_here(activation)
        } else {
            on_deep_stack(|| self.evaluate_here(activation))?
        }
    }

    fn evaluate_here(&self, activation: &Activation<'_>) -> Result<cel::Value, String> {
        let convert = |slot: fn(&Converted) -> &OnceLock<cel::Value>, value: Option<&Value>| {
            let make = || value.map_or(cel::Value::Null, to_cel);
            match activation.converted {
                Some(converted) => slot(converted).get_or_init(make).clone(),
                None => make(),
            }
        };
        BASE.with(|base| {
            let mut scope = base.new_inner_scope();
            for root in &self.roots_used {
                let value = match root.as_str() {
                    "object" => convert(|c| &c.object, activation.object),
                    "oldObject" => convert(|c| &c.old_object, activation.old_object),
                    "request" => convert(|c| &c.request, Some(activation.request)),
                    "params" => convert(|c| &c.params, activation.params),
                    "namespaceObject" => {
                        convert(|c| &c.namespace_object, activation.namespace_object)
                    }
                    _ => activation
                        .variables
                        .map_or_else(|| Variables::default().as_cel(), Variables::as_cel),
                };
                scope.add_variable_from_value(root.as_str(), value);
            }
            REMAINING.set(WORK_BUDGET);
            match catch_unwind(AssertUnwindSafe(|| cel::Value::resolve(&self.ast, &scope))) {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(err)) => Err(err.to_string()),
                Err(_) => Err("the expression could not be evaluated".to_string()),
            }
        })
    }

    /// Evaluates an expression that must return a bool; the error reads as kube's.
    pub fn evaluate_bool(&self, activation: &Activation<'_>) -> Result<bool, String> {
        match self.evaluate(activation) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(_) => Err(format!(
                "expression '{}' resulted in error: expected bool",
                self.source
            )),
            Err(err) => Err(format!(
                "expression '{}' resulted in error: {err}",
                self.source
            )),
        }
    }
}

/// The `matchConditions` of a webhook or policy, compiled.
#[derive(Debug, Clone, Default)]
pub struct MatchConditions {
    conditions: Vec<(String, Expression)>,
}

impl MatchConditions {
    /// Compiles `(name, expression)` pairs; every failure is reported.
    pub fn compile(conditions: &[(String, String)]) -> Result<MatchConditions, Vec<String>> {
        Self::compile_in(&Environment::default(), conditions)
    }

    /// Compiles in `env` (a policy's match conditions may not use its variables, kube's rule,
    /// but may use `params`).
    pub fn compile_in(
        env: &Environment,
        conditions: &[(String, String)],
    ) -> Result<MatchConditions, Vec<String>> {
        let mut compiled = Vec::new();
        let mut errors = Vec::new();
        for (name, source) in conditions {
            match env.compile(source) {
                Ok(expression) => compiled.push((name.clone(), expression)),
                Err(err) => errors.push(format!(
                    "matchCondition '{name}': compilation failed: {err}"
                )),
            }
        }
        if errors.is_empty() {
            Ok(MatchConditions {
                conditions: compiled,
            })
        } else {
            Err(errors)
        }
    }

    /// Whether there are no conditions.
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// All true: a match; any false: no match (false wins over errors); else the first error.
    pub fn matches(&self, activation: &Activation<'_>) -> Result<bool, String> {
        let mut first_error = None;
        for (_, expression) in &self.conditions {
            match expression.evaluate_bool(activation) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(source: &str, activation: &Activation<'_>) -> Result<Value, String> {
        let expression = Expression::compile(source)?;
        to_json(&expression.evaluate(activation)?)
    }

    #[test]
    fn every_variable_is_bound() {
        let object = json!({"metadata": {"name": "a"}, "spec": {"replicas": 3}});
        let old = json!({"spec": {"replicas": 1}});
        let request = json!({"operation": "UPDATE", "userInfo": {"username": "alice"}});
        let params = json!({"data": {"max": "5"}});
        let namespace = json!({"metadata": {"labels": {"env": "prod"}}});
        let activation = Activation {
            object: Some(&object),
            old_object: Some(&old),
            request: &request,
            params: Some(&params),
            namespace_object: Some(&namespace),
            variables: None,
            converted: None,
        };
        let cases = [
            ("object.spec.replicas", json!(3)),
            ("oldObject.spec.replicas", json!(1)),
            ("request.userInfo.username", json!("alice")),
            ("request.operation == 'UPDATE'", json!(true)),
            ("int(params.data.max)", json!(5)),
            ("namespaceObject.metadata.labels.env", json!("prod")),
            ("has(object.spec.paused)", json!(false)),
        ];
        for (source, want) in cases {
            assert_eq!(eval(source, &activation), Ok(want), "{source}");
        }
    }

    #[test]
    fn absent_objects_are_null() {
        let request = json!({});
        let activation = Activation::new(None, None, &request);
        assert_eq!(
            eval("oldObject == null && params == null", &activation),
            Ok(json!(true))
        );
    }

    #[test]
    fn variables_are_checked_and_fail_only_where_used() {
        let env = Environment {
            variables: vec!["good".into(), "bad".into()],
            object_types: false,
        };
        let request = json!({});
        let mut variables = Variables::default();
        variables.insert("good", Ok(cel::Value::Int(2)));
        variables.insert("bad", Err("no such key: x".into()));
        let activation = Activation {
            variables: Some(&variables),
            ..Activation::new(None, None, &request)
        };
        let good = env.compile("variables.good + 1").unwrap();
        assert_eq!(good.evaluate(&activation).unwrap(), cel::Value::Int(3));
        let bad = env.compile("variables.bad == 1").unwrap();
        assert_eq!(bad.evaluate(&activation), Err("no such key: x".to_string()));
        let undeclared = env.compile("variables.other").unwrap_err();
        assert!(
            undeclared.contains("undefined field 'other'"),
            "{undeclared}"
        );
    }

    #[test]
    fn compile_errors_are_clear() {
        let parse = Expression::compile("object.spec.(").unwrap_err();
        assert!(!parse.is_empty());
        let unknown = Expression::compile("foo == 1").unwrap_err();
        assert!(
            unknown.contains("undeclared reference to 'foo'"),
            "{unknown}"
        );
        let authz =
            Expression::compile("authorizer.group('').resource('pods').check('get').allowed()")
                .unwrap_err();
        assert!(authz.contains("authorizer"), "{authz}");
        assert!(authz.contains("not supported"), "{authz}");
        assert!(Expression::compile("object.items.all(x, x > 0)").is_ok());
        let structs = Expression::compile("Object{spec: Object.spec{}}").unwrap_err();
        assert!(
            structs.contains("undeclared reference to 'Object'"),
            "{structs}"
        );
    }

    #[test]
    fn escaped_property_names_select_the_property() {
        let object = json!({"spec": {"x-y": 1, "a.b/c": 2, "namespace": 3, "p__q": 4}});
        let request = json!({});
        let activation = Activation::new(Some(&object), None, &request);
        for (source, want) in [
            ("object.spec.x__dash__y", json!(1)),
            ("object.spec.a__dot__b__slash__c", json!(2)),
            ("object.spec.__namespace__", json!(3)),
            ("object.spec.p__underscores__q", json!(4)),
            ("has(object.spec.x__dash__y)", json!(true)),
            ("has(object.spec.x__dash__z)", json!(false)),
        ] {
            assert_eq!(eval(source, &activation), Ok(want), "{source}");
        }
        let paths = Expression::compile("object.spec.x__dash__y").unwrap();
        assert_eq!(
            paths.object_paths(),
            [vec!["spec".to_string(), "x-y".to_string()]]
        );
        assert_eq!(unescape("plain"), None);
        assert_eq!(unescape("a__b").as_deref(), None);
    }

    #[test]
    fn deep_expressions_neither_overflow_nor_hang() {
        let request = json!({});
        let activation = Activation::new(None, None, &request);
        let sum = format!("1{}", " + 1".repeat(120));
        assert_eq!(eval(&sum, &activation), Ok(json!(121)));
        let parens = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
        assert_eq!(eval(&parens(60), &activation), Ok(json!(true)));
        assert!(Expression::compile(&parens(400)).is_err());
        let too_deep = format!("1{}", " + 1".repeat(300));
        let err = Expression::compile(&too_deep).unwrap_err();
        assert!(err.contains("recursion limit exceeded"), "{err}");
    }

    #[test]
    fn object_paths_are_the_longest_selections() {
        let expression = Expression::compile(
            "object.spec.replicas > 1 && has(oldObject.spec.paused) && object.spec.items.all(object, object.x)",
        )
        .unwrap();
        let paths: Vec<String> = expression
            .object_paths()
            .iter()
            .map(|p| p.join("."))
            .collect();
        assert_eq!(paths, ["spec.items", "spec.paused", "spec.replicas"]);
    }

    #[test]
    fn object_types_build_maps() {
        let env = Environment {
            object_types: true,
            ..Environment::default()
        };
        let request = json!({});
        let activation = Activation::new(None, None, &request);
        let apply = env
            .compile("Object{metadata: Object.metadata{labels: {'a': 'b'}}}")
            .unwrap();
        assert_eq!(
            to_json(&apply.evaluate(&activation).unwrap()),
            Ok(json!({"metadata": {"labels": {"a": "b"}}}))
        );
        let patch = env
            .compile("[JSONPatch{op: 'add', path: '/x/' + jsonpatch.escapeKey('a/b'), value: 1}]")
            .unwrap();
        assert_eq!(
            to_json(&patch.evaluate(&activation).unwrap()),
            Ok(json!([{"op": "add", "path": "/x/a~1b", "value": 1}]))
        );
    }

    #[test]
    fn runaway_expressions_hit_the_budget() {
        let object = json!({"items": (0..3000).collect::<Vec<_>>()});
        let request = json!({});
        let activation = Activation::new(Some(&object), None, &request);
        let nested =
            "object.items.all(x, object.items.all(y, object.items.all(z, x + y + z >= 0)))";
        assert_eq!(
            eval(nested, &activation),
            Err(format!(
                "{}",
                ExecutionError::function_error("cost", COST_EXCEEDED)
            ))
        );
        let range = eval("lists.range(100000000000).size() > 0", &activation).unwrap_err();
        assert!(range.contains(COST_EXCEEDED), "{range}");
        assert_eq!(
            eval("object.items.all(x, x >= 0)", &activation),
            Ok(json!(true))
        );
    }

    #[test]
    fn match_conditions_false_wins_over_errors() {
        let object = json!({"metadata": {"name": "a"}});
        let request = json!({});
        let activation = Activation::new(Some(&object), None, &request);
        let compile = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(n, e)| (n.to_string(), e.to_string()))
                .collect();
            MatchConditions::compile(&pairs).unwrap()
        };
        assert_eq!(
            compile(&[("a", "true"), ("b", "object.metadata.name == 'a'")]).matches(&activation),
            Ok(true)
        );
        assert_eq!(
            compile(&[("err", "object.spec.x"), ("no", "false")]).matches(&activation),
            Ok(false)
        );
        let err = compile(&[("err", "object.spec.x == 1"), ("yes", "true")])
            .matches(&activation)
            .unwrap_err();
        assert!(err.contains("resulted in error"), "{err}");
        let not_bool = compile(&[("s", "'x'")]).matches(&activation).unwrap_err();
        assert!(not_bool.contains("expected bool"), "{not_bool}");
        let errors = MatchConditions::compile(&[("bad".into(), "nope".into())]).unwrap_err();
        assert!(
            errors[0].starts_with("matchCondition 'bad': compilation failed"),
            "{errors:?}"
        );
    }
}
