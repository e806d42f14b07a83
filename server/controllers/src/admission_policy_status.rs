//! ValidatingAdmissionPolicy status, as Kubernetes' validatingadmissionpolicy-status controller
//! writes it: for every policy whose `metadata.generation` is newer than
//! `status.observedGeneration`, the type checking of its validation expressions and message
//! expressions against the types its `matchConstraints` name, in `status.typeChecking`.
//!
//! Like kube, the checked types are those named without wildcards (group, version and resource;
//! subresources skipped), at most ten, in group/version/kind order; a warning reads
//! `<group>/<version>, Kind=<Kind>: <error>` per type. The errors found are the ones kube-cel
//! lets this server tell: an expression that does not compile, and a field selected from
//! `object` or `oldObject` that the type's schema does not declare (`undefined field 'x'`).
//! Expressions are compiled by the compiler kcp-admission installs in the registry; without it
//! only `observedGeneration` is written. Kube's controller sets no condition, so neither does
//! this one (existing conditions are kept).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_registry::admission_policies::{compile_expression, policy_expressions};
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{ApiSet, LogicalClusterName, ResourceType};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::runner::{self, Controller, Pass, Queue};

const GROUP: &str = "admissionregistration.k8s.io";
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Kube's bound on the types one policy is checked against.
const MAX_TYPES_TO_CHECK: usize = 10;

/// Runs until `shutdown`.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let Some(policies) = store
        .registry()
        .builtin_type(GROUP, "v1", "validatingadmissionpolicies")
    else {
        return;
    };
    runner::run(PolicyStatus { store, policies }, shutdown).await;
}

struct PolicyStatus {
    store: RestStore,
    policies: Arc<ResourceType>,
}

impl Controller for PolicyStatus {
    type Key = LogicalClusterName;
    const NAME: &'static str = "validatingadmissionpolicy-status";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<LogicalClusterName>) -> Result<(), ApiError> {
        let prefix = self.store.keys(&self.policies).all_clusters().to_string();
        let page = self
            .store
            .list(&self.policies, ListRequest::everything(&prefix), &|_| true)
            .await?;
        let stale: BTreeSet<LogicalClusterName> = page
            .items
            .iter()
            .filter(|policy| is_stale(policy))
            .filter_map(cluster_of)
            .collect();
        for cluster in stale {
            queue.add(cluster);
        }
        let mut changes = self
            .store
            .objects()
            .watch_current(&prefix, page.revision + 1)
            .await?;
        while let Some(change) = changes.next().await {
            let change = change?;
            if is_stale(&change.object)
                && let Some(cluster) = cluster_of(&change.object)
            {
                queue.add(cluster);
            }
        }
        Err(ApiError::service_unavailable(
            "ValidatingAdmissionPolicy watch closed",
        ))
    }

    async fn reconcile(&self, cluster: &LogicalClusterName) -> Result<Pass, ApiError> {
        let prefix = self.store.keys(&self.policies).scope(cluster, None);
        let page = self
            .store
            .list(&self.policies, ListRequest::everything(&prefix), &|_| true)
            .await?;
        let types = self.store.registry().for_cluster(cluster);
        let at = Location {
            cluster,
            namespace: None,
        };
        for policy in page.items.iter().filter(|p| is_stale(p)) {
            let name = meta::name(policy).unwrap_or_default().to_string();
            let types = types.clone();
            let set_status = move |current: &Value| {
                let mut updated = current.clone();
                updated["status"] = desired_status(current, &types);
                Ok(updated)
            };
            match self
                .store
                .update(
                    &self.policies,
                    at,
                    &name,
                    &set_status,
                    Some("status"),
                    false,
                )
                .await
            {
                Ok(_) => {
                    tracing::debug!(%cluster, policy = %name, "type checked ValidatingAdmissionPolicy")
                }
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Pass::Done)
    }
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// Whether the policy's status describes an older generation.
fn is_stale(policy: &Value) -> bool {
    let observed = policy
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    meta::generation(policy).unwrap_or(0) > observed
}

/// The status for the policy's current generation (its conditions kept).
fn desired_status(policy: &Value, types: &ApiSet) -> Value {
    let mut status = policy
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    status.insert(
        "observedGeneration".into(),
        json!(meta::generation(policy).unwrap_or(0)),
    );
    let mut type_checking = Map::new();
    let warnings = expression_warnings(policy, types);
    if !warnings.is_empty() {
        type_checking.insert("expressionWarnings".into(), Value::Array(warnings));
    }
    status.insert("typeChecking".into(), Value::Object(type_checking));
    Value::Object(status)
}

/// The types `matchConstraints` names without wildcards, as kube's `typesToCheck`.
fn types_to_check(spec: &Value, types: &ApiSet) -> Vec<Arc<ResourceType>> {
    let strings = |rule: &Value, field: &str| -> Vec<String> {
        rule.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let rules = spec
        .pointer("/matchConstraints/resourceRules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut found: Vec<Arc<ResourceType>> = Vec::new();
    for rule in rules {
        let groups = strings(rule, "apiGroups");
        let versions = strings(rule, "apiVersions");
        if groups.iter().chain(&versions).any(|g| g.contains('*')) {
            continue;
        }
        let resources = strings(rule, "resources");
        for group in &groups {
            for version in &versions {
                for resource in resources.iter().filter(|r| !r.contains(['*', '/'])) {
                    if let Some(rt) = types.lookup(group, version, resource)
                        && !found.iter().any(|f| Arc::ptr_eq(f, rt))
                    {
                        found.push(rt.clone());
                    }
                }
            }
        }
    }
    found.sort_by(|a, b| (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind)));
    found.truncate(MAX_TYPES_TO_CHECK);
    found
}

/// Go's `GroupVersionKind.String()`.
fn gvk(rt: &ResourceType) -> String {
    format!("{}/{}, Kind={}", rt.group, rt.version, rt.kind)
}

/// The first field of `path` (selected from an object of type `rt`) that its schema does not
/// declare.
fn undefined_field<'p>(rt: &ResourceType, path: &'p [String]) -> Option<&'p str> {
    let mut sample = Value::Null;
    for field in path.iter().rev() {
        let mut object = Map::new();
        object.insert(field.clone(), sample);
        sample = Value::Object(object);
    }
    let pruned = rt.prune_unknown(&mut sample);
    (1..=path.len())
        .find(|&len| pruned.contains(&path[..len].join(".")))
        .map(|len| path[len - 1].as_str())
}

/// `status.typeChecking.expressionWarnings` of a policy: for its validations' expressions and
/// message expressions, what does not compile or selects undeclared fields, per checked type.
fn expression_warnings(policy: &Value, types: &ApiSet) -> Vec<Value> {
    let spec = policy.get("spec").unwrap_or(&Value::Null);
    let checked = types_to_check(spec, types);
    let mut warnings = Vec::new();
    for expression in policy_expressions(spec, false) {
        if !expression.field.starts_with("spec.validations[") {
            continue;
        }
        let Some(compiled) = compile_expression(&expression.source, &expression.scope) else {
            continue;
        };
        let issues: Vec<String> = match compiled {
            Err(err) if checked.is_empty() => vec![format!("{err}\n")],
            Err(err) => checked
                .iter()
                .map(|rt| format!("{}: {err}\n", gvk(rt)))
                .collect(),
            Ok(paths) => checked
                .iter()
                .filter_map(|rt| {
                    let undefined: Vec<String> = paths
                        .iter()
                        .filter_map(|path| undefined_field(rt, path))
                        .map(|field| format!("ERROR: <input>: undefined field '{field}'"))
                        .collect();
                    (!undefined.is_empty())
                        .then(|| format!("{}: {}\n", gvk(rt), undefined.join("\n")))
                })
                .collect(),
        };
        if !issues.is_empty() {
            warnings.push(json!({"fieldRef": expression.field, "warning": issues.join("\n")}));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_registry::Registry;
    use kcp_registry::admission_policies::EXPRESSION_COMPILER;

    /// A compiler for the tests: `?` does not compile; `object.a.b` selects `[a, b]`.
    fn compiler(
        source: &str,
        _variables: &[String],
        _object_types: bool,
    ) -> Result<Vec<Vec<String>>, String> {
        if source.contains('?') {
            return Err("ERROR: <input>: Syntax error".into());
        }
        Ok(source
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("object."))
            .map(|path| path.split('.').map(str::to_string).collect())
            .collect())
    }

    fn policy(validations: Value, resources: Value) -> Value {
        json!({
            "metadata": {"name": "p", "generation": 3},
            "spec": {
                "matchConstraints": {"resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": resources},
                ]},
                "validations": validations,
            },
            "status": {"conditions": [{"type": "Kept"}]},
        })
    }

    #[test]
    fn undeclared_fields_and_compile_errors_are_warned_per_type() {
        let _ = EXPRESSION_COMPILER.set(compiler);
        let registry = Registry::new();
        let types = registry.for_cluster(&LogicalClusterName::root());
        let policy = policy(
            json!([
                {"expression": "object.data == object.metadata.name"},
                {"expression": "object.spec.replicas > 1", "messageExpression": "'?'"},
            ]),
            json!(["configmaps", "secrets", "configmaps/status", "*"]),
        );
        let status = desired_status(&policy, &types);
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["conditions"], json!([{"type": "Kept"}]));
        assert_eq!(
            status["typeChecking"]["expressionWarnings"],
            json!([
                {"fieldRef": "spec.validations[1].expression", "warning":
                    "/v1, Kind=ConfigMap: ERROR: <input>: undefined field 'spec'\n\n/v1, Kind=Secret: ERROR: <input>: undefined field 'spec'\n"},
                {"fieldRef": "spec.validations[1].messageExpression", "warning":
                    "/v1, Kind=ConfigMap: ERROR: <input>: Syntax error\n\n/v1, Kind=Secret: ERROR: <input>: Syntax error\n"},
            ])
        );
    }

    #[test]
    fn wildcards_check_no_type_and_clean_policies_have_no_warnings() {
        let _ = EXPRESSION_COMPILER.set(compiler);
        let registry = Registry::new();
        let types = registry.for_cluster(&LogicalClusterName::root());
        let wildcard = policy(json!([{"expression": "object.nope"}]), json!(["*"]));
        assert_eq!(desired_status(&wildcard, &types)["typeChecking"], json!({}));
        let clean = policy(
            json!([{"expression": "object.data.x == object.metadata.labels.y"}]),
            json!(["configmaps"]),
        );
        assert_eq!(desired_status(&clean, &types)["typeChecking"], json!({}));
    }

    #[test]
    fn only_newer_generations_are_stale() {
        let mut policy =
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}});
        assert!(is_stale(&policy));
        policy["status"]["observedGeneration"] = json!(2);
        assert!(!is_stale(&policy));
    }
}
