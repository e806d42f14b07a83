//! Events, served twice from one storage: core/v1 `Event` and `events.k8s.io/v1` `Event`.
//!
//! As in Kubernetes, both APIs read and write the same objects (stored in the core/v1 shape under
//! `/registry/core/events/...`), so an event recorded through either API shows up in both. The
//! events.k8s.io strategy converts field by field on the way in and out.
//!
//! Validation is kube's (`pkg/apis/core/validation/events.go`): core/v1 writes get the legacy
//! checks only (new-style events with `eventTime` are limited: reason, action and reporting
//! instance to 128 characters, the message to 1 KiB), events.k8s.io/v1 writes the strict ones too
//! (`eventTime` required, `type` Normal or Warning, deprecated fields unset, a valid series, and on
//! update everything but the series immutable). Errors name the core/v1 fields, as kube's do.

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

/// Length limits of kube's event validation (`pkg/apis/core/validation/events.go`).
const REPORTING_INSTANCE_LENGTH_LIMIT: usize = 128;
const ACTION_LENGTH_LIMIT: usize = 128;
const REASON_LENGTH_LIMIT: usize = 128;
const NOTE_LENGTH_LIMIT: usize = 1024;

/// The API an event is written through: core/v1 gets only the legacy checks, events.k8s.io/v1
/// the strict ones too.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EventApi {
    Core,
    V1,
}

fn text<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A Go zero value: absent, null, "", 0 or an empty object.
fn is_zero(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::Object(map)) => map.values().all(|v| is_zero(Some(v))),
        Some(_) => false,
    }
}

fn at_most(errors: &mut Vec<FieldError>, event: &Value, field: &str, limit: usize) {
    if text(event, &format!("/{field}")).len() > limit {
        errors.push(FieldError::invalid(
            field,
            json!(""),
            &format!("can have at most {limit} characters"),
        ));
    }
}

fn required(errors: &mut Vec<FieldError>, event: &Value, field: &str) {
    if text(event, &format!("/{field}")).is_empty() {
        errors.push(FieldError::required(field, ""));
    }
}

/// kube's `legacyValidateEvent`, on an event in core/v1 shape. Events without `eventTime` (the
/// old style) only need their namespace to agree with the involved object's; new-style events
/// need a reporting controller and instance, an action and a reason, and limit the lengths of
/// those and of the message (the events.k8s.io `note`) to 1 KiB.
fn legacy_errors(event: &Value, api: EventApi) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let namespace = kcp_apimachinery::meta::namespace(event).unwrap_or("");
    let involved_namespace = text(event, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            json!(involved_namespace),
            "does not match event.namespace",
        )
    };
    if is_zero(event.get("eventTime")) {
        let agrees = match involved_namespace {
            "" => namespace.is_empty() || namespace == "default",
            involved => involved == namespace,
        };
        if !agrees {
            errors.push(mismatch());
        }
        return errors;
    }
    if involved_namespace.is_empty() && namespace != "default" && namespace != "kube-system" {
        errors.push(mismatch());
    }
    let controller_field = match api {
        EventApi::Core => "reportingComponent",
        EventApi::V1 => "reportingController",
    };
    let controller = text(event, "/reportingComponent");
    if controller.is_empty() {
        errors.push(FieldError::required(controller_field, ""));
    }
    for message in kcp_apimachinery::validation::is_qualified_name(controller) {
        errors.push(FieldError::invalid(
            controller_field,
            json!(controller),
            &message,
        ));
    }
    required(&mut errors, event, "reportingInstance");
    at_most(
        &mut errors,
        event,
        "reportingInstance",
        REPORTING_INSTANCE_LENGTH_LIMIT,
    );
    required(&mut errors, event, "action");
    at_most(&mut errors, event, "action", ACTION_LENGTH_LIMIT);
    required(&mut errors, event, "reason");
    at_most(&mut errors, event, "reason", REASON_LENGTH_LIMIT);
    at_most(&mut errors, event, "message", NOTE_LENGTH_LIMIT);
    errors
}

/// kube's `validateV1EventSeries`.
fn series_errors(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(series) = event.get("series").filter(|s| !s.is_null()) else {
        return errors;
    };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        errors.push(FieldError::invalid(
            "series.count",
            json!(""),
            "should be at least 2",
        ));
    }
    if is_zero(series.get("lastObservedTime")) {
        errors.push(FieldError::required("series.lastObservedTime", ""));
    }
    errors
}

/// kube's `ValidateEventCreate` (event in core/v1 shape; metadata is checked by the store).
fn create_errors(event: &Value, api: EventApi) -> Vec<FieldError> {
    let mut errors = legacy_errors(event, api);
    if api == EventApi::Core {
        return errors;
    }
    errors.extend(series_errors(event));
    if is_zero(event.get("eventTime")) {
        errors.push(FieldError::required("eventTime", ""));
    }
    let kind = text(event, "/type");
    if kind != "Normal" && kind != "Warning" {
        errors.push(FieldError::invalid(
            "type",
            json!(""),
            &format!("has invalid value: {kind}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp", "count", "source"] {
        if !is_zero(event.get(field)) {
            errors.push(FieldError::invalid(field, json!(""), "needs to be unset"));
        }
    }
    errors
}

/// Microsecond-precision equality of two `MicroTime`s (kube tolerates sub-microsecond changes of
/// `eventTime`); other values compare as they are.
fn same_time(new: Option<&Value>, old: Option<&Value>) -> bool {
    let micros = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_microsecond())
    };
    match (micros(new), micros(old)) {
        (Some(a), Some(b)) => a == b,
        _ => is_zero(new) && is_zero(old) || new == old,
    }
}

/// kube's `ValidateEventUpdate`: events.k8s.io/v1 may only change the series (and metadata).
fn update_errors(new: &Value, old: &Value, api: EventApi) -> Vec<FieldError> {
    let mut errors = legacy_errors(new, api);
    if api == EventApi::Core {
        return errors;
    }
    if new.get("series") != old.get("series") {
        errors.extend(series_errors(new));
    }
    for field in [
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    ] {
        let (a, b) = (new.get(field), old.get(field));
        let same = match field {
            "eventTime" => same_time(a, b),
            _ => a == b || (is_zero(a) && is_zero(b)),
        };
        if !same {
            let path = if field == "reportingComponent" {
                "reportingController"
            } else {
                field
            };
            errors.push(FieldError::invalid(
                path,
                a.cloned().unwrap_or(Value::Null),
                kcp_apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
    }
    errors
}

struct CoreEvents;

impl Strategy for CoreEvents {
    fn validate(&self, object: &Value) -> Vec<FieldError> {
        create_errors(object, EventApi::Core)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        update_errors(new, old, EventApi::Core)
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
        create_errors(&self.api_to_storage(object.clone()), EventApi::V1)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        update_errors(
            &self.api_to_storage(new.clone()),
            &self.api_to_storage(old.clone()),
            EventApi::V1,
        )
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

    /// A valid events.k8s.io/v1 event (as a client sends it).
    fn v1_event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "n"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "reason": "Started",
            "action": "Start", "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "n"}, "note": "ok"})
    }

    fn v1_errors(event: &Value) -> Vec<String> {
        EventsV1
            .validate(event)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn core_errors(event: &Value) -> Vec<String> {
        CoreEvents
            .validate(event)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_valid_v1_event_passes() {
        assert!(
            v1_errors(&v1_event()).is_empty(),
            "{:?}",
            v1_errors(&v1_event())
        );
    }

    #[test]
    fn v1_note_is_at_most_1_kib() {
        let mut event = v1_event();
        event["note"] = json!("x".repeat(1024));
        assert!(v1_errors(&event).is_empty());
        event["note"] = json!("x".repeat(1025));
        assert_eq!(
            v1_errors(&event),
            ["message: Invalid value: \"\": can have at most 1024 characters"]
        );
    }

    #[test]
    fn core_message_of_a_new_style_event_is_at_most_1_kib() {
        let mut event = EventsV1.api_to_storage(v1_event());
        event["message"] = json!("x".repeat(1025));
        assert_eq!(
            core_errors(&event),
            ["message: Invalid value: \"\": can have at most 1024 characters"]
        );
        // Old-style events (no eventTime) have no limits.
        let old_style = json!({"metadata": {"name": "e", "namespace": "n"},
            "involvedObject": {"namespace": "n"}, "message": "x".repeat(4096), "reason": "r".repeat(300)});
        assert!(core_errors(&old_style).is_empty());
    }

    #[test]
    fn reason_action_and_instance_are_required_and_at_most_128() {
        let mut event = v1_event();
        for field in ["reason", "action", "reportingInstance"] {
            event[field] = json!("x".repeat(129));
        }
        let found = v1_errors(&event);
        for field in ["reason", "action", "reportingInstance"] {
            assert!(
                found.contains(&format!(
                    "{field}: Invalid value: \"\": can have at most 128 characters"
                )),
                "{found:?}"
            );
        }
        let mut event = v1_event();
        for field in ["reason", "action", "reportingInstance"] {
            event[field] = json!("");
        }
        let found = v1_errors(&event);
        for field in ["reason", "action", "reportingInstance"] {
            assert!(
                found.contains(&format!("{field}: Required value")),
                "{found:?}"
            );
        }
    }

    #[test]
    fn reporting_controller_is_a_qualified_name() {
        let mut event = v1_event();
        event["reportingController"] = json!("not a name");
        let found = v1_errors(&event);
        assert!(
            found
                .iter()
                .any(|m| m.starts_with("reportingController: Invalid value: \"not a name\"")),
            "{found:?}"
        );
        let mut core = EventsV1.api_to_storage(v1_event());
        core["reportingComponent"] = json!("");
        let found = core_errors(&core);
        assert!(
            found.contains(&"reportingComponent: Required value".to_string()),
            "{found:?}"
        );
    }

    #[test]
    fn v1_needs_event_time_a_known_type_and_no_deprecated_fields() {
        let mut event = v1_event();
        event.as_object_mut().unwrap().remove("eventTime");
        event["type"] = json!("Odd");
        event["deprecatedCount"] = json!(3);
        event["deprecatedSource"] = json!({"component": "kubelet"});
        let found = v1_errors(&event);
        assert!(
            found.contains(&"eventTime: Required value".to_string()),
            "{found:?}"
        );
        assert!(
            found.contains(&"type: Invalid value: \"\": has invalid value: Odd".to_string()),
            "{found:?}"
        );
        assert!(
            found.contains(&"count: Invalid value: \"\": needs to be unset".to_string()),
            "{found:?}"
        );
        assert!(
            found.contains(&"source: Invalid value: \"\": needs to be unset".to_string()),
            "{found:?}"
        );
        // core/v1 accepts any type (no strict validation there).
        let mut core = json!({"metadata": {"name": "e", "namespace": "n"}, "type": "Odd"});
        core["involvedObject"] = json!({"namespace": "n"});
        assert!(core_errors(&core).is_empty());
    }

    #[test]
    fn v1_series_needs_count_and_last_observed_time() {
        let mut event = v1_event();
        event["series"] = json!({"count": 1});
        let found = v1_errors(&event);
        assert_eq!(
            found,
            [
                "series.count: Invalid value: \"\": should be at least 2",
                "series.lastObservedTime: Required value"
            ]
        );
    }

    #[test]
    fn involved_namespace_must_match() {
        let old_style = json!({"metadata": {"name": "e", "namespace": "n"}, "involvedObject": {"namespace": "other"}});
        assert_eq!(
            core_errors(&old_style),
            ["involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"]
        );
        let no_namespace =
            json!({"metadata": {"name": "e", "namespace": "n"}, "involvedObject": {}});
        assert_eq!(core_errors(&no_namespace).len(), 1);
        let in_default =
            json!({"metadata": {"name": "e", "namespace": "default"}, "involvedObject": {}});
        assert!(core_errors(&in_default).is_empty());
    }

    #[test]
    fn v1_updates_may_change_only_the_series() {
        let old = v1_event();
        let mut new = old.clone();
        new["series"] = json!({"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"});
        assert!(EventsV1.validate_update(&new, &old).is_empty());
        new["note"] = json!("changed");
        new["eventTime"] = json!("2026-01-01T00:00:00.0000001Z");
        let found: Vec<String> = EventsV1
            .validate_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            ["message: Invalid value: \"changed\": field is immutable"]
        );
    }
}
