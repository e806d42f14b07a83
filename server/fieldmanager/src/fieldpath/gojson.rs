//! Text renderings that must match Go byte for byte.
//!
//! FieldsV1 keys embed JSON (`k:{"name":"c"}`, `v:"x"`) written by json-iterator in its
//! standard-library-compatible mode, and conflict messages print values with Go's `%q`/`%v`.
//! Clients compare both as strings (kubectl shows the messages, controllers diff
//! managedFields), so the few places that produce such text go through here instead of
//! serde_json's own formatting, which differs (no HTML escaping, `1.0` instead of `1`).

use std::fmt::Write;

use serde_json::{Number, Value};

/// `v` as compact JSON the way Go's encoder writes it: object keys sorted, `<`, `>`, `&`,
/// U+2028 and U+2029 escaped, floats without a trailing `.0`.
pub(crate) fn to_json(v: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, v);
    out
}

fn write_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_json(out, &map[key.as_str()]);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal with Go's HTML-safe escaping.
pub(crate) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON number as Go's encoder writes a float64 or an int64.
fn json_number(n: &Number) -> String {
    if n.is_f64() {
        n.as_f64().map(|f| go_float(f, 1e-6)).unwrap_or_default()
    } else {
        n.to_string()
    }
}

/// Go's shortest float formatting: plain digits, or exponent form (`1e-07` style exponents
/// with at least two digits under `%v`, `1e-7` in JSON) outside `[small, 1e21)`.
fn go_float(f: f64, small: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && (abs < small || abs >= 1e21) {
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exponent),
        };
        // JSON (small == 1e-6) writes `e-7`; fmt's %v (small == 1e-4) writes `e-07`.
        if small < 1e-5 && sign == '-' {
            format!("{mantissa}e-{digits}")
        } else {
            format!("{mantissa}e{sign}{digits:0>2}")
        }
    } else {
        format!("{f}")
    }
}

/// Go's `%q` of a string (strconv.Quote), shared with every Kubernetes message of this project.
pub(crate) use kcp_apimachinery::gofmt::quote;

/// Go's `%v` of a value as structured-merge-diff prints it in paths: strings quoted, lists
/// as `[a,b]`, maps as `k=v` pairs.
pub(crate) fn display_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => n.as_f64().map(|f| go_float(f, 1e-4)).unwrap_or_default(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(display_value).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", display_value(v)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_like_go() {
        assert_eq!(
            to_json(&json!({"protocol": "TCP", "containerPort": 80})),
            r#"{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(
            to_json(&json!("a<b&c>\n\u{1}")),
            r#""a\u003cb\u0026c\u003e\n\u0001""#
        );
        assert_eq!(to_json(&json!(1.0)), "1");
        assert_eq!(to_json(&json!(0.5)), "0.5");
        assert_eq!(to_json(&json!(1e21)), "1e+21");
        assert_eq!(to_json(&json!(1e-7)), "1e-7");
        assert_eq!(to_json(&json!([true, null, -3])), "[true,null,-3]");
    }

    #[test]
    fn display_like_go() {
        assert_eq!(display_value(&json!("c")), "\"c\"");
        assert_eq!(display_value(&json!(80)), "80");
        assert_eq!(display_value(&json!(2.5)), "2.5");
        assert_eq!(display_value(&json!(0.00001)), "1e-05");
        assert_eq!(display_value(&json!(["a", 1])), "[\"a\",1]");
        assert_eq!(quote("tab\there\u{1}"), "\"tab\\there\\x01\"");
    }
}
