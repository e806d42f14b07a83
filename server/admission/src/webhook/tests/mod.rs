//! The dispatcher against a real HTTPS webhook: denials, warnings, patches, reinvocation,
//! failure policies, dry runs and everything that decides a webhook is not called.

mod server;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kcp_authn::UserInfo;
use kcp_registry::LogicalClusterName;
use kcp_registry::admission::Operation;
use serde_json::{Value, json};

use super::{WebhookClient, Webhooks};
use crate::{Attributes, Outcome};
use server::{Reply, WebhookServer};

fn attrs(operation: Operation) -> Attributes {
    Attributes {
        cluster: LogicalClusterName::root(),
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        resource: "configmaps".into(),
        subresource: None,
        namespace: Some("default".into()),
        name: "cm".into(),
        operation,
        user: UserInfo {
            name: "alice".into(),
            ..UserInfo::default()
        },
        dry_run: false,
        options: None,
    }
}

fn configmap() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "web"}},
        "data": {"a": "1"}})
}

/// A webhook on ConfigMap creates and updates at `path` of `server`, with `extra` fields.
fn hook(server: &WebhookServer, name: &str, path: &str, extra: Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": {
            "url": format!("{}{path}", server.url),
            "caBundle": STANDARD.encode(&server.ca_pem),
        },
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    });
    if let (Some(hook), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
        hook.extend(extra.clone());
    }
    hook
}

fn validating(configs: &[(&str, Vec<Value>)]) -> Webhooks {
    let configs: Vec<ValidatingWebhookConfiguration> = configs
        .iter()
        .map(|(name, hooks)| {
            serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap()
        })
        .collect();
    Webhooks::new(&[], &configs)
}

fn mutating(configs: &[(&str, Vec<Value>)]) -> Webhooks {
    let configs: Vec<MutatingWebhookConfiguration> = configs
        .iter()
        .map(|(name, hooks)| {
            serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap()
        })
        .collect();
    Webhooks::new(&configs, &[])
}

/// The answers of the server every test uses, by path.
fn answer(path: &str, review: &Value) -> Reply {
    let object = &review["request"]["object"];
    match path {
        "/allow" => Reply::allow(),
        "/deny" => Reply::deny("configmaps are not welcome"),
        "/deny-bare" => Reply::Response(json!({"allowed": false})),
        "/warn" => Reply::Response(json!({"allowed": true, "warnings": ["careful"],
            "auditAnnotations": {"seen": "yes"}})),
        "/label-a" => Reply::patch(json!([
            {"op": "add", "path": "/metadata/labels/a", "value": "set"}])),
        "/label-b" => Reply::patch(json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "set"}])),
        "/label-b-once" if object["metadata"]["labels"]["b"].is_null() => Reply::patch(json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "set"}])),
        "/label-b-once" => Reply::allow(),
        "/slow" => Reply::After(Duration::from_secs(3), Box::new(Reply::allow())),
        "/garbage" => Reply::Raw(200, "this is not JSON".into()),
        "/wrong-uid" => Reply::Response(json!({"uid": "someone-else", "allowed": true})),
        "/error" => Reply::Raw(500, "boom".into()),
        "/bad-patch" => Reply::Response(json!({"allowed": true, "patchType": "JSONPatch",
            "patch": STANDARD.encode("{\"not\": \"a patch\"}")})),
        "/unapplicable-patch" => Reply::patch(json!([{"op": "remove", "path": "/nothing/here"}])),
        _ => Reply::Raw(404, "no such webhook".into()),
    }
}

/// A URL where nothing listens.
fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("https://127.0.0.1:{port}/")
}

async fn run_validating(
    webhooks: &Webhooks,
    attrs: &Attributes,
) -> (Result<(), kcp_apimachinery::ApiError>, Outcome) {
    let mut outcome = Outcome::default();
    let object = configmap();
    let result = webhooks
        .validate(
            &WebhookClient::new(),
            attrs,
            None,
            Some(&object),
            None,
            &mut outcome,
        )
        .await;
    (result, outcome)
}

async fn run_mutating(
    webhooks: &Webhooks,
    attrs: &Attributes,
) -> (Result<(), kcp_apimachinery::ApiError>, Value, Outcome) {
    let mut outcome = Outcome::default();
    let mut object = configmap();
    let result = webhooks
        .mutate(
            &WebhookClient::new(),
            attrs,
            None,
            &mut object,
            None,
            &mut outcome,
        )
        .await;
    (result, object, outcome)
}

#[tokio::test]
async fn a_denial_fails_the_request_with_the_webhooks_message() {
    let server = WebhookServer::start(answer);
    let webhooks = validating(&[(
        "config",
        vec![
            hook(&server, "allow.example.com", "/allow", json!({})),
            hook(&server, "deny.example.com", "/deny", json!({})),
        ],
    )]);
    let (result, _) = run_validating(&webhooks, &attrs(Operation::Create)).await;
    let err = result.unwrap_err();
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "admission webhook \"deny.example.com\" denied the request: configmaps are not welcome"
    );
    let request = &server.requests_on("/deny")[0];
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["kind"]["kind"], "ConfigMap");
    assert_eq!(request["namespace"], "default");
    assert_eq!(request["userInfo"]["username"], "alice");
    assert_eq!(request["object"]["data"]["a"], "1");
    assert_eq!(server.requests_on("/allow").len(), 1);

    let bare = validating(&[(
        "config",
        vec![hook(&server, "bare.example.com", "/deny-bare", json!({}))],
    )]);
    let err = run_validating(&bare, &attrs(Operation::Create))
        .await
        .0
        .unwrap_err();
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "admission webhook \"bare.example.com\" denied the request without explanation"
    );
}

#[tokio::test]
async fn warnings_and_audit_annotations_reach_the_outcome() {
    let server = WebhookServer::start(answer);
    let webhooks = validating(&[(
        "config",
        vec![hook(&server, "warn.example.com", "/warn", json!({}))],
    )]);
    let (result, outcome) = run_validating(&webhooks, &attrs(Operation::Create)).await;
    result.unwrap();
    assert_eq!(outcome.warnings, ["careful"]);
    assert_eq!(outcome.audit_annotations["warn.example.com/seen"], "yes");
}

#[tokio::test]
async fn mutating_webhooks_patch_in_configuration_name_order() {
    let server = WebhookServer::start(answer);
    // Given out of order: "a-config" runs before "b-config".
    let webhooks = mutating(&[
        (
            "b-config",
            vec![hook(&server, "second.example.com", "/allow", json!({}))],
        ),
        (
            "a-config",
            vec![hook(&server, "first.example.com", "/label-a", json!({}))],
        ),
    ]);
    let (result, object, _) = run_mutating(&webhooks, &attrs(Operation::Create)).await;
    result.unwrap();
    assert_eq!(object["metadata"]["labels"]["a"], "set");
    assert_eq!(object["metadata"]["labels"]["app"], "web");
    let paths: Vec<String> = server.received().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/label-a", "/allow"]);
    // The second webhook saw the first one's change.
    assert_eq!(
        server.requests_on("/allow")[0]["object"]["metadata"]["labels"]["a"],
        "set"
    );
}

#[tokio::test]
async fn reinvocation_reruns_earlier_webhooks_once_after_a_later_change() {
    let server = WebhookServer::start(answer);
    let webhooks = mutating(&[
        (
            "a",
            vec![
                hook(
                    &server,
                    "again.example.com",
                    "/allow",
                    json!({"reinvocationPolicy": "IfNeeded"}),
                ),
                hook(&server, "once.example.com", "/warn", json!({})),
            ],
        ),
        (
            "b",
            vec![hook(
                &server,
                "changer.example.com",
                "/label-b-once",
                json!({"reinvocationPolicy": "IfNeeded"}),
            )],
        ),
    ]);
    let (result, object, _) = run_mutating(&webhooks, &attrs(Operation::Create)).await;
    result.unwrap();
    assert_eq!(object["metadata"]["labels"]["b"], "set");
    let again = server.requests_on("/allow");
    assert_eq!(again.len(), 2, "reinvoked once");
    assert!(again[0]["object"]["metadata"]["labels"]["b"].is_null());
    assert_eq!(again[1]["object"]["metadata"]["labels"]["b"], "set");
    assert_eq!(
        server.requests_on("/warn").len(),
        1,
        "reinvocationPolicy Never"
    );
    assert_eq!(
        server.requests_on("/label-b-once").len(),
        1,
        "its own change does not reinvoke the changer"
    );

    // Without a change nothing runs twice.
    let quiet_server = WebhookServer::start(answer);
    let quiet = mutating(&[(
        "a",
        vec![hook(
            &quiet_server,
            "quiet.example.com",
            "/allow",
            json!({"reinvocationPolicy": "IfNeeded"}),
        )],
    )]);
    run_mutating(&quiet, &attrs(Operation::Create))
        .await
        .0
        .unwrap();
    assert_eq!(quiet_server.requests_on("/allow").len(), 1);
}

#[tokio::test]
async fn timeouts_fail_closed_or_open_by_failure_policy() {
    let server = WebhookServer::start(answer);
    let slow = |policy: &str| {
        validating(&[(
            "config",
            vec![hook(
                &server,
                "slow.example.com",
                "/slow",
                json!({"timeoutSeconds": 1, "failurePolicy": policy}),
            )],
        )])
    };
    let err = run_validating(&slow("Fail"), &attrs(Operation::Create))
        .await
        .0
        .unwrap_err();
    assert_eq!(err.code, 500);
    assert_eq!(err.reason, kcp_apimachinery::StatusReason::InternalError);
    assert_eq!(
        err.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"{}/slow?timeout=1s\": context deadline exceeded",
            server.url
        )
    );
    let (result, outcome) = run_validating(&slow("Ignore"), &attrs(Operation::Create)).await;
    result.unwrap();
    assert_eq!(outcome, Outcome::default());
}

#[tokio::test]
async fn unreachable_webhooks_fail_closed_or_open_by_failure_policy() {
    let unreachable = |policy: &str| {
        let hook = json!({
            "name": "gone.example.com",
            "clientConfig": {"url": closed_url()},
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": policy,
        });
        mutating(&[("config", vec![hook])])
    };
    let (result, object, _) = run_mutating(&unreachable("Fail"), &attrs(Operation::Create)).await;
    let err = result.unwrap_err();
    assert_eq!(err.code, 500);
    assert!(
        err.message.starts_with(
            "Internal error occurred: failed calling webhook \"gone.example.com\": failed to call webhook: Post \"https://127.0.0.1:"
        ),
        "{}",
        err.message
    );
    assert_eq!(object, configmap());
    let (result, object, outcome) =
        run_mutating(&unreachable("Ignore"), &attrs(Operation::Create)).await;
    result.unwrap();
    assert_eq!(object, configmap());
    assert_eq!(outcome, Outcome::default());
}

#[tokio::test]
async fn nonsense_answers_are_call_failures() {
    let server = WebhookServer::start(answer);
    for (path, want) in [
        ("/garbage", "failed to call webhook: "),
        (
            "/wrong-uid",
            "received invalid webhook response: expected response.uid=",
        ),
        (
            "/error",
            "failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding",
        ),
        (
            "/bad-patch",
            "received undecodable patch in webhook response",
        ),
    ] {
        let webhooks = mutating(&[(
            "config",
            vec![hook(&server, "odd.example.com", path, json!({}))],
        )]);
        let err = run_mutating(&webhooks, &attrs(Operation::Create))
            .await
            .0
            .unwrap_err();
        assert_eq!(err.code, 500, "{path}");
        assert!(
            err.message.starts_with(&format!(
                "Internal error occurred: failed calling webhook \"odd.example.com\": {want}"
            )),
            "{path}: {}",
            err.message
        );
        let ignored = mutating(&[(
            "config",
            vec![hook(
                &server,
                "odd.example.com",
                path,
                json!({"failurePolicy": "Ignore"}),
            )],
        )]);
        let (result, object, _) = run_mutating(&ignored, &attrs(Operation::Create)).await;
        result.unwrap();
        assert_eq!(object, configmap(), "{path}");
    }
}

#[tokio::test]
async fn a_patch_that_does_not_apply_fails_whatever_the_policy() {
    let server = WebhookServer::start(answer);
    let webhooks = mutating(&[(
        "config",
        vec![hook(
            &server,
            "patcher.example.com",
            "/unapplicable-patch",
            json!({"failurePolicy": "Ignore"}),
        )],
    )]);
    let (result, object, _) = run_mutating(&webhooks, &attrs(Operation::Create)).await;
    let err = result.unwrap_err();
    assert_eq!(err.code, 500);
    assert!(err.message.starts_with("Internal error occurred: "));
    assert_eq!(object, configmap());
}

#[tokio::test]
async fn a_validating_webhook_may_not_patch() {
    let server = WebhookServer::start(answer);
    let webhooks = validating(&[(
        "config",
        vec![hook(&server, "sneaky.example.com", "/label-a", json!({}))],
    )]);
    let err = run_validating(&webhooks, &attrs(Operation::Create))
        .await
        .0
        .unwrap_err();
    assert_eq!(
        err.message,
        "Internal error occurred: failed calling webhook \"sneaky.example.com\": received invalid webhook response: validating webhook may not return response.patch"
    );
}

#[tokio::test]
async fn a_certificate_the_ca_bundle_does_not_sign_is_a_call_failure() {
    let server = WebhookServer::start(answer);
    let other = WebhookServer::start(answer);
    let mut bad = hook(&server, "untrusted.example.com", "/allow", json!({}));
    bad["clientConfig"]["caBundle"] = json!(STANDARD.encode(&other.ca_pem));
    let err = run_validating(
        &validating(&[("config", vec![bad])]),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap_err();
    assert_eq!(err.code, 500);
    assert!(
        err.message.contains("failed to call webhook"),
        "{}",
        err.message
    );
    assert!(server.received().is_empty());
}

#[tokio::test]
async fn service_references_are_never_called() {
    let service = |policy: &str| {
        json!({
            "name": "service.example.com",
            "clientConfig": {"service": {"namespace": "default", "name": "hook"}},
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": policy,
        })
    };
    let err = run_validating(
        &validating(&[("config", vec![service("Fail")])]),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap_err();
    assert_eq!(
        err.message,
        "Internal error occurred: failed calling webhook \"service.example.com\": service references are not supported by kcp"
    );
    run_validating(
        &validating(&[("config", vec![service("Ignore")])]),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap();
}

#[tokio::test]
async fn dry_runs_reach_only_webhooks_without_side_effects() {
    let server = WebhookServer::start(answer);
    let mut dry_run = attrs(Operation::Create);
    dry_run.dry_run = true;
    let with_effects = validating(&[(
        "config",
        vec![hook(
            &server,
            "effects.example.com",
            "/allow",
            json!({"sideEffects": "Some", "failurePolicy": "Ignore"}),
        )],
    )]);
    let err = run_validating(&with_effects, &dry_run).await.0.unwrap_err();
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "admission webhook \"effects.example.com\" does not support dry run"
    );
    assert!(server.received().is_empty());
    let on_dry_run = validating(&[(
        "config",
        vec![hook(
            &server,
            "careful.example.com",
            "/allow",
            json!({"sideEffects": "NoneOnDryRun"}),
        )],
    )]);
    run_validating(&on_dry_run, &dry_run).await.0.unwrap();
    assert_eq!(server.requests_on("/allow")[0]["dryRun"], true);
}

#[tokio::test]
async fn rules_and_selectors_skip_the_call() {
    let server = WebhookServer::start(answer);
    let deny = |extra: Value| {
        validating(&[(
            "config",
            vec![hook(&server, "deny.example.com", "/deny", extra)],
        )])
    };
    let skipped = [
        deny(
            json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["secrets"]}]}),
        ),
        deny(
            json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["configmaps"]}]}),
        ),
        deny(json!({"objectSelector": {"matchLabels": {"app": "db"}}})),
        deny(json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}})),
    ];
    for webhooks in &skipped {
        run_validating(webhooks, &attrs(Operation::Create))
            .await
            .0
            .unwrap();
    }
    assert!(server.received().is_empty());

    // The namespace's labels decide the namespace selector.
    let namespace = json!({"metadata": {"name": "default", "labels": {"env": "prod"}}});
    let by_namespace = deny(json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}));
    let object = configmap();
    let err = by_namespace
        .validate(
            &WebhookClient::new(),
            &attrs(Operation::Create),
            Some(&namespace),
            Some(&object),
            None,
            &mut Outcome::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, 403);

    // Admission configuration objects are never sent to webhooks.
    let everything = deny(json!({"rules": [{"operations": ["*"], "apiGroups": ["*"],
        "apiVersions": ["*"], "resources": ["*"]}]}));
    let mut config = attrs(Operation::Create);
    config.group = "admissionregistration.k8s.io".into();
    config.resource = "validatingwebhookconfigurations".into();
    config.namespace = None;
    let before = server.received().len();
    run_validating(&everything, &config).await.0.unwrap();
    assert_eq!(server.received().len(), before);

    // An invalid selector fails the writes the rules select.
    let invalid = deny(json!({"objectSelector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": []}]}}));
    let err = run_validating(&invalid, &attrs(Operation::Create))
        .await
        .0
        .unwrap_err();
    assert_eq!(err.code, 500);
}

#[tokio::test]
async fn deletes_send_the_old_object() {
    let server = WebhookServer::start(answer);
    let webhooks = validating(&[(
        "config",
        vec![hook(
            &server,
            "deletes.example.com",
            "/allow",
            json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""],
                "apiVersions": ["v1"], "resources": ["configmaps"]}]}),
        )],
    )]);
    let old = configmap();
    webhooks
        .validate(
            &WebhookClient::new(),
            &attrs(Operation::Delete),
            None,
            None,
            Some(&old),
            &mut Outcome::default(),
        )
        .await
        .unwrap();
    let request = &server.requests_on("/allow")[0];
    assert_eq!(request["operation"], "DELETE");
    assert!(request["object"].is_null());
    assert_eq!(request["oldObject"]["data"]["a"], "1");
}

#[tokio::test]
async fn match_conditions_decide_whether_the_webhook_is_called() {
    let server = WebhookServer::start(answer);
    let with_conditions = |conditions: Value, policy: &str| {
        validating(&[(
            "config",
            vec![hook(
                &server,
                "conditional.example.com",
                "/deny",
                json!({"matchConditions": conditions, "failurePolicy": policy}),
            )],
        )])
    };
    let skip = with_conditions(
        json!([
            {"name": "is-web", "expression": "object.metadata.labels.app == 'web'"},
            {"name": "not-alice", "expression": "request.userInfo.username != 'alice'"},
        ]),
        "Fail",
    );
    run_validating(&skip, &attrs(Operation::Create))
        .await
        .0
        .unwrap();
    assert!(server.received().is_empty());

    let call = with_conditions(
        json!([{"name": "is-web", "expression": "object.metadata.labels.app == 'web'"}]),
        "Fail",
    );
    let err = run_validating(&call, &attrs(Operation::Create))
        .await
        .0
        .unwrap_err();
    assert_eq!(err.code, 403);
    assert_eq!(server.requests_on("/deny").len(), 1);

    // An error and no false: the failure policy decides.
    let failing = json!([{"name": "broken", "expression": "object.metadata.missing.deeper == 1"}]);
    let err = run_validating(
        &with_conditions(failing.clone(), "Fail"),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap_err();
    assert_eq!(err.code, 403);
    assert!(
        err.message.starts_with(
            "configmaps \"cm\" is forbidden: failed evaluating match conditions of webhook \"conditional.example.com\": "
        ),
        "{}",
        err.message
    );
    run_validating(
        &with_conditions(failing, "Ignore"),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap();
    // An error and a false: no match.
    let false_wins = json!([
        {"name": "broken", "expression": "object.metadata.missing.deeper == 1"},
        {"name": "no", "expression": "false"},
    ]);
    run_validating(
        &with_conditions(false_wins, "Fail"),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap();
    // A stored condition that does not compile fails like one that cannot be evaluated.
    let uncompilable = json!([{"name": "bad", "expression": "object.("}]);
    let err = run_validating(
        &with_conditions(uncompilable, "Fail"),
        &attrs(Operation::Create),
    )
    .await
    .0
    .unwrap_err();
    assert_eq!(err.code, 403);
    assert_eq!(server.requests_on("/deny").len(), 1);
}
