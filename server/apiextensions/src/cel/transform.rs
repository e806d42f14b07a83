//! CEL transformations: an expression that computes a new value from `self`, the value of one
//! field of an object, rather than a rule that accepts or refuses it. kcp's APIConversion rules
//! (`spec.conversions[].rules[].transformation`) are these: upstream kcp compiled them with the
//! schema of the field as the type of `self` and the Kubernetes CEL libraries, and refused an
//! APIConversion whose field is not in the schema or whose expression does not compile.
//!
//! The same libraries, value typing (escaped property names, integers by schema type) and cost
//! bound as validation rules apply, so an expression behaves here as it would in a CRD rule. The
//! result becomes JSON by [`cel_to_json`], which admission policies' expressions share.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, OptionalValue};
use kube_cel::cel::{self, Context, Program};
use serde_json::Value;

use super::cost::{self, PER_CALL_LIMIT};
use super::rule::check_references;
use super::value::to_cel;
use crate::schema::StructuralSchema;
use crate::schema::fieldpath::{self, Resolved};

/// Why a transformation could not be compiled or run.
#[derive(Debug, thiserror::Error)]
pub enum TransformationError {
    #[error("{0}")]
    Field(String),
    #[error("error compiling CEL program: {0}")]
    Compile(String),
    #[error("error executing transformation: {0}")]
    Evaluate(String),
    #[error("error executing transformation: {0}")]
    Result(String),
    #[error("error executing transformation: operation cancelled: actual cost limit exceeded")]
    Cost,
}

/// A compiled transformation of the field at `field` (a `.a.b` path) of one schema.
#[derive(Debug)]
pub struct Transformation {
    field: String,
    program: Program,
}

thread_local! {
    /// The standard library plus Kubernetes' extensions, as for validation rules.
    static BASE: Context<'static> = {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx
    };
}

/// `field` with its leading dot (upstream accepts `.spec.a` and `spec.a`).
fn dotted(field: &str) -> String {
    if field.starts_with('.') {
        field.to_string()
    } else {
        format!(".{field}")
    }
}

impl StructuralSchema {
    /// The field names of `field` (`.spec.name.first` or `spec.name.first`), when the schema
    /// declares that field (a property, or a value of a map).
    pub fn declared_field(&self, field: &str) -> Result<Vec<String>, TransformationError> {
        self.resolve(field).map(|resolved| resolved.segments)
    }

    fn resolve(&self, field: &str) -> Result<Resolved<'_>, TransformationError> {
        fieldpath::resolve(self.root(), &dotted(field), false)
            .map_err(|detail| TransformationError::Field(format!("field {field:?} {detail}")))
    }

    /// Compiles `expression` with `self` the value of `field`, which the schema must declare.
    pub fn compile_transformation(
        &self,
        field: &str,
        expression: &str,
    ) -> Result<Transformation, TransformationError> {
        let node = self.resolve(field)?.node;
        let program = Program::compile(expression)
            .map_err(|error| TransformationError::Compile(error.to_string()))?;
        check_references(program.expression(), node).map_err(TransformationError::Compile)?;
        Ok(Transformation {
            field: dotted(field),
            program,
        })
    }

    /// Runs `transformation` (compiled against this schema) on `value`, the field's value.
    pub fn transform(
        &self,
        transformation: &Transformation,
        value: &Value,
    ) -> Result<Value, TransformationError> {
        let node = self.resolve(&transformation.field)?.node;
        if cost::estimate(transformation.program.expression(), value, None) > PER_CALL_LIMIT {
            return Err(TransformationError::Cost);
        }
        let this = to_cel(Some(node), value, false);
        let result = BASE.with(|base| {
            let mut scope = base.new_inner_scope();
            scope.add_variable_from_value("self", this);
            transformation.program.execute(&scope)
        });
        match result {
            Ok(result) => cel_to_json(&result).map_err(TransformationError::Result),
            Err(error) => Err(TransformationError::Evaluate(error.to_string())),
        }
    }
}

/// A CEL result as JSON (bytes as base64, timestamps in RFC 3339, durations as Go prints them
/// in seconds), or why it has no JSON form.
pub fn cel_to_json(value: &cel::Value) -> Result<Value, String> {
    Ok(match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("{f} has no JSON representation"))?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::Bytes(b) => Value::String(STANDARD.encode(b.as_slice())),
        cel::Value::List(items) => {
            Value::Array(items.iter().map(cel_to_json).collect::<Result<_, _>>()?)
        }
        cel::Value::Map(map) => {
            let mut obj = serde_json::Map::new();
            for (key, value) in map.map.iter() {
                let key = match key {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                obj.insert(key, cel_to_json(value)?);
            }
            Value::Object(obj)
        }
        cel::Value::Timestamp(t) => Value::String(t.to_rfc3339()),
        cel::Value::Duration(d) => Value::String(format!("{}s", d.num_seconds())),
        cel::Value::Opaque(opaque) => match opaque.downcast_ref::<OptionalValue>() {
            Some(optional) => optional
                .value()
                .map(cel_to_json)
                .transpose()?
                .unwrap_or(Value::Null),
            None => {
                return Err(format!(
                    "{} has no JSON representation",
                    opaque.runtime_type_name()
                ));
            }
        },
        cel::Value::Function(name, _) => {
            return Err(format!("function {name} has no JSON representation"));
        }
    })
}
