//! Reconcile sequences against a mock API server (`tower_test::mock::pair`): every request the
//! controller sends is recorded as `METHOD path[?query]` and asserted in order, for create,
//! no-op, certificate rotation, deletion and a broken reference.
//!
//! The mock keeps objects in memory: GET returns what was applied, server-side apply stores
//! the applied object, a status merge patch replaces the status, and events are accepted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use jiff::{SignedDuration, Timestamp};
use kcp_operator::api::{CacheServer, FrontProxy};
use kcp_operator::controller::{Context, cacheserver, frontproxy};
use kcp_operator::pki::{Authority, CertificateRequest, TlsMaterial};
use kube::client::Body;
use serde_json::{Value, json};

const NS: &str = "/api/v1/namespaces/kcp";
const APPS: &str = "/apis/apps/v1/namespaces/kcp";
const EVENTS: &str = "POST /apis/events.k8s.io/v1/namespaces/kcp/events";
const APPLY: &str = "?&force=true&fieldManager=kcp-operator";

/// The in-memory API server and the log of requests it served.
#[derive(Clone, Default)]
struct FakeApi {
    objects: Arc<Mutex<BTreeMap<String, Value>>>,
    log: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeApi {
    fn put(&self, path: &str, object: Value) {
        self.objects
            .lock()
            .expect("lock")
            .insert(path.to_owned(), object);
    }

    fn get(&self, path: &str) -> Value {
        self.objects
            .lock()
            .expect("lock")
            .get(path)
            .cloned()
            .expect("stored")
    }

    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().expect("lock"))
    }

    fn body_of(&self, entry: &str) -> Value {
        self.bodies
            .lock()
            .expect("lock")
            .iter()
            .rev()
            .find(|(logged, _)| logged == entry)
            .map(|(_, body)| body.clone())
            .expect("request was sent")
    }

    fn respond(&self, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let mut objects = self.objects.lock().expect("lock");
        let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
        match method {
            "GET" => match objects.get(path) {
                Some(object) => (StatusCode::OK, object.clone()),
                None => (StatusCode::NOT_FOUND, not_found),
            },
            "PATCH" if path.ends_with("/status") => {
                let object_path = path.trim_end_matches("/status");
                match objects.get_mut(object_path) {
                    Some(object) => {
                        object["status"] = body["status"].clone();
                        (StatusCode::OK, object.clone())
                    }
                    None => (StatusCode::NOT_FOUND, not_found),
                }
            }
            "PATCH" => {
                objects.insert(path.to_owned(), body.clone());
                (StatusCode::OK, body)
            }
            "POST" => (StatusCode::CREATED, body),
            _ => (StatusCode::METHOD_NOT_ALLOWED, not_found),
        }
    }

    /// A client whose requests this fake serves until the client is dropped.
    fn client(&self) -> kube::Client {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let fake = self.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let method = request.method().to_string();
                let path = request.uri().path().to_owned();
                let query = request
                    .uri()
                    .query()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default();
                let bytes = request.into_body().collect_bytes().await.expect("body");
                let body: Value = if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).expect("JSON body")
                };
                let entry = format!("{method} {path}{}", normalise_query(&query));
                fake.log.lock().expect("lock").push(entry.clone());
                fake.bodies
                    .lock()
                    .expect("lock")
                    .push((entry, body.clone()));
                let (status, response) = fake.respond(&method, &path, body);
                let response = Response::builder()
                    .status(status)
                    .body(Body::from(
                        serde_json::to_vec(&response).expect("serialises"),
                    ))
                    .expect("response");
                send.send_response(response);
            }
        });
        kube::Client::new(service, "default")
    }
}

/// Query parameters sorted, so the log does not depend on their order.
fn normalise_query(query: &str) -> String {
    let mut pairs: Vec<&str> = query
        .trim_start_matches('?')
        .split('&')
        .filter(|pair| !pair.is_empty())
        .collect();
    if pairs.is_empty() {
        return String::new();
    }
    pairs.sort_by(|a, b| b.cmp(a));
    format!("?&{}", pairs.join("&"))
}

fn cache_server_value() -> Value {
    json!({
        "apiVersion": "operator.kcp.io/v1alpha1",
        "kind": "CacheServer",
        "metadata": {"name": "c", "namespace": "kcp", "uid": "u-c", "generation": 1},
        "spec": {"image": {"tag": "v1.0.0"}}
    })
}

const CACHE_PATH: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/cacheservers/c";

fn secret(name: &str) -> String {
    format!("{NS}/secrets/{name}")
}

fn read(paths: &[String]) -> Vec<String> {
    paths.iter().map(|path| format!("GET {path}")).collect()
}

fn apply(path: &str) -> [String; 2] {
    [format!("GET {path}"), format!("PATCH {path}{APPLY}")]
}

async fn reconcile_cache(fake: &FakeApi) -> Vec<String> {
    let object: CacheServer = serde_json::from_value(fake.get(CACHE_PATH)).expect("cache server");
    let ctx = Arc::new(Context::new(fake.client()));
    cacheserver::reconcile(Arc::new(object), ctx)
        .await
        .expect("reconciles");
    fake.take_log()
}

fn cert_secrets() -> Vec<String> {
    [
        "c-cacheserver-ca",
        "c-cacheserver-server",
        "c-cacheserver-client",
    ]
    .iter()
    .map(|name| secret(name))
    .collect()
}

fn expected_create() -> Vec<String> {
    let mut expected = read(&cert_secrets());
    for path in cert_secrets() {
        expected.extend(apply(&path));
    }
    expected.extend(apply(&secret("c-cacheserver-client-kubeconfig")));
    expected.extend(apply(&format!("{NS}/services/c-cacheserver")));
    expected.extend(apply(&format!("{APPS}/deployments/c-cacheserver")));
    expected.push(EVENTS.into());
    expected.push(format!("PATCH {CACHE_PATH}/status"));
    expected
}

fn expected_quiet() -> Vec<String> {
    let mut expected = read(&cert_secrets());
    expected.push(format!("GET {}", secret("c-cacheserver-client-kubeconfig")));
    expected.push(format!("GET {NS}/services/c-cacheserver"));
    expected.push(format!("GET {APPS}/deployments/c-cacheserver"));
    expected
}

#[tokio::test]
async fn create_applies_certificates_then_workload_then_reports() {
    let fake = FakeApi::default();
    fake.put(CACHE_PATH, cache_server_value());
    assert_eq!(reconcile_cache(&fake).await, expected_create());

    let event = fake.body_of(EVENTS);
    assert_eq!(event["reason"], "Created");
    assert!(
        event["note"]
            .as_str()
            .expect("note")
            .contains("Deployment/c-cacheserver")
    );
    let status = &fake.get(CACHE_PATH)["status"];
    assert_eq!(status["phase"], "Provisioning");
    assert_eq!(status["targetVersion"], "v1.0.0");
    assert_eq!(status["observedGeneration"], 1);
    let deployment = fake.get(&format!("{APPS}/deployments/c-cacheserver"));
    assert_eq!(deployment["metadata"]["ownerReferences"][0]["uid"], "u-c");
    let ca = fake.get(&secret("c-cacheserver-ca"));
    assert_eq!(ca["type"], "kubernetes.io/tls");
    assert_eq!(ca["metadata"]["ownerReferences"][0]["kind"], "CacheServer");
}

#[tokio::test]
async fn a_second_reconcile_with_nothing_changed_writes_nothing() {
    let fake = FakeApi::default();
    fake.put(CACHE_PATH, cache_server_value());
    reconcile_cache(&fake).await;
    assert_eq!(reconcile_cache(&fake).await, expected_quiet());
}

#[tokio::test]
async fn an_available_deployment_makes_the_component_running_at_its_version() {
    let fake = FakeApi::default();
    fake.put(CACHE_PATH, cache_server_value());
    reconcile_cache(&fake).await;
    let path = format!("{APPS}/deployments/c-cacheserver");
    let mut deployment = fake.get(&path);
    deployment["status"] = json!({"observedGeneration": 0, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1});
    fake.put(&path, deployment);
    let mut expected = expected_quiet();
    expected.push(format!("PATCH {CACHE_PATH}/status"));
    assert_eq!(reconcile_cache(&fake).await, expected);
    let status = &fake.get(CACHE_PATH)["status"];
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["currentVersion"], "v1.0.0");
    assert_eq!(
        reconcile_cache(&fake).await,
        expected_quiet(),
        "and then stays quiet"
    );
}

#[tokio::test]
async fn a_due_certificate_is_rotated_and_rolls_the_pods() {
    let fake = FakeApi::default();
    fake.put(CACHE_PATH, cache_server_value());
    reconcile_cache(&fake).await;
    let revision_before = fake.get(&format!("{APPS}/deployments/c-cacheserver"))["spec"]["template"]
        ["metadata"]["annotations"]["operator.kcp.io/mounted-content-revision"]
        .clone();

    // Replace the serving certificate with one issued 300 days ago: due at two thirds of a year.
    let ca_secret = fake.get(&secret("c-cacheserver-ca"));
    let data = serde_json::from_value(ca_secret["data"].clone()).expect("data");
    let ca = Authority::load(TlsMaterial::from_secret_data(&data).expect("material")).expect("ca");
    let server_path = secret("c-cacheserver-server");
    let mut server = fake.get(&server_path);
    let stored: BTreeMap<String, k8s_openapi::ByteString> =
        serde_json::from_value(server["data"].clone()).expect("data");
    let names = kcp_operator::pki::inspect::summarize(
        &TlsMaterial::from_secret_data(&stored)
            .expect("material")
            .cert_pem,
    )
    .expect("summary");
    let mut request = CertificateRequest::server(names.common_name, names.dns_names);
    request.ip_addresses = names.ip_addresses;
    let old = ca
        .issue(
            &request,
            Timestamp::now() - SignedDuration::from_hours(24 * 300),
        )
        .expect("old certificate");
    server["data"] = serde_json::to_value(old.to_secret_data()).expect("data");
    fake.put(&server_path, server);

    let mut expected = read(&cert_secrets());
    expected.extend(apply(&server_path));
    expected.push(format!("GET {}", secret("c-cacheserver-client-kubeconfig")));
    expected.push(format!("GET {NS}/services/c-cacheserver"));
    expected.extend(apply(&format!("{APPS}/deployments/c-cacheserver")));
    expected.push(EVENTS.into());
    assert_eq!(reconcile_cache(&fake).await, expected);

    let event = fake.body_of(EVENTS);
    assert_eq!(event["reason"], "CertificateRotated");
    assert!(
        event["note"]
            .as_str()
            .expect("note")
            .contains("due for renewal")
    );
    let revision_after = fake.get(&format!("{APPS}/deployments/c-cacheserver"))["spec"]["template"]
        ["metadata"]["annotations"]["operator.kcp.io/mounted-content-revision"]
        .clone();
    assert_ne!(
        revision_before, revision_after,
        "the renewal rolls the pods"
    );
}

#[tokio::test]
async fn a_deleted_object_is_left_to_garbage_collection() {
    let fake = FakeApi::default();
    let mut object = cache_server_value();
    object["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    fake.put(CACHE_PATH, object);
    assert_eq!(reconcile_cache(&fake).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_missing_root_shard_is_a_condition_and_one_event_not_an_error() {
    let fake = FakeApi::default();
    let path = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/frontproxies/f";
    fake.put(
        path,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1",
            "kind": "FrontProxy",
            "metadata": {"name": "f", "namespace": "kcp", "uid": "u-f", "generation": 2},
            "spec": {"rootShard": {"ref": {"name": "gone"}}}
        }),
    );
    let root = "GET /apis/operator.kcp.io/v1alpha1/namespaces/kcp/rootshards/gone".to_owned();
    let run = || async {
        let object: FrontProxy = serde_json::from_value(fake.get(path)).expect("front proxy");
        let ctx = Arc::new(Context::new(fake.client()));
        frontproxy::reconcile(Arc::new(object), ctx)
            .await
            .expect("not an error");
        fake.take_log()
    };
    assert_eq!(
        run().await,
        [root.clone(), EVENTS.into(), format!("PATCH {path}/status")]
    );
    let status = &fake.get(path)["status"];
    assert_eq!(status["phase"], "Degraded");
    let conditions = status["conditions"].as_array().expect("conditions");
    let references = conditions
        .iter()
        .find(|c| c["type"] == "ReferencesValid")
        .expect("condition");
    assert_eq!(references["status"], "False");
    assert!(
        references["message"]
            .as_str()
            .expect("message")
            .contains("gone")
    );
    assert_eq!(run().await, [root], "the same problem is reported once");
}

fn tls_secret_value(material: &TlsMaterial) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "data": material.to_secret_data()})
}

#[tokio::test]
async fn a_kubeconfig_owns_its_certificate_and_embeds_it() {
    let fake = FakeApi::default();
    let now = Timestamp::now();
    let client_ca =
        Authority::generate_root(&CertificateRequest::ca("client-ca"), now).expect("ca");
    let server_ca =
        Authority::generate_root(&CertificateRequest::ca("server-ca"), now).expect("ca");
    fake.put(
        &secret("root-rootshard-client-ca"),
        tls_secret_value(client_ca.material()),
    );
    fake.put(
        &secret("root-rootshard-server-ca"),
        tls_secret_value(server_ca.material()),
    );
    let roots = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/rootshards/root";
    fake.put(
        roots,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "RootShard",
            "metadata": {"name": "root", "namespace": "kcp", "uid": "u-r"},
            "spec": {"external": {"hostname": "kcp.example.com", "port": 443}, "etcd": {"endpoints": ["http://e:2379"]}}
        }),
    );
    let path = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/kubeconfigs/alice";
    fake.put(
        path,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "Kubeconfig",
            "metadata": {"name": "alice", "namespace": "kcp", "uid": "u-k", "generation": 1},
            "spec": {"target": {"rootShardRef": {"name": "root"}}, "username": "alice",
                     "validity": "24h", "secretRef": {"name": "alice-kubeconfig"}}
        }),
    );
    let run = || async {
        let object: kcp_operator::api::Kubeconfig =
            serde_json::from_value(fake.get(path)).expect("kubeconfig");
        let ctx = Arc::new(Context::new(fake.client()));
        kcp_operator::controller::kubeconfig::reconcile(Arc::new(object), ctx)
            .await
            .expect("reconciles");
        fake.take_log()
    };
    let cert = secret("alice-kubecfg-client");
    let output = secret("alice-kubeconfig");
    let mut expected = vec![format!("GET {roots}"), format!("GET {cert}")];
    expected.push(format!("GET {}", secret("root-rootshard-client-ca")));
    expected.push(format!("GET {}", secret("root-rootshard-server-ca")));
    expected.extend(apply(&cert));
    expected.extend(apply(&output));
    expected.push(format!("PATCH {path}/status"));
    assert_eq!(run().await, expected);

    for stored in [fake.get(&cert), fake.get(&output)] {
        assert_eq!(stored["metadata"]["ownerReferences"][0]["uid"], "u-k");
    }
    let data: BTreeMap<String, k8s_openapi::ByteString> =
        serde_json::from_value(fake.get(&cert)["data"].clone()).expect("data");
    let summary = kcp_operator::pki::inspect::summarize(
        &TlsMaterial::from_secret_data(&data)
            .expect("material")
            .cert_pem,
    )
    .expect("summary");
    assert_eq!(summary.common_name, "alice");
    // rcgen keeps one value per subject attribute, so only the last group survives for now
    // (see docs/operator.md, "Not yet built").
    assert!(
        summary
            .organizations
            .contains(&"kubeconfig:alice".to_owned())
    );
    assert_eq!(fake.get(path)["status"]["phase"], "Ready");

    let mut quiet = expected[..4].to_vec();
    quiet.push(format!("GET {output}"));
    assert_eq!(run().await, quiet, "a second pass only reads");
}
