//! The APIBinding `kubectl kcp bind apiexport` creates, following upstream's `bind.go` and
//! `helpers/apis/apis`: the `<path>:<export>` argument, the body in whichever of v1alpha1 and
//! v1alpha2 discovery prefers (same `spec.reference.export{path,name}`, claims shaped per
//! version) and the `Bound` phase the command waits for.

use serde_json::{Value, json};

use crate::claims::Claim;
use crate::error::Error;
use crate::path::ClusterPath;

/// The API group of APIBindings and APIExports.
pub const APIS_GROUP: &str = "apis.kcp.io";

/// The APIBinding versions this plugin speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingVersion {
    V1alpha1,
    V1alpha2,
}

impl BindingVersion {
    /// Upstream's `version %q is not supported by this plugin` for any other version.
    pub fn parse(version: &str) -> Result<Self, Error> {
        match version {
            "v1alpha1" => Ok(Self::V1alpha1),
            "v1alpha2" => Ok(Self::V1alpha2),
            other => Err(Error::msg(format!(
                "version {other:?} is not supported by this plugin"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1alpha1 => "v1alpha1",
            Self::V1alpha2 => "v1alpha2",
        }
    }

    /// `/apis/apis.kcp.io/<version>/apibindings` below a workspace.
    pub fn collection(self, cluster: &ClusterPath) -> String {
        format!(
            "{}/apis/{APIS_GROUP}/{}/apibindings",
            cluster.request_path(),
            self.as_str()
        )
    }
}

/// `<workspace path>:<APIExport name>`, the argument of `bind apiexport`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRef {
    pub path: ClusterPath,
    pub name: String,
}

impl ExportRef {
    pub fn parse(arg: &str) -> Result<Self, Error> {
        if arg.is_empty() {
            return Err(Error::msg(
                "`root:ws:apiexport_object` reference to bind is required as an argument",
            ));
        }
        let full = ClusterPath::new(arg);
        let (path, name) = full.split();
        if !path.is_valid() {
            return Err(Error::msg(
                "fully qualified reference to workspace where APIExport exists is required. The format is `<logical-cluster-name>:<apiexport>` or `<full>:<path>:<to>:<apiexport>`",
            ));
        }
        if name.is_empty() {
            return Err(Error::msg(format!(
                "the APIExport name is missing in {arg:?}: the format is `<workspace path>:<apiexport>`"
            )));
        }
        Ok(Self {
            name: name.to_owned(),
            path,
        })
    }
}

/// The APIBinding object to create: named `name` (the export's name when empty).
pub fn binding_object(
    version: BindingVersion,
    name: &str,
    export: &ExportRef,
    claims: &[Claim],
) -> Value {
    let name = if name.is_empty() { &export.name } else { name };
    let mut spec = json!({
        "reference": {"export": {"path": export.path.as_str(), "name": export.name}},
    });
    if !claims.is_empty() {
        spec["permissionClaims"] = claims.iter().map(|c| c.to_object(version)).collect();
    }
    json!({
        "kind": "APIBinding",
        "apiVersion": format!("{APIS_GROUP}/{}", version.as_str()),
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// `status.phase == Bound`, what upstream's bind waits for.
pub fn is_bound(binding: &Value) -> bool {
    binding.pointer("/status/phase").and_then(Value::as_str) == Some("Bound")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::ClaimState;

    #[test]
    fn export_references() {
        let ok = ExportRef::parse("root:my-service:my-export").ok();
        assert_eq!(
            ok,
            Some(ExportRef {
                path: ClusterPath::new("root:my-service"),
                name: "my-export".into()
            })
        );
        let no_colon = ExportRef::parse("my-export").err().map(|e| e.to_string());
        assert!(no_colon.is_some_and(|e| e.starts_with("fully qualified reference")));
        let no_name = ExportRef::parse("root:").err().map(|e| e.to_string());
        assert!(no_name.is_some_and(|e| e.contains("APIExport name is missing")));
        assert!(ExportRef::parse("").is_err());
        assert!(ExportRef::parse("Root:x").is_err());
    }

    #[test]
    fn bodies_per_version() {
        let export = ExportRef {
            path: ClusterPath::new("root:svc"),
            name: "widgets".into(),
        };
        let claims = [Claim {
            group: String::new(),
            resource: "secrets".into(),
            identity_hash: String::new(),
            state: ClaimState::Accepted,
        }];
        assert_eq!(
            binding_object(BindingVersion::V1alpha2, "", &export, &claims),
            json!({"kind": "APIBinding", "apiVersion": "apis.kcp.io/v1alpha2",
                   "metadata": {"name": "widgets"},
                   "spec": {"reference": {"export": {"path": "root:svc", "name": "widgets"}},
                            "permissionClaims": [{"resource": "secrets", "verbs": ["*"],
                                                  "selector": {"matchAll": true}, "state": "Accepted"}]}})
        );
        assert_eq!(
            binding_object(BindingVersion::V1alpha1, "mine", &export, &[]),
            json!({"kind": "APIBinding", "apiVersion": "apis.kcp.io/v1alpha1",
                   "metadata": {"name": "mine"},
                   "spec": {"reference": {"export": {"path": "root:svc", "name": "widgets"}}}})
        );
        assert!(is_bound(&json!({"status": {"phase": "Bound"}})));
        assert!(!is_bound(&json!({"status": {"phase": "Binding"}})));
        assert!(BindingVersion::parse("v1").is_err());
    }
}
