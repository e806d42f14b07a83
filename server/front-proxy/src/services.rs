//! Where a virtual-workspace request (`/services/...`) goes through the proxy when several
//! shards serve virtual workspaces (kcp #3826, #3830: routing every `/services/` request to the
//! root shard breaks with a second shard).
//!
//! Two shapes reach a shard:
//!
//! - `/services/<name>/<key...>/clusters/<cluster>/<rest>`, a named cluster: as upstream's
//!   lookup (`extractClusterFromPath`, the first `/clusters/` segment) the index resolves the
//!   cluster, and the request goes to that cluster's shard, at the shard's virtual-workspace URL,
//!   with the resolved logical cluster name in place of the cluster. An unknown cluster is the
//!   403 of `/clusters/`.
//! - `/shards/<shard>/services/...`: the shard marker. A request naming no cluster (`*`, an
//!   APIExport's `clusters/*` list and watch) says nothing an index can route by, so the URLs
//!   users are handed carry their shard instead: behind a front-proxy each shard advertises
//!   `<proxy URL>/shards/<shard>` as its `virtualWorkspaceURL` ([`shard_url`]), so the
//!   APIExportEndpointSlice endpoints (`<virtualWorkspaceURL>/services/apiexport/...`) are proxy
//!   URLs, and the proxy strips the marker and forwards the rest to that shard, whatever it names.
//!
//! Decided: the marker in the URL rather than a table of shard-internal URLs in the proxy,
//! because a URL handed to a user must itself go through the proxy (a shard-internal address is
//! unreachable from outside), and a marker keeps upstream's shapes under it (the path after the
//! marker is upstream's `/services/...`; clients append `/clusters/*/apis/...` as they do to any
//! endpoint). A shard's virtual-workspace URL that is such a marker URL names the proxy, never
//! the virtual workspaces themselves: the proxy then forwards to the shard's base URL, where
//! they run in-process ([`virtual_workspaces_target`]).

/// The prefix of every virtual-workspace path.
pub const SERVICES_PREFIX: &str = "/services/";

/// The prefix of the shard marker.
pub const SHARDS_PREFIX: &str = "/shards/";

/// The virtual-workspace URL a shard advertises when the front-proxy at `proxy_url` fronts it.
pub fn shard_url(proxy_url: &str, shard: &str) -> String {
    format!("{}{SHARDS_PREFIX}{shard}", proxy_url.trim_end_matches('/'))
}

/// Where the virtual workspaces of shard `name` are reached: its advertised
/// `virtualWorkspaceURL`, unless that is empty (upstream's default) or a front-proxy's marker URL
/// for this shard, in both cases its base URL. No trailing slash.
pub fn virtual_workspaces_target<'a>(
    name: &str,
    base_url: &'a str,
    advertised: &'a str,
) -> &'a str {
    let advertised = advertised.trim_end_matches('/');
    let marker = advertised
        .strip_suffix(name)
        .is_some_and(|before| before.ends_with(SHARDS_PREFIX));
    if advertised.is_empty() || marker {
        base_url.trim_end_matches('/')
    } else {
        advertised
    }
}

/// `/shards/<shard><rest>`: the shard and the rest (empty or starting with `/`); `None` for
/// other paths and an empty shard name.
pub fn split_shard(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix(SHARDS_PREFIX)?;
    let (shard, rest) = after.split_at(after.find('/').unwrap_or(after.len()));
    (!shard.is_empty()).then_some((shard, rest))
}

/// A `/services/` path naming one cluster, taken apart around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedCluster<'a> {
    /// Up to and including `/clusters/`.
    pub before: &'a str,
    /// The cluster as the client wrote it (a logical cluster name, or a path).
    pub cluster: &'a str,
    /// After the cluster: empty or starting with `/`.
    pub after: &'a str,
}

/// The cluster a `/services/` path names after its first `/clusters/`; `None` when the path is
/// not under `/services/`, names no cluster, or names `*` (those go to the mapping's backend).
pub fn named_cluster(path: &str) -> Option<NamedCluster<'_>> {
    if !path.starts_with(SERVICES_PREFIX) {
        return None;
    }
    const CLUSTERS: &str = "/clusters/";
    let start = path.find(CLUSTERS)? + CLUSTERS.len();
    let (before, tail) = path.split_at(start);
    let (cluster, after) = tail.split_at(tail.find('/').unwrap_or(tail.len()));
    // `*` as clients send it, percent-encoded or not (the path is not decoded here).
    let wildcard = matches!(cluster, "*" | "%2A" | "%2a");
    (!cluster.is_empty() && !wildcard).then_some(NamedCluster {
        before,
        cluster,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_cluster_is_found_after_the_first_clusters_segment() {
        let path = "/services/apiexport/2abc/widgets/clusters/root:org/apis/g/v1/widgets";
        assert_eq!(
            named_cluster(path),
            Some(NamedCluster {
                before: "/services/apiexport/2abc/widgets/clusters/",
                cluster: "root:org",
                after: "/apis/g/v1/widgets",
            })
        );
        let bare = named_cluster("/services/initializingworkspaces/root:t/clusters/abc").unwrap();
        assert_eq!((bare.cluster, bare.after), ("abc", ""));
        for none in [
            "/services/apiexport/2abc/widgets/clusters/*/apis",
            "/services/apiexport/2abc/widgets/clusters/%2A/apis",
            "/services/apiexport/2abc/widgets/clusters/",
            "/services/apiexport/2abc/widgets",
            "/clusters/root/services/apiexport/a/b/clusters/x",
            "/shards/s/services/apiexport/a/b/clusters/x",
        ] {
            assert_eq!(named_cluster(none), None, "{none}");
        }
    }

    #[test]
    fn the_shard_marker_is_split_off() {
        assert_eq!(
            split_shard("/shards/shard-1/services/apiexport/a/b/clusters/*/apis"),
            Some(("shard-1", "/services/apiexport/a/b/clusters/*/apis"))
        );
        assert_eq!(split_shard("/shards/root"), Some(("root", "")));
        assert_eq!(split_shard("/shards//services/x"), None);
        assert_eq!(split_shard("/shardsx/a/services"), None);
        assert_eq!(split_shard("/services/shards/a"), None);
    }

    #[test]
    fn a_marker_url_of_its_own_shard_means_its_base_url() {
        let marker = shard_url("https://proxy:6447/", "shard-1");
        assert_eq!(marker, "https://proxy:6447/shards/shard-1");
        let base = "https://127.0.0.1:6444/";
        assert_eq!(
            virtual_workspaces_target("shard-1", base, &marker),
            "https://127.0.0.1:6444"
        );
        assert_eq!(
            virtual_workspaces_target("shard-1", base, ""),
            "https://127.0.0.1:6444"
        );
        // A standalone virtual-workspace server, or another shard's marker (not a loop).
        assert_eq!(
            virtual_workspaces_target("shard-1", base, "https://vw:6444/"),
            "https://vw:6444"
        );
        assert_eq!(
            virtual_workspaces_target("shard-1", base, "https://proxy/shards/ashard-1"),
            "https://proxy/shards/ashard-1"
        );
    }
}
