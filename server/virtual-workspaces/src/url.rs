//! The URLs of virtual workspaces, as upstream's `digestUrl`s read them:
//! `/services/<name>/<key segments>/clusters/<cluster|*>/<rest>`, where the key names what the
//! workspace shows (`<export-cluster>/<export-name>` for `apiexport`, `<initializer>` for
//! `initializingworkspaces`) and `<rest>` is a Kubernetes API path (`/api/v1/...`,
//! `/apis/...`, `/openapi/v3`, ...).

use kcp_registry::LogicalClusterName;

/// Which logical clusters a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/clusters/*`: every cluster the workspace shows.
    Wildcard,
    /// `/clusters/<logical-cluster-name>`.
    One(String),
}

/// A virtual-workspace URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VwPath<'a> {
    /// The key segments after the service name.
    pub key: Vec<&'a str>,
    pub target: Target,
    /// Everything up to and including `/clusters/<target>`: what the workspace's clients use as
    /// their server URL's path.
    pub prefix: &'a str,
    /// The API path after the prefix (`/` when empty).
    pub rest: &'a str,
}

/// Splits `path` of service `service` with `key_segments` key segments; `None` when it is not
/// such a URL (a key segment empty, no `/clusters/<target>`, a target that is not a logical
/// cluster name or `*`).
pub fn split<'a>(path: &'a str, service: &str, key_segments: usize) -> Option<VwPath<'a>> {
    let after_service = path
        .strip_prefix("/services/")?
        .strip_prefix(service)?
        .strip_prefix('/')?;
    let mut rest = after_service;
    let mut key = Vec::with_capacity(key_segments);
    for _ in 0..key_segments {
        let (segment, tail) = rest.split_once('/')?;
        if segment.is_empty() {
            return None;
        }
        key.push(segment);
        rest = tail;
    }
    let rest = rest.strip_prefix("clusters/")?;
    let (cluster, api_path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, ""),
    };
    let target = match cluster {
        "*" => Target::Wildcard,
        // A logical cluster name, never a workspace path, as upstream's.
        name if LogicalClusterName::parse(name).is_some() => Target::One(name.to_string()),
        _ => return None,
    };
    let prefix = &path[..path.len() - api_path.len()];
    let rest = if api_path.is_empty() { "/" } else { api_path };
    Some(VwPath {
        key,
        target,
        prefix,
        rest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apiexport_url_names_the_export_the_target_and_the_api_path() {
        let path = "/services/apiexport/2abc/widgets/clusters/*/apis/example.com/v1/widgets";
        let vw = split(path, "apiexport", 2).unwrap();
        assert_eq!(vw.key, ["2abc", "widgets"]);
        assert_eq!(vw.target, Target::Wildcard);
        assert_eq!(vw.prefix, "/services/apiexport/2abc/widgets/clusters/*");
        assert_eq!(vw.rest, "/apis/example.com/v1/widgets");

        let vw = split(
            "/services/apiexport/2abc/widgets/clusters/1xyz",
            "apiexport",
            2,
        )
        .unwrap();
        assert_eq!(vw.target, Target::One("1xyz".into()));
        assert_eq!(vw.rest, "/");
    }

    #[test]
    fn an_initializer_is_one_segment_with_colons() {
        let path = "/services/initializingworkspaces/root:org:type/clusters/abc/api/v1/configmaps";
        let vw = split(path, "initializingworkspaces", 1).unwrap();
        assert_eq!(vw.key, ["root:org:type"]);
        assert_eq!(vw.target, Target::One("abc".into()));
        assert_eq!(vw.rest, "/api/v1/configmaps");
    }

    #[test]
    fn other_urls_are_not_virtual_workspace_urls() {
        for path in [
            "/services/apiexport/2abc/widgets",
            "/services/apiexport/2abc/widgets/apis",
            "/services/apiexport//widgets/clusters/*/apis",
            "/services/apiexport/2abc/widgets/clusters/root:org/apis",
            "/services/apiexport/2abc/widgets/clusters/Upper/apis",
            "/services/apiexportx/2abc/widgets/clusters/*",
            "/services/cache/2abc/widgets/clusters/*",
            "/clusters/root/services/apiexport/a/b/clusters/*",
        ] {
            assert_eq!(split(path, "apiexport", 2), None, "{path}");
        }
    }
}
