//! A request inside a virtual workspace: its Kubernetes request info (the API server's own
//! `RequestInfo`, as kube-apiserver's factory computes it), the paths a virtual workspace rewrites
//! it to, and its label selector narrowed to what a workspace shows.

use http::Method;
use kcp_apiserver::RequestInfo;

/// The request info of `path` (the API path after `/clusters/<target>`).
pub fn info(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
    RequestInfo::parse(method, path, is_watch(query))
}

/// Whether a query asks for a watch (`watch=true` or `watch=1`).
fn is_watch(query: Option<&str>) -> bool {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .any(|pair| matches!(pair, "watch=true" | "watch=1"))
}

/// The path of a resource request again, with `resource` in place of its resource
/// (`widgets:<identity>` for a wildcard request of a bound resource).
pub fn with_resource(info: &RequestInfo, resource: &str) -> String {
    let mut path = collection(info, resource);
    for part in [&info.name, &info.subresource].into_iter().flatten() {
        path.push('/');
        path.push_str(part);
    }
    path
}

/// The path of the object a resource request names (without its subresource).
pub fn object_path(info: &RequestInfo) -> Option<String> {
    let name = info.name.as_ref()?;
    Some(format!("{}/{name}", collection(info, &info.resource)))
}

fn collection(info: &RequestInfo, resource: &str) -> String {
    let mut path = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    // A namespace object's name is also its "namespace" in kube's request info.
    let namespace_object = info.group.is_empty() && info.resource == "namespaces";
    if let Some(namespace) = info.namespace.as_ref().filter(|_| !namespace_object) {
        path.push_str(&format!("/namespaces/{namespace}"));
    }
    path.push('/');
    path.push_str(resource);
    path
}

/// `query` with `requirement` (`key=value,...`) added to its `labelSelector` (after the client's
/// own requirements, with a comma: all must hold).
pub fn with_label_requirement(query: Option<&str>, requirement: &str) -> String {
    let encoded = encode(requirement);
    let mut found = false;
    let mut pairs: Vec<String> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.strip_prefix("labelSelector=") {
            Some(selector) => {
                found = true;
                if selector.is_empty() {
                    format!("labelSelector={encoded}")
                } else {
                    format!("labelSelector={selector}%2C{encoded}")
                }
            }
            None => pair.to_string(),
        })
        .collect();
    if !found {
        pairs.push(format!("labelSelector={encoded}"));
    }
    pairs.join("&")
}

/// Percent-encodes what a query value may not hold as it is.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> RequestInfo {
        let info = info(&Method::GET, path, None);
        assert!(info.is_resource_request, "{path}");
        info
    }

    #[test]
    fn the_resource_is_replaced_in_place() {
        let r = resource("/apis/example.com/v1/namespaces/ns/widgets");
        assert_eq!(
            with_resource(&r, "widgets:abc"),
            "/apis/example.com/v1/namespaces/ns/widgets:abc"
        );
        let r = resource("/api/v1/namespaces/ns/configmaps/c/status");
        assert_eq!(
            with_resource(&r, "configmaps"),
            "/api/v1/namespaces/ns/configmaps/c/status"
        );
        assert_eq!(
            object_path(&r).as_deref(),
            Some("/api/v1/namespaces/ns/configmaps/c")
        );
        assert_eq!(object_path(&resource("/api/v1/configmaps")), None);
        let namespace = resource("/api/v1/namespaces/ns");
        assert_eq!(
            object_path(&namespace).as_deref(),
            Some("/api/v1/namespaces/ns")
        );
    }

    #[test]
    fn watches_are_told_by_the_query() {
        let path = "/apis/g/v1/widgets";
        assert_eq!(
            info(&Method::GET, path, Some("resourceVersion=1&watch=true"))
                .verb
                .as_str(),
            "watch"
        );
        assert_eq!(
            info(&Method::GET, path, Some("watch=false")).verb.as_str(),
            "list"
        );
        assert_eq!(info(&Method::GET, path, None).verb.as_str(), "list");
    }

    #[test]
    fn a_label_requirement_is_added_to_the_selector() {
        assert_eq!(
            with_label_requirement(None, "c.io/k=v"),
            "labelSelector=c.io%2Fk%3Dv"
        );
        assert_eq!(
            with_label_requirement(Some("watch=1&labelSelector=a%3Db"), "c.io/k=v"),
            "watch=1&labelSelector=a%3Db%2Cc.io%2Fk%3Dv"
        );
        assert_eq!(
            with_label_requirement(Some("labelSelector=&limit=5"), "k=v"),
            "labelSelector=k%3Dv&limit=5"
        );
    }
}
