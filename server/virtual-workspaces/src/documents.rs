//! Discovery and OpenAPI of a virtual workspace: the documents a bound logical cluster serves,
//! cut down to the groups and resources the workspace shows (upstream builds them from the
//! export's schemas; a bound cluster serves exactly those schemas), with the OpenAPI v3 index's
//! URLs pointing back into the virtual workspace, so kubectl and client libraries that follow
//! them stay inside it.

use std::collections::BTreeSet;

use serde_json::Value;

/// What a virtual workspace shows of the API: resource names by group.
pub trait Shown: Sync {
    fn shows_group(&self, group: &str) -> bool;
    fn shows_resource(&self, group: &str, resource: &str) -> bool;
}

/// How a document path is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentPath {
    /// `/api`: the core versions.
    CoreVersions,
    /// `/apis`: the group list.
    Groups,
    /// `/apis/<group>` or `/api/v1`/`/apis/<group>/<version>` (`resources` true): one group.
    Group { group: String, resources: bool },
    /// `/openapi/v3`: the index of group-version documents.
    OpenApiIndex,
    /// Anything else (`/version`, `/openapi/v2`, one OpenAPI v3 document), served as it is.
    AsItIs,
}

impl DocumentPath {
    pub fn parse(path: &str) -> DocumentPath {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        match parts.as_slice() {
            ["api"] => DocumentPath::CoreVersions,
            ["api", _] => DocumentPath::Group {
                group: String::new(),
                resources: true,
            },
            ["apis"] => DocumentPath::Groups,
            ["apis", group] => DocumentPath::Group {
                group: group.to_string(),
                resources: false,
            },
            ["apis", group, _] => DocumentPath::Group {
                group: group.to_string(),
                resources: true,
            },
            ["openapi", "v3"] => DocumentPath::OpenApiIndex,
            _ => DocumentPath::AsItIs,
        }
    }

    /// Whether the document is discovery (served as legacy JSON, which every client reads).
    pub fn is_discovery(&self) -> bool {
        !matches!(self, DocumentPath::OpenApiIndex | DocumentPath::AsItIs)
    }
}

/// Cuts a document (as JSON) down to what `shown` shows. `served_prefix` is the path the
/// document was served under (`/clusters/<name>`), `prefix` the virtual workspace's.
pub fn filter(
    path: &DocumentPath,
    document: &mut Value,
    shown: &dyn Shown,
    served_prefix: &str,
    prefix: &str,
) {
    match path {
        DocumentPath::CoreVersions => {
            if !shown.shows_group("") {
                document["versions"] = Value::Array(Vec::new());
            }
        }
        DocumentPath::Groups => {
            if let Some(groups) = document.get_mut("groups").and_then(Value::as_array_mut) {
                groups.retain(|g| g["name"].as_str().is_some_and(|n| shown.shows_group(n)));
            }
        }
        DocumentPath::Group {
            group,
            resources: true,
        } => {
            if let Some(list) = document.get_mut("resources").and_then(Value::as_array_mut) {
                list.retain(|r| {
                    r["name"].as_str().is_some_and(|name| {
                        let resource = name.split('/').next().unwrap_or(name);
                        shown.shows_resource(group, resource)
                    })
                });
            }
        }
        DocumentPath::OpenApiIndex => {
            if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
                paths.retain(|key, _| openapi_group(key).is_some_and(|g| shown.shows_group(g)));
                for entry in paths.values_mut() {
                    let url = entry["serverRelativeURL"].as_str().unwrap_or_default();
                    if let Some(tail) = url.strip_prefix(served_prefix) {
                        entry["serverRelativeURL"] = Value::String(format!("{prefix}{tail}"));
                    }
                }
            }
        }
        DocumentPath::Group {
            resources: false, ..
        }
        | DocumentPath::AsItIs => {}
    }
}

/// The group of an OpenAPI v3 index key (`api/v1` -> core, `apis/<group>/<version>`).
fn openapi_group(key: &str) -> Option<&str> {
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        ["api", _] => Some(""),
        ["apis", group, _] => Some(group),
        _ => None,
    }
}

/// A fixed set of shown resources, `(group, resource)`.
impl Shown for BTreeSet<(String, String)> {
    fn shows_group(&self, group: &str) -> bool {
        self.iter().any(|(g, _)| g == group)
    }

    fn shows_resource(&self, group: &str, resource: &str) -> bool {
        self.iter().any(|(g, r)| g == group && r == resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown() -> BTreeSet<(String, String)> {
        BTreeSet::from([
            ("example.com".to_string(), "widgets".to_string()),
            (String::new(), "configmaps".to_string()),
        ])
    }

    #[test]
    fn paths_are_classified() {
        assert_eq!(DocumentPath::parse("/api"), DocumentPath::CoreVersions);
        assert_eq!(DocumentPath::parse("/apis"), DocumentPath::Groups);
        assert_eq!(
            DocumentPath::parse("/apis/example.com/v1"),
            DocumentPath::Group {
                group: "example.com".into(),
                resources: true
            }
        );
        assert_eq!(
            DocumentPath::parse("/api/v1"),
            DocumentPath::Group {
                group: String::new(),
                resources: true
            }
        );
        assert_eq!(
            DocumentPath::parse("/openapi/v3"),
            DocumentPath::OpenApiIndex
        );
        assert_eq!(
            DocumentPath::parse("/openapi/v3/apis/example.com/v1"),
            DocumentPath::AsItIs
        );
        assert!(!DocumentPath::parse("/version").is_discovery());
    }

    #[test]
    fn groups_and_resources_are_cut_to_the_shown_ones() {
        let mut groups =
            json!({"groups": [{"name": "example.com"}, {"name": "rbac.authorization.k8s.io"}]});
        filter(&DocumentPath::Groups, &mut groups, &shown(), "", "");
        assert_eq!(groups, json!({"groups": [{"name": "example.com"}]}));

        let mut core = json!({"resources": [{"name": "configmaps"}, {"name": "secrets"}, {"name": "configmaps/status"}]});
        filter(&DocumentPath::parse("/api/v1"), &mut core, &shown(), "", "");
        assert_eq!(
            core,
            json!({"resources": [{"name": "configmaps"}, {"name": "configmaps/status"}]})
        );

        let mut versions = json!({"versions": ["v1"]});
        let nothing_core = BTreeSet::from([("example.com".to_string(), "widgets".to_string())]);
        filter(
            &DocumentPath::CoreVersions,
            &mut versions,
            &nothing_core,
            "",
            "",
        );
        assert_eq!(versions, json!({"versions": []}));
    }

    #[test]
    fn the_openapi_index_points_into_the_virtual_workspace() {
        let mut index = json!({"paths": {
            "apis/example.com/v1": {"serverRelativeURL": "/clusters/c1/openapi/v3/apis/example.com/v1?hash=1"},
            "apis/rbac.authorization.k8s.io/v1": {"serverRelativeURL": "/clusters/c1/openapi/v3/apis/rbac.authorization.k8s.io/v1?hash=2"},
            "version": {"serverRelativeURL": "/clusters/c1/openapi/v3/version?hash=3"},
        }});
        filter(
            &DocumentPath::OpenApiIndex,
            &mut index,
            &shown(),
            "/clusters/c1",
            "/services/apiexport/p/e/clusters/*",
        );
        assert_eq!(
            index,
            json!({"paths": {"apis/example.com/v1": {"serverRelativeURL": "/services/apiexport/p/e/clusters/*/openapi/v3/apis/example.com/v1?hash=1"}}})
        );
    }
}
