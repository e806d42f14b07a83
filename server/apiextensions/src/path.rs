//! Field paths as Kubernetes prints them (`spec.items[0]`, `metadata.labels[app]`).
//!
//! Every error this crate reports names the offending field; building the text in one place keeps
//! the three separators (child, index, key) identical across CRD admission and object validation.

/// `parent.name`, or `name` at the root.
pub(crate) fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `parent[i]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// `parent[key]`, Kubernetes' rendering of a map key.
pub(crate) fn key(parent: &str, key: &str) -> String {
    format!("{parent}[{key}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_field_path() {
        assert_eq!(child("", "spec"), "spec");
        assert_eq!(child("spec", "replicas"), "spec.replicas");
        assert_eq!(index("spec.items", 2), "spec.items[2]");
        assert_eq!(key("properties", "spec"), "properties[spec]");
    }
}
