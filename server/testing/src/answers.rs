//! Reading the answers of a Kubernetes API: failure Statuses, lists of strings, the names of a
//! list's items.

use serde_json::Value;

use crate::http::Response;

/// `response` is a Status with `code` and `reason`; returns its message.
pub fn expect_status(what: &str, response: &Response, code: u16, reason: &str) -> String {
    assert_eq!(response.status, code, "{what}: {}", response.text());
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    status["message"].as_str().unwrap_or_default().to_owned()
}

/// The strings of a JSON array (empty when absent).
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the items of a list answer (empty when it has none).
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
