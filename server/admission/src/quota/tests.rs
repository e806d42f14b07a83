//! Quota admission against a real store in memory: kube's refusals and messages, charges to
//! `status.used`, updates charged for growth only, and parallel creates that never overshoot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kcp_authn::UserInfo;
use kcp_registry::admission::Operation;
use kcp_registry::storage::ObjectStore;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, Registry};
use serde_json::{Value, json};

use super::*;

async fn store() -> RestStore {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    RestStore::new(
        ObjectStore::new(storage, "/registry"),
        Arc::new(Registry::new()),
    )
}

fn cluster() -> LogicalClusterName {
    LogicalClusterName::parse("quota-test").unwrap()
}

fn attrs(resource: &str, kind: &str, name: &str, operation: Operation) -> Attributes {
    Attributes {
        cluster: cluster(),
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        resource: resource.into(),
        subresource: None,
        namespace: Some("ns".into()),
        name: name.into(),
        operation,
        user: UserInfo::default(),
        dry_run: false,
        options: None,
    }
}

/// A quota as the controller leaves it: `status.hard` and `status.used` filled in.
async fn quota(store: &RestStore, name: &str, hard: Value, used: Value) {
    let rt = store
        .registry()
        .builtin_type("", "v1", "resourcequotas")
        .unwrap();
    let cluster = cluster();
    let at = Location {
        cluster: &cluster,
        namespace: Some("ns"),
    };
    let namespaces = store
        .registry()
        .builtin_type("", "v1", "namespaces")
        .unwrap();
    let cluster_scope = Location {
        cluster: &cluster,
        namespace: None,
    };
    store
        .create_if_absent(
            &namespaces,
            cluster_scope,
            json!({"metadata": {"name": "ns"}}),
        )
        .await
        .unwrap();
    let object = json!({"metadata": {"name": name}, "spec": {"hard": hard.clone()}});
    store.create(&rt, at, object, false).await.unwrap();
    let status = json!({"hard": hard, "used": used});
    let set = move |current: &Value| {
        let mut updated = current.clone();
        updated["status"] = status.clone();
        Ok(updated)
    };
    store
        .update(&rt, at, name, &set, Some("status"), false)
        .await
        .unwrap();
}

async fn used(store: &RestStore, name: &str) -> Value {
    let rt = store
        .registry()
        .builtin_type("", "v1", "resourcequotas")
        .unwrap();
    let cluster = cluster();
    let at = Location {
        cluster: &cluster,
        namespace: Some("ns"),
    };
    store.get(&rt, at, name).await.unwrap().object["status"]["used"].clone()
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}})
}

#[tokio::test]
async fn charges_creates_and_refuses_the_one_over() {
    let store = store().await;
    quota(
        &store,
        "cms",
        json!({"count/configmaps": "2", "configmaps": "5"}),
        json!({"count/configmaps": "1", "configmaps": "1"}),
    )
    .await;
    let create = attrs("configmaps", "ConfigMap", "b", Operation::Create);
    admit(&store, &create, Some(&config_map("b")), None)
        .await
        .unwrap();
    assert_eq!(
        used(&store, "cms").await,
        json!({"count/configmaps": "2", "configmaps": "2"})
    );
    let refused = admit(
        &store,
        &attrs("configmaps", "ConfigMap", "c", Operation::Create),
        Some(&config_map("c")),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "configmaps \"c\" is forbidden: exceeded quota: cms, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2"
    );
    assert_eq!(
        used(&store, "cms").await,
        json!({"count/configmaps": "2", "configmaps": "2"})
    );
}

#[tokio::test]
async fn dry_runs_and_other_types_charge_nothing() {
    let store = store().await;
    quota(
        &store,
        "cms",
        json!({"count/configmaps": "2"}),
        json!({"count/configmaps": "0"}),
    )
    .await;
    let mut dry = attrs("configmaps", "ConfigMap", "a", Operation::Create);
    dry.dry_run = true;
    admit(&store, &dry, Some(&config_map("a")), None)
        .await
        .unwrap();
    let secret = json!({"metadata": {"name": "s"}});
    admit(
        &store,
        &attrs("secrets", "Secret", "s", Operation::Create),
        Some(&secret),
        None,
    )
    .await
    .unwrap();
    let update = attrs("configmaps", "ConfigMap", "a", Operation::Update);
    admit(
        &store,
        &update,
        Some(&config_map("a")),
        Some(&config_map("a")),
    )
    .await
    .unwrap();
    assert_eq!(used(&store, "cms").await, json!({"count/configmaps": "0"}));
}

#[tokio::test]
async fn a_quota_without_usage_for_a_resource_refuses() {
    let store = store().await;
    quota(
        &store,
        "cms",
        json!({"count/configmaps": "2", "secrets": "1"}),
        json!({"secrets": "0"}),
    )
    .await;
    let refused = admit(
        &store,
        &attrs("configmaps", "ConfigMap", "", Operation::Create),
        Some(&json!({"metadata": {"generateName": "cm-"}})),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(
        refused.message,
        "configmaps \"cm-\" is forbidden: status unknown for quota: cms, resources: count/configmaps"
    );
}

#[tokio::test]
async fn parallel_creates_never_overshoot() {
    let store = store().await;
    quota(
        &store,
        "cms",
        json!({"count/configmaps": "5"}),
        json!({"count/configmaps": "0"}),
    )
    .await;
    let attempts = (0..12).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let name = format!("cm{i}");
            admit(
                &store,
                &attrs("configmaps", "ConfigMap", &name, Operation::Create),
                Some(&config_map(&name)),
                None,
            )
            .await
        })
    });
    let mut admitted = 0;
    for attempt in attempts.collect::<Vec<_>>() {
        match attempt.await.unwrap() {
            Ok(()) => admitted += 1,
            Err(e) => assert!(e.message.contains("exceeded quota: cms"), "{}", e.message),
        }
    }
    assert_eq!(admitted, 5);
    assert_eq!(used(&store, "cms").await, json!({"count/configmaps": "5"}));
}

#[test]
fn pods_must_set_what_quota_limits_and_pay_for_it() {
    let quotas = vec![
        json!({"metadata": {"name": "compute", "resourceVersion": "1"},
        "status": {"hard": {"requests.cpu": "1", "pods": "2"},
            "used": {"requests.cpu": "600m", "pods": "1"}}}),
    ];
    let pod = |cpu: Option<&str>| {
        let resources = cpu.map_or(json!({}), |c| json!({"requests": {"cpu": c}}));
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "app", "resources": resources}]}})
    };
    let create = attrs("pods", "Pod", "p", Operation::Create);
    let missing = charges(&create, &pod(None), None, &quotas, 0)
        .err()
        .unwrap();
    assert_eq!(
        missing,
        "failed quota: compute: must specify requests.cpu for: app"
    );
    let over = charges(&create, &pod(Some("500m")), None, &quotas, 0)
        .err()
        .unwrap();
    assert_eq!(
        over,
        "exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    let fits = charges(&create, &pod(Some("400m")), None, &quotas, 0).unwrap();
    assert_eq!(
        usage::to_json(&fits[0].used),
        json!({"pods": "2", "requests.cpu": "1"})
    );
    let best_effort_only = vec![json!({"metadata": {"name": "be"},
        "spec": {"scopes": ["BestEffort"]},
        "status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}})];
    assert!(
        charges(&create, &pod(Some("1m")), None, &best_effort_only, 0)
            .unwrap()
            .is_empty()
    );
    assert!(charges(&create, &pod(None), None, &best_effort_only, 0).is_err());
}

#[test]
fn updates_pay_for_growth_only() {
    let quotas = vec![json!({"metadata": {"name": "lb"},
        "status": {"hard": {"services.loadbalancers": "1", "services": "5"},
            "used": {"services.loadbalancers": "0", "services": "1"}}})];
    let service = |kind: &str| {
        json!({"metadata": {"name": "s", "resourceVersion": "3"},
        "spec": {"type": kind, "ports": [{"port": 80}]}})
    };
    let update = attrs("services", "Service", "s", Operation::Update);
    let charged = charges(
        &update,
        &service("LoadBalancer"),
        Some(&service("ClusterIP")),
        &quotas,
        0,
    )
    .unwrap();
    assert_eq!(
        usage::to_json(&charged[0].used),
        json!({"services": "1", "services.loadbalancers": "1"})
    );
    assert!(
        charges(
            &update,
            &service("ClusterIP"),
            Some(&service("ClusterIP")),
            &quotas,
            0
        )
        .unwrap()
        .is_empty()
    );
}
