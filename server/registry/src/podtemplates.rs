//! core/v1 PodTemplate: a namespaced, stored pod template, as kube-apiserver's
//! `pkg/registry/core/podtemplate` serves it.
//!
//! Pods themselves are not built in here (like kcp, workload kinds are CRDs on the host), but
//! PodTemplates are a core/v1 type every kube-apiserver serves and client-go's tests and tools use
//! (list chunking is usually exercised on them). Matching upstream:
//! - the strategy: `metadata.generation` is 1 on create and moves when `template` changes;
//! - defaults of the v1 pod spec a client reads back (`SetDefaults_PodSpec`, `SetDefaults_Container`,
//!   `SetDefaults_ContainerPort`): restart and DNS policy, grace period, scheduler name, security
//!   context, termination message path and policy, image pull policy, port protocol;
//! - `ValidatePodTemplate` for the parts of a pod spec that need no node or feature context:
//!   containers required, container and volume names, images, ports, enumerated policies, no
//!   ephemeral containers, the template's labels and annotations;
//! - the table printer: NAME, CONTAINERS, IMAGES, POD LABELS, and no age column.

use std::collections::BTreeMap;

use kcp_apimachinery::validation::{self, is_dns1123_label};
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy};

pub fn resource() -> ResourceType {
    super::resource(
        "",
        "PodTemplate",
        "podtemplates",
        true,
        &[],
        Box::new(PodTemplates),
    )
}

struct PodTemplates;

const RESTART_POLICIES: [&str; 3] = ["Always", "Never", "OnFailure"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const TERMINATION_MESSAGE_POLICIES: [&str; 2] = ["FallbackToLogsOnError", "File"];
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
/// The container lists of a pod spec, in the order kube validates them.
const CONTAINER_LISTS: [&str; 2] = ["initContainers", "containers"];

impl Strategy for PodTemplates {
    fn prepare_for_create(&self, object: &mut Value) {
        meta::set_generation(object, 1);
        default_template(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, _subresource: Option<&str>) {
        default_template(new);
        let generation = meta::generation(old).unwrap_or(1);
        let changed = new.get("template") != old.get("template");
        meta::set_generation(new, if changed { generation + 1 } else { generation });
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        validate_template(object.get("template").unwrap_or(&Value::Null))
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new(
                "Containers",
                "string",
                "Names of each container in the template.",
            ),
            Column::new(
                "Images",
                "string",
                "Images referenced by each container in the template.",
            ),
            Column::new("Pod Labels", "string", "The labels for the pod template."),
        ]
    }

    fn age_column(&self) -> bool {
        false
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        let containers = object
            .pointer("/template/spec/containers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let joined = |field: &str| {
            containers
                .iter()
                .map(|c| c.get(field).and_then(Value::as_str).unwrap_or(""))
                .collect::<Vec<_>>()
                .join(",")
        };
        let labels: BTreeMap<String, String> = object
            .pointer("/template/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        vec![
            json!(joined("name")),
            json!(joined("image")),
            json!(format_labels(&labels)),
        ]
    }
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, comma-separated, `<none>` when empty.
fn format_labels(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "<none>".to_string();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets `field` of `object` to `value` when absent (or null).
fn default_field(object: &mut Value, field: &str, value: Value) {
    if let Some(map) = object.as_object_mut()
        && map.get(field).is_none_or(Value::is_null)
    {
        map.insert(field.to_string(), value);
    }
}

/// The v1 defaults of a PodTemplate's pod spec (kube's `SetDefaults_PodSpec` and friends).
fn default_template(object: &mut Value) {
    let Some(spec) = object
        .pointer_mut("/template/spec")
        .filter(|s| s.is_object())
    else {
        return;
    };
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "securityContext", json!({}));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    for list in CONTAINER_LISTS {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter(|c| c.is_object()) {
            default_container(container);
        }
    }
}

fn default_container(container: &mut Value) {
    default_field(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    default_field(container, "terminationMessagePolicy", json!("File"));
    let image = container
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    default_field(container, "imagePullPolicy", json!(pull_policy(&image)));
    if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut() {
            default_field(port, "protocol", json!("TCP"));
        }
    }
}

/// `Always` for `:latest` or untagged images, else `IfNotPresent` (digests count as tagged).
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// `ValidatePodTemplateSpec` at `template`, for what a server without nodes can check. As in kube,
/// the template's labels and annotations are reported at `template.labels` and
/// `template.annotations` (not under `template.metadata`).
fn validate_template(template: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let labels: BTreeMap<String, String> = template
        .pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    errors.extend(validation::validate_labels(&labels, "template.labels"));
    let annotations: BTreeMap<String, String> = template
        .pointer("/metadata/annotations")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    errors.extend(validation::validate_annotations(
        &annotations,
        "template.annotations",
    ));
    let spec = template.get("spec").unwrap_or(&Value::Null);
    errors.extend(validate_pod_spec(spec, "template.spec"));
    if spec
        .get("ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty())
    {
        errors.push(FieldError::forbidden(
            "template.spec.ephemeralContainers",
            "ephemeral containers not allowed in pod template",
        ));
    }
    errors
}

fn str_field<'a>(object: &'a Value, field: &str) -> &'a str {
    object.get(field).and_then(Value::as_str).unwrap_or("")
}

fn validate_enum(
    errors: &mut Vec<FieldError>,
    object: &Value,
    field: &str,
    at: &str,
    valid: &[&str],
) {
    match object.get(field).and_then(Value::as_str) {
        None | Some("") => errors.push(FieldError::required(&format!("{at}.{field}"), "")),
        Some(value) if !valid.contains(&value) => errors.push(FieldError::not_supported(
            &format!("{at}.{field}"),
            json!(value),
            valid,
        )),
        Some(_) => {}
    }
}

fn validate_pod_spec(spec: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // Volumes: unique DNS-label names.
    let mut volumes: Vec<&str> = Vec::new();
    if let Some(list) = spec.get("volumes").and_then(Value::as_array) {
        for (i, volume) in list.iter().enumerate() {
            let name = str_field(volume, "name");
            let name_at = format!("{at}.volumes[{i}].name");
            if name.is_empty() {
                errors.push(FieldError::required(&name_at, ""));
            } else if volumes.contains(&name) {
                errors.push(FieldError::duplicate(&name_at, json!(name)));
            } else {
                for message in is_dns1123_label(name) {
                    errors.push(FieldError::invalid(&name_at, json!(name), &message));
                }
            }
            volumes.push(name);
        }
    }
    // Containers: at least one; names unique across init and regular containers.
    let mut names: Vec<&str> = Vec::new();
    for list in CONTAINER_LISTS {
        let containers = spec
            .get(list)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if list == "containers" && containers.is_empty() {
            errors.push(FieldError::required(&format!("{at}.containers"), ""));
        }
        for (i, container) in containers.iter().enumerate() {
            let container_at = format!("{at}.{list}[{i}]");
            let name = str_field(container, "name");
            if name.is_empty() {
                errors.push(FieldError::required(&format!("{container_at}.name"), ""));
            } else {
                for message in is_dns1123_label(name) {
                    errors.push(FieldError::invalid(
                        &format!("{container_at}.name"),
                        json!(name),
                        &message,
                    ));
                }
                if names.contains(&name) {
                    errors.push(FieldError::duplicate(
                        &format!("{container_at}.name"),
                        json!(name),
                    ));
                }
            }
            names.push(name);
            if str_field(container, "image").is_empty() {
                errors.push(FieldError::required(&format!("{container_at}.image"), ""));
            }
            validate_enum(
                &mut errors,
                container,
                "imagePullPolicy",
                &container_at,
                &PULL_POLICIES,
            );
            validate_enum(
                &mut errors,
                container,
                "terminationMessagePolicy",
                &container_at,
                &TERMINATION_MESSAGE_POLICIES,
            );
            errors.extend(validate_ports(container, &container_at));
        }
    }
    validate_enum(&mut errors, spec, "restartPolicy", at, &RESTART_POLICIES);
    validate_enum(&mut errors, spec, "dnsPolicy", at, &DNS_POLICIES);
    if let Some(value) = spec.get("terminationGracePeriodSeconds")
        && value.as_i64().is_none_or(|v| v < 0)
    {
        errors.push(FieldError::invalid(
            &format!("{at}.terminationGracePeriodSeconds"),
            value.clone(),
            validation::IS_NEGATIVE_ERROR_MSG,
        ));
    }
    if let Some(value) = spec.get("activeDeadlineSeconds")
        && value.as_i64().is_none_or(|v| v < 1)
    {
        errors.push(FieldError::invalid(
            &format!("{at}.activeDeadlineSeconds"),
            value.clone(),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    errors
}

/// Container ports: numbers in 1..=65535, IANA service names, supported protocols.
fn validate_ports(container: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(ports) = container.get("ports").and_then(Value::as_array) else {
        return errors;
    };
    for (i, port) in ports.iter().enumerate() {
        let port_at = format!("{at}.ports[{i}]");
        match port.get("containerPort") {
            None => errors.push(FieldError::required(
                &format!("{port_at}.containerPort"),
                "",
            )),
            Some(value) if value.as_i64().is_none_or(|p| !(1..=65535).contains(&p)) => {
                errors.push(FieldError::invalid(
                    &format!("{port_at}.containerPort"),
                    value.clone(),
                    "must be between 1 and 65535, inclusive",
                ))
            }
            Some(_) => {}
        }
        if let Some(value) = port.get("hostPort")
            && value.as_i64().is_some_and(|p| p != 0)
            && value.as_i64().is_none_or(|p| !(1..=65535).contains(&p))
        {
            errors.push(FieldError::invalid(
                &format!("{port_at}.hostPort"),
                value.clone(),
                "must be between 1 and 65535, inclusive",
            ));
        }
        validate_enum(&mut errors, port, "protocol", &port_at, &PROTOCOLS);
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(containers: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "n"},
            "template": {"metadata": {"labels": {"b": "2", "a": "1"}}, "spec": {"containers": containers}}})
    }

    fn created(containers: Value) -> Value {
        let mut object = template(containers);
        PodTemplates.prepare_for_create(&mut object);
        object
    }

    fn messages(object: &Value) -> Vec<String> {
        PodTemplates
            .validate(object)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn create_defaults_the_pod_spec_and_sets_generation() {
        let object = created(
            json!([{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "busybox:1.36"}]),
        );
        assert_eq!(meta::generation(&object), Some(1));
        let spec = &object["template"]["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["securityContext"], json!({}));
        let web = &spec["containers"][0];
        assert_eq!(web["imagePullPolicy"], "Always");
        assert_eq!(web["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(web["terminationMessagePolicy"], "File");
        assert_eq!(web["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert!(messages(&object).is_empty(), "{:?}", messages(&object));
    }

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn generation_moves_only_with_the_template() {
        let old = created(json!([{"name": "web", "image": "nginx"}]));
        let mut same = old.clone();
        meta::set_label(&mut same, "x", "y");
        PodTemplates.prepare_for_update(&mut same, &old, None);
        assert_eq!(meta::generation(&same), Some(1));
        let mut changed = old.clone();
        changed["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        PodTemplates.prepare_for_update(&mut changed, &old, None);
        assert_eq!(meta::generation(&changed), Some(2));
    }

    #[test]
    fn containers_are_required() {
        assert_eq!(
            messages(&created(json!([]))),
            ["template.spec.containers: Required value"]
        );
    }

    #[test]
    fn container_names_images_and_ports_are_checked() {
        let object = created(json!([
            {"name": "Web", "image": "nginx"},
            {"name": "a", "image": ""},
            {"name": "a", "image": "x", "ports": [{"containerPort": 70000, "protocol": "HTTP"}]},
        ]));
        let found = messages(&object);
        assert!(found.iter().any(|m| m.starts_with("template.spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label")), "{found:?}");
        assert!(
            found.contains(&"template.spec.containers[1].image: Required value".to_string()),
            "{found:?}"
        );
        assert!(
            found.contains(&"template.spec.containers[2].name: Duplicate value: \"a\"".to_string()),
            "{found:?}"
        );
        assert!(found.contains(&"template.spec.containers[2].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()), "{found:?}");
        assert!(
            found.iter().any(|m| m.starts_with(
                "template.spec.containers[2].ports[0].protocol: Unsupported value: \"HTTP\""
            )),
            "{found:?}"
        );
    }

    #[test]
    fn policies_are_enumerations() {
        let mut object = created(json!([{"name": "web", "image": "nginx"}]));
        object["template"]["spec"]["restartPolicy"] = json!("Sometimes");
        let found = messages(&object);
        assert_eq!(
            found,
            [
                "template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\""
            ]
        );
    }

    #[test]
    fn ephemeral_containers_are_forbidden_in_templates() {
        let mut object = created(json!([{"name": "web", "image": "nginx"}]));
        object["template"]["spec"]["ephemeralContainers"] =
            json!([{"name": "debug", "image": "busybox"}]);
        assert_eq!(
            messages(&object),
            [
                "template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"
            ]
        );
    }

    #[test]
    fn template_labels_are_validated() {
        let mut object = created(json!([{"name": "web", "image": "nginx"}]));
        object["template"]["metadata"]["labels"] = json!({"bad key!": "v"});
        let found = messages(&object);
        assert!(
            found
                .iter()
                .any(|m| m.starts_with("template.labels: Invalid value: \"bad key!\"")),
            "{found:?}"
        );
    }

    #[test]
    fn table_cells_as_kubectl_prints_them() {
        let object = created(
            json!([{"name": "web", "image": "nginx"}, {"name": "side", "image": "busybox"}]),
        );
        assert_eq!(
            PodTemplates.cells(&object),
            [json!("web,side"), json!("nginx,busybox"), json!("a=1,b=2")]
        );
        let mut bare = object.clone();
        bare["template"]["metadata"] = json!({});
        assert_eq!(PodTemplates.cells(&bare)[2], "<none>");
        assert!(!PodTemplates.age_column());
    }
}
