//! VirtualWorkspace reconciles against the mock API server (`support`): a missing target is a
//! condition, a resolvable one issues the certificates from the root shard's CAs and applies the
//! workload once; nothing changed means nothing written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use jiff::Timestamp;
use kcp_operator::api::VirtualWorkspace;
use kcp_operator::controller::{Context, virtualworkspace};
use kcp_operator::pki::{Authority, CertificateRequest};
use serde_json::{Value, json};
use support::FakeApi;

const NS: &str = "/api/v1/namespaces/kcp";
const OPERATOR: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp";
const VW_PATH: &str = "/apis/operator.kcp.io/v1alpha1/namespaces/kcp/virtualworkspaces/vw";

fn put_vw(fake: &FakeApi, target: Value) {
    fake.put(
        VW_PATH,
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1",
            "kind": "VirtualWorkspace",
            "metadata": {"name": "vw", "namespace": "kcp", "uid": "u-vw", "generation": 1},
            "spec": {"target": target, "external": {"hostname": "vw.example.com", "port": 443}}
        }),
    );
}

/// The RootShard `root` with its client, server and requestheader client CAs.
fn put_root_shard(fake: &FakeApi) {
    let now = Timestamp::now();
    for ca in ["client-ca", "server-ca", "requestheader-client-ca"] {
        let authority = Authority::generate_root(&CertificateRequest::ca(ca), now).expect("ca");
        fake.put(
            &format!("{NS}/secrets/root-rootshard-{ca}"),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                   "data": authority.material().to_secret_data()}),
        );
    }
    fake.put(
        &format!("{OPERATOR}/rootshards/root"),
        json!({
            "apiVersion": "operator.kcp.io/v1alpha1", "kind": "RootShard",
            "metadata": {"name": "root", "namespace": "kcp", "uid": "u-r"},
            "spec": {"external": {"hostname": "kcp.example.com", "port": 443}, "etcd": {"endpoints": ["http://e:2379"]}}
        }),
    );
}

async fn reconcile(fake: &FakeApi) -> Vec<String> {
    let object: VirtualWorkspace =
        serde_json::from_value(fake.get(VW_PATH)).expect("virtual workspace");
    let ctx = Arc::new(Context::new(fake.client()));
    virtualworkspace::reconcile(Arc::new(object), ctx)
        .await
        .expect("reconciles");
    fake.take_log()
}

fn writes(log: &[String]) -> Vec<&String> {
    log.iter()
        .filter(|entry| !entry.starts_with("GET "))
        .collect()
}

#[tokio::test]
async fn a_missing_shard_is_a_condition_naming_it() {
    let fake = FakeApi::default();
    put_vw(&fake, json!({"shardRef": {"name": "gone"}}));
    let log = reconcile(&fake).await;
    assert_eq!(log[0], format!("GET {OPERATOR}/shards/gone"));
    let status = &fake.get(VW_PATH)["status"];
    assert_eq!(status["phase"], "Degraded");
    let references = status["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "ReferencesValid")
        .expect("condition")
        .clone();
    assert_eq!(references["status"], "False");
    assert!(
        references["message"]
            .as_str()
            .expect("message")
            .contains("Shard \"gone\""),
        "{references}"
    );
}

#[tokio::test]
async fn a_root_shard_target_gets_certificates_and_a_workload_once() {
    let fake = FakeApi::default();
    put_root_shard(&fake);
    put_vw(&fake, json!({"rootShardRef": {"name": "root"}}));
    let log = reconcile(&fake).await;
    assert_eq!(
        fake.body_of("POST /apis/events.k8s.io/v1/namespaces/kcp/events")["reason"],
        "Created"
    );
    for object in [
        format!("{NS}/secrets/vw-virtualworkspace-server"),
        format!("{NS}/secrets/vw-virtualworkspace-client"),
        format!("{NS}/secrets/vw-virtualworkspace-client-kubeconfig"),
        format!("{NS}/services/vw-virtualworkspace"),
        "/apis/apps/v1/namespaces/kcp/deployments/vw-virtualworkspace".to_owned(),
        "/apis/policy/v1/namespaces/kcp/poddisruptionbudgets/vw-virtualworkspace".to_owned(),
    ] {
        let stored = fake.get(&object);
        assert!(
            support::limits::check(&object, &stored).is_some(),
            "{object} not written or not checked; log: {log:#?}"
        );
    }
    let deployment = fake.get("/apis/apps/v1/namespaces/kcp/deployments/vw-virtualworkspace");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["/virtual-workspaces"])
    );
    let status = &fake.get(VW_PATH)["status"];
    assert_eq!(
        status["endpoints"]["external"],
        "https://vw.example.com:443"
    );
    assert_eq!(
        status["endpoints"]["internal"],
        "https://vw-virtualworkspace.kcp.svc.cluster.local:6443"
    );
    let again = reconcile(&fake).await;
    assert!(writes(&again).is_empty(), "{again:#?}");
}
