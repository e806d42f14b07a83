//! APIConversions (`apis.kcp.io/v1alpha1`): rules that convert a bound resource between the
//! versions of the APIResourceSchema the APIConversion is named like, as upstream kcp's CEL
//! conversion did (`pkg/conversion` and the `apis.kcp.io/APIConversion` admission plugin, removed
//! upstream in 2023 while the type stayed in the API).
//!
//! `spec.conversions[]` names a `from` and a `to` version; each of its `rules` copies the value of
//! `field` in the `from` version to `destination` in the `to` version, through the CEL
//! `transformation` when there is one (`self` is the field's value). Fields of the `from` version
//! listed in `preserve` travel in the annotation `preserve.conversion.apis.kcp.io/<from>` of the
//! converted object, and are restored (the annotation dropped) when the object converts back to
//! `<from>`, so a round trip through a version that lacks them loses nothing. What the target
//! version does not declare is pruned from the result, as kube-apiserver prunes after conversion.
//!
//! Admission compiles an APIConversion against its schema ([`validate`]; the API server refuses
//! one whose schema does not exist): `from` and `to` must be among its versions, each `field` must be declared by the `from`
//! version, destinations and preserved fields must be field paths, and transformations must
//! compile. One deviation: a transformation that fails on an object (an error in the expression's
//! evaluation) leaves its destination unset and is logged, where upstream failed the request.

use std::collections::BTreeMap;
use std::sync::Arc;

use kcp_apiextensions::{CrdInfo, StructuralSchema, Transformation, TransformationError};
use kcp_apimachinery::{FieldError, meta};
use serde_json::{Map, Value, json};

/// The prefix of the annotation that keeps the preserved fields of the version an object was
/// converted from (upstream's `VersionPreservationAnnotationKeyPrefix`).
pub const PRESERVE_ANNOTATION_PREFIX: &str = "preserve.conversion.apis.kcp.io/";

/// One rule, compiled: where it reads, where it writes, how it transforms.
struct Rule {
    field: Vec<String>,
    destination: Vec<String>,
    transformation: Option<Transformation>,
}

/// One `spec.conversions[]` entry, compiled.
struct VersionConversion {
    from: String,
    to: String,
    rules: Vec<Rule>,
    /// The `preserve` fields as written without their leading dot (the annotation's keys).
    preserve: Vec<String>,
}

/// An APIConversion compiled against the versions of the schema it converts.
pub struct Converter {
    schemas: BTreeMap<String, Arc<StructuralSchema>>,
    conversions: Vec<VersionConversion>,
}

/// The field names of a `.a.b` (or `a.b`) path; `None` when a name is empty.
fn field_names(path: &str) -> Option<Vec<String>> {
    let names: Vec<String> = path
        .strip_prefix('.')
        .unwrap_or(path)
        .split('.')
        .map(str::to_string)
        .collect();
    names.iter().all(|name| !name.is_empty()).then_some(names)
}

fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn items<'v>(value: &'v Value, key: &str) -> impl Iterator<Item = (usize, &'v Value)> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

impl Converter {
    /// Compiles `conversion` (an APIConversion) against `info`, the schema served as a CRD;
    /// errors are at the APIConversion's field paths.
    pub fn compile(conversion: &Value, info: &CrdInfo) -> Result<Converter, Vec<FieldError>> {
        let schemas: BTreeMap<String, Arc<StructuralSchema>> = info
            .versions
            .iter()
            .map(|v| (v.name.clone(), v.schema.clone()))
            .collect();
        let mut errors = Vec::new();
        let mut conversions = Vec::new();
        for (i, entry) in items(&conversion["spec"], "conversions") {
            let at = format!("spec.conversions[{i}]");
            let (from, to) = (text(entry, "from"), text(entry, "to"));
            let Some(schema) = schemas.get(from) else {
                errors.push(FieldError::invalid(
                    &format!("{at}.from"),
                    json!(from),
                    "unable to find structural schema for version",
                ));
                continue;
            };
            if !schemas.contains_key(to) {
                errors.push(FieldError::invalid(
                    &format!("{at}.to"),
                    json!(to),
                    "unable to find structural schema for version",
                ));
            }
            let rules = items(entry, "rules")
                .filter_map(|(j, rule)| {
                    compile_rule(rule, schema, &format!("{at}.rules[{j}]"), &mut errors)
                })
                .collect();
            let mut preserve = Vec::new();
            for (j, field) in items(entry, "preserve") {
                let field = field.as_str().unwrap_or_default();
                if field_names(field).is_none() {
                    errors.push(FieldError::invalid(
                        &format!("{at}.preserve[{j}]"),
                        json!(field),
                        "must be a field path such as .spec.name.first",
                    ));
                }
                preserve.push(field.strip_prefix('.').unwrap_or(field).to_string());
            }
            conversions.push(VersionConversion {
                from: from.to_string(),
                to: to.to_string(),
                rules,
                preserve,
            });
        }
        if errors.is_empty() {
            Ok(Converter {
                schemas,
                conversions,
            })
        } else {
            Err(errors)
        }
    }

    /// Converts `object` to `to_api_version`: the rules from its version to the target's, the
    /// preserved fields kept or restored, then pruned to what the target version declares.
    pub fn convert(&self, original: Value, to_api_version: &str) -> Value {
        let from = version_of(&original).to_string();
        let to = to_api_version.rsplit('/').next().unwrap_or_default();
        let mut converted = original.clone();
        converted["apiVersion"] = json!(to_api_version);
        let pair = self
            .conversions
            .iter()
            .find(|c| c.from == from && c.to == to);
        for rule in pair.into_iter().flat_map(|c| &c.rules) {
            let Some(value) = get(&original, &rule.field) else {
                continue;
            };
            let value = match &rule.transformation {
                None => value.clone(),
                Some(transformation) => match self.transform(&from, transformation, value) {
                    Ok(value) => value,
                    Err(error) => {
                        tracing::warn!(%error, from, to, "an APIConversion rule failed; its destination stays unset");
                        continue;
                    }
                },
            };
            set(&mut converted, &rule.destination, value);
        }
        let restore = PRESERVE_ANNOTATION_PREFIX.to_string() + to;
        match meta::annotations(&converted).get(&restore).cloned() {
            Some(preserved) => {
                restore_preserved(&mut converted, &preserved);
                meta::remove_annotation(&mut converted, &restore);
            }
            None => {
                let preserved = self.preserved(&original, &from);
                if !preserved.is_empty() {
                    meta::set_annotation(
                        &mut converted,
                        &(PRESERVE_ANNOTATION_PREFIX.to_string() + &from),
                        &Value::Object(preserved).to_string(),
                    );
                }
            }
        }
        if let Some(schema) = self.schemas.get(to) {
            schema.prune(&mut converted);
        }
        converted
    }

    fn transform(
        &self,
        from: &str,
        transformation: &Transformation,
        value: &Value,
    ) -> Result<Value, TransformationError> {
        match self.schemas.get(from) {
            Some(schema) => schema.transform(transformation, value),
            None => Err(TransformationError::Field(format!(
                "version {from} is not in the schema"
            ))),
        }
    }

    /// The preserved fields of `original` (of version `from`), by path without the leading dot.
    fn preserved(&self, original: &Value, from: &str) -> Map<String, Value> {
        self.conversions
            .iter()
            .filter(|c| c.from == from)
            .flat_map(|c| &c.preserve)
            .filter_map(|field| {
                let value = get(original, &field_names(field)?)?;
                Some((field.clone(), value.clone()))
            })
            .collect()
    }
}

fn compile_rule(
    rule: &Value,
    schema: &StructuralSchema,
    at: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Rule> {
    let (field, destination) = (text(rule, "field"), text(rule, "destination"));
    let names = match schema.declared_field(field) {
        Ok(names) => Some(names),
        Err(error) => {
            errors.push(FieldError::invalid(
                &format!("{at}.field"),
                json!(field),
                &error.to_string(),
            ));
            None
        }
    };
    let destination_names = field_names(destination);
    if destination_names.is_none() {
        errors.push(FieldError::invalid(
            &format!("{at}.destination"),
            json!(destination),
            "must be a field path such as .spec.name.first",
        ));
    }
    let transformation = match rule.get("transformation").and_then(Value::as_str) {
        None | Some("") => None,
        Some(expression) => match schema.compile_transformation(field, expression) {
            Ok(transformation) => Some(transformation),
            Err(error) => {
                errors.push(FieldError::invalid(
                    &format!("{at}.transformation"),
                    json!(expression),
                    &error.to_string(),
                ));
                return None;
            }
        },
    };
    Some(Rule {
        field: names?,
        destination: destination_names?,
        transformation,
    })
}

/// The errors of an APIConversion given the APIResourceSchema it is named like.
pub fn validate(conversion: &Value, schema: &Value) -> Vec<FieldError> {
    match CrdInfo::from_crd(&crate::schema::to_crd(schema)) {
        Ok(info) => Converter::compile(conversion, &info)
            .err()
            .unwrap_or_default(),
        Err(error) => vec![FieldError::invalid(
            "metadata.name",
            json!(meta::name(conversion).unwrap_or_default()),
            &format!("the APIResourceSchema of this name is not a valid CRD: {error}"),
        )],
    }
}

fn version_of(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default()
}

fn get<'v>(object: &'v Value, names: &[String]) -> Option<&'v Value> {
    names
        .iter()
        .try_fold(object, |value, name| value.get(name.as_str()))
}

/// Sets the field at `names`, creating the objects on the way; a non-object on the way is left
/// alone (as upstream's `SetNestedField` refuses it).
fn set(object: &mut Value, names: &[String], value: Value) {
    let Some((last, parents)) = names.split_last() else {
        return;
    };
    let mut current = object;
    for name in parents {
        let Some(map) = current.as_object_mut() else {
            return;
        };
        current = map
            .entry(name.as_str())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(map) = current.as_object_mut() {
        map.insert(last.clone(), value);
    }
}

/// Restores the fields of a preserve annotation (`{"spec.a": value, ...}`).
fn restore_preserved(object: &mut Value, annotation: &str) {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(annotation) else {
        tracing::warn!("a preserve annotation is not a JSON object; nothing restored");
        return;
    };
    for (field, value) in fields {
        if let Some(names) = field_names(&field) {
            set(object, &names, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        let string = json!({"type": "string"});
        json!({
            "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
            "metadata": {"name": "rev1.widgets.example.io"},
            "spec": {"group": "example.io", "scope": "Cluster",
                "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"firstName": string, "lastName": string}}}}},
                    {"name": "v2", "served": true, "storage": false, "schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "extra": {"type": "object", "properties": {"hello": string}},
                            "name": {"type": "object", "properties": {"first": string, "last": string, "lastUpper": string}}}}}}}
                ]}
        })
    }

    fn conversion() -> Value {
        json!({
            "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIConversion",
            "metadata": {"name": "rev1.widgets.example.io"},
            "spec": {"conversions": [
                {"from": "v1", "to": "v2", "rules": [
                    {"field": ".spec.firstName", "destination": ".spec.name.first"},
                    {"field": ".spec.lastName", "destination": ".spec.name.last", "transformation": "self"},
                    {"field": ".spec.lastName", "destination": ".spec.name.lastUpper", "transformation": "self.upperAscii()"}]},
                {"from": "v2", "to": "v1", "rules": [
                    {"field": ".spec.name.first", "destination": ".spec.firstName"},
                    {"field": ".spec.name.last", "destination": ".spec.lastName"}],
                 "preserve": [".spec.extra"]}
            ]}
        })
    }

    fn converter() -> Converter {
        let info = CrdInfo::from_crd(&crate::schema::to_crd(&schema())).unwrap();
        Converter::compile(&conversion(), &info).unwrap()
    }

    #[test]
    fn renamed_fields_convert_both_ways_and_new_fields_survive_the_round_trip() {
        let converter = converter();
        let v2 = json!({"apiVersion": "example.io/v2", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"name": {"first": "Ada", "last": "Lovelace"}, "extra": {"hello": "world"}}});
        let v1 = converter.convert(v2.clone(), "example.io/v1");
        assert_eq!(
            v1["spec"],
            json!({"firstName": "Ada", "lastName": "Lovelace"})
        );
        assert_eq!(
            v1["metadata"]["annotations"]["preserve.conversion.apis.kcp.io/v2"],
            json!({"spec.extra": {"hello": "world"}}).to_string()
        );
        let back = converter.convert(v1, "example.io/v2");
        assert_eq!(back["metadata"], json!({"name": "w"}));
        assert_eq!(
            back["spec"],
            json!({"name": {"first": "Ada", "last": "Lovelace", "lastUpper": "LOVELACE"},
                "extra": {"hello": "world"}})
        );
    }

    #[test]
    fn an_object_without_a_pair_only_changes_its_api_version() {
        let converter = converter();
        let v1 = json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}});
        let same = converter.convert(v1.clone(), "example.io/v1");
        assert_eq!(same, v1);
    }

    #[test]
    fn admission_refuses_unknown_fields_versions_and_bad_cel() {
        assert!(validate(&conversion(), &schema()).is_empty());
        let mut bad = conversion();
        bad["spec"]["conversions"][0]["rules"][0]["field"] = json!(".spec.middleName");
        bad["spec"]["conversions"][0]["rules"][1]["transformation"] = json!("self.");
        bad["spec"]["conversions"][1]["from"] = json!("v3");
        bad["spec"]["conversions"][0]["rules"][2]["destination"] = json!(".spec..x");
        let fields: Vec<String> = validate(&bad, &schema())
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.conversions[0].rules[0].field",
                "spec.conversions[0].rules[1].transformation",
                "spec.conversions[0].rules[2].destination",
                "spec.conversions[1].from",
            ]
        );
    }
}
