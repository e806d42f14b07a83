//! kube's own checks of what the operator writes, which a real API server applies and the
//! in-memory one does not: the object is a valid instance of its k8s-openapi (`v1_35`) type (a
//! round trip through the type keeps every field, so nothing is misspelled or unknown), names
//! fit (DNS subdomains of at most 253 characters, DNS labels of at most 63 for Services and
//! StatefulSets, path segments for RBAC), labels are qualified names with values of at most 63 characters, annotations
//! total at most 256 KiB, and an Event's note has at most 1024 characters.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Checks the object stored at `path`; returns its kind, or `None` for a kind not checked here
/// (the operator's own custom resources, kcp's) or one without a name (a test's fixture).
pub fn check(path: &str, object: &Value) -> Option<&'static str> {
    object.pointer("/metadata/name")?;
    let collection = path.rsplit('/').nth(1)?;
    let kind = match collection {
        "secrets" => round_trip::<Secret>(object, "Secret"),
        "configmaps" => round_trip::<ConfigMap>(object, "ConfigMap"),
        "services" => round_trip::<Service>(object, "Service"),
        "deployments" => round_trip::<Deployment>(object, "Deployment"),
        "statefulsets" => round_trip::<StatefulSet>(object, "StatefulSet"),
        "poddisruptionbudgets" => round_trip::<PodDisruptionBudget>(object, "PodDisruptionBudget"),
        "clusterrolebindings" => round_trip::<ClusterRoleBinding>(object, "ClusterRoleBinding"),
        "events" => {
            let event = round_trip::<Event>(object, "Event");
            let note = object["note"].as_str().unwrap_or_default();
            assert!(
                note.chars().count() <= 1024,
                "{path}: note of {} characters",
                note.len()
            );
            for field in ["reason", "action"] {
                let text = object[field].as_str().unwrap_or_default();
                assert!(text.len() <= 128, "{path}: {field} {text:?}");
            }
            event
        }
        _ => return None,
    };
    let name_text = object["metadata"]["name"].as_str().unwrap_or_default();
    if kind == "ClusterRoleBinding" {
        // RBAC names are path segments (`<uid>:<role>`), not DNS names.
        assert!(
            !matches!(name_text, "" | "." | "..") && !name_text.contains(['/', '%']),
            "{path}: name {name_text:?}"
        );
    } else {
        name(path, name_text, matches!(kind, "Service" | "StatefulSet"));
    }
    metadata(path, &object["metadata"]);
    if let Some(template) = object.pointer("/spec/template/metadata") {
        metadata(path, template);
    }
    // A Service's selector is a label map; a workload's is a LabelSelector.
    let selector = if kind == "Service" {
        "/spec/selector"
    } else {
        "/spec/selector/matchLabels"
    };
    if let Some(Value::Object(labels)) = object.pointer(selector) {
        for (key, value) in labels {
            label(path, key, value);
        }
    }
    Some(kind)
}

/// Deserializes `object` as `T` and asserts serializing it gives `object` back.
fn round_trip<T: DeserializeOwned + Serialize>(object: &Value, kind: &'static str) -> &'static str {
    let typed: T = serde_json::from_value(object.clone())
        .unwrap_or_else(|error| panic!("not a valid {kind}: {error}: {object}"));
    let back = serde_json::to_value(&typed).expect("serialises");
    assert_eq!(&back, object, "a {kind} field is unknown to k8s-openapi");
    kind
}

fn dns_subdomain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

fn name(path: &str, name: &str, label: bool) {
    assert!(dns_subdomain(name), "{path}: name {name:?}");
    if label {
        assert!(
            name.len() <= 63 && !name.contains('.'),
            "{path}: {name:?} is no DNS label"
        );
    }
}

/// A qualified name's or label value's shape: alphanumerics with `-`, `_` and `.` inside.
fn label_text(text: &str) -> bool {
    text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && text
            .chars()
            .next()
            .is_none_or(|c| c.is_ascii_alphanumeric())
        && text
            .chars()
            .last()
            .is_none_or(|c| c.is_ascii_alphanumeric())
}

fn label(path: &str, key: &str, value: &Value) {
    let (prefix, key_name) = key.rsplit_once('/').unwrap_or(("", key));
    assert!(
        prefix.is_empty() || dns_subdomain(prefix),
        "{path}: label key {key:?}"
    );
    assert!(
        !key_name.is_empty() && label_text(key_name),
        "{path}: label key {key:?}"
    );
    let value = value.as_str().unwrap_or_default();
    assert!(label_text(value), "{path}: label {key}={value:?}");
}

fn metadata(path: &str, meta: &Value) {
    if let Some(Value::Object(labels)) = meta.get("labels") {
        for (key, value) in labels {
            label(path, key, value);
        }
    }
    if let Some(Value::Object(annotations)) = meta.get("annotations") {
        let total: usize = annotations
            .iter()
            .map(|(key, value)| key.len() + value.as_str().unwrap_or_default().len())
            .sum();
        assert!(total <= 256 * 1024, "{path}: {total} bytes of annotations");
    }
}
