//! Events, served twice from one storage: core/v1 `Event` and `events.k8s.io/v1` `Event`.
//!
//! As in Kubernetes, both APIs read and write the same objects (stored in the core/v1 shape under
//! `/registry/core/events/...`), so an event recorded through either API shows up in both. The
//! events.k8s.io strategy converts field by field on the way in and out.

use kcp_apimachinery::FieldError;
use serde_json::{Map, Value, json};

use super::{Column, ResourceType, Strategy};

pub fn core_resource() -> ResourceType {
    super::resource("", "Event", "events", true, &["ev"], Box::new(CoreEvents))
}

pub fn events_k8s_io_resource() -> ResourceType {
    let mut t = super::resource(
        "events.k8s.io",
        "Event",
        "events",
        true,
        &["ev"],
        Box::new(EventsV1),
    );
    t.storage_group = String::new();
    t
}

/// events.k8s.io/v1 field <-> core/v1 field.
const RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(object: Value, api_version: &str, to_core: bool) -> Value {
    let Value::Object(map) = object else {
        return object;
    };
    let mut out = Map::new();
    for (key, value) in map {
        let renamed = RENAMES.iter().find_map(|(v1, core)| match to_core {
            true if key == *v1 => Some(*core),
            false if key == *core => Some(*v1),
            _ => None,
        });
        out.insert(renamed.map_or(key, str::to_string), value);
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

fn event_columns() -> Vec<Column> {
    vec![
        Column::new("Type", "string", "Type of this event (Normal, Warning)."),
        Column::new("Reason", "string", "Why the action was taken."),
        Column::new("Object", "string", "The object this event is about."),
        Column::new(
            "Message",
            "string",
            "A human-readable description of the status of this operation.",
        ),
    ]
}

/// Cells from an event in core/v1 shape.
fn core_cells(event: &Value) -> Vec<Value> {
    let object = format!(
        "{}/{}",
        event
            .pointer("/involvedObject/kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_lowercase(),
        event
            .pointer("/involvedObject/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    vec![
        event.get("type").cloned().unwrap_or(json!("")),
        event.get("reason").cloned().unwrap_or(json!("")),
        json!(object),
        event.get("message").cloned().unwrap_or(json!("")),
    ]
}

const CORE_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The value of a core/v1 event field as field selectors see it.
fn core_field(event: &Value, field: &str) -> Option<String> {
    CORE_FIELDS.contains(&field).then(|| {
        let pointer = if field == "source" {
            "/source/component".to_string()
        } else {
            format!("/{}", field.replace('.', "/"))
        };
        event
            .pointer(&pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    })
}

fn validate_core(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let (Some(ns), Some(involved_ns)) = (
        kcp_apimachinery::meta::namespace(event),
        event
            .pointer("/involvedObject/namespace")
            .and_then(Value::as_str),
    ) && !involved_ns.is_empty()
        && ns != involved_ns
    {
        errors.push(FieldError::invalid(
            "involvedObject.namespace",
            json!(involved_ns),
            "does not match event.namespace",
        ));
    }
    if let Some(kind) = event.get("type").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != "Normal"
        && kind != "Warning"
    {
        errors.push(FieldError::not_supported(
            "type",
            json!(kind),
            &["Normal", "Warning"],
        ));
    }
    errors
}

struct CoreEvents;

impl Strategy for CoreEvents {
    fn validate(&self, object: &Value) -> Vec<FieldError> {
        validate_core(object)
    }

    fn supports_field(&self, field: &str) -> bool {
        CORE_FIELDS.contains(&field)
    }

    fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        core_field(object, field)
    }

    fn columns(&self) -> Vec<Column> {
        event_columns()
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        core_cells(object)
    }
}

struct EventsV1;

impl Strategy for EventsV1 {
    fn api_to_storage(&self, object: Value) -> Value {
        rename(object, "v1", true)
    }

    fn storage_to_api(&self, object: Value) -> Value {
        rename(object, "events.k8s.io/v1", false)
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        validate_core(&self.api_to_storage(object.clone()))
    }

    fn supports_field(&self, field: &str) -> bool {
        CORE_FIELDS.contains(&field)
    }

    fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        core_field(&self.api_to_storage(object.clone()), field)
    }

    fn columns(&self) -> Vec<Column> {
        event_columns()
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        core_cells(&self.api_to_storage(object.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "hi",
            "regarding": {"kind": "Pod", "name": "p"}, "reportingController": "c", "deprecatedCount": 2});
        let core = EventsV1.api_to_storage(v1.clone());
        assert_eq!(core["message"], "hi");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(EventsV1.storage_to_api(core), v1);
    }

    #[test]
    fn selectable_fields() {
        let core = json!({"involvedObject": {"kind": "Pod"}, "source": {"component": "kubelet"}});
        assert_eq!(
            core_field(&core, "involvedObject.kind").as_deref(),
            Some("Pod")
        );
        assert_eq!(core_field(&core, "source").as_deref(), Some("kubelet"));
        assert_eq!(core_field(&core, "reason").as_deref(), Some(""));
        assert_eq!(core_field(&core, "message"), None);
    }
}
