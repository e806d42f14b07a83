//! Admission policies through a started kcp: ValidatingAdmissionPolicies denying and warning by
//! CEL with params from a ConfigMap, a MutatingAdmissionPolicy changing what is stored, a policy
//! whose CEL does not compile refused with kube's 422 and nothing stored, the status controller's
//! type checking, and every policy affecting its own workspace only.

use std::time::Duration;

use kcp_testing::{Caller, Patience, cluster_prefix, expect_status};
use serde_json::{Value, json};

use super::SERVER;

const POLICIES_V1: &str = "/apis/admissionregistration.k8s.io/v1";
const POLICIES_V1BETA1: &str = "/apis/admissionregistration.k8s.io/v1beta1";

/// How long a configuration may take to reach admission, and how often a test looks.
const SETTLED: Patience = Patience::new(Duration::from_secs(30), Duration::from_millis(100));

fn configmaps(cluster: &str) -> String {
    format!(
        "{}/api/v1/namespaces/default/configmaps",
        cluster_prefix(cluster)
    )
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

async fn ensure_default_namespace(admin: &Caller, cluster: &str) {
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    admin
        .ensure(
            &format!("{}/api/v1/namespaces", cluster_prefix(cluster)),
            &namespace,
        )
        .await;
}

/// Creates `object` under `api` (`/apis/<group>/<version>`) as `plural` in `cluster`.
async fn configure(admin: &Caller, cluster: &str, api: &str, plural: &str, object: Value) {
    admin
        .create(
            &format!("{}{api}/{plural}", cluster_prefix(cluster)),
            &object,
        )
        .await;
}

/// ConfigMap creates (and updates) in `default`.
fn configmap_rules() -> Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]})
}

fn next_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

/// Waits until creating a ConfigMap named `prefix…` with `data` in `cluster` answers `code`;
/// probes that get created are deleted again.
async fn wait_for_admission(admin: &Caller, cluster: &str, prefix: &str, data: Value, code: u16) {
    let path = configmaps(cluster);
    SETTLED
        .eventually(
            &format!("{prefix}* answered {code} in {cluster}"),
            || async {
                let name = format!("{prefix}probe-{}", next_suffix());
                let response = admin.post(&path, &configmap(&name, data.clone())).await;
                if response.status == 201 {
                    admin.delete(&format!("{path}/{name}")).await;
                }
                if response.status == code {
                    Ok(())
                } else {
                    Err(format!("{} {}", response.status, response.text()))
                }
            },
        )
        .await;
}

/// POSTs `body` and returns the status and the `Warning` headers.
async fn post_with_warnings(admin: &Caller, path: &str, body: &Value) -> (u16, Vec<String>) {
    let response = admin
        .request(reqwest::Method::POST, path)
        .json(body)
        .send()
        .await
        .unwrap();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    (response.status().as_u16(), warnings)
}

#[tokio::test]
async fn cel_policies_with_params_deny_and_warn_in_their_workspace_only() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let (cluster, other) = ("policies-deny", "policies-deny-other");
    for cluster in [cluster, other] {
        ensure_default_namespace(&admin, cluster).await;
    }
    let path = configmaps(cluster);
    admin
        .create(&path, &configmap("limits", json!({"max": "2"})))
        .await;
    configure(
        &admin,
        cluster,
        POLICIES_V1,
        "validatingadmissionpolicies",
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "max-keys"},
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": configmap_rules(),
                "matchConditions": [{"name": "not-the-params", "expression": "object.metadata.name != 'limits'"}],
                "variables": [{"name": "keys", "expression": "has(object.data) ? size(object.data) : 0"}],
                "validations": [{
                    "expression": "variables.keys <= int(params.data.max)",
                    "messageExpression": "'at most ' + params.data.max + ' keys, got ' + string(variables.keys)",
                }],
            }}),
    )
    .await;
    configure(
        &admin,
        cluster,
        POLICIES_V1,
        "validatingadmissionpolicybindings",
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "max-keys-deny"},
            "spec": {"policyName": "max-keys", "validationActions": ["Deny"],
                "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}}}),
    )
    .await;
    let three = json!({"a": "1", "b": "2", "c": "3"});
    wait_for_admission(&admin, cluster, "big-", three.clone(), 422).await;

    let refused = admin.post(&path, &configmap("big", three.clone())).await;
    let message = expect_status("a create the policy denies", &refused, 422, "Invalid");
    assert_eq!(
        message,
        "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-deny' denied request: at most 2 keys, got 3"
    );
    assert_eq!(
        refused.json()["details"]["causes"][0]["message"],
        "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-deny' denied request: at most 2 keys, got 3"
    );
    assert_eq!(admin.get(&format!("{path}/big")).await.status, 404);
    admin
        .create(&path, &configmap("small", json!({"a": "1"})))
        .await;

    // The params are read on every request: a higher limit lets the same create through.
    let limits = format!("{path}/limits");
    let mut raised = admin.get(&limits).await.json();
    raised["data"]["max"] = json!("3");
    assert_eq!(admin.put(&limits, &raised).await.status, 200);
    wait_for_admission(&admin, cluster, "big-", three.clone(), 201).await;

    // A second policy that only warns: the write succeeds and the client gets kube's warning.
    configure(
        &admin,
        cluster,
        POLICIES_V1,
        "validatingadmissionpolicies",
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "naming"},
            "spec": {"matchConstraints": configmap_rules(),
                "validations": [{"expression": "object.metadata.name.startsWith('team-')",
                                 "message": "names should start with team-"}]}}),
    )
    .await;
    configure(
        &admin,
        cluster,
        POLICIES_V1,
        "validatingadmissionpolicybindings",
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "naming-warn"},
            "spec": {"policyName": "naming", "validationActions": ["Warn"]}}),
    )
    .await;
    let expected = "Validation failed for ValidatingAdmissionPolicy 'naming' with binding 'naming-warn': names should start with team-";
    let warned = SETTLED
        .eventually("the warning policy in effect", || async {
            let name = format!("untidy-{}", next_suffix());
            let (status, warnings) =
                post_with_warnings(&admin, &path, &configmap(&name, json!({}))).await;
            if status == 201 && warnings.iter().any(|w| w.contains(expected)) {
                Ok(name)
            } else {
                Err(format!("{status} {warnings:?}"))
            }
        })
        .await;
    assert_eq!(admin.get(&format!("{path}/{warned}")).await.status, 200);
    let (status, warnings) =
        post_with_warnings(&admin, &path, &configmap("team-tidy", json!({}))).await;
    assert_eq!(status, 201);
    assert!(warnings.is_empty(), "{warnings:?}");

    // The other workspace has no policies: the same writes go through without warnings.
    let elsewhere = configmaps(other);
    let four = json!({"a": "1", "b": "2", "c": "3", "d": "4"});
    let (status, warnings) = post_with_warnings(&admin, &elsewhere, &configmap("big", four)).await;
    assert_eq!(status, 201);
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[tokio::test]
async fn a_mutating_admission_policy_changes_what_is_stored() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let (cluster, other) = ("policies-mutate", "policies-mutate-other");
    for cluster in [cluster, other] {
        ensure_default_namespace(&admin, cluster).await;
    }
    configure(
        &admin,
        cluster,
        POLICIES_V1BETA1,
        "mutatingadmissionpolicies",
        json!({"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "stamp"},
            "spec": {
                "matchConstraints": configmap_rules(),
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                        "Object{metadata: Object.metadata{labels: {'stamped-by': 'policy'}}}"}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression":
                        "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/owner'), value: request.userInfo.username}]"}},
                ],
            }}),
    )
    .await;
    configure(
        &admin,
        cluster,
        POLICIES_V1BETA1,
        "mutatingadmissionpolicybindings",
        json!({"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "stamp"}, "spec": {"policyName": "stamp"}}),
    )
    .await;
    let path = configmaps(cluster);
    SETTLED
        .eventually("the mutating policy in effect", || async {
            let name = format!("probe-{}", next_suffix());
            let created = admin
                .create(&path, &configmap(&name, json!({"k": "v"})))
                .await;
            admin.delete(&format!("{path}/{name}")).await;
            match created["metadata"]["labels"]["stamped-by"].as_str() {
                Some("policy") => Ok(()),
                _ => Err(created.to_string()),
            }
        })
        .await;

    admin
        .create(
            &path,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "stamped", "labels": {"app": "demo"}}, "data": {"k": "v"}}),
        )
        .await;
    let stored = admin.get(&format!("{path}/stamped")).await.json();
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"app": "demo", "stamped-by": "policy"})
    );
    let username = admin.user_info().await["username"].clone();
    assert_eq!(
        stored["metadata"]["annotations"]["example.com/owner"],
        username
    );

    // Not in the other workspace.
    let unstamped = admin
        .create(&configmaps(other), &configmap("stamped", json!({"k": "v"})))
        .await;
    assert!(unstamped["metadata"].get("labels").is_none(), "{unstamped}");
}

#[tokio::test]
async fn a_policy_whose_cel_does_not_compile_is_refused_and_status_type_checks() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let cluster = "policies-compile";
    let policies = format!(
        "{}{POLICIES_V1}/validatingadmissionpolicies",
        cluster_prefix(cluster)
    );
    let broken = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "broken"},
        "spec": {"matchConstraints": configmap_rules(),
            "validations": [{"expression": "object.data.all(k, nope)"}]}});
    let refused = admin.post(&policies, &broken).await;
    let message = expect_status("a policy that does not compile", &refused, 422, "Invalid");
    assert_eq!(
        message,
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"broken\" is invalid: spec.validations[0].expression: Invalid value: \"object.data.all(k, nope)\": compilation failed: ERROR: <input>: undeclared reference to 'nope' (in container '')"
    );
    assert_eq!(
        refused.json()["details"]["causes"][0]["field"],
        "spec.validations[0].expression"
    );
    assert_eq!(admin.get(&format!("{policies}/broken")).await.status, 404);

    // One that compiles but selects a field ConfigMaps do not have: stored, and type checked.
    let mut typo = broken.clone();
    typo["metadata"]["name"] = json!("typo");
    typo["spec"]["validations"] = json!([{"expression": "object.spec.replicas < 5"}]);
    admin.create(&policies, &typo).await;
    let status = SETTLED
        .eventually("the policy type checked", || async {
            let policy = admin.get(&format!("{policies}/typo")).await.json();
            match policy["status"]["observedGeneration"].as_i64() {
                Some(1) => Ok(policy["status"].clone()),
                _ => Err(policy["status"].to_string()),
            }
        })
        .await;
    assert_eq!(
        status["typeChecking"]["expressionWarnings"],
        json!([{"fieldRef": "spec.validations[0].expression",
            "warning": "/v1, Kind=ConfigMap: ERROR: <input>: undefined field 'spec'\n"}])
    );
}
