//! WatchList and protobuf watch streams against a started `kcp`, as client-go's informers and
//! kube-rs's watcher use them.
//!
//! client-go's informers open `?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
//! allowWatchBookmarks=true` (no resourceVersion) and wait for the BOOKMARK annotated
//! `k8s.io/initial-events-end` before they call themselves synced; its typed clients ask for
//! protobuf and pick the stream decoder by the response's Content-Type
//! (`application/vnd.kubernetes.protobuf;stream=watch`, as kube-apiserver's watch handler answers).
//! These tests read the streams as raw bytes (JSON lines; 4-byte big-endian length-prefixed
//! `metav1.WatchEvent` frames decoded here by hand, not with the server's codec), check kube's
//! validation errors for list and watch options (422 `ListOptions.meta.k8s.io`), and run kube-rs's
//! `watcher` with `streaming_lists()` and the Python `kubernetes` client's `watch.Watch` as
//! independent clients (the latter pinned, installed once with pip into a virtual environment in
//! the target directory, as PyPI is reachable wherever the tests run). The scenarios share one
//! server; each works in its own namespace or logical cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "watch-list");

/// The informer's WatchList request, as client-go sends it.
const INFORMER: &str =
    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// How long a test waits for one event.
const EVENT_WITHIN: Duration = Duration::from_secs(30);

fn configmap(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"watch-list": "yes"}},
        "data": {"v": value},
    })
}

/// Creates a ConfigMap in `collection` and returns its resourceVersion.
async fn create(server: &KcpProcess, collection: &str, name: &str) -> u64 {
    let created = server
        .send_json(Method::POST, collection, &configmap(name, "1"))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    revision_of(&created.json())
}

fn revision_of(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no numeric resourceVersion: {object}"))
}

/// One watch event: its type, the object's name, resourceVersion and annotations.
#[derive(Debug, Clone)]
struct Event {
    kind: String,
    name: String,
    resource_version: u64,
    annotations: Vec<(String, String)>,
    /// The whole object (JSON streams only).
    object: Value,
}

impl Event {
    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// An open watch read as raw bytes, in either framing.
struct RawWatch {
    response: reqwest::Response,
    content_type: String,
    buffer: Vec<u8>,
}

impl RawWatch {
    async fn open(server: &KcpProcess, path: &str, accept: &str) -> RawWatch {
        let response = server
            .admin()
            .client()
            .get(server.url(path))
            .header(reqwest::header::ACCEPT, accept)
            .send()
            .await
            .expect("opening a watch");
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            panic!("watch {path} answered {status}: {body}");
        }
        RawWatch {
            response,
            content_type,
            buffer: Vec::new(),
        }
    }

    async fn fill(&mut self) {
        let chunk = tokio::time::timeout(EVENT_WITHIN, self.response.chunk())
            .await
            .expect("no watch event in time")
            .expect("the watch stream broke")
            .expect("the watch stream ended");
        self.buffer.extend_from_slice(&chunk);
    }

    /// The next event, in the framing the Content-Type names.
    async fn next(&mut self) -> Event {
        if self.content_type.starts_with(PROTOBUF) {
            self.next_protobuf().await
        } else {
            self.next_json().await
        }
    }

    /// The next JSON event line.
    async fn next_json(&mut self) -> Event {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let event: Value = serde_json::from_slice(&line).unwrap_or_else(|error| {
                    panic!(
                        "not a JSON event ({error}): {}",
                        String::from_utf8_lossy(&line)
                    )
                });
                let object = event["object"].clone();
                let annotations = object["metadata"]["annotations"]
                    .as_object()
                    .map(|map| {
                        map.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                            .collect()
                    })
                    .unwrap_or_default();
                return Event {
                    kind: event["type"].as_str().expect("an event type").to_owned(),
                    name: object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    resource_version: object["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|rv| rv.parse().ok())
                        .unwrap_or_default(),
                    annotations,
                    object,
                };
            }
            self.fill().await;
        }
    }

    /// The next protobuf frame: 4-byte big-endian length, then a `metav1.WatchEvent`.
    async fn next_protobuf(&mut self) -> Event {
        loop {
            if self.buffer.len() >= 4 {
                let length = u32::from_be_bytes(self.buffer[..4].try_into().unwrap()) as usize;
                if self.buffer.len() >= 4 + length {
                    let frame: Vec<u8> = self.buffer.drain(..4 + length).collect();
                    return decode_watch_event(&frame[4..]);
                }
            }
            self.fill().await;
        }
    }
}

/// One protobuf field's value (length-delimited fields keep their bytes).
enum Field<'a> {
    Varint,
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = buf[*pos];
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

/// Every field of a protobuf message, in wire order.
fn fields(buf: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let tag = varint(buf, &mut pos);
        let field = match tag & 7 {
            0 => {
                varint(buf, &mut pos);
                Field::Varint
            }
            2 => {
                let length = usize::try_from(varint(buf, &mut pos)).unwrap();
                let bytes = &buf[pos..pos + length];
                pos += length;
                Field::Bytes(bytes)
            }
            1 => {
                pos += 8;
                Field::Fixed
            }
            5 => {
                pos += 4;
                Field::Fixed
            }
            other => panic!("unexpected wire type {other}"),
        };
        out.push((tag >> 3, field));
    }
    out
}

fn string_field(buf: &[u8], number: u64) -> Option<String> {
    fields(buf).into_iter().find_map(|(n, f)| match f {
        Field::Bytes(b) if n == number => Some(String::from_utf8(b.to_vec()).unwrap()),
        _ => None,
    })
}

fn bytes_field(buf: &[u8], number: u64) -> Option<&[u8]> {
    fields(buf).into_iter().find_map(|(n, f)| match f {
        Field::Bytes(b) if n == number => Some(b),
        _ => None,
    })
}

/// `metav1.WatchEvent{type: 1, object: 2 (RawExtension{raw: 1})}`, whose raw bytes are `k8s\0`
/// then `runtime.Unknown{typeMeta: 1 {apiVersion: 1, kind: 2}, raw: 2}`; the raw object's field 1
/// is its ObjectMeta (name 1, resourceVersion 6, annotations 12).
fn decode_watch_event(message: &[u8]) -> Event {
    let kind = string_field(message, 1).expect("WatchEvent.type");
    let extension = bytes_field(message, 2).expect("WatchEvent.object");
    let raw = bytes_field(extension, 1).expect("RawExtension.raw");
    let unknown = raw
        .strip_prefix(b"k8s\0")
        .unwrap_or_else(|| panic!("the embedded object lacks the k8s magic: {raw:?}"));
    let type_meta = bytes_field(unknown, 1).expect("Unknown.typeMeta");
    let object_kind = string_field(type_meta, 2).expect("TypeMeta.kind");
    let object = bytes_field(unknown, 2).expect("Unknown.raw");
    if kind == "ERROR" {
        panic!("ERROR event: {}", String::from_utf8_lossy(object));
    }
    assert_eq!(object_kind, "ConfigMap", "{kind} event");
    assert_eq!(
        string_field(type_meta, 1).as_deref(),
        Some("v1"),
        "TypeMeta.apiVersion"
    );
    let meta = bytes_field(object, 1).expect("ObjectMeta");
    let annotations = fields(meta)
        .into_iter()
        .filter_map(|(n, f)| match f {
            Field::Bytes(entry) if n == 12 => Some((
                string_field(entry, 1).unwrap_or_default(),
                string_field(entry, 2).unwrap_or_default(),
            )),
            _ => None,
        })
        .collect();
    Event {
        kind,
        name: string_field(meta, 1).unwrap_or_default(),
        resource_version: string_field(meta, 6)
            .and_then(|rv| rv.parse().ok())
            .unwrap_or_default(),
        annotations,
        object: Value::Null,
    }
}

/// Reads the initial events up to the initial-events-end bookmark; returns the ADDED names (sorted)
/// and the bookmark.
async fn initial_events(watch: &mut RawWatch) -> (Vec<String>, Event) {
    let mut added = Vec::new();
    loop {
        let event = watch.next().await;
        match event.kind.as_str() {
            "ADDED" => added.push(event.name),
            "BOOKMARK" => {
                assert_eq!(
                    event.annotation("k8s.io/initial-events-end"),
                    Some("true"),
                    "the first bookmark ends the initial events: {event:?}"
                );
                added.sort();
                return (added, event);
            }
            other => panic!("unexpected {other} among the initial events: {event:?}"),
        }
    }
}

/// (a) client-go's informer request over JSON: 200 `application/json`, ADDED for each object, the
/// annotated bookmark at the list's revision, then live events from right after it.
#[tokio::test]
async fn informer_watch_list_over_json() {
    let server = SERVER.get().await;
    server.create_namespace("root", "wl-json").await;
    let collection = "/clusters/root/api/v1/namespaces/wl-json/configmaps";
    create(&server, collection, "a").await;
    let last = create(&server, collection, "b").await;
    let path = format!("{collection}?{INFORMER}&labelSelector=watch-list%3Dyes");
    let mut watch = RawWatch::open(&server, &path, "application/json").await;
    assert_eq!(watch.content_type, "application/json");
    let (added, bookmark) = initial_events(&mut watch).await;
    assert_eq!(added, ["a", "b"]);
    assert!(bookmark.resource_version >= last, "{bookmark:?}");
    assert_eq!(bookmark.object["kind"], "ConfigMap");
    assert_eq!(bookmark.object["apiVersion"], "v1");

    let c = create(&server, collection, "c").await;
    let live = watch.next_json().await;
    assert_eq!(
        (
            live.kind.as_str(),
            live.name.as_str(),
            live.resource_version
        ),
        ("ADDED", "c", c),
        "the first live event is the create, nothing repeated: {live:?}"
    );
    assert!(live.resource_version > bookmark.resource_version);
    let patched = server
        .send(
            Method::PATCH,
            &format!("{collection}/a"),
            "application/merge-patch+json",
            r#"{"data":{"v":"2"}}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let live = watch.next_json().await;
    assert_eq!((live.kind.as_str(), live.name.as_str()), ("MODIFIED", "a"));
    assert_eq!(live.object["data"]["v"], "2");
}

/// (b) The same request over protobuf: `application/vnd.kubernetes.protobuf;stream=watch`, read
/// frame by frame.
#[tokio::test]
async fn informer_watch_list_over_protobuf() {
    let server = SERVER.get().await;
    server.create_namespace("root", "wl-proto").await;
    let collection = "/clusters/root/api/v1/namespaces/wl-proto/configmaps";
    create(&server, collection, "a").await;
    let last = create(&server, collection, "b").await;
    let path = format!("{collection}?{INFORMER}&labelSelector=watch-list%3Dyes");
    let accept = format!("{PROTOBUF}, application/json");
    let mut watch = RawWatch::open(&server, &path, &accept).await;
    assert_eq!(
        watch.content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let (added, bookmark) = initial_events(&mut watch).await;
    assert_eq!(added, ["a", "b"]);
    assert!(bookmark.resource_version >= last, "{bookmark:?}");

    let c = create(&server, collection, "c").await;
    let live = watch.next_protobuf().await;
    assert_eq!(
        (
            live.kind.as_str(),
            live.name.as_str(),
            live.resource_version
        ),
        ("ADDED", "c", c)
    );
    let deleted = server
        .send(
            Method::DELETE,
            &format!("{collection}/b"),
            "application/json",
            "",
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let live = watch.next_protobuf().await;
    assert_eq!((live.kind.as_str(), live.name.as_str()), ("DELETED", "b"));

    // A plain protobuf watch from a revision: the same framing and media type, no initial events.
    let path = format!("{collection}?watch=1&resourceVersion={c}");
    let mut watch = RawWatch::open(&server, &path, &accept).await;
    assert_eq!(
        watch.content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let next = watch.next_protobuf().await;
    assert_eq!((next.kind.as_str(), next.name.as_str()), ("DELETED", "b"));
}

/// Table and PartialObjectMetadata watches are JSON streams, answered as `application/json` (kube's
/// stream serializer media type, whatever `as=` asked for), WatchList included.
#[tokio::test]
async fn table_and_metadata_watches_are_json() {
    let server = SERVER.get().await;
    server.create_namespace("root", "wl-as").await;
    let collection = "/clusters/root/api/v1/namespaces/wl-as/configmaps";
    create(&server, collection, "a").await;
    let path = format!("{collection}?{INFORMER}&labelSelector=watch-list%3Dyes");
    for (accept, kind) in [
        ("application/json;as=Table;v=v1;g=meta.k8s.io", "Table"),
        (
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            "PartialObjectMetadata",
        ),
    ] {
        let mut watch = RawWatch::open(&server, &path, accept).await;
        assert_eq!(watch.content_type, "application/json", "{accept}");
        let first = watch.next_json().await;
        assert_eq!(first.kind, "ADDED", "{accept}");
        assert_eq!(first.object["kind"], kind, "{accept}: {}", first.object);
        let bookmark = watch.next_json().await;
        assert_eq!(bookmark.kind, "BOOKMARK", "{accept}");
        assert_eq!(
            bookmark.annotation("k8s.io/initial-events-end"),
            Some("true"),
            "{accept}"
        );
    }
}

/// `resourceVersion` with `sendInitialEvents`: `N` is "not older than N" (the current state, then
/// what follows), `sendInitialEvents=false` with `N` is a plain watch from N, and an `N` the store
/// has not reached ends the stream with kube's Timeout.
#[tokio::test]
async fn resource_version_rules() {
    let server = SERVER.get().await;
    server.create_namespace("root", "wl-rv").await;
    let collection = "/clusters/root/api/v1/namespaces/wl-rv/configmaps";
    let first = create(&server, collection, "a").await;
    let second = create(&server, collection, "b").await;
    let selector = "labelSelector=watch-list%3Dyes";

    for rv in [first.to_string(), "0".to_owned()] {
        let path = format!("{collection}?{INFORMER}&resourceVersion={rv}&{selector}");
        let mut watch = RawWatch::open(&server, &path, "application/json").await;
        let (added, bookmark) = initial_events(&mut watch).await;
        assert_eq!(added, ["a", "b"], "resourceVersion={rv}");
        assert!(bookmark.resource_version >= second, "resourceVersion={rv}");
    }

    let path = format!(
        "{collection}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan\
         &allowWatchBookmarks=true&resourceVersion={first}&{selector}"
    );
    let mut watch = RawWatch::open(&server, &path, "application/json").await;
    let next = watch.next_json().await;
    assert_eq!(
        (
            next.kind.as_str(),
            next.name.as_str(),
            next.resource_version
        ),
        ("ADDED", "b", second),
        "a plain watch from {first}"
    );

    // Without allowWatchBookmarks kube sends the initial events but no bookmark.
    let path = format!(
        "{collection}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&{selector}"
    );
    let mut watch = RawWatch::open(&server, &path, "application/json").await;
    let mut names = vec![watch.next_json().await.name, watch.next_json().await.name];
    names.sort();
    assert_eq!(names, ["a", "b"]);
    let c = create(&server, collection, "c").await;
    let next = watch.next_json().await;
    assert_eq!(
        (
            next.kind.as_str(),
            next.name.as_str(),
            next.resource_version
        ),
        ("ADDED", "c", c)
    );

    let future = second + 1_000_000;
    let path = format!("{collection}?{INFORMER}&resourceVersion={future}");
    let mut watch = RawWatch::open(&server, &path, "application/json").await;
    let error = watch.next_json().await;
    assert_eq!(error.kind, "ERROR");
    assert_eq!(error.object["code"], 504, "{}", error.object);
    assert_eq!(error.object["reason"], "Timeout");
    assert!(
        error.object["message"]
            .as_str()
            .unwrap()
            .contains("Too large resource version"),
        "{}",
        error.object
    );
}

/// The informer request across every logical cluster (`/clusters/*`): the initial state of each,
/// annotated with its cluster, then the bookmark and live events.
#[tokio::test]
async fn cross_cluster_watch_list() {
    let server = SERVER.get().await;
    server.create_namespace("wl-one", "shared").await;
    server.create_namespace("wl-two", "shared").await;
    create(
        &server,
        "/clusters/wl-one/api/v1/namespaces/shared/configmaps",
        "one",
    )
    .await;
    create(
        &server,
        "/clusters/wl-two/api/v1/namespaces/shared/configmaps",
        "two",
    )
    .await;
    let path = format!("/clusters/*/api/v1/configmaps?{INFORMER}&labelSelector=watch-list%3Dyes");
    let mut watch = RawWatch::open(&server, &path, "application/json").await;
    let mut clusters = Vec::new();
    loop {
        let event = watch.next_json().await;
        match event.kind.as_str() {
            "ADDED" => {
                if matches!(event.name.as_str(), "one" | "two") {
                    clusters.push((
                        event.name.clone(),
                        event
                            .annotation("kcp.io/cluster")
                            .unwrap_or_default()
                            .to_owned(),
                    ));
                }
            }
            "BOOKMARK" => {
                assert_eq!(event.annotation("k8s.io/initial-events-end"), Some("true"));
                break;
            }
            other => panic!("unexpected {other}: {event:?}"),
        }
    }
    clusters.sort();
    assert_eq!(
        clusters,
        [
            ("one".to_owned(), "wl-one".to_owned()),
            ("two".to_owned(), "wl-two".to_owned())
        ]
    );
    create(
        &server,
        "/clusters/wl-two/api/v1/namespaces/shared/configmaps",
        "three",
    )
    .await;
    loop {
        let event = watch.next_json().await;
        if event.name == "three" {
            assert_eq!(event.kind, "ADDED");
            assert_eq!(event.annotation("kcp.io/cluster"), Some("wl-two"));
            break;
        }
    }
}

/// (c) kube's validation of list and watch options: 422 Invalid `ListOptions.meta.k8s.io`.
#[tokio::test]
async fn invalid_options_are_kubes_422() {
    let server = SERVER.get().await;
    let collection = "/clusters/root/api/v1/namespaces/default/configmaps";
    let prefix = "ListOptions.meta.k8s.io \"\" is invalid: ";
    for (query, message) in [
        (
            "watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=1",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true",
            "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, \
             resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]",
        ),
        (
            "sendInitialEvents=true",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0",
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ),
    ] {
        let response = server.get(&format!("{collection}?{query}")).await;
        assert_eq!(response.status, 422, "{query}: {}", response.text());
        let status = response.json();
        assert_eq!(status["kind"], "Status", "{query}");
        assert_eq!(status["reason"], "Invalid", "{query}");
        assert_eq!(status["details"]["kind"], "ListOptions", "{query}");
        assert_eq!(status["details"]["group"], "meta.k8s.io", "{query}");
        assert_eq!(
            status["message"],
            format!("{prefix}{message}"),
            "{query}: {status}"
        );
        assert!(
            status["details"]["causes"][0]["field"]
                .as_str()
                .is_some_and(|f| f == "resourceVersionMatch" || f == "sendInitialEvents"),
            "{query}: {status}"
        );
    }
}

/// (d) kube-rs's `watcher` with `streaming_lists()` (a WatchList): Init, InitApply for each object,
/// InitDone, then the change made afterwards.
#[tokio::test]
async fn kube_rs_streaming_list() {
    use kube::runtime::watcher::{self, Event as WatcherEvent};

    let server = SERVER.get().await;
    server.create_namespace("root", "wl-kube-rs").await;
    let collection = "/clusters/root/api/v1/namespaces/wl-kube-rs/configmaps";
    create(&server, collection, "first").await;
    create(&server, collection, "second").await;

    let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig())
        .expect("reading the admin kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a kube config");
    config.cluster_url = format!("{}/clusters/root", server.base_url())
        .parse()
        .expect("a cluster URL");
    let client = kube::Client::try_from(config).expect("a kube client");
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "wl-kube-rs");
    let stream = watcher::watcher(
        api,
        watcher::Config::default()
            .streaming_lists()
            .labels("watch-list=yes"),
    );
    let mut stream = std::pin::pin!(stream);
    let mut next = async || {
        tokio::time::timeout(EVENT_WITHIN, stream.next())
            .await
            .expect("a watcher event in time")
            .expect("the watcher stream ended")
            .expect("a watcher error")
    };
    assert!(matches!(next().await, WatcherEvent::Init));
    let mut initial = Vec::new();
    loop {
        match next().await {
            WatcherEvent::InitApply(cm) => initial.push(cm.metadata.name.unwrap()),
            WatcherEvent::InitDone => break,
            other => panic!("unexpected event during the initial list: {other:?}"),
        }
    }
    initial.sort();
    assert_eq!(initial, ["first", "second"]);
    create(&server, collection, "third").await;
    match next().await {
        WatcherEvent::Apply(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("third")),
        other => panic!("expected the new object, got {other:?}"),
    }
}

/// The Python scenario: a WatchList through `watch.Watch().stream`, printing one JSON line per
/// event; after the initial-events-end bookmark it creates `later` and stops once it sees it.
const PYTHON_WATCH: &str = r#"
import json, sys
from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
namespace = sys.argv[2]
v1 = client.CoreV1Api()
w = watch.Watch()
for event in w.stream(v1.list_namespaced_config_map, namespace,
                      label_selector="watch-list=yes", send_initial_events=True,
                      resource_version_match="NotOlderThan", allow_watch_bookmarks=True,
                      timeout_seconds=60):
    raw = event["raw_object"]
    if event["type"] == "BOOKMARK":
        end = (raw["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end")
        print(json.dumps({"type": "BOOKMARK", "end": end}), flush=True)
        if end == "true":
            v1.create_namespaced_config_map(namespace, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="later", labels={"watch-list": "yes"})))
        continue
    name = event["object"].metadata.name
    print(json.dumps({"type": event["type"], "name": name}), flush=True)
    if name == "later":
        w.stop()
"#;

/// (e) The Python `kubernetes` client's watch with sendInitialEvents: the initial objects, the
/// annotated bookmark, then the object it created.
#[tokio::test]
async fn python_kubernetes_watch_list() {
    let server = SERVER.get().await;
    server.create_namespace("root", "wl-python").await;
    let collection = "/clusters/root/api/v1/namespaces/wl-python/configmaps";
    create(&server, collection, "a").await;
    create(&server, collection, "b").await;
    let python = tokio::task::spawn_blocking(kcp_testing::python::with_kubernetes)
        .await
        .unwrap();
    let dir = kcp_testing::temp_dir("watch-list-python");
    let script = dir.path().join("watch.py");
    std::fs::write(&script, PYTHON_WATCH).unwrap();
    // The script's watch has timeoutSeconds=60, which bounds it.
    let kubeconfig = server.kubeconfig();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg(&script)
            .arg(kubeconfig)
            .arg("wl-python")
            .output()
            .expect("running the Python watch")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let mut initial: Vec<&str> = events[..2]
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "ADDED", "{stdout}");
            e["name"].as_str().unwrap()
        })
        .collect();
    initial.sort_unstable();
    assert_eq!(initial, ["a", "b"], "{stdout}");
    assert_eq!(
        events[2],
        json!({"type": "BOOKMARK", "end": "true"}),
        "{stdout}"
    );
    assert_eq!(
        events[3],
        json!({"type": "ADDED", "name": "later"}),
        "{stdout}"
    );
    assert_eq!(events.len(), 4, "{stdout}");
}

/// YAML has no stream form: a watch that accepts only YAML is refused 406 (naming the stream
/// encodings), one that also accepts JSON gets JSON, as kube-apiserver negotiates watches.
#[tokio::test]
async fn yaml_watches_fall_back_or_are_refused() {
    let server = SERVER.get().await;
    server.create_namespace("root", "wl-yaml").await;
    let path = "/clusters/root/api/v1/namespaces/wl-yaml/configmaps?watch=1";
    let refused = Response::send(
        server
            .admin()
            .client()
            .get(server.url(path))
            .header(reqwest::header::ACCEPT, "application/yaml"),
    )
    .await;
    assert_eq!(refused.status, 406, "{}", refused.text());
    assert_eq!(
        refused.json()["message"],
        "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf"
    );
    let mut watch = RawWatch::open(&server, path, "application/yaml, application/json").await;
    assert_eq!(watch.content_type, "application/json");
    create(
        &server,
        "/clusters/root/api/v1/namespaces/wl-yaml/configmaps",
        "y",
    )
    .await;
    assert_eq!(watch.next_json().await.kind, "ADDED");
}
