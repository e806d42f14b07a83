//! What a request path says about its workspace, before the index is asked.
//!
//! - In-cluster clients (a pod's service account, through `KUBERNETES_SERVICE_HOST`) cannot put
//!   `/clusters/<name>` in front of their paths; upstream's
//!   `WithInClusterServiceAccountRequestRewrite` reads the logical cluster from the token's
//!   `kubernetes.io.clusterName` claim (or the legacy `kubernetes.io/serviceaccount/clusterName`)
//!   and prefixes it, unless the path is already under `/clusters/`, `/services/` or the proxy's
//!   shard marker `/shards/`. The claim is
//!   read unverified: it only picks the route; the token itself is authenticated afterwards.
//! - `/clusters/<path>[/rest]` splits into the cluster path and the rest.
//! - `~` is the user's home workspace: `user:<name>`, which the index resolves.

use http::HeaderMap;
use http::header::AUTHORIZATION;

/// The header upstream's shards set on requests between them: never rewritten.
const SHARDED_REQUEST_HEADER: &str = "x-kubernetes-sharded-request";

/// The path with `/clusters/<name>` in front when the request carries a service-account token
/// that names its logical cluster and the path names none; `None` to keep the path.
pub fn in_cluster_rewrite(path: &str, headers: &HeaderMap) -> Option<String> {
    if headers.contains_key(SHARDED_REQUEST_HEADER)
        || path.starts_with("/clusters/")
        || path.starts_with(crate::services::SERVICES_PREFIX)
        || path.starts_with(crate::services::SHARDS_PREFIX)
    {
        return None;
    }
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    let cluster = kcp_authn::unverified_cluster(token)?;
    Some(format!("/clusters/{cluster}{path}"))
}

/// `/clusters/<cluster>[/rest]`: the cluster path and the rest (empty or starting with `/`);
/// `None` for paths not under `/clusters/` or naming no cluster.
pub fn split_cluster(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix("/clusters/")?;
    let (cluster, rest) = match after.find('/') {
        Some(end) => after.split_at(end),
        None => (after, ""),
    };
    (!cluster.is_empty()).then_some((cluster, rest))
}

/// The cluster path with `~` (the home workspace) replaced by `user:<name>`: `~` alone and
/// `~:child` both; `None` when the path asks for a home and there is no user to own it.
pub fn expand_home(cluster: &str, user: Option<&str>) -> Option<String> {
    let Some(rest) = cluster.strip_prefix('~') else {
        return Some(cluster.to_owned());
    };
    if !(rest.is_empty() || rest.starts_with(':')) {
        return Some(cluster.to_owned());
    }
    let user = user.filter(|name| !name.is_empty())?;
    Some(format!("user:{user}{rest}"))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::{Value, json};

    use super::*;

    /// An unsigned JWT: the rewrite never checks signatures.
    fn token(claims: &Value) -> String {
        use base64::Engine;
        let b64 = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        format!("{}.{}.c2ln", b64(&json!({"alg": "RS256"})), b64(claims))
    }

    fn bearer(claims: &Value) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = format!("Bearer {}", token(claims));
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&value).unwrap());
        headers
    }

    #[test]
    fn service_account_requests_get_their_cluster() {
        let bound = bearer(&json!({"kubernetes.io": {"clusterName": "abc"}}));
        assert_eq!(
            in_cluster_rewrite("/api/v1/namespaces", &bound).as_deref(),
            Some("/clusters/abc/api/v1/namespaces")
        );
        let legacy = bearer(&json!({"kubernetes.io/serviceaccount/clusterName": "xyz"}));
        assert_eq!(
            in_cluster_rewrite("/apis", &legacy).as_deref(),
            Some("/clusters/xyz/apis")
        );
    }

    #[test]
    fn other_requests_keep_their_path() {
        let bound = bearer(&json!({"kubernetes.io": {"clusterName": "abc"}}));
        assert_eq!(in_cluster_rewrite("/clusters/root/api", &bound), None);
        assert_eq!(in_cluster_rewrite("/services/x/api", &bound), None);
        let mut sharded = bound.clone();
        sharded.insert(SHARDED_REQUEST_HEADER, HeaderValue::from_static("true"));
        assert_eq!(in_cluster_rewrite("/api", &sharded), None);
        assert_eq!(
            in_cluster_rewrite("/api", &bearer(&json!({"sub": "x"}))),
            None
        );
        assert_eq!(in_cluster_rewrite("/api", &HeaderMap::new()), None);
        let mut opaque = HeaderMap::new();
        opaque.insert(AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(in_cluster_rewrite("/api", &opaque), None);
    }

    #[test]
    fn splits_cluster_paths() {
        assert_eq!(
            split_cluster("/clusters/root:org/api/v1"),
            Some(("root:org", "/api/v1"))
        );
        assert_eq!(split_cluster("/clusters/root"), Some(("root", "")));
        assert_eq!(split_cluster("/clusters/"), None);
        assert_eq!(split_cluster("/clusters"), None);
        assert_eq!(split_cluster("/api"), None);
    }

    #[test]
    fn home_becomes_the_users_workspace() {
        assert_eq!(
            expand_home("~", Some("alice")).as_deref(),
            Some("user:alice")
        );
        assert_eq!(
            expand_home("~:child", Some("alice")).as_deref(),
            Some("user:alice:child")
        );
        assert_eq!(expand_home("~", None), None);
        assert_eq!(expand_home("root", None).as_deref(), Some("root"));
        assert_eq!(expand_home("~x", None).as_deref(), Some("~x"));
    }
}
