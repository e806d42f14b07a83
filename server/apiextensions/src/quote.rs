//! Go's `%q`, which Kubernetes messages use for values and paths (`unknown field "spec.foo"`).
//!
//! JSON string quoting matches `%q` for everything but control and non-printable characters; the
//! exact Go rendering lives privately in kcp-apimachinery and is not needed for field names.

/// `s` in double quotes with `"` and `\` escaped.
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_like_go() {
        assert_eq!(super::quote("spec.foo"), "\"spec.foo\"");
        assert_eq!(super::quote("a\"b"), "\"a\\\"b\"");
    }
}
