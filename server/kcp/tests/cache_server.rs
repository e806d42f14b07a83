//! The cache server (issue 19, part 2): `kcp cache-server` as a real process over HTTPS with the
//! `system:masters` certificate of the `cache.kubeconfig` it writes: every verb, the `shards/*`
//! and `clusters/*` wildcards, `labelSelector`, a watch that sees a create, an update and a
//! delete, 410 for a compacted `resourceVersion`, 401 without a certificate, 403 for a
//! certificate outside `system:masters`, 400/404 for bad paths; its data survives a restart, it
//! runs on etcd too, and kubectl reads it with `get --raw`. Shards whose cache server is down
//! when they start start anyway, say so in their logs, and replicate into it and read back from
//! it once it is up, again after it goes away mid-run and returns. The root shard replicates
//! both RBAC kinds another shard authorizes with (a granting ClusterRole and its binding), each
//! put back when deleted behind its back and gone when the role stops granting, and the
//! `access` roles and bindings of the clusters it replicates, from a workspace's first type on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::{Caller, EtcdProcess, KcpProcess, Kubectl, Patience, expect_status};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(500));

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

fn collection(shard: &str, cluster: &str) -> String {
    format!(
        "/services/cache/shards/{shard}/clusters/{cluster}/apis/tenancy.kcp.io/v1alpha1/workspacetypes"
    )
}

fn configmaps(shard: &str, cluster: &str, namespace: &str) -> String {
    format!(
        "/services/cache/shards/{shard}/clusters/{cluster}/api/v1/namespaces/{namespace}/configmaps"
    )
}

fn workspace_type(name: &str, tier: &str) -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
        "metadata": {"name": name, "labels": {"tier": tier}},
        "spec": {"defaultChildWorkspaceType": {"name": "universal", "path": "root"}}})
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Creates, reads, lists, updates and deletes through `admin`, checking what each answers.
async fn crud(admin: &Caller) {
    let created = admin
        .create(&collection("amber", "abc"), &workspace_type("wt", "gold"))
        .await;
    assert_eq!(
        created["spec"]["defaultChildWorkspaceType"]["name"],
        "universal"
    );
    assert_eq!(created["metadata"]["annotations"]["kcp.io/shard"], "amber");
    assert_eq!(created["metadata"]["annotations"]["kcp.io/cluster"], "abc");
    let again = admin
        .post(&collection("amber", "abc"), &workspace_type("wt", "gold"))
        .await;
    expect_status("a second create", &again, 409, "AlreadyExists");

    let item = format!("{}/wt", collection("amber", "abc"));
    let got = admin.get(&item).await;
    assert_eq!((got.status, got.json()), (200, created.clone()));

    let mut changed = created.clone();
    changed["spec"]["extra"] = json!(true);
    let updated = admin.put(&item, &changed).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["spec"]["extra"], true);
    let stale = admin.put(&item, &changed).await;
    expect_status(
        "an update from a stale resourceVersion",
        &stale,
        409,
        "Conflict",
    );

    let namespaced = admin
        .create(
            &configmaps("amber", "abc", "default"),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                "data": {"k": "v"}}),
        )
        .await;
    assert_eq!(namespaced["metadata"]["namespace"], "default");
    let list = admin.get(&configmaps("*", "*", "default")).await;
    assert_eq!(names(&list.json()), ["cm"]);

    let deleted = admin.delete(&item).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let gone = admin.get(&item).await;
    expect_status("a deleted object", &gone, 404, "NotFound");
}

#[tokio::test]
async fn a_standalone_cache_server_serves_every_verb_to_system_masters_only() {
    let cache = KcpProcess::start_cache_server(binary(), "cache-verbs", &[]).await;
    let admin = Caller::admin(&cache);
    crud(&admin).await;

    for (shard, cluster, name, tier) in [
        ("amber", "abc", "a", "gold"),
        ("amber", "def", "b", "silver"),
        ("sapphire", "abc", "c", "gold"),
    ] {
        admin
            .create(&collection(shard, cluster), &workspace_type(name, tier))
            .await;
    }
    for (shard, cluster, query, expected) in [
        ("*", "*", "", &["a", "b", "c"][..]),
        ("%2A", "%2A", "", &["a", "b", "c"][..]),
        ("amber", "*", "", &["a", "b"][..]),
        ("*", "abc", "", &["a", "c"][..]),
        ("sapphire", "abc", "", &["c"][..]),
        ("*", "*", "?labelSelector=tier%3Dgold", &["a", "c"][..]),
    ] {
        let list = admin
            .get(&format!("{}{query}", collection(shard, cluster)))
            .await;
        assert_eq!(list.status, 200, "{}", list.text());
        assert_eq!(names(&list.json()), expected, "{shard}/{cluster}{query}");
    }

    // A watch across shards of one cluster sees the changes of that cluster only.
    let rv = admin.get(&collection("*", "*")).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = cache
        .watch(&format!(
            "{}?watch=1&resourceVersion={rv}",
            collection("*", "abc")
        ))
        .await;
    admin
        .create(
            &collection("amber", "def"),
            &workspace_type("elsewhere", "gold"),
        )
        .await;
    let created = admin
        .create(&collection("sapphire", "abc"), &workspace_type("d", "gold"))
        .await;
    let event = watch.expect_event().await;
    assert_eq!(
        (event["type"].as_str(), &event["object"]),
        (Some("ADDED"), &created)
    );
    let item = format!("{}/d", collection("sapphire", "abc"));
    let updated = admin.put(&item, &created).await.json();
    let event = watch.expect_event().await;
    assert_eq!(
        (event["type"].as_str(), &event["object"]),
        (Some("MODIFIED"), &updated)
    );
    assert_eq!(admin.delete(&item).await.status, 200);
    let event = watch.expect_event().await;
    assert_eq!(event["type"], "DELETED");
    assert_eq!(event["object"]["metadata"]["name"], "d");

    // Health is for anybody; the cache only for system:masters certificates.
    let anonymous = Caller::anonymous(&cache);
    for health in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(anonymous.get(health).await.status, 200, "{health}");
    }
    let refused = anonymous.get(&collection("*", "*")).await;
    expect_status("no certificate", &refused, 401, "Unauthorized");
    let alice = Caller::cert(
        &cache,
        &cache.client_ca(),
        "alice",
        &["system:authenticated"],
    );
    let refused = alice.get(&collection("*", "*")).await;
    expect_status(
        "a certificate outside system:masters",
        &refused,
        403,
        "Forbidden",
    );
    // A certificate of another CA does not get past the TLS handshake.
    let stranger = kcp_testing::identities::CertificateAuthority::generate("stranger");
    let refused = Caller::cert(&cache, &stranger, "root", &["system:masters"])
        .request(reqwest::Method::GET, &collection("*", "*"))
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");
    for (path, code, reason) in [
        (
            "/services/cache/clusters/abc/api/v1/configmaps",
            400,
            "BadRequest",
        ),
        (
            "/services/cache/shards/Amber/clusters/abc/api/v1/configmaps",
            400,
            "BadRequest",
        ),
        (
            "/services/cache/shards/amber/clusters/abc/api/v1",
            404,
            "NotFound",
        ),
        (
            "/services/cache/shards/amber/clusters/abc/apis/g/v1/r/n/status",
            404,
            "NotFound",
        ),
        (
            "/apis/tenancy.kcp.io/v1alpha1/workspacetypes",
            404,
            "NotFound",
        ),
    ] {
        expect_status(path, &admin.get(path).await, code, reason);
    }
    let patch = admin
        .send(
            reqwest::Method::PATCH,
            &format!("{}/a", collection("amber", "abc")),
            Some(&json!({})),
        )
        .await;
    expect_status("PATCH", &patch, 405, "MethodNotAllowed");
    let bad_body = admin
        .post(
            &collection("amber", "abc"),
            &json!({"kind": "WorkspaceType"}),
        )
        .await;
    expect_status("a body without apiVersion", &bad_body, 400, "BadRequest");
}

#[tokio::test]
async fn compacted_revisions_are_gone_and_data_survives_a_restart() {
    let mut cache = KcpProcess::start_cache_server(
        binary(),
        "cache-restart",
        &["--etcd-compaction-interval=1s".to_owned()],
    )
    .await;
    let admin = Caller::admin(&cache);
    let first = admin
        .create(
            &collection("amber", "abc"),
            &workspace_type("first", "gold"),
        )
        .await;
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // Until its revision is compacted, the watch streams for a second and ends.
    let path = format!(
        "{}?watch=1&timeoutSeconds=1&resourceVersion={rv}",
        collection("*", "*")
    );
    let (admin_ref, path) = (&admin, path.as_str());
    PATIENCE
        .eventually(
            "a watch from a compacted resourceVersion answers 410",
            || async move {
                // Each pass writes, so the compactor always has a newer revision to compact to.
                admin_ref
                    .create(
                        &collection("amber", "abc"),
                        &workspace_type(&format!("filler-{}", fresh_number()), "silver"),
                    )
                    .await;
                let response = admin_ref.get(path).await;
                match response.status {
                    410 => Ok(expect_status(
                        "a compacted resourceVersion",
                        &response,
                        410,
                        "Expired",
                    )),
                    other => Err(format!("{other} {}", response.text())),
                }
            },
        )
        .await;

    cache.restart().await;
    let admin = Caller::admin(&cache);
    let after = admin
        .get(&format!("{}/first", collection("amber", "abc")))
        .await;
    assert_eq!(after.status, 200, "{}", after.text());
    assert_eq!(after.json()["metadata"]["labels"]["tier"], "gold");
    cache.stop_cleanly().await;
}

/// A fresh number for each filler write's name.
fn fresh_number() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

#[tokio::test]
async fn a_cache_server_on_etcd_is_read_by_kubectl() {
    let etcd = EtcdProcess::start(false).await;
    let cache = KcpProcess::start_cache_server(
        binary(),
        "cache-etcd",
        &[
            format!("--etcd-servers={}", etcd.client_url()),
            "--etcd-prefix=/cache-test".to_owned(),
        ],
    )
    .await;
    let admin = Caller::admin(&cache);
    crud(&admin).await;
    admin
        .create(
            &collection("amber", "abc"),
            &workspace_type("on-etcd", "gold"),
        )
        .await;
    let kubectl = Kubectl::new("1.33", &cache.kubeconfig());
    let raw = kubectl.ok(&["get", "--raw", &collection("*", "*")]);
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(names(&list), ["on-etcd"]);
    let raw = kubectl.ok(&[
        "get",
        "--raw",
        &format!("{}/on-etcd", collection("amber", "abc")),
    ]);
    let object: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(object["metadata"]["annotations"]["kcp.io/shard"], "amber");
    let refused = kubectl.fails(&[
        "get",
        "--raw",
        "/services/cache/shards/amber/clusters/abc/api/v1",
    ]);
    assert!(
        refused.contains("NotFound") || refused.contains("not find"),
        "{refused}"
    );
}

#[tokio::test]
async fn the_root_shard_serves_the_cache_in_process_apart_from_its_own_objects() {
    let root = KcpProcess::start(binary(), "cache-in-root", &[]).await;
    let admin = Caller::admin(&root);
    crud(&admin).await;
    // Another shard's copy (the root shard replicates only into shards/root).
    admin
        .create(
            &collection("sapphire", "root"),
            &workspace_type("cached-only", "gold"),
        )
        .await;
    let list = admin.get(&collection("sapphire", "*")).await;
    assert_eq!(names(&list.json()), ["cached-only"]);
    // The cache's keys are not the shard's: root's own WorkspaceTypes do not include it.
    let own = admin
        .get("/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspacetypes/cached-only")
        .await;
    expect_status("the shard's own WorkspaceType", &own, 404, "NotFound");
    let user = Caller::user(&root, &root.client_ca(), "alice");
    let refused = user.get(&collection("*", "*")).await;
    expect_status("a user outside system:masters", &refused, 403, "Forbidden");
    let watch = root
        .watch(&format!(
            "{}?watch=1&labelSelector=tier%3Dgold",
            collection("sapphire", "*")
        ))
        .await;
    drop(watch);
}

#[tokio::test]
async fn the_rust_client_speaks_every_verb() {
    use futures::StreamExt;
    use kcp_cache::client::{At, CacheClient, Resource};

    let cache = KcpProcess::start_cache_server(binary(), "cache-client", &[]).await;
    let client = CacheClient::from_kubeconfig(&cache.kubeconfig()).unwrap();
    let types = Resource::new("tenancy.kcp.io", "v1alpha1", "workspacetypes");
    let amber = At {
        shard: "amber",
        cluster: "abc",
        namespace: None,
    };
    let everywhere = At {
        shard: "*",
        cluster: "*",
        namespace: None,
    };

    let listed = client.list(&types, everywhere, "").await.unwrap();
    assert!(listed.items.is_empty());
    let mut events = client
        .watch(&types, everywhere, Some(listed.revision), "tier=gold")
        .await
        .unwrap();
    let created = client
        .create(&types, amber, &workspace_type("wt", "gold"))
        .await
        .unwrap();
    assert_eq!(created["metadata"]["annotations"]["kcp.io/shard"], "amber");
    let again = client
        .create(&types, amber, &workspace_type("wt", "gold"))
        .await;
    assert_eq!(again.unwrap_err().code, 409);
    assert_eq!(
        client.get(&types, amber, "wt").await.unwrap(),
        Some(created.clone())
    );

    let mut changed = created.clone();
    changed["spec"]["extra"] = json!(1);
    let updated = client.update(&types, amber, &changed).await.unwrap();
    let stale = client.update(&types, amber, &changed).await.unwrap_err();
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    let deleted = client.delete(&types, amber, "wt").await.unwrap();
    assert_eq!(deleted["spec"]["extra"], 1);
    assert_eq!(client.get(&types, amber, "wt").await.unwrap(), None);

    for (kind, object) in [("ADDED", &created), ("MODIFIED", &updated)] {
        let event = events.next().await.unwrap().unwrap();
        assert_eq!((event.kind.as_str(), &event.object), (kind, object));
    }
    let event = events.next().await.unwrap().unwrap();
    assert_eq!(event.kind, "DELETED");

    let wildcard_get = client.get(&types, everywhere, "wt").await.unwrap_err();
    assert_eq!(wildcard_get.code, 400);
}

const TYPES_IN_CACHE: &str =
    "/services/cache/shards/root/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspacetypes";
const ROOT_TYPES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspacetypes";

/// Waits until the names of the list at `path` are `expected`.
async fn wait_for_names(admin: &Caller, path: &str, expected: &[&str]) {
    PATIENCE
        .eventually(&format!("{path} holds {expected:?}"), || async move {
            let list = admin.get(path).await;
            let found = names(&list.json());
            if found == expected {
                Ok(())
            } else {
                Err(format!("{found:?}"))
            }
        })
        .await;
}

#[tokio::test]
async fn the_root_shard_replicates_its_shards_and_workspace_types_into_its_cache() {
    let root = KcpProcess::start(binary(), "cache-replication-root", &[]).await;
    let admin = Caller::admin(&root);
    let own: Vec<String> = names(&admin.get(ROOT_TYPES).await.json());
    assert!(own.contains(&"universal".to_owned()), "{own:?}");
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    wait_for_names(&admin, TYPES_IN_CACHE, &own).await;
    wait_for_names(
        &admin,
        "/services/cache/shards/root/clusters/root/apis/core.kcp.io/v1alpha1/shards",
        &["root"],
    )
    .await;
    let copy = admin
        .get(&format!("{}/universal", collection("root", "root")))
        .await
        .json();
    let original = admin.get(&format!("{ROOT_TYPES}/universal")).await.json();
    assert_eq!(copy["spec"], original["spec"]);
    assert_eq!(copy["metadata"]["uid"], original["metadata"]["uid"]);

    // A new type is pushed, a change follows, a deletion propagates.
    let mut created = admin
        .create(ROOT_TYPES, &workspace_type("replicated", "gold"))
        .await;
    let mut with_new = own.clone();
    with_new.push("replicated");
    with_new.sort();
    wait_for_names(&admin, TYPES_IN_CACHE, &with_new).await;
    created["metadata"]["labels"]["tier"] = json!("silver");
    let updated = admin
        .put(&format!("{ROOT_TYPES}/replicated"), &created)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    wait_for_names(
        &admin,
        &format!("{TYPES_IN_CACHE}?labelSelector=tier%3Dsilver"),
        &["replicated"],
    )
    .await;
    assert_eq!(
        admin
            .delete(&format!("{ROOT_TYPES}/replicated"))
            .await
            .status,
        200
    );
    wait_for_names(&admin, TYPES_IN_CACHE, &own).await;

    // The cache is kept equal to the shard: a copy deleted or added behind its back is put right.
    let deleted = admin
        .delete(&format!("{}/universal", collection("root", "root")))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    admin
        .create(
            &collection("root", "root"),
            &workspace_type("stray", "gold"),
        )
        .await;
    wait_for_names(&admin, TYPES_IN_CACHE, &own).await;
}

#[tokio::test]
async fn a_shard_replicates_into_a_standalone_cache_server_and_resyncs_after_its_restart() {
    let port = kcp_testing::free_port();
    let mut cache = KcpProcess::start_cache_server(
        binary(),
        "cache-replication-standalone",
        &[format!("--secure-port={port}")],
    )
    .await;
    let admin = Caller::admin(&cache);
    // A copy the shard does not have: the first comparison deletes it.
    admin
        .create(
            &collection("shard-1", "abc"),
            &workspace_type("stale", "gold"),
        )
        .await;
    let cache_kubeconfig = format!("--cache-kubeconfig={}", cache.kubeconfig().display());
    let root = KcpProcess::start(
        binary(),
        "cache-replication-ring",
        std::slice::from_ref(&cache_kubeconfig),
    )
    .await;
    let root_kubeconfig = root.kubeconfig().display().to_string();
    let shard_1 = KcpProcess::start(
        binary(),
        "cache-replication-shard-1",
        &[
            "--shard-name=shard-1".to_owned(),
            format!("--root-shard-kubeconfig-file={root_kubeconfig}"),
            cache_kubeconfig,
        ],
    )
    .await;
    // The shard holds no root (nor root's types); the types of its own logical clusters, and
    // nothing else, reach the cache.
    let in_shard_1 = Caller::admin(&shard_1);
    for name in ["one", "two"] {
        in_shard_1
            .create(
                "/clusters/own-types/apis/tenancy.kcp.io/v1alpha1/workspacetypes",
                &workspace_type(name, "gold"),
            )
            .await;
    }
    let own = names(
        &in_shard_1
            .get("/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspacetypes")
            .await
            .json(),
    );
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    assert_eq!(own, ["one", "two"]);
    let shard_types = collection("shard-1", "*");
    wait_for_names(&admin, &shard_types, &own).await;

    // The cache server restarts (same port, same store); the shard follows it again and puts
    // right what changed behind its back.
    cache.restart().await;
    let admin = Caller::admin(&cache);
    admin
        .create(
            &collection("shard-1", "abc"),
            &workspace_type("stale-again", "gold"),
        )
        .await;
    wait_for_names(&admin, &shard_types, &own).await;
    let deleted = admin
        .delete(&format!(
            "{}/{}",
            collection("shard-1", "own-types"),
            own[0]
        ))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    wait_for_names(&admin, &shard_types, &own).await;
}

/// Creates WorkspaceType `name` in root through `root`.
async fn create_root_type(root: &Caller, name: &str) {
    root.create(ROOT_TYPES, &workspace_type(name, "gold")).await;
}

/// A cache server that is down when the shards start: the root shard starts anyway and says so
/// in its log; a non-root shard, which holds no `root`, waits for root's types from the cache
/// before it serves (as upstream's waits for its cache informers), saying so. Once the cache
/// is up the root shard replicates into it and shard-1 serves; after the cache goes away
/// mid-run and returns, a type created in root meanwhile reaches it, and shard-1 keeps serving.
#[tokio::test(flavor = "multi_thread")]
async fn shards_start_without_their_cache_server_and_catch_up_when_it_returns() {
    let port = kcp_testing::free_port();
    let mut cache = KcpProcess::start_cache_server(
        binary(),
        "cache-unreachable",
        &[format!("--secure-port={port}")],
    )
    .await;
    let cache_kubeconfig = format!("--cache-kubeconfig={}", cache.kubeconfig().display());
    cache.stop().await;
    let root = KcpProcess::start(
        binary(),
        "cache-unreachable-root",
        std::slice::from_ref(&cache_kubeconfig),
    )
    .await;
    let root_kubeconfig = root.kubeconfig().display().to_string();
    let starting = KcpProcess::spawn(
        binary(),
        "cache-unreachable-shard-1",
        &[
            "--shard-name=shard-1".to_owned(),
            format!("--root-shard-kubeconfig-file={root_kubeconfig}"),
            cache_kubeconfig,
        ],
    );
    PATIENCE
        .eventually("shard-1 waits for root's types from the cache", || async {
            let log = starting.log();
            match log.contains("reading back from the cache starts over")
                && log.contains("the cache server: ")
                && log.contains("waiting for the root shard's WorkspaceTypes from the cache server")
            {
                true => Ok(()),
                false => Err(starting.log_tail()),
            }
        })
        .await;
    assert!(!starting.wrote_kubeconfig(), "{}", starting.log_tail());
    let in_root = Caller::admin(&root);
    create_root_type(&in_root, "early").await;

    cache.start_again().await;
    let shard_1 = starting.ready().await;
    assert!(
        shard_1
            .log()
            .contains("read the root shard's WorkspaceTypes from the cache server"),
        "{}",
        shard_1.log_tail()
    );
    let in_cache = Caller::admin(&cache);
    wait_for_some(
        &in_cache,
        TYPES_IN_CACHE,
        &["root", "universal", "early"],
        &[],
    )
    .await;

    // Away mid-run, back on the same store: nothing lost, and what changed meanwhile arrives.
    cache.kill();
    create_root_type(&in_root, "meanwhile").await;
    cache.start_again().await;
    let in_cache = Caller::admin(&cache);
    wait_for_some(&in_cache, TYPES_IN_CACHE, &["early", "meanwhile"], &[]).await;
    let ready = shard_1.get("/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
}

/// The root shard's copies of `resource` (ClusterRoles or ClusterRoleBindings) of `cluster`.
fn rbac_in_cache_of(cluster: &str, resource: &str) -> String {
    format!(
        "/services/cache/shards/root/clusters/{cluster}/apis/rbac.authorization.k8s.io/v1/{resource}"
    )
}

fn rbac_in_cache(resource: &str) -> String {
    rbac_in_cache_of("root", resource)
}

fn rbac_in(cluster: &str, resource: &str) -> String {
    format!("/clusters/{cluster}/apis/rbac.authorization.k8s.io/v1/{resource}")
}

fn rbac_in_root(resource: &str) -> String {
    rbac_in("root", resource)
}

/// Waits until the list at `path` holds every name of `present` and none of `absent`.
async fn wait_for_some(admin: &Caller, path: &str, present: &[&str], absent: &[&str]) {
    let what = format!("{path} holds {present:?} and none of {absent:?}");
    PATIENCE
        .eventually(&what, || async move {
            let found = names(&admin.get(path).await.json());
            let has = |name: &&str| found.iter().any(|f| f == name);
            match present.iter().all(has) && !absent.iter().any(has) {
                true => Ok(()),
                false => Err(format!("{found:?}")),
            }
        })
        .await;
}

#[tokio::test]
async fn the_root_shard_replicates_granting_roles_and_their_bindings_into_its_cache() {
    let root = KcpProcess::start(binary(), "cache-replication-rbac", &[]).await;
    let admin = Caller::admin(&root);
    let (roles, bindings) = ("clusterroles", "clusterrolebindings");
    let role = |name: &str, resource: &str, verb: &str| {
        json!({"metadata": {"name": name}, "rules": [{"apiGroups": ["apis.kcp.io"],
            "resources": [resource], "verbs": [verb]}]})
    };
    let binding = |name: &str| {
        json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    };
    // `bind` on exports is what another shard authorizes; `get` is not.
    admin
        .create(
            &rbac_in_root(roles),
            &role("bind-exports", "apiexports", "bind"),
        )
        .await;
    admin
        .create(
            &rbac_in_root(roles),
            &role("read-exports", "apiexports", "get"),
        )
        .await;
    for name in ["bind-exports", "read-exports"] {
        admin.create(&rbac_in_root(bindings), &binding(name)).await;
    }
    let (granting, other) = (&["bind-exports"][..], &["read-exports"][..]);
    wait_for_some(&admin, &rbac_in_cache(roles), granting, other).await;
    wait_for_some(&admin, &rbac_in_cache(bindings), granting, other).await;

    // A copy of either kind deleted behind the shard's back is put back.
    for resource in [roles, bindings] {
        let copy = format!("{}/bind-exports", rbac_in_cache(resource));
        assert_eq!(admin.delete(&copy).await.status, 200, "{copy}");
        wait_for_some(&admin, &rbac_in_cache(resource), granting, other).await;
    }

    // The role stops granting: its copy and its binding's go; it grants again: both return.
    let url = format!("{}/bind-exports", rbac_in_root(roles));
    let mut current = admin.get(&url).await.json();
    current["rules"][0]["verbs"] = json!(["get"]);
    let updated = admin.put(&url, &current).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let none = ["bind-exports", "read-exports"];
    wait_for_some(&admin, &rbac_in_cache(roles), &[], &none).await;
    wait_for_some(&admin, &rbac_in_cache(bindings), &[], &none).await;
    let mut current = updated.json();
    current["rules"][0]["verbs"] = json!(["bind"]);
    let updated = admin.put(&url, &current).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    wait_for_some(&admin, &rbac_in_cache(roles), granting, other).await;
    wait_for_some(&admin, &rbac_in_cache(bindings), granting, other).await;
}

/// The root shard replicates the ClusterRoles granting `access` (and their bindings) of the
/// logical clusters it replicates, those holding a WorkspaceType or an APIExport (root holds the
/// built-in types), and their bindings of `cluster-admin` (a bootstrap role): a workspace's are
/// copied from its first type on and gone after its last, and a deleted binding's copy goes.
#[tokio::test]
async fn the_root_shard_replicates_access_roles_of_clusters_holding_types() {
    let root = KcpProcess::start(binary(), "cache-replication-access", &[]).await;
    let admin = Caller::admin(&root);
    let (roles, bindings) = ("clusterroles", "clusterrolebindings");
    let role = |name: &str, urls: &[&str], verbs: &[&str]| json!({"metadata": {"name": name}, "rules": [{"nonResourceURLs": urls, "verbs": verbs}]});
    let binding = |name: &str| {
        json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    };
    let grant = |cluster: String| {
        let (admin, role, binding) = (&admin, &role, &binding);
        async move {
            for (name, urls, verbs) in [
                ("enter", &["/"][..], &["access"][..]),
                ("enter-any", &["/*"][..], &["*"][..]),
                ("health", &["/healthz"][..], &["access"][..]),
            ] {
                admin
                    .create(&rbac_in(&cluster, roles), &role(name, urls, verbs))
                    .await;
                admin
                    .create(&rbac_in(&cluster, bindings), &binding(name))
                    .await;
            }
        }
    };
    let (access, other) = (&["enter", "enter-any"][..], &["health"][..]);
    grant("root".into()).await;
    wait_for_some(&admin, &rbac_in_cache(roles), access, other).await;
    wait_for_some(&admin, &rbac_in_cache(bindings), access, other).await;

    // A workspace without types is not replicated, nor are its access roles, until it holds a
    // type.
    let workspaces = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
    admin
        .create(workspaces, &json!({"metadata": {"name": "plain"}}))
        .await;
    let cluster = PATIENCE
        .eventually("root:plain Ready", || async {
            let answer = admin.get(&format!("{workspaces}/plain")).await.json();
            match answer["status"]["phase"] == "Ready" {
                true => Ok(answer["spec"]["cluster"].as_str().unwrap().to_owned()),
                false => Err(answer.to_string()),
            }
        })
        .await;
    grant(cluster.clone()).await;
    // A binding of `cluster-admin`, a role of the bootstrap policy granting `access` (as a
    // workspace's `workspace-admin` binding).
    let mut admins = binding("admins");
    admins["roleRef"]["name"] = json!("cluster-admin");
    admin.create(&rbac_in(&cluster, bindings), &admins).await;
    let (in_cache, copied) = (
        |resource| rbac_in_cache_of(&cluster, resource),
        format!("/clusters/{cluster}/apis/tenancy.kcp.io/v1alpha1/workspacetypes"),
    );
    let none = ["enter", "enter-any", "health", "admins"];
    // A role that grants across shards, created after them, is copied: the replication has seen
    // the access roles (one watch, in order) and left them out.
    let bind = json!({"metadata": {"name": "binder"}, "rules": [{"apiGroups": ["apis.kcp.io"],
        "resources": ["apiexports"], "verbs": ["bind"]}]});
    admin.create(&rbac_in(&cluster, roles), &bind).await;
    wait_for_some(&admin, &in_cache(roles), &["binder"], &none).await;
    wait_for_some(&admin, &in_cache(bindings), &[], &none).await;
    admin
        .create(&copied, &workspace_type("special", "gold"))
        .await;
    for resource in [roles, bindings] {
        wait_for_some(&admin, &in_cache(resource), access, other).await;
    }
    wait_for_some(&admin, &in_cache(bindings), &["admins"], &[]).await;
    wait_for_some(&admin, &in_cache(roles), &[], &["admins", "cluster-admin"]).await;

    // A binding deleted: its copy goes; the last type deleted: the rest goes.
    let deleted = admin
        .delete(&format!("{}/enter", rbac_in(&cluster, bindings)))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    wait_for_some(&admin, &in_cache(bindings), &["enter-any"], &["enter"]).await;
    let deleted = admin.delete(&format!("{copied}/special")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    for resource in [roles, bindings] {
        wait_for_some(&admin, &in_cache(resource), &[], &none).await;
    }
}
