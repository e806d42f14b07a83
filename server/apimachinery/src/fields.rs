//! Field selectors: the `fieldSelector` query string.
//!
//! Field selectors filter lists and watches by a few per-type fields (`metadata.name`,
//! `metadata.namespace`, `type`, ...). The grammar is smaller than label selectors (only `=`,
//! `==`, `!=`) but values may contain escaped `\,`, `\=` and `\\`. Parsing here is type-agnostic;
//! the server checks [`FieldSelector::requirements`] against the fields a resource supports and
//! supplies values through a closure when matching.

use std::fmt;

use thiserror::Error;

/// Why a field selector could not be parsed; the text is what Kubernetes reports.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FieldSelectorError {
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    Term { selector: String, term: String },
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// Kubernetes prints the offending character as its code point number.
    #[error("invalid field selector: unescaped character in value: {}", *.0 as u32)]
    UnescapedCharacter(char),
}

/// How a requirement compares a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOp {
    /// `=` or `==`.
    Equals,
    /// `!=`.
    NotEquals,
}

/// One `field<op>value` term, with the value unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub op: FieldOp,
    pub value: String,
}

impl FieldRequirement {
    fn matches(&self, actual: &str) -> bool {
        match self.op {
            FieldOp::Equals => actual == self.value,
            FieldOp::NotEquals => actual != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FieldOp::Equals => "=",
            FieldOp::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A conjunction of field requirements; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d`; terms are ordered as Kubernetes orders them (by their text).
    pub fn parse(selector: &str) -> Result<Self, FieldSelectorError> {
        let mut terms = split_terms(selector);
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let (field, op, raw_value) =
                split_term(term).ok_or_else(|| FieldSelectorError::Term {
                    selector: selector.to_string(),
                    term: term.to_string(),
                })?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                op,
                value: unescape_value(raw_value)?,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// A selector requiring `field` to equal `value` (e.g. `metadata.name` for a single-object watch).
    pub fn one_term_equal(field: &str, value: &str) -> Self {
        FieldSelector {
            requirements: vec![FieldRequirement {
                field: field.to_string(),
                op: FieldOp::Equals,
                value: value.to_string(),
            }],
        }
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The value `field` is required to equal, if the selector says so (used to narrow lists,
    /// e.g. by `metadata.name`).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.op == FieldOp::Equals)
            .map(|r| r.value.as_str())
    }

    /// Whether an object matches; `get` returns a field's value, and an absent field counts
    /// as the empty string.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(&get(&r.field).unwrap_or_default()))
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// Splits on commas not preceded by a backslash escape, keeping escapes in the terms.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in selector.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at its first operator (`!=`, `==` or `=`).
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    (0..term.len())
        .filter(|i| term.is_char_boundary(*i))
        .find_map(|i| {
            let rest = &term[i..];
            [
                ("!=", FieldOp::NotEquals),
                ("==", FieldOp::Equals),
                ("=", FieldOp::Equals),
            ]
            .into_iter()
            .find(|(op, _)| rest.starts_with(op))
            .map(|(op, kind)| (&term[..i], kind, &rest[op.len()..]))
        })
}

/// Resolves `\\`, `\,` and `\=`; other escapes and bare `,` or `=` are errors.
fn unescape_value(raw: &str) -> Result<String, FieldSelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(FieldSelectorError::InvalidEscape(format!("\\{c}")));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => return Err(FieldSelectorError::UnescapedCharacter(c)),
            c => out.push(c),
        }
    }
    if escaped {
        return Err(FieldSelectorError::InvalidEscape("\\".to_string()));
    }
    Ok(out)
}

/// Escapes a value for printing in a selector.
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |field| {
            pairs
                .iter()
                .find(|(k, _)| *k == field)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn parses_terms() {
        let selector =
            FieldSelector::parse("metadata.name=x,metadata.namespace!=kube-system").unwrap();
        assert_eq!(
            selector.requirements(),
            [
                FieldRequirement {
                    field: "metadata.name".into(),
                    op: FieldOp::Equals,
                    value: "x".into()
                },
                FieldRequirement {
                    field: "metadata.namespace".into(),
                    op: FieldOp::NotEquals,
                    value: "kube-system".into()
                },
            ]
        );
        assert_eq!(
            selector.to_string(),
            "metadata.name=x,metadata.namespace!=kube-system"
        );
        assert_eq!(
            FieldSelector::parse("b==2,a=1").unwrap().to_string(),
            "a=1,b=2"
        );
        assert!(FieldSelector::parse("").unwrap().is_empty());
        assert!(FieldSelector::parse(",").unwrap().is_empty());
        assert_eq!(
            FieldSelector::parse("a=").unwrap().requirements()[0].value,
            ""
        );
        assert_eq!(selector.requires_exact_match("metadata.name"), Some("x"));
        assert_eq!(selector.requires_exact_match("metadata.namespace"), None);
    }

    #[test]
    fn escapes() {
        let selector = FieldSelector::parse(r"a=x\,y\=z\\w,b=c").unwrap();
        assert_eq!(selector.requirements()[0].value, r"x,y=z\w");
        assert_eq!(selector.requirements().len(), 2);
        assert_eq!(selector.to_string(), r"a=x\,y\=z\\w,b=c");
        assert_eq!(escape_value("a=b"), r"a\=b");
        assert_eq!(
            FieldSelector::one_term_equal("metadata.name", "a,b").to_string(),
            r"metadata.name=a\,b"
        );
    }

    #[test]
    fn errors_match_kubernetes() {
        let err = |s: &str| FieldSelector::parse(s).unwrap_err().to_string();
        assert_eq!(err("a"), "invalid selector: 'a'; can't understand 'a'");
        assert_eq!(
            err("a=b,c"),
            "invalid selector: 'a=b,c'; can't understand 'c'"
        );
        assert_eq!(
            err(r"a=b\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            err(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            err("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
    }

    #[test]
    fn matching_treats_absent_as_empty() {
        let fields = [("metadata.name", "x"), ("type", "Opaque")];
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(get(&fields));
        assert!(m(""));
        assert!(m("metadata.name=x"));
        assert!(m("metadata.name==x,type=Opaque"));
        assert!(!m("metadata.name=y"));
        assert!(m("metadata.name!=y"));
        assert!(!m("metadata.name!=x"));
        assert!(m("spec.missing="));
        assert!(!m("spec.missing!="));
    }
}
