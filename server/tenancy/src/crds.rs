//! The CustomResourceDefinitions of `tenancy.kcp.io` Workspace and WorkspaceType and
//! `core.kcp.io` LogicalCluster, served in every logical cluster, and of `core.kcp.io` Shard,
//! served in `root` only (upstream binds it there through the `shards.core.kcp.io` APIExport).
//!
//! Serving them as CRDs reuses the server's structural-schema machinery (pruning, defaulting,
//! validation, CEL immutability rules, tables, discovery, OpenAPI) so clients (`kubectl ws`,
//! `kubectl get ws`, controllers) see upstream's shapes: the field names, types, enums,
//! patterns, defaults, printer columns, short names and categories of upstream's generated
//! `config/crds/*.yaml` (descriptions trimmed to the top-level fields).

use serde_json::{Value, json};

const NAME_PATTERN: &str = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";
const TYPE_NAME_PATTERN: &str = "^[a-z]([a-z0-9-]{0,61}[a-z0-9])?";
const PATH_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const LIFECYCLE_PATTERN: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:[a-z0-9][a-z0-9]([-a-z0-9]*[a-z0-9])?))|(system:.+)$";
const PHASES: [&str; 7] = [
    "Scheduling",
    "Initializing",
    "Ready",
    "Unavailable",
    "Inactive",
    "Terminating",
    "Deleting",
];

/// The three CRDs: workspaces, workspacetypes (tenancy.kcp.io), logicalclusters (core.kcp.io).
pub fn crds() -> Vec<Value> {
    vec![workspaces(), workspace_types(), logical_clusters()]
}

/// The CRDs served in the `root` logical cluster only: shards (core.kcp.io).
pub fn root_crds() -> Vec<Value> {
    vec![shards()]
}

fn string() -> Value {
    json!({"type": "string"})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn atomic_strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"})
}

fn conditions() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": string(),
                "reason": string(),
                "severity": string(),
                "status": string(),
                "type": string(),
            },
        },
    })
}

fn type_reference() -> Value {
    json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": TYPE_NAME_PATTERN},
            "path": {"type": "string", "pattern": PATH_PATTERN},
        },
    })
}

fn type_selector() -> Value {
    json!({
        "type": "object",
        "oneOf": [{"required": ["none"]}, {"required": ["types"]}],
        "properties": {
            "none": {"type": "boolean"},
            "types": {"type": "array", "minItems": 1, "items": type_reference()},
        },
    })
}

fn lifecycle_names() -> Value {
    json!({"type": "array", "items": {"type": "string", "pattern": LIFECYCLE_PATTERN}})
}

fn phase() -> Value {
    json!({"type": "string", "default": "Scheduling", "enum": PHASES})
}

fn policy_rules() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["verbs"],
            "properties": {
                "apiGroups": atomic_strings(),
                "nonResourceURLs": atomic_strings(),
                "resourceNames": atomic_strings(),
                "resources": atomic_strings(),
                "verbs": atomic_strings(),
            },
        },
    })
}

fn column(name: &str, json_path: &str, type_: &str, description: &str) -> Value {
    let mut column = json!({"name": name, "type": type_, "jsonPath": json_path});
    if !description.is_empty() {
        column["description"] = json!(description);
    }
    column
}

fn age() -> Value {
    column("Age", ".metadata.creationTimestamp", "date", "")
}

struct Names<'a> {
    group: &'a str,
    kind: &'a str,
    plural: &'a str,
    short_names: &'a [&'a str],
    /// Required top-level fields.
    required: &'a [&'a str],
}

fn crd(names: Names<'_>, description: &str, columns: Vec<Value>, properties: Value) -> Value {
    let singular = names.kind.to_lowercase();
    let mut schema = json!({
        "type": "object",
        "description": description,
        "properties": {
            "apiVersion": string(),
            "kind": string(),
        },
    });
    if !names.required.is_empty() {
        schema["required"] = json!(names.required);
    }
    if let (Some(all), Some(own)) = (schema["properties"].as_object_mut(), properties.as_object()) {
        all.extend(own.clone());
    }
    let mut spec_names = json!({
        "kind": names.kind,
        "listKind": format!("{}List", names.kind),
        "plural": names.plural,
        "singular": singular,
        "categories": ["kcp"],
    });
    if !names.short_names.is_empty() {
        spec_names["shortNames"] = json!(names.short_names);
    }
    let mut version = json!({
        "name": "v1alpha1",
        "served": true,
        "storage": true,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": schema},
    });
    if !columns.is_empty() {
        version["additionalPrinterColumns"] = json!(columns);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", names.plural, names.group)},
        "spec": {
            "group": names.group,
            "names": spec_names,
            "scope": "Cluster",
            "versions": [version],
        },
    })
}

fn workspaces() -> Value {
    let selector = json!({
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {"key": string(), "operator": string(), "values": atomic_strings()},
                },
            },
            "matchLabels": {"type": "object", "additionalProperties": string()},
        },
    });
    let mut type_ref = type_reference();
    type_ref["x-kubernetes-validations"] = json!([
        {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
        {"rule": "has(oldSelf.path) == has(self.path)", "message": "path is immutable"},
        {"rule": "!has(oldSelf.path) || !has(self.path) || self.path == oldSelf.path", "message": "path is immutable"},
    ]);
    crd(
        Names {
            group: "tenancy.kcp.io",
            kind: "Workspace",
            plural: "workspaces",
            short_names: &["ws"],
            required: &["spec"],
        },
        "Workspace defines a generic Kubernetes-cluster-like endpoint, with standard Kubernetes discovery APIs, OpenAPI and resource API endpoints.",
        vec![
            column("Type", ".spec.type.name", "string", "Type of the workspace"),
            column(
                "Region",
                ".metadata.labels['region']",
                "string",
                "The region this workspace is in",
            ),
            column(
                "Phase",
                ".status.phase",
                "string",
                "The current phase (e.g. Scheduling, Initializing, Ready, Deleting)",
            ),
            column("URL", ".spec.URL", "string", "URL to access the workspace"),
            age(),
        ],
        json!({
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 63, "pattern": NAME_PATTERN}},
            },
            "spec": {
                "type": "object",
                "default": {},
                "x-kubernetes-validations": [
                    {"rule": "!has(oldSelf.URL) || has(self.URL)", "message": "URL cannot be unset"},
                    {"rule": "!has(oldSelf.cluster) || has(self.cluster)", "message": "cluster cannot be unset"},
                ],
                "properties": {
                    "URL": string(),
                    "cluster": {
                        "type": "string",
                        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "cluster is immutable"}],
                    },
                    "location": {"type": "object", "properties": {"selector": selector}},
                    "mount": {
                        "type": "object",
                        "required": ["ref"],
                        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "mount is immutable"}],
                        "properties": {
                            "ref": {
                                "type": "object",
                                "required": ["apiVersion", "kind", "name"],
                                "x-kubernetes-validations": [
                                    {"rule": "has(oldSelf.apiVersion) == has(self.apiVersion)", "message": "apiVersion is immutable"},
                                    {"rule": "has(oldSelf.kind) == has(self.kind)", "message": "kind is immutable"},
                                    {"rule": "has(oldSelf.name) == has(self.name)", "message": "name is immutable"},
                                ],
                                "properties": {
                                    "apiVersion": string(),
                                    "kind": string(),
                                    "name": string(),
                                    "namespace": string(),
                                },
                            },
                        },
                    },
                    "type": type_ref,
                },
            },
            "status": {
                "type": "object",
                "default": {},
                "properties": {
                    "conditions": conditions(),
                    "initializers": lifecycle_names(),
                    "phase": phase(),
                    "terminators": lifecycle_names(),
                },
            },
        }),
    )
}

fn workspace_types() -> Value {
    let mut default_child = type_reference();
    default_child["default"] = json!({"name": "universal", "path": "root"});
    crd(
        Names {
            group: "tenancy.kcp.io",
            kind: "WorkspaceType",
            plural: "workspacetypes",
            short_names: &[],
            required: &[],
        },
        "WorkspaceType specifies behaviour of workspaces of this type.",
        Vec::new(),
        json!({
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 63,
                        "pattern": NAME_PATTERN,
                        "not": {"enum": crate::types::RESERVED_NAMES},
                    },
                },
            },
            "spec": {
                "type": "object",
                "properties": {
                    "additionalWorkspaceLabels": {"type": "object", "additionalProperties": string()},
                    "authenticationConfigurations": {
                        "type": "array",
                        "items": {"type": "object", "required": ["name"], "properties": {"name": string()}},
                    },
                    "defaultAPIBindingLifecycle": {"type": "string", "enum": ["InitializeOnly", "Maintain"]},
                    "defaultAPIBindings": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["export"],
                            "properties": {
                                "export": string(),
                                "path": {"type": "string", "pattern": PATH_PATTERN},
                            },
                        },
                    },
                    "defaultChildWorkspaceType": default_child,
                    "extend": {
                        "type": "object",
                        "properties": {"with": {"type": "array", "items": type_reference()}},
                    },
                    "initializer": {"type": "boolean"},
                    "initializerPermissions": policy_rules(),
                    "limitAllowedChildren": type_selector(),
                    "limitAllowedParents": type_selector(),
                    "terminator": {"type": "boolean"},
                    "terminatorPermissions": policy_rules(),
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "conditions": conditions(),
                    "virtualWorkspaces": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["url"],
                            "properties": {
                                "type": {"type": "string", "enum": ["initializing", "terminating"]},
                                "url": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                },
            },
        }),
    )
}

fn logical_clusters() -> Value {
    crd(
        Names {
            group: "core.kcp.io",
            kind: "LogicalCluster",
            plural: "logicalclusters",
            short_names: &[],
            required: &[],
        },
        "LogicalCluster describes the current logical cluster. It is used to authorize requests to the logical cluster and to track state. A LogicalCluster is always named \"cluster\".",
        vec![
            column(
                "Phase",
                ".status.phase",
                "string",
                "The current phase (e.g. Scheduling, Initializing, Ready, Deleting)",
            ),
            column(
                "URL",
                ".status.URL",
                "string",
                "URL to access the logical cluster",
            ),
            age(),
        ],
        json!({
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "enum": [crate::logical_cluster::NAME]}},
            },
            "spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "createdBy": {
                        "type": "object",
                        "properties": {
                            "extra": {"type": "object", "additionalProperties": strings()},
                            "groups": strings(),
                            "uid": string(),
                            "username": string(),
                        },
                    },
                    "directlyDeletable": {"type": "boolean", "default": false},
                    "initializers": lifecycle_names(),
                    "owner": {
                        "type": "object",
                        "required": ["apiVersion", "cluster", "name", "resource", "uid"],
                        "properties": {
                            "apiVersion": {"type": "string", "pattern": "^([^/]+/)?[^/]+$"},
                            "cluster": {"type": "string", "minLength": 1},
                            "name": {"type": "string", "minLength": 1},
                            "namespace": string(),
                            "resource": {"type": "string", "minLength": 1},
                            "uid": string(),
                        },
                    },
                    "terminators": lifecycle_names(),
                },
            },
            "status": {
                "type": "object",
                "default": {},
                "properties": {
                    "URL": string(),
                    "conditions": conditions(),
                    "initializers": lifecycle_names(),
                    "phase": phase(),
                    "terminators": lifecycle_names(),
                },
            },
        }),
    )
}

fn shards() -> Value {
    let url = json!({"type": "string", "minLength": 1});
    let mut shard_conditions = conditions();
    // Ours: when the shard last said it is alive (the Ready condition's heartbeat).
    shard_conditions["items"]["properties"]["lastHeartbeatTime"] =
        json!({"type": "string", "format": "date-time"});
    crd(
        Names {
            group: "core.kcp.io",
            kind: "Shard",
            plural: "shards",
            short_names: &[],
            required: &["spec"],
        },
        "Shard describes a Shard (== KCP instance) on which a number of workspaces will live",
        vec![
            column(
                "Region",
                ".metadata.labels['region']",
                "string",
                "The region this workspace is in",
            ),
            column(
                "URL",
                ".spec.baseURL",
                "string",
                "Type URL to directly connect to the shard",
            ),
            column(
                "External URL",
                ".spec.externalURL",
                "string",
                "The URL exposed in workspaces created on that shard",
            ),
            age(),
        ],
        json!({
            "spec": {
                "type": "object",
                "required": ["baseURL"],
                "properties": {
                    "baseURL": url,
                    "externalURL": url,
                    "virtualWorkspaceURL": url,
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "capacity": {
                        "type": "object",
                        "properties": {
                            "logicalClusters": {"type": "integer", "minimum": 0},
                            "maxLogicalClusters": {"type": "integer", "minimum": 0},
                        },
                    },
                    "conditions": shard_conditions,
                },
            },
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_apiextensions::StructuralSchema;

    fn by_name(name: &str) -> Value {
        crds()
            .into_iter()
            .find(|crd| crd["metadata"]["name"] == name)
            .unwrap()
    }

    fn schema(name: &str) -> StructuralSchema {
        StructuralSchema::new(&by_name(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
            .unwrap()
    }

    #[test]
    fn crds_pass_crd_admission() {
        let all = crds();
        assert_eq!(all.len(), 3);
        for crd in &all {
            assert_eq!(
                kcp_apiextensions::validate_crd(crd),
                Vec::new(),
                "{}",
                crd["metadata"]["name"]
            );
            assert_eq!(crd["spec"]["scope"], "Cluster");
            assert_eq!(crd["spec"]["names"]["categories"], json!(["kcp"]));
            assert_eq!(
                crd["spec"]["versions"][0]["subresources"],
                json!({"status": {}})
            );
        }
    }

    #[test]
    fn the_shard_crd_passes_admission_and_keeps_the_heartbeat() {
        let crd = &root_crds()[0];
        assert_eq!(kcp_apiextensions::validate_crd(crd), Vec::new());
        let schema =
            StructuralSchema::new(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
                .unwrap();
        let mut shard = crate::shard::heartbeat(
            &crate::shard::object(
                "root",
                "p",
                &crate::shard::Urls::with_defaults("https://a".into(), None, None),
            ),
            crate::shard::Capacity {
                logical_clusters: 1,
                max_logical_clusters: None,
            },
            jiff::Timestamp::UNIX_EPOCH,
        );
        assert_eq!(schema.prune(&mut shard), Vec::<String>::new());
        assert!(schema.validate(&shard).is_empty());
    }

    #[test]
    fn workspace_table_and_names_match_kubectl_get_ws() {
        let ws = by_name("workspaces.tenancy.kcp.io");
        assert_eq!(ws["spec"]["names"]["shortNames"], json!(["ws"]));
        let columns: Vec<&str> = ws["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Type", "Region", "Phase", "URL", "Age"]);
    }

    #[test]
    fn workspace_schema_validates_and_defaults() {
        let schema = schema("workspaces.tenancy.kcp.io");
        let mut ws = json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "team-a"}, "spec": {"type": {"name": "universal", "path": "root"}, "bogus": 1}});
        assert_eq!(schema.prune(&mut ws), vec!["spec.bogus".to_string()]);
        schema.apply_defaults(&mut ws);
        assert_eq!(ws["status"]["phase"], "Scheduling");
        assert!(schema.validate(&ws).is_empty());
        let bad = json!({"metadata": {"name": "team-a"}, "spec": {"type": {"name": "Universal"}}, "status": {"phase": "Running"}});
        let errors: Vec<String> = schema
            .validate(&bad)
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert!(errors.contains(&"spec.type.name".to_string()), "{errors:?}");
        assert!(errors.contains(&"status.phase".to_string()), "{errors:?}");
    }

    #[test]
    fn workspace_type_schema_rejects_reserved_names_and_empty_selectors() {
        let schema = schema("workspacetypes.tenancy.kcp.io");
        let reserved = json!({"metadata": {"name": "any"}, "spec": {}});
        assert!(!schema.validate(&reserved).is_empty());
        let empty_selector =
            json!({"metadata": {"name": "x"}, "spec": {"limitAllowedParents": {}}});
        assert!(!schema.validate(&empty_selector).is_empty());
        let mut ok =
            json!({"metadata": {"name": "x"}, "spec": {"limitAllowedParents": {"none": true}}});
        schema.apply_defaults(&mut ok);
        assert_eq!(
            ok["spec"]["defaultChildWorkspaceType"],
            json!({"name": "universal", "path": "root"})
        );
        assert!(schema.validate(&ok).is_empty());
    }

    #[test]
    fn logical_cluster_schema_requires_the_singleton_name() {
        let schema = schema("logicalclusters.core.kcp.io");
        assert!(
            !schema
                .validate(&json!({"metadata": {"name": "other"}}))
                .is_empty()
        );
        let ok = json!({"metadata": {"name": "cluster"}, "spec": {"initializers": ["root:universal", "system:apibindings"]}, "status": {"phase": "Ready"}});
        assert!(schema.validate(&ok).is_empty());
        let bad = json!({"metadata": {"name": "cluster"}, "spec": {"initializers": ["Bad"]}});
        assert!(!schema.validate(&bad).is_empty());
    }
}
