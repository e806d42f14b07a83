//! The total object count limit per logical cluster end to end, on a server of its own started
//! with `--logical-cluster-total-object-limit` and a 1s scan: a workspace whose LogicalCluster
//! an admin annotates with `core.kcp.io/max-total-objects` refuses the create past its limit
//! with upstream's 403, a delete frees capacity, events are never refused, only privileged users
//! may set the annotation, and the default limit applies to a new workspace but not to root.

use std::time::Duration;

use kcp_testing::{Caller, KcpProcess, Patience, cluster_prefix, expect_status};
use reqwest::Method;
use serde_json::{Value, json};

use super::quota::ready_workspace;

/// The default limit of the test servers.
const DEFAULT_LIMIT: u64 = 40;

/// Long enough for several scans, workspace initialization and RBAC to settle.
const SETTLED: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));

const ANNOTATION: &str = "core.kcp.io/max-total-objects";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

async fn server(label: &str) -> KcpProcess {
    KcpProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_kcp")),
        label,
        &[
            format!("--logical-cluster-total-object-limit={DEFAULT_LIMIT}"),
            "--logical-cluster-object-count-scan-interval=1s".to_string(),
        ],
    )
    .await
}

fn logical_cluster(cluster: &str) -> String {
    format!(
        "{}/apis/core.kcp.io/v1alpha1/logicalclusters/cluster",
        cluster_prefix(cluster)
    )
}

fn config_maps(cluster: &str) -> String {
    format!(
        "{}/api/v1/namespaces/default/configmaps",
        cluster_prefix(cluster)
    )
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

/// The logical cluster name of workspace path `cluster` (what the refusal names).
async fn cluster_name(admin: &Caller, cluster: &str) -> String {
    let lc = admin.get(&logical_cluster(cluster)).await.json();
    lc["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap_or_else(|| panic!("no kcp.io/cluster on {lc}"))
        .to_string()
}

async fn annotate(caller: &Caller, cluster: &str, value: &str) -> kcp_testing::Response {
    let patch = json!({"metadata": {"annotations": {ANNOTATION: value}}});
    caller
        .send(Method::PATCH, &logical_cluster(cluster), Some(&patch))
        .await
}

fn refusal(resource: &str, name: &str, cluster: &str, count: u64, limit: u64) -> String {
    format!(
        "{resource} \"{name}\" is forbidden: logical cluster \"{cluster}\" has reached its total object count limit ({count}/{limit} objects); delete objects to free up capacity"
    )
}

/// The count a refusal names, from its `(<count>/<limit> objects)`.
fn refused_count(message: &str) -> u64 {
    let counts = message
        .split_once("limit (")
        .and_then(|(_, rest)| rest.split_once('/'))
        .unwrap_or_else(|| panic!("no count in {message:?}"));
    counts.0.parse().unwrap()
}

/// Creates ConfigMaps `<stem>-0`, `<stem>-1`, ... until one is refused (at most `tries`); returns
/// how many were created and the refusal's message.
async fn fill(admin: &Caller, cluster: &str, stem: &str, tries: usize) -> (usize, String) {
    for i in 0..tries {
        let response = admin
            .post(&config_maps(cluster), &config_map(&format!("{stem}-{i}")))
            .await;
        if response.status != 201 {
            let message = expect_status("a create past the limit", &response, 403, "Forbidden");
            return (i, message);
        }
    }
    panic!("{tries} ConfigMaps created in {cluster}, none refused");
}

/// The count the server holds for `cluster` once workspace initialization is over: what a
/// refused probe reports twice, at least one scan apart.
async fn settled_count(admin: &Caller, cluster: &str) -> u64 {
    let probe = || async {
        let response = admin
            .post(&config_maps(cluster), &config_map("probe"))
            .await;
        match response.status {
            403 => Ok(refused_count(
                response.json()["message"].as_str().unwrap_or_default(),
            )),
            other => Err(format!("probe answered {other}: {}", response.text())),
        }
    };
    assert_eq!(annotate(admin, cluster, "1").await.status, 200);
    SETTLED
        .eventually("the object count settles", || async {
            let first = probe().await?;
            tokio::time::sleep(Duration::from_millis(2500)).await;
            let second = probe().await?;
            if first == second {
                Ok(second)
            } else {
                Err(format!("count went from {first} to {second}"))
            }
        })
        .await
}

#[tokio::test]
async fn an_annotated_workspace_refuses_creates_past_its_limit_until_deletes_free_capacity() {
    let server = server("object-limit-annotated").await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "limited").await;
    let name = cluster_name(&admin, &cluster).await;
    let count = settled_count(&admin, &cluster).await;
    let limit = count + 2;
    assert_eq!(
        annotate(&admin, &cluster, &limit.to_string()).await.status,
        200
    );
    let (created, message) = fill(&admin, &cluster, "cm", 5).await;
    assert_eq!(created, 2, "{message}");
    assert_eq!(message, refusal("configmaps", "cm-2", &name, limit, limit));

    // Events are neither limited nor counted, through either API.
    let prefix = cluster_prefix(&cluster);
    let core_event = json!({"metadata": {"name": "e1"},
        "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": "cm-0"},
        "reason": "Test", "message": "still allowed"});
    admin
        .create(
            &format!("{prefix}/api/v1/namespaces/default/events"),
            &core_event,
        )
        .await;
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e2"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/test", "reportingInstance": "test",
        "action": "Test", "reason": "Test", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "cm-0"}});
    admin
        .create(
            &format!("{prefix}/apis/events.k8s.io/v1/namespaces/default/events"),
            &event,
        )
        .await;

    // A delete frees room for one more; a scan later the count is still right.
    let deleted = admin
        .delete(&format!("{}/cm-0", config_maps(&cluster)))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    admin
        .create(&config_maps(&cluster), &config_map("cm-again"))
        .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let refused = admin
        .post(&config_maps(&cluster), &config_map("one-more"))
        .await;
    let message = expect_status("a create after the scan", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        refusal("configmaps", "one-more", &name, limit, limit)
    );

    // A value that is not positive turns the limit off, the default included.
    assert_eq!(annotate(&admin, &cluster, "0").await.status, 200);
    admin
        .create(&config_maps(&cluster), &config_map("one-more"))
        .await;
}

#[tokio::test]
async fn only_privileged_users_may_set_the_annotation() {
    let server = server("object-limit-reserved").await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "reserved").await;
    let binding = json!({"metadata": {"name": "alice-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]});
    admin
        .create(
            &format!("{}{RBAC}/clusterrolebindings", cluster_prefix(&cluster)),
            &binding,
        )
        .await;
    let alice = Caller::user(&server, &server.client_ca(), "alice");
    let other = json!({"metadata": {"annotations": {"example.com/note": "mine"}}});
    SETTLED
        .eventually("alice may patch the LogicalCluster", || async {
            let response = alice
                .send(Method::PATCH, &logical_cluster(&cluster), Some(&other))
                .await;
            match response.status {
                200 => Ok(()),
                status => Err(format!("{status}: {}", response.text())),
            }
        })
        .await;
    let refused = annotate(&alice, &cluster, "1000").await;
    let message = expect_status("alice sets the limit", &refused, 403, "Forbidden");
    assert_eq!(
        message,
        "logicalclusters.core.kcp.io \"cluster\" is forbidden: modification of admin-reserved annotation: \"core.kcp.io/max-total-objects\""
    );
    assert_eq!(annotate(&admin, &cluster, "1000").await.status, 200);
    let refused = annotate(&alice, &cluster, "2000").await;
    expect_status("alice changes the limit", &refused, 403, "Forbidden");
    let lc = admin.get(&logical_cluster(&cluster)).await.json();
    assert_eq!(lc["metadata"]["annotations"][ANNOTATION], "1000", "{lc}");
}

#[tokio::test]
async fn the_default_limit_applies_to_a_new_workspace_but_not_to_root() {
    let server = server("object-limit-default").await;
    let admin = Caller::admin(&server);
    let cluster = ready_workspace(&admin, "defaulted").await;
    let name = cluster_name(&admin, &cluster).await;
    // Objects workspace initialization writes count from the next scan on, so the count a
    // refusal names may be past the limit.
    let (created, message) = fill(&admin, &cluster, "cm", DEFAULT_LIMIT as usize + 1).await;
    let count = refused_count(&message);
    assert!(count >= DEFAULT_LIMIT, "{message}");
    let refused = format!("cm-{created}");
    assert_eq!(
        message,
        refusal("configmaps", &refused, &name, count, DEFAULT_LIMIT)
    );
    for i in 0..=DEFAULT_LIMIT {
        admin
            .create(&config_maps("root"), &config_map(&format!("cm-{i}")))
            .await;
    }
}
