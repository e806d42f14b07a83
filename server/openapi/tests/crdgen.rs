//! The generated workload CRDs: structural schemas, the merge extensions server-side apply and
//! strategic merge patch need, subresources and columns that point at real fields, and the
//! checked-in copy under `e2e/workload-crds/` (rewrite it with `UPDATE_WORKLOAD_CRDS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use kcp_openapi::crdgen::{workload_crd_files, workload_crds, write_workload_crds};
use serde_json::{Value, json};

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e/workload-crds")
}

/// The generated CRDs, computed once for all tests.
fn crds() -> &'static [Value] {
    static CRDS: OnceLock<Vec<Value>> = OnceLock::new();
    CRDS.get_or_init(workload_crds)
}

fn crd(name: &str) -> &'static Value {
    crds()
        .iter()
        .find(|crd| crd["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no CRD {name}"))
}

fn schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

/// The schema node at a dotted path of field names; `[]` steps into array items, and a field
/// of a map (an object with `additionalProperties`) is its value schema.
fn node<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|step| !step.is_empty())
        .fold(schema, |node, step| match step {
            "[]" => &node["items"],
            field if node.get("properties").is_some() => &node["properties"][field],
            _ => &node["additionalProperties"],
        })
}

/// Keywords a structural CRD schema may use.
const KEYWORDS: &[&str] = &[
    "description",
    "type",
    "format",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "default",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
];

/// Every violation of Kubernetes' structural-schema rules below `node`, as `path: problem`.
fn structural_violations(node: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(node) = node else {
        out.push(format!("{path}: not an object"));
        return;
    };
    for key in node.keys() {
        if !KEYWORDS.contains(&key.as_str()) {
            out.push(format!("{path}: keyword {key} not allowed"));
        }
    }
    let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&json!(true));
    let preserve = node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    let kind = node.get("type").and_then(Value::as_str);
    match kind {
        None if !int_or_string && !preserve => out.push(format!("{path}: no type")),
        Some(_) if int_or_string => out.push(format!("{path}: int-or-string with a type")),
        Some("object" | "array" | "string" | "integer" | "number" | "boolean") | None => {}
        Some(other) => out.push(format!("{path}: unknown type {other}")),
    }
    if node.contains_key("properties") && node.contains_key("additionalProperties") {
        out.push(format!(
            "{path}: properties together with additionalProperties"
        ));
    }
    if (node.contains_key("properties") || node.contains_key("additionalProperties"))
        && kind != Some("object")
    {
        out.push(format!("{path}: properties on a non-object"));
    }
    if kind == Some("object")
        && !preserve
        && !node.contains_key("properties")
        && !node.contains_key("additionalProperties")
    {
        out.push(format!("{path}: object that prunes everything"));
    }
    if (kind == Some("array")) != node.contains_key("items") {
        out.push(format!("{path}: items and type array go together"));
    }
    if let Some(Value::Array(required)) = node.get("required") {
        for name in required {
            let name = name.as_str().unwrap_or_default();
            if node.get("properties").and_then(|p| p.get(name)).is_none() {
                out.push(format!("{path}: required {name} is not a property"));
            }
        }
    }
    if let Some(list_type) = node.get("x-kubernetes-list-type") {
        list_type_violations(node, list_type, path, out);
    }
    if let Some(Value::Object(properties)) = node.get("properties") {
        for (name, property) in properties {
            structural_violations(property, &format!("{path}.{name}"), out);
        }
    }
    for child in ["items", "additionalProperties"] {
        if let Some(schema) = node.get(child) {
            structural_violations(schema, &format!("{path}.{child}"), out);
        }
    }
}

/// Kubernetes' rules for list types: map lists have object items whose keys are required or
/// defaulted scalar properties; set lists have scalar items.
fn list_type_violations(
    node: &serde_json::Map<String, Value>,
    list_type: &Value,
    path: &str,
    out: &mut Vec<String>,
) {
    let item = &node["items"];
    match list_type.as_str() {
        Some("atomic") => {}
        Some("set") => {
            if matches!(item["type"].as_str(), Some("object" | "array")) {
                out.push(format!("{path}: set of non-scalars"));
            }
        }
        Some("map") => {
            let keys = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .filter(|keys| !keys.is_empty());
            let Some(keys) = keys else {
                out.push(format!("{path}: map list without keys"));
                return;
            };
            if item["type"] != "object" {
                out.push(format!("{path}: map list of non-objects"));
            }
            let required = item["required"].as_array().cloned().unwrap_or_default();
            for key in keys {
                let property = &item["properties"][key.as_str().unwrap_or_default()];
                if !matches!(
                    property["type"].as_str(),
                    Some("string" | "integer" | "number" | "boolean")
                ) {
                    out.push(format!("{path}: key {key} is not a scalar property"));
                }
                if !required.contains(key) && property.get("default").is_none() {
                    out.push(format!("{path}: key {key} neither required nor defaulted"));
                }
            }
        }
        other => out.push(format!("{path}: unknown list type {other:?}")),
    }
}

#[test]
fn every_schema_is_structural() {
    for crd in crds() {
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        let schema = schema(crd);
        assert!(
            !schema.to_string().contains("$ref"),
            "{name} still has references"
        );
        let mut violations = Vec::new();
        let mut root = schema.clone();
        // The apiserver owns the root metadata's schema; a CRD may only say it is an object.
        root["properties"]["metadata"] =
            json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
        structural_violations(&root, "", &mut violations);
        assert!(violations.is_empty(), "{name}: {violations:#?}");
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["properties"]["metadata"],
            json!({ "type": "object" }),
            "{name}: metadata must be a bare object"
        );
        for field in ["apiVersion", "kind"] {
            assert_eq!(schema["properties"][field]["type"], "string", "{name}");
        }
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        for field in ["apiVersion", "kind", "metadata"] {
            assert!(!required.contains(&json!(field)), "{name} requires {field}");
        }
    }
}

#[test]
fn nodes_are_cluster_scoped_with_status_and_the_fields_the_server_dials() {
    let nodes = crd("nodes.core");
    let spec = &nodes["spec"];
    assert_eq!(spec["group"], "");
    assert_eq!(spec["scope"], "Cluster");
    assert_eq!(spec["names"]["kind"], "Node");
    assert_eq!(spec["names"]["shortNames"], json!(["no"]));
    assert_eq!(spec["versions"][0]["subresources"], json!({ "status": {} }));
    let schema = schema(nodes);
    assert_eq!(
        node(schema, "status.addresses.[].address")["type"],
        "string"
    );
    assert_eq!(
        node(schema, "status.daemonEndpoints.kubeletEndpoint.Port")["type"],
        "integer"
    );
    assert_eq!(node(schema, "status.conditions.[].type")["type"], "string");
}

#[test]
fn names_scope_and_categories_match_kubernetes() {
    let expected = [
        ("deployments.apps", "apps", "Deployment", "deploy", true),
        ("statefulsets.apps", "apps", "StatefulSet", "sts", true),
        ("replicasets.apps", "apps", "ReplicaSet", "rs", true),
        ("daemonsets.apps", "apps", "DaemonSet", "ds", true),
        ("services.core", "", "Service", "svc", true),
        ("pods.core", "", "Pod", "po", true),
        (
            "persistentvolumeclaims.core",
            "",
            "PersistentVolumeClaim",
            "pvc",
            false,
        ),
        ("endpoints.core", "", "Endpoints", "ep", false),
        (
            "poddisruptionbudgets.policy",
            "policy",
            "PodDisruptionBudget",
            "pdb",
            false,
        ),
    ];
    let names: BTreeSet<&str> = crds()
        .iter()
        .map(|crd| crd["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 11);
    assert!(names.contains("endpointslices.discovery.k8s.io"));
    for (name, group, kind, short_name, in_all) in expected {
        let crd = crd(name);
        let spec = &crd["spec"];
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(crd["kind"], "CustomResourceDefinition");
        assert_eq!(spec["group"], group, "{name}");
        assert_eq!(spec["scope"], "Namespaced", "{name}");
        let names = &spec["names"];
        assert_eq!(names["kind"], kind);
        assert_eq!(names["listKind"], format!("{kind}List"));
        assert_eq!(names["singular"], kind.to_lowercase());
        assert_eq!(
            format!(
                "{}.{}",
                names["plural"].as_str().unwrap(),
                if group.is_empty() { "core" } else { group }
            ),
            name
        );
        assert_eq!(names["shortNames"], json!([short_name]), "{name}");
        assert_eq!(
            names.get("categories") == Some(&json!(["all"])),
            in_all,
            "{name} categories"
        );
        let versions = spec["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0]["name"], "v1");
        assert_eq!(versions[0]["served"], true);
        assert_eq!(versions[0]["storage"], true);
    }
    let slices = crd("endpointslices.discovery.k8s.io");
    assert_eq!(slices["spec"]["group"], "discovery.k8s.io");
    assert_eq!(slices["spec"]["names"]["kind"], "EndpointSlice");
}

#[test]
fn status_subresource_exactly_where_the_kind_has_status() {
    for crd in crds() {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let version = &crd["spec"]["versions"][0];
        let has_status = schema(crd)["properties"].get("status").is_some();
        assert_eq!(
            version["subresources"].get("status") == Some(&json!({})),
            has_status,
            "{name}"
        );
    }
    for name in ["endpoints.core", "endpointslices.discovery.k8s.io"] {
        assert!(
            crd(name)["spec"]["versions"][0]
                .get("subresources")
                .is_none()
        );
    }
}

#[test]
fn scale_subresource_paths_point_at_schema_fields() {
    let scaled: Vec<String> = crds()
        .iter()
        .filter(|crd| {
            crd["spec"]["versions"][0]["subresources"]
                .get("scale")
                .is_some()
        })
        .map(|crd| crd["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        scaled,
        ["deployments.apps", "statefulsets.apps", "replicasets.apps"]
    );
    for name in scaled {
        let crd = crd(&name);
        let scale = &crd["spec"]["versions"][0]["subresources"]["scale"];
        assert_eq!(scale["specReplicasPath"], ".spec.replicas");
        assert_eq!(scale["statusReplicasPath"], ".status.replicas");
        assert_eq!(scale["labelSelectorPath"], ".status.labelSelector");
        for (key, kind) in [
            ("specReplicasPath", "integer"),
            ("statusReplicasPath", "integer"),
            ("labelSelectorPath", "string"),
        ] {
            let path = scale[key].as_str().unwrap();
            assert_eq!(node(schema(crd), path)["type"], kind, "{name} {key}");
        }
    }
}

#[test]
fn printer_columns_point_at_schema_fields() {
    for crd in crds() {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap();
        assert!(
            columns.iter().any(|column| column["name"] == "Age"
                && column["type"] == "date"
                && column["jsonPath"] == ".metadata.creationTimestamp"),
            "{name} has no Age column"
        );
        for column in columns {
            let path = column["jsonPath"].as_str().unwrap();
            if path.starts_with(".metadata.") {
                continue;
            }
            let steps = path.replace("[*]", ".[]").replace("[0]", ".[]");
            let field = node(schema(crd), &steps);
            assert!(
                field.get("type").is_some() || field.get("x-kubernetes-int-or-string").is_some(),
                "{name}: column {} points at {path}, not a schema field",
                column["name"]
            );
            let kind = column["type"].as_str().unwrap();
            assert!(["integer", "number", "string", "boolean", "date"].contains(&kind));
        }
    }
    let columns: Vec<(String, String)> =
        crd("deployments.apps")["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|column| column.get("priority").is_none())
            .map(|column| {
                (
                    column["name"].as_str().unwrap().to_owned(),
                    column["jsonPath"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
    assert_eq!(
        columns,
        [
            ("Ready".to_owned(), ".status.readyReplicas".to_owned()),
            (
                "Up-to-date".to_owned(),
                ".status.updatedReplicas".to_owned()
            ),
            (
                "Available".to_owned(),
                ".status.availableReplicas".to_owned()
            ),
            ("Age".to_owned(), ".metadata.creationTimestamp".to_owned()),
        ]
    );
}

#[test]
fn merge_extensions_survive_inlining() {
    let deployment = crd("deployments.apps");
    let pod_spec = node(schema(deployment), "spec.template.spec");
    let containers = node(pod_spec, "containers");
    assert_eq!(containers["x-kubernetes-list-type"], "map");
    assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    let ports = node(pod_spec, "containers.[].ports");
    assert_eq!(
        ports["x-kubernetes-list-map-keys"],
        json!(["containerPort", "protocol"])
    );
    assert_eq!(
        node(pod_spec, "containers.[].ports.[].protocol")["default"],
        "TCP"
    );
    assert_eq!(
        node(pod_spec, "volumes")["x-kubernetes-patch-strategy"],
        "merge,retainKeys"
    );
    assert_eq!(
        node(pod_spec, "nodeSelector")["x-kubernetes-map-type"],
        "atomic"
    );
    assert_eq!(
        node(schema(deployment), "spec.selector")["x-kubernetes-map-type"],
        "atomic"
    );
    assert_eq!(
        node(schema(deployment), "spec.strategy")["x-kubernetes-patch-strategy"],
        "retainKeys"
    );
    assert_eq!(
        node(schema(deployment), "status.conditions")["x-kubernetes-list-map-keys"],
        json!(["type"])
    );
    // The template's metadata is a full ObjectMeta, so labels survive pruning.
    let template_metadata = node(schema(deployment), "spec.template.metadata");
    assert_eq!(node(template_metadata, "labels.app")["type"], "string");
    assert_eq!(
        node(template_metadata, "finalizers")["x-kubernetes-list-type"],
        "set"
    );

    let service = crd("services.core");
    let ports = node(schema(service), "spec.ports");
    assert_eq!(ports["x-kubernetes-list-type"], "map");
    assert_eq!(
        ports["x-kubernetes-list-map-keys"],
        json!(["port", "protocol"])
    );
    assert_eq!(ports["x-kubernetes-patch-merge-key"], "port");
    assert_eq!(ports["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(ports["items"]["required"], json!(["port"]));
    assert_eq!(ports["items"]["properties"]["protocol"]["default"], "TCP");
    assert_eq!(
        ports["items"]["properties"]["targetPort"],
        json!({
            "description": ports["items"]["properties"]["targetPort"]["description"],
            "x-kubernetes-int-or-string": true,
        })
    );
    assert_eq!(
        node(schema(service), "spec.selector")["x-kubernetes-map-type"],
        "atomic"
    );

    let slices = crd("endpointslices.discovery.k8s.io");
    assert_eq!(
        node(schema(slices), "endpoints.[].addresses")["x-kubernetes-list-type"],
        "set"
    );
}

#[test]
fn special_types_map_to_structural_forms() {
    let pod = crd("pods.core");
    let container = node(schema(pod), "spec.containers.[]");
    let limits = node(container, "resources.limits.cpu");
    assert_eq!(limits["x-kubernetes-int-or-string"], true);
    assert!(limits.get("type").is_none());
    let started = node(schema(pod), "status.startTime");
    assert_eq!(
        (&started["type"], &started["format"]),
        (&json!("string"), &json!("date-time"))
    );
    // FieldsV1 (in an embedded ObjectMeta) has no declared fields and must keep its content.
    let fields = node(
        schema(pod),
        "spec.volumes.[].ephemeral.volumeClaimTemplate.metadata.managedFields.[].fieldsV1",
    );
    assert_eq!(fields["type"], "object");
    assert_eq!(fields["x-kubernetes-preserve-unknown-fields"], true);
    // Descriptions are kept (shortened) for kubectl explain.
    let description = node(schema(pod), "spec.containers")["description"]
        .as_str()
        .unwrap();
    assert!(description.starts_with("List of containers belonging to the pod."));
    // k8s-openapi requires `metadata` of embedded objects; Kubernetes never does.
    let statefulset = crd("statefulsets.apps");
    let claim = node(schema(statefulset), "spec.volumeClaimTemplates.[]");
    assert!(claim.get("required").is_none(), "{}", claim["required"]);
}

#[test]
fn the_servers_crd_admission_accepts_every_crd() {
    for crd in crds() {
        let errors = kcp_apiextensions::validate_crd(crd);
        assert!(
            errors.is_empty(),
            "{}: {errors:#?}",
            crd["metadata"]["name"]
        );
    }
}

/// A typical Deployment as k8s-openapi serializes it, touching most kinds of field the e2e
/// workloads use.
fn sample_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "kcp", "namespace": "default", "labels": { "app": "kcp" } },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "kcp" } },
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": 1 } },
            "template": {
                "metadata": { "labels": { "app": "kcp" }, "annotations": { "a": "b" } },
                "spec": {
                    "serviceAccountName": "kcp",
                    "containers": [{
                        "name": "kcp",
                        "image": "ghcr.io/kcp-dev/kcp:v0.1",
                        "args": ["--root-directory=/data", "--token=$(TOKEN)"],
                        "env": [
                            { "name": "POD_IP", "valueFrom": { "fieldRef": { "fieldPath": "status.podIP" } } },
                            { "name": "TOKEN", "valueFrom": { "secretKeyRef": { "name": "s", "key": "token" } } },
                        ],
                        "ports": [{ "name": "https", "containerPort": 6443, "protocol": "TCP" }],
                        "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "memory": 1073741824 } },
                        "readinessProbe": { "httpGet": { "path": "/readyz", "port": "https", "scheme": "HTTPS" }, "periodSeconds": 5 },
                        "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
                        "securityContext": { "runAsNonRoot": true, "capabilities": { "drop": ["ALL"] } },
                    }],
                    "volumes": [
                        { "name": "data", "persistentVolumeClaim": { "claimName": "data" } },
                        { "name": "tmp", "emptyDir": { "sizeLimit": "1Gi" } },
                        { "name": "certs", "projected": { "sources": [{ "secret": { "name": "c", "items": [{ "key": "tls.crt", "path": "tls.crt" }] } }] } },
                    ],
                    "tolerations": [{ "key": "k", "operator": "Exists", "effect": "NoSchedule" }],
                },
            },
        },
        "status": {
            "replicas": 2,
            "readyReplicas": 2,
            "observedGeneration": 1,
            "conditions": [{ "type": "Available", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "MinimumReplicasAvailable" }],
        },
    })
}

/// `object` passes the CRD's schema as the server applies it: nothing pruned, no errors.
fn assert_accepted_unchanged(
    crd_name: &str,
    object: &Value,
) -> kcp_apiextensions::StructuralSchema {
    let schema =
        kcp_apiextensions::StructuralSchema::new(schema(crd(crd_name))).expect("structural");
    let mut pruned_object = object.clone();
    let pruned = schema.prune(&mut pruned_object);
    assert!(pruned.is_empty(), "{crd_name}: pruned {pruned:?}");
    assert_eq!(&pruned_object, object);
    let errors = schema.validate(object);
    assert!(errors.is_empty(), "{crd_name}: {errors:#?}");
    schema
}

#[test]
fn a_real_deployment_survives_pruning_validation_and_defaulting() {
    let schema = assert_accepted_unchanged("deployments.apps", &sample_deployment());

    // A port without a protocol gets Kubernetes' default, so it can be a list-map key.
    let mut without_protocol = sample_deployment();
    let port = &mut without_protocol["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    port.as_object_mut().unwrap().remove("protocol");
    schema.apply_defaults(&mut without_protocol);
    assert_eq!(without_protocol, sample_deployment());

    let mut unknown = sample_deployment();
    unknown["spec"]["template"]["spec"]["containers"][0]["bogus"] = json!(1);
    assert_eq!(
        schema.prune(&mut unknown),
        ["spec.template.spec.containers[0].bogus"]
    );
}

#[test]
fn real_statefulsets_services_and_pdbs_survive_pruning_and_validation() {
    let mut statefulset = sample_deployment();
    statefulset["kind"] = json!("StatefulSet");
    let spec = statefulset["spec"].as_object_mut().unwrap();
    spec.remove("strategy");
    spec.insert("serviceName".into(), json!("etcd"));
    spec.insert("podManagementPolicy".into(), json!("Parallel"));
    spec.insert(
        "volumeClaimTemplates".into(),
        json!([{
            "metadata": { "name": "data" },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
        }]),
    );
    statefulset["status"]["labelSelector"] = json!("app=kcp");
    assert_accepted_unchanged("statefulsets.apps", &statefulset);

    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": "etcd" },
        "spec": {
            "clusterIP": "None",
            "selector": { "app": "etcd" },
            "ports": [
                { "name": "client", "port": 2379, "protocol": "TCP", "targetPort": 2379 },
                { "name": "peer", "port": 2380, "protocol": "TCP", "targetPort": "peer" },
            ],
        },
    });
    assert_accepted_unchanged("services.core", &service);

    let pdb = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": { "name": "etcd" },
        "spec": { "minAvailable": "51%", "selector": { "matchLabels": { "app": "etcd" } } },
        "status": { "currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1, "expectedPods": 3 },
    });
    assert_accepted_unchanged("poddisruptionbudgets.policy", &pdb);
}

#[test]
fn checked_in_files_match_the_generator() {
    let dir = crds_dir();
    if std::env::var_os("UPDATE_WORKLOAD_CRDS").is_some() {
        write_workload_crds(&dir).expect("write CRDs");
    }
    let files = workload_crd_files().expect("render CRDs");
    let mut stale = Vec::new();
    for (file_name, yaml) in &files {
        let path = dir.join(file_name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(yaml.as_str()) {
            stale.push(path.display().to_string());
        }
        let parsed: Value = yaml_serde::from_str(yaml).expect("YAML parses");
        assert_eq!(
            parsed["metadata"]["name"],
            file_name.trim_end_matches(".yaml")
        );
    }
    let generated: BTreeSet<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    for entry in std::fs::read_dir(&dir).expect("e2e/workload-crds exists") {
        let name = entry.expect("directory entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".yaml") && !generated.contains(name.as_ref()) {
            stale.push(format!("{name} (no longer generated; delete it)"));
        }
    }
    assert!(
        stale.is_empty(),
        "stale workload CRDs (regenerate with UPDATE_WORKLOAD_CRDS=1 cargo test -p kcp-openapi --test crdgen): {stale:?}"
    );
}

#[test]
fn write_creates_one_file_per_crd() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_workload_crds(&dir.path().join("nested")).expect("write");
    assert_eq!(written.len(), crds().len());
    for path in &written {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.starts_with("# Generated by kcp_openapi::crdgen"));
    }
}
