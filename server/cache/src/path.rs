//! What a cache server path names, upstream's layout:
//! `/services/cache/shards/<shard|*>/clusters/<cluster|*>/api/v1/...` and
//! `.../apis/<group>/<version>/...`, then `[namespaces/<ns>/]<resource>[/<name>]`.
//!
//! Upstream's `WithShardScope` takes the shard (`*` or a name matching `^[a-z0-9-:]{0,61}$`, a
//! missing one is a 400) and its cluster filter the logical cluster; the rest is a Kubernetes
//! resource path. Subresources and discovery are not served (404).

use kcp_apimachinery::{ApiError, StatusReason};
use kcp_registry::LogicalClusterName;

/// The name the cache is mounted under in a shard (`/services/<name>/`).
pub const SERVICE_NAME: &str = "cache";

/// Every cache path starts with this.
pub const SERVICE_PREFIX: &str = "/services/cache";

/// One shard or all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shard {
    Named(String),
    Wildcard,
}

/// One logical cluster or all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cluster {
    Named(LogicalClusterName),
    Wildcard,
}

/// A resource path of the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePath {
    pub shard: Shard,
    pub cluster: Cluster,
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

fn not_found() -> ApiError {
    ApiError {
        code: 404,
        reason: StatusReason::NotFound,
        message: "the server could not find the requested resource".into(),
        details: None,
    }
}

/// Upstream's shard name rule (`shardNameRegExp`).
fn valid_shard_name(name: &str) -> bool {
    name.len() <= 61
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b':')
}

/// A path segment that must be a plain name (no empty segment).
fn segment<'a>(segments: &mut std::str::Split<'a, char>, what: &str) -> Result<&'a str, ApiError> {
    match segments.next() {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(ApiError::bad_request(&format!("a {what} is required"))),
    }
}

impl CachePath {
    /// Parses a percent-decoded path, `/services/cache` included.
    pub fn parse(path: &str) -> Result<CachePath, ApiError> {
        let rest = path.strip_prefix(SERVICE_PREFIX).ok_or_else(not_found)?;
        let Some(rest) = rest.strip_prefix("/shards/") else {
            return Err(ApiError::bad_request("a shard name is required"));
        };
        let mut segments = rest.split('/');
        let shard = match segment(&mut segments, "shard name")? {
            "*" => Shard::Wildcard,
            name if valid_shard_name(name) => Shard::Named(name.to_owned()),
            name => {
                return Err(ApiError::bad_request(&format!(
                    "invalid shard: {name:?} does not match the regex"
                )));
            }
        };
        if segments.next() != Some("clusters") {
            return Err(ApiError::bad_request("a logical cluster name is required"));
        }
        let cluster = match segment(&mut segments, "logical cluster name")? {
            "*" => Cluster::Wildcard,
            name => Cluster::Named(LogicalClusterName::parse(name).ok_or_else(|| {
                ApiError::bad_request(&format!("invalid logical cluster name {name:?}"))
            })?),
        };
        let (group, version) = match segments.next() {
            Some("api") => (
                String::new(),
                segments.next().unwrap_or_default().to_owned(),
            ),
            Some("apis") => (
                segments.next().unwrap_or_default().to_owned(),
                segments.next().unwrap_or_default().to_owned(),
            ),
            _ => return Err(not_found()),
        };
        let parts: Vec<&str> = segments.collect();
        if group.is_empty() && version != "v1"
            || version.is_empty()
            || parts.iter().any(|p| p.is_empty())
        {
            return Err(not_found());
        }
        let (namespace, resource, name) = match parts.as_slice() {
            ["namespaces", ns, resource] => (Some(*ns), *resource, None),
            ["namespaces", ns, resource, name] => (Some(*ns), *resource, Some(*name)),
            [resource] => (None, *resource, None),
            [resource, name] => (None, *resource, Some(*name)),
            _ => return Err(not_found()),
        };
        Ok(CachePath {
            shard,
            cluster,
            group,
            version,
            resource: resource.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
        })
    }

    /// `<group>/<version>`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The one shard and logical cluster a get or a write needs (400 for a wildcard).
    pub fn exact(&self) -> Result<(&str, &LogicalClusterName), ApiError> {
        match (&self.shard, &self.cluster) {
            (Shard::Named(shard), Cluster::Named(cluster)) => Ok((shard, cluster)),
            _ => Err(ApiError::bad_request(
                "a wildcard shard or logical cluster is only allowed for list and watch",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(path: &str) -> Result<CachePath, u16> {
        CachePath::parse(path).map_err(|e| e.code)
    }

    #[test]
    fn names_every_part() {
        let p = parse("/services/cache/shards/amber/clusters/abc/apis/tenancy.kcp.io/v1alpha1/workspacetypes/universal").unwrap();
        assert_eq!(p.shard, Shard::Named("amber".into()));
        assert_eq!(
            p.cluster,
            Cluster::Named(LogicalClusterName::parse("abc").unwrap())
        );
        assert_eq!(p.api_version(), "tenancy.kcp.io/v1alpha1");
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref()),
            ("workspacetypes", Some("universal"))
        );
        let p = parse("/services/cache/shards/*/clusters/*/api/v1/namespaces/default/configmaps")
            .unwrap();
        assert_eq!(
            (&p.shard, &p.cluster),
            (&Shard::Wildcard, &Cluster::Wildcard)
        );
        assert_eq!(
            (p.namespace.as_deref(), p.name.as_deref()),
            (Some("default"), None)
        );
        assert_eq!(p.group, "");
        assert_eq!(p.api_version(), "v1");
    }

    #[test]
    fn bad_paths_are_400_or_404() {
        assert_eq!(
            parse("/services/cache/clusters/a/api/v1/configmaps"),
            Err(400)
        );
        assert_eq!(
            parse("/services/cache/shards/Amber/clusters/a/api/v1/configmaps"),
            Err(400)
        );
        assert_eq!(
            parse("/services/cache/shards/a/api/v1/configmaps"),
            Err(400)
        );
        assert_eq!(
            parse("/services/cache/shards/a/clusters/Not_Valid/api/v1/configmaps"),
            Err(400)
        );
        assert_eq!(
            parse("/services/cache/shards/a/clusters/b/api/v1"),
            Err(404)
        );
        assert_eq!(
            parse("/services/cache/shards/a/clusters/b/api/v2/configmaps"),
            Err(404)
        );
        assert_eq!(
            parse("/services/cache/shards/a/clusters/b/apis/g/v1/r/n/status"),
            Err(404)
        );
        assert_eq!(
            parse("/services/cache/shards/a/clusters/b/version"),
            Err(404)
        );
        assert_eq!(parse("/other"), Err(404));
    }
}
