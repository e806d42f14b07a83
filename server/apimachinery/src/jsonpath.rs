//! The JSONPath subset Kubernetes uses in CRD `additionalPrinterColumns` and `selectableFields`.
//!
//! kube-apiserver evaluates these with its own JSONPath dialect; CRDs in the wild use a small part of
//! it: field steps (`.spec.replicas`, `['a.b']`), indexes (`[0]`, `[-1]`), wildcards (`[*]`) and
//! equality filters (`[?(@.type=="Ready")]`), optionally wrapped in `{...}`. Parsing happens once per
//! CRD; evaluation is a walk over a JSON value.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    /// `[?(@.a.b == literal)]`
    Filter {
        path: Vec<String>,
        equals: Value,
    },
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath {path:?}: {reason}")]
pub struct JsonPathError {
    path: String,
    reason: String,
}

impl JsonPath {
    pub fn parse(raw: &str) -> Result<JsonPath, JsonPathError> {
        let error = |reason: &str| JsonPathError {
            path: raw.to_string(),
            reason: reason.to_string(),
        };
        let mut text = raw.trim();
        if let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            text = inner.trim();
        }
        let text = text.strip_prefix('$').unwrap_or(text);
        if !text.starts_with('.') && !text.starts_with('[') {
            return Err(error("must start with '.' or '['"));
        }
        let chars: Vec<char> = text.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    let start = i + 1;
                    let mut end = start;
                    while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                        end += 1;
                    }
                    let name: String = chars[start..end].iter().collect();
                    if name.is_empty() {
                        return Err(error("empty field name"));
                    }
                    steps.push(if name == "*" {
                        Step::Wildcard
                    } else {
                        Step::Field(name)
                    });
                    i = end;
                }
                '[' => {
                    let close =
                        find_bracket_end(&chars, i).ok_or_else(|| error("unterminated '['"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(parse_bracket(inner.trim()).map_err(|r| error(&r))?);
                    i = close + 1;
                }
                _ => return Err(error("unexpected character")),
            }
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path selects, in document order.
    pub fn select<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![value];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in current {
                match step {
                    Step::Field(name) => next.extend(v.get(name.as_str())),
                    Step::Index(index) => {
                        if let Some(items) = v.as_array() {
                            let resolved = if *index < 0 {
                                items.len() as i64 + index
                            } else {
                                *index
                            };
                            next.extend(usize::try_from(resolved).ok().and_then(|i| items.get(i)));
                        }
                    }
                    Step::Wildcard => match v {
                        Value::Array(items) => next.extend(items.iter()),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Filter { path, equals } => {
                        if let Some(items) = v.as_array() {
                            next.extend(
                                items
                                    .iter()
                                    .filter(|item| lookup(item, path) == Some(equals)),
                            );
                        }
                    }
                }
            }
            current = next;
        }
        current
    }

    /// The first selected value, as printer columns show it.
    pub fn first<'a>(&self, value: &'a Value) -> Option<&'a Value> {
        self.select(value).into_iter().next()
    }
}

fn lookup<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key.as_str()))
}

/// The index of the `]` closing the `[` at `open`, skipping quoted strings.
fn find_bracket_end(chars: &[char], open: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (offset, c) in chars[open + 1..].iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if *c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(*c),
            (None, ']') => return Some(open + 1 + offset),
            _ => {}
        }
    }
    None
}

fn unquote(text: &str) -> Option<&str> {
    let text = text.trim();
    text.strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
}

fn parse_bracket(inner: &str) -> Result<Step, String> {
    if inner == "*" {
        return Ok(Step::Wildcard);
    }
    if let Some(name) = unquote(inner) {
        return Ok(Step::Field(name.to_string()));
    }
    if let Ok(index) = inner.parse::<i64>() {
        return Ok(Step::Index(index));
    }
    let filter = inner
        .strip_prefix("?(")
        .and_then(|f| f.strip_suffix(')'))
        .ok_or_else(|| format!("unsupported expression [{inner}]"))?;
    let (left, right) = filter
        .split_once("==")
        .ok_or("only == filters are supported")?;
    let path = left
        .trim()
        .strip_prefix("@.")
        .ok_or("a filter must start with @.")?;
    let right = right.trim();
    let equals = match unquote(right) {
        Some(text) => Value::String(text.to_string()),
        None => serde_json::from_str(right).map_err(|_| format!("invalid literal {right}"))?,
    };
    Ok(Step::Filter {
        path: path.split('.').map(str::to_string).collect(),
        equals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({"spec": {"replicas": 3, "a.b": "dotted"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}],
                "items": [1, 2, 3]}})
    }

    #[test]
    fn fields_indexes_wildcards_and_filters() {
        let v = sample();
        let first = |p: &str| JsonPath::parse(p).unwrap().first(&v).cloned();
        assert_eq!(first(".spec.replicas"), Some(json!(3)));
        assert_eq!(first("{.spec.replicas}"), Some(json!(3)));
        assert_eq!(first(".spec['a.b']"), Some(json!("dotted")));
        assert_eq!(first(".status.items[1]"), Some(json!(2)));
        assert_eq!(first(".status.items[-1]"), Some(json!(3)));
        assert_eq!(
            first(".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(
            first(".status.conditions[?(@.type=='Synced')].status"),
            Some(json!("False"))
        );
        assert_eq!(first(".spec.missing"), None);
        let all = JsonPath::parse(".status.conditions[*].type").unwrap();
        assert_eq!(all.select(&v), vec![&json!("Ready"), &json!("Synced")]);
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in ["spec", ".spec[", ".spec..x", ".a[?(@.x>1)]", ".a[foo]"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
