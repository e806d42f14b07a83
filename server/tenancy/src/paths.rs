//! Logical cluster paths: `root`, `root:org:team`, a bare logical cluster name, or a home path
//! `user:<name>`.
//!
//! Every request names its logical cluster by a path (`/clusters/<path>/...`), workspace types are
//! referenced as `<path>:<name>`, and the canonical path of a cluster is stored in its
//! `kcp.io/path` annotation. The grammar is upstream's `logicalcluster.Path`: colon-separated
//! segments, each a DNS-1123 label (`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:…)*$`). Names of shard
//! system clusters (`system:admin`) contain a colon yet are names, not paths with a parent.

use std::fmt;
use std::str::FromStr;

use kcp_apimachinery::gofmt::quote;
use kcp_apimachinery::validation::is_dns1123_label;

use crate::names;

/// The separator between segments.
pub const SEPARATOR: char = ':';
/// The path (and logical cluster name) of the root workspace.
pub const ROOT: &str = "root";
/// The path addressing every logical cluster at once (list and watch only).
pub const WILDCARD: &str = "*";
/// The first segment of a home workspace path, `user:<username>`.
pub const HOME_PREFIX: &str = "user";
/// The prefix of shard-local system logical clusters (`system:admin`, `system:shard`).
pub const SYSTEM_PREFIX: &str = "system:";

/// Why a string is not a usable path. The messages are those upstream's request filters answer
/// with (400 Bad Request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("invalid cluster: {} does not match the regex", quote(.0))]
    Invalid(String),
    #[error("invalid cluster: {} is not a logical cluster name", quote(.0))]
    NotAName(String),
    #[error("invalid path segment {}: {}", quote(.segment), .errors.join(", "))]
    InvalidSegment {
        segment: String,
        errors: Vec<String>,
    },
}

/// A valid path (never the wildcard).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(String);

impl Path {
    /// Parses `value` with upstream's regular expression.
    pub fn parse(value: &str) -> Result<Path, PathError> {
        if value.split(SEPARATOR).all(is_valid_segment) {
            Ok(Path(value.to_string()))
        } else {
            Err(PathError::Invalid(value.to_string()))
        }
    }

    /// The root workspace's path.
    pub fn root() -> Path {
        Path(ROOT.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0 == ROOT
    }

    /// Whether this is a shard-local system cluster name (`system:admin`).
    pub fn is_system(&self) -> bool {
        self.0.starts_with(SYSTEM_PREFIX)
    }

    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split(SEPARATOR)
    }

    /// All segments but the last; `None` for a single segment and for system names.
    pub fn parent(&self) -> Option<Path> {
        if self.is_system() {
            return None;
        }
        let (parent, _) = self.0.rsplit_once(SEPARATOR)?;
        Some(Path(parent.to_string()))
    }

    /// The last segment (the workspace name); empty for system names, as upstream's `Base`.
    pub fn base(&self) -> &str {
        if self.is_system() {
            return "";
        }
        self.0
            .rsplit_once(SEPARATOR)
            .map_or(self.0.as_str(), |(_, base)| base)
    }

    /// The path of a child workspace named `segment`.
    pub fn join(&self, segment: &str) -> Result<Path, PathError> {
        let errors = is_dns1123_label(segment);
        if !errors.is_empty() {
            return Err(PathError::InvalidSegment {
                segment: segment.to_string(),
                errors,
            });
        }
        Ok(Path(format!("{}{SEPARATOR}{segment}", self.0)))
    }

    /// The logical cluster name this path denotes by itself: a single segment or a system name;
    /// deeper paths must be resolved through workspaces.
    pub fn cluster_name(&self) -> Result<&str, PathError> {
        if self.is_system() || !self.0.contains(SEPARATOR) {
            Ok(&self.0)
        } else {
            Err(PathError::NotAName(self.0.clone()))
        }
    }

    /// Whether `other` is this path or one of its ancestors.
    pub fn has_prefix(&self, other: &Path) -> bool {
        self.0 == other.0
            || self
                .0
                .strip_prefix(other.0.as_str())
                .is_some_and(|rest| rest.starts_with(SEPARATOR))
    }

    /// The URL path serving this cluster, `/clusters/<path>`.
    pub fn request_path(&self) -> String {
        format!("/clusters/{}", self.0)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Path {
    type Err = PathError;

    fn from_str(value: &str) -> Result<Path, PathError> {
        Path::parse(value)
    }
}

/// Whether `segment` matches `[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?`.
pub fn is_valid_segment(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && alnum(first)
                && alnum(last)
                && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// The path a user's home workspace is known by, `user:<username>` (stored in `kcp.io/path`).
pub fn home_path(username: &str) -> String {
    format!("{HOME_PREFIX}{SEPARATOR}{username}")
}

/// Upstream's user rewriter: `user:<name>[:rest]` becomes `<home cluster of name>[:rest]`, which
/// then resolves like any path; other paths are returned unchanged.
pub fn rewrite_home(path: &str) -> String {
    let mut segments = path.split(SEPARATOR);
    match (segments.next(), segments.next()) {
        (Some(HOME_PREFIX), Some(user)) => {
            let mut rewritten = names::home_cluster_name(user);
            for rest in segments {
                rewritten.push(SEPARATOR);
                rewritten.push_str(rest);
            }
            rewritten
        }
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_grammar() {
        for valid in [
            "root",
            "root:org:team",
            "2cynbfy2m0wtjqcs",
            "a",
            "system:admin",
            "a-b:c1",
        ] {
            assert!(Path::parse(valid).is_ok(), "{valid}");
        }
        for invalid in [
            "", "Root", "root:", ":root", "root::a", "-a", "a-", "a_b", "*", "root:*",
        ] {
            assert_eq!(
                Path::parse(invalid),
                Err(PathError::Invalid(invalid.to_string())),
                "{invalid}"
            );
        }
        let long = "a".repeat(64);
        assert!(Path::parse(&long).is_err());
        assert!(Path::parse(&"a".repeat(63)).is_ok());
        assert_eq!(
            Path::parse("root:Org").unwrap_err().to_string(),
            r#"invalid cluster: "root:Org" does not match the regex"#
        );
    }

    #[test]
    fn parent_base_and_join() {
        let path: Path = "root:org:team".parse().unwrap();
        assert_eq!(path.parent().unwrap().as_str(), "root:org");
        assert_eq!(path.base(), "team");
        assert_eq!(Path::root().parent(), None);
        assert_eq!(Path::root().base(), "root");
        assert!(Path::root().is_root());
        assert!(!path.is_root());
        assert_eq!(Path::root().join("org").unwrap().as_str(), "root:org");
        let err = Path::root().join("Org").unwrap_err();
        assert!(matches!(err, PathError::InvalidSegment { .. }));
        assert!(
            err.to_string()
                .starts_with(r#"invalid path segment "Org": "#)
        );
        assert_eq!(path.segments().collect::<Vec<_>>(), ["root", "org", "team"]);
    }

    #[test]
    fn system_names_have_no_parent() {
        let system = Path::parse("system:admin").unwrap();
        assert!(system.is_system());
        assert_eq!(system.parent(), None);
        assert_eq!(system.base(), "");
        assert_eq!(system.cluster_name(), Ok("system:admin"));
    }

    #[test]
    fn only_single_segments_are_names() {
        assert_eq!(Path::root().cluster_name(), Ok("root"));
        assert_eq!(
            Path::parse("root:org")
                .unwrap()
                .cluster_name()
                .unwrap_err()
                .to_string(),
            r#"invalid cluster: "root:org" is not a logical cluster name"#
        );
    }

    #[test]
    fn prefixes_follow_segments() {
        let team = Path::parse("root:org:team").unwrap();
        assert!(team.has_prefix(&Path::parse("root:org").unwrap()));
        assert!(team.has_prefix(&team));
        assert!(!team.has_prefix(&Path::parse("root:or").unwrap()));
        assert_eq!(team.request_path(), "/clusters/root:org:team");
    }

    #[test]
    fn home_paths_rewrite_to_home_clusters() {
        assert_eq!(home_path("alice"), "user:alice");
        let home = names::home_cluster_name("alice");
        assert_eq!(rewrite_home("user:alice"), home);
        assert_eq!(
            rewrite_home("user:alice:project"),
            format!("{home}:project")
        );
        assert_eq!(rewrite_home("user"), "user");
        assert_eq!(rewrite_home("root:user:alice"), "root:user:alice");
    }
}
