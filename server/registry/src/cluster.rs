//! Logical-cluster names: the one type every layer shares, from storage keys to URLs.
//!
//! A logical cluster is kcp's unit of tenancy (upstream's `logicalcluster.Name`): its name is part
//! of every storage key and of the `/clusters/<name>` URL prefix. `*` is not a name but a target:
//! every logical cluster at once, which only list and watch may address.

use std::fmt;

/// The name of a logical cluster, validated: `root`, a generated or chosen DNS-label-like name, or a
/// `system:` name (e.g. `system:admin`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogicalClusterName(String);

impl LogicalClusterName {
    /// The root logical cluster, which exists from the start.
    pub fn root() -> Self {
        Self("root".to_string())
    }

    /// Checks a name as it appears in a URL or a storage key.
    pub fn parse(name: &str) -> Option<Self> {
        let local = name.strip_prefix("system:").unwrap_or(name);
        let valid = !local.is_empty()
            && local.len() <= 63
            && local
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !local.starts_with('-')
            && !local.ends_with('-');
        valid.then(|| Self(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LogicalClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which logical cluster(s) a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterTarget {
    One(LogicalClusterName),
    /// `/clusters/*`: every logical cluster of this shard.
    Wildcard,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_upstream_rules() {
        for good in ["root", "abc", "2x9f-k", "system:admin"] {
            assert_eq!(
                LogicalClusterName::parse(good)
                    .map(|n| n.to_string())
                    .as_deref(),
                Some(good)
            );
        }
        for bad in [
            "",
            "Bad",
            "a_b",
            "-a",
            "a-",
            "system:",
            &"a".repeat(64),
            "root:org",
        ] {
            assert_eq!(LogicalClusterName::parse(bad), None, "{bad:?}");
        }
    }
}
