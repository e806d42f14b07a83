//! Watches served from the shared watch cache: the events a client reads over HTTP are those a
//! watch served by storage delivers (kube's cacher is checked against etcd the same way), in
//! JSON, protobuf and Table, with selectors (an object leaving the selection is DELETED), for a
//! custom resource whose defaults apply on read; a WatchList starts with the state and the
//! initial-events-end bookmark; `/metrics` shows which watches the cache serves; a client that
//! stops reading is cut off with a clean end of stream while the other watchers and the writes
//! go on; a revision compacted away answers 410 Gone (an ERROR event) as kube-apiserver's does.
//! Each test uses a custom resource of its own, so it decides when its type gets a cache.

use std::time::Duration;

use kcp_apimachinery::protobuf;
use kcp_testing::{KcpProcess, WatchStream};
use reqwest::Method;
use serde_json::{Value, json};

use super::{PROTOBUF, SERVER, revision_of};

/// A namespaced custom type in its own group (one cache per group and resource, server-wide).
fn crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("dials.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "dials", "singular": "dial", "kind": "Dial", "listKind": "DialList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "unit": {"type": "string", "default": "dB"},
                        "level": {"type": "integer"},
                        "note": {"type": "string"}}}}}}}]}})
}

fn dial(group: &str, name: &str, tier: &str, level: u64) -> Value {
    json!({"apiVersion": format!("{group}/v1"), "kind": "Dial",
        "metadata": {"name": name, "labels": {"tier": tier}}, "spec": {"level": level}})
}

/// One figure of `/metrics` for the type `resource` of `group`, if the server reports it.
async fn metric(server: &KcpProcess, name: &str, group: &str, resource: &str) -> Option<i64> {
    let metrics = server.get("/metrics").await;
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    let series = format!("{name}{{group=\"{group}\",resource=\"{resource}\"}} ");
    metrics
        .text()
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.trim().parse().unwrap())
}

/// Lists `path` until the type's cache has been filled (the second list creates it).
async fn cached(server: &KcpProcess, path: &str, group: &str, resource: &str) {
    for _ in 0..200 {
        assert_eq!(server.get(path).await.status, 200);
        let filled_at = "apiserver_watch_cache_resource_version";
        if metric(server, filled_at, group, resource)
            .await
            .is_some_and(|revision| revision > 0)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no watch cache for {path}");
}

async fn watchers(server: &KcpProcess, group: &str) -> i64 {
    metric(server, "kcp_watch_cache_watchers", group, "dials")
        .await
        .unwrap_or(0)
}

async fn open(server: &KcpProcess, path: &str, query: &str, accept: &str) -> reqwest::Response {
    let response = server
        .admin()
        .client()
        .get(server.url(&format!("{path}?watch=1&{query}")))
        .header(reqwest::header::ACCEPT, accept)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

async fn json_watch(server: &KcpProcess, path: &str, query: &str, accept: &str) -> WatchStream {
    let request = server
        .admin()
        .client()
        .get(server.url(&format!("{path}?watch=1&{query}")))
        .header(reqwest::header::ACCEPT, accept);
    WatchStream::open(request).await
}

fn revision(event: &Value) -> i64 {
    event["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Events of a JSON stream until one at `last` or later has been read.
async fn events_until(stream: &mut WatchStream, last: i64) -> Vec<Value> {
    let mut events = Vec::new();
    while events.last().is_none_or(|e| revision(e) < last) {
        let event = stream.expect_event().await;
        if event["type"] != "BOOKMARK" {
            events.push(event);
        }
    }
    events
}

/// Events of a protobuf stream until one at `last` or later, as JSON values.
async fn protobuf_events_until(response: &mut reqwest::Response, last: i64) -> Vec<Value> {
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    while events.last().is_none_or(|e: &Value| revision(e) < last) {
        while buffer.len() >= 4 {
            let length = u32::from_be_bytes(buffer[..4].try_into().unwrap()) as usize;
            if buffer.len() < 4 + length {
                break;
            }
            let frame: Vec<u8> = buffer.drain(..4 + length).collect();
            let (kind, object) = protobuf::decode_watch_event(&frame).unwrap();
            events.push(json!({"type": kind, "object": object}));
        }
        if events.last().is_some_and(|e: &Value| revision(e) >= last) {
            break;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(20), response.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        buffer.extend_from_slice(&chunk);
    }
    events
}

/// Creates, relabels, updates and deletes dials; returns the revision of the last write.
async fn writes(server: &KcpProcess, group: &str, path: &str, round: usize) -> i64 {
    let mut last = 0;
    let mut record = |response: kcp_testing::Response| {
        assert!(response.status < 300, "{}", response.text());
        last = response.json()["metadata"]["resourceVersion"]
            .as_str()
            .map_or(last, |rv| rv.parse().unwrap());
    };
    for i in 0..6 {
        let tier = if i % 2 == 0 { "a" } else { "b" };
        let body = dial(group, &format!("d{round}-{i}"), tier, i as u64);
        record(server.send_json(Method::POST, path, &body).await);
    }
    // d-0 leaves tier a, d-1 joins it, d-2 changes within it.
    for (i, tier) in [(0, "b"), (1, "a"), (2, "a")] {
        let name = format!("d{round}-{i}");
        let body = dial(group, &name, tier, 100 + i as u64);
        let url = format!("{path}/{name}");
        record(server.send_json(Method::PUT, &url, &body).await);
    }
    let deleted = server
        .send(
            Method::DELETE,
            &format!("{path}/d{round}-2"),
            "application/json",
            "",
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    // The deletion's revision is the DELETED event's; one more write marks the end.
    let body = dial(group, &format!("d{round}-end"), "a", 0);
    record(server.send_json(Method::POST, path, &body).await);
    last
}

/// The events after `after` (storage's reference watch started earlier).
fn after(events: &[Value], after: i64) -> Vec<Value> {
    events
        .iter()
        .filter(|e| revision(e) > after)
        .cloned()
        .collect()
}

#[tokio::test]
async fn watches_from_the_cache_deliver_what_storage_delivers() {
    let server = SERVER.get().await;
    let group = "deliver.watch.kcp.io";
    server.install_crd("wcw-deliver", &crd(group)).await;
    server.create_namespace("wcw-deliver", "w").await;
    let path = format!("/clusters/wcw-deliver/apis/{group}/v1/namespaces/w/dials");
    let created = server
        .send_json(Method::POST, &path, &dial(group, "first", "a", 1))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let first = created.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // References served by storage: the type is read for the first time, so it has no cache.
    let mut by_storage = json_watch(
        &server,
        &path,
        &format!("resourceVersion={first}"),
        "application/json",
    )
    .await;
    // A write after `first`, so the cache this second read creates starts after `first` and
    // cannot serve a watch from it (were nothing written meanwhile, it could).
    server.create_namespace("wcw-deliver", "after-first").await;
    let mut selected_by_storage = json_watch(
        &server,
        &path,
        &format!("resourceVersion={first}&labelSelector=tier%3Da"),
        "application/json",
    )
    .await;
    cached(&server, &path, group, "dials").await;
    assert_eq!(
        watchers(&server, group).await,
        0,
        "storage serves the references"
    );

    // From a revision the cache holds: served by the cache.
    let start = revision_of(&server.get(&path).await.json());
    let from = format!("resourceVersion={start}");
    let mut json = json_watch(&server, &path, &from, "application/json").await;
    let mut selected = json_watch(
        &server,
        &path,
        &format!("{from}&labelSelector=tier%3Da"),
        "application/json",
    )
    .await;
    let mut table = json_watch(
        &server,
        &path,
        &from,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(watchers(&server, group).await, 3);

    let last = writes(&server, group, &path, 0).await;
    let start: i64 = start.parse().unwrap();
    let expected = after(&events_until(&mut by_storage, last).await, start);
    assert_eq!(expected.len(), 11, "{expected:#?}");
    assert_eq!(events_until(&mut json, last).await, expected);
    let expected_selected = after(&events_until(&mut selected_by_storage, last).await, start);
    let kinds: Vec<&str> = expected_selected
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ADDED", "ADDED", "ADDED", "DELETED", "ADDED", "MODIFIED", "DELETED", "ADDED"
        ]
    );
    assert_eq!(events_until(&mut selected, last).await, expected_selected);
    // Table rows of the same objects, in the same order.
    let rows = events_until(&mut table, last).await;
    let row_names: Vec<&Value> = rows
        .iter()
        .map(|e| &e["object"]["rows"][0]["object"]["metadata"]["name"])
        .collect();
    let names: Vec<&Value> = expected
        .iter()
        .map(|e| &e["object"]["metadata"]["name"])
        .collect();
    assert_eq!(row_names, names);
    // The defaults of the schema apply on read, from the cache as from storage.
    assert!(expected.iter().all(|e| e["object"]["spec"]["unit"] == "dB"));

    drop((json, selected, table));
    for _ in 0..100 {
        if watchers(&server, group).await == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("closed watches are still counted");
}

#[tokio::test]
async fn protobuf_and_watch_list_from_the_cache() {
    let server = SERVER.get().await;
    server.create_namespace("wcw-proto", "p").await;
    let path = "/clusters/wcw-proto/api/v1/namespaces/p/configmaps";
    for i in 0..3 {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}")}, "data": {"i": i.to_string()}});
        assert_eq!(
            server.send_json(Method::POST, path, &body).await.status,
            201
        );
    }
    cached(&server, path, "core", "configmaps").await;
    let before = metric(&server, "kcp_watch_cache_watchers", "core", "configmaps")
        .await
        .unwrap();

    // A WatchList: the state, the end-of-initial-events bookmark, then the changes.
    let mut list = json_watch(
        &server,
        path,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        "application/json",
    )
    .await;
    let mut initial = Vec::new();
    let bookmark = loop {
        let event = list.expect_event().await;
        if event["type"] == "BOOKMARK" {
            break event;
        }
        assert_eq!(event["type"], "ADDED");
        initial.push(
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    };
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(initial.contains(&"cm-0".to_string()) && initial.contains(&"cm-2".to_string()));
    let start = bookmark["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut binary = open(&server, path, &format!("resourceVersion={start}"), PROTOBUF).await;
    assert_eq!(
        binary.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    // Every logical cluster's ConfigMaps (other tests write theirs meanwhile).
    let mut everywhere = json_watch(
        &server,
        "/clusters/*/api/v1/configmaps",
        &format!("resourceVersion={start}"),
        "application/json",
    )
    .await;
    assert_eq!(
        metric(&server, "kcp_watch_cache_watchers", "core", "configmaps")
            .await
            .unwrap(),
        before + 3,
        "all are served by the cache"
    );
    let mut last = 0;
    for i in 0..3 {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}")}, "data": {"i": "changed"}});
        let updated = server
            .send_json(Method::PUT, &format!("{path}/cm-{i}"), &body)
            .await;
        assert_eq!(updated.status, 200, "{}", updated.text());
        last = updated.json()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    }
    let json_events = events_until(&mut list, last).await;
    let protobuf_events = protobuf_events_until(&mut binary, last).await;
    assert_eq!(json_events.len(), 3);
    assert_eq!(protobuf_events, json_events);
    let here: Vec<Value> = events_until(&mut everywhere, last)
        .await
        .into_iter()
        .filter(|e| {
            e["object"]["metadata"]["annotations"]["kcp.io/cluster"] == "wcw-proto"
                && e["object"]["metadata"]["namespace"] == "p"
        })
        .collect();
    assert_eq!(here, json_events);
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_and_holds_nothing_up() {
    let server = SERVER.get().await;
    let group = "sluggish.watch.kcp.io";
    server.install_crd("wcw-slow", &crd(group)).await;
    server.create_namespace("wcw-slow", "s").await;
    let path = format!("/clusters/wcw-slow/apis/{group}/v1/namespaces/s/dials");
    let created = server
        .send_json(Method::POST, &path, &dial(group, "busy", "a", 0))
        .await;
    assert_eq!(created.status, 201);
    cached(&server, &path, group, "dials").await;
    let start = revision_of(&server.get(&path).await.json());
    let from = format!("resourceVersion={start}");
    // Opened, then never read while the writes go on.
    let mut stalled = open(&server, &path, &from, "application/json").await;
    let mut reader = json_watch(&server, &path, &from, "application/json").await;
    assert_eq!(watchers(&server, group).await, 2);

    // Objects of ~8 KiB: the sockets' buffers fill first, then the watcher's 1,024 events.
    let note = "n".repeat(8 * 1024);
    let mut written = Vec::new();
    let mut cut = false;
    for level in 1..=4000u64 {
        let mut body = dial(group, "busy", "a", level);
        body["spec"]["note"] = json!(note);
        let updated = server
            .send_json(Method::PUT, &format!("{path}/busy"), &body)
            .await;
        assert_eq!(updated.status, 200, "{}", updated.text());
        written.push(revision(&json!({"object": updated.json()})));
        // The reading watcher keeps up with every write.
        let event = reader.expect_event().await;
        assert_eq!(revision(&event), *written.last().unwrap());
        if level % 100 == 0
            && metric(
                &server,
                "apiserver_terminated_watchers_total",
                group,
                "dials",
            )
            .await
            .is_some_and(|n| n >= 1)
        {
            cut = true;
            break;
        }
    }
    assert!(cut, "the stalled watcher was never cut off");
    assert_eq!(watchers(&server, group).await, 1);

    // What the stalled client reads now: events in order without a gap, then a clean end.
    let mut buffer = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), stalled.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        buffer.extend_from_slice(&chunk);
    }
    let received: Vec<i64> = serde_json::Deserializer::from_slice(&buffer)
        .into_iter::<Value>()
        .map(|event| revision(&event.unwrap()))
        .collect();
    assert!(received.len() > 1000, "{} events", received.len());
    assert_eq!(received[..], written[..received.len()]);
}

#[tokio::test]
async fn a_watch_from_a_compacted_revision_is_gone_as_in_kube() {
    let mut server = KcpProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_kcp")),
        "watch-cache-compaction",
        &["--etcd-compaction-interval=1s".to_string()],
    )
    .await;
    server.create_namespace("root", "old").await;
    let path = "/clusters/root/api/v1/namespaces/old/configmaps";
    let body = |v: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"v": v.to_string()}})
    };
    let created = server.send_json(Method::POST, path, &body(0)).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let old = revision(&json!({"object": created.json()}));
    for v in 1..4 {
        let updated = server
            .send_json(Method::PUT, &format!("{path}/c"), &body(v))
            .await;
        assert_eq!(updated.status, 200, "{}", updated.text());
    }
    cached(&server, path, "core", "configmaps").await;

    // Once compacted, the old revision is neither in the cache's history (filled after it) nor in
    // storage's: 410 Gone as an ERROR event, and the client lists again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let gone = loop {
        let mut watch = json_watch(
            &server,
            path,
            &format!("resourceVersion={old}"),
            "application/json",
        )
        .await;
        let first = watch.expect_event().await;
        if first["type"] == "ERROR" {
            break first;
        }
        assert!(tokio::time::Instant::now() < deadline, "never compacted");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(gone["object"]["code"], 410, "{gone}");
    assert_eq!(gone["object"]["reason"], "Expired", "{gone}");

    // A revision the cache holds is served as before.
    let current = revision_of(&server.get(path).await.json());
    let mut watch = json_watch(
        &server,
        path,
        &format!("resourceVersion={current}"),
        "application/json",
    )
    .await;
    let updated = server
        .send_json(Method::PUT, &format!("{path}/c"), &body(9))
        .await;
    assert_eq!(updated.status, 200);
    let event = watch.expect_event().await;
    assert_eq!(event["object"]["data"]["v"], "9");
    server.stop_cleanly().await;
}
