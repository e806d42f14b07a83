//! Every built-in kind over protobuf against a started `kcp`, as client-go's typed clients use
//! it: request bodies, objects, lists, DeleteOptions and `Status` errors in
//! `application/vnd.kubernetes.protobuf`, apiextensions.k8s.io included (a CRD created with a
//! protobuf body, which every CRD-installing controller sends); custom resources refused as
//! kube-apiserver refuses them (415 for a protobuf body, JSON when protobuf is only preferred).
//! Bodies are built and read with the server's codec, whose bytes
//! `server/apimachinery/tests/protobuf_k8s_pb.rs` checks against kube-rs's k8s-pb.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_apimachinery::protobuf;
use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "protobuf-builtins");

/// What client-go's typed clients send as Accept.
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Sends `body` (protobuf-encoded when given) to `path`, asking for protobuf first.
async fn call(server: &KcpProcess, method: Method, path: &str, body: Option<&Value>) -> Response {
    let mut request = server
        .admin()
        .client()
        .request(method, server.url(path))
        .header(reqwest::header::ACCEPT, ACCEPT);
    if let Some(body) = body {
        request = request
            .header(reqwest::header::CONTENT_TYPE, protobuf::CONTENT_TYPE)
            .body(protobuf::encode(body).unwrap());
    }
    Response::send(request).await
}

/// The protobuf body of `response`, decoded; anything else fails the test.
fn decoded(response: &Response, status: u16) -> Value {
    assert_eq!(
        (response.status, response.content_type.as_str()),
        (status, protobuf::CONTENT_TYPE),
        "{}",
        protobuf::decode(&response.body).map_or_else(|_| response.text(), |v| v.to_string())
    );
    protobuf::decode(&response.body).unwrap()
}

/// Create, get, list, update and delete of one kind, all in protobuf; `collection` is the path
/// of its list, `object` what is created (named by its metadata.name).
async fn crud(server: &KcpProcess, collection: &str, object: Value) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let kind = object["kind"].as_str().unwrap().to_string();
    let created = decoded(
        &call(server, Method::POST, collection, Some(&object)).await,
        201,
    );
    assert_eq!(created["kind"], kind.as_str());
    assert_eq!(created["metadata"]["name"], name.as_str());
    assert!(created["metadata"]["uid"].is_string(), "{created}");

    let path = format!("{collection}/{name}");
    let got = decoded(&call(server, Method::GET, &path, None).await, 200);
    // A controller may have written the status of these kinds in between.
    let status_written = ["ValidatingAdmissionPolicy", "ResourceQuota"].contains(&kind.as_str());
    let without_status = |object: &Value| {
        let mut object = object.clone();
        if status_written {
            object.as_object_mut().unwrap().remove("status");
            let metadata = object["metadata"].as_object_mut().unwrap();
            metadata.remove("resourceVersion");
            metadata.remove("managedFields");
        }
        object
    };
    assert_eq!(
        without_status(&got),
        without_status(&created),
        "{kind}: GET differs from the create answer"
    );

    let list = decoded(&call(server, Method::GET, collection, None).await, 200);
    assert_eq!(list["kind"], format!("{kind}List"));
    let items = list["items"].as_array().unwrap();
    assert!(
        items.iter().any(|i| i["metadata"]["name"] == name.as_str()),
        "{kind}: {list}"
    );

    let mut changed = got.clone();
    changed["metadata"]["labels"] = json!({"protobuf": "updated"});
    if status_written {
        changed["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
    }
    let updated = decoded(&call(server, Method::PUT, &path, Some(&changed)).await, 200);
    assert_eq!(updated["metadata"]["labels"]["protobuf"], "updated");

    let options = json!({"apiVersion": created["apiVersion"], "kind": "DeleteOptions",
        "propagationPolicy": "Background"});
    let deleted = call(server, Method::DELETE, &path, Some(&options)).await;
    assert_eq!(deleted.status, 200, "{kind}: {}", deleted.text());
    assert_eq!(deleted.content_type, protobuf::CONTENT_TYPE);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_built_in_kind_round_trips_over_protobuf() {
    let server = SERVER.get().await;
    let ns = "protobuf-crud";
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    let created = call(
        &server,
        Method::POST,
        "/api/v1/namespaces",
        Some(&namespace),
    )
    .await;
    assert_eq!(decoded(&created, 201)["metadata"]["name"], ns);

    let meta = |name: &str| json!({"name": name, "namespace": ns});
    let core = format!("/api/v1/namespaces/{ns}");
    let pod_template = json!({"metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "500m"}}}]}});
    let subject = json!([{"kind": "ServiceAccount", "name": "sa", "namespace": ns}]);
    let rule = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
    let cases = [
        (
            format!("{core}/configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cm"),
                "data": {"b": "2", "a": "1"}, "binaryData": {"bin": "AAEC"}}),
        ),
        (
            format!("{core}/secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("s"),
                "type": "Opaque", "data": {"k": "c2VjcmV0"}}),
        ),
        (
            format!("{core}/serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("sa"),
                "automountServiceAccountToken": false}),
        ),
        (
            format!("{core}/events"),
            json!({"apiVersion": "v1", "kind": "Event", "metadata": meta("ev"),
                "involvedObject": {"kind": "ConfigMap", "name": "cm", "namespace": ns},
                "reason": "Tested", "message": "hello", "type": "Normal", "count": 1}),
        ),
        (
            format!("{core}/podtemplates"),
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta("pt"),
                "template": pod_template}),
        ),
        (
            format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": meta("ev2"),
                "eventTime": "2026-11-25T12:00:00.000000Z", "reportingController": "tests/x",
                "reportingInstance": "i", "action": "Test", "reason": "Tested", "type": "Normal",
                "regarding": {"kind": "ConfigMap", "name": "cm", "namespace": ns}}),
        ),
        (
            format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("l"),
                "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                    "renewTime": "2026-11-25T12:00:00.000000Z"}}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": meta("r"), "rules": rule}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": meta("rb"), "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles".to_string(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "protobuf-cr"}, "rules": rule}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_string(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "protobuf-crb"}, "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "protobuf-cr"}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations".to_string(),
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "protobuf-vwc"},
                "webhooks": [{"name": "check.protobuf.kcp.io",
                    "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                    "rules": [{"apiGroups": ["protobuf.example.com"], "apiVersions": ["*"],
                        "operations": ["CREATE"], "resources": ["nothing"]}],
                    "failurePolicy": "Ignore", "sideEffects": "None",
                    "admissionReviewVersions": ["v1"], "timeoutSeconds": 3}]}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations".to_string(),
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration", "metadata": {"name": "protobuf-mwc"},
                "webhooks": [{"name": "default.protobuf.kcp.io",
                    "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
                    "rules": [{"apiGroups": ["protobuf.example.com"], "apiVersions": ["*"],
                        "operations": ["CREATE"], "resources": ["nothing"]}],
                    "failurePolicy": "Ignore", "sideEffects": "None",
                    "reinvocationPolicy": "IfNeeded", "admissionReviewVersions": ["v1"]}]}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies".to_string(),
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "protobuf-vap"},
                "spec": {"matchConstraints": {"resourceRules": [{
                    "apiGroups": ["protobuf.example.com"], "apiVersions": ["*"],
                    "operations": ["CREATE"], "resources": ["nothing"]}]},
                    "validations": [{"expression": "object.metadata.name != ''",
                        "message": "named"}]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings".to_string(),
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "protobuf-vapb"},
                "spec": {"policyName": "protobuf-vap", "validationActions": ["Warn", "Audit"]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicies".to_string(),
            json!({"apiVersion": "admissionregistration.k8s.io/v1beta1",
                "kind": "MutatingAdmissionPolicy", "metadata": {"name": "protobuf-map"},
                "spec": {"matchConstraints": {"resourceRules": [{
                    "apiGroups": ["protobuf.example.com"], "apiVersions": ["*"],
                    "operations": ["CREATE"], "resources": ["nothing"]}]},
                    "reinvocationPolicy": "Never",
                    "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                        "expression": "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}}]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicybindings"
                .to_string(),
            json!({"apiVersion": "admissionregistration.k8s.io/v1beta1",
                "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "protobuf-mapb"},
                "spec": {"policyName": "protobuf-map"}}),
        ),
        (
            "/apis/certificates.k8s.io/v1/certificatesigningrequests".to_string(),
            json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": "protobuf-csr"},
                "spec": {"request": certificate_request(), "signerName": "example.com/protobuf",
                    "usages": ["digital signature", "client auth"], "expirationSeconds": 3600}}),
        ),
        // Last: a quota holds later creates in its namespace until its status is computed.
        (
            format!("{core}/resourcequotas"),
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("q"),
                "spec": {"hard": {"count/configmaps": "50", "secrets": "10"}}}),
        ),
    ];
    for (collection, object) in cases {
        crud(&server, &collection, object).await;
    }

    // A review answers in protobuf too.
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": ns}}});
    let answer = call(
        &server,
        Method::POST,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(&review),
    )
    .await;
    assert_eq!(decoded(&answer, 201)["status"]["allowed"], true);
}

/// A PKCS#10 request for a client certificate, base64 of its PEM as `spec.request` carries it.
fn certificate_request() -> String {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "protobuf-user");
    let request = params.serialize_request(&key).unwrap();
    base64::engine::general_purpose::STANDARD.encode(request.pem().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_of_built_in_kinds_are_protobuf_status() {
    let server = SERVER.get().await;
    let missing = call(
        &server,
        Method::GET,
        "/api/v1/namespaces/default/configmaps/not-there",
        None,
    )
    .await;
    let status = decoded(&missing, 404);
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("NotFound"))
    );
    assert_eq!(status["code"], 404);
    assert_eq!(status["details"]["name"], "not-there");
}

/// What a client would send for an object without a protobuf encoding: `k8s\0` and a
/// `runtime.Unknown` with its type and some raw bytes (our encoder refuses such kinds).
fn unknown_envelope(object: &Value) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
        out.push(number << 3 | 2);
        out.push(u8::try_from(bytes.len()).unwrap());
        out.extend_from_slice(bytes);
    }
    let mut type_meta = Vec::new();
    field(
        &mut type_meta,
        1,
        object["apiVersion"].as_str().unwrap().as_bytes(),
    );
    field(
        &mut type_meta,
        2,
        object["kind"].as_str().unwrap().as_bytes(),
    );
    let mut body = b"k8s\0".to_vec();
    field(&mut body, 1, &type_meta);
    field(&mut body, 2, b"\x0a\x00");
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn crds_speak_protobuf_and_custom_resources_do_not() {
    let server = SERVER.get().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.protobuf.example.com"},
        "spec": {"group": "protobuf.example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10.5, "default": 3},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "extra": {"type": "object",
                            "additionalProperties": {"type": "string"}}}}}}}}]}
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let created = decoded(&call(&server, Method::POST, crds, Some(&crd)).await, 201);
    let schema = &created["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["maximum"],
        10.5
    );
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["default"],
        3
    );
    let list = decoded(&call(&server, Method::GET, crds, None).await, 200);
    assert_eq!(list["kind"], "CustomResourceDefinitionList");

    let gadgets = "/apis/protobuf.example.com/v1/namespaces/default/gadgets";
    server
        .wait_for("gadgets served", gadgets, |r| r.status == 200)
        .await;
    let gadget = json!({"apiVersion": "protobuf.example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"size": 2}});
    let request = server
        .admin()
        .client()
        .post(server.url(gadgets))
        .header(reqwest::header::ACCEPT, ACCEPT)
        .header(reqwest::header::CONTENT_TYPE, protobuf::CONTENT_TYPE)
        .body(unknown_envelope(&gadget));
    let refused = Response::send(request).await;
    assert_eq!(refused.status, 415, "{}", refused.text());
    assert_eq!(
        refused.json()["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json, application/yaml"
    );
    // Nothing was stored, and a client preferring protobuf reads custom resources as JSON.
    let listed = call(&server, Method::GET, gadgets, None).await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.content_type, "application/json");
    assert_eq!(listed.json()["items"], json!([]));
}

/// What client-go's metadata client sends as Accept: PartialObjectMetadata(List) in protobuf
/// first, then the same in JSON.
const METADATA_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The metadata client (garbage collectors, quota, `kubectl` with `--output name` paths) reads
/// any resource, built-in or custom, as PartialObjectMetadata in protobuf, as kube-apiserver
/// serves it: metadata is the same message whatever the kind.
#[tokio::test(flavor = "multi_thread")]
async fn metadata_clients_read_partial_objects_in_protobuf() {
    let server = SERVER.get().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "meta-only", "labels": {"k": "v"}}, "data": {"secret": "x"}});
    let created = call(&server, Method::POST, configmaps, Some(&configmap)).await;
    assert_eq!(created.status, 201, "{}", created.text());

    let metadata = |path: &str, accept: &'static str| {
        let request = server
            .admin()
            .client()
            .get(server.url(path))
            .header(reqwest::header::ACCEPT, accept);
        Response::send(request)
    };
    let list = decoded(&metadata(configmaps, METADATA_ACCEPT).await, 200);
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "meta-only")
        .unwrap_or_else(|| panic!("meta-only not listed: {list}"));
    assert_eq!(item["metadata"]["labels"]["k"], "v");
    assert!(item.get("data").is_none(), "{item}");

    let one = decoded(
        &metadata(
            &format!("{configmaps}/meta-only"),
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await,
        200,
    );
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "meta-only");

    // A JSON-only metadata client still gets JSON.
    let json_only = metadata(
        configmaps,
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(
        (json_only.status, json_only.content_type.as_str()),
        (200, "application/json")
    );
    assert_eq!(json_only.json()["kind"], "PartialObjectMetadataList");
}

/// Broken protobuf bodies are the client's fault: 400 with a Status saying why, nothing stored,
/// and the server goes on serving (a truncated envelope, a body without the `k8s\0` magic, noise
/// behind the magic).
#[tokio::test(flavor = "multi_thread")]
async fn broken_protobuf_bodies_are_bad_requests() {
    let server = SERVER.get().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let good = protobuf::encode(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "broken"}, "data": {"a": "b"}}))
    .unwrap();
    let mut noise = b"k8s\0".to_vec();
    noise.extend([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]);
    for (what, body) in [
        ("truncated", good[..good.len() - 3].to_vec()),
        ("no magic", good[4..].to_vec()),
        ("noise", noise),
    ] {
        let request = server
            .admin()
            .client()
            .post(server.url(configmaps))
            .header(reqwest::header::ACCEPT, "application/json")
            .header(reqwest::header::CONTENT_TYPE, protobuf::CONTENT_TYPE)
            .body(body);
        let refused = Response::send(request).await;
        assert_eq!(refused.status, 400, "{what}: {}", refused.text());
        let status = refused.json();
        assert_eq!(status["kind"], "Status", "{what}");
        assert_eq!(status["reason"], "BadRequest", "{what}");
    }
    let missing = call(&server, Method::GET, &format!("{configmaps}/broken"), None).await;
    assert_eq!(missing.status, 404);
    // The intact body still creates the object.
    let request = server
        .admin()
        .client()
        .post(server.url(configmaps))
        .header(reqwest::header::CONTENT_TYPE, protobuf::CONTENT_TYPE)
        .body(good);
    assert_eq!(Response::send(request).await.status, 201);
}
