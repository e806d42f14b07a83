//! The `/clusters/<name>` prefix kcp puts in front of every Kubernetes path.
//!
//! Requests without the prefix go to `root`, so a plain Kubernetes client pointed at the server's base
//! URL talks to the root logical cluster. `*` selects every logical cluster at once and is only good for
//! list and watch (checked by the caller, which knows the verb).

use kcp_registry::{ClusterTarget, LogicalClusterName};

/// Why a cluster prefix was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterPathError {
    #[error("missing logical cluster name after /clusters/")]
    Missing,
    /// A workspace path no workspace has, or a nested `/clusters/`.
    #[error("logical cluster {0:?} not found")]
    NotFound(String),
    #[error("invalid logical cluster name {0:?}")]
    Invalid(String),
}

/// Splits `/clusters/<name>/rest` into the target and `/rest`; paths without the prefix address `root`.
///
/// Workspace paths (`root:org:team`, `user:alice`) go through `resolve`, which knows the
/// workspaces; plain names (and `system:` names) address their logical cluster directly.
pub fn split_cluster(
    path: &str,
    resolve: impl Fn(&str) -> Result<LogicalClusterName, ClusterPathError>,
) -> Result<(ClusterTarget, &str), ClusterPathError> {
    let Some(after) = path.strip_prefix("/clusters/") else {
        if path == "/clusters" {
            return Err(ClusterPathError::Missing);
        }
        return Ok((ClusterTarget::One(LogicalClusterName::root()), path));
    };
    let (name, rest) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, ""),
    };
    let target = match name {
        "" => return Err(ClusterPathError::Missing),
        "*" => ClusterTarget::Wildcard,
        _ => match LogicalClusterName::parse(name) {
            Some(name) => ClusterTarget::One(name),
            None if name.contains(':') => ClusterTarget::One(resolve(name)?),
            None => return Err(ClusterPathError::Invalid(name.to_string())),
        },
    };
    if rest.starts_with("/clusters/") || rest == "/clusters" {
        // `/clusters/a/clusters/b` is not a nesting, it is a mistake (upstream answers 404 too).
        return Err(ClusterPathError::NotFound(rest.to_string()));
    }
    Ok((target, if rest.is_empty() { "/" } else { rest }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str) -> ClusterTarget {
        ClusterTarget::One(LogicalClusterName::parse(name).unwrap())
    }

    /// Knows one workspace, `root:org` (logical cluster `abc`).
    fn split_cluster(path: &str) -> Result<(ClusterTarget, &str), ClusterPathError> {
        super::split_cluster(path, |p| match p {
            "root:org" => Ok(LogicalClusterName::parse("abc").unwrap()),
            other => Err(ClusterPathError::NotFound(other.to_string())),
        })
    }

    #[test]
    fn splits_prefix() {
        assert_eq!(split_cluster("/api/v1").unwrap(), (one("root"), "/api/v1"));
        assert_eq!(
            split_cluster("/clusters/abc/api/v1").unwrap(),
            (one("abc"), "/api/v1")
        );
        assert_eq!(split_cluster("/clusters/abc").unwrap(), (one("abc"), "/"));
        assert_eq!(
            split_cluster("/clusters/system:admin/api").unwrap(),
            (one("system:admin"), "/api")
        );
        assert_eq!(
            split_cluster("/clusters/*/api/v1/configmaps").unwrap().0,
            ClusterTarget::Wildcard
        );
    }

    #[test]
    fn rejects_bad_prefixes() {
        assert_eq!(split_cluster("/clusters/"), Err(ClusterPathError::Missing));
        assert_eq!(split_cluster("/clusters"), Err(ClusterPathError::Missing));
        assert!(matches!(
            split_cluster("/clusters/Bad_Name/api"),
            Err(ClusterPathError::Invalid(_))
        ));
        assert_eq!(
            split_cluster("/clusters/root:org/api").unwrap(),
            (one("abc"), "/api")
        );
        assert!(matches!(
            split_cluster("/clusters/root:nope/api"),
            Err(ClusterPathError::NotFound(_))
        ));
        assert!(matches!(
            split_cluster("/clusters/a/clusters/a/api"),
            Err(ClusterPathError::NotFound(_))
        ));
    }
}
