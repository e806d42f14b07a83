//! Reconcile sequences against a mock API server (`tower_test::mock::pair`): every request the
//! controller sends is recorded as `METHOD path[?query]` and asserted in order, for create,
//! no-op, certificate rotation, deletion and a broken reference.
//!
//! The mock (`support`) keeps objects in memory as a real API server returns them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use kcp_operator::api::{CacheServer, FrontProxy};
use kcp_operator::controller::kcp::{Connector, Endpoint};
use kcp_operator::controller::{
    Context, cacheserver, finalizer, frontproxy, server, virtualworkspace,
};
use kcp_operator::pki::{Authority, CertificateRequest, TlsMaterial};
use serde_json::{Value, json};
use support::FakeApi;

const NS: &str = "/api/v1/namespaces/kcp";
const APPS: &str = "/apis/apps/v1/namespaces/kcp";
const EVENTS: &str = "POST /apis/events.k8s.io/v1/namespaces/kcp/events";
const APPLY: &str = "?&force=true&fieldManager=kcp-operator";
/// The query of every merge patch (status, finalizers): the operator names itself.
const MERGE: &str = "?&fieldManager=kcp-operator";

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

/// A missing certificate is read, then created (never applied over a concurrent creator's).
fn create_secret(path: &str) -> [String; 2] {
    [format!("GET {path}"), format!("POST {NS}/secrets{MERGE}")]
}

fn expected_create() -> Vec<String> {
    let mut expected = Vec::new();
    for path in cert_secrets() {
        expected.extend(create_secret(&path));
    }
    expected.extend(apply(&secret("c-cacheserver-client-kubeconfig")));
    expected.extend(apply(&format!("{NS}/services/c-cacheserver")));
    expected.extend(apply(&format!("{APPS}/deployments/c-cacheserver")));
    expected.push(EVENTS.into());
    expected.push(format!("PATCH {CACHE_PATH}/status{MERGE}"));
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

/// Upstream's CacheServer sample: an empty `spec:` (defaulted to `{}` by the CRD) runs with
/// defaults.
#[tokio::test]
async fn a_cache_server_with_an_empty_spec_runs_with_defaults() {
    let fake = FakeApi::default();
    let mut object = cache_server_value();
    object["spec"] = json!({});
    fake.put(CACHE_PATH, object);
    assert_eq!(reconcile_cache(&fake).await, expected_create());
    let deployment = fake.get(&format!("{APPS}/deployments/c-cacheserver"));
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .expect("image");
    assert!(image.starts_with("ghcr.io/kcp-rs/kcp:"), "{image}");
    assert_eq!(deployment["spec"]["replicas"], 1);
}

/// Two reconciles that both find the certificates missing (RootShard, Shard and FrontProxy
/// applied together) issue each one once: the loser of the create uses the winner's Secret.
#[tokio::test]
async fn concurrent_reconciles_issue_each_certificate_once() {
    let fake = FakeApi::default();
    fake.put(CACHE_PATH, cache_server_value());
    let run = || async {
        let object: CacheServer = serde_json::from_value(fake.get(CACHE_PATH)).expect("cache");
        let ctx = Arc::new(Context::new(fake.client()));
        cacheserver::reconcile(Arc::new(object), ctx).await
    };
    let (first, second) = tokio::join!(run(), run());
    first.expect("first reconciles");
    second.expect("second reconciles");
    let log = fake.take_log();
    let creates = log
        .iter()
        .filter(|entry| entry.starts_with(&format!("POST {NS}/secrets")))
        .count();
    assert!(
        creates > cert_secrets().len(),
        "the reconciles did not race for a certificate: {log:#?}"
    );
    for path in cert_secrets() {
        assert!(
            !log.contains(&format!("PATCH {path}{APPLY}")),
            "{path} was issued again over the stored one: {log:#?}"
        );
    }
    // The stored leaves are signed by the stored CA: the loser issued nothing of its own.
    let material = |name: &str| {
        let data: BTreeMap<String, k8s_openapi::ByteString> =
            serde_json::from_value(fake.get(&secret(name))["data"].clone()).expect("data");
        TlsMaterial::from_secret_data(&data).expect("material")
    };
    let ca = Authority::load(material("c-cacheserver-ca")).expect("CA");
    for leaf in ["c-cacheserver-server", "c-cacheserver-client"] {
        let pem = material(leaf).cert_pem;
        let (_, child) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM");
        let (_, parent) = x509_parser::pem::parse_x509_pem(ca.cert_pem().as_bytes()).expect("PEM");
        let child = child.parse_x509().expect("leaf");
        let parent = parent.parse_x509().expect("CA");
        child
            .verify_signature(Some(parent.public_key()))
            .unwrap_or_else(|error| panic!("{leaf} is not signed by the stored CA: {error}"));
    }
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
    expected.push(format!("PATCH {CACHE_PATH}/status{MERGE}"));
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
        [
            root.clone(),
            EVENTS.into(),
            format!("PATCH {path}/status{MERGE}")
        ]
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

/// A root shard with its client and server CAs and the operator's certificate (returned) that
/// connections into kcp use.
fn put_root_shard(fake: &FakeApi) -> TlsMaterial {
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
    let operator = client_ca
        .issue(
            &CertificateRequest::client("system:kcp-operator", vec!["system:kcp:admin".into()]),
            now,
        )
        .expect("certificate");
    fake.put(
        &secret("root-rootshard-kcp-operator"),
        tls_secret_value(&operator),
    );
    fake.put(
        ROOT_PATH,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "RootShard",
            "metadata": {"name": "root", "namespace": "kcp", "uid": "u-r"},
            "spec": {"external": {"hostname": "kcp.example.com", "port": 443}, "etcd": {"endpoints": ["http://e:2379"]}}
        }),
    );
    operator
}

const KUBECONFIG_PATH: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/kubeconfigs/alice";

#[tokio::test]
async fn a_kubeconfig_owns_its_certificate_and_embeds_it() {
    let fake = FakeApi::default();
    put_root_shard(&fake);
    let roots = ROOT_PATH;
    let path = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/kubeconfigs/alice";
    fake.put(
        path,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "Kubeconfig",
            "metadata": {"name": "alice", "namespace": "kcp", "uid": "u-k", "generation": 1},
            "spec": {"target": {"rootShardRef": {"name": "root"}}, "username": "alice",
                     "groups": ["team-a", "system:auditors"],
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
    expected.push(format!("POST {NS}/secrets{MERGE}"));
    expected.push(format!("GET {}", secret("root-rootshard-server-ca")));
    expected.extend(apply(&output));
    expected.push(format!("PATCH {path}/status{MERGE}"));
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
    assert_eq!(
        summary.organizations,
        ["kubeconfig:alice", "system:auditors", "team-a"]
    );
    assert_eq!(fake.get(path)["status"]["phase"], "Ready");

    let mut quiet = expected[..3].to_vec();
    quiet.push(format!("GET {}", secret("root-rootshard-server-ca")));
    quiet.push(format!("GET {output}"));
    assert_eq!(run().await, quiet, "a second pass only reads");
}

const ROOT_PATH: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/rootshards/root";

fn condition(type_: &str, status: &str, reason: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "",
           "lastTransitionTime": "2030-01-01T00:00:00Z"})
}

/// A root shard at v1 whose spec asks for v2, using cache server `c`.
fn upgrading_root_shard() -> Value {
    json!({
        "apiVersion": "operator.kcp.io/v1alpha1", "kind": "RootShard",
        "metadata": {"name": "root", "namespace": "kcp", "uid": "u-r", "generation": 2},
        "spec": {"external": {"hostname": "kcp.example.com", "port": 443},
                 "etcd": {"endpoints": ["http://e:2379"]},
                 "cache": {"ref": {"name": "c"}},
                 "image": {"tag": "v2"}},
        "status": {"phase": "Running", "observedGeneration": 1, "currentVersion": "v1",
                   "targetVersion": "v1",
                   "conditions": [condition("Available", "True", "ReplicasUp")]}
    })
}

fn cache_server_at(current: &str, observed_generation: i64) -> Value {
    let mut cache = cache_server_value();
    cache["metadata"]["generation"] = json!(2);
    cache["spec"]["image"]["tag"] = json!("v2");
    cache["status"] = json!({
        "observedGeneration": observed_generation, "currentVersion": current, "targetVersion": "v2",
        "conditions": [condition("Available", "True", "ReplicasUp"),
                       condition("Progressing", "False", "RolledOut")]
    });
    cache
}

fn condition_of(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == type_)
        .expect("condition")
        .clone()
}

async fn reconcile_root(fake: &FakeApi) {
    // What the cache server's controller wrote and the root shard mounts.
    for name in [
        "c-cacheserver-client-kubeconfig",
        "c-cacheserver-client",
        "c-cacheserver-ca",
    ] {
        fake.put(
            &secret(name),
            json!({"apiVersion": "v1", "kind": "Secret", "data": {"x": "eA=="}}),
        );
    }
    let object: kcp_operator::api::RootShard =
        serde_json::from_value(fake.get(ROOT_PATH)).expect("root shard");
    let ctx = Arc::new(Context::new(fake.client()));
    kcp_operator::controller::server::reconcile_root_shard(Arc::new(object), ctx)
        .await
        .expect("reconciles");
}

fn root_image(fake: &FakeApi) -> String {
    let deployment = fake.get(&format!("{APPS}/deployments/root-rootshard"));
    deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .expect("image")
        .to_owned()
}

#[tokio::test]
async fn a_root_shard_upgrade_waits_until_its_cache_server_is_rolled_out() {
    let fake = FakeApi::default();
    fake.put(ROOT_PATH, upgrading_root_shard());
    // The cache server's status still describes its previous generation.
    fake.put(CACHE_PATH, cache_server_at("v1", 1));
    reconcile_root(&fake).await;
    let log = fake.take_log();
    assert!(log.contains(&format!("GET {CACHE_PATH}")), "{log:?}");
    assert_eq!(
        root_image(&fake),
        "ghcr.io/kcp-rs/kcp:v1",
        "held back at v1"
    );
    let status = &fake.get(ROOT_PATH)["status"];
    assert_eq!(status["currentVersion"], "v1");
    assert_eq!(status["targetVersion"], "v2");
    let progressing = condition_of(status, "Progressing");
    assert_eq!(progressing["reason"], "Upgrading");
    assert!(
        progressing["message"]
            .as_str()
            .expect("message")
            .contains("CacheServer/c"),
        "{progressing}"
    );

    // Once the cache server reports v2 rolled out, the root shard moves on.
    fake.put(CACHE_PATH, cache_server_at("v2", 2));
    reconcile_root(&fake).await;
    assert_eq!(root_image(&fake), "ghcr.io/kcp-rs/kcp:v2");
    let status = &fake.get(ROOT_PATH)["status"];
    assert_eq!(
        status["currentVersion"], "v1",
        "until the Deployment is rolled out"
    );
    assert_eq!(status["targetVersion"], "v2");
}

/// A `cache.ref` naming no CacheServer is a condition naming it (not pods waiting silently for
/// the cache's Secrets); created, the CacheServer lets the root shard render (kcp-operator#205).
#[tokio::test]
async fn a_missing_cache_server_is_a_condition_until_it_exists() {
    let fake = FakeApi::default();
    let mut root = upgrading_root_shard();
    root["spec"]["image"]["tag"] = json!("v1");
    fake.put(ROOT_PATH, root);
    reconcile_root(&fake).await;
    let status = &fake.get(ROOT_PATH)["status"];
    assert_eq!(status["phase"], "Degraded", "{status}");
    let references = condition_of(status, "ReferencesValid");
    assert_eq!(references["status"], "False");
    assert_eq!(references["reason"], "ReferenceNotFound");
    let message = references["message"].as_str().expect("message");
    assert!(
        message.contains("CacheServer") && message.contains('c'),
        "{message}"
    );
    let deployment = format!("{APPS}/deployments/root-rootshard");
    let rendered = |fake: &FakeApi| fake.objects.lock().expect("lock").contains_key(&deployment);
    assert!(!rendered(&fake), "rendered without its cache");

    fake.put(CACHE_PATH, cache_server_at("v1", 1));
    reconcile_root(&fake).await;
    assert!(rendered(&fake), "not rendered once the cache exists");
    let status = &fake.get(ROOT_PATH)["status"];
    assert_eq!(
        condition_of(status, "ReferencesValid")["status"],
        "True",
        "{status}"
    );
}

#[tokio::test]
async fn a_stuck_cache_server_rollout_blocks_the_root_shard() {
    let fake = FakeApi::default();
    fake.put(ROOT_PATH, upgrading_root_shard());
    let mut cache = cache_server_at("v1", 2);
    cache["status"]["conditions"][1] = json!({"type": "Progressing", "status": "False",
        "reason": "RolloutFailed", "message": "ReplicaSet has timed out progressing",
        "lastTransitionTime": "2030-01-01T00:00:00Z"});
    fake.put(CACHE_PATH, cache);
    reconcile_root(&fake).await;
    assert_eq!(root_image(&fake), "ghcr.io/kcp-rs/kcp:v1");
    let status = &fake.get(ROOT_PATH)["status"];
    let progressing = condition_of(status, "Progressing");
    assert_eq!(progressing["status"], "False");
    assert_eq!(progressing["reason"], "UpgradeBlocked");
    assert!(
        progressing["message"]
            .as_str()
            .expect("message")
            .contains("timed out progressing")
    );
}

/// Hands out clients of a fake kcp and records the endpoints asked for.
struct FakeKcp {
    api: FakeApi,
    endpoints: Mutex<Vec<Endpoint>>,
}

impl Connector for FakeKcp {
    fn connect(
        &self,
        endpoint: &Endpoint,
    ) -> Result<kube::Client, kcp_operator::controller::Error> {
        self.endpoints.lock().expect("lock").push(endpoint.clone());
        Ok(self.api.client())
    }
}

const SHARD_PATH: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/shards/s";
const KCP_SHARD: &str = "/apis/core.kcp.io/v1alpha1/shards/s";

fn shard_value() -> Value {
    json!({
        "apiVersion": "operator.kcp.io/v1alpha1", "kind": "Shard",
        "metadata": {"name": "s", "namespace": "kcp", "uid": "u-s", "generation": 1,
                     "resourceVersion": "7"},
        "spec": {"rootShard": {"ref": {"name": "root"}}, "etcd": {"endpoints": ["http://e:2379"]}}
    })
}

/// A host API, a kcp API behind the connector, and a context using both.
struct Scene {
    host: FakeApi,
    kcp: Arc<FakeKcp>,
    ctx: Arc<Context>,
}

impl Scene {
    fn new() -> Self {
        let host = FakeApi::default();
        let kcp = Arc::new(FakeKcp {
            api: FakeApi::default(),
            endpoints: Mutex::new(Vec::new()),
        });
        let ctx = Arc::new(Context::new(host.client()).with_connector(kcp.clone()));
        Self { host, kcp, ctx }
    }

    async fn reconcile(&self) -> Result<(), kcp_operator::controller::Error> {
        let object: kcp_operator::api::Shard =
            serde_json::from_value(self.host.get(SHARD_PATH)).expect("shard");
        server::reconcile_shard(Arc::new(object), self.ctx.clone())
            .await
            .map(|_| ())
    }

    fn delete_shard(&self) {
        let mut shard = self.host.get(SHARD_PATH);
        shard["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
        self.host.put(SHARD_PATH, shard);
    }

    fn finalizers(&self) -> Value {
        self.host.get(SHARD_PATH)["metadata"]["finalizers"].clone()
    }
}

/// kcp's registration of shard `s`, holding `logical_clusters` (a non-root shard holds no root).
fn registration(logical_clusters: u64) -> Value {
    json!({"apiVersion": "core.kcp.io/v1alpha1", "kind": "Shard",
           "metadata": {"name": "s"},
           "status": {"capacity": {"logicalClusters": logical_clusters}}})
}

#[tokio::test]
async fn a_deleted_shard_is_deregistered_from_its_root_shard_before_it_goes() {
    let scene = Scene::new();
    scene.host.put(SHARD_PATH, shard_value());
    scene.reconcile().await.expect("reconciles");
    let log = scene.host.take_log();
    assert_eq!(
        log[0],
        format!("PATCH {SHARD_PATH}{MERGE}"),
        "the finalizer goes on first"
    );
    assert_eq!(scene.finalizers(), json!(["operator.kcp.io/cleanup-shard"]));
    let body = scene.host.body_of(&log[0]);
    assert_eq!(body["metadata"]["resourceVersion"], "7");

    let operator = put_root_shard(&scene.host);
    // No workspaces: nothing to wait for.
    scene.kcp.api.put(KCP_SHARD, registration(0));
    scene.delete_shard();
    scene.reconcile().await.expect("deregisters");
    assert_eq!(
        scene.host.take_log(),
        [
            format!("GET {ROOT_PATH}"),
            format!("GET {}", secret("root-rootshard-server-ca")),
            format!("GET {}", secret("root-rootshard-kcp-operator")),
            EVENTS.into(),
            format!("PATCH {SHARD_PATH}{MERGE}"),
        ]
    );
    assert_eq!(
        scene.kcp.api.take_log(),
        [format!("GET {KCP_SHARD}"), format!("DELETE {KCP_SHARD}")]
    );
    let endpoint = scene.kcp.endpoints.lock().expect("lock")[0].clone();
    assert_eq!(
        endpoint.url,
        "https://root-rootshard.kcp.svc.cluster.local:6443/clusters/root"
    );
    assert_eq!(endpoint.cert_pem, operator.cert_pem);
    assert_eq!(scene.host.body_of(EVENTS)["reason"], "Deregistered");
    assert_eq!(scene.finalizers(), json!([]));
}

fn deleting_condition(scene: &Scene) -> Value {
    let shard = scene.host.get(SHARD_PATH);
    condition_of(&shard["status"], "Deleting")
}

#[tokio::test]
async fn a_shard_that_holds_workspaces_waits_with_a_condition_naming_the_count() {
    let scene = Scene::new();
    let mut shard = shard_value();
    shard["metadata"]["finalizers"] = json!(["operator.kcp.io/cleanup-shard"]);
    shard["status"] = json!({"conditions": [condition("Available", "True", "ReplicasUp")]});
    scene.host.put(SHARD_PATH, shard);
    put_root_shard(&scene.host);
    // Two workspaces.
    scene.kcp.api.put(KCP_SHARD, registration(2));
    scene.delete_shard();
    scene.reconcile().await.expect("waits");
    assert_eq!(scene.kcp.api.take_log(), [format!("GET {KCP_SHARD}")]);
    assert_eq!(scene.finalizers(), json!(["operator.kcp.io/cleanup-shard"]));
    let deleting = deleting_condition(&scene);
    assert_eq!(deleting["status"], "True");
    assert_eq!(deleting["reason"], "LogicalClustersRemain");
    let message = deleting["message"].as_str().expect("message");
    assert!(message.contains("2 logical clusters"), "{message}");
    assert!(
        message.contains("operator.kcp.io/force-delete"),
        "{message}"
    );
    let shard = scene.host.get(SHARD_PATH);
    assert_eq!(
        condition_of(&shard["status"], "Available")["status"],
        "True",
        "the other conditions are kept"
    );

    // Nothing changed: the condition is not written again.
    scene.host.take_log();
    scene.reconcile().await.expect("still waits");
    assert!(
        writes(scene.host.take_log()).is_empty(),
        "an unchanged wait writes nothing"
    );

    // One workspace deleted: the count follows.
    scene.kcp.api.put(KCP_SHARD, registration(1));
    scene.reconcile().await.expect("still waits");
    let message = deleting_condition(&scene)["message"].clone();
    assert!(
        message
            .as_str()
            .expect("message")
            .contains("1 logical cluster "),
        "{message}"
    );

    // The last one deleted: deregistered, released.
    scene.kcp.api.take_log();
    scene.kcp.api.put(KCP_SHARD, registration(0));
    scene.reconcile().await.expect("deregisters");
    assert_eq!(
        scene.kcp.api.take_log(),
        [format!("GET {KCP_SHARD}"), format!("DELETE {KCP_SHARD}")]
    );
    assert_eq!(scene.host.body_of(EVENTS)["reason"], "Deregistered");
    assert_eq!(scene.finalizers(), json!([]));
}

fn force_delete(scene: &Scene) {
    let mut shard = scene.host.get(SHARD_PATH);
    shard["metadata"]["annotations"] = json!({"operator.kcp.io/force-delete": "true"});
    scene.host.put(SHARD_PATH, shard);
}

#[tokio::test]
async fn force_delete_deregisters_a_shard_that_holds_workspaces_at_once() {
    let scene = Scene::new();
    let mut shard = shard_value();
    shard["metadata"]["finalizers"] = json!(["operator.kcp.io/cleanup-shard"]);
    scene.host.put(SHARD_PATH, shard);
    put_root_shard(&scene.host);
    scene.kcp.api.put(KCP_SHARD, registration(2));
    scene.delete_shard();
    force_delete(&scene);
    scene.reconcile().await.expect("deregisters");
    assert_eq!(scene.kcp.api.take_log(), [format!("DELETE {KCP_SHARD}")]);
    assert_eq!(scene.host.body_of(EVENTS)["reason"], "Deregistered");
    assert_eq!(scene.finalizers(), json!([]));
}

#[tokio::test]
async fn an_unreachable_root_shard_keeps_the_shard_until_force_delete_and_its_attempts() {
    let scene = Scene::new();
    let mut shard = shard_value();
    shard["metadata"]["finalizers"] = json!(["operator.kcp.io/cleanup-shard"]);
    scene.host.put(SHARD_PATH, shard);
    put_root_shard(&scene.host);
    scene
        .kcp
        .api
        .unavailable
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let key = "Shard/kcp/s";
    scene.delete_shard();
    // More failures than the Kubeconfig's limit: a Shard is never given up on its own, since
    // that would orphan whatever it still holds.
    for _ in 0..=finalizer::MAX_ATTEMPTS + 1 {
        let error = scene.reconcile().await.expect_err("kcp is unavailable");
        assert_eq!(error.reason(), "KcpRequestFailed");
        // What the controller's error policy does after a failed reconcile.
        scene.ctx.backoff.retry(key);
        assert_eq!(scene.finalizers(), json!(["operator.kcp.io/cleanup-shard"]));
    }
    // Forced, it is best effort: the Kubeconfig's number of attempts, counted from here.
    force_delete(&scene);
    scene.kcp.api.take_log();
    for _ in 1..finalizer::MAX_ATTEMPTS {
        let error = scene.reconcile().await.expect_err("kcp is unavailable");
        assert_eq!(error.reason(), "KcpRequestFailed");
        scene.ctx.backoff.retry(key);
        assert_eq!(scene.finalizers(), json!(["operator.kcp.io/cleanup-shard"]));
    }
    scene.reconcile().await.expect("gives up");
    assert_eq!(
        scene.kcp.api.take_log(),
        vec![format!("DELETE {KCP_SHARD}"); finalizer::MAX_ATTEMPTS as usize],
        "forced: no capacity read, one DELETE per attempt"
    );
    let event = scene.host.body_of(EVENTS);
    assert_eq!(event["reason"], "CleanupAbandoned");
    assert_eq!(event["type"], "Warning");
    assert_eq!(scene.finalizers(), json!([]));
}

#[tokio::test]
async fn a_shard_whose_root_shard_is_gone_is_released_at_once() {
    let scene = Scene::new();
    let mut shard = shard_value();
    shard["metadata"]["finalizers"] = json!(["operator.kcp.io/cleanup-shard"]);
    scene.host.put(SHARD_PATH, shard);
    scene.delete_shard();
    scene.reconcile().await.expect("releases");
    assert_eq!(
        scene.host.take_log(),
        [
            format!("GET {ROOT_PATH}"),
            EVENTS.into(),
            format!("PATCH {SHARD_PATH}{MERGE}")
        ]
    );
    assert_eq!(scene.host.body_of(EVENTS)["reason"], "RootShardGone");
    assert_eq!(scene.finalizers(), json!([]));
    assert!(scene.kcp.api.take_log().is_empty());
}

const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";

fn binding(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name, "labels": {"operator.kcp.io/kubeconfig": uid}},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}})
}

/// The Kubeconfig `alice` for `target`, binding `roles` inside kcp.
fn alice(target: Value, roles: &[&str]) -> Value {
    json!({
        "apiVersion": "operator.kcp.io/v1alpha1", "kind": "Kubeconfig",
        "metadata": {"name": "alice", "namespace": "kcp", "uid": "u-k", "generation": 1},
        "spec": {"target": target, "username": "alice",
                 "validity": "24h", "secretRef": {"name": "alice-kubeconfig"},
                 "authorization": {"clusterRoleBindings": {"clusterRoles": roles}}}
    })
}

#[tokio::test]
async fn kubeconfig_bindings_are_created_in_kcp_and_removed_with_the_kubeconfig() {
    let scene = Scene::new();
    put_root_shard(&scene.host);
    let mut kubeconfig = alice(json!({"rootShardRef": {"name": "root"}}), &["view", "edit"]);
    kubeconfig["spec"]["targetWorkspace"] = json!("root:team");
    scene.host.put(KUBECONFIG_PATH, kubeconfig);
    // A binding this Kubeconfig made for a role it no longer wants, and somebody else's.
    scene.kcp.api.put(
        &format!("{BINDINGS}/u-k:admin"),
        binding("u-k:admin", "u-k"),
    );
    scene
        .kcp
        .api
        .put(&format!("{BINDINGS}/other"), binding("other", "u-other"));
    let run = || async {
        let object: kcp_operator::api::Kubeconfig =
            serde_json::from_value(scene.host.get(KUBECONFIG_PATH)).expect("kubeconfig");
        kcp_operator::controller::kubeconfig::reconcile(Arc::new(object), scene.ctx.clone())
            .await
            .expect("reconciles");
    };
    run().await;
    assert_eq!(
        scene.host.take_log()[0],
        format!("PATCH {KUBECONFIG_PATH}{MERGE}"),
        "the finalizer goes on first"
    );
    assert_eq!(
        scene.host.get(KUBECONFIG_PATH)["metadata"]["finalizers"],
        json!(["operator.kcp.io/cleanup-rbac"])
    );
    assert_eq!(
        scene.kcp.api.take_log(),
        [
            format!("GET {BINDINGS}?&labelSelector=operator.kcp.io%2Fkubeconfig%3Du-k"),
            format!("PATCH {BINDINGS}/u-k:edit{APPLY}"),
            format!("PATCH {BINDINGS}/u-k:view{APPLY}"),
            format!("DELETE {BINDINGS}/u-k:admin"),
        ]
    );
    let endpoint = scene.kcp.endpoints.lock().expect("lock")[0].clone();
    assert_eq!(
        endpoint.url,
        "https://root-rootshard.kcp.svc.cluster.local:6443/clusters/root:team"
    );
    let view = scene.kcp.api.get(&format!("{BINDINGS}/u-k:view"));
    assert_eq!(view["subjects"][0]["name"], "kubeconfig:alice");
    assert_eq!(view["roleRef"]["name"], "view");
    let status = &scene.host.get(KUBECONFIG_PATH)["status"];
    assert_eq!(status["authorization"]["provisionedCluster"], "root:team");

    run().await;
    assert_eq!(
        scene.kcp.api.take_log(),
        [format!(
            "GET {BINDINGS}?&labelSelector=operator.kcp.io%2Fkubeconfig%3Du-k"
        )],
        "a second pass only lists"
    );

    let mut object = scene.host.get(KUBECONFIG_PATH);
    object["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    scene.host.put(KUBECONFIG_PATH, object);
    scene.host.take_log();
    run().await;
    assert_eq!(
        scene.kcp.api.take_log(),
        [
            format!("GET {BINDINGS}?&labelSelector=operator.kcp.io%2Fkubeconfig%3Du-k"),
            format!("DELETE {BINDINGS}/u-k:edit"),
            format!("DELETE {BINDINGS}/u-k:view"),
        ]
    );
    assert_eq!(scene.host.body_of(EVENTS)["reason"], "BindingsRemoved");
    assert_eq!(
        scene.host.get(KUBECONFIG_PATH)["metadata"]["finalizers"],
        json!([])
    );
    scene.kcp.api.get(&format!("{BINDINGS}/other"));
}

/// The requests in `log` that write (anything but a read).
fn writes(log: Vec<String>) -> Vec<String> {
    log.into_iter()
        .filter(|entry| !entry.starts_with("GET "))
        .collect()
}

const FRONT_PROXY_PATH: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/frontproxies/f";

/// The Kubeconfig's cleanup gets its 5 attempts however many reconciles failed before it was
/// deleted (earlier, one cleanup attempt after unrelated failures gave the finalizer up).
#[tokio::test]
async fn a_kubeconfig_cleanup_gets_all_its_attempts_after_earlier_failures() {
    let scene = Scene::new();
    put_root_shard(&scene.host);
    let mut kubeconfig = alice(json!({"rootShardRef": {"name": "root"}}), &["view"]);
    kubeconfig["metadata"]["finalizers"] = json!(["operator.kcp.io/cleanup-rbac"]);
    scene.host.put(KUBECONFIG_PATH, kubeconfig);
    scene
        .kcp
        .api
        .unavailable
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let key = "Kubeconfig/kcp/alice";
    let run = || async {
        let object: kcp_operator::api::Kubeconfig =
            serde_json::from_value(scene.host.get(KUBECONFIG_PATH)).expect("kubeconfig");
        kcp_operator::controller::kubeconfig::reconcile(Arc::new(object), scene.ctx.clone()).await
    };
    // Reconciles that fail while kcp is down, before anybody deletes the Kubeconfig.
    for _ in 0..finalizer::MAX_ATTEMPTS {
        run().await.expect_err("kcp is unavailable");
        scene.ctx.backoff.retry(key);
    }
    let mut deleted = scene.host.get(KUBECONFIG_PATH);
    deleted["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    scene.host.put(KUBECONFIG_PATH, deleted);
    for attempt in 1..finalizer::MAX_ATTEMPTS {
        run().await.expect_err("the cleanup fails");
        scene.ctx.backoff.retry(key);
        assert_eq!(
            scene.host.get(KUBECONFIG_PATH)["metadata"]["finalizers"],
            json!(["operator.kcp.io/cleanup-rbac"]),
            "given up after {attempt} cleanup attempts"
        );
    }
    run().await.expect("gives up");
    assert_eq!(scene.host.body_of(EVENTS)["reason"], "CleanupAbandoned");
    assert_eq!(
        scene.host.get(KUBECONFIG_PATH)["metadata"]["finalizers"],
        json!([])
    );
}

/// A scene with one object of every kind: a CacheServer, a RootShard, a Shard, a FrontProxy
/// with two replicas (a PDB) and a Kubeconfig for it with bindings in kcp.
fn every_kind() -> Scene {
    let scene = Scene::new();
    put_root_shard(&scene.host);
    scene.host.put(CACHE_PATH, cache_server_value());
    scene.host.put(SHARD_PATH, shard_value());
    scene.host.put(
        FRONT_PROXY_PATH,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "FrontProxy",
            "metadata": {"name": "f", "namespace": "kcp", "uid": "u-f", "generation": 1},
            "spec": {"rootShard": {"ref": {"name": "root"}}, "replicas": 2}
        }),
    );
    scene.host.put(
        KUBECONFIG_PATH,
        alice(json!({"frontProxyRef": {"name": "f"}}), &["view"]),
    );
    scene.host.put(
        VIRTUAL_WORKSPACE_PATH,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "VirtualWorkspace",
            "metadata": {"name": "vw", "namespace": "kcp", "uid": "u-vw", "generation": 1},
            "spec": {"target": {"shardRef": {"name": "s"}}, "external": {"hostname": "vw.example.com", "port": 443}}
        }),
    );
    scene
}

const VIRTUAL_WORKSPACE_PATH: &str =
    "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/virtualworkspaces/vw";

const KINDS: [&str; 6] = [
    "CacheServer",
    "RootShard",
    "Shard",
    "FrontProxy",
    "Kubeconfig",
    "VirtualWorkspace",
];

/// Runs the reconciler of `kind` on its object in `scene`.
async fn reconcile_kind(scene: &Scene, kind: &str) -> Result<(), kcp_operator::controller::Error> {
    let ctx = scene.ctx.clone();
    let stored = |path: &str| scene.host.get(path);
    match kind {
        "CacheServer" => {
            let object = serde_json::from_value(stored(CACHE_PATH)).expect(kind);
            cacheserver::reconcile(Arc::new(object), ctx).await
        }
        "RootShard" => {
            let object = serde_json::from_value(stored(ROOT_PATH)).expect(kind);
            server::reconcile_root_shard(Arc::new(object), ctx).await
        }
        "Shard" => {
            let object = serde_json::from_value(stored(SHARD_PATH)).expect(kind);
            server::reconcile_shard(Arc::new(object), ctx).await
        }
        "FrontProxy" => {
            let object = serde_json::from_value(stored(FRONT_PROXY_PATH)).expect(kind);
            frontproxy::reconcile(Arc::new(object), ctx).await
        }
        "VirtualWorkspace" => {
            let object = serde_json::from_value(stored(VIRTUAL_WORKSPACE_PATH)).expect(kind);
            virtualworkspace::reconcile(Arc::new(object), ctx).await
        }
        _ => {
            let object = serde_json::from_value(stored(KUBECONFIG_PATH)).expect(kind);
            kcp_operator::controller::kubeconfig::reconcile(Arc::new(object), ctx).await
        }
    }
    .map(|_| ())
}

/// Reconciles every kind twice against a server that stores what it is given as a real one
/// does (`support::as_stored`): the second pass of each kind must write nothing, in the host
/// cluster or in kcp.
#[tokio::test]
async fn nothing_changed_means_no_write_for_every_kind() {
    let scene = every_kind();
    for kind in KINDS {
        for pass in ["first", "second"] {
            reconcile_kind(&scene, kind)
                .await
                .unwrap_or_else(|error| panic!("{kind} ({pass} pass): {error}"));
            let host = writes(scene.host.take_log());
            let kcp = writes(scene.kcp.api.take_log());
            if pass == "first" {
                assert!(!host.is_empty(), "{kind} created nothing");
            } else {
                assert_eq!(host, Vec::<String>::new(), "{kind} wrote to the host again");
                assert_eq!(kcp, Vec::<String>::new(), "{kind} wrote to kcp again");
            }
        }
    }
}

/// Everything the reconcilers of every kind write (children, Secrets, Events, bindings in kcp)
/// is a valid object of its k8s-openapi type (a round trip through the type keeps every field)
/// within kube's limits (names, labels, annotations, Event notes).
#[tokio::test]
async fn every_written_object_is_valid_for_kubernetes() {
    let scene = every_kind();
    for kind in KINDS {
        reconcile_kind(&scene, kind)
            .await
            .unwrap_or_else(|error| panic!("{kind}: {error}"));
    }
    let mut checked = BTreeMap::new();
    for api in [&scene.host, &scene.kcp.api] {
        let objects = api.objects.lock().expect("lock").clone();
        for (path, object) in objects {
            if let Some(kind) = support::limits::check(&path, &object) {
                *checked.entry(kind).or_insert(0) += 1;
            }
        }
    }
    for kind in [
        "Secret",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "Event",
        "ClusterRoleBinding",
    ] {
        assert!(
            checked.contains_key(kind),
            "no {kind} was written: {checked:?}"
        );
    }
}

/// Every component reports where it is reached; the RootShard lists the Shards that reference
/// it, the FrontProxy the shards it routes to (root included), and both lists follow a Shard
/// that goes.
#[tokio::test]
async fn statuses_show_endpoints_and_the_shards() {
    let scene = every_kind();
    for kind in KINDS {
        reconcile_kind(&scene, kind)
            .await
            .unwrap_or_else(|error| panic!("{kind}: {error}"));
    }
    let status = |path: &str| scene.host.get(path)["status"].clone();
    let root_url = "https://root-rootshard.kcp.svc.cluster.local:6443";
    let shard_url = "https://s-shard.kcp.svc.cluster.local:6443";
    assert_eq!(
        status(ROOT_PATH)["endpoints"]["internal"],
        root_url,
        "{}",
        status(ROOT_PATH)
    );
    assert_eq!(status(SHARD_PATH)["endpoints"]["internal"], shard_url);
    let shard_conditions = status(SHARD_PATH)["conditions"].clone();
    assert!(
        shard_conditions.as_array().into_iter().flatten().any(|c| {
            c["type"] == "CacheShared" && c["status"] == "True" && c["reason"] == "SameAsRootShard"
        }),
        "a Shard without cache.ref shares its root shard's cache: {shard_conditions}"
    );
    assert_eq!(
        status(SHARD_PATH)["endpoints"]["external"],
        status(ROOT_PATH)["endpoints"]["external"],
        "a shard's external URL is its root shard's"
    );
    assert_eq!(
        status(CACHE_PATH)["endpoints"],
        json!({"internal": "https://c-cacheserver.kcp.svc.cluster.local:6443"})
    );
    let proxy = status(FRONT_PROXY_PATH);
    assert!(
        proxy["endpoints"]["internal"]
            .as_str()
            .expect("internal")
            .starts_with("https://f-frontproxy.kcp.svc.cluster.local:"),
        "{proxy}"
    );
    assert!(proxy["endpoints"]["external"].is_string(), "{proxy}");
    assert_eq!(
        status(ROOT_PATH)["shards"],
        json!([{"name": "s", "url": shard_url}])
    );
    assert_eq!(
        proxy["shards"],
        json!([{"name": "root", "url": root_url}, {"name": "s", "url": shard_url}])
    );
    // The scene's etcd (`http://e:2379`) answers no TCP connect while the Deployment is not
    // rolled out: the component status next to the list says so.
    assert_eq!(
        status(ROOT_PATH)["phase"],
        "Degraded",
        "the component status is kept next to the list"
    );
    let conditions = status(ROOT_PATH)["conditions"].clone();
    let available = conditions
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available")
        .expect("an Available condition");
    assert_eq!(available["reason"], "EtcdUnreachable", "{conditions}");
    assert!(
        available["message"]
            .as_str()
            .is_some_and(|m| m.contains("http://e:2379")),
        "{conditions}"
    );

    scene.host.objects.lock().expect("lock").remove(SHARD_PATH);
    for kind in ["RootShard", "FrontProxy"] {
        reconcile_kind(&scene, kind)
            .await
            .unwrap_or_else(|error| panic!("{kind}: {error}"));
    }
    assert_eq!(status(ROOT_PATH)["shards"], json!([]));
    assert_eq!(
        status(FRONT_PROXY_PATH)["shards"],
        json!([{"name": "root", "url": root_url}])
    );
}
