//! `RequestInfo`: verb, group/version/resource, namespace, name and subresource of a request.
//!
//! Mirrors kube-apiserver's request-info factory so authorization and audit see the same attributes
//! Kubernetes would compute for the same URL (including its quirks: a namespace object's name is also
//! its "namespace", and `status`/`finalize` directly under a namespace are namespace subresources).

use http::Method;

/// The Kubernetes verb of a request (what RBAC matches on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    /// Verbs of non-resource requests other than the above (`head`, `options`, ...).
    Other,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other => "other",
        }
    }
}

/// What a request path (after the `/clusters/<name>` prefix) refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// `false` for `/healthz`, `/version`, discovery roots and the like.
    pub is_resource_request: bool,
    pub verb: Verb,
    /// `api` or `apis` for resource requests.
    pub api_prefix: String,
    /// `""` for the legacy core group.
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Path segments after the subresource, which no resource serves (answered 404).
    pub extra_parts: usize,
}

impl RequestInfo {
    fn non_resource(verb: Verb) -> Self {
        RequestInfo {
            is_resource_request: false,
            verb,
            api_prefix: String::new(),
            group: String::new(),
            version: String::new(),
            namespace: None,
            resource: String::new(),
            name: None,
            subresource: None,
            extra_parts: 0,
        }
    }

    /// Computes the request info for a method, a path without the cluster prefix, and whether the query
    /// asked for a watch (`watch=true|1`).
    pub fn parse(method: &Method, path: &str, watch_query: bool) -> RequestInfo {
        let verb_of_method = match *method {
            Method::GET => Verb::Get,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE => Verb::Delete,
            _ => Verb::Other,
        };
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let (api_prefix, rest) = match parts.split_first() {
            Some((&prefix @ ("api" | "apis"), rest)) => (prefix, rest),
            _ => return Self::non_resource(verb_of_method),
        };
        // /api/v1/... has no group; /apis/<group>/<version>/...
        let (group, rest) = if api_prefix == "api" {
            ("", rest)
        } else {
            match rest.split_first() {
                Some((group, rest)) => (*group, rest),
                None => return Self::non_resource(verb_of_method),
            }
        };
        let Some((version, mut rest)) = rest.split_first() else {
            return Self::non_resource(verb_of_method);
        };
        if rest.is_empty() {
            // Discovery of a group version (`/api/v1`, `/apis/apps/v1`).
            return Self::non_resource(verb_of_method);
        }
        let mut info = RequestInfo {
            is_resource_request: true,
            verb: verb_of_method,
            api_prefix: api_prefix.to_string(),
            group: group.to_string(),
            version: version.to_string(),
            ..Self::non_resource(verb_of_method)
        };
        // The deprecated `/watch/` path segment is still sent by some clients.
        let mut watch = watch_query;
        if rest.first() == Some(&"watch") {
            watch = true;
            rest = &rest[1..];
        }
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            info.namespace = Some(rest[1].to_string());
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        info.resource = rest.first().map(|r| r.to_string()).unwrap_or_default();
        info.name = rest.get(1).map(|n| n.to_string());
        info.subresource = rest.get(2).map(|s| s.to_string());
        info.extra_parts = rest.len().saturating_sub(3);
        info.verb = match (verb_of_method, info.name.is_some()) {
            (Verb::Get, _) if watch => Verb::Watch,
            (Verb::Get, false) => Verb::List,
            (Verb::Delete, false) => Verb::DeleteCollection,
            (verb, _) => verb,
        };
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, path: &str) -> RequestInfo {
        RequestInfo::parse(&method, path, false)
    }

    #[test]
    fn namespaced_resource() {
        let info = parse(Method::GET, "/api/v1/namespaces/default/configmaps/cm");
        assert!(info.is_resource_request);
        assert_eq!((info.group.as_str(), info.version.as_str()), ("", "v1"));
        assert_eq!(info.namespace.as_deref(), Some("default"));
        assert_eq!(info.resource, "configmaps");
        assert_eq!(info.name.as_deref(), Some("cm"));
        assert_eq!(info.verb, Verb::Get);
    }

    #[test]
    fn verbs() {
        assert_eq!(parse(Method::GET, "/api/v1/configmaps").verb, Verb::List);
        assert_eq!(
            RequestInfo::parse(&Method::GET, "/api/v1/configmaps", true).verb,
            Verb::Watch
        );
        assert_eq!(
            parse(Method::GET, "/api/v1/watch/namespaces/a/configmaps").verb,
            Verb::Watch
        );
        assert_eq!(
            parse(Method::DELETE, "/api/v1/namespaces/a/configmaps").verb,
            Verb::DeleteCollection
        );
        assert_eq!(
            parse(Method::DELETE, "/api/v1/namespaces/a/configmaps/b").verb,
            Verb::Delete
        );
        assert_eq!(
            parse(Method::POST, "/api/v1/namespaces/a/configmaps").verb,
            Verb::Create
        );
        assert_eq!(
            parse(Method::PATCH, "/api/v1/namespaces/a/configmaps/b").verb,
            Verb::Patch
        );
    }

    #[test]
    fn namespaces_and_their_subresources() {
        let info = parse(Method::GET, "/api/v1/namespaces/foo");
        assert_eq!(
            (info.resource.as_str(), info.name.as_deref()),
            ("namespaces", Some("foo"))
        );
        let info = parse(Method::PUT, "/api/v1/namespaces/foo/finalize");
        assert_eq!(info.resource, "namespaces");
        assert_eq!(info.subresource.as_deref(), Some("finalize"));
        let info = parse(Method::GET, "/api/v1/namespaces");
        assert_eq!(
            (info.resource.as_str(), info.verb),
            ("namespaces", Verb::List)
        );
    }

    #[test]
    fn groups_and_non_resource_paths() {
        let info = parse(
            Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/x/leases/l",
        );
        assert_eq!(info.group, "coordination.k8s.io");
        assert_eq!(info.resource, "leases");
        for path in [
            "/healthz",
            "/api",
            "/apis",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
        ] {
            assert!(!parse(Method::GET, path).is_resource_request, "{path}");
        }
        assert_eq!(
            parse(Method::GET, "/api/v1/namespaces/a/configmaps/b/c/d").extra_parts,
            1
        );
    }
}
