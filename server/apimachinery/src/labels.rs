//! Label selectors: the `labelSelector` query string and `metav1.LabelSelector` objects.
//!
//! List, watch and deletecollection filter by labels, and controllers store selectors in specs.
//! Clients send the string form (`app=web,tier in (a,b),!legacy`), so the parser follows
//! Kubernetes' grammar and error texts token for token; both forms compile to the same
//! requirements, which also print back in Kubernetes' canonical order.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use thiserror::Error;

use crate::status::{FieldError, aggregate};
use crate::validation;

/// Why a selector could not be parsed or built; the text is what Kubernetes reports.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    #[error("{0}")]
    Syntax(String),
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    #[error("{0}")]
    Invalid(String),
}

/// How a requirement compares a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl Operator {
    /// The operator's name as Kubernetes prints it in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// One condition on one label key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement, checking the key, the values and their count for the operator
    /// with Kubernetes' messages.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        let mut errs = Vec::new();
        if let Some(err) = key_error(key, "key") {
            errs.push(err);
        }
        let values_json = || Value::from(values.clone());
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errs.push(FieldError::invalid(
                "values",
                values_json(),
                "for 'in', 'notin' operators, values set can't be empty",
            )),
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                errs.push(FieldError::invalid(
                    "values",
                    values_json(),
                    "exact-match compatibility requires one single value",
                ))
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                errs.push(FieldError::invalid(
                    "values",
                    values_json(),
                    "values set must be empty for exists and does not exist",
                ))
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        "values",
                        values_json(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        errs.push(FieldError::invalid(
                            &format!("values[{i}]"),
                            Value::from(value.as_str()),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            let problems = validation::is_valid_label_value(value);
            if !problems.is_empty() {
                errs.push(FieldError::invalid(
                    &format!("values[{i}][{key}]"),
                    Value::from(value.as_str()),
                    &problems.join("; "),
                ));
            }
        }
        match aggregate(&errs) {
            Some(message) => Err(SelectorError::Invalid(message)),
            None => Ok(Requirement {
                key: key.to_string(),
                operator,
                values,
            }),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.values.contains(v))
            }
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [bound]) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.as_slice(),
                ) else {
                    return false;
                };
                match bound.parse::<i64>() {
                    Ok(bound) if self.operator == Operator::GreaterThan => actual > bound,
                    Ok(bound) => actual < bound,
                    Err(_) => false,
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (op, parens) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => ("=", false),
            Operator::DoubleEquals => ("==", false),
            Operator::NotEquals => ("!=", false),
            Operator::In => (" in ", true),
            Operator::NotIn => (" notin ", true),
            Operator::GreaterThan => (">", false),
            Operator::LessThan => ("<", false),
        };
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        let joined = values.join(",");
        if parens {
            write!(f, "{op}({joined})")
        } else {
            write!(f, "{op}{joined}")
        }
    }
}

/// The key check Kubernetes applies to selector keys: all problems in one field error.
fn key_error(key: &str, field: &str) -> Option<FieldError> {
    let problems = validation::is_qualified_name(key);
    (!problems.is_empty())
        .then(|| FieldError::invalid(field, Value::from(key), &problems.join("; ")))
}

/// A conjunction of label requirements. The empty selector matches everything; the selector
/// built from a JSON `null` matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    matches_nothing: bool,
}

impl LabelSelector {
    /// The selector that matches every label set.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches no label set (what a missing `metav1.LabelSelector` means).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            matches_nothing: true,
        }
    }

    /// Builds a selector from requirements, ordered by key as Kubernetes does.
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            matches_nothing: false,
        }
    }

    /// Parses the string syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
    /// `a>1`, `a<1`, joined by commas; the empty string selects everything.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let tokens = lex(selector);
        Parser {
            tokens: &tokens,
            position: 0,
        }
        .parse()
        .map(LabelSelector::from_requirements)
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON object (`matchLabels` and
    /// `matchExpressions` with `In`, `NotIn`, `Exists`, `DoesNotExist`); `null` selects nothing.
    pub fn from_json(selector: &Value) -> Result<Self, SelectorError> {
        let Some(object) = selector.as_object() else {
            return match selector {
                Value::Null => Ok(LabelSelector::nothing()),
                other => Err(SelectorError::Invalid(format!(
                    "label selector must be an object, got {other}"
                ))),
            };
        };
        let mut requirements = Vec::new();
        if let Some(match_labels) = object.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in match_labels {
                let value = value.as_str().unwrap_or_default().to_string();
                requirements.push(Requirement::new(key, Operator::Equals, vec![value])?);
            }
        }
        for expression in object
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let operator = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::Invalid(format!(
                        "{} is not a valid label selector operator",
                        crate::gofmt::quote(other)
                    )));
                }
            };
            let values = expression
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            requirements.push(Requirement::new(key, operator, values)?);
        }
        Ok(LabelSelector::from_requirements(requirements))
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector places no restriction (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.matches_nothing
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Identifier,
    OpenPar,
    ClosedPar,
    Comma,
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    End,
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Splits a selector into tokens; like Kubernetes, a NUL byte ends the input.
fn lex(input: &str) -> Vec<(Token, &str)> {
    let end = input.find('\0').unwrap_or(input.len());
    let input = &input[..end];
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && is_whitespace(bytes[i]) {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else {
            tokens.push((Token::End, ""));
            return tokens;
        };
        let start = i;
        if is_special(b) {
            let two = bytes.get(i + 1).copied();
            let (token, len) = match (b, two) {
                (b'!', Some(b'=')) => (Token::NotEquals, 2),
                (b'=', Some(b'=')) => (Token::DoubleEquals, 2),
                (b'!', _) => (Token::Bang, 1),
                (b'=', _) => (Token::Equals, 1),
                (b'(', _) => (Token::OpenPar, 1),
                (b')', _) => (Token::ClosedPar, 1),
                (b',', _) => (Token::Comma, 1),
                (b'>', _) => (Token::GreaterThan, 1),
                _ => (Token::LessThan, 1),
            };
            i += len;
            tokens.push((token, &input[start..i]));
        } else {
            while i < bytes.len() && !is_whitespace(bytes[i]) && !is_special(bytes[i]) {
                i += 1;
            }
            let word = &input[start..i];
            let token = match word {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            tokens.push((token, word));
        }
    }
}

/// Whether `in`/`notin` are keywords (after a key) or plain words (in value position).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    tokens: &'a [(Token, &'a str)],
    position: usize,
}

impl<'a> Parser<'a> {
    fn lookahead(&self, context: Context) -> (Token, &'a str) {
        let (token, literal) = self
            .tokens
            .get(self.position)
            .copied()
            .unwrap_or((Token::End, ""));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'a str) {
        let next = self.lookahead(context);
        if self.position < self.tokens.len() {
            self.position += 1;
        }
        next
    }

    fn parse(mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            match self.lookahead(Context::Values) {
                (Token::Identifier | Token::Bang, _) => {
                    requirements.push(self.requirement().map_err(SelectorError::Requirement)?);
                    match self.consume(Context::Values) {
                        (Token::End, _) => return Ok(requirements),
                        (Token::Comma, _) => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::Bang {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{literal}', expected: identifier after ','"
                                )));
                            }
                        }
                        (_, literal) => {
                            return Err(SelectorError::Syntax(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                (Token::End, _) => return Ok(requirements),
                (_, literal) => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, unary) = self.key_and_unary_operator()?;
        let build =
            |operator, values| Requirement::new(key, operator, values).map_err(|e| e.to_string());
        if let Some(operator) = unary {
            return build(operator, Vec::new());
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        build(operator, values)
    }

    /// Reads `!key` or `key`; returns the operator when the key stands alone.
    fn key_and_unary_operator(&mut self) -> Result<(&'a str, Option<Operator>), String> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let negated = token == Token::Bang;
        if negated {
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        if let Some(err) = key_error(literal, "<nil>") {
            return Err(err.to_string());
        }
        let alone = matches!(self.lookahead(Context::Values).0, Token::End | Token::Comma);
        let operator = match (negated, alone) {
            (true, _) => Some(Operator::DoesNotExist),
            (false, true) => Some(Operator::Exists),
            (false, false) => None,
        };
        Ok((literal, operator))
    }

    fn operator(&mut self) -> Result<Operator, String> {
        match self.consume(Context::KeyAndOperator) {
            (Token::In, _) => Ok(Operator::In),
            (Token::NotIn, _) => Ok(Operator::NotIn),
            (Token::Equals, _) => Ok(Operator::Equals),
            (Token::DoubleEquals, _) => Ok(Operator::DoubleEquals),
            (Token::NotEquals, _) => Ok(Operator::NotEquals),
            (Token::GreaterThan, _) => Ok(Operator::GreaterThan),
            (Token::LessThan, _) => Ok(Operator::LessThan),
            (_, literal) => Err(format!(
                "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
            )),
        }
    }

    /// `(a,b,...)`, returned sorted and without duplicates; empty entries count as "".
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let mut values = match self.lookahead(Context::Values) {
            (Token::Identifier | Token::Comma, literal) => {
                let values = self.identifier_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                values
            }
            (Token::ClosedPar, _) => {
                self.consume(Context::Values);
                vec![String::new()]
            }
            (_, literal) => {
                return Err(format!(
                    "found '{literal}', expected: ',', ')' or identifier"
                ));
            }
        };
        values.sort();
        values.dedup();
        Ok(values)
    }

    fn identifier_list(&mut self) -> Result<Vec<String>, String> {
        let mut values = Vec::new();
        loop {
            match self.consume(Context::Values) {
                (Token::Identifier, literal) => {
                    values.push(literal.to_string());
                    match self.lookahead(Context::Values) {
                        (Token::Comma, _) => continue,
                        (Token::ClosedPar, _) => return Ok(values),
                        (_, next) => return Err(format!("found '{next}', expected: ',' or ')'")),
                    }
                }
                (Token::Comma, _) => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.push(String::new());
                        }
                        _ => {}
                    }
                }
                (_, literal) => {
                    return Err(format!("found '{literal}', expected: ',', or identifier"));
                }
            }
        }
    }

    /// The single value after `=`, `==`, `!=`, `>` or `<`; nothing means "".
    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(Context::Values).0, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Token::Identifier, literal) => Ok(vec![literal.to_string()]),
            (_, literal) => Err(format!("found '{literal}', expected: identifier")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse_err(s: &str) -> String {
        LabelSelector::parse(s)
            .map(|s| s.to_string())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_and_prints_canonically() {
        let cases = [
            ("", ""),
            ("x=a", "x=a"),
            ("x==a", "x==a"),
            ("x!=a", "x!=a"),
            ("  x = a ,y=b", "x=a,y=b"),
            ("z=a,x=b", "x=b,z=a"),
            ("x in (b,a,a)", "x in (a,b)"),
            ("x notin (a)", "x notin (a)"),
            ("x", "x"),
            ("!x", "!x"),
            ("x>1", "x>1"),
            ("x<1", "x<1"),
            ("x=", "x="),
            ("x=,y=b", "x=,y=b"),
            ("x in ()", "x in ()"),
            ("x in (,a)", "x in (,a)"),
            ("x in (a,)", "x in (,a)"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in (in,notin)", "x in (in,notin)"),
            ("in=notin", "in=notin"),
            ("example.com/key in (a)", "example.com/key in (a)"),
            ("a=b\0junk", "a=b"),
        ];
        for (input, canonical) in cases {
            match LabelSelector::parse(input) {
                Ok(selector) => assert_eq!(selector.to_string(), canonical, "{input:?}"),
                Err(e) => panic!("{input:?}: {e}"),
            }
        }
    }

    #[test]
    fn parse_errors_match_kubernetes() {
        assert_eq!(
            parse_err("x=a,"),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            parse_err(",x"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("x=a b"),
            "found 'b', expected: ',' or 'end of string'"
        );
        assert_eq!(
            parse_err("x in a"),
            "unable to parse requirement: found 'a' expected: '('"
        );
        assert_eq!(
            parse_err("x in (a"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("x in (a b)"),
            "unable to parse requirement: found 'b', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("x in (=)"),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
        assert_eq!(
            parse_err("x in (,=)"),
            "unable to parse requirement: found '=', expected: ',', or identifier"
        );
        assert_eq!(
            parse_err("x y"),
            "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            parse_err("x=("),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            parse_err("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert!(
            parse_err("x<-1")
                .starts_with("unable to parse requirement: values[0][x]: Invalid value: \"-1\"")
        );
        assert_eq!(
            parse_err("x>a"),
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            parse_err("a b=c"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            parse_err("x=-bad"),
            "unable to parse requirement: values[0][x]: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert!(parse_err("-x=a").starts_with(
            "unable to parse requirement: <nil>: Invalid value: \"-x\": name part must consist"
        ));
    }

    #[test]
    fn matching() {
        let web = labels(&[("app", "web"), ("tier", "front"), ("replicas", "3")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (db,web)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("missing in (web)", false),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("replicas>2", true),
            ("replicas>3", false),
            ("replicas<4", true),
            ("app>1", false),
            ("missing<1", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&web), expected, "{selector}");
        }
        assert!(
            LabelSelector::parse("x=")
                .unwrap()
                .matches(&labels(&[("x", "")]))
        );
        assert!(!LabelSelector::parse("x=").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn from_json_objects() {
        let selector = LabelSelector::from_json(&json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "c", "operator": "In", "values": ["y", "x"]},
                {"key": "d", "operator": "NotIn", "values": ["z"]},
                {"key": "e", "operator": "Exists"},
                {"key": "f", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert_eq!(selector.to_string(), "a=1,b=2,c in (x,y),d notin (z),e,!f");
        assert!(selector.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "x"), ("e", "")])));
        assert!(!selector.matches(&labels(&[
            ("a", "1"),
            ("b", "2"),
            ("c", "x"),
            ("e", ""),
            ("f", "")
        ])));
        assert_eq!(selector.requirements().len(), 6);
        assert_eq!(selector.requirements()[2].operator(), Operator::In);
        assert_eq!(selector.requirements()[2].key(), "c");
        assert_eq!(selector.requirements()[2].values(), ["y", "x"]);

        let everything = LabelSelector::from_json(&json!({})).unwrap();
        assert!(everything.is_empty() && everything.matches(&labels(&[])));
        let nothing = LabelSelector::from_json(&Value::Null).unwrap();
        assert!(!nothing.is_empty() && !nothing.matches(&labels(&[])));
        assert_eq!(LabelSelector::nothing(), nothing);
        assert_eq!(LabelSelector::everything(), everything);
    }

    #[test]
    fn from_json_errors() {
        let bad_op = LabelSelector::from_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]}),
        );
        assert_eq!(
            bad_op.unwrap_err().to_string(),
            "\"Gt\" is not a valid label selector operator"
        );
        let empty_in = LabelSelector::from_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
        );
        assert_eq!(
            empty_in.unwrap_err().to_string(),
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
        );
        let exists_values = LabelSelector::from_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        );
        assert_eq!(
            exists_values.unwrap_err().to_string(),
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist"
        );
        let bad_key = LabelSelector::from_json(&json!({"matchLabels": {"a b": "x"}}));
        assert!(
            bad_key
                .unwrap_err()
                .to_string()
                .starts_with("key: Invalid value: \"a b\": name part must")
        );
        assert!(LabelSelector::from_json(&json!("x")).is_err());
        let two =
            Requirement::new("a", Operator::Equals, vec!["x".into(), "y".into()]).unwrap_err();
        assert_eq!(
            two.to_string(),
            "values: Invalid value: []string{\"x\", \"y\"}: exact-match compatibility requires one single value"
        );
    }
}
