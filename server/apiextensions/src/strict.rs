//! Server-side field validation (`fieldValidation=Ignore|Warn|Strict`).
//!
//! JSON decoding keeps the last of duplicated keys and pruning drops unknown fields, both silently;
//! `kubectl apply --validate=strict` relies on the server to report them instead. Unknown fields
//! come from [`StructuralSchema::prune`](crate::StructuralSchema::prune), duplicates from the raw
//! body here, and both are worded as kube-apiserver words them.

use kcp_apimachinery::ApiError;

use crate::path;
use crate::quote::quote;

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// Paths of keys that appear more than once in the same object of `raw_json` (`spec.replicas`,
/// `spec.items[1].name`), in document order. Malformed input yields what was found before it.
pub fn find_duplicate_fields(raw_json: &[u8]) -> Vec<String> {
    let mut scanner = Scanner {
        bytes: raw_json,
        pos: 0,
        duplicates: Vec::new(),
    };
    scanner.value("");
    scanner.duplicates
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    duplicates: Vec<String>,
}

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self
            .bytes
            .get(self.pos)
            .is_some_and(u8::is_ascii_whitespace)
        {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    /// Scans one value at `at`; false on malformed input.
    fn value(&mut self, at: &str) -> bool {
        match self.peek() {
            Some(b'{') => self.object(at),
            Some(b'[') => self.array(at),
            Some(b'"') => self.string().is_some(),
            Some(_) => {
                while self
                    .bytes
                    .get(self.pos)
                    .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
                {
                    self.pos += 1;
                }
                true
            }
            None => false,
        }
    }

    fn string(&mut self) -> Option<String> {
        let start = self.pos;
        self.pos += 1;
        while let Some(&b) = self.bytes.get(self.pos) {
            self.pos += 1;
            match b {
                b'\\' => self.pos += 1,
                b'"' => {
                    return serde_json::from_slice::<String>(&self.bytes[start..self.pos]).ok();
                }
                _ => {}
            }
        }
        None
    }

    fn object(&mut self, at: &str) -> bool {
        self.pos += 1;
        let mut seen: Vec<String> = Vec::new();
        loop {
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return true;
                }
                Some(b',') => self.pos += 1,
                Some(b'"') => {
                    let Some(key) = self.string() else {
                        return false;
                    };
                    let child = path::child(at, &key);
                    if seen.contains(&key) {
                        if !self.duplicates.contains(&child) {
                            self.duplicates.push(child.clone());
                        }
                    } else {
                        seen.push(key);
                    }
                    if self.peek() != Some(b':') {
                        return false;
                    }
                    self.pos += 1;
                    if !self.value(&child) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }

    fn array(&mut self, at: &str) -> bool {
        self.pos += 1;
        let mut i = 0;
        loop {
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return true;
                }
                Some(b',') => self.pos += 1,
                Some(_) => {
                    if !self.value(&path::index(at, i)) {
                        return false;
                    }
                    i += 1;
                }
                None => return false,
            }
        }
    }
}

/// `unknown field "…"` for each pruned path, then `duplicate field "…"` for each duplicate.
pub fn field_messages(unknown: &[String], duplicates: &[String]) -> Vec<String> {
    unknown
        .iter()
        .map(|p| format!("unknown field {}", quote(p)))
        .chain(
            duplicates
                .iter()
                .map(|p| format!("duplicate field {}", quote(p))),
        )
        .collect()
}

/// Applies `mode` to the problems found: `Ignore` and a clean body pass with no warnings, `Warn`
/// returns one warning per problem (for `Warning: 299` headers), `Strict` fails with 400
/// `strict decoding error: …`.
pub fn check(
    mode: FieldValidation,
    unknown: &[String],
    duplicates: &[String],
) -> Result<Vec<String>, ApiError> {
    let messages = field_messages(unknown, duplicates);
    match mode {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(messages),
        FieldValidation::Strict if messages.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::bad_request(&format!(
            "strict decoding error: {}",
            messages.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_duplicate_keys_with_paths() {
        let raw = br#"{"spec": {"replicas": 1, "replicas": 2, "items": [{"a": 1}, {"a": 1, "a": 2}]}, "spec": {}}"#;
        assert_eq!(
            find_duplicate_fields(raw),
            ["spec.replicas", "spec.items[1].a", "spec"]
        );
    }

    #[test]
    fn no_duplicates_in_clean_json() {
        assert!(
            find_duplicate_fields(br#"{"a": [1, "x\"y", {"b": null}], "c": {"a": 1}}"#).is_empty()
        );
    }

    #[test]
    fn escaped_keys_are_compared_decoded() {
        assert_eq!(find_duplicate_fields(br#"{"a\u0062": 1, "ab": 2}"#), ["ab"]);
    }

    #[test]
    fn malformed_input_stops_quietly() {
        assert!(find_duplicate_fields(b"{\"a\": ").is_empty());
    }

    #[test]
    fn messages_read_like_kubernetes() {
        let unknown = vec!["spec.foo".to_string()];
        let dups = vec!["spec.replicas".to_string()];
        assert_eq!(
            field_messages(&unknown, &dups),
            [
                "unknown field \"spec.foo\"",
                "duplicate field \"spec.replicas\""
            ]
        );
    }

    #[test]
    fn strict_fails_with_bad_request() {
        let unknown = vec!["spec.foo".to_string()];
        let dups = vec!["x".to_string()];
        let err = check(FieldValidation::Strict, &unknown, &dups).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "strict decoding error: unknown field \"spec.foo\", duplicate field \"x\""
        );
    }

    #[test]
    fn warn_returns_warnings_and_ignore_nothing() {
        let unknown = vec!["spec.foo".to_string()];
        assert_eq!(
            check(FieldValidation::Warn, &unknown, &[]).unwrap(),
            ["unknown field \"spec.foo\""]
        );
        assert!(
            check(FieldValidation::Ignore, &unknown, &[])
                .unwrap()
                .is_empty()
        );
        assert!(check(FieldValidation::Strict, &[], &[]).unwrap().is_empty());
    }
}
