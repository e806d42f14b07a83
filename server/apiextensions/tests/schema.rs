//! Structural schema behaviour on custom resources: validation messages, pruning, defaulting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_apiextensions::StructuralSchema;
use serde_json::{Value, json};

fn schema(spec_props: Value) -> StructuralSchema {
    StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": spec_props}}
    }))
    .unwrap()
}

fn errors(schema: &StructuralSchema, spec: Value) -> Vec<String> {
    schema
        .validate(
            &json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec}),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn integer_type() {
    let s = schema(json!({"replicas": {"type": "integer"}}));
    assert_eq!(
        errors(&s, json!({"replicas": "string"})),
        [
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        ]
    );
    assert!(errors(&s, json!({"replicas": 3})).is_empty());
    assert!(errors(&s, json!({"replicas": 3.0})).is_empty());
    assert_eq!(errors(&s, json!({"replicas": 1.5})).len(), 1);
}

#[test]
fn number_accepts_integers() {
    let s = schema(json!({"ratio": {"type": "number"}}));
    assert!(errors(&s, json!({"ratio": 1})).is_empty());
    assert!(errors(&s, json!({"ratio": 0.5})).is_empty());
}

#[test]
fn null_needs_nullable() {
    let s = schema(json!({"a": {"type": "string"}, "b": {"type": "string", "nullable": true}}));
    assert_eq!(
        errors(&s, json!({"a": null})),
        ["spec.a: Invalid value: \"null\": spec.a in body must be of type string: \"null\""]
    );
    assert!(errors(&s, json!({"b": null})).is_empty());
}

#[test]
fn formats() {
    let s = schema(
        json!({"t": {"type": "string", "format": "date-time"}, "n": {"type": "integer", "format": "int32"}, "u": {"type": "string", "format": "made-up"}}),
    );
    assert_eq!(
        errors(&s, json!({"t": "yesterday"})),
        [
            "spec.t: Invalid value: \"yesterday\": spec.t in body must be of type date-time: \"yesterday\""
        ]
    );
    assert!(errors(&s, json!({"t": "2024-01-02T03:04:05Z", "u": "anything"})).is_empty());
    assert_eq!(errors(&s, json!({"n": 5_000_000_000_i64})).len(), 1);
}

#[test]
fn enum_values() {
    let s = schema(json!({"mode": {"type": "string", "enum": ["a", "b"]}}));
    assert_eq!(
        errors(&s, json!({"mode": "x"})),
        ["spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\""]
    );
}

#[test]
fn numeric_bounds() {
    let s = schema(json!({
        "r": {"type": "integer", "minimum": 1, "maximum": 10},
        "x": {"type": "number", "exclusiveMinimum": true, "minimum": 0.5},
        "m": {"type": "integer", "multipleOf": 3}
    }));
    assert_eq!(
        errors(&s, json!({"r": 11})),
        ["spec.r: Invalid value: 11: spec.r in body should be less than or equal to 10"]
    );
    assert_eq!(
        errors(&s, json!({"r": 0})),
        ["spec.r: Invalid value: 0: spec.r in body should be greater than or equal to 1"]
    );
    assert_eq!(
        errors(&s, json!({"x": 0.5})),
        ["spec.x: Invalid value: 0.5: spec.x in body should be greater than 0.5"]
    );
    assert_eq!(
        errors(&s, json!({"m": 4})),
        ["spec.m: Invalid value: 4: spec.m in body should be a multiple of 3"]
    );
}

#[test]
fn string_lengths_count_runes_and_pattern() {
    let s = schema(
        json!({"s": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-zé]+$"}}),
    );
    assert!(errors(&s, json!({"s": "éé"})).is_empty());
    assert_eq!(
        errors(&s, json!({"s": "a"})),
        ["spec.s: Invalid value: \"a\": spec.s in body should be at least 2 chars long"]
    );
    assert_eq!(
        errors(&s, json!({"s": "abcd"}))[0],
        "spec.s: Too long: may not be more than 3 bytes"
    );
    assert_eq!(
        errors(&s, json!({"s": "A1"})),
        ["spec.s: Invalid value: \"A1\": spec.s in body should match '^[a-zé]+$'"]
    );
}

#[test]
fn item_and_property_counts() {
    let s = schema(json!({
        "l": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "m": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1, "maxProperties": 1}
    }));
    assert_eq!(
        errors(&s, json!({"l": []})),
        ["spec.l: Invalid value: 0: spec.l in body should have at least 1 items"]
    );
    assert_eq!(
        errors(&s, json!({"l": ["a", "b", "c"]})),
        ["spec.l: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        errors(&s, json!({"m": {"a": "1", "b": "2"}})),
        ["spec.m: Too many: 2: must have at most 1 items"]
    );
    assert_eq!(
        errors(&s, json!({"m": {}})),
        ["spec.m: Invalid value: 0: spec.m in body should have at least 1 properties"]
    );
}

#[test]
fn required_fields() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}
    }))
    .unwrap();
    assert_eq!(errors(&s, json!({})), ["spec.name: Required value"]);
}

#[test]
fn additional_properties_schema_validates_values() {
    let s =
        schema(json!({"labels": {"type": "object", "additionalProperties": {"type": "integer"}}}));
    assert_eq!(
        errors(&s, json!({"labels": {"a": "x"}})),
        [
            "spec.labels.a: Invalid value: \"string\": spec.labels.a in body must be of type integer: \"string\""
        ]
    );
}

#[test]
fn int_or_string() {
    let s = schema(json!({"port": {"x-kubernetes-int-or-string": true}}));
    assert!(errors(&s, json!({"port": 80})).is_empty());
    assert!(errors(&s, json!({"port": "http"})).is_empty());
    assert_eq!(
        errors(&s, json!({"port": true})),
        [
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""
        ]
    );
}

#[test]
fn int_or_string_with_any_of_pattern_is_structural() {
    let s = schema(
        json!({"port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}),
    );
    assert!(errors(&s, json!({"port": 80})).is_empty());
}

#[test]
fn list_type_set_rejects_duplicates() {
    let s = schema(
        json!({"tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}),
    );
    assert_eq!(
        errors(&s, json!({"tags": ["a", "b", "a"]})),
        ["spec.tags[2]: Duplicate value: \"a\""]
    );
}

#[test]
fn list_type_map_rejects_duplicate_keys() {
    let s = schema(json!({"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}
    }}));
    assert_eq!(
        errors(
            &s,
            json!({"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]})
        ),
        ["spec.ports[1]: Duplicate value: {\"name\":\"a\"}"]
    );
    assert!(errors(&s, json!({"ports": [{"name": "a"}, {"name": "b"}]})).is_empty());
}

#[test]
fn list_type_atomic_allows_duplicates() {
    let s = schema(
        json!({"l": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}}}),
    );
    assert!(errors(&s, json!({"l": ["a", "a"]})).is_empty());
}

#[test]
fn map_type_is_accepted() {
    let s = schema(
        json!({"m": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}}}),
    );
    assert!(errors(&s, json!({"m": {"a": "b"}})).is_empty());
}

#[test]
fn embedded_resource_requires_type_meta() {
    let s = schema(
        json!({"template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}),
    );
    assert_eq!(
        errors(&s, json!({"template": {"metadata": {"name": "x"}}})),
        [
            "spec.template.apiVersion: Required value",
            "spec.template.kind: Required value"
        ]
    );
    assert!(errors(&s, json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}}}})).is_empty());
    let bad = errors(
        &s,
        json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a b": "c"}}}}),
    );
    assert_eq!(bad.len(), 1);
    assert!(
        bad[0].starts_with("spec.template.metadata.labels: Invalid value: \"a b\""),
        "{bad:?}"
    );
}

#[test]
fn any_of_one_of_all_of_not() {
    let s = schema(json!({
        "a": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
        "o": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]},
        "l": {"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]},
        "n": {"type": "string", "not": {"enum": ["forbidden"]}}
    }));
    assert!(errors(&s, json!({"a": "abc"})).is_empty());
    let e = errors(&s, json!({"a": "xyz"}));
    assert_eq!(
        e[0],
        "<nil>: Invalid value: \"\": \"spec.a\" must validate at least one schema (anyOf)"
    );
    let e = errors(&s, json!({"o": 5}));
    assert_eq!(
        e,
        [
            "<nil>: Invalid value: \"\": \"spec.o\" must validate one and only one schema (oneOf). Found 2 valid alternatives"
        ]
    );
    let e = errors(&s, json!({"l": 11}));
    assert_eq!(
        e.last().unwrap(),
        "<nil>: Invalid value: \"\": \"spec.l\" must validate all the schemas (allOf)"
    );
    let e = errors(&s, json!({"n": "forbidden"}));
    assert_eq!(
        e,
        ["<nil>: Invalid value: \"\": \"spec.n\" must not validate the schema (not)"]
    );
}

#[test]
fn prune_removes_unknown_fields_and_reports_them() {
    let s = schema(
        json!({"known": {"type": "string"}, "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
    );
    let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "labels": {"k": "v"}}, "extra": 1,
        "spec": {"known": "k", "foo": 1, "items": [{"a": "x", "b": 2}]}});
    let pruned = s.prune(&mut obj);
    assert_eq!(pruned, ["spec.items[0].b", "spec.foo", "extra"]);
    assert_eq!(
        obj,
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "labels": {"k": "v"}},
        "spec": {"known": "k", "items": [{"a": "x"}]}})
    );
}

#[test]
fn prune_respects_preserve_unknown_fields() {
    let s = schema(
        json!({"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"typed": {"type": "object", "properties": {}}}}}),
    );
    let mut obj = json!({"spec": {"free": {"anything": {"deep": 1}, "typed": {"gone": 1}}}});
    assert_eq!(s.prune(&mut obj), ["spec.free.typed.gone"]);
    assert_eq!(obj["spec"]["free"]["anything"]["deep"], 1);
}

#[test]
fn prune_keeps_type_meta_of_embedded_resources() {
    let s = schema(
        json!({"template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}),
    );
    let mut obj = json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}, "junk": 1}}});
    assert_eq!(s.prune(&mut obj), ["spec.template.junk"]);
    assert_eq!(obj["spec"]["template"]["kind"], "Pod");
}

#[test]
fn defaults_fill_absent_fields_deeply() {
    let s = schema(json!({
        "replicas": {"type": "integer", "default": 1},
        "strategy": {"type": "object", "default": {}, "properties": {"type": {"type": "string", "default": "Rolling"}}},
        "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
        "env": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string", "default": "x"}}}}
    }));
    let mut obj = json!({"spec": {"ports": [{}, {"protocol": "UDP"}], "env": {"a": {}}}});
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"]["replicas"], 1);
    assert_eq!(obj["spec"]["strategy"], json!({"type": "Rolling"}));
    assert_eq!(
        obj["spec"]["ports"],
        json!([{"protocol": "TCP"}, {"protocol": "UDP"}])
    );
    assert_eq!(obj["spec"]["env"]["a"]["v"], "x");
}

#[test]
fn defaults_replace_non_nullable_nulls_and_drop_the_rest() {
    let s = schema(json!({
        "a": {"type": "string", "default": "d"},
        "b": {"type": "string"},
        "c": {"type": "string", "nullable": true, "default": "d"}
    }));
    let mut obj = json!({"spec": {"a": null, "b": null, "c": null}});
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"a": "d", "c": null}));
}

#[test]
fn root_metadata_is_not_schema_validated() {
    let s = schema(json!({}));
    assert!(
        s.validate(&json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {}}))
            .is_empty()
    );
}
