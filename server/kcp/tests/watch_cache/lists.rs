//! Lists served from the shared watch cache: every answer is compared byte for byte with storage's answer at the same revision (`resourceVersionMatch=Exact`, which
//! always reads storage, as kube-apiserver's cacher delegates it), with label and field selectors,
//! across logical clusters (`/clusters/*`), in Table and protobuf, for a custom resource whose
//! schema defaults apply on read, through pages continued by the cache or by storage, and with
//! kube's `resourceVersion` semantics (unset reads its own writes, `0`, `NotOlderThan`, 504 for a
//! future revision).

use kcp_testing::KcpProcess;
use reqwest::Method;
use serde_json::{Value, json};

use super::{PROTOBUF, SERVER, configmap, get_as, names, revision_of, with_query};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// Lists `path` (with `query`), then lists it from storage at the revision the answer reported,
/// and requires the same bytes, in JSON and in `accept`; returns the JSON answer's list.
async fn same_as_storage(server: &KcpProcess, path: &str, query: &str, accept: &str) -> Value {
    // The first two lists of a type are served by storage (the second creates its cache), later
    // ones by the cache once it has listed; storage's answers are compared the same way.
    let url = with_query(path, query);
    let json = server.get(&url).await;
    assert_eq!(json.status, 200, "{url}: {}", json.text());
    let list = json.json();
    let exact = |revision: &str| {
        with_query(
            &url,
            &format!("resourceVersion={revision}&resourceVersionMatch=Exact"),
        )
    };
    let revision = revision_of(&list);
    let stored = server.get(&exact(&revision)).await;
    assert_eq!(
        json.text(),
        stored.text(),
        "{url}: the cache's answer differs from storage's at {revision}"
    );
    if accept == "application/json" {
        return list;
    }
    // Other encodings carry the revision inside; compare them at a moment nothing was written
    // (the same consistent revision before and after).
    for _ in 0..50 {
        let before = revision_of(&server.get(&url).await.json());
        let answer = get_as(server, &url, accept).await;
        let after = revision_of(&server.get(&url).await.json());
        if before == after {
            assert_eq!(answer.status, 200, "{url} as {accept}: {}", answer.text());
            let stored = get_as(server, &exact(&before), accept).await;
            if accept == TABLE {
                // Ages are computed when each answer is rendered: they may differ by a second.
                assert_eq!(
                    without_ages(&answer.json()),
                    without_ages(&stored.json()),
                    "{url} as {accept} at {before}"
                );
            } else {
                assert_eq!(answer.body, stored.body, "{url} as {accept} at {before}");
            }
            return list;
        }
    }
    panic!("{url}: the store never stood still for a comparison in {accept}");
}

/// A Table with the cells of its `Age` column blanked.
fn without_ages(table: &Value) -> Value {
    let mut table = table.clone();
    let age = table["columnDefinitions"]
        .as_array()
        .and_then(|columns| columns.iter().position(|c| c["name"] == "Age"));
    if let (Some(age), Some(rows)) = (age, table["rows"].as_array_mut()) {
        for row in rows {
            row["cells"][age] = Value::Null;
        }
    }
    table
}

/// Follows `continue` tokens from a first page to the end; the items of all pages.
async fn all_pages(server: &KcpProcess, path: &str, first: Value, limit: usize) -> Vec<String> {
    let mut items = names(&first);
    let mut page = first;
    while let Some(token) = page["metadata"]["continue"].as_str().map(str::to_string) {
        let next = server
            .get(&format!("{path}?limit={limit}&continue={token}"))
            .await;
        assert_eq!(next.status, 200, "{}", next.text());
        page = next.json();
        items.extend(names(&page));
    }
    items
}

#[tokio::test]
async fn lists_answer_what_storage_answers() {
    let server = SERVER.get().await;
    for cluster in ["wc-a", "wc-b"] {
        server.create_namespace(cluster, "one").await;
        server.create_namespace(cluster, "two").await;
        for ns in ["one", "two"] {
            let collection = format!("/clusters/{cluster}/api/v1/namespaces/{ns}/configmaps");
            for i in 0..12 {
                let tier = if i % 3 == 0 { "gold" } else { "iron" };
                configmap(&server, &collection, &format!("cm-{i:02}"), tier).await;
            }
        }
    }
    let one = "/clusters/wc-a/api/v1/namespaces/one/configmaps";
    let list = same_as_storage(&server, one, "", "application/json").await;
    assert_eq!(names(&list).len(), 12);
    same_as_storage(
        &server,
        "/clusters/wc-a/api/v1/configmaps",
        "",
        "application/json",
    )
    .await;
    same_as_storage(
        &server,
        "/clusters/*/api/v1/configmaps",
        "",
        "application/json",
    )
    .await;
    let gold = same_as_storage(
        &server,
        one,
        "labelSelector=tier%3Dgold",
        "application/json",
    )
    .await;
    assert_eq!(names(&gold), ["cm-00", "cm-03", "cm-06", "cm-09"]);
    let named = same_as_storage(
        &server,
        "/clusters/wc-b/api/v1/configmaps",
        "fieldSelector=metadata.name%3Dcm-05,metadata.namespace!%3Done",
        "application/json",
    )
    .await;
    assert_eq!(names(&named), ["cm-05"]);
    same_as_storage(&server, one, "limit=5", "application/json").await;
    same_as_storage(
        &server,
        one,
        "labelSelector=tier%3Diron&limit=3",
        "application/json",
    )
    .await;
    same_as_storage(&server, one, "", TABLE).await;
    same_as_storage(&server, one, "", PROTOBUF).await;
    let namespaces = same_as_storage(
        &server,
        "/clusters/wc-b/api/v1/namespaces",
        "",
        "application/json",
    )
    .await;
    assert!(names(&namespaces).contains(&"two".to_string()));
    // Events share one storage between two APIs: served converted, like storage serves them.
    same_as_storage(
        &server,
        "/clusters/wc-a/apis/events.k8s.io/v1/events",
        "",
        "application/json",
    )
    .await;
}

#[tokio::test]
async fn pages_continue_across_the_cache_and_storage() {
    let server = SERVER.get().await;
    server.create_namespace("wc-pages", "p").await;
    let path = "/clusters/wc-pages/api/v1/namespaces/p/configmaps";
    for i in 0..11 {
        configmap(&server, path, &format!("cm-{i:02}"), "x").await;
    }
    let everything: Vec<String> = (0..11).map(|i| format!("cm-{i:02}")).collect();
    same_as_storage(&server, path, "", "application/json").await;

    // Pages read at one revision while nothing changes: the cache serves them all.
    let first = server.get(&format!("{path}?limit=4")).await.json();
    assert_eq!(all_pages(&server, path, first, 4).await, everything);

    // The type changes after the first page: the cache has moved on, storage continues at the
    // first page's revision, so the new object is not in this list.
    let first = server.get(&format!("{path}?limit=4")).await.json();
    configmap(&server, path, "cm-99", "x").await;
    assert_eq!(all_pages(&server, path, first, 4).await, everything);

    // A first page read from storage, continued while the cache still holds its revision.
    let everything: Vec<String> = everything
        .into_iter()
        .chain(["cm-99".to_string()])
        .collect();
    let current = revision_of(&server.get(path).await.json());
    let first = server
        .get(&format!(
            "{path}?limit=5&resourceVersion={current}&resourceVersionMatch=Exact"
        ))
        .await
        .json();
    assert_eq!(all_pages(&server, path, first, 5).await, everything);
}

#[tokio::test]
async fn resource_versions_mean_what_they_mean_in_kube() {
    let server = SERVER.get().await;
    server.create_namespace("wc-rv", "r").await;
    let path = "/clusters/wc-rv/api/v1/namespaces/r/configmaps";
    configmap(&server, path, "first", "x").await;
    same_as_storage(&server, path, "", "application/json").await;

    // Unset: consistent, a client reads its own writes at once.
    for i in 0..10 {
        let created = configmap(&server, path, &format!("w-{i}"), "x").await;
        let list = server.get(path).await.json();
        assert!(names(&list).contains(&format!("w-{i}")), "{list}");
        let created_at: i64 = created["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let listed_at: i64 = revision_of(&list).parse().unwrap();
        assert!(listed_at >= created_at);
    }
    // NotOlderThan a write: that write is in.
    let created = configmap(&server, path, "not-older", "x").await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let list = server
        .get(&format!(
            "{path}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
        ))
        .await
        .json();
    assert!(names(&list).contains(&"not-older".to_string()));
    // 0: any state, and whatever it is, it is storage's state at the revision it names.
    let any = server.get(&format!("{path}?resourceVersion=0")).await;
    assert_eq!(any.status, 200, "{}", any.text());
    let revision = revision_of(&any.json());
    let stored = server
        .get(&format!(
            "{path}?resourceVersion={revision}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(any.text(), stored.text());
    assert!(!names(&any.json()).is_empty());
    // A revision in the future: kube's 504 "Too large resource version".
    let future = server
        .get(&format!(
            "{path}?resourceVersion=999999999&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(future.status, 504, "{}", future.text());
    assert!(
        future.text().contains("Too large resource version"),
        "{}",
        future.text()
    );
    // Deletes leave the cache too.
    let deleted = server
        .send(
            Method::DELETE,
            &format!("{path}/first"),
            "application/json",
            "",
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let list = server.get(path).await.json();
    assert!(!names(&list).contains(&"first".to_string()));
}

#[tokio::test]
async fn custom_resources_are_served_with_their_defaults() {
    let server = SERVER.get().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.cache.kcp.io"},
        "spec": {"group": "cache.kcp.io", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "color": {"type": "string", "default": "blue"},
                        "size": {"type": "integer"}}}}}}}]}});
    server.install_crd("wc-crd", &crd).await;
    server.create_namespace("wc-crd", "g").await;
    let path = "/clusters/wc-crd/apis/cache.kcp.io/v1/namespaces/g/gadgets";
    for i in 0..6 {
        let body = json!({"apiVersion": "cache.kcp.io/v1", "kind": "Gadget",
            "metadata": {"name": format!("g-{i}"), "labels": {"even": (i % 2 == 0).to_string()}},
            "spec": {"size": i}});
        let created = server.send_json(Method::POST, path, &body).await;
        assert_eq!(created.status, 201, "{}", created.text());
    }
    let list = same_as_storage(&server, path, "", "application/json").await;
    assert_eq!(list["kind"], "GadgetList");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["spec"]["color"] == "blue")
    );
    let even = same_as_storage(
        &server,
        path,
        "labelSelector=even%3Dtrue",
        "application/json",
    )
    .await;
    assert_eq!(names(&even), ["g-0", "g-2", "g-4"]);
    same_as_storage(&server, path, "limit=4", "application/json").await;
    same_as_storage(&server, path, "", TABLE).await;

    // A changed definition: a new field's default applies on read to the objects stored before
    // it, from the cache as from storage.
    let crds = "/clusters/wc-crd/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let mut changed = server
        .get(&format!("{crds}/gadgets.cache.kcp.io"))
        .await
        .json();
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["shape"] = json!({"type": "string", "default": "round"});
    let updated = server
        .send_json(
            Method::PUT,
            &format!("{crds}/gadgets.cache.kcp.io"),
            &changed,
        )
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    server
        .wait_for("the new default on read", &format!("{path}/g-0"), |r| {
            r.status == 200 && r.json()["spec"]["shape"] == "round"
        })
        .await;
    let list = same_as_storage(&server, path, "", "application/json").await;
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["spec"]["shape"] == "round"),
        "{list}"
    );
}
