//! ResourceQuota end to end: the controller computes `status`, quota admission refuses the
//! object past a count with kube's message, usage converges after deletes, one workspace's
//! objects never count in another's quota, custom resources count once served, compute quotas
//! apply to pods served by a core-group CRD (kube's "must specify" and finished pods), and
//! kubectl shows quotas as it does against kube-apiserver.

use std::time::Duration;

use kcp_testing::{Caller, Kubectl, Patience, cluster_prefix};
use reqwest::Method;
use serde_json::{Value, json};

use super::SERVER;

/// How long the quota controller and workspace initialization may take.
const SETTLED: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(100));

const WORKSPACES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";

/// Creates workspace `root:<name>` and waits until it is Ready; returns its cluster path.
pub(super) async fn ready_workspace(admin: &Caller, name: &str) -> String {
    admin
        .ensure(WORKSPACES, &json!({"metadata": {"name": name}}))
        .await;
    let path = format!("{WORKSPACES}/{name}");
    SETTLED
        .eventually(&format!("workspace {name} Ready"), || async {
            let workspace = admin.get(&path).await.json();
            match workspace["status"]["phase"].as_str() {
                Some("Ready") => Ok(()),
                other => Err(format!("phase {other:?}")),
            }
        })
        .await;
    format!("root:{name}")
}

async fn namespace(admin: &Caller, cluster: &str, name: &str) {
    let prefix = cluster_prefix(cluster);
    admin
        .create(
            &format!("{prefix}/api/v1/namespaces"),
            &json!({"metadata": {"name": name}}),
        )
        .await;
}

fn config_maps(cluster: &str) -> String {
    format!(
        "{}/api/v1/namespaces/team/configmaps",
        cluster_prefix(cluster)
    )
}

fn quotas(cluster: &str) -> String {
    format!(
        "{}/api/v1/namespaces/team/resourcequotas",
        cluster_prefix(cluster)
    )
}

/// Waits until the quota's `status.used` is `used` (and `status.hard` its `spec.hard`).
async fn used_becomes(admin: &Caller, cluster: &str, name: &str, used: Value) {
    let path = format!("{}/{name}", quotas(cluster));
    SETTLED
        .eventually(&format!("quota {name} used {used}"), || async {
            let quota = admin.get(&path).await.json();
            if quota["status"]["used"] == used && quota["status"]["hard"] == quota["spec"]["hard"] {
                Ok(())
            } else {
                Err(quota["status"].to_string())
            }
        })
        .await;
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

#[tokio::test]
async fn a_count_quota_refuses_the_next_object_and_converges_after_deletes() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "quota-counts").await;
    let neighbour = ready_workspace(&admin, "quota-neighbour").await;
    for ws in [&cluster, &neighbour] {
        namespace(&admin, ws, "team").await;
    }
    // Every namespace holds kube-root-ca.crt, which counts like any ConfigMap.
    let hard = json!({"configmaps": "3", "count/configmaps": "3"});
    admin
        .create(
            &quotas(&cluster),
            &json!({"metadata": {"name": "objects"}, "spec": {"hard": hard}}),
        )
        .await;
    used_becomes(
        &admin,
        &cluster,
        "objects",
        json!({"configmaps": "1", "count/configmaps": "1"}),
    )
    .await;
    for name in ["a", "b", "c", "d"] {
        admin
            .create(&config_maps(&neighbour), &config_map(name))
            .await;
    }
    for name in ["a", "b"] {
        admin
            .create(&config_maps(&cluster), &config_map(name))
            .await;
    }
    let refused = admin.post(&config_maps(&cluster), &config_map("c")).await;
    let message = kcp_testing::expect_status("the fourth ConfigMap", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        "configmaps \"c\" is forbidden: exceeded quota: objects, requested: configmaps=1,count/configmaps=1, used: configmaps=3,count/configmaps=3, limited: configmaps=3,count/configmaps=3"
    );
    used_becomes(
        &admin,
        &cluster,
        "objects",
        json!({"configmaps": "3", "count/configmaps": "3"}),
    )
    .await;

    let deleted = admin.delete(&format!("{}/a", config_maps(&cluster))).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    used_becomes(
        &admin,
        &cluster,
        "objects",
        json!({"configmaps": "2", "count/configmaps": "2"}),
    )
    .await;
    admin.create(&config_maps(&cluster), &config_map("c")).await;

    // Dry runs are checked but not charged.
    let dry = admin
        .send(
            Method::POST,
            &format!("{}?dryRun=All", config_maps(&cluster)),
            Some(&config_map("e")),
        )
        .await;
    assert_eq!(dry.status, 403, "{}", dry.text());
    used_becomes(
        &admin,
        &cluster,
        "objects",
        json!({"configmaps": "3", "count/configmaps": "3"}),
    )
    .await;
}

#[tokio::test]
async fn parallel_creates_never_overshoot_a_quota() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "quota-parallel").await;
    namespace(&admin, &cluster, "team").await;
    admin
        .create(
            &quotas(&cluster),
            &json!({"metadata": {"name": "secrets"}, "spec": {"hard": {"secrets": "5"}}}),
        )
        .await;
    used_becomes(&admin, &cluster, "secrets", json!({"secrets": "0"})).await;
    let path = format!(
        "{}/api/v1/namespaces/team/secrets",
        cluster_prefix(&cluster)
    );
    let creates = (0..12).map(|i| {
        let admin = &admin;
        let path = &path;
        async move {
            admin
                .post(path, &json!({"metadata": {"name": format!("s{i}")}}))
                .await
                .status
        }
    });
    let statuses = futures::future::join_all(creates).await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 403).count(),
        7,
        "{statuses:?}"
    );
    used_becomes(&admin, &cluster, "secrets", json!({"secrets": "5"})).await;
}

#[tokio::test]
async fn custom_resources_count_once_served() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "quota-custom").await;
    namespace(&admin, &cluster, "team").await;
    let hard = json!({"count/widgets.example.com": "1"});
    admin
        .create(
            &quotas(&cluster),
            &json!({"metadata": {"name": "widgets"}, "spec": {"hard": hard}}),
        )
        .await;
    used_becomes(
        &admin,
        &cluster,
        "widgets",
        json!({"count/widgets.example.com": "0"}),
    )
    .await;
    let prefix = cluster_prefix(&cluster);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}});
    admin
        .create(
            &format!("{prefix}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
            &crd,
        )
        .await;
    let widgets = format!("{prefix}/apis/example.com/v1/namespaces/team/widgets");
    let widget = |name: &str| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
    SETTLED
        .eventually("widgets served", || async {
            match admin.post(&widgets, &widget("first")).await.status {
                201 => Ok(()),
                other => Err(format!("create answered {other}")),
            }
        })
        .await;
    used_becomes(
        &admin,
        &cluster,
        "widgets",
        json!({"count/widgets.example.com": "1"}),
    )
    .await;
    let refused = admin.post(&widgets, &widget("second")).await;
    let message = kcp_testing::expect_status("the second widget", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        "widgets.example.com \"second\" is forbidden: exceeded quota: widgets, requested: count/widgets.example.com=1, used: count/widgets.example.com=1, limited: count/widgets.example.com=1"
    );
}

#[tokio::test]
async fn invalid_quotas_are_refused_with_kube_messages() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "quota-invalid").await;
    namespace(&admin, &cluster, "team").await;
    let bad = json!({"metadata": {"name": "bad"}, "spec": {
        "hard": {"widgets": "1", "pods": "-1"}, "scopes": ["BestEffort", "NotBestEffort"]}});
    let response = admin.post(&quotas(&cluster), &bad).await;
    let message = kcp_testing::expect_status("an invalid quota", &response, 422, "Invalid");
    for fragment in [
        "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified",
        "spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
        ": conflicting scopes",
    ] {
        assert!(
            message.contains(fragment),
            "{fragment} missing from {message}"
        );
    }
}

#[tokio::test]
async fn kubectl_shows_quotas() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "quota-kubectl").await;
    namespace(&admin, &cluster, "team").await;
    let hard = json!({"count/configmaps": "10", "requests.cpu": "2", "limits.memory": "1Gi"});
    admin
        .create(
            &quotas(&cluster),
            &json!({"metadata": {"name": "compute"}, "spec": {"hard": hard}}),
        )
        .await;
    used_becomes(
        &admin,
        &cluster,
        "compute",
        json!({"count/configmaps": "1", "requests.cpu": "0", "limits.memory": "0"}),
    )
    .await;
    let server_url = format!("{}{}", server.base_url(), cluster_prefix(&cluster));
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let table = kubectl.ok(&["--server", &server_url, "get", "quota", "-n", "team"]);
    assert!(
        has_row(&table, &["NAME", "AGE", "REQUEST", "LIMIT"]),
        "{table}"
    );
    assert!(
        has_row(
            &table,
            &[
                "count/configmaps:",
                "1/10,",
                "requests.cpu:",
                "0/2",
                "limits.memory:",
                "0/1Gi"
            ]
        ),
        "{table}"
    );
    let described = kubectl.ok(&[
        "--server",
        &server_url,
        "describe",
        "quota",
        "compute",
        "-n",
        "team",
    ]);
    for row in [
        &["Name:", "compute"][..],
        &["Namespace:", "team"],
        &["Resource", "Used", "Hard"],
        &["count/configmaps", "1", "10"],
        &["limits.memory", "0", "1Gi"],
        &["requests.cpu", "0", "2"],
    ] {
        assert!(
            has_row(&described, row),
            "{row:?} missing from\n{described}"
        );
    }
}

/// Whether some line of kubectl's output has these words, in this order, next to each other.
fn has_row(output: &str, words: &[&str]) -> bool {
    output.lines().any(|line| {
        let found: Vec<&str> = line.split_whitespace().collect();
        found.windows(words.len()).any(|window| window == words)
    })
}

#[tokio::test]
async fn compute_quotas_apply_to_pods_served_as_a_crd() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "quota-pods").await;
    namespace(&admin, &cluster, "team").await;
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../e2e/workload-crds/pods.core.yaml");
    let crd: Value = yaml_serde::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    server.install_crd(&cluster, &crd).await;
    let hard = json!({"pods": "2", "requests.cpu": "1", "count/pods": "5"});
    admin
        .create(
            &quotas(&cluster),
            &json!({"metadata": {"name": "compute"}, "spec": {"hard": hard}}),
        )
        .await;
    used_becomes(
        &admin,
        &cluster,
        "compute",
        json!({"pods": "0", "requests.cpu": "0", "count/pods": "0"}),
    )
    .await;
    let pods = format!("{}/api/v1/namespaces/team/pods", cluster_prefix(&cluster));
    let pod = |name: &str, cpu: Option<&str>| {
        let resources = cpu.map_or(json!({}), |cpu| json!({"requests": {"cpu": cpu}}));
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "nginx", "resources": resources}]}})
    };
    admin.create(&pods, &pod("first", Some("600m"))).await;
    let unbounded = admin.post(&pods, &pod("unbounded", None)).await;
    let message =
        kcp_testing::expect_status("a pod without requests", &unbounded, 403, "Forbidden");
    assert_eq!(
        message,
        "pods \"unbounded\" is forbidden: failed quota: compute: must specify requests.cpu for: app"
    );
    let greedy = admin.post(&pods, &pod("greedy", Some("500m"))).await;
    let message = kcp_testing::expect_status("a pod over the cpu quota", &greedy, 403, "Forbidden");
    assert_eq!(
        message,
        "pods \"greedy\" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    admin.create(&pods, &pod("second", Some("400m"))).await;
    used_becomes(
        &admin,
        &cluster,
        "compute",
        json!({"pods": "2", "requests.cpu": "1", "count/pods": "2"}),
    )
    .await;
    // A finished pod no longer uses compute, only its place in storage.
    let finished = admin.get(&format!("{pods}/first")).await.json();
    let mut finished = finished;
    finished["status"] = json!({"phase": "Succeeded"});
    let written = admin.put(&format!("{pods}/first/status"), &finished).await;
    assert_eq!(written.status, 200, "{}", written.text());
    used_becomes(
        &admin,
        &cluster,
        "compute",
        json!({"pods": "1", "requests.cpu": "400m", "count/pods": "2"}),
    )
    .await;
}
