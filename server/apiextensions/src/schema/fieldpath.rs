//! Simple JSON paths into a schema (`.spec.replicas`, `.metadata['name']`).
//!
//! Rule `fieldPath`s, `selectableFields` and scale-subresource paths all name one field of the
//! object with this small grammar; resolving them against the schema once, at CRD admission,
//! rejects typos there instead of at request time.

use crate::quote::quote;
use crate::schema::node::{Additional, Node};

/// A resolved path: its segments and the schema of the field it names.
pub(crate) struct Resolved<'a> {
    pub segments: Vec<String>,
    pub node: &'a Node,
}

impl Resolved<'_> {
    /// Kubernetes' field-path rendering of the segments (`spec.replicas`).
    pub fn field_path(&self) -> String {
        self.segments.join(".")
    }
}

/// Splits `path` into field names; `brackets` allows `['name']` segments.
pub(crate) fn segments(path: &str, brackets: bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = path.trim();
    if rest.is_empty() {
        return Err("must not be empty".to_string());
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() {
                return Err(format!("expected a field name at {}", quote(rest)));
            }
            out.push(name.to_string());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['")
            && brackets
        {
            let end = after
                .find("']")
                .ok_or_else(|| format!("unterminated string in {}", quote(path)))?;
            out.push(after[..end].replace("\\'", "'"));
            rest = &after[end + 2..];
        } else {
            return Err(format!("expected [ or . at {}", quote(rest)));
        }
    }
    Ok(out)
}

/// Resolves `path` from `root`; each segment must be a declared property or a map key.
pub(crate) fn resolve<'a>(
    root: &'a Node,
    path: &str,
    brackets: bool,
) -> Result<Resolved<'a>, String> {
    let segments = segments(path, brackets)?;
    let mut node = root;
    for segment in &segments {
        node = match node.property(segment) {
            Some(prop) => prop,
            None => match &node.additional {
                Additional::Schema(schema) => schema,
                _ => {
                    return Err(format!(
                        "does not refer to a valid field: {}",
                        quote(segment)
                    ));
                }
            },
        };
    }
    Ok(Resolved { segments, node })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_dots_and_brackets() {
        assert_eq!(
            segments(".spec.replicas", false).unwrap(),
            ["spec", "replicas"]
        );
        assert_eq!(
            segments(".metadata['a.b']", true).unwrap(),
            ["metadata", "a.b"]
        );
        assert!(segments(".metadata['a.b']", false).is_err());
        assert!(segments("spec", false).is_err());
        assert!(segments("", false).is_err());
        assert!(segments(".a..b", false).is_err());
    }
}
