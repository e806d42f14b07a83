//! The in-memory API server the reconcile tests run against (`tower_test::mock::pair`): every
//! request is recorded as `METHOD path[?query]`; GET returns what was stored, server-side apply
//! stores the applied object as a real API server returns it (see [`as_stored`]), a status merge
//! patch merges into the status, a merge patch merges, a create stores (409 when the name is
//! taken), and a GET of a namespaced collection (or with a label selector) lists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod limits;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

/// The in-memory API server and the log of requests it served.
#[derive(Clone, Default)]
pub struct FakeApi {
    pub objects: Arc<Mutex<BTreeMap<String, Value>>>,
    pub log: Arc<Mutex<Vec<String>>>,
    pub bodies: Arc<Mutex<Vec<(String, Value)>>>,
    /// Answer every request with 503, like a server that cannot be reached.
    pub unavailable: Arc<std::sync::atomic::AtomicBool>,
}

impl FakeApi {
    pub fn put(&self, path: &str, object: Value) {
        self.objects
            .lock()
            .expect("lock")
            .insert(path.to_owned(), object);
    }

    pub fn get(&self, path: &str) -> Value {
        self.objects
            .lock()
            .expect("lock")
            .get(path)
            .cloned()
            .expect("stored")
    }

    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().expect("lock"))
    }

    pub fn body_of(&self, entry: &str) -> Value {
        self.bodies
            .lock()
            .expect("lock")
            .iter()
            .rev()
            .find(|(logged, _)| logged == entry)
            .map(|(_, body)| body.clone())
            .expect("request was sent")
    }

    fn respond(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Value,
    ) -> (StatusCode, Value) {
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
                        merge(&mut object["status"], &body["status"]);
                        (StatusCode::OK, object.clone())
                    }
                    None => (StatusCode::NOT_FOUND, not_found),
                }
            }
            "PATCH" if content_type == "application/merge-patch+json" => {
                match objects.get_mut(path) {
                    Some(object) => {
                        merge(object, &body);
                        (StatusCode::OK, object.clone())
                    }
                    None => (StatusCode::NOT_FOUND, not_found),
                }
            }
            "PATCH" => {
                let stored = as_stored(&body);
                objects.insert(path.to_owned(), stored.clone());
                (StatusCode::OK, stored)
            }
            "DELETE" => match objects.remove(path) {
                Some(object) => (StatusCode::OK, object),
                None => (StatusCode::NOT_FOUND, not_found),
            },
            "POST" => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default();
                let object_path = format!("{path}/{name}");
                if objects.contains_key(&object_path) {
                    let exists = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409});
                    return (StatusCode::CONFLICT, exists);
                }
                let stored = as_stored(&body);
                objects.insert(object_path, stored.clone());
                (StatusCode::CREATED, stored)
            }
            _ => (StatusCode::METHOD_NOT_ALLOWED, not_found),
        }
    }

    /// The objects below collection `path` that carry the `key=value` label of the query.
    fn list(&self, path: &str, query: &str) -> (StatusCode, Value) {
        let selector = query
            .trim_start_matches('?')
            .split('&')
            .find_map(|pair| pair.strip_prefix("labelSelector="))
            .map(|s| s.replace("%3D", "=").replace("%2F", "/"))
            .unwrap_or_default();
        let (key, value) = selector.split_once('=').unwrap_or_default();
        let objects = self.objects.lock().expect("lock");
        let items: Vec<Value> = objects
            .iter()
            .filter(|(stored, object)| {
                stored.starts_with(&format!("{path}/"))
                    && (selector.is_empty() || object["metadata"]["labels"][key] == value)
            })
            .map(|(_, object)| object.clone())
            .collect();
        (
            StatusCode::OK,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}),
        )
    }

    /// A client whose requests this fake serves until the client is dropped.
    pub fn client(&self) -> kube::Client {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let fake = self.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let method = request.method().to_string();
                let path = request.uri().path().to_owned();
                let content_type = request
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
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
                let (status, response) = if fake
                    .unavailable
                    .load(std::sync::atomic::Ordering::SeqCst)
                {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "ServiceUnavailable", "code": 503}),
                    )
                } else if method == "GET"
                    && (query.contains("labelSelector=") || is_namespaced_collection(&path))
                {
                    fake.list(&path, &query)
                } else {
                    fake.respond(&method, &path, &content_type, body)
                };
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

/// Whether `path` names a collection in a namespace (`.../namespaces/<ns>/<plural>`), which a
/// GET lists.
fn is_namespaced_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    segments
        .iter()
        .position(|segment| *segment == "namespaces")
        .is_some_and(|at| segments.len() == at + 3)
}

/// Fields whose Go type is a pointer (`*bool`): a real server keeps them when false.
const POINTER_BOOLS: [&str; 6] = [
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "runAsNonRoot",
    "automountServiceAccountToken",
    "optional",
    "privileged",
];

/// `object` as a real API server stores and returns it: Go's `omitempty` drops a `false` of a
/// plain `bool` (a mount's `readOnly: false`), an empty string and an empty list, so a desired
/// object that renders them never matches what the server hands back.
pub fn as_stored(object: &Value) -> Value {
    match object {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, value)| match value {
                    Value::Bool(false) => POINTER_BOOLS.contains(&key.as_str()),
                    Value::String(text) => !text.is_empty(),
                    Value::Array(items) => !items.is_empty(),
                    _ => true,
                })
                .map(|(key, value)| (key.clone(), as_stored(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(as_stored).collect()),
        other => other.clone(),
    }
}

/// JSON merge patch (RFC 7386).
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch.clone(),
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
