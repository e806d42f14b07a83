//! What one object costs under a ResourceQuota, as Kubernetes' quota evaluators measure it
//! (`k8s.io/apiserver/pkg/quota/v1/generic` for object counts, `pkg/quota/v1/evaluator/core` for
//! pods, services and persistent volume claims), shared by the quota controller (which sums it
//! over a namespace) and quota admission (which charges one write's change).
//!
//! Every namespaced type costs `count/<resource>.<group>` (`count/<resource>` in the core group);
//! the core types with legacy names (`configmaps`, `secrets`, ...) cost that name too. Pods,
//! services and claims have their own measures; they apply wherever the type is served, built in
//! or through a core-group CRD (`pods.core`), since nothing here tells them apart.

use std::collections::{BTreeMap, BTreeSet};

use kcp_apimachinery::meta;
use serde_json::{Value, json};

use super::quantity::Quantity;

/// Quantities by resource name (`corev1.ResourceList`), sorted as Kubernetes prints them.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Core types whose plural is also a quota resource name.
const LEGACY_COUNTED: [&str; 7] = [
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
];

/// Pod compute resources quota knows by name (`podResources` besides the counts).
const POD_COMPUTE: [&str; 9] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

const HUGE_PAGES_PREFIX: &str = "hugepages-";
const REQUESTS_PREFIX: &str = "requests.";
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// The object-count name of a type: `count/<resource>.<group>`, `count/<resource>` for core.
pub fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// Whether a resource name is in Kubernetes' own namespace (no `/`, or `kubernetes.io/`).
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// The (group, plural) of the type whose objects a quota resource name measures, if any.
pub fn measured_type(resource: &str) -> Option<(String, String)> {
    if let Some(counted) = resource.strip_prefix("count/") {
        let (plural, group) = counted.split_once('.').unwrap_or((counted, ""));
        return Some((group.to_string(), plural.to_string()));
    }
    let core = |plural: &str| Some((String::new(), plural.to_string()));
    if LEGACY_COUNTED.contains(&resource) {
        return core(resource);
    }
    if resource == "services.loadbalancers" || resource == "services.nodeports" {
        return core("services");
    }
    if resource == "requests.storage" || resource.contains(STORAGE_CLASS_SUFFIX) {
        return core("persistentvolumeclaims");
    }
    if is_pod_resource(resource) {
        return core("pods");
    }
    None
}

/// Pod compute resources, huge pages and extended resources (`requests.<domain>/<name>`).
fn is_pod_resource(resource: &str) -> bool {
    POD_COMPUTE.contains(&resource)
        || resource.starts_with(HUGE_PAGES_PREFIX)
        || resource
            .strip_prefix(REQUESTS_PREFIX)
            .is_some_and(|rest| rest.starts_with(HUGE_PAGES_PREFIX))
        || (!is_native_resource(resource) && resource.starts_with(REQUESTS_PREFIX))
}

/// The hard resources of a quota that objects of a type are measured against (kube's
/// `MatchingResources`).
pub fn matching_resources<'a>(
    group: &str,
    plural: &str,
    hard: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    hard.into_iter()
        .filter(|resource| measured_type(resource).is_some_and(|(g, p)| g == group && p == plural))
        .cloned()
        .collect()
}

/// What one object of a type costs, at `now` (seconds since the epoch; it decides whether a
/// pod marked for deletion still counts).
pub fn object_usage(group: &str, plural: &str, object: &Value, now: i64) -> ResourceList {
    let one = Quantity::from_units(1);
    let mut usage = ResourceList::new();
    usage.insert(count_name(group, plural), one);
    if !group.is_empty() {
        return usage;
    }
    match plural {
        "pods" if pod_is_charged(object, now) => {
            usage.insert("pods".into(), one);
            add_all(&mut usage, &pod_compute_usage(object));
        }
        // Finished pods only take their place in storage (`count/pods`).
        "pods" => {}
        "services" => add_all(&mut usage, &service_usage(object)),
        "persistentvolumeclaims" => add_all(&mut usage, &claim_usage(object)),
        legacy if LEGACY_COUNTED.contains(&legacy) => {
            usage.insert(legacy.to_string(), one);
        }
        _ => {}
    }
    usage
}

/// Adds `more` into `total` (Go's `quota.Add`).
pub fn add_all(total: &mut ResourceList, more: &ResourceList) {
    for (resource, quantity) in more {
        let sum = total
            .get(resource)
            .map_or(*quantity, |current| current.add(quantity));
        total.insert(resource.clone(), sum);
    }
}

/// `a - b` per resource of `a`, never below zero (Go's `SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(resource, quantity)| {
            let difference = b.get(resource).map_or(*quantity, |q| quantity.sub(q));
            let difference = if difference.is_negative() {
                Quantity::ZERO
            } else {
                difference
            };
            (resource.clone(), difference)
        })
        .collect()
}

/// A quantity map of an object (`spec.hard`, `status.used`, container requests); entries that
/// are not quantities are left out (validation refuses them where they are written).
pub fn resource_list(value: Option<&Value>) -> ResourceList {
    value
        .and_then(Value::as_object)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|(resource, quantity)| {
                    let text = match quantity {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        _ => return None,
                    };
                    Some((resource.clone(), Quantity::parse(&text).ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A resource list as JSON, each quantity in canonical form.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(resource, quantity)| (resource.clone(), json!(quantity.to_string())))
            .collect(),
    )
}

/// The scope selectors of a quota: its `scopes` (as `Exists`) and its `scopeSelector`.
pub fn scope_selectors(quota: &Value) -> Vec<ScopeSelector> {
    let mut selectors: Vec<ScopeSelector> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|scope| ScopeSelector {
            scope: scope.to_string(),
            operator: "Exists".into(),
            values: Vec::new(),
        })
        .collect();
    let expressions = quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for expression in expressions {
        let text = |field: &str| {
            expression
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        selectors.push(ScopeSelector {
            scope: text("scopeName"),
            operator: text("operator"),
            values: expression
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        });
    }
    selectors
}

/// One scope selector requirement (`ScopedResourceSelectorRequirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeSelector {
    pub scope: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// Whether a quota covers an object of a type: it must limit a resource the type is measured
/// by, and its scopes must all select the object (only pods and claims have scopes; a scoped
/// quota covers nothing else), as kube's evaluators' `Matches`.
pub fn quota_covers(
    quota_hard: &BTreeSet<String>,
    selectors: &[ScopeSelector],
    group: &str,
    plural: &str,
    object: &Value,
) -> bool {
    if matching_resources(group, plural, quota_hard).is_empty() {
        return false;
    }
    selectors
        .iter()
        .all(|selector| scope_selects(selector, group, plural, object))
}

fn scope_selects(selector: &ScopeSelector, group: &str, plural: &str, object: &Value) -> bool {
    if !group.is_empty() {
        return false;
    }
    let spec_text = |field: &str| {
        object
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match (plural, selector.scope.as_str()) {
        ("pods", "Terminating") => pod_is_terminating(object),
        ("pods", "NotTerminating") => !pod_is_terminating(object),
        ("pods", "BestEffort") => pod_is_best_effort(object),
        ("pods", "NotBestEffort") => !pod_is_best_effort(object),
        ("pods", "PriorityClass") => {
            selector_matches_value(selector, spec_text("priorityClassName"))
        }
        ("pods", "CrossNamespacePodAffinity") => pod_uses_cross_namespace_affinity(object),
        ("persistentvolumeclaims", "VolumeAttributesClass") => {
            selector_matches_value(selector, spec_text("volumeAttributesClassName"))
        }
        _ => false,
    }
}

/// A selector over the one label `<scope>=<value>` (absent when the value is).
fn selector_matches_value(selector: &ScopeSelector, value: Option<&str>) -> bool {
    let listed = || value.is_some_and(|v| selector.values.iter().any(|listed| listed == v));
    match selector.operator.as_str() {
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "In" => listed(),
        "NotIn" => !listed(),
        _ => false,
    }
}

/// `activeDeadlineSeconds` set and not negative.
fn pod_is_terminating(pod: &Value) -> bool {
    pod.pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|seconds| seconds >= 0)
}

/// QoS class BestEffort: no container asks for or limits cpu or memory.
fn pod_is_best_effort(pod: &Value) -> bool {
    containers(pod, "containers")
        .chain(containers(pod, "initContainers"))
        .all(|container| {
            ["requests", "limits"].iter().all(|kind| {
                let list = resource_list(container.pointer(&format!("/resources/{kind}")));
                ["cpu", "memory"]
                    .iter()
                    .all(|r| list.get(*r).is_none_or(Quantity::is_zero))
            })
        })
}

fn pod_uses_cross_namespace_affinity(pod: &Value) -> bool {
    let crosses = |term: &Value| {
        term.get("namespaces")
            .and_then(Value::as_array)
            .is_some_and(|n| !n.is_empty())
            || term.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let affinity = pod.pointer(&format!("/spec/affinity/{kind}"));
        let required = affinity
            .and_then(|a| a.get("requiredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let preferred = affinity
            .and_then(|a| a.get("preferredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|weighted| weighted.get("podAffinityTerm"));
        required.chain(preferred).any(crosses)
    })
}

/// Whether a pod is charged for compute (kube's `QuotaV1Pod`): not in a terminal phase, and
/// not marked for deletion with its grace period over.
fn pod_is_charged(pod: &Value, now: i64) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return false;
    }
    let deleted_at =
        meta::deletion_timestamp(pod).and_then(|t| kcp_apimachinery::time::parse_rfc3339(t).ok());
    match (deleted_at, meta::deletion_grace_period_seconds(pod)) {
        (Some(at), Some(grace)) => now <= at.as_second().saturating_add(grace),
        _ => true,
    }
}

fn containers<'a>(pod: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> + use<'a> {
    pod.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The pod's effective requests or limits (`kind`), as kubelet admits it: regular containers
/// and sidecars (restartable init containers) run together, each other init container runs
/// alone beside the sidecars started before it, and the pod's overhead comes on top.
fn pod_resources(pod: &Value, kind: &str) -> ResourceList {
    let of = |container: &Value| resource_list(container.pointer(&format!("/resources/{kind}")));
    let mut running = ResourceList::new();
    for container in containers(pod, "containers") {
        add_all(&mut running, &of(container));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for container in containers(pod, "initContainers") {
        let own = of(container);
        let at_start = if container.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add_all(&mut running, &own);
            add_all(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut alone = own;
            add_all(&mut alone, &sidecars);
            alone
        };
        keep_maximum(&mut init_peak, &at_start);
    }
    keep_maximum(&mut running, &init_peak);
    add_all(&mut running, &resource_list(pod.pointer("/spec/overhead")));
    running
}

fn keep_maximum(into: &mut ResourceList, other: &ResourceList) {
    for (resource, quantity) in other {
        if into.get(resource).is_none_or(|current| current < quantity) {
            into.insert(resource.clone(), *quantity);
        }
    }
}

/// A pod's compute usage under kube's names (`podComputeUsageHelper`, without the counts).
fn pod_compute_usage(pod: &Value) -> ResourceList {
    compute_usage(
        &pod_resources(pod, "requests"),
        &pod_resources(pod, "limits"),
    )
}

/// Requests and limits under quota names: `cpu` and `requests.cpu` for a cpu request,
/// `limits.cpu` for its limit, huge pages and extended resources as `requests.<name>`.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut usage = ResourceList::new();
    for (resource, quantity) in requests {
        let standard = matches!(resource.as_str(), "cpu" | "memory" | "ephemeral-storage");
        if standard || resource.starts_with(HUGE_PAGES_PREFIX) {
            usage.insert(resource.clone(), *quantity);
            usage.insert(format!("{REQUESTS_PREFIX}{resource}"), *quantity);
        } else if !is_native_resource(resource) && !resource.starts_with(REQUESTS_PREFIX) {
            usage.insert(format!("{REQUESTS_PREFIX}{resource}"), *quantity);
        }
    }
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(limit) = limits.get(resource) {
            usage.insert(format!("limits.{resource}"), *limit);
        }
    }
    usage
}

/// The quota resources each container of a pod must set when a quota limits them (kube's
/// backward-compatible `Constraints` for cpu and memory): resource to container names.
pub fn missing_pod_constraints(
    pod: &Value,
    limited: &[String],
) -> BTreeMap<String, BTreeSet<String>> {
    const CONSTRAINED: [&str; 6] = [
        "cpu",
        "memory",
        "requests.cpu",
        "requests.memory",
        "limits.cpu",
        "limits.memory",
    ];
    let required: Vec<&String> = limited
        .iter()
        .filter(|r| CONSTRAINED.contains(&r.as_str()))
        .collect();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for container in containers(pod, "containers").chain(containers(pod, "initContainers")) {
        let usage = compute_usage(
            &resource_list(container.pointer("/resources/requests")),
            &resource_list(container.pointer("/resources/limits")),
        );
        let name = container.get("name").and_then(Value::as_str).unwrap_or("");
        for resource in &required {
            if !usage.contains_key(resource.as_str()) {
                missing
                    .entry(resource.to_string())
                    .or_default()
                    .insert(name.to_string());
            }
        }
    }
    missing
}

/// `services`, `services.loadbalancers` and `services.nodeports` of a service.
fn service_usage(service: &Value) -> ResourceList {
    let mut usage = ResourceList::new();
    usage.insert("services".into(), Quantity::from_units(1));
    let ports = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let count = |n: usize| Quantity::from_units(i64::try_from(n).unwrap_or(i64::MAX));
    match service.pointer("/spec/type").and_then(Value::as_str) {
        Some("NodePort") => {
            usage.insert("services.nodeports".into(), count(ports.len()));
        }
        Some("LoadBalancer") => {
            usage.insert("services.loadbalancers".into(), Quantity::from_units(1));
            let allocates = service
                .pointer("/spec/allocateLoadBalancerNodePorts")
                .and_then(Value::as_bool)
                != Some(false);
            let node_ports = if allocates {
                ports.len()
            } else {
                ports
                    .iter()
                    .filter(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0)
                    .count()
            };
            usage.insert("services.nodeports".into(), count(node_ports));
        }
        _ => {}
    }
    usage
}

/// `persistentvolumeclaims` and `requests.storage` of a claim, also per storage class.
fn claim_usage(claim: &Value) -> ResourceList {
    let one = Quantity::from_units(1);
    let mut usage = ResourceList::new();
    usage.insert("persistentvolumeclaims".into(), one);
    let storage = resource_list(claim.pointer("/spec/resources/requests"))
        .get("storage")
        .copied();
    if let Some(storage) = storage {
        usage.insert("requests.storage".into(), storage);
    }
    let class = claim
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    if let Some(class) = class {
        usage.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            one,
        );
        if let Some(storage) = storage {
            usage.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage,
            );
        }
    }
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        entries
            .iter()
            .map(|(r, q)| (r.to_string(), Quantity::parse(q).unwrap()))
            .collect()
    }

    #[test]
    fn names_measure_their_types() {
        let core = |p: &str| Some((String::new(), p.to_string()));
        assert_eq!(measured_type("count/configmaps"), core("configmaps"));
        assert_eq!(
            measured_type("count/widgets.example.com"),
            Some(("example.com".into(), "widgets".into()))
        );
        assert_eq!(measured_type("secrets"), core("secrets"));
        assert_eq!(measured_type("requests.cpu"), core("pods"));
        assert_eq!(measured_type("hugepages-2Mi"), core("pods"));
        assert_eq!(measured_type("requests.nvidia.com/gpu"), core("pods"));
        assert_eq!(measured_type("services.nodeports"), core("services"));
        assert_eq!(
            measured_type("gold.storageclass.storage.k8s.io/requests.storage"),
            core("persistentvolumeclaims")
        );
        assert_eq!(measured_type("requests.example.io"), None);
    }

    #[test]
    fn objects_cost_their_count_and_legacy_name() {
        let config_map = json!({"metadata": {"name": "a"}});
        assert_eq!(
            object_usage("", "configmaps", &config_map, 0),
            list(&[("configmaps", "1"), ("count/configmaps", "1")])
        );
        assert_eq!(
            object_usage("example.com", "widgets", &config_map, 0),
            list(&[("count/widgets.example.com", "1")])
        );
    }

    #[test]
    fn pods_cost_their_effective_requests() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                    "limits": {"cpu": "500m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m", "nvidia.com/gpu": "1"}}}
            ],
            "initContainers": [
                {"name": "init", "resources": {"requests": {"cpu": "2"}}},
                {"name": "sidecar", "restartPolicy": "Always",
                    "resources": {"requests": {"memory": "64Mi"}}}
            ]
        }});
        assert_eq!(
            object_usage("", "pods", &pod, 0),
            list(&[
                ("count/pods", "1"),
                ("pods", "1"),
                ("cpu", "2"),
                ("requests.cpu", "2"),
                ("memory", "128Mi"),
                ("requests.memory", "128Mi"),
                ("limits.cpu", "500m"),
                ("requests.nvidia.com/gpu", "1"),
            ])
        );
        let finished = json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Succeeded"}});
        assert_eq!(
            object_usage("", "pods", &finished, 0),
            list(&[("count/pods", "1")])
        );
        let deleted = json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 30}, "spec": {}});
        assert_eq!(
            object_usage("", "pods", &deleted, 1_600_000_000).get("pods"),
            None
        );
    }

    #[test]
    fn scopes_select_pods_only() {
        let best_effort = json!({"spec": {"containers": [{"name": "a"}],
            "activeDeadlineSeconds": 10, "priorityClassName": "high"}});
        let hard: BTreeSet<String> = ["pods".to_string()].into();
        let scoped = |quota: Value| scope_selectors(&quota);
        let covers = |quota: Value, plural: &str| {
            quota_covers(&hard, &scoped(quota), "", plural, &best_effort)
        };
        assert!(covers(
            json!({"spec": {"scopes": ["BestEffort", "Terminating"]}}),
            "pods"
        ));
        assert!(!covers(
            json!({"spec": {"scopes": ["NotBestEffort"]}}),
            "pods"
        ));
        assert!(covers(
            json!({"spec": {"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}),
            "pods"
        ));
        assert!(!covers(
            json!({"spec": {"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}}}),
            "pods"
        ));
        let secrets: BTreeSet<String> = ["secrets".to_string()].into();
        assert!(!quota_covers(
            &secrets,
            &scoped(json!({"spec": {"scopes": ["BestEffort"]}})),
            "",
            "secrets",
            &best_effort
        ));
        assert!(quota_covers(&secrets, &[], "", "secrets", &best_effort));
    }

    #[test]
    fn missing_constraints_name_containers() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b"}
        ]}});
        let missing = missing_pod_constraints(
            &pod,
            &["requests.cpu".to_string(), "limits.memory".to_string()],
        );
        assert_eq!(missing["requests.cpu"], BTreeSet::from(["b".to_string()]));
        assert_eq!(missing["limits.memory"].len(), 2);
    }

    #[test]
    fn subtraction_stops_at_zero() {
        let a = list(&[("pods", "1"), ("requests.cpu", "1")]);
        let b = list(&[("requests.cpu", "2")]);
        assert_eq!(
            subtract_non_negative(&a, &b),
            list(&[("pods", "1"), ("requests.cpu", "0")])
        );
    }
}
