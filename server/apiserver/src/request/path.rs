//! Percent-decoding of request paths.
//!
//! Go's HTTP server hands kube-apiserver decoded paths, and clients rely on that: kubectl sends the
//! wildcard cluster as `/clusters/%2A/...`. Everything after this point works on the decoded path.

/// A request's percent-decoded path, or kube's 400 for one that is not valid UTF-8.
pub fn decoded(path: &str) -> Result<String, kcp_apimachinery::ApiError> {
    percent_decode(path).ok_or_else(|| {
        kcp_apimachinery::ApiError::bad_request(
            "the request path is not valid percent-encoded UTF-8",
        )
    })
}

/// Decodes `%XX` escapes; `None` for a malformed escape or a result that is not UTF-8.
pub fn percent_decode(path: &str) -> Option<String> {
    if !path.contains('%') {
        return Some(path.to_string());
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let value = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            out.push(value);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes() {
        assert_eq!(
            percent_decode("/clusters/%2A/api").as_deref(),
            Some("/clusters/*/api")
        );
        assert_eq!(
            percent_decode("/api/v1/namespaces").as_deref(),
            Some("/api/v1/namespaces")
        );
        assert_eq!(percent_decode("/a%3ab").as_deref(), Some("/a:b"));
        assert_eq!(percent_decode("/bad%2"), None);
        assert_eq!(percent_decode("/bad%zz"), None);
        assert_eq!(percent_decode("/bad%ff"), None);
    }
}
