//! Built-in types over HTTP against a started `kcp`, where kube-apiserver's exact answer matters:
//! `fieldValidation` on unknown `metadata` fields, Namespace `/status` patches that also change
//! metadata, 406 for a Table of a review, the core/v1 `podtemplates` resource (CRUD, table,
//! generation, strategic merge patch, validation) and the validation limits whose HTTP status a
//! client branches on (the events.k8s.io/v1 `note` limit, ConfigMap size, annotation size).
//!
//! Each expectation is what kube-apiserver 1.35 answers to the same request. The scenarios share
//! one server; each works in a namespace of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "builtin-behaviour");

const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";

/// Creates namespace `name` and returns `/api/v1/namespaces/<name>`.
async fn namespace(server: &KcpProcess, name: &str) -> String {
    let created = server
        .send_json(
            Method::POST,
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    format!("/api/v1/namespaces/{name}")
}

/// Sends a JSON body and returns the response with its `Warning` headers.
async fn send_with_warnings(
    server: &KcpProcess,
    method: Method,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (Response, Vec<String>) {
    let response = server
        .admin()
        .client()
        .request(method, server.url(path))
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.bytes().await.unwrap().to_vec();
    (
        Response {
            status,
            content_type,
            body,
        },
        warnings,
    )
}

fn assert_status(response: &Response, code: u16, reason: &str) -> Value {
    assert_eq!(response.status, code, "{}", response.text());
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    status
}

#[tokio::test]
async fn unknown_metadata_fields_follow_field_validation() {
    let server = SERVER.get().await;
    let ns = namespace(&server, "strict-meta").await;
    let configmap = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "unknownMeta": "x"}, "data": {"a": "b"}})
    };

    let (strict, _) = send_with_warnings(
        &server,
        Method::POST,
        &format!("{ns}/configmaps?fieldValidation=Strict"),
        "application/json",
        &configmap("strict"),
    )
    .await;
    let status = assert_status(&strict, 400, "BadRequest");
    assert_eq!(
        status["message"],
        r#"strict decoding error: unknown field "metadata.unknownMeta""#
    );
    assert_eq!(
        server.get(&format!("{ns}/configmaps/strict")).await.status,
        404,
        "nothing stored"
    );

    let (warned, warnings) = send_with_warnings(
        &server,
        Method::POST,
        &format!("{ns}/configmaps?fieldValidation=Warn"),
        "application/json",
        &configmap("warned"),
    )
    .await;
    assert_eq!(warned.status, 201, "{}", warned.text());
    assert_eq!(
        warnings,
        [r#"299 - "unknown field \"metadata.unknownMeta\"""#]
    );
    assert!(warned.json()["metadata"].get("unknownMeta").is_none());

    let (ignored, warnings) = send_with_warnings(
        &server,
        Method::POST,
        &format!("{ns}/configmaps?fieldValidation=Ignore"),
        "application/json",
        &configmap("ignored"),
    )
    .await;
    assert_eq!(ignored.status, 201, "{}", ignored.text());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(ignored.json()["metadata"].get("unknownMeta").is_none());

    // A patch that brings an unknown metadata field is judged the same way.
    let (patched, _) = send_with_warnings(
        &server,
        Method::PATCH,
        &format!("{ns}/configmaps/ignored?fieldValidation=Strict"),
        "application/merge-patch+json",
        &json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
            "name": "warned", "uid": "6f0b5a43-0d5a-4c5e-9a43-1b2c3d4e5f60", "bogus": true}]}}),
    )
    .await;
    let status = assert_status(&patched, 400, "BadRequest");
    assert_eq!(
        status["message"],
        r#"strict decoding error: unknown field "metadata.ownerReferences[0].bogus""#
    );
}

#[tokio::test]
async fn namespace_status_patch_keeps_its_metadata_changes() {
    let server = SERVER.get().await;
    let ns = namespace(&server, "status-meta").await;
    let patched = server
        .send(
            Method::PATCH,
            &format!("{ns}/status"),
            "application/merge-patch+json",
            json!({"metadata": {"annotations": {"example.com/note": "kept"}},
                "spec": {"finalizers": []}})
            .to_string(),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let stored = server.get(&ns).await.json();
    assert_eq!(
        stored["metadata"]["annotations"]["example.com/note"],
        "kept"
    );
    // spec still comes from the stored object (kube resets spec on /status).
    assert_eq!(stored["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        stored["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "status-meta"
    );
}

#[tokio::test]
async fn a_review_is_not_a_table() {
    let server = SERVER.get().await;
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let request = |accept: &str| {
        server
            .admin()
            .client()
            .post(server.url(path))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, accept.to_owned())
            .body(review.to_string())
    };
    let refused = Response::send(request(TABLE)).await;
    let status = assert_status(&refused, 406, "NotAcceptable");
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
    // The encoding is settled before the body is read: a bad body changes nothing.
    let unreadable = Response::send(
        server
            .admin()
            .client()
            .post(server.url(path))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, TABLE)
            .body("{not json"),
    )
    .await;
    assert_status(&unreadable, 406, "NotAcceptable");
    // kubectl's Accept (Table first, then JSON) falls back to JSON.
    let fallback = Response::send(request(&format!("{TABLE},application/json"))).await;
    assert_eq!(fallback.status, 201, "{}", fallback.text());
    assert_eq!(fallback.json()["kind"], "SelfSubjectAccessReview");
}

#[tokio::test]
async fn podtemplates_are_served_like_kube() {
    let server = SERVER.get().await;
    let ns = namespace(&server, "templates").await;
    let path = format!("{ns}/podtemplates");
    let template = json!({"apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "web"},
        "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "busybox"}]}}});
    let created = server.send_json(Method::POST, &path, &template).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    assert_eq!(created["metadata"]["generation"], 1);
    let spec = &created["template"]["spec"];
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(spec["containers"][1]["imagePullPolicy"], "Always");
    assert_eq!(spec["containers"][0]["ports"][0]["protocol"], "TCP");

    // Discovery lists it.
    let discovery = server.get("/api/v1").await.json();
    let resource = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "podtemplates")
        .cloned()
        .expect("podtemplates in /api/v1");
    assert_eq!(resource["kind"], "PodTemplate");
    assert_eq!(resource["namespaced"], true);

    // The table kubectl prints: NAME, CONTAINERS, IMAGES, POD LABELS, no AGE.
    let table = Response::send(
        server
            .admin()
            .client()
            .get(server.url(&path))
            .header(reqwest::header::ACCEPT, TABLE),
    )
    .await
    .json();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Containers", "Images", "Pod Labels"]);
    assert_eq!(
        table["rows"][0]["cells"],
        json!([
            "web",
            "nginx,sidecar",
            "nginx:1.27,busybox",
            "app=web,tier=front"
        ])
    );

    // A strategic merge patch merges containers by name; the template changed, so generation moves.
    let patched = server
        .send(
            Method::PATCH,
            &format!("{path}/web"),
            "application/strategic-merge-patch+json",
            json!({"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox:1.36"}]}}})
                .to_string(),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let patched = patched.json();
    let containers = patched["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 2, "{patched}");
    assert_eq!(containers[1]["image"], "busybox:1.36");
    assert_eq!(patched["metadata"]["generation"], 2);

    // A label change alone leaves generation alone.
    let labelled = server
        .send(
            Method::PATCH,
            &format!("{path}/web"),
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"x": "y"}}}).to_string(),
        )
        .await;
    assert_eq!(labelled.json()["metadata"]["generation"], 2);

    // Invalid templates are 422 with kube's causes.
    let invalid = json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "empty"},
        "template": {"spec": {"containers": []}}});
    let refused = server.send_json(Method::POST, &path, &invalid).await;
    let status = assert_status(&refused, 422, "Invalid");
    assert_eq!(
        status["message"],
        r#"PodTemplate "empty" is invalid: template.spec.containers: Required value"#
    );

    // Paged lists (client-go's chunking tests use podtemplates).
    for i in 0..3 {
        let mut more = template.clone();
        more["metadata"]["name"] = json!(format!("page-{i}"));
        assert_eq!(
            server.send_json(Method::POST, &path, &more).await.status,
            201
        );
    }
    let first = server.get(&format!("{path}?limit=2")).await.json();
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let token = first["metadata"]["continue"].as_str().unwrap();
    let rest = server
        .get(&format!("{path}?limit=2&continue={token}"))
        .await
        .json();
    assert_eq!(rest["items"].as_array().unwrap().len(), 2);
    assert!(rest["metadata"].get("continue").is_none_or(|c| c == ""));

    let deleted = server
        .send(
            Method::DELETE,
            &format!("{path}/web"),
            "application/json",
            "",
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
}

#[tokio::test]
async fn an_events_v1_note_over_1_kib_is_invalid() {
    let server = SERVER.get().await;
    namespace(&server, "notes").await;
    let path = "/apis/events.k8s.io/v1/namespaces/notes/events";
    let event = |name: &str, note: String| {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "type": "Normal", "reason": "Tested", "action": "Test",
            "reportingController": "example.com/tester", "reportingInstance": "tester-1",
            "regarding": {"kind": "ConfigMap", "name": "c", "namespace": "notes"}, "note": note})
    };
    let accepted = server
        .send_json(Method::POST, path, &event("fits", "x".repeat(1024)))
        .await;
    assert_eq!(accepted.status, 201, "{}", accepted.text());
    let refused = server
        .send_json(Method::POST, path, &event("long", "x".repeat(1025)))
        .await;
    let status = assert_status(&refused, 422, "Invalid");
    assert_eq!(
        status["message"],
        r#"Event.events.k8s.io "long" is invalid: message: Invalid value: "": can have at most 1024 characters"#
    );
    assert_eq!(status["details"]["causes"][0]["field"], "message");
}

#[tokio::test]
async fn size_limits_answer_422() {
    let server = SERVER.get().await;
    let ns = namespace(&server, "sizes").await;
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"a": "x".repeat(1024 * 1024 + 1)}});
    let refused = server
        .send_json(Method::POST, &format!("{ns}/configmaps"), &big)
        .await;
    let status = assert_status(&refused, 422, "Invalid");
    assert_eq!(
        status["message"],
        r#"ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes"#
    );

    let annotated = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "annotated", "annotations": {"a": "x".repeat(256 * 1024)}}});
    let refused = server
        .send_json(Method::POST, &format!("{ns}/configmaps"), &annotated)
        .await;
    let status = assert_status(&refused, 422, "Invalid");
    assert_eq!(
        status["message"],
        r#"ConfigMap "annotated" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"#
    );
}

/// `fieldValidation` judges writes to `status` like writes to the object, as kube-apiserver's
/// strict decoding does for every body: an unknown status field is refused with `Strict`,
/// reported with `Warn`, and never stored.
#[tokio::test]
async fn status_writes_are_validated_strictly_too() {
    let server = SERVER.get().await;
    let ns = namespace(&server, "status-strict").await;
    let (refused, _) = send_with_warnings(
        &server,
        Method::PATCH,
        &format!("{ns}/status?fieldValidation=Strict"),
        "application/merge-patch+json",
        &json!({"status": {"bogus": 1}}),
    )
    .await;
    let status = assert_status(&refused, 400, "BadRequest");
    assert_eq!(
        status["message"],
        r#"strict decoding error: unknown field "status.bogus""#
    );
    let mut current = server.get(&ns).await.json();
    current["status"]["bogus"] = json!(1);
    let (warned, warnings) = send_with_warnings(
        &server,
        Method::PUT,
        &format!("{ns}/status?fieldValidation=Warn"),
        "application/json",
        &current,
    )
    .await;
    assert_eq!(warned.status, 200, "{}", warned.text());
    assert_eq!(warnings, [r#"299 - "unknown field \"status.bogus\"""#]);
    assert!(warned.json()["status"].get("bogus").is_none());
}
