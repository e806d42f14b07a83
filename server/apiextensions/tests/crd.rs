//! CRD admission: names, versions, structural schemas, CEL compilation, subresources, columns,
//! selectable fields, conversion, updates, and the typed `CrdInfo`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_apiextensions::{CrdError, CrdInfo, validate_crd, validate_crd_update};
use serde_json::{Value, json};

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                      "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                }}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
                "selectableFields": [{"jsonPath": ".spec.color"}]
            }]
        }
    })
}

fn errors(crd: &Value) -> Vec<String> {
    validate_crd(crd).iter().map(ToString::to_string).collect()
}

fn set(crd: &mut Value, pointer: &str, value: Value) {
    *crd.pointer_mut(pointer).unwrap() = value;
}

fn schema_at(crd: &mut Value, schema: Value) {
    set(crd, "/spec/versions/0/schema/openAPIV3Schema", schema);
}

#[test]
fn valid_crd_passes() {
    assert_eq!(errors(&crd()), Vec::<String>::new());
}

#[test]
fn name_must_be_plural_dot_group() {
    let mut c = crd();
    set(&mut c, "/metadata/name", json!("gadgets.example.com"));
    assert_eq!(
        errors(&c),
        [
            "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"
        ]
    );
}

#[test]
fn core_group_crds_are_named_plural_dot_core() {
    let mut c = crd();
    set(&mut c, "/spec/group", json!(""));
    set(&mut c, "/metadata/name", json!("widgets.core"));
    assert_eq!(errors(&c), Vec::<String>::new());
}

#[test]
fn group_needs_a_dot() {
    let mut c = crd();
    set(&mut c, "/spec/group", json!("example"));
    set(&mut c, "/metadata/name", json!("widgets.example"));
    assert_eq!(
        errors(&c),
        ["spec.group: Invalid value: \"example\": should be a domain with at least one dot"]
    );
}

#[test]
fn scope_is_required_and_enumerated() {
    let mut c = crd();
    set(&mut c, "/spec/scope", json!("Global"));
    assert_eq!(
        errors(&c),
        [
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\""
        ]
    );
}

#[test]
fn names_are_required() {
    let mut c = crd();
    set(&mut c, "/spec/names", json!({}));
    let e = errors(&c);
    assert!(
        e.contains(&"spec.names.plural: Required value".to_string()),
        "{e:?}"
    );
    assert!(
        e.contains(&"spec.names.kind: Required value".to_string()),
        "{e:?}"
    );
}

#[test]
fn plural_must_be_a_dns1035_label() {
    let mut c = crd();
    set(&mut c, "/spec/names/plural", json!("Widgets"));
    set(&mut c, "/metadata/name", json!("Widgets.example.com"));
    assert!(
        errors(&c)
            .iter()
            .any(|e| e
                .starts_with("spec.names.plural: Invalid value: \"Widgets\": a DNS-1035 label"))
    );
}

#[test]
fn exactly_one_storage_version() {
    let mut c = crd();
    set(&mut c, "/spec/versions/0/storage", json!(false));
    let e = errors(&c);
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("spec.versions: Invalid value: "));
    assert!(e[0].ends_with(": must have exactly one version marked as storage version"));
}

#[test]
fn version_names_are_unique() {
    let mut c = crd();
    let mut second = c["spec"]["versions"][0].clone();
    second["storage"] = json!(false);
    c["spec"]["versions"].as_array_mut().unwrap().push(second);
    assert!(
        errors(&c)
            .iter()
            .any(|e| e.ends_with("must contain unique version names"))
    );
}

#[test]
fn at_least_one_version() {
    let mut c = crd();
    set(&mut c, "/spec/versions", json!([]));
    assert_eq!(
        errors(&c),
        ["spec.versions: Required value: must have at least one version"]
    );
}

#[test]
fn schema_is_required() {
    let mut c = crd();
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("selectableFields");
    assert_eq!(
        errors(&c),
        ["spec.versions[0].schema.openAPIV3Schema: Required value"]
    );
}

const ROOT: &str = "spec.versions[0].schema.openAPIV3Schema";

fn schema_errors(schema: Value) -> Vec<String> {
    let mut c = crd();
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("subresources");
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("selectableFields");
    schema_at(&mut c, schema);
    errors(&c)
}

fn spec_schema_errors(spec: Value) -> Vec<String> {
    schema_errors(json!({"type": "object", "properties": {"spec": spec}}))
}

#[test]
fn types_are_required_in_structural_schemas() {
    assert_eq!(
        spec_schema_errors(
            json!({"type": "object", "properties": {"a": {"description": "no type"}}})
        ),
        [format!(
            "{ROOT}.properties[spec].properties[a].type: Required value: must not be empty for specified object fields"
        )]
    );
    assert_eq!(
        spec_schema_errors(json!({"type": "array", "items": {}})),
        [format!(
            "{ROOT}.properties[spec].items.type: Required value: must not be empty for specified array items"
        )]
    );
}

#[test]
fn root_must_be_an_object() {
    assert_eq!(
        schema_errors(json!({"type": "string"})),
        [format!(
            "{ROOT}.type: Invalid value: \"string\": must be object at the root"
        )]
    );
}

#[test]
fn unsupported_keywords() {
    let e = spec_schema_errors(json!({"type": "object", "$ref": "#/x"}));
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].$ref: Forbidden: $ref is not supported"
        )]
    );
    let e = spec_schema_errors(
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        )]
    );
    let e = spec_schema_errors(json!({"type": "weird"}));
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].type: Unsupported value: \"weird\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
        )]
    );
}

#[test]
fn properties_and_additional_properties_are_exclusive() {
    let e = spec_schema_errors(
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
}

#[test]
fn array_needs_items() {
    assert_eq!(
        spec_schema_errors(json!({"type": "array"})),
        [format!(
            "{ROOT}.properties[spec].items: Required value: must be specified"
        )]
    );
}

#[test]
fn metadata_may_only_restrict_name() {
    assert!(
        schema_errors(
            json!({"type": "object", "properties": {"metadata": {"type": "object",
        "properties": {"name": {"type": "string"}}}}})
        )
        .is_empty()
    );
    assert_eq!(
        schema_errors(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})
        ),
        [format!(
            "{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        )]
    );
}

#[test]
fn list_map_keys_need_a_map_list_and_required_keys() {
    let e = spec_schema_errors(
        json!({"type": "array", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"
        )]
    );
    let e = spec_schema_errors(
        json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        )]
    );
    let e = spec_schema_errors(
        json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["nope"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].x-kubernetes-list-map-keys: Invalid value: []string{{\"nope\"}}: entries must all be names of item properties"
        )]
    );
}

#[test]
fn list_type_set_items_must_be_atomic() {
    let e = spec_schema_errors(
        json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].items.x-kubernetes-list-type: Invalid value: \"set\": must be atomic as item of a list with x-kubernetes-list-type=set"
        )]
    );
}

#[test]
fn value_validations_may_not_declare_types() {
    let e = spec_schema_errors(json!({"type": "string", "anyOf": [{"type": "string"}]}));
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"
        )]
    );
}

#[test]
fn invalid_pattern() {
    let e = spec_schema_errors(json!({"type": "string", "pattern": "(unclosed"}));
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with(&format!("{ROOT}.properties[spec].pattern: Invalid value: \"(unclosed\": must be a valid regular expression, but isn't: ")));
}

#[test]
fn defaults_must_validate() {
    let e = spec_schema_errors(
        json!({"type": "object", "properties": {"r": {"type": "integer", "default": "x"}}}),
    );
    assert_eq!(e.len(), 1);
    assert!(
        e[0].contains("properties[r].default in body must be of type integer"),
        "{e:?}"
    );
}

#[test]
fn cel_rules_must_compile() {
    let e = spec_schema_errors(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}], "properties": {"a": {"type": "integer"}}}),
    );
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(&format!(
            "{ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        )),
        "{e:?}"
    );
    assert!(e[0].contains("compilation failed: "), "{e:?}");
}

#[test]
fn cel_rules_may_not_reference_unknown_names() {
    let e = spec_schema_errors(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "foo == 1"}], "properties": {"a": {"type": "integer"}}}),
    );
    assert!(e[0].contains("undeclared reference to 'foo'"), "{e:?}");
    let e = spec_schema_errors(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.b == 1"}], "properties": {"a": {"type": "integer"}}}),
    );
    assert!(e[0].contains("undefined field 'b'"), "{e:?}");
    let ok = spec_schema_errors(
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.all(k, k != 'x')"}], "properties": {"a": {"type": "integer"}}}),
    );
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn cel_rule_fields_are_checked() {
    let e = spec_schema_errors(json!({"type": "object", "x-kubernetes-validations": [
        {"rule": " "},
        {"rule": "true", "reason": "Bogus"},
        {"rule": "true", "fieldPath": ".missing"},
        {"rule": "true", "optionalOldSelf": true}
    ], "properties": {"a": {"type": "integer"}}}));
    let at = format!("{ROOT}.properties[spec].x-kubernetes-validations");
    assert_eq!(
        e,
        [
            format!("{at}[0].rule: Required value: rule is not specified"),
            format!(
                "{at}[1].reason: Unsupported value: \"Bogus\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
            ),
            format!("{at}[2].fieldPath: Invalid value: \".missing\": must be a valid path"),
            format!(
                "{at}[3].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
            ),
        ]
    );
}

#[test]
fn old_self_is_forbidden_under_plain_lists() {
    let e = spec_schema_errors(
        json!({"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}),
    );
    assert_eq!(
        e,
        [format!(
            "{ROOT}.properties[spec].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {ROOT}.properties[spec]"
        )]
    );
}

#[test]
fn scale_paths() {
    let mut c = crd();
    set(
        &mut c,
        "/spec/versions/0/subresources/scale",
        json!({"specReplicasPath": ".status.x", "statusReplicasPath": ""}),
    );
    assert_eq!(
        errors(&c),
        [
            "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \".status.x\": should be a json path under .spec",
            "spec.versions[0].subresources.scale.statusReplicasPath: Required value",
        ]
    );
}

#[test]
fn status_subresource_restricts_the_root() {
    let mut c = crd();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["anyOf"] =
        json!([{"required": ["spec"]}]);
    let e = errors(&c);
    assert_eq!(e.len(), 1);
    assert!(
        e[0].ends_with(
            "fields are allowed at the root of the schema if the status subresource is enabled"
        ),
        "{e:?}"
    );
}

#[test]
fn printer_columns() {
    let mut c = crd();
    set(
        &mut c,
        "/spec/versions/0/additionalPrinterColumns",
        json!([{"name": "", "type": "float", "jsonPath": "spec.x"}]),
    );
    assert_eq!(
        errors(&c),
        [
            "spec.versions[0].additionalPrinterColumns[0].name: Required value",
            "spec.versions[0].additionalPrinterColumns[0].type: Invalid value: \"float\": must be one of boolean,date,integer,number,string",
            "spec.versions[0].additionalPrinterColumns[0].JSONPath: Invalid value: \"spec.x\": must be a simple json path starting with .",
        ]
    );
}

#[test]
fn selectable_fields() {
    let mut c = crd();
    set(
        &mut c,
        "/spec/versions/0/selectableFields",
        json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}, {"jsonPath": ".spec"}, {"jsonPath": ".spec.nope"}]),
    );
    let e = errors(&c);
    assert_eq!(
        e[0],
        "spec.versions[0].selectableFields[1].jsonPath: Duplicate value: \".spec.color\""
    );
    assert_eq!(
        e[1],
        "spec.versions[0].selectableFields[2].jsonPath: Invalid value: \".spec\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."
    );
    assert!(e[2].starts_with("spec.versions[0].selectableFields[3].jsonPath: Invalid value: \".spec.nope\": is an invalid path: "));
}

#[test]
fn at_most_eight_selectable_fields() {
    let mut c = crd();
    let mut props = serde_json::Map::new();
    let mut fields = Vec::new();
    for i in 0..9 {
        props.insert(format!("f{i}"), json!({"type": "string"}));
        fields.push(json!({"jsonPath": format!(".spec.f{i}")}));
    }
    set(
        &mut c,
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties",
        Value::Object(props),
    );
    set(
        &mut c,
        "/spec/versions/0/selectableFields",
        Value::Array(fields),
    );
    set(
        &mut c,
        "/spec/versions/0/additionalPrinterColumns",
        json!([]),
    );
    c["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("subresources");
    assert_eq!(
        errors(&c),
        ["spec.versions[0].selectableFields: Too many: 9: must have at most 8 items"]
    );
}

#[test]
fn webhook_conversion_is_not_supported() {
    let mut c = crd();
    c["spec"]["conversion"] = json!({"strategy": "Webhook"});
    assert_eq!(
        errors(&c),
        ["spec.conversion.strategy: Unsupported value: \"Webhook\": supported values: \"None\""]
    );
}

#[test]
fn update_keeps_group_scope_plural_and_kind() {
    let old = crd();
    let mut new = crd();
    set(&mut new, "/spec/scope", json!("Cluster"));
    assert_eq!(
        validate_crd_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["spec.scope: Invalid value: \"Cluster\": field is immutable"]
    );
    let mut new = crd();
    set(&mut new, "/spec/names/shortNames", json!(["w"]));
    assert!(validate_crd_update(&new, &old).is_empty());
}

#[test]
fn crd_info_extracts_serving_details() {
    let mut c = crd();
    c["spec"]["names"]
        .as_object_mut()
        .unwrap()
        .remove("singular");
    c["spec"]["names"]
        .as_object_mut()
        .unwrap()
        .remove("listKind");
    let info = CrdInfo::from_crd(&c).unwrap();
    assert_eq!(info.group, "example.com");
    assert_eq!(info.singular, "widget");
    assert_eq!(info.list_kind, "WidgetList");
    assert_eq!(info.short_names, ["wd"]);
    assert_eq!(info.categories, ["all"]);
    assert!(info.namespaced);
    let v1 = info.storage_version().unwrap();
    assert!(v1.status_subresource);
    assert_eq!(
        v1.scale.as_ref().unwrap().spec_replicas_path,
        ".spec.replicas"
    );
    assert_eq!(v1.printer_columns[0].column_type, "integer");
    assert_eq!(v1.selectable_fields, [".spec.color"]);
    assert!(info.served_version("v1").is_some());
    assert!(
        v1.schema
            .validate(&json!({"spec": {"replicas": 2}}))
            .is_empty()
    );
}

#[test]
fn crd_info_rejects_invalid_crds() {
    let mut c = crd();
    set(&mut c, "/spec/scope", json!(""));
    let CrdError::Invalid(errs) = CrdInfo::from_crd(&c).unwrap_err();
    assert_eq!(errs[0].to_string(), "spec.scope: Required value");
}
