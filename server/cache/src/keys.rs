//! Where the cache keeps objects: `<prefix>/<group>/<resource>/<shard>/<cluster>/[<ns>/]<name>`
//! (`core` for the legacy group), upstream's cache key layout with the shard between the resource
//! and the logical cluster. The key is the truth about where an object comes from: reads carry
//! `kcp.io/shard` and `kcp.io/cluster` from it, and writes drop whatever the body said
//! ([`ShardAndCluster`], through kcp-registry's [`KeyAnnotations`]).

use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, KeyAnnotations};

use crate::path::{CachePath, Cluster, Shard};

/// The annotation naming the shard an object was written for (upstream `shard.AnnotationKey`).
pub const SHARD_ANNOTATION: &str = "kcp.io/shard";

/// The cache's storage prefix when `--etcd-prefix` is not given.
pub const DEFAULT_PREFIX: &str = "/cache";

/// `kcp.io/shard` and `kcp.io/cluster` from a key relative to the prefix.
pub struct ShardAndCluster;

impl KeyAnnotations for ShardAndCluster {
    fn names(&self) -> &'static [&'static str] {
        &[SHARD_ANNOTATION, CLUSTER_ANNOTATION]
    }

    fn annotate(&self, relative_key: &str, set: &mut dyn FnMut(&'static str, &str)) {
        let mut segments = relative_key.split('/').skip(2);
        if let (Some(shard), Some(cluster)) = (segments.next(), segments.next()) {
            set(SHARD_ANNOTATION, shard);
            set(CLUSTER_ANNOTATION, cluster);
        }
    }
}

/// `<prefix>/<group|core>/<resource>/`: every object of a resource.
fn resource_root(prefix: &str, path: &CachePath) -> String {
    let group = if path.group.is_empty() {
        "core"
    } else {
        &path.group
    };
    format!(
        "{}/{group}/{}/",
        prefix.trim_end_matches('/'),
        path.resource
    )
}

/// The narrowest key prefix holding everything a list or watch of `path` wants. With a wildcard
/// shard and a named cluster, or a namespace under a wildcard, it holds more: the caller keeps
/// only what [`in_scope`] accepts.
pub fn list_prefix(prefix: &str, path: &CachePath) -> String {
    let root = resource_root(prefix, path);
    match (&path.shard, &path.cluster, &path.namespace) {
        (Shard::Wildcard, _, _) => root,
        (Shard::Named(shard), Cluster::Wildcard, _) => format!("{root}{shard}/"),
        (Shard::Named(shard), Cluster::Named(cluster), None) => format!("{root}{shard}/{cluster}/"),
        (Shard::Named(shard), Cluster::Named(cluster), Some(ns)) => {
            format!("{root}{shard}/{cluster}/{ns}/")
        }
    }
}

/// Whether an object read under [`list_prefix`] belongs to `path`'s cluster and namespace.
pub fn in_scope(path: &CachePath, object: &serde_json::Value) -> bool {
    let cluster_matches = match &path.cluster {
        Cluster::Wildcard => true,
        Cluster::Named(cluster) => {
            kcp_apimachinery::meta::annotations(object).get(CLUSTER_ANNOTATION)
                == Some(&cluster.to_string())
        }
    };
    let namespace_matches = path
        .namespace
        .as_deref()
        .is_none_or(|ns| kcp_apimachinery::meta::namespace(object) == Some(ns));
    cluster_matches && namespace_matches
}

/// The key of one object (`path` names its shard, cluster and name).
pub fn object_key(
    prefix: &str,
    path: &CachePath,
    shard: &str,
    cluster: &str,
    name: &str,
) -> String {
    let root = resource_root(prefix, path);
    match &path.namespace {
        Some(ns) => format!("{root}{shard}/{cluster}/{ns}/{name}"),
        None => format!("{root}{shard}/{cluster}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> CachePath {
        CachePath::parse(p).unwrap()
    }

    #[test]
    fn layout_puts_the_shard_before_the_cluster() {
        let p = path("/services/cache/shards/amber/clusters/abc/api/v1/namespaces/ns/configmaps/x");
        assert_eq!(
            object_key("/cache", &p, "amber", "abc", "x"),
            "/cache/core/configmaps/amber/abc/ns/x"
        );
        assert_eq!(
            list_prefix("/cache/", &p),
            "/cache/core/configmaps/amber/abc/ns/"
        );
        let p = path("/services/cache/shards/*/clusters/abc/apis/g.io/v1/things");
        assert_eq!(list_prefix("/cache", &p), "/cache/g.io/things/");
        let p = path("/services/cache/shards/amber/clusters/*/apis/g.io/v1/things");
        assert_eq!(list_prefix("/cache", &p), "/cache/g.io/things/amber/");
    }

    #[test]
    fn keys_annotate_shard_and_cluster() {
        let mut seen = Vec::new();
        ShardAndCluster.annotate("g.io/things/amber/abc/ns/x", &mut |k, v| {
            seen.push((k, v.to_owned()))
        });
        assert_eq!(
            seen,
            [
                (SHARD_ANNOTATION, "amber".to_owned()),
                (CLUSTER_ANNOTATION, "abc".to_owned())
            ]
        );
    }
}
