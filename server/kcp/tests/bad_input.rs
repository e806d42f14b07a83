//! Bad input against a started `kcp`: malformed paths, oversized and malformed bodies, bad
//! selectors and patches, invalid objects, stale writes, missing credentials and namespaces.
//!
//! Each request must get the `Status` Kubernetes answers with (kind, code and reason, causes for
//! invalid objects), because clients branch on those, and must leave the server serving: after
//! every bad request the test checks `/readyz` and a normal read. The scenarios share one server;
//! each writes only into its own namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "bad-input");

/// Asserts `response` is a failure `Status` with `code` and `reason`, then that the server still
/// answers `/readyz` and a normal GET. Returns the Status.
async fn expect_status(
    server: &KcpProcess,
    what: &str,
    response: Response,
    code: u16,
    reason: &str,
) -> Value {
    assert_eq!(response.status, code, "{what}: {}", response.text());
    assert!(
        response.content_type.starts_with("application/json"),
        "{what}: content type {:?}: {}",
        response.content_type,
        response.text()
    );
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["apiVersion"], "v1", "{what}: {status}");
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|message| !message.is_empty()),
        "{what}: no message: {status}"
    );
    still_serving(server, what).await;
    status
}

async fn still_serving(server: &KcpProcess, after: &str) {
    let ready = server.get("/readyz").await;
    assert_eq!(ready.status, 200, "after {after}: /readyz {}", ready.text());
    let default = server.get("/api/v1/namespaces/default").await;
    assert_eq!(default.status, 200, "after {after}: {}", default.text());
    assert_eq!(default.json()["metadata"]["name"], "default");
}

/// Creates namespace `name` and returns the path of its configmaps collection.
async fn namespace(server: &KcpProcess, name: &str) -> String {
    let created = server
        .send_json(
            Method::POST,
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    format!("/api/v1/namespaces/{name}/configmaps")
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

/// Creates a ConfigMap and returns it.
async fn create_configmap(server: &KcpProcess, collection: &str, name: &str) -> Value {
    let created = server
        .send_json(Method::POST, collection, &configmap(name))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    created.json()
}

#[tokio::test]
async fn malformed_paths() {
    let server = SERVER.get().await;
    for (path, code, reason) in [
        ("/clusters/Bad_Name/api/v1/namespaces", 400, "BadRequest"),
        ("/clusters/-bad/api/v1/namespaces", 400, "BadRequest"),
        (
            "/api/v1/namespaces/default/configmaps/a/b/c",
            404,
            "NotFound",
        ),
        ("/apis/nope/v1/things", 404, "NotFound"),
        ("/api/v1/nothings", 404, "NotFound"),
        ("/api/v2/namespaces", 404, "NotFound"),
        (
            "/clusters/root/apis/nope/v1/namespaces/default/things/x",
            404,
            "NotFound",
        ),
    ] {
        let response = server.get(path).await;
        expect_status(&server, path, response, code, reason).await;
    }
    // No logical cluster name at all: upstream kcp refuses it as a bad request or finds nothing;
    // either way it must be a Status.
    for path in ["/clusters/", "/clusters//api/v1/namespaces"] {
        let response = server.get(path).await;
        let code = response.status;
        assert!(
            code == 400 || code == 404,
            "{path}: {code} {}",
            response.text()
        );
        let reason = if code == 400 {
            "BadRequest"
        } else {
            "NotFound"
        };
        expect_status(&server, path, response, code, reason).await;
    }
}

#[tokio::test]
async fn bodies_over_three_mebibytes_are_refused() {
    let server = SERVER.get().await;
    let collection = namespace(&server, "bad-large").await;
    let mut big = configmap("big");
    big["data"]["k"] = Value::String("x".repeat(3 * 1024 * 1024 + 1024));
    let response = server.send_json(Method::POST, &collection, &big).await;
    expect_status(
        &server,
        "3 MiB body",
        response,
        413,
        "RequestEntityTooLarge",
    )
    .await;
    // Also when the client does not say how long the body is (chunked).
    let body = big.to_string().into_bytes();
    let stream = chunked(body);
    let response = server
        .send(Method::POST, &collection, "application/json", stream)
        .await;
    expect_status(
        &server,
        "chunked 3 MiB body",
        response,
        413,
        "RequestEntityTooLarge",
    )
    .await;
    // Below the request limit, a ConfigMap over 1 MiB of data is invalid, as in Kubernetes.
    let mut large = configmap("large");
    large["data"]["k"] = Value::String("x".repeat(2 * 1024 * 1024));
    let response = server.send_json(Method::POST, &collection, &large).await;
    let status = expect_status(&server, "2 MiB ConfigMap", response, 422, "Invalid").await;
    assert_eq!(
        status["details"]["causes"][0]["reason"], "FieldValueTooLong",
        "{status}"
    );
    let missing = server.get(&format!("{collection}/large")).await;
    assert_eq!(missing.status, 404, "{}", missing.text());
    // A type without a size rule of its own still stops at the 1.5 MiB object limit.
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "large"},
        "spec": {"holderIdentity": "x".repeat(2 * 1024 * 1024)},
    });
    let leases = "/apis/coordination.k8s.io/v1/namespaces/bad-large/leases";
    let response = server.send_json(Method::POST, leases, &lease).await;
    expect_status(
        &server,
        "2 MiB Lease",
        response,
        413,
        "RequestEntityTooLarge",
    )
    .await;
    let missing = server.get(&format!("{leases}/large")).await;
    assert_eq!(missing.status, 404, "{}", missing.text());
}

/// A body without a length: one chunk at a time.
fn chunked(body: Vec<u8>) -> reqwest::Body {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
        .chunks(64 * 1024)
        .map(|chunk| Ok(chunk.to_vec()))
        .collect();
    reqwest::Body::wrap_stream(futures::stream::iter(chunks))
}

#[tokio::test]
async fn malformed_bodies() {
    let server = SERVER.get().await;
    let collection = namespace(&server, "bad-bodies").await;
    let cases: [(&str, &str, &str, u16, &str); 6] = [
        (
            "invalid JSON",
            "application/json",
            "{\"apiVersion\": \"v1\", ",
            400,
            "BadRequest",
        ),
        (
            "not an object",
            "application/json",
            "[1, 2, 3]",
            400,
            "BadRequest",
        ),
        (
            "wrong kind",
            "application/json",
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"wrong-kind"}}"#,
            400,
            "BadRequest",
        ),
        (
            "wrong apiVersion",
            "application/json",
            r#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"wrong-version"}}"#,
            400,
            "BadRequest",
        ),
        (
            "unsupported content type",
            "text/plain",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"text"}}"#,
            415,
            "UnsupportedMediaType",
        ),
        (
            "invalid YAML",
            "application/yaml",
            "metadata: [unclosed",
            400,
            "BadRequest",
        ),
    ];
    for (what, content_type, body, code, reason) in cases {
        let response = server
            .send(Method::POST, &collection, content_type, body)
            .await;
        expect_status(&server, what, response, code, reason).await;
    }
    // Only what every namespace holds from the start (kube-root-ca.crt) is there.
    let listed = server.get(&collection).await.json();
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .filter(|name| *name != "kube-root-ca.crt")
        .collect();
    assert!(names.is_empty(), "nothing was created: {names:?}");
}

#[tokio::test]
async fn bad_selectors() {
    let server = SERVER.get().await;
    let collection = namespace(&server, "bad-selectors").await;
    create_configmap(&server, &collection, "present").await;
    for query in [
        "labelSelector=a%20in%20(",
        "labelSelector=%3D%3Dx",
        "labelSelector=a%3D%3Db%3Dc",
        "labelSelector=bad%20key!%3Dx",
        "fieldSelector=metadata.name",
        "fieldSelector=metadata.name%3D%3D%3Dx",
        "fieldSelector=data.k%3Dv",
        "fieldSelector=spec.nothing%3Dx",
    ] {
        let path = format!("{collection}?{query}");
        let response = server.get(&path).await;
        expect_status(&server, &path, response, 400, "BadRequest").await;
    }
    // Valid selectors still work.
    let named = server
        .get(&format!(
            "{collection}?fieldSelector=metadata.name%3Dpresent"
        ))
        .await
        .json();
    assert_eq!(named["items"].as_array().map(Vec::len), Some(1), "{named}");
}

#[tokio::test]
async fn bad_patches() {
    let server = SERVER.get().await;
    let collection = namespace(&server, "bad-patches").await;
    create_configmap(&server, &collection, "target").await;
    let path = format!("{collection}/target");
    let json_patch = "application/json-patch+json";
    let merge_patch = "application/merge-patch+json";
    let strategic = "application/strategic-merge-patch+json";
    for (what, content_type, body, code, reason) in [
        ("JSON patch not JSON", json_patch, "[{", 400, "BadRequest"),
        (
            "JSON patch not a list",
            json_patch,
            r#"{"op":"add"}"#,
            400,
            "BadRequest",
        ),
        (
            "JSON patch on a missing path",
            json_patch,
            r#"[{"op":"replace","path":"/data/missing/deeper","value":"x"}]"#,
            422,
            "Invalid",
        ),
        (
            "JSON patch test failing",
            json_patch,
            r#"[{"op":"test","path":"/data/k","value":"other"}]"#,
            422,
            "Invalid",
        ),
        (
            "merge patch not JSON",
            merge_patch,
            "{\"data\":",
            400,
            "BadRequest",
        ),
        (
            "strategic merge patch not JSON",
            strategic,
            "{\"data\":",
            400,
            "BadRequest",
        ),
        (
            "patch with unsupported type",
            "application/x-unknown-patch",
            "{}",
            415,
            "UnsupportedMediaType",
        ),
        (
            "merge patch making the object invalid",
            merge_patch,
            r#"{"metadata":{"labels":{"bad label":"x"}}}"#,
            422,
            "Invalid",
        ),
    ] {
        let response = server.send(Method::PATCH, &path, content_type, body).await;
        expect_status(&server, what, response, code, reason).await;
    }
    let unchanged = server.get(&path).await.json();
    assert_eq!(unchanged["data"], json!({"k": "v"}));
    assert!(unchanged["metadata"].get("labels").is_none(), "{unchanged}");
}

#[tokio::test]
async fn invalid_objects_list_their_causes() {
    let server = SERVER.get().await;
    let collection = namespace(&server, "bad-objects").await;
    let mut bad_name = configmap("Bad_Name");
    bad_name["metadata"]["labels"] = json!({"fine": "yes"});
    let mut bad_label = configmap("bad-label");
    bad_label["metadata"]["labels"] = json!({"a b": "c"});
    let mut bad_key = configmap("bad-key");
    bad_key["data"] = json!({"no/slashes": "x"});
    for (what, body, field) in [
        ("bad name", bad_name, "metadata.name"),
        ("bad label", bad_label, "metadata.labels"),
        ("bad data key", bad_key, "data[no/slashes]"),
    ] {
        let response = server.send_json(Method::POST, &collection, &body).await;
        let status = expect_status(&server, what, response, 422, "Invalid").await;
        let details = &status["details"];
        assert_eq!(details["kind"], "ConfigMap", "{status}");
        let causes = details["causes"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: no causes: {status}"));
        assert!(
            causes.iter().any(|cause| cause["field"] == field
                && cause["reason"]
                    .as_str()
                    .is_some_and(|reason| reason.starts_with("Field"))),
            "{what}: no cause on {field}: {status}"
        );
    }
}

#[tokio::test]
async fn stale_updates_conflict() {
    let server = SERVER.get().await;
    let collection = namespace(&server, "bad-stale").await;
    let original = create_configmap(&server, &collection, "contended").await;
    let path = format!("{collection}/contended");
    let mut first = original.clone();
    first["data"]["k"] = json!("first");
    let updated = server.send_json(Method::PUT, &path, &first).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let mut stale = original;
    stale["data"]["k"] = json!("stale");
    let response = server.send_json(Method::PUT, &path, &stale).await;
    let status = expect_status(&server, "stale update", response, 409, "Conflict").await;
    assert_eq!(status["details"]["name"], "contended", "{status}");
    // A delete with a stale precondition conflicts too.
    let precondition = json!({
        "apiVersion": "v1", "kind": "DeleteOptions",
        "preconditions": {"resourceVersion": stale["metadata"]["resourceVersion"]},
    });
    let response = server.send_json(Method::DELETE, &path, &precondition).await;
    expect_status(&server, "stale delete", response, 409, "Conflict").await;
    assert_eq!(server.get(&path).await.json()["data"]["k"], "first");
}

#[tokio::test]
async fn missing_things() {
    let server = SERVER.get().await;
    let missing_namespace = "/api/v1/namespaces/does-not-exist/configmaps";
    let response = server
        .send_json(Method::POST, missing_namespace, &configmap("orphan"))
        .await;
    let status = expect_status(
        &server,
        "create in a missing namespace",
        response,
        404,
        "NotFound",
    )
    .await;
    assert_eq!(status["details"]["kind"], "namespaces", "{status}");
    assert_eq!(status["details"]["name"], "does-not-exist", "{status}");
    let response = server
        .get("/api/v1/namespaces/default/configmaps/does-not-exist")
        .await;
    let status = expect_status(&server, "get a missing object", response, 404, "NotFound").await;
    assert_eq!(status["details"]["kind"], "configmaps", "{status}");
}

#[tokio::test]
async fn anonymous_requests_are_refused() {
    let server = SERVER.get().await;
    let anonymous = server.admin().anonymous_client();
    for path in [
        "/api/v1/namespaces",
        "/clusters/root/api/v1/namespaces/default",
    ] {
        let response = Response::send(anonymous.get(server.url(path))).await;
        let status = expect_status(&server, path, response, 403, "Forbidden").await;
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .contains("User \"system:anonymous\" cannot "),
            "{status}"
        );
    }
    let response = Response::send(
        anonymous
            .post(server.url("/api/v1/namespaces"))
            .header("content-type", "application/json")
            .body(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "anon"}})
                    .to_string(),
            ),
    )
    .await;
    expect_status(&server, "anonymous create", response, 403, "Forbidden").await;
    assert_eq!(server.get("/api/v1/namespaces/anon").await.status, 404);
    // Health stays open without a certificate; everything else in a workspace, /version
    // included, needs `access`, which root grants to authenticated users only.
    let ready = Response::send(anonymous.get(server.url("/readyz"))).await;
    assert_eq!(ready.status, 200, "/readyz: {}", ready.text());
    let version = Response::send(anonymous.get(server.url("/version"))).await;
    expect_status(&server, "/version", version, 403, "Forbidden").await;
    // A credential that does not authenticate is a 401, never anonymous.
    let response = Response::send(
        anonymous
            .get(server.url("/api/v1/namespaces"))
            .bearer_auth("not-a-token"),
    )
    .await;
    expect_status(&server, "bad token", response, 401, "Unauthorized").await;
}
