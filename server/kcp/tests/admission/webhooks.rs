//! Admission webhooks through a started kcp: Validating- and MutatingWebhookConfigurations whose
//! webhook is a real HTTPS server of the test (its own CA, on 127.0.0.1), denying, warning,
//! patching, stalling, unreachable or answering nonsense, with kube's Status for each outcome,
//! nothing stored when a write is refused, and every configuration affecting its own workspace
//! only. kubectl shows a webhook's denial as kube-apiserver's.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_testing::{Caller, Kubectl, Patience, cluster_prefix, expect_status};
use serde_json::{Value, json};

use super::SERVER;

#[allow(dead_code)]
#[path = "../../../admission/src/webhook/tests/server.rs"]
mod server;

use server::{Reply, WebhookServer};

const ADMISSION_V1: &str = "/apis/admissionregistration.k8s.io/v1";

/// How long a configuration may take to reach admission, and how often a test looks.
const SETTLED: Patience = Patience::new(Duration::from_secs(30), Duration::from_millis(100));

/// The webhook's answers, by path.
fn answer(path: &str, _review: &Value) -> Reply {
    match path {
        "/allow" => Reply::allow(),
        "/deny" => Reply::deny("configmaps named deny-* are not welcome"),
        "/warn" => Reply::Response(json!({"allowed": true, "warnings": ["careful with that"]})),
        "/mutate" => Reply::patch(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])),
        "/slow" => Reply::After(Duration::from_secs(3), Box::new(Reply::allow())),
        "/garbage" => Reply::Raw(200, "<html>not a review</html>".into()),
        "/bad-patch" => Reply::Response(json!({"allowed": true, "patchType": "JSONPatch",
            "patch": STANDARD.encode("{\"not\": \"a patch\"}")})),
        _ => Reply::Raw(404, "no such webhook".into()),
    }
}

/// A webhook on ConfigMap creates whose names start with `prefix` (a match condition).
fn hook(url: &str, ca_pem: &str, name: &str, prefix: &str, extra: Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": STANDARD.encode(ca_pem)},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "matchConditions": [{"name": "prefix",
            "expression": format!("object.metadata.name.startsWith('{prefix}')")}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    });
    if let (Some(hook), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
        hook.extend(extra.clone());
    }
    hook
}

fn served(server: &WebhookServer, name: &str, path: &str, prefix: &str, extra: Value) -> Value {
    hook(
        &format!("{}{path}", server.url),
        &server.ca_pem,
        name,
        prefix,
        extra,
    )
}

/// Creates a webhook configuration (`kind` ValidatingWebhookConfiguration or
/// MutatingWebhookConfiguration) in `cluster`.
async fn configure(admin: &Caller, cluster: &str, kind: &str, name: &str, hooks: Vec<Value>) {
    let plural = format!("{}s", kind.to_lowercase());
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks});
    admin
        .create(
            &format!("{}{ADMISSION_V1}/{plural}", cluster_prefix(cluster)),
            &config,
        )
        .await;
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

fn configmaps(cluster: &str) -> String {
    format!(
        "{}/api/v1/namespaces/default/configmaps",
        cluster_prefix(cluster)
    )
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"key": "value"}})
}

/// Waits until creating ConfigMaps named `prefix…` in `cluster` answers `code` (configuration
/// reaching admission); probes that get created are deleted again.
async fn wait_for_admission(admin: &Caller, cluster: &str, prefix: &str, code: u16) {
    let path = configmaps(cluster);
    SETTLED
        .eventually(
            &format!("{prefix}* answered {code} in {cluster}"),
            || async {
                let name = format!("{prefix}probe-{}", next_suffix());
                let response = admin.post(&path, &configmap(&name)).await;
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

fn next_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

#[tokio::test]
async fn a_denial_refuses_the_write_in_its_workspace_only() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let webhook = WebhookServer::start(answer);
    let (cluster, other) = ("webhooks-deny", "webhooks-deny-other");
    for cluster in [cluster, other] {
        ensure_default_namespace(&admin, cluster).await;
    }
    configure(
        &admin,
        cluster,
        "ValidatingWebhookConfiguration",
        "deny",
        vec![served(
            &webhook,
            "deny.webhooks.test",
            "/deny",
            "deny-",
            json!({}),
        )],
    )
    .await;
    wait_for_admission(&admin, cluster, "deny-", 403).await;

    let path = configmaps(cluster);
    let refused = admin.post(&path, &configmap("deny-this")).await;
    let message = expect_status("a denied create", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        "admission webhook \"deny.webhooks.test\" denied the request: configmaps named deny-* are not welcome"
    );
    assert_eq!(admin.get(&format!("{path}/deny-this")).await.status, 404);
    let request = webhook
        .requests_on("/deny")
        .into_iter()
        .find(|r| r["name"] == "deny-this")
        .expect("the webhook saw the refused create");
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["namespace"], "default");
    assert_eq!(request["object"]["data"]["key"], "value");
    assert_eq!(
        request["userInfo"]["username"],
        admin.user_info().await["username"]
    );

    // Names the match condition does not select are not sent.
    admin.create(&path, &configmap("fine")).await;
    assert!(
        webhook
            .received()
            .iter()
            .all(|(_, review)| review["request"]["name"] != "fine")
    );

    // Another workspace: the same write goes through and the webhook never hears of it.
    admin
        .create(&configmaps(other), &configmap("deny-elsewhere"))
        .await;
    assert!(
        webhook
            .received()
            .iter()
            .all(|(_, review)| review["request"]["name"] != "deny-elsewhere")
    );

    // kubectl shows the webhook's message.
    let kubectl = Kubectl::new("1.33", &kcp.kubeconfig());
    let server_flag = format!("--server={}/clusters/{cluster}", kcp.base_url());
    let stderr = kubectl.fails(&[
        &server_flag,
        "create",
        "configmap",
        "deny-kubectl",
        "--from-literal=a=b",
    ]);
    assert!(
        stderr.contains(
            "admission webhook \"deny.webhooks.test\" denied the request: configmaps named deny-* are not welcome"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_webhook_that_refuses_everything_can_still_be_removed() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let webhook = WebhookServer::start(answer);
    let cluster = "webhooks-everything";
    ensure_default_namespace(&admin, cluster).await;
    let mut everything = served(&webhook, "all.webhooks.test", "/deny", "", json!({}));
    everything["rules"] = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
        "resources": ["*/*"]}]);
    configure(
        &admin,
        cluster,
        "ValidatingWebhookConfiguration",
        "everything",
        vec![everything],
    )
    .await;
    wait_for_admission(&admin, cluster, "any-", 403).await;
    let config = format!(
        "{}{ADMISSION_V1}/validatingwebhookconfigurations/everything",
        cluster_prefix(cluster)
    );
    let deleted = admin.delete(&config).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    wait_for_admission(&admin, cluster, "any-", 201).await;
    assert!(webhook.received().iter().all(
        |(_, review)| review["request"]["resource"]["group"] != "admissionregistration.k8s.io"
    ));
}

#[tokio::test]
async fn mutations_are_stored_and_warnings_reach_the_client() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let webhook = WebhookServer::start(answer);
    let cluster = "webhooks-mutate";
    ensure_default_namespace(&admin, cluster).await;
    configure(
        &admin,
        cluster,
        "MutatingWebhookConfiguration",
        "mutate",
        vec![served(
            &webhook,
            "mutate.webhooks.test",
            "/mutate",
            "mutate-",
            json!({}),
        )],
    )
    .await;
    configure(
        &admin,
        cluster,
        "ValidatingWebhookConfiguration",
        "warn",
        vec![served(
            &webhook,
            "warn.webhooks.test",
            "/warn",
            "mutate-",
            json!({}),
        )],
    )
    .await;
    let path = configmaps(cluster);
    SETTLED
        .eventually("the mutating webhook in effect", || async {
            let name = format!("mutate-probe-{}", next_suffix());
            let created = admin.create(&path, &configmap(&name)).await;
            admin.delete(&format!("{path}/{name}")).await;
            match created["metadata"]["labels"]["mutated"].as_str() {
                Some("yes") => Ok(()),
                _ => Err(created.to_string()),
            }
        })
        .await;

    let response = admin
        .request(reqwest::Method::POST, &path)
        .json(&configmap("mutate-me"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let warnings: Vec<String> = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("careful with that")),
        "{warnings:?}"
    );
    let stored = admin.get(&format!("{path}/mutate-me")).await.json();
    assert_eq!(stored["metadata"]["labels"]["mutated"], "yes");
    // The validating webhook saw the mutated object.
    let validated = webhook
        .requests_on("/warn")
        .into_iter()
        .find(|r| r["name"] == "mutate-me")
        .unwrap();
    assert_eq!(validated["object"]["metadata"]["labels"]["mutated"], "yes");
}

#[tokio::test]
async fn failing_webhooks_fail_closed_or_open_by_failure_policy() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let webhook = WebhookServer::start(answer);
    let cluster = "webhooks-failures";
    ensure_default_namespace(&admin, cluster).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!(
            "https://127.0.0.1:{}/",
            listener.local_addr().unwrap().port()
        )
    };
    let fail = json!({"failurePolicy": "Fail", "timeoutSeconds": 1});
    configure(
        &admin,
        cluster,
        "ValidatingWebhookConfiguration",
        "failing",
        vec![
            served(
                &webhook,
                "slow.webhooks.test",
                "/slow",
                "slow-",
                fail.clone(),
            ),
            served(
                &webhook,
                "garbage.webhooks.test",
                "/garbage",
                "garbage-",
                fail.clone(),
            ),
            hook(
                &closed,
                &webhook.ca_pem,
                "gone.webhooks.test",
                "gone-",
                fail.clone(),
            ),
        ],
    )
    .await;
    configure(
        &admin,
        cluster,
        "MutatingWebhookConfiguration",
        "bad-patch",
        vec![served(
            &webhook,
            "patch.webhooks.test",
            "/bad-patch",
            "patch-",
            fail,
        )],
    )
    .await;
    wait_for_admission(&admin, cluster, "garbage-", 500).await;
    let path = configmaps(cluster);
    for (name, webhook_name, detail) in [
        ("slow-1", "slow.webhooks.test", "context deadline exceeded"),
        (
            "garbage-1",
            "garbage.webhooks.test",
            "failed to call webhook: ",
        ),
        (
            "gone-1",
            "gone.webhooks.test",
            "failed to call webhook: Post \"https://127.0.0.1:",
        ),
        (
            "patch-1",
            "patch.webhooks.test",
            "received undecodable patch in webhook response",
        ),
    ] {
        let refused = admin.post(&path, &configmap(name)).await;
        let message = expect_status(name, &refused, 500, "InternalError");
        assert!(
            message.starts_with(&format!(
                "Internal error occurred: failed calling webhook \"{webhook_name}\": "
            )) && message.contains(detail),
            "{name}: {message}"
        );
        assert_eq!(admin.get(&format!("{path}/{name}")).await.status, 404);
    }

    // failurePolicy Ignore: the same webhooks are skipped.
    for plural in [
        "validatingwebhookconfigurations/failing",
        "mutatingwebhookconfigurations/bad-patch",
    ] {
        let config_path = format!("{}{ADMISSION_V1}/{plural}", cluster_prefix(cluster));
        let mut config = admin.get(&config_path).await.json();
        for hook in config["webhooks"].as_array_mut().unwrap() {
            hook["failurePolicy"] = json!("Ignore");
        }
        let updated = admin.put(&config_path, &config).await;
        assert_eq!(updated.status, 200, "{}", updated.text());
    }
    wait_for_admission(&admin, cluster, "garbage-", 201).await;
    for name in ["slow-2", "garbage-2", "gone-2", "patch-2"] {
        let created = admin.create(&path, &configmap(name)).await;
        assert!(created["metadata"]["labels"].is_null(), "{created}");
    }
}

#[tokio::test]
async fn dry_runs_reach_webhooks_without_side_effects_and_store_nothing() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let webhook = WebhookServer::start(answer);
    let cluster = "webhooks-dry-run";
    ensure_default_namespace(&admin, cluster).await;
    configure(
        &admin,
        cluster,
        "ValidatingWebhookConfiguration",
        "dry",
        vec![served(
            &webhook,
            "dry.webhooks.test",
            "/allow",
            "dry-",
            json!({"sideEffects": "NoneOnDryRun"}),
        )],
    )
    .await;
    let path = configmaps(cluster);
    let name = SETTLED
        .eventually("the dry-run webhook in effect", || async {
            let name = format!("dry-{}", next_suffix());
            let response = admin
                .post(&format!("{path}?dryRun=All"), &configmap(&name))
                .await;
            let seen = webhook
                .requests_on("/allow")
                .iter()
                .any(|r| r["name"] == name);
            match (response.status, seen) {
                (201, true) => Ok(name),
                other => Err(format!("{other:?} {}", response.text())),
            }
        })
        .await;
    let request = webhook
        .requests_on("/allow")
        .into_iter()
        .find(|r| r["name"] == name)
        .unwrap();
    assert_eq!(request["dryRun"], true);
    assert_eq!(admin.get(&format!("{path}/{name}")).await.status, 404);
}

#[tokio::test]
async fn invalid_configurations_are_refused() {
    let kcp = SERVER.get().await;
    let admin = Caller::admin(&kcp);
    let cluster = "webhooks-invalid";
    let path = format!(
        "{}{ADMISSION_V1}/validatingwebhookconfigurations",
        cluster_prefix(cluster)
    );
    let base = hook(
        "https://127.0.0.1:9/",
        "",
        "valid.webhooks.test",
        "x",
        json!({}),
    );
    let cases = [
        (
            json!({"clientConfig": {"service": {"namespace": "default", "name": "hook"}}}),
            "webhooks[0].clientConfig.service: Forbidden: service references are not supported by kcp",
        ),
        (
            json!({"clientConfig": {"url": "http://127.0.0.1/"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"http://127.0.0.1/\": 'https' is the only allowed URL scheme",
        ),
        (
            json!({"sideEffects": "Some"}),
            "webhooks[0].sideEffects: Unsupported value: \"Some\"",
        ),
        (
            json!({"name": "short"}),
            "should be a domain with at least three segments separated by dots",
        ),
        (
            json!({"timeoutSeconds": 31}),
            "the timeout value must be between 1 and 30 seconds",
        ),
    ];
    for (index, (change, want)) in cases.into_iter().enumerate() {
        let mut webhook = base.clone();
        for (key, value) in change.as_object().unwrap() {
            webhook[key] = value.clone();
        }
        let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("invalid-{index}")}, "webhooks": [webhook]});
        let refused = admin.post(&path, &config).await;
        let message = expect_status(want, &refused, 422, "Invalid");
        assert!(message.contains(want), "{message}");
    }
    // Defaults as kube's.
    let created = admin
        .create(
            &path,
            &json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "defaulted"}, "webhooks": [base]}),
        )
        .await;
    let hook = &created["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["timeoutSeconds"], 5);
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["rules"][0]["scope"], "*");
}
