//! One step into an object, and paths made of steps.
//!
//! Field ownership names fields by how the schema identifies them, not by position: a struct or
//! map field by name, a list-map element by its key fields, a set element by its value. The
//! order defined here is the one structured-merge-diff sorts by (fields, then keys, then
//! values, then indices; numbers before strings before booleans), because FieldsV1 is written
//! in that order and byte-exact output depends on it.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

use super::gojson;

/// A step into an object.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of a map or struct (`f:<name>`).
    Field(String),
    /// A list-map element by its key fields, sorted by name (`k:{"name":"c"}`); build it
    /// with [`PathElement::key`] to keep that order.
    Key(Vec<(String, Value)>),
    /// A set element by its value (`v:"x"`).
    Value(Value),
    /// A list element by position (`i:0`); only read from FieldsV1 written elsewhere, since
    /// every list this crate walks is atomic, a set or a map.
    Index(usize),
}

impl PathElement {
    /// A list-map key from its fields, in any order.
    pub fn key(mut fields: Vec<(String, Value)>) -> Self {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    /// A field step.
    pub fn field(name: &str) -> Self {
        PathElement::Field(name.to_string())
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b) {
                    let c = an.cmp(bn).then_with(|| compare_values(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    /// As in conflict messages: `.name`, `[name="c",port=80]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(n, v)| format!("{n}={}", gojson::display_value(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", gojson::display_value(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object root, printed as Kubernetes prints conflicting fields
/// (`.spec.containers[name="c"].image`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct FieldPath(pub Vec<PathElement>);

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|pe| write!(f, "{pe}"))
    }
}

/// The total order structured-merge-diff puts on values: numbers (ints and floats compared
/// numerically) < strings < booleans < lists < maps < null. Equal under this order is equal.
fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            } else {
                let int = |n: &serde_json::Number| {
                    n.as_i64()
                        .map(i128::from)
                        .or_else(|| n.as_u64().map(i128::from))
                        .unwrap_or(0)
                };
                int(x).cmp(&int(y))
            }
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xs: Vec<_> = x.iter().collect();
            let mut ys: Vec<_> = y.iter().collect();
            xs.sort_by(|p, q| p.0.cmp(q.0));
            ys.sort_by(|p, q| p.0.cmp(q.0));
            for ((xk, xv), (yk, yv)) in xs.iter().zip(&ys) {
                let c = xk.cmp(yk).then_with(|| compare_values(xv, yv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Deep equality with Kubernetes' number semantics (`1 == 1.0`) and key order ignored.
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    compare_values(a, b) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn order_matches_structured_merge_diff() {
        let mut elements = [
            PathElement::Index(0),
            PathElement::Value(json!("b")),
            PathElement::Value(json!(10)),
            PathElement::key(vec![("name".into(), json!("a"))]),
            PathElement::field("z"),
            PathElement::field("a"),
            PathElement::Value(json!(9.5)),
        ];
        elements.sort();
        let shown: Vec<String> = elements.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                ".a",
                ".z",
                "[name=\"a\"]",
                "[=9.5]",
                "[=10]",
                "[=\"b\"]",
                "[0]"
            ]
        );
        assert!(values_equal(&json!(1), &json!(1.0)));
        assert!(values_equal(
            &json!({"a": 1, "b": 2}),
            &json!({"b": 2, "a": 1})
        ));
        assert_eq!(compare_values(&json!(null), &json!({})), Ordering::Greater);
    }

    #[test]
    fn keys_sort_their_fields_and_print_like_kubernetes() {
        let key = PathElement::key(vec![
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]);
        assert_eq!(key.to_string(), "[containerPort=80,protocol=\"TCP\"]");
        let path = FieldPath(vec![
            PathElement::field("spec"),
            PathElement::field("containers"),
            PathElement::key(vec![("name".into(), json!("c"))]),
            PathElement::field("image"),
        ]);
        assert_eq!(path.to_string(), ".spec.containers[name=\"c\"].image");
    }
}
