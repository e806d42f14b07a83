//! `x-kubernetes-validations` on custom resources: messages, reasons, transition rules, budget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_apiextensions::StructuralSchema;
use serde_json::{Value, json};

fn schema(spec: Value) -> StructuralSchema {
    StructuralSchema::new(&json!({"type": "object", "properties": {"spec": spec}})).unwrap()
}

fn check(schema: &StructuralSchema, spec: Value, old: Option<Value>) -> Vec<String> {
    let obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec});
    let old = old
        .map(|o| json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": o}));
    schema
        .validate_cel(&obj, old.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn replicas(rules: Value) -> StructuralSchema {
    schema(
        json!({"type": "object", "properties": {"replicas": {"type": "integer", "x-kubernetes-validations": rules}}}),
    )
}

#[test]
fn passing_rule_reports_nothing() {
    let s = replicas(json!([{"rule": "self <= 10"}]));
    assert!(check(&s, json!({"replicas": 3}), None).is_empty());
}

#[test]
fn default_message_names_the_rule() {
    let s = replicas(json!([{"rule": "self <= 10"}]));
    assert_eq!(
        check(&s, json!({"replicas": 11}), None),
        ["spec.replicas: Invalid value: 11: failed rule: self <= 10"]
    );
}

#[test]
fn message_and_reason() {
    let s = replicas(
        json!([{"rule": "self <= 10", "message": "too many", "reason": "FieldValueForbidden"}]),
    );
    assert_eq!(
        check(&s, json!({"replicas": 11}), None),
        ["spec.replicas: Forbidden: too many"]
    );
}

#[test]
fn message_expression() {
    let s = replicas(json!([{"rule": "self <= 10", "messageExpression": "'got ' + string(self)"}]));
    assert_eq!(
        check(&s, json!({"replicas": 11}), None),
        ["spec.replicas: Invalid value: 11: got 11"]
    );
}

#[test]
fn object_rules_omit_the_value_and_honour_field_path() {
    let s = schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min above max", "fieldPath": ".min"}],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}
    }));
    assert_eq!(
        check(&s, json!({"min": 5, "max": 1}), None),
        ["spec.min: Invalid value: min above max"]
    );
}

#[test]
fn transition_rules_need_an_old_value() {
    let s = replicas(json!([{"rule": "self >= oldSelf", "message": "cannot scale down"}]));
    assert!(check(&s, json!({"replicas": 1}), None).is_empty());
    assert!(check(&s, json!({"replicas": 5}), Some(json!({"replicas": 3}))).is_empty());
    assert_eq!(
        check(&s, json!({"replicas": 1}), Some(json!({"replicas": 3}))),
        ["spec.replicas: Invalid value: 1: cannot scale down"]
    );
    assert!(check(&s, json!({"replicas": 1}), Some(json!({}))).is_empty());
}

#[test]
fn optional_old_self_runs_on_create() {
    let s = replicas(
        json!([{"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true, "message": "m"}]),
    );
    assert!(check(&s, json!({"replicas": 1}), None).is_empty());
    assert_eq!(
        check(&s, json!({"replicas": 1}), Some(json!({"replicas": 2}))).len(),
        1
    );
}

#[test]
fn list_map_items_correlate_by_key() {
    let s = schema(json!({"type": "object", "properties": {"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}],
            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}
    }}}));
    let old = json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]});
    assert!(check(&s, json!({"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 1}, {"name": "c", "port": 9}]}), Some(old.clone())).is_empty());
    assert_eq!(
        check(&s, json!({"ports": [{"name": "b", "port": 3}]}), Some(old)),
        ["spec.ports[0]: Invalid value: port is immutable"]
    );
}

#[test]
fn map_values_correlate_by_key() {
    let s = schema(json!({"type": "object", "properties": {"limits": {
        "type": "object", "additionalProperties": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "no decrease"}]}
    }}}));
    assert_eq!(
        check(
            &s,
            json!({"limits": {"cpu": 1, "mem": 5}}),
            Some(json!({"limits": {"cpu": 2}}))
        ),
        ["spec.limits[cpu]: Invalid value: 1: no decrease"]
    );
}

#[test]
fn escaped_property_names() {
    let s = schema(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.foo__dash__bar == 'x'"}],
        "properties": {"foo-bar": {"type": "string"}}}),
    );
    assert!(check(&s, json!({"foo-bar": "x"}), None).is_empty());
    assert_eq!(check(&s, json!({"foo-bar": "y"}), None).len(), 1);
}

#[test]
fn root_rules_see_metadata_name() {
    let s = StructuralSchema::new(&json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('a')"}],
        "properties": {"spec": {"type": "object"}}})).unwrap();
    assert!(check(&s, json!({}), None).is_empty());
}

#[test]
fn kubernetes_libraries_are_available() {
    let s = schema(
        json!({"type": "object", "properties": {"url": {"type": "string",
        "x-kubernetes-validations": [{"rule": "isURL(self) && url(self).getScheme() == 'https'"}]}}}),
    );
    assert!(check(&s, json!({"url": "https://example.com"}), None).is_empty());
    assert_eq!(
        check(&s, json!({"url": "http://example.com"}), None).len(),
        1
    );
}

#[test]
fn runtime_errors_are_reported() {
    let s = schema(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a / self.b > 0"}],
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
    );
    let errs = check(&s, json!({"a": 1, "b": 0}), None);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("spec: Invalid value: \"object\": "),
        "{errs:?}"
    );
    assert!(
        errs[0].ends_with("evaluating rule: self.a / self.b > 0"),
        "{errs:?}"
    );
}

#[test]
fn expensive_rule_is_cut_off_without_running() {
    let s = schema(
        json!({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, self.all(z, x + y + z >= 0)))"}]}}}),
    );
    let big: Vec<i64> = (0..300).collect();
    let errs = check(&s, json!({"items": big}), None);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].contains(
            "no further validation rules will be run due to call cost exceeds limit for rule"
        ),
        "{errs:?}"
    );
    assert!(check(&s, json!({"items": [1, 2, 3]}), None).is_empty());
}

#[test]
fn total_budget_is_shared_across_values() {
    let s = schema(
        json!({"type": "object", "properties": {"lists": {"type": "array", "items": {
        "type": "array", "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.exists(y, y == x))"}]}}}}),
    );
    let inner: Vec<i64> = (0..250).collect();
    let lists: Vec<Value> = (0..40).map(|_| json!(inner)).collect();
    let errs = check(&s, json!({"lists": lists}), None);
    let last = errs.last().unwrap();
    assert!(last.starts_with("spec.lists["), "{last}");
    assert!(last.ends_with(": Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"), "{last}");
}

#[test]
fn unchanged_values_are_ratcheted() {
    // A rule the stored value already breaks (e.g. added to the CRD later).
    let s = replicas(json!([{"rule": "self <= 10"}]));
    assert!(
        check(&s, json!({"replicas": 11}), Some(json!({"replicas": 11}))).is_empty(),
        "an unchanged value is not refused"
    );
    assert_eq!(
        check(&s, json!({"replicas": 12}), Some(json!({"replicas": 11}))),
        ["spec.replicas: Invalid value: 12: failed rule: self <= 10"],
        "a changed one is"
    );
    // Object rules ratchet on the object's value as a whole.
    let s = schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min above max"}],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}, "note": {"type": "string"}}
    }));
    let broken = json!({"min": 5, "max": 1});
    assert!(check(&s, broken.clone(), Some(broken.clone())).is_empty());
    let mut noted = broken.clone();
    noted["note"] = json!("changed");
    assert_eq!(
        check(&s, noted, Some(broken)),
        ["spec: Invalid value: min above max"]
    );
}

#[test]
fn items_of_atomic_lists_are_not_ratcheted() {
    let s = schema(json!({"type": "object", "properties": {"sizes": {
        "type": "array", "items": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]}
    }}}));
    let stored = json!({"sizes": [1, 0]});
    assert_eq!(
        check(&s, stored.clone(), Some(stored)),
        ["spec.sizes[1]: Invalid value: 0: failed rule: self > 0"]
    );
}
