//! Unit tests of admission policies through their public API, with an in-memory object source.

use futures::future::BoxFuture;
use kcp_apimachinery::{ApiError, StatusReason, meta};
use kcp_authn::UserInfo;
use kcp_registry::LogicalClusterName;
use kcp_registry::admission::Operation;
use serde_json::{Value, json};

use super::{Policies, install_expression_checks};
use crate::sources::Objects;
use crate::{Attributes, Outcome};

/// Objects of one cluster, in memory.
#[derive(Default)]
struct Memory(Vec<Value>);

impl Memory {
    fn matching<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> {
        self.0.iter().filter(move |o| {
            meta::api_version(o) == Some(api_version)
                && meta::kind(o) == Some(kind)
                && (namespace.is_none() || meta::namespace(o) == namespace)
        })
    }
}

impl Objects for Memory {
    fn get<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        let found = self
            .matching(api_version, kind, namespace)
            .find(|o| meta::name(o) == Some(name))
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn list<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>> {
        let found = self
            .matching(api_version, kind, namespace)
            .cloned()
            .collect();
        Box::pin(async move { Ok(found) })
    }
}

fn attrs(operation: Operation, name: &str) -> Attributes {
    Attributes {
        cluster: LogicalClusterName::root(),
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        resource: "configmaps".into(),
        subresource: None,
        namespace: Some("default".into()),
        name: name.into(),
        operation,
        user: UserInfo {
            name: "alice".into(),
            ..UserInfo::default()
        },
        dry_run: false,
        options: None,
    }
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": data})
}

fn config_rules() -> Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]})
}

fn validating(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = config_rules();
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

fn typed<T: serde::de::DeserializeOwned>(values: &[Value]) -> Vec<T> {
    values
        .iter()
        .map(|v| serde_json::from_value(v.clone()).unwrap())
        .collect()
}

fn validating_policies(policies: &[Value], bindings: &[Value]) -> Policies {
    Policies::new(&typed(policies), &typed(bindings), &[], &[])
}

fn mutating_policies(policies: &[Value], bindings: &[Value]) -> Policies {
    Policies::new(&[], &[], &typed(policies), &typed(bindings))
}

async fn validate(
    policies: &Policies,
    objects: &Memory,
    object: &Value,
) -> (Result<(), ApiError>, Outcome) {
    let mut outcome = Outcome::default();
    let name = meta::name(object).unwrap_or_default();
    let result = policies
        .validate(
            objects,
            &attrs(Operation::Create, name),
            None,
            Some(object),
            None,
            &mut outcome,
        )
        .await;
    (result, outcome)
}

/// Validates the creation of ConfigMap `name` in `namespace`.
async fn validate_in(policies: &Policies, name: &str, namespace: &Value) -> Result<(), ApiError> {
    let object = configmap(name, json!({}));
    let mut outcome = Outcome::default();
    policies
        .validate(
            &Memory::default(),
            &attrs(Operation::Create, name),
            Some(namespace),
            Some(&object),
            None,
            &mut outcome,
        )
        .await
}

const SMALL: &str = "size(object.data) <= 1";

#[tokio::test]
async fn deny_fails_with_kubes_message_reason_and_code() {
    let policies = validating_policies(
        &[validating(
            "small",
            json!({"validations": [{"expression": SMALL, "message": "too much data"}]}),
        )],
        &[binding("small-binding", "small", json!({}))],
    );
    assert!(!policies.is_empty());
    let objects = Memory::default();
    let ok = configmap("ok", json!({"a": "1"}));
    assert!(validate(&policies, &objects, &ok).await.0.is_ok());
    let big = configmap("big", json!({"a": "1", "b": "2"}));
    let err = validate(&policies, &objects, &big).await.0.unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, StatusReason::Invalid);
    assert_eq!(
        err.message,
        "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'small' with binding 'small-binding' denied request: too much data"
    );
    let causes = &err.details.unwrap().causes;
    assert_eq!(
        causes[0].message,
        "ValidatingAdmissionPolicy 'small' with binding 'small-binding' denied request: too much data"
    );
}

#[tokio::test]
async fn reason_sets_the_code_and_default_message_names_the_expression() {
    let policies = validating_policies(
        &[validating(
            "small",
            json!({"validations": [{"expression": SMALL, "reason": "Forbidden"}]}),
        )],
        &[binding("b", "small", json!({}))],
    );
    let big = configmap("big", json!({"a": "1", "b": "2"}));
    let err = validate(&policies, &Memory::default(), &big)
        .await
        .0
        .unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert!(
        err.message
            .ends_with(&format!("denied request: failed expression: {SMALL}"))
    );
}

#[tokio::test]
async fn warn_and_audit_actions_do_not_deny() {
    let policies = validating_policies(
        &[validating(
            "small",
            json!({"validations": [{"expression": SMALL, "message": "too much data"}]}),
        )],
        &[binding(
            "b",
            "small",
            json!({"validationActions": ["Warn", "Audit"]}),
        )],
    );
    let big = configmap("big", json!({"a": "1", "b": "2"}));
    let (result, outcome) = validate(&policies, &Memory::default(), &big).await;
    assert!(result.is_ok());
    assert_eq!(
        outcome.warnings,
        ["Validation failed for ValidatingAdmissionPolicy 'small' with binding 'b': too much data"]
    );
    let audit: Value = serde_json::from_str(
        &outcome.audit_annotations["validation.policy.admission.k8s.io/validation_failure"],
    )
    .unwrap();
    assert_eq!(
        audit,
        json!([{"message": "too much data", "policy": "small", "binding": "b",
                "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}])
    );
}

fn max_keys_policy() -> Value {
    validating(
        "max-keys",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{
                "expression": "size(object.data) <= int(params.data.max)",
                "messageExpression": "'at most ' + params.data.max + ' keys'",
            }],
        }),
    )
}

#[tokio::test]
async fn params_by_name() {
    let policies = validating_policies(
        &[max_keys_policy()],
        &[binding(
            "b",
            "max-keys",
            json!({"paramRef": {"name": "limits"}}),
        )],
    );
    let objects = Memory(vec![configmap("limits", json!({"max": "1"}))]);
    let big = configmap("big", json!({"a": "1", "b": "2"}));
    let err = validate(&policies, &objects, &big).await.0.unwrap_err();
    assert!(
        err.message.ends_with("denied request: at most 1 keys"),
        "{}",
        err.message
    );
    let small = configmap("small", json!({"a": "1"}));
    assert!(validate(&policies, &objects, &small).await.0.is_ok());
}

#[tokio::test]
async fn missing_params_deny_or_allow() {
    let big = configmap("big", json!({"a": "1", "b": "2"}));
    let deny = validating_policies(
        &[max_keys_policy()],
        &[binding(
            "b",
            "max-keys",
            json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}}),
        )],
    );
    let err = validate(&deny, &Memory::default(), &big)
        .await
        .0
        .unwrap_err();
    assert!(
        err.message.ends_with(
            "ValidatingAdmissionPolicy 'max-keys' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{}",
        err.message
    );
    let allow = validating_policies(
        &[max_keys_policy()],
        &[binding(
            "b",
            "max-keys",
            json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Allow"}}),
        )],
    );
    assert!(validate(&allow, &Memory::default(), &big).await.0.is_ok());
}

#[tokio::test]
async fn params_by_selector_evaluate_once_each() {
    let policies = validating_policies(
        &[max_keys_policy()],
        &[binding(
            "b",
            "max-keys",
            json!({"paramRef": {"selector": {"matchLabels": {"limits": "yes"}}},
                   "validationActions": ["Warn"]}),
        )],
    );
    let mut three = configmap("three", json!({"max": "3"}));
    three["metadata"]["labels"] = json!({"limits": "yes"});
    let mut one = configmap("one", json!({"max": "1"}));
    one["metadata"]["labels"] = json!({"limits": "yes"});
    let unlabelled = configmap("zero", json!({"max": "0"}));
    let objects = Memory(vec![three, one, unlabelled]);
    let two = configmap("two", json!({"a": "1", "b": "2"}));
    let (result, outcome) = validate(&policies, &objects, &two).await;
    assert!(result.is_ok());
    assert_eq!(
        outcome.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'max-keys' with binding 'b': at most 1 keys"
        ]
    );
}

#[tokio::test]
async fn variables_feed_validations_and_messages() {
    let policies = validating_policies(
        &[validating(
            "names",
            json!({
                "variables": [
                    {"name": "prefix", "expression": "'team-'"},
                    {"name": "wanted", "expression": "variables.prefix + request.userInfo.username"},
                ],
                "validations": [{
                    "expression": "object.metadata.name.startsWith(variables.wanted)",
                    "messageExpression": "'name must start with ' + variables.wanted",
                }],
            }),
        )],
        &[binding("b", "names", json!({}))],
    );
    let good = configmap("team-alice-x", json!({}));
    assert!(
        validate(&policies, &Memory::default(), &good)
            .await
            .0
            .is_ok()
    );
    let bad = configmap("other", json!({}));
    let err = validate(&policies, &Memory::default(), &bad)
        .await
        .0
        .unwrap_err();
    assert!(
        err.message
            .ends_with("denied request: name must start with team-alice"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn failure_policy_decides_on_runtime_errors() {
    let spec = |failure: &str| {
        validating(
            "needs-owner",
            json!({"failurePolicy": failure,
                   "validations": [{"expression": "object.data.owner != ''"}]}),
        )
    };
    let object = configmap("x", json!({}));
    let fail = validating_policies(&[spec("Fail")], &[binding("b", "needs-owner", json!({}))]);
    let err = validate(&fail, &Memory::default(), &object)
        .await
        .0
        .unwrap_err();
    assert!(
        err.message
            .contains("denied request: expression 'object.data.owner != ''' resulted in error"),
        "{}",
        err.message
    );
    let ignore = validating_policies(&[spec("Ignore")], &[binding("b", "needs-owner", json!({}))]);
    assert!(
        validate(&ignore, &Memory::default(), &object)
            .await
            .0
            .is_ok()
    );
}

#[tokio::test]
async fn match_conditions_and_constraints_select_requests() {
    let policies = validating_policies(
        &[validating(
            "deny-all",
            json!({
                "matchConditions": [{"name": "not-system", "expression": "!object.metadata.name.startsWith('system-')"}],
                "validations": [{"expression": "false", "message": "no"}],
            }),
        )],
        &[binding(
            "b",
            "deny-all",
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}),
        )],
    );
    let prod = json!({"metadata": {"name": "default", "labels": {"env": "prod"}}});
    let dev = json!({"metadata": {"name": "default", "labels": {"env": "dev"}}});
    assert!(validate_in(&policies, "app", &prod).await.is_err());
    assert!(
        validate_in(&policies, "app", &dev).await.is_ok(),
        "namespace selector"
    );
    assert!(
        validate_in(&policies, "system-app", &prod).await.is_ok(),
        "match condition"
    );
    let mut secret_attrs = attrs(Operation::Create, "s");
    secret_attrs.resource = "secrets".into();
    let mut outcome = Outcome::default();
    let result = policies
        .validate(
            &Memory::default(),
            &secret_attrs,
            Some(&prod),
            Some(&json!({"metadata": {"name": "s"}})),
            None,
            &mut outcome,
        )
        .await;
    assert!(result.is_ok(), "resource rules");
}

#[tokio::test]
async fn audit_annotations_are_published_per_policy() {
    let policies = validating_policies(
        &[validating(
            "audit",
            json!({"auditAnnotations": [
                {"key": "owner", "valueExpression": "'by ' + request.userInfo.username"},
                {"key": "none", "valueExpression": "null"},
            ]}),
        )],
        &[binding("b", "audit", json!({}))],
    );
    let (result, outcome) =
        validate(&policies, &Memory::default(), &configmap("x", json!({}))).await;
    assert!(result.is_ok());
    assert_eq!(
        outcome
            .audit_annotations
            .get("audit/owner")
            .map(String::as_str),
        Some("by alice")
    );
    assert!(!outcome.audit_annotations.contains_key("audit/none"));
}

#[tokio::test]
async fn namespace_object_and_request_are_visible() {
    let policies = validating_policies(
        &[validating(
            "ns",
            json!({"validations": [{
                "expression": "namespaceObject.metadata.labels.env == 'prod' && request.operation == 'CREATE' && request.namespace == 'default' && oldObject == null",
            }]}),
        )],
        &[binding("b", "ns", json!({}))],
    );
    let prod = json!({"metadata": {"name": "default", "labels": {"env": "prod"}}, "spec": {}});
    let object = configmap("x", json!({}));
    let mut outcome = Outcome::default();
    let result = policies
        .validate(
            &Memory::default(),
            &attrs(Operation::Create, "x"),
            Some(&prod),
            Some(&object),
            None,
            &mut outcome,
        )
        .await;
    assert!(result.is_ok(), "{result:?}");
}

fn mutating(name: &str, mutations: Value, extra: Value) -> Value {
    let mut spec = json!({"matchConstraints": config_rules(), "mutations": mutations});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

fn mutating_binding(name: &str, policy: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"policyName": policy}})
}

async fn mutate(policies: &Policies, object: &mut Value) -> Result<(), ApiError> {
    let name = meta::name(object).unwrap_or_default().to_string();
    policies
        .mutate(
            &Memory::default(),
            &attrs(Operation::Create, &name),
            None,
            object,
            None,
            &mut Outcome::default(),
        )
        .await
}

#[tokio::test]
async fn apply_configuration_merges_into_the_object() {
    let policies = mutating_policies(
        &[mutating(
            "label",
            json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{labels: {'managed': 'yes'}}, data: {'added': object.metadata.name}}"}}]),
            json!({}),
        )],
        &[mutating_binding("b", "label")],
    );
    let mut object = configmap("x", json!({"kept": "1"}));
    object["metadata"]["labels"] = json!({"app": "a"});
    mutate(&policies, &mut object).await.unwrap();
    assert_eq!(
        object["metadata"]["labels"],
        json!({"app": "a", "managed": "yes"})
    );
    assert_eq!(object["data"], json!({"kept": "1", "added": "x"}));
    assert_eq!(object["kind"], "ConfigMap");
}

#[tokio::test]
async fn json_patch_applies_and_a_failed_test_leaves_the_object() {
    let policies = mutating_policies(
        &[mutating(
            "patch",
            json!([
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/by'), value: request.userInfo.username}]"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'test', path: '/data/x', value: 'nope'}, JSONPatch{op: 'remove', path: '/data'}]"}},
            ]),
            json!({}),
        )],
        &[mutating_binding("b", "patch")],
    );
    let mut object = configmap("x", json!({"x": "1"}));
    mutate(&policies, &mut object).await.unwrap();
    assert_eq!(
        object["metadata"]["annotations"],
        json!({"example.com/by": "alice"})
    );
    assert_eq!(object["data"], json!({"x": "1"}));
}

#[tokio::test]
async fn mutation_errors_follow_the_failure_policy() {
    let change_kind = json!([{"patchType": "JSONPatch", "jsonPatch": {"expression":
        "[JSONPatch{op: 'replace', path: '/kind', value: 'Secret'}]"}}]);
    let fail = mutating_policies(
        &[mutating("kind", change_kind.clone(), json!({}))],
        &[mutating_binding("b", "kind")],
    );
    let mut object = configmap("x", json!({}));
    let err = mutate(&fail, &mut object).await.unwrap_err();
    assert_eq!(err.code, 403);
    assert!(
        err.message.starts_with("policy 'kind' with binding 'b' denied request: the mutation may not change apiVersion or kind"),
        "{}",
        err.message
    );
    assert_eq!(object["kind"], "ConfigMap");
    let ignore = mutating_policies(
        &[mutating(
            "kind",
            change_kind,
            json!({"failurePolicy": "Ignore"}),
        )],
        &[mutating_binding("b", "kind")],
    );
    mutate(&ignore, &mut object).await.unwrap();
    assert_eq!(object["kind"], "ConfigMap");
}

#[tokio::test]
async fn if_needed_policies_run_again_after_a_later_change() {
    let copy = json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
        "has(object.data) && 'source' in object.data ? Object{data: {'copy': object.data.source}} : Object{}"}}]);
    let set = json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
        "Object{data: {'source': 'set'}}"}}]);
    let policies = mutating_policies(
        &[
            mutating("a-copy", copy, json!({"reinvocationPolicy": "IfNeeded"})),
            mutating("b-set", set, json!({})),
        ],
        &[
            mutating_binding("a", "a-copy"),
            mutating_binding("b", "b-set"),
        ],
    );
    let mut object = configmap("x", json!({}));
    mutate(&policies, &mut object).await.unwrap();
    assert_eq!(object["data"], json!({"source": "set", "copy": "set"}));
}

#[test]
fn policies_are_shareable_between_requests() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Policies>();
}

#[test]
fn policies_that_do_not_compile_are_refused_by_the_strategy() {
    install_expression_checks();
    let registry = kcp_registry::Registry::new();
    let rt = registry
        .builtin_type(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
        )
        .unwrap();
    let mut policy = validating(
        "bad",
        json!({"variables": [{"name": "limit", "expression": "3"}],
               "validations": [{"expression": "size(object.data) <= variables.limit"},
                               {"expression": "object.data.all(k, undefinedThing)"}]}),
    );
    rt.strategy.prepare_for_create(&mut policy);
    let errors: Vec<String> = rt
        .strategy
        .validate(&policy)
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect();
    assert_eq!(
        errors,
        [
            "spec.validations[1].expression: Invalid value: \"object.data.all(k, undefinedThing)\": compilation failed: ERROR: <input>: undeclared reference to 'undefinedThing' (in container '')"
        ]
    );
    let mutating = kcp_registry::Registry::new()
        .builtin_type(
            "admissionregistration.k8s.io",
            "v1beta1",
            "mutatingadmissionpolicies",
        )
        .unwrap();
    let mut policy =
        mutating_policy_object("Object{metadata: Object.metadata{labels: {'a': 'b'}}}");
    mutating.strategy.prepare_for_create(&mut policy);
    assert!(mutating.strategy.validate(&policy).is_empty());
}

fn mutating_policy_object(expression: &str) -> Value {
    mutating(
        "m",
        json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]),
        json!({}),
    )
}

#[tokio::test]
async fn bindings_apply_in_name_order_and_unbound_policies_do_nothing() {
    let small = validating(
        "small",
        json!({"validations": [{"expression": SMALL, "message": "too much data"}]}),
    );
    assert!(validating_policies(std::slice::from_ref(&small), &[]).is_empty());
    let unknown_policy = binding("b", "absent", json!({}));
    assert!(validating_policies(std::slice::from_ref(&small), &[unknown_policy]).is_empty());
    let policies = validating_policies(
        &[small],
        &[
            binding("z-deny", "small", json!({})),
            binding("a-deny", "small", json!({})),
        ],
    );
    let big = configmap("big", json!({"a": "1", "b": "2"}));
    let err = validate(&policies, &Memory::default(), &big)
        .await
        .0
        .unwrap_err();
    assert!(
        err.message.contains("with binding 'a-deny' denied request"),
        "{}",
        err.message
    );
    assert_eq!(err.details.unwrap().causes.len(), 1);
}
