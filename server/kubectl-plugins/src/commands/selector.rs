//! `--location-selector`: a label selector string turned into a `metav1.LabelSelector`, as
//! upstream's `metav1.ParseToLabelSelector`, so shards can be picked by label on creation.

use serde_json::{Map, Value, json};

use crate::error::Error;

fn invalid(detail: impl std::fmt::Display) -> Error {
    Error::msg(format!("invalid location selector: {detail}"))
}

/// Splits at commas outside parentheses.
fn requirements(selector: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(selector[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(selector[start..].trim());
    parts
}

fn set_values(rest: &str) -> Result<Vec<Value>, Error> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| invalid(format!("expected a parenthesized set, got {rest:?}")))?;
    Ok(inner
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| Value::String(v.to_owned()))
        .collect())
}

fn key(raw: &str) -> Result<&str, Error> {
    let key = raw.trim();
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key)
    } else {
        Err(invalid(format!("invalid label key {key:?}")))
    }
}

/// `None` for an empty selector.
pub fn parse(selector: &str) -> Result<Option<Value>, Error> {
    if selector.trim().is_empty() {
        return Ok(None);
    }
    let mut labels = Map::new();
    let mut expressions = Vec::new();
    for req in requirements(selector) {
        if let Some(k) = req.strip_prefix('!') {
            expressions.push(json!({"key": key(k)?, "operator": "DoesNotExist"}));
        } else if let Some((k, v)) = req.split_once("!=") {
            expressions.push(json!({"key": key(k)?, "operator": "NotIn", "values": [v.trim()]}));
        } else if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
            labels.insert(key(k)?.to_owned(), Value::String(v.trim().to_owned()));
        } else if let Some((k, rest)) = req.split_once(" notin ") {
            expressions
                .push(json!({"key": key(k)?, "operator": "NotIn", "values": set_values(rest)?}));
        } else if let Some((k, rest)) = req.split_once(" in ") {
            expressions
                .push(json!({"key": key(k)?, "operator": "In", "values": set_values(rest)?}));
        } else {
            expressions.push(json!({"key": key(req)?, "operator": "Exists"}));
        }
    }
    let mut out = Map::new();
    if !labels.is_empty() {
        out.insert("matchLabels".into(), Value::Object(labels));
    }
    if !expressions.is_empty() {
        out.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Ok(Some(Value::Object(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        assert_eq!(parse("").ok(), Some(None));
        assert_eq!(
            parse("a=b,c==d").ok().flatten(),
            Some(json!({"matchLabels": {"a": "b", "c": "d"}}))
        );
        assert_eq!(
            parse("a!=b, c in (x, y), d notin (z), e, !f")
                .ok()
                .flatten(),
            Some(json!({"matchExpressions": [
                {"key": "a", "operator": "NotIn", "values": ["b"]},
                {"key": "c", "operator": "In", "values": ["x", "y"]},
                {"key": "d", "operator": "NotIn", "values": ["z"]},
                {"key": "e", "operator": "Exists"},
                {"key": "f", "operator": "DoesNotExist"},
            ]}))
        );
        assert!(parse("a in x").is_err());
        assert!(parse("a>1").is_err());
    }
}
