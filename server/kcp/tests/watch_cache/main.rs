//! The shared watch cache against a started `kcp`: lists ([`lists`]) and watches ([`watches`])
//! served from memory, compared with what storage answers. The tests share one server, each in its
//! own logical clusters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lists;
mod watches;

use kcp_testing::{KcpProcess, Response, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "watch-cache");

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Creates ConfigMap `name` in `collection`; returns it.
pub async fn configmap(server: &KcpProcess, collection: &str, name: &str, tier: &str) -> Value {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"tier": tier}}, "data": {"v": name}});
    let created = server.send_json(Method::POST, collection, &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    created.json()
}

pub async fn get_as(server: &KcpProcess, path: &str, accept: &str) -> Response {
    let request = server
        .admin()
        .client()
        .get(server.url(path))
        .header(reqwest::header::ACCEPT, accept);
    Response::send(request).await
}

pub fn with_query(path: &str, query: &str) -> String {
    if query.is_empty() {
        return path.to_string();
    }
    let separator = if path.contains('?') { '&' } else { '?' };
    format!("{path}{separator}{query}")
}

pub fn revision_of(list: &Value) -> String {
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion: {list}"))
        .to_string()
}

/// The names in a list, without the CA bundle ConfigMap a controller adds to every namespace.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|name| name != "kube-root-ca.crt")
        .collect()
}
