//! The apis.kcp.io part of the fake kcp in `tests/plugins.rs`: discovery of the group in the
//! versions a test chooses, APIBindings (create, get, list, merge patch with resourceVersion
//! checks) in any workspace and APIExports to read claims from. A created binding answers
//! `Binding` to a configurable number of GETs before it is `Bound`, so tests see the plugin wait.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::status;

/// What the fake serves of apis.kcp.io and what it was sent.
pub struct Apis {
    /// Versions serving apibindings, in discovery order.
    pub versions: Vec<&'static str>,
    pub preferred: &'static str,
    /// GETs of a new binding answered with phase `Binding` before it turns `Bound`.
    pub gets_until_bound: usize,
    /// Bindings by (workspace, name), as last written.
    pub bindings: BTreeMap<(String, String), Value>,
    /// GETs left before each binding is bound.
    pending: BTreeMap<(String, String), usize>,
    /// APIExports by (workspace, name).
    pub exports: BTreeMap<(String, String), Value>,
    /// Every write: method, URI, content type and body.
    pub writes: Vec<(String, String, String, Value)>,
    resource_version: u64,
}

impl Apis {
    pub fn new(versions: Vec<&'static str>, preferred: &'static str) -> Self {
        Apis {
            versions,
            preferred,
            gets_until_bound: 2,
            bindings: BTreeMap::new(),
            pending: BTreeMap::new(),
            exports: BTreeMap::new(),
            writes: Vec::new(),
            resource_version: 10,
        }
    }

    /// A binding already in the workspace, with the given claims in its spec.
    pub fn add_binding(&mut self, cluster: &str, name: &str, claims: Value) {
        self.resource_version += 1;
        let binding = json!({
            "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIBinding",
            "metadata": {"name": name, "resourceVersion": self.resource_version.to_string()},
            "spec": {"reference": {"export": {"path": "root:svc", "name": name}}, "permissionClaims": claims},
            "status": {"phase": "Bound"},
        });
        self.bindings
            .insert((cluster.to_owned(), name.to_owned()), binding);
    }

    /// The `groups` entry of `/apis`.
    pub fn group(&self) -> Value {
        json!({
            "name": "apis.kcp.io",
            "versions": self.versions.iter().map(|v| json!({"groupVersion": format!("apis.kcp.io/{v}"), "version": v})).collect::<Vec<_>>(),
            "preferredVersion": {"groupVersion": format!("apis.kcp.io/{}", self.preferred), "version": self.preferred},
        })
    }

    /// Answers `resource` (the URI below `/clusters/<cluster>/`) if it is an apis.kcp.io path.
    pub fn handle(
        &mut self,
        method: &str,
        cluster: &str,
        resource: &str,
        content_type: &str,
        body: &[u8],
    ) -> Option<(u16, Value)> {
        let rest = resource.strip_prefix("apis/apis.kcp.io/")?;
        let mut parts = rest.split('/');
        let version = parts.next().unwrap_or_default();
        if !self.versions.contains(&version) {
            return Some(status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
        let kind = parts.next();
        let name = parts.next().map(str::to_owned);
        let key = (cluster.to_owned(), name.clone().unwrap_or_default());
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if method != "GET" {
            self.writes.push((
                method.to_owned(),
                format!("/clusters/{cluster}/{resource}"),
                content_type.to_owned(),
                body.clone(),
            ));
        }
        Some(match (method, kind, name) {
            ("GET", None, _) => (
                200,
                json!({"kind": "APIResourceList", "groupVersion": format!("apis.kcp.io/{version}"),
                "resources": [{"name": "apibindings", "kind": "APIBinding"}, {"name": "apiexports", "kind": "APIExport"}]}),
            ),
            ("GET", Some("apiexports"), Some(name)) => match self.exports.get(&key) {
                Some(export) => (200, export.clone()),
                None => status(
                    404,
                    "NotFound",
                    &format!("apiexports.apis.kcp.io {name:?} not found"),
                ),
            },
            ("GET", Some("apibindings"), None) => {
                let items: Vec<Value> = self
                    .bindings
                    .iter()
                    .filter(|((c, _), _)| c == cluster)
                    .map(|(_, b)| b.clone())
                    .collect();
                (200, json!({"kind": "APIBindingList", "items": items}))
            }
            ("GET", Some("apibindings"), Some(name)) => {
                let Some(mut binding) = self.bindings.get(&key).cloned() else {
                    return Some(status(
                        404,
                        "NotFound",
                        &format!("apibindings.apis.kcp.io {name:?} not found"),
                    ));
                };
                if let Some(left) = self.pending.get_mut(&key) {
                    if *left == 0 {
                        self.pending.remove(&key);
                        binding["status"] = json!({"phase": "Bound"});
                        self.bindings.insert(key, binding.clone());
                    } else {
                        *left -= 1;
                    }
                }
                (200, binding)
            }
            ("POST", Some("apibindings"), None) => {
                let name = body["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let key = (cluster.to_owned(), name.clone());
                if self.bindings.contains_key(&key) {
                    return Some(status(
                        409,
                        "AlreadyExists",
                        &format!("apibindings.apis.kcp.io {name:?} already exists"),
                    ));
                }
                self.resource_version += 1;
                let mut created = body;
                created["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
                created["status"] = json!({"phase": "Binding"});
                self.pending.insert(key.clone(), self.gets_until_bound);
                self.bindings.insert(key, created.clone());
                (201, created)
            }
            ("PATCH", Some("apibindings"), Some(name)) => {
                if content_type != "application/merge-patch+json" {
                    return Some(status(
                        415,
                        "UnsupportedMediaType",
                        &format!(
                            "the body of the request was in an unknown format: {content_type}"
                        ),
                    ));
                }
                let Some(binding) = self.bindings.get_mut(&key) else {
                    return Some(status(
                        404,
                        "NotFound",
                        &format!("apibindings.apis.kcp.io {name:?} not found"),
                    ));
                };
                if body["metadata"]["resourceVersion"] != binding["metadata"]["resourceVersion"] {
                    return Some(status(
                        409,
                        "Conflict",
                        &format!(
                            "Operation cannot be fulfilled on apibindings.apis.kcp.io {name:?}: the object has been modified; please apply your changes to the latest version and try again"
                        ),
                    ));
                }
                self.resource_version += 1;
                binding["spec"]["permissionClaims"] = body["spec"]["permissionClaims"].clone();
                binding["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
                (200, binding.clone())
            }
            _ => status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
        })
    }
}
