//! Custom resources against a started `kcp`, one structural-schema feature per test, over HTTP as
//! the admin: what the server accepts, what it refuses (422 with a cause at the field, in
//! kube-apiserver's words), and what it stores (pruned, defaulted).
//!
//! Most tests share the `Feature` CRD (`fixtures/features.schema.kcp.io.yaml`, a field per
//! feature) in logical cluster `crd-schema`, each with objects of its own names; tests that change
//! a CRD or need another one use a logical cluster of their own. The last tests are the bad input:
//! CRDs that must not be admitted and a CEL rule too expensive to run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "crd-schema");

const CLUSTER: &str = "crd-schema";
const FEATURES: &str = "/clusters/crd-schema/apis/schema.kcp.io/v1/features";
const CRDS: &str = "apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn fixture(file: &str) -> Value {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    yaml_serde::from_str(&text).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// The shared server with the Feature CRD established in [`CLUSTER`].
async fn features() -> Arc<KcpProcess> {
    let server = SERVER.get().await;
    server
        .install_crd(CLUSTER, &fixture("features.schema.kcp.io.yaml"))
        .await;
    server
}

fn feature(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "schema.kcp.io/v1", "kind": "Feature", "metadata": {"name": name}, "spec": spec})
}

/// Creates Feature `name` with `spec`, which must succeed; the created object.
async fn create(server: &KcpProcess, name: &str, spec: Value) -> Value {
    let created = server
        .send_json(Method::POST, FEATURES, &feature(name, spec))
        .await;
    assert_eq!(created.status, 201, "{name}: {}", created.text());
    created.json()
}

/// GET `path`, which must answer 200; the object.
async fn read(server: &KcpProcess, path: &str) -> Value {
    let response = server.get(path).await;
    assert_eq!(response.status, 200, "GET {path}: {}", response.text());
    response.json()
}

/// Asserts `response` is the 422 `Invalid` Status of a `kind` named `name`; returns it.
fn invalid(what: &str, response: &Response, kind: &str, name: &str) -> Value {
    assert_eq!(response.status, 422, "{what}: {}", response.text());
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["reason"], "Invalid", "{what}: {status}");
    assert_eq!(status["details"]["kind"], kind, "{what}: {status}");
    assert_eq!(status["details"]["name"], name, "{what}: {status}");
    status
}

/// Creating Feature `name` with `spec` must fail with 422 and create nothing; the Status.
async fn refused(server: &KcpProcess, name: &str, spec: Value) -> Value {
    let response = server
        .send_json(Method::POST, FEATURES, &feature(name, spec))
        .await;
    let status = invalid(name, &response, "Feature", name);
    let missing = server.get(&format!("{FEATURES}/{name}")).await;
    assert_eq!(missing.status, 404, "{name} was stored: {}", missing.text());
    status
}

/// Asserts `status` has a cause at `field` with `reason` whose message contains `message`.
fn assert_cause(status: &Value, field: &str, reason: &str, message: &str) {
    let causes = status["details"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes: {status}"));
    assert!(
        causes.iter().any(|cause| cause["field"] == field
            && cause["reason"] == reason
            && cause["message"]
                .as_str()
                .is_some_and(|text| text.contains(message))),
        "no {reason} cause at {field} saying {message:?}: {status:#}"
    );
    let whole = status["message"].as_str().unwrap_or_default();
    assert!(
        whole.contains(field),
        "the message does not name {field}: {whole}"
    );
}

/// Sends a request built with the admin client (for headers the helpers do not set or return).
async fn send_raw(
    server: &KcpProcess,
    build: impl FnOnce(reqwest::Client) -> reqwest::RequestBuilder,
) -> reqwest::Response {
    build(server.admin().client())
        .send()
        .await
        .expect("a request to the server")
}

/// The `Warning` headers of a response.
fn warnings(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all("warning")
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn value_types() {
    let server = features().await;
    let status = refused(
        &server,
        "type-bad",
        json!({"name": "typed", "count": "three"}),
    )
    .await;
    assert_cause(
        &status,
        "spec.count",
        "FieldValueTypeInvalid",
        r#"spec.count in body must be of type integer: "string""#,
    );
    let status = refused(&server, "type-spec", json!("not an object")).await;
    assert_cause(
        &status,
        "spec",
        "FieldValueTypeInvalid",
        r#"spec in body must be of type object: "string""#,
    );
    let created = create(&server, "type-good", json!({"name": "typed", "count": 3})).await;
    assert_eq!(created["spec"]["count"], 3);
}

#[tokio::test]
async fn format_date_time() {
    let server = features().await;
    let status = refused(
        &server,
        "when-bad",
        json!({"name": "when", "when": "yesterday"}),
    )
    .await;
    assert_cause(
        &status,
        "spec.when",
        "FieldValueTypeInvalid",
        r#"spec.when in body must be of type date-time: "yesterday""#,
    );
    let spec = json!({"name": "when", "when": "2024-05-01T10:00:00Z"});
    let created = create(&server, "when-good", spec).await;
    assert_eq!(created["spec"]["when"], "2024-05-01T10:00:00Z");
}

#[tokio::test]
async fn int_or_string() {
    let server = features().await;
    for (name, amount) in [("amount-int", json!(5)), ("amount-str", json!("50%"))] {
        let created = create(&server, name, json!({"name": "amount", "amount": amount})).await;
        assert_eq!(created["spec"]["amount"], amount);
    }
    let status = refused(
        &server,
        "amount-bad",
        json!({"name": "amount", "amount": true}),
    )
    .await;
    assert_cause(
        &status,
        "spec.amount",
        "FieldValueTypeInvalid",
        r#"spec.amount in body must be of type integer,string: "boolean""#,
    );
}

#[tokio::test]
async fn enumeration() {
    let server = features().await;
    let status = refused(
        &server,
        "enum-bad",
        json!({"name": "enum", "color": "purple"}),
    )
    .await;
    assert_cause(
        &status,
        "spec.color",
        "FieldValueNotSupported",
        r#"Unsupported value: "purple": supported values: "red", "green", "blue""#,
    );
    create(
        &server,
        "enum-good",
        json!({"name": "enum", "color": "green"}),
    )
    .await;
}

#[tokio::test]
async fn minimum_and_maximum() {
    let server = features().await;
    for (name, count, message) in [
        (
            "min-bad",
            0,
            "spec.count in body should be greater than or equal to 1",
        ),
        (
            "max-bad",
            6,
            "spec.count in body should be less than or equal to 5",
        ),
    ] {
        let status = refused(&server, name, json!({"name": "bounds", "count": count})).await;
        assert_cause(&status, "spec.count", "FieldValueInvalid", message);
    }
    for (name, count) in [("min-good", 1), ("max-good", 5)] {
        create(&server, name, json!({"name": "bounds", "count": count})).await;
    }
}

#[tokio::test]
async fn min_and_max_length() {
    let server = features().await;
    let status = refused(&server, "short-name", json!({"name": "ab"})).await;
    assert_cause(
        &status,
        "spec.name",
        "FieldValueInvalid",
        "spec.name in body should be at least 3 chars long",
    );
    let status = refused(&server, "long-name", json!({"name": "abcdefghijk"})).await;
    assert_cause(&status, "spec.name", "FieldValueTooLong", "10");
    create(&server, "length-good", json!({"name": "abcdefghij"})).await;
}

#[tokio::test]
async fn pattern() {
    let server = features().await;
    let status = refused(
        &server,
        "pattern-bad",
        json!({"name": "pattern", "code": "abc"}),
    )
    .await;
    assert_cause(
        &status,
        "spec.code",
        "FieldValueInvalid",
        "spec.code in body should match '^[A-Z]{3}$'",
    );
    create(
        &server,
        "pattern-good",
        json!({"name": "pattern", "code": "ABC"}),
    )
    .await;
}

#[tokio::test]
async fn required() {
    let server = features().await;
    let status = refused(&server, "required-bad", json!({"count": 2})).await;
    assert_cause(&status, "spec.name", "FieldValueRequired", "Required value");
}

/// `null` stays where the schema is nullable; elsewhere it is dropped, or replaced by the default.
#[tokio::test]
async fn nullable() {
    let server = features().await;
    let spec = json!({"name": "nulls", "nickname": null, "title": null, "mode": null});
    let created = create(&server, "nullable", spec).await;
    let stored = read(&server, &format!("{FEATURES}/nullable")).await;
    for object in [&created, &stored] {
        let spec = object["spec"].as_object().unwrap();
        assert_eq!(spec.get("nickname"), Some(&Value::Null), "{object}");
        assert!(!spec.contains_key("title"), "{object}");
        assert_eq!(spec["mode"], "auto", "{object}");
    }
}

#[tokio::test]
async fn additional_properties() {
    let server = features().await;
    let labels = json!({"a": "x", "b": "y"});
    let created = create(
        &server,
        "labels-good",
        json!({"name": "labels", "labels": labels}),
    )
    .await;
    assert_eq!(created["spec"]["labels"], labels);
    let spec = json!({"name": "labels", "labels": {"a": 1}});
    let status = refused(&server, "labels-bad", spec).await;
    assert_cause(
        &status,
        "spec.labels.a",
        "FieldValueTypeInvalid",
        r#"spec.labels.a in body must be of type string: "integer""#,
    );
}

#[tokio::test]
async fn preserve_unknown_fields() {
    let server = features().await;
    let extra = json!({"deep": {"list": [1, {"flag": true}], "text": "kept"}, "n": null});
    create(
        &server,
        "preserved",
        json!({"name": "extra", "extra": extra}),
    )
    .await;
    let stored = read(&server, &format!("{FEATURES}/preserved")).await;
    assert_eq!(stored["spec"]["extra"], extra);
}

#[tokio::test]
async fn embedded_resource() {
    let server = features().await;
    let template = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "inner", "labels": {"a": "b"}}, "data": {"k": "v"},
    });
    create(
        &server,
        "embedded-good",
        json!({"name": "embedded", "template": template}),
    )
    .await;
    let stored = read(&server, &format!("{FEATURES}/embedded-good")).await;
    assert_eq!(stored["spec"]["template"], template);
    let spec = json!({"name": "embedded", "template": {"metadata": {"name": "inner"}}});
    let status = refused(&server, "embedded-bad", spec).await;
    for field in ["spec.template.apiVersion", "spec.template.kind"] {
        assert_cause(&status, field, "FieldValueRequired", "Required value");
    }
}

#[tokio::test]
async fn list_type_set() {
    let server = features().await;
    let spec = json!({"name": "tags", "tags": ["a", "b", "a"]});
    let status = refused(&server, "set-bad", spec).await;
    assert_cause(
        &status,
        "spec.tags[2]",
        "FieldValueDuplicate",
        r#"Duplicate value: "a""#,
    );
    create(
        &server,
        "set-good",
        json!({"name": "tags", "tags": ["a", "b"]}),
    )
    .await;
}

/// Keys are compared after defaulting: `protocol` defaults to TCP.
#[tokio::test]
async fn list_type_map_with_keys() {
    let server = features().await;
    let ports =
        json!([{"name": "http", "port": 80}, {"name": "http", "protocol": "TCP", "port": 81}]);
    let status = refused(&server, "map-bad", json!({"name": "ports", "ports": ports})).await;
    assert_cause(
        &status,
        "spec.ports[1]",
        "FieldValueDuplicate",
        "Duplicate value",
    );
    let ports =
        json!([{"name": "http", "port": 80}, {"name": "http", "protocol": "UDP", "port": 81}]);
    let created = create(
        &server,
        "map-good",
        json!({"name": "ports", "ports": ports}),
    )
    .await;
    assert_eq!(created["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(created["spec"]["ports"][1]["protocol"], "UDP");
}

/// An atomic map is a struct like any other for validation and pruning.
#[tokio::test]
async fn map_type_atomic() {
    let server = features().await;
    let spec = json!({"name": "settings", "settings": {"a": "x", "b": "y", "c": "pruned"}});
    create(&server, "atomic", spec).await;
    let path = format!("{FEATURES}/atomic");
    let patched = server
        .send(
            Method::PATCH,
            &path,
            "application/merge-patch+json",
            r#"{"spec":{"settings":{"a":"z"}}}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let stored = read(&server, &path).await;
    assert_eq!(stored["spec"]["settings"], json!({"a": "z", "b": "y"}));
    let spec = json!({"name": "settings", "settings": {"a": 1}});
    let status = refused(&server, "atomic-bad", spec).await;
    assert_cause(
        &status,
        "spec.settings.a",
        "FieldValueTypeInvalid",
        "must be of type string",
    );
}

/// Fields the schema does not know are dropped before the object is stored, at every level.
#[tokio::test]
async fn pruning() {
    let server = features().await;
    let mut body = feature(
        "pruned",
        json!({"name": "pruned", "unknown": 1, "limits": {"cpu": "2", "gpu": "1"},
               "ports": [{"name": "a", "color": "red"}]}),
    );
    body["junk"] = json!({"x": 1});
    let created = server.send_json(Method::POST, FEATURES, &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let stored = read(&server, &format!("{FEATURES}/pruned")).await;
    for object in [&created.json(), &stored] {
        assert!(object.get("junk").is_none(), "{object}");
        assert!(object["spec"].get("unknown").is_none(), "{object}");
        assert_eq!(object["spec"]["limits"], json!({"cpu": "2"}), "{object}");
        assert_eq!(
            object["spec"]["ports"],
            json!([{"name": "a", "protocol": "TCP"}])
        );
    }
}

/// `fieldValidation`: Strict refuses unknown and duplicate fields, Warn reports them in `Warning`
/// headers, Ignore (and no parameter) says nothing; only Strict stores nothing.
#[tokio::test]
async fn field_validation() {
    let server = features().await;
    let body = |name: &str| {
        format!(
            r#"{{"apiVersion":"schema.kcp.io/v1","kind":"Feature","metadata":{{"name":"{name}"}},
               "spec":{{"name":"fields","x":1,"color":"red","color":"blue"}}}}"#
        )
    };
    let post = |name: &str, mode: &str| {
        let url = server.url(&format!("{FEATURES}?fieldValidation={mode}"));
        let body = body(name);
        move |client: reqwest::Client| {
            client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
        }
    };
    let strict = send_raw(&server, post("fields-strict", "Strict")).await;
    assert_eq!(strict.status(), 400);
    let text = strict.text().await.unwrap();
    for expected in [
        "strict decoding error",
        r#"unknown field \"spec.x\""#,
        r#"duplicate field \"spec.color\""#,
    ] {
        assert!(text.contains(expected), "no {expected:?} in {text}");
    }
    let missing = server.get(&format!("{FEATURES}/fields-strict")).await;
    assert_eq!(missing.status, 404, "{}", missing.text());

    let warn = send_raw(&server, post("fields-warn", "Warn")).await;
    assert_eq!(warn.status(), 201);
    let warned = warnings(&warn);
    for expected in [
        r#"299 - "unknown field \"spec.x\"""#,
        r#"299 - "duplicate field \"spec.color\"""#,
    ] {
        assert!(
            warned.iter().any(|w| w == expected),
            "no {expected} in {warned:?}"
        );
    }
    let stored = read(&server, &format!("{FEATURES}/fields-warn")).await;
    assert!(stored["spec"].get("x").is_none(), "{stored}");
    assert_eq!(stored["spec"]["color"], "blue", "the last duplicate wins");

    let ignore = send_raw(&server, post("fields-ignore", "Ignore")).await;
    assert_eq!(ignore.status(), 201);
    assert_eq!(warnings(&ignore), Vec::<String>::new());
    let bad = send_raw(&server, post("fields-bad", "Sometimes")).await;
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn defaulting_on_create_and_update() {
    let server = features().await;
    let created = create(&server, "defaults", json!({"name": "defaults"})).await;
    assert_eq!(created["spec"]["mode"], "auto");
    assert_eq!(created["spec"]["limits"], json!({"cpu": "1"}));
    let path = format!("{FEATURES}/defaults");
    let mut update = created.clone();
    update["spec"] = json!({"name": "defaults", "mode": "manual", "limits": {"memory": "1Gi"}});
    let updated = server.send_json(Method::PUT, &path, &update).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let patched = server
        .send(
            Method::PATCH,
            &path,
            "application/merge-patch+json",
            r#"{"spec":{"mode":null}}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let stored = read(&server, &path).await;
    assert_eq!(stored["spec"]["mode"], "auto", "{stored}");
    assert_eq!(
        stored["spec"]["limits"],
        json!({"cpu": "1", "memory": "1Gi"}),
        "{stored}"
    );
}

/// A default added to the schema later shows on objects stored before it, as in kube-apiserver.
#[tokio::test]
async fn defaulting_on_read() {
    let server = SERVER.get().await;
    let cluster = "crd-schema-read";
    let spec_schema = json!({"type": "object", "properties": {"size": {"type": "integer"}}});
    let crd = small_crd("read.kcp.io", "sizes", "Size", spec_schema);
    server.install_crd(cluster, &crd).await;
    let sizes = format!("/clusters/{cluster}/apis/read.kcp.io/v1/sizes");
    let object = json!({"apiVersion": "read.kcp.io/v1", "kind": "Size", "metadata": {"name": "old"}, "spec": {"size": 1}});
    let created = server.send_json(Method::POST, &sizes, &object).await;
    assert_eq!(created.status, 201, "{}", created.text());

    let crd_path = format!("/clusters/{cluster}/{CRDS}/sizes.read.kcp.io");
    let mut crd = read(&server, &crd_path).await;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["unit"] =
        json!({"type": "string", "default": "cm"});
    let updated = server.send_json(Method::PUT, &crd_path, &crd).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let path = format!("{sizes}/old");
    let read_back = server
        .wait_for("the new default on read", &path, |response| {
            response.status == 200 && response.json()["spec"]["unit"] == "cm"
        })
        .await
        .json();
    assert_eq!(read_back["spec"], json!({"size": 1, "unit": "cm"}));
    let listed = read(&server, &sizes).await;
    assert_eq!(listed["items"][0]["spec"]["unit"], "cm", "{listed}");
}

#[tokio::test]
async fn cel_rule_with_message() {
    let server = features().await;
    let spec = json!({"name": "celmsg", "low": 5, "high": 1});
    let status = refused(&server, "cel-message", spec).await;
    assert_cause(
        &status,
        "spec",
        "FieldValueInvalid",
        "low must not exceed high",
    );
    create(
        &server,
        "cel-message-ok",
        json!({"name": "celmsg", "low": 1, "high": 5}),
    )
    .await;
}

#[tokio::test]
async fn cel_message_expression() {
    let server = features().await;
    let status = refused(&server, "cel-expression", json!({"name": "reserved"})).await;
    assert_cause(
        &status,
        "spec",
        "FieldValueInvalid",
        "the name reserved is taken",
    );
}

/// Transition rules (`oldSelf`) only run on updates: any value may be created.
#[tokio::test]
async fn cel_transition_rule() {
    let server = features().await;
    let created = create(
        &server,
        "transition",
        json!({"name": "moves", "tier": "gold", "level": 3}),
    )
    .await;
    let path = format!("{FEATURES}/transition");
    for (spec, field, message) in [
        (json!({"tier": "silver"}), "spec.tier", "tier is immutable"),
        (json!({"level": 2}), "spec.level", "level may only grow"),
    ] {
        let patch = json!({ "spec": spec }).to_string();
        let response = server
            .send(Method::PATCH, &path, "application/merge-patch+json", patch)
            .await;
        let status = invalid(field, &response, "Feature", "transition");
        assert_cause(&status, field, "FieldValueInvalid", message);
    }
    let stored = read(&server, &path).await;
    assert_eq!(
        stored["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let grown = server
        .send(
            Method::PATCH,
            &path,
            "application/merge-patch+json",
            r#"{"spec":{"level":4}}"#,
        )
        .await;
    assert_eq!(grown.status, 200, "{}", grown.text());
    assert_eq!(grown.json()["spec"]["level"], 4);
}

/// With a status subresource, the main endpoint ignores status and the status endpoint ignores
/// everything else; only spec changes move `metadata.generation`.
#[tokio::test]
async fn status_subresource() {
    let server = features().await;
    let mut body = feature("status", json!({"name": "status", "count": 1}));
    body["status"] = json!({"phase": "Faked"});
    let created = server.send_json(Method::POST, FEATURES, &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    assert!(created.get("status").is_none(), "{created}");
    assert_eq!(created["metadata"]["generation"], 1);

    let path = format!("{FEATURES}/status");
    let mut spec_edit = read(&server, &path).await;
    spec_edit["spec"]["count"] = json!(2);
    spec_edit["status"] = json!({"phase": "Ignored"});
    let updated = server.send_json(Method::PUT, &path, &spec_edit).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let stored = read(&server, &path).await;
    assert_eq!(stored["metadata"]["generation"], 2, "{stored}");
    assert!(stored.get("status").is_none(), "{stored}");

    let mut status_edit = stored.clone();
    status_edit["status"] = json!({"phase": "Ready", "replicas": 1});
    status_edit["spec"]["count"] = json!(5);
    let updated = server
        .send_json(Method::PUT, &format!("{path}/status"), &status_edit)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let stored = read(&server, &path).await;
    assert_eq!(stored["status"], json!({"phase": "Ready", "replicas": 1}));
    assert_eq!(
        stored["spec"]["count"], 2,
        "spec is not written through /status"
    );
    assert_eq!(stored["metadata"]["generation"], 2, "{stored}");

    let patched = server
        .send(
            Method::PATCH,
            &format!("{path}/status"),
            "application/merge-patch+json",
            r#"{"status":{"phase":"Done"}}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let stored = read(&server, &path).await;
    assert_eq!(stored["status"]["phase"], "Done");
    assert_eq!(stored["metadata"]["generation"], 2, "{stored}");
}

#[tokio::test]
async fn scale_subresource() {
    let server = features().await;
    create(&server, "scaled", json!({"name": "scaled", "replicas": 2})).await;
    let path = format!("{FEATURES}/scaled");
    let status = server
        .send(
            Method::PATCH,
            &format!("{path}/status"),
            "application/merge-patch+json",
            r#"{"status":{"replicas":2,"selector":"app=scaled"}}"#,
        )
        .await;
    assert_eq!(status.status, 200, "{}", status.text());

    let scale = read(&server, &format!("{path}/scale")).await;
    assert_eq!(scale["kind"], "Scale", "{scale}");
    assert_eq!(scale["apiVersion"], "autoscaling/v1", "{scale}");
    assert_eq!(scale["metadata"]["name"], "scaled", "{scale}");
    assert_eq!(scale["spec"], json!({"replicas": 2}), "{scale}");
    assert_eq!(
        scale["status"],
        json!({"replicas": 2, "selector": "app=scaled"}),
        "{scale}"
    );

    let mut scale_up = scale.clone();
    scale_up["spec"]["replicas"] = json!(4);
    let updated = server
        .send_json(Method::PUT, &format!("{path}/scale"), &scale_up)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["spec"]["replicas"], 4);
    let stored = read(&server, &path).await;
    assert_eq!(stored["spec"]["replicas"], 4, "{stored}");
    assert_eq!(stored["metadata"]["generation"], 2, "{stored}");

    scale_up["spec"]["replicas"] = json!(-1);
    let negative = server
        .send_json(Method::PUT, &format!("{path}/scale"), &scale_up)
        .await;
    let status = invalid("negative scale", &negative, "Scale", "scaled");
    assert_cause(
        &status,
        "spec.replicas",
        "FieldValueInvalid",
        "must be greater than or equal to 0",
    );
}

#[tokio::test]
async fn selectable_fields() {
    let server = features().await;
    let cluster = "crd-schema-select";
    server
        .install_crd(cluster, &fixture("features.schema.kcp.io.yaml"))
        .await;
    let collection = format!("/clusters/{cluster}/apis/schema.kcp.io/v1/features");
    for (name, color) in [("red-one", "red"), ("blue-one", "blue"), ("red-two", "red")] {
        let body = feature(name, json!({"name": name, "color": color}));
        let created = server.send_json(Method::POST, &collection, &body).await;
        assert_eq!(created.status, 201, "{}", created.text());
    }
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap_or_else(|| panic!("not a list: {list}"))
            .iter()
            .map(|item| item["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for (selector, expected) in [
        ("spec.color%3Dred", &["red-one", "red-two"][..]),
        ("spec.color!%3Dred", &["blue-one"]),
        ("metadata.name%3Dred-two", &["red-two"]),
    ] {
        let list = read(&server, &format!("{collection}?fieldSelector={selector}")).await;
        assert_eq!(names(&list), expected, "{selector}");
    }
    let unsupported = server
        .get(&format!("{collection}?fieldSelector=spec.count%3D1"))
        .await;
    assert_eq!(unsupported.status, 400, "{}", unsupported.text());
    assert_eq!(unsupported.json()["reason"], "BadRequest");
    // The watch filters too.
    let mut watch = server
        .watch(&format!(
            "{collection}?watch=1&fieldSelector=spec.color%3Dblue"
        ))
        .await;
    let event = watch.expect_event().await;
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "blue-one", "{event}");
}

/// v1 stores; v2 is served with the `None` conversion: only `apiVersion` differs.
#[tokio::test]
async fn multiple_versions() {
    let server = features().await;
    let spec = json!({"name": "versioned", "count": 2, "tags": ["x"]});
    let created = create(&server, "versioned", spec).await;
    let v2 = "/clusters/crd-schema/apis/schema.kcp.io/v2/features";
    let read_v2 = read(&server, &format!("{v2}/versioned")).await;
    assert_eq!(read_v2["apiVersion"], "schema.kcp.io/v2");
    assert_eq!(read_v2["spec"], created["spec"]);
    assert_eq!(read_v2["metadata"]["uid"], created["metadata"]["uid"]);

    let mut update = read_v2.clone();
    update["spec"]["count"] = json!(3);
    let updated = server
        .send_json(Method::PUT, &format!("{v2}/versioned"), &update)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["apiVersion"], "schema.kcp.io/v2");
    let read_v1 = read(&server, &format!("{FEATURES}/versioned")).await;
    assert_eq!(read_v1["apiVersion"], "schema.kcp.io/v1");
    assert_eq!(read_v1["spec"]["count"], 3);

    let list = read(
        &server,
        &format!("{v2}?fieldSelector=metadata.name%3Dversioned"),
    )
    .await;
    assert_eq!(list["apiVersion"], "schema.kcp.io/v2", "{list}");
    assert_eq!(list["kind"], "FeatureList", "{list}");
    assert_eq!(list["items"][0]["apiVersion"], "schema.kcp.io/v2", "{list}");
    // As kube-apiserver's CRD discovery: versions in Kubernetes' priority order (v2 before v1,
    // whichever stores), and the first is preferred.
    let discovery = read(&server, "/clusters/crd-schema/apis/schema.kcp.io").await;
    assert_eq!(
        discovery["preferredVersion"]["version"], "v2",
        "{discovery}"
    );
    assert_eq!(discovery["versions"][1]["version"], "v1", "{discovery}");
}

#[tokio::test]
async fn printer_columns() {
    let server = features().await;
    let spec = json!({"name": "printed", "color": "red", "count": 4});
    create(&server, "printed", spec).await;
    let status = server
        .send(
            Method::PATCH,
            &format!("{FEATURES}/printed/status"),
            "application/merge-patch+json",
            r#"{"status":{"phase":"Ready"}}"#,
        )
        .await;
    assert_eq!(status.status, 200, "{}", status.text());
    let url = server.url(&format!("{FEATURES}?fieldSelector=metadata.name%3Dprinted"));
    let table = Response::send(
        server
            .admin()
            .client()
            .get(url)
            .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
    )
    .await;
    assert_eq!(table.status, 200, "{}", table.text());
    let table = table.json();
    assert_eq!(table["kind"], "Table", "{table}");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1", "{table}");
    let columns: Vec<(&str, &str)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", "string"),
            ("Color", "string"),
            ("Count", "integer"),
            ("Phase", "string"),
            ("Age", "date"),
        ]
    );
    assert_eq!(table["columnDefinitions"][2]["description"], "How many");
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells[..4],
        [json!("printed"), json!("red"), json!(4), json!("Ready")]
    );
    assert!(
        cells[4].as_str().is_some_and(|age| age.ends_with('s')),
        "{table}"
    );
}

/// A CRD with one version `v1` whose schema's `spec` is `spec_schema`, cluster-scoped.
fn small_crd(group: &str, plural: &str, kind: &str, spec_schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group, "scope": "Cluster",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}},
            }],
        },
    })
}

/// The same group and kind in two logical clusters with different schemas: each cluster
/// validates with its own, publishes its own discovery and OpenAPI, and sees only its objects.
#[tokio::test]
async fn logical_clusters_keep_their_own_schemas() {
    let server = SERVER.get().await;
    let clusters = [
        ("crd-iso-a", "integer", json!(3)),
        ("crd-iso-b", "string", json!("large")),
    ];
    for (cluster, size_type, _) in &clusters {
        let schema = json!({"type": "object", "properties": {"size": {"type": size_type}}});
        let crd = small_crd("iso.kcp.io", "gizmos", "Gizmo", schema);
        server.install_crd(cluster, &crd).await;
    }
    let gizmo = |size: &Value| json!({"apiVersion": "iso.kcp.io/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"size": size}});
    for (cluster, size_type, size) in &clusters {
        let collection = format!("/clusters/{cluster}/apis/iso.kcp.io/v1/gizmos");
        for (_, other_type, other_size) in clusters.iter().filter(|(c, ..)| c != cluster) {
            let response = server
                .send_json(Method::POST, &collection, &gizmo(other_size))
                .await;
            let status = invalid(cluster, &response, "Gizmo", "g");
            let message =
                format!("spec.size in body must be of type {size_type}: \"{other_type}\"");
            assert_cause(&status, "spec.size", "FieldValueTypeInvalid", &message);
        }
        let created = server
            .send_json(Method::POST, &collection, &gizmo(size))
            .await;
        assert_eq!(created.status, 201, "{cluster}: {}", created.text());
        let created = created.json();
        assert_eq!(
            created["metadata"]["annotations"]["kcp.io/cluster"],
            *cluster
        );

        let listed = read(&server, &collection).await;
        let sizes: Vec<&Value> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| &item["spec"]["size"])
            .collect();
        assert_eq!(sizes, [size], "{cluster} sees only its own gizmo");

        let openapi = read(
            &server,
            &format!("/clusters/{cluster}/openapi/v3/apis/iso.kcp.io/v1"),
        )
        .await;
        let schema = &openapi["components"]["schemas"]["io.kcp.iso.v1.Gizmo"];
        assert_eq!(
            schema["properties"]["spec"]["properties"]["size"]["type"], *size_type,
            "{cluster}: {schema}"
        );
        let index = read(&server, &format!("/clusters/{cluster}/openapi/v3")).await;
        assert!(
            index["paths"].get("apis/iso.kcp.io/v1").is_some(),
            "{index}"
        );
        let group = read(&server, &format!("/clusters/{cluster}/apis/iso.kcp.io/v1")).await;
        assert_eq!(group["resources"][0]["name"], "gizmos", "{group}");
        assert_eq!(group["resources"][0]["kind"], "Gizmo", "{group}");
    }
    // A logical cluster without the CRD has none of it.
    let other = "/clusters/crd-iso-none";
    let groups = read(&server, &format!("{other}/apis")).await;
    assert!(!groups.to_string().contains("iso.kcp.io"), "{groups}");
    let index = read(&server, &format!("{other}/openapi/v3")).await;
    assert!(
        index["paths"].get("apis/iso.kcp.io/v1").is_none(),
        "{index}"
    );
    for path in [
        format!("{other}/apis/iso.kcp.io/v1/gizmos"),
        format!("{other}/apis/iso.kcp.io/v1/gizmos/g"),
        "/apis/iso.kcp.io/v1/gizmos".to_owned(),
    ] {
        let response = server.get(&path).await;
        assert_eq!(response.status, 404, "{path}: {}", response.text());
    }
}

/// Invalid CRDs are refused with a cause at the field path kube-apiextensions uses; nothing is
/// stored and the group is not served.
#[tokio::test]
async fn invalid_crds_are_refused_with_causes() {
    let server = SERVER.get().await;
    let cluster = "crd-invalid";
    let collection = format!("/clusters/{cluster}/{CRDS}");
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
    let valid = || small_crd("bad.kcp.io", "things", "Thing", json!({"type": "object"}));
    let schema = |spec: Value| small_crd("bad.kcp.io", "things", "Thing", spec);
    let mut misnamed = valid();
    misnamed["metadata"]["name"] = json!("others.bad.kcp.io");
    let mut two_storage = valid();
    let mut second = two_storage["spec"]["versions"][0].clone();
    second["name"] = json!("v2");
    two_storage["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(second);
    let cases = [
        (
            "missing type",
            schema(json!({"properties": {"a": {"type": "string"}}})),
            format!("{at}.type"),
            "FieldValueRequired",
            "must not be empty for specified object fields",
        ),
        (
            "$ref",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "object", "$ref": "#/definitions/a"}}}),
            ),
            format!("{at}.properties[a].$ref"),
            "FieldValueForbidden",
            "$ref is not supported",
        ),
        (
            "list-map-keys naming no item property",
            schema(json!({"type": "object", "properties": {"ports": {
                "type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["missing"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            }}})),
            format!("{at}.properties[ports].x-kubernetes-list-map-keys"),
            "FieldValueInvalid",
            "entries must all be names of item properties",
        ),
        (
            "list-map-keys without list-type map",
            schema(json!({"type": "object", "properties": {"ports": {
                "type": "array", "x-kubernetes-list-type": "set",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
            }}})),
            format!("{at}.properties[ports].x-kubernetes-list-type"),
            "FieldValueInvalid",
            "must be map if x-kubernetes-list-map-keys is non-empty",
        ),
        (
            "name is not <plural>.<group>",
            misnamed,
            "metadata.name".to_owned(),
            "FieldValueInvalid",
            r#"must be spec.names.plural+"."+spec.group"#,
        ),
        (
            "two storage versions",
            two_storage,
            "spec.versions".to_owned(),
            "FieldValueInvalid",
            "must have exactly one version marked as storage version",
        ),
        (
            "CEL rule that does not compile",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.a >"}]}),
            ),
            format!("{at}.x-kubernetes-validations[0].rule"),
            "FieldValueInvalid",
            "compilation failed",
        ),
        (
            "CEL rule with an undeclared field",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.b > 1"}]}),
            ),
            format!("{at}.x-kubernetes-validations[0].rule"),
            "FieldValueInvalid",
            "compilation failed",
        ),
    ];
    for (what, crd, field, reason, message) in cases {
        let response = server.send_json(Method::POST, &collection, &crd).await;
        let name = crd["metadata"]["name"].as_str().unwrap();
        let status = invalid(what, &response, "CustomResourceDefinition", name);
        assert_eq!(
            status["details"]["group"], "apiextensions.k8s.io",
            "{status}"
        );
        assert_cause(&status, &field, reason, message);
    }
    let list = read(&server, &collection).await;
    assert_eq!(list["items"], json!([]), "nothing was stored");
    let served = server
        .get(&format!("/clusters/{cluster}/apis/bad.kcp.io/v1/things"))
        .await;
    assert_eq!(served.status, 404, "{}", served.text());
    // The valid one is admitted.
    server.install_crd(cluster, &valid()).await;
}

/// Custom resources have no strategic merge patch (kube-apiserver answers 415); the object stays
/// as it was.
#[tokio::test]
async fn strategic_merge_patch_is_unsupported() {
    let server = features().await;
    create(
        &server,
        "strategic",
        json!({"name": "strategic", "count": 1}),
    )
    .await;
    let path = format!("{FEATURES}/strategic");
    let response = server
        .send(
            Method::PATCH,
            &path,
            "application/strategic-merge-patch+json",
            r#"{"spec":{"count":2}}"#,
        )
        .await;
    assert_eq!(response.status, 415, "{}", response.text());
    let status = response.json();
    assert_eq!(status["reason"], "UnsupportedMediaType", "{status}");
    assert_eq!(read(&server, &path).await["spec"]["count"], 1);
}

/// An object breaking several rules gets one cause for each.
#[tokio::test]
async fn invalid_objects_list_every_cause() {
    let server = features().await;
    let spec = json!({"name": "x", "count": 9, "color": "pink", "code": "a", "tags": ["a", "a"]});
    let status = refused(&server, "many-causes", spec).await;
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cause| cause["field"].as_str().unwrap())
        .collect();
    for field in [
        "spec.name",
        "spec.count",
        "spec.color",
        "spec.code",
        "spec.tags[1]",
    ] {
        assert!(fields.contains(&field), "no cause at {field}: {status:#}");
    }
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"Feature.schema.kcp.io "many-causes" is invalid: "#),
        "{status}"
    );
}

/// A rule whose cost explodes with the size of the object (three nested loops over a list) is
/// refused with kube's cost error instead of running; the server keeps answering meanwhile.
#[tokio::test]
async fn expensive_cel_rule_is_cut_off() {
    let server = SERVER.get().await;
    let cluster = "crd-schema-cost";
    let spec_schema = json!({
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [{
            "rule": "self.items.all(x, self.items.all(y, self.items.all(z, x + y + z != 'abc')))",
        }],
    });
    let crd = small_crd("cost.kcp.io", "loops", "Loop", spec_schema);
    server.install_crd(cluster, &crd).await;
    let collection = format!("/clusters/{cluster}/apis/cost.kcp.io/v1/loops");
    let object = |name: &str, count: usize| {
        let items: Vec<String> = (0..count).map(|i| format!("item-{i}")).collect();
        json!({"apiVersion": "cost.kcp.io/v1", "kind": "Loop", "metadata": {"name": name}, "spec": {"items": items}})
    };
    let small = server
        .send_json(Method::POST, &collection, &object("small", 3))
        .await;
    assert_eq!(small.status, 201, "{}", small.text());

    let big = object("big", 1000);
    let request = server.send_json(Method::POST, &collection, &big);
    let probe = async {
        let ready = server.get("/readyz").await;
        assert_eq!(ready.status, 200, "{}", ready.text());
        read(&server, &format!("{collection}/small")).await
    };
    let (response, small) = tokio::join!(request, probe);
    assert_eq!(small["metadata"]["name"], "small");
    let status = invalid("expensive rule", &response, "Loop", "big");
    let text = status.to_string();
    assert!(
        text.contains("call cost exceeds limit for rule")
            || text.contains("running out of cost budget"),
        "no cost error: {status:#}"
    );
    let missing = server.get(&format!("{collection}/big")).await;
    assert_eq!(missing.status, 404, "{}", missing.text());
}
