//! Discovery: `/api`, `/apis`, `/api/v1`, `/apis/<group>[/<version>]`, legacy and aggregated.
//!
//! kubectl 1.27-1.29 ask for aggregated discovery `v2beta1`, newer ones for `v2`, both falling back to
//! the legacy per-group documents; we serve all three shapes from the same registry. The documents
//! depend only on the set of served types, so they are the same for every logical cluster.

use http::Response;
use kcp_apimachinery::ApiError;
use serde_json::{Value, json};

use super::negotiation::accept_ranges;
use super::resource::no_such_resource;
use super::response::{self, Body};
use kcp_registry::{ApiSet, ResourceType};

/// Which aggregated discovery version a client asked for, if any.
fn aggregated_version(accept: Option<&str>) -> Option<&'static str> {
    accept_ranges(accept).iter().find_map(|range| {
        if range.param("g") != Some("apidiscovery.k8s.io")
            || range.param("as") != Some("APIGroupDiscoveryList")
        {
            return None;
        }
        match range.param("v") {
            Some("v2") => Some("v2"),
            Some("v2beta1") => Some("v2beta1"),
            _ => None,
        }
    })
}

/// Serves a discovery path (already stripped of the cluster prefix), or `None` if it is not one.
pub fn serve(
    registry: &ApiSet,
    path: &str,
    accept: Option<&str>,
    server_address: &str,
) -> Option<Result<Response<Body>, ApiError>> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let aggregated = aggregated_version(accept);
    Some(match parts.as_slice() {
        ["api"] => Ok(match aggregated {
            Some(v) => aggregated_list(registry, v, true),
            None => response::json(
                200,
                &json!({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}),
            ),
        }),
        ["apis"] => Ok(match aggregated {
            Some(v) => aggregated_list(registry, v, false),
            None => response::json(200, &group_list(registry)),
        }),
        ["api", version] => resource_list(registry, "", version),
        ["apis", group] => match group_object(registry, group) {
            Some(group) => Ok(response::json(200, &group)),
            None => Err(no_such_resource()),
        },
        ["apis", group, version] => resource_list(registry, group, version),
        _ => return None,
    })
}

fn versions_of(registry: &ApiSet, group: &str) -> Vec<String> {
    registry
        .group_versions()
        .into_iter()
        .filter(|(g, _)| g == group)
        .map(|(_, v)| v)
        .collect()
}

fn group_object(registry: &ApiSet, group: &str) -> Option<Value> {
    let versions = versions_of(registry, group);
    let first = versions.first()?;
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": group,
        "versions": versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(first)}),
    )
}

fn group_list(registry: &ApiSet) -> Value {
    let mut groups: Vec<String> = registry
        .group_versions()
        .into_iter()
        .map(|(g, _)| g)
        .filter(|g| !g.is_empty())
        .collect();
    groups.dedup();
    let groups: Vec<Value> = groups
        .iter()
        .filter_map(|g| group_object(registry, g))
        .map(|mut g| {
            if let Some(o) = g.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            g
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn types_of<'a>(
    registry: &'a ApiSet,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a ResourceType> {
    registry
        .types()
        .iter()
        .map(|t| t.as_ref())
        .filter(move |t| t.group == group && t.version == version)
}

fn subresource_verbs(subresource: &str) -> Vec<&'static str> {
    match subresource {
        "finalize" => vec!["update"],
        "token" => vec!["create"],
        _ => vec!["get", "patch", "update"],
    }
}

/// A subresource as discovery lists it: its name, the group, version and kind it answers with,
/// and its verbs.
struct Subresource<'a> {
    name: &'a str,
    kind: (&'a str, &'a str, &'a str),
    verbs: Vec<&'static str>,
}

/// The subresources of a type: its own (answering with the object's kind, except for the
/// `serviceaccounts/token` TokenRequest), and for pods the connect subresources
/// ([`crate::pod_connect`]).
fn subresources(t: &ResourceType) -> Vec<Subresource<'_>> {
    let own = t.subresources.iter().map(|sub| Subresource {
        name: sub,
        kind: match sub.as_str() {
            "token" => ("authentication.k8s.io", "v1", "TokenRequest"),
            _ => (&t.group, &t.version, &t.kind),
        },
        verbs: subresource_verbs(sub),
    });
    let connect = crate::pod_connect::discovered(&t.group, &t.version, &t.plural)
        .iter()
        .map(|(name, kind, verbs)| Subresource {
            name,
            kind: ("", "v1", kind),
            verbs: verbs.to_vec(),
        });
    own.chain(connect).collect()
}

fn resource_list(
    registry: &ApiSet,
    group: &str,
    version: &str,
) -> Result<Response<Body>, ApiError> {
    let mut resources = Vec::new();
    for t in types_of(registry, group, version) {
        resources.push(json!({"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced,
            "kind": t.kind, "verbs": t.verbs(), "shortNames": t.short_names, "categories": t.categories}));
        for sub in subresources(t) {
            let mut entry = json!({"name": format!("{}/{}", t.plural, sub.name), "singularName": "",
                "namespaced": t.namespaced, "kind": t.kind, "verbs": sub.verbs});
            let (sub_group, sub_version, sub_kind) = sub.kind;
            if sub_kind != t.kind {
                entry["group"] = json!(sub_group);
                entry["version"] = json!(sub_version);
                entry["kind"] = json!(sub_kind);
            }
            resources.push(entry);
        }
    }
    if resources.is_empty() {
        return Err(no_such_resource());
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(response::json(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    ))
}

fn aggregated_list(registry: &ApiSet, discovery_version: &str, legacy: bool) -> Response<Body> {
    let mut items = Vec::new();
    let mut groups: Vec<String> = registry
        .group_versions()
        .into_iter()
        .map(|(g, _)| g)
        .filter(|g| g.is_empty() == legacy)
        .collect();
    groups.dedup();
    for group in groups {
        let versions: Vec<Value> = versions_of(registry, &group)
            .iter()
            .map(|version| {
                let resources: Vec<Value> = types_of(registry, &group, version)
                    .map(|t| {
                        let kind = json!({"group": t.group, "version": t.version, "kind": t.kind});
                        let subresources: Vec<Value> = subresources(t)
                            .into_iter()
                            .map(|s| {
                                let (group, version, sub_kind) = s.kind;
                                let kind = json!({"group": group, "version": version, "kind": sub_kind});
                                json!({"subresource": s.name, "responseKind": kind, "verbs": s.verbs})
                            })
                            .collect();
                        json!({"resource": t.plural, "responseKind": kind,
                            "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": t.singular, "verbs": t.verbs(), "shortNames": t.short_names,
                            "categories": t.categories, "subresources": subresources})
                    })
                    .collect();
                json!({"version": version, "resources": resources, "freshness": "Current"})
            })
            .collect();
        items.push(json!({"metadata": {"name": group}, "versions": versions}));
    }
    let content_type = format!(
        "application/json;g=apidiscovery.k8s.io;v={discovery_version};as=APIGroupDiscoveryList"
    );
    let body = json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{discovery_version}"),
        "metadata": {}, "items": items});
    response::bytes(
        200,
        &content_type,
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(response: Response<Body>) -> (String, Value) {
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (content_type, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn legacy_documents() {
        let registry = kcp_registry::Registry::new();
        let registry = registry.builtin();
        let (_, api) = body(serve(registry, "/api", None, "x:1").unwrap().unwrap()).await;
        assert_eq!(api["versions"], json!(["v1"]));
        let (_, core) = body(serve(registry, "/api/v1", None, "x:1").unwrap().unwrap()).await;
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"configmaps") && names.contains(&"namespaces/finalize"));
        let (_, groups) = body(serve(registry, "/apis", None, "x:1").unwrap().unwrap()).await;
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "coordination.k8s.io")
        );
        assert_eq!(
            serve(registry, "/apis/apps/v1", None, "x:1")
                .unwrap()
                .unwrap_err()
                .code,
            404
        );
        assert!(serve(registry, "/healthz", None, "x:1").is_none());
    }

    #[tokio::test]
    async fn aggregated_documents() {
        let registry = kcp_registry::Registry::new();
        let registry = registry.builtin();
        let accept =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        let (content_type, apis) = body(
            serve(registry, "/apis", Some(accept), "x:1")
                .unwrap()
                .unwrap(),
        )
        .await;
        assert!(content_type.contains("as=APIGroupDiscoveryList"));
        assert_eq!(apis["kind"], "APIGroupDiscoveryList");
        let leases = &apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "coordination.k8s.io")
            .unwrap()["versions"][0]["resources"][0];
        assert_eq!(leases["resource"], "leases");
        assert_eq!(leases["scope"], "Namespaced");
        let (_, api) = body(
            serve(registry, "/api", Some(accept), "x:1")
                .unwrap()
                .unwrap(),
        )
        .await;
        assert_eq!(api["items"][0]["metadata"]["name"], "");
    }
}
