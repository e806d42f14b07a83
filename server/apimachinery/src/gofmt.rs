//! Go `fmt` renderings that Kubernetes messages depend on.
//!
//! Clients (kubectl, controllers, conformance tests) match on the exact text of errors the Go
//! apiserver prints, and that text comes from Go's `%q` and `%#v` verbs. This module reproduces
//! the few renderings we need so every other module can build byte-identical messages. It also
//! renders a Rust error with its causes the way Go prints an error wrapped with `%w`
//! (`outer: inner: cause`), the one-line form upstream puts into conditions, events and logs
//! (used by the operator and the end-to-end node agent).

use serde_json::Value;

/// Renders `s` the way Go's `%q` (`strconv.Quote`) does: double-quoted, with `"` and `\`
/// escaped and non-printable characters written as escapes.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Renders a JSON value the way Kubernetes prints a field error's bad value: strings `%q`,
/// numbers and booleans plainly, `null` as the quoted word, string lists as Go's `%#v` of a
/// `[]string`, anything else as compact JSON.
pub fn bad_value(value: &Value) -> String {
    match value {
        Value::Null => quote("null"),
        Value::String(s) => quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            string_slice(&items.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        }
        other => other.to_string(),
    }
}

/// Renders a JSON value the way Go's `%v` prints the decoded `interface{}`: maps as
/// `map[k:v ...]` with sorted keys, lists as `[a b]`, strings bare, `null` as `<nil>`.
pub fn value_v(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_v).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let rendered: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{k}:{}", value_v(v)))
                .collect();
            format!("map[{}]", rendered.join(" "))
        }
    }
}

/// Go's `%#v` of a `[]string`: `[]string{"a", "b"}`.
pub fn string_slice(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// An error and its chain of sources on one line, `error: cause: cause`, as Go prints an error
/// wrapped with `fmt.Errorf("...: %w", err)`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quote_escapes_like_go() {
        assert_eq!(quote("Foo"), "\"Foo\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("x\ny\t\u{1}"), "\"x\\ny\\t\\x01\"");
        assert_eq!(quote("ünï"), "\"ünï\"");
        assert_eq!(quote("\u{85}"), "\"\\u0085\"");
    }

    #[test]
    fn bad_values_render_like_go() {
        assert_eq!(bad_value(&json!("Foo")), "\"Foo\"");
        assert_eq!(bad_value(&json!(-1)), "-1");
        assert_eq!(bad_value(&json!(true)), "true");
        assert_eq!(bad_value(&Value::Null), "\"null\"");
        assert_eq!(bad_value(&json!(["a", "b"])), "[]string{\"a\", \"b\"}");
        assert_eq!(bad_value(&json!({"k": 1})), "{\"k\":1}");
    }

    #[test]
    fn values_render_like_go_v() {
        assert_eq!(
            value_v(&json!({"b": [1, "x"], "a": null, "c": true})),
            "map[a:<nil> b:[1 x] c:true]"
        );
    }

    #[test]
    fn error_chains_print_like_wrapped_go_errors() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading the key")]
        struct Outer(#[source] std::io::Error);
        let inner = std::io::Error::other("permission denied");
        assert_eq!(
            error_chain(&Outer(inner)),
            "reading the key: permission denied"
        );
        assert_eq!(
            error_chain(&std::fmt::Error),
            "an error occurred when formatting an argument"
        );
    }
}
