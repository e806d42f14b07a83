//! core/v1 ResourceQuota: limits per namespace, whose `status` the quota controller computes and
//! quota admission raises before each create it admits.
//!
//! The strategy is kube's: the status starts empty and only the `status` subresource writes it,
//! `spec.hard` and `status` name standard quota resources (or fully qualified ones such as
//! `count/widgets.example.com`) with valid, non-negative quantities (whole numbers for counts),
//! scopes are known, compatible with the limited resources and immutable. The [`quantity`] and
//! [`usage`] modules are what the controller and admission measure with.

pub mod quantity;
pub mod usage;

use kcp_apimachinery::FieldError;
use kcp_apimachinery::validation::{
    FIELD_IMMUTABLE_ERROR_MSG, IS_NEGATIVE_ERROR_MSG, is_qualified_name,
};
use serde_json::{Value, json};

use self::quantity::Quantity;
use self::usage::{is_native_resource, resource_list};
use super::table::{self, AGE};
use super::{Column, ResourceType, Strategy};

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "",
        "ResourceQuota",
        "resourcequotas",
        true,
        &["quota"],
        Box::new(Quotas),
    );
    t.subresources = vec!["status".into()];
    t
}

struct Quotas;

impl Strategy for Quotas {
    fn prepare_for_create(&self, object: &mut Value) {
        if let Some(fields) = object.as_object_mut() {
            fields.remove("status");
        }
        canonicalize(object.pointer_mut("/spec/hard"));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        if subresource.is_none() {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
            canonicalize(new.pointer_mut("/spec/hard"));
        } else {
            for part in ["hard", "used"] {
                canonicalize(new.pointer_mut(&format!("/status/{part}")));
            }
        }
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(object.get("spec"));
        for part in ["hard", "used"] {
            errors.extend(validate_resources(
                object.pointer(&format!("/status/{part}")),
                &format!("status.{part}"),
            ));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        let scopes = |quota: &Value| {
            let mut scopes: Vec<String> = string_list(quota.pointer("/spec/scopes"));
            scopes.sort();
            scopes.dedup();
            scopes
        };
        if scopes(new) != scopes(old) {
            errors.push(FieldError::invalid(
                "spec.scopes",
                new.pointer("/spec/scopes").cloned().unwrap_or(Value::Null),
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            AGE,
            Column::new(
                "Request",
                "string",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            Column::new(
                "Limit",
                "string",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
        ]
    }

    fn age_column(&self) -> bool {
        false
    }

    /// `requests.cpu: 500m/1, pods: 1/2` (used/hard of every hard resource, sorted), limits
    /// apart, as kubectl prints quotas.
    fn cells(&self, object: &Value) -> Vec<Value> {
        let hard = resource_list(object.pointer("/status/hard"));
        let used = resource_list(object.pointer("/status/used"));
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        for (resource, limit) in &hard {
            let current = used.get(resource).copied().unwrap_or(Quantity::ZERO);
            let cell = format!("{resource}: {current}/{limit}");
            if resource.split('.').next() == Some("limits") && resource.contains('.') {
                limits.push(cell);
            } else {
                requests.push(cell);
            }
        }
        let created = kcp_apimachinery::meta::creation_timestamp(object);
        vec![
            json!(table::age(created)),
            json!(requests.join(", ")),
            json!(limits.join(", ")),
        ]
    }
}

/// Standard resource names (`standardResources`): what a name without `/` may be at all.
const STANDARD_RESOURCES: [&str; 20] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// Names quota tracks (`standardQuotaResources`): the standard ones but `storage`.
fn is_standard_quota_resource(name: &str) -> bool {
    (STANDARD_RESOURCES.contains(&name) && name != "storage") || is_huge_pages_quota_resource(name)
}

fn is_standard_resource(name: &str) -> bool {
    STANDARD_RESOURCES.contains(&name) || is_huge_pages_quota_resource(name)
}

fn is_huge_pages_quota_resource(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

/// Counted in whole units: object counts and extended resources.
fn is_integer_resource(name: &str) -> bool {
    const INTEGER: [&str; 9] = [
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ];
    INTEGER.contains(&name) || is_extended_resource(name)
}

/// Outside Kubernetes' namespace, not `requests.`-prefixed, and qualified once prefixed.
fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// The scopes quotas know, and the resources each may be applied to.
const SCOPES: [&str; 7] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

fn scope_applies_to(scope: &str, resource: &str) -> bool {
    const POD_COMPUTE: [&str; 6] = [
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ];
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => resource == "pods" || POD_COMPUTE.contains(&resource),
        "BestEffort" => resource == "pods",
        "VolumeAttributesClass" => {
            matches!(resource, "persistentvolumeclaims" | "requests.storage")
        }
        _ => true,
    }
}

/// The spec: hard resources, scopes and scope selector (kube's `ValidateResourceQuotaSpec`).
fn validate_spec(spec: Option<&Value>) -> Vec<FieldError> {
    let spec = spec.cloned().unwrap_or_else(|| json!({}));
    let mut errors = validate_resources(spec.get("hard"), "spec.hard");
    let hard: Vec<String> = spec
        .get("hard")
        .and_then(Value::as_object)
        .map(|h| h.keys().cloned().collect())
        .unwrap_or_default();
    let scopes = string_list(spec.get("scopes"));
    let scopes_value = spec.get("scopes").cloned().unwrap_or(Value::Null);
    for scope in &scopes {
        if !SCOPES.contains(&scope.as_str()) {
            errors.push(FieldError::invalid(
                "spec.scopes",
                scopes_value.clone(),
                "unsupported scope",
            ));
        }
        if unsupported_for(scope, &hard) {
            errors.push(FieldError::invalid(
                "spec.scopes",
                scopes_value.clone(),
                "unsupported scope applied to resource",
            ));
        }
    }
    if conflicting(&scopes) {
        errors.push(FieldError::invalid(
            "spec.scopes",
            scopes_value,
            "conflicting scopes",
        ));
    }
    errors.extend(validate_scope_selector(&spec, &hard));
    errors
}

fn unsupported_for(scope: &str, hard: &[String]) -> bool {
    hard.iter()
        .any(|r| is_standard_quota_resource(r) && !scope_applies_to(scope, r))
}

fn conflicting(scopes: &[String]) -> bool {
    let has = |s: &str| scopes.iter().any(|scope| scope == s);
    (has("BestEffort") && has("NotBestEffort")) || (has("Terminating") && has("NotTerminating"))
}

fn validate_scope_selector(spec: &Value, hard: &[String]) -> Vec<FieldError> {
    let Some(selector) = spec.get("scopeSelector").filter(|s| !s.is_null()) else {
        return Vec::new();
    };
    let path = "spec.scopeSelector.matchExpressions";
    let mut errors = Vec::new();
    let mut scopes = Vec::new();
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for expression in expressions {
        let text = |field: &str| expression.get(field).and_then(Value::as_str).unwrap_or("");
        let (scope, operator) = (text("scopeName"), text("operator"));
        if !SCOPES.contains(&scope) {
            errors.push(FieldError::invalid(
                &format!("{path}.scopeName"),
                json!(scope),
                "unsupported scope",
            ));
        }
        if unsupported_for(scope, hard) {
            errors.push(FieldError::invalid(
                path,
                selector.clone(),
                "unsupported scope applied to resource",
            ));
        }
        if matches!(
            scope,
            "BestEffort" | "NotBestEffort" | "Terminating" | "NotTerminating"
        ) && operator != "Exists"
        {
            errors.push(FieldError::invalid(
                &format!("{path}.operator"),
                json!(operator),
                "must be 'Exist' only operator when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort and ResourceQuotaScopeNotBestEffort",
            ));
        }
        let values = string_list(expression.get("values"));
        match operator {
            "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
                &format!("{path}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::invalid(
                &format!("{path}.values"),
                json!(values),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => errors.push(FieldError::invalid(
                &format!("{path}.operator"),
                json!(operator),
                "not a valid selector operator",
            )),
        }
        scopes.push(scope.to_string());
    }
    if conflicting(&scopes) {
        errors.push(FieldError::invalid(
            path,
            spec.get("scopes").cloned().unwrap_or(Value::Null),
            "conflicting scopes",
        ));
    }
    errors
}

/// A map of quota resource names to quantities (`spec.hard`, `status.hard`, `status.used`).
fn validate_resources(resources: Option<&Value>, path: &str) -> Vec<FieldError> {
    let Some(entries) = resources.and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for (name, value) in entries {
        let path = format!("{path}[{name}]");
        errors.extend(validate_resource_name(name, &path));
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => other.to_string(),
        };
        match Quantity::parse(&text) {
            Err(error) => errors.push(FieldError::invalid(&path, json!(text), &error.to_string())),
            Ok(quantity) if quantity.is_negative() => errors.push(FieldError::invalid(
                &path,
                json!(quantity.to_string()),
                IS_NEGATIVE_ERROR_MSG,
            )),
            Ok(quantity) if is_integer_resource(name) && !quantity.is_integer() => errors.push(
                FieldError::invalid(&path, json!(quantity.to_string()), "must be an integer"),
            ),
            Ok(_) => {}
        }
    }
    errors
}

/// kube's `ValidateResourceQuotaResourceName`.
fn validate_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let qualified: Vec<FieldError> = is_qualified_name(name)
        .iter()
        .map(|message| FieldError::invalid(path, json!(name), message))
        .collect();
    if !qualified.is_empty() || name.contains('/') {
        return qualified;
    }
    if !is_standard_resource(name) {
        return vec![FieldError::invalid(
            path,
            json!(name),
            "must be a standard resource type or fully qualified",
        )];
    }
    if !is_standard_quota_resource(name) {
        return vec![FieldError::invalid(
            path,
            json!(name),
            "must be a standard resource for quota",
        )];
    }
    Vec::new()
}

/// Quantities as kube stores them: in canonical form (`1024Mi` is `1Gi`, `1000m` is `1`);
/// what is not a quantity stays for validation to refuse.
fn canonicalize(resources: Option<&mut Value>) {
    let Some(entries) = resources.and_then(Value::as_object_mut) else {
        return;
    };
    for value in entries.values_mut() {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        if let Ok(quantity) = Quantity::parse(&text) {
            *value = json!(quantity.to_string());
        }
    }
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(quota: Value) -> Vec<String> {
        Quotas
            .validate(&quota)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.detail))
            .collect()
    }

    #[test]
    fn accepts_kube_resource_names() {
        let quota = json!({"spec": {"hard": {
            "pods": "10", "configmaps": 5, "count/widgets.example.com": "3",
            "count/deployments.apps": "1", "requests.cpu": "1500m", "limits.memory": "1Gi",
            "requests.nvidia.com/gpu": "2", "hugepages-2Mi": "1Gi", "services.nodeports": "0"
        }}});
        assert_eq!(messages(quota), Vec::<String>::new());
    }

    #[test]
    fn refuses_unknown_names_and_bad_quantities() {
        let quota = json!({"spec": {"hard": {
            "widgets": "1", "storage": "1Gi", "pods": "1500m", "cpu": "-1", "memory": "lots",
            "count/configmaps": "1.5"
        }}});
        let errors = messages(quota);
        assert!(
            errors.contains(
                &"spec.hard[widgets]: must be a standard resource type or fully qualified"
                    .to_string()
            ),
            "{errors:?}"
        );
        assert!(
            errors
                .contains(&"spec.hard[storage]: must be a standard resource for quota".to_string())
        );
        assert!(errors.contains(&"spec.hard[pods]: must be an integer".to_string()));
        assert!(errors.contains(&"spec.hard[cpu]: must be greater than or equal to 0".to_string()));
        assert!(errors.contains(&"spec.hard[count/configmaps]: must be an integer".to_string()));
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("spec.hard[memory]: quantities must match"))
        );
    }

    #[test]
    fn checks_scopes() {
        let quota = json!({"spec": {"hard": {"secrets": "1"},
            "scopes": ["BestEffort", "NotBestEffort", "Sometimes"]}});
        let errors = messages(quota);
        assert!(errors.contains(&"spec.scopes: unsupported scope".to_string()));
        assert!(errors.contains(&"spec.scopes: unsupported scope applied to resource".to_string()));
        assert!(errors.contains(&"spec.scopes: conflicting scopes".to_string()));
        let selector = json!({"spec": {"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In"},
            {"scopeName": "BestEffort", "operator": "In", "values": ["x"]}
        ]}}});
        let errors = messages(selector);
        assert!(errors.iter().any(|e| e.starts_with(
            "spec.scopeSelector.matchExpressions.values: must be at least one value"
        )));
        assert!(errors.iter().any(|e| {
            e.starts_with("spec.scopeSelector.matchExpressions.operator: must be 'Exist' only")
        }));
    }

    #[test]
    fn scopes_are_immutable_and_status_is_kept() {
        let old = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]},
            "status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}});
        let mut new = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["NotBestEffort"]}});
        Quotas.prepare_for_update(&mut new, &old, None);
        assert_eq!(new["status"], old["status"]);
        let errors: Vec<String> = Quotas
            .validate_update(&new, &old)
            .iter()
            .map(|e| e.detail.clone())
            .collect();
        assert_eq!(errors, vec!["field is immutable".to_string()]);
        let mut created = old.clone();
        created["spec"]["hard"] = json!({"memory": "1024Mi", "cpu": "1000m", "pods": 3});
        Quotas.prepare_for_create(&mut created);
        assert!(created.get("status").is_none());
        assert_eq!(
            created["spec"]["hard"],
            json!({"memory": "1Gi", "cpu": "1", "pods": "3"})
        );
    }

    #[test]
    fn cells_show_used_over_hard() {
        let quota = json!({"status": {
            "hard": {"pods": "2", "requests.cpu": "1", "limits.cpu": "2"},
            "used": {"pods": "1", "requests.cpu": "500m"}}});
        let cells = Quotas.cells(&quota);
        assert_eq!(cells[1], json!("pods: 1/2, requests.cpu: 500m/1"));
        assert_eq!(cells[2], json!("limits.cpu: 0/2"));
    }
}
