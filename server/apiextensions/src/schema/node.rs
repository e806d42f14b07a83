//! The parsed form of one OpenAPI v3 schema node and the structural rules it must satisfy.
//!
//! Kubernetes only accepts *structural* CRD schemas: every field has a type (except under
//! `x-kubernetes-preserve-unknown-fields` or `x-kubernetes-int-or-string`), no `$ref`, and value
//! validations (`allOf`, `anyOf`, `oneOf`, `not`) may only restrict, never declare, fields. A
//! schema is parsed once per CRD version into this tree so that validation, pruning, defaulting
//! and CEL never re-read JSON keywords; the structural rules are checked during that same walk and
//! reported at the schema's field paths with kube-apiextensions' messages.

use kcp_apimachinery::FieldError;
use regex::Regex;
use serde_json::{Map, Value};

use crate::cel::rule::CompiledRule;
use crate::path;
use crate::schema::{format, validate};

/// The OpenAPI `type` keyword; `None` on a node means "any" (only legal in the cases above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

const TYPE_NAMES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

impl Type {
    fn parse(name: &str) -> Option<Type> {
        Some(match name {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    /// The keyword as written in a schema.
    pub fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }

    fn is_scalar(self) -> bool {
        !matches!(self, Type::Object | Type::Array)
    }
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map,
}

/// `additionalProperties`: absent, a boolean, or a schema for every value of a map.
#[derive(Debug, Default)]
pub enum Additional {
    #[default]
    Absent,
    Allowed(bool),
    Schema(Box<Node>),
}

/// One schema node with every keyword the API server acts on.
#[derive(Debug, Default)]
pub struct Node {
    pub ty: Option<Type>,
    pub format: Option<String>,
    pub nullable: bool,
    pub properties: Vec<(String, Node)>,
    pub additional: Additional,
    pub items: Option<Box<Node>>,
    pub enumeration: Option<Vec<Value>>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<u64>,
    pub min_length: Option<u64>,
    pub pattern: Option<(String, Regex)>,
    pub max_items: Option<u64>,
    pub min_items: Option<u64>,
    pub unique_items: bool,
    pub max_properties: Option<u64>,
    pub min_properties: Option<u64>,
    pub required: Vec<String>,
    pub default: Option<Value>,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub int_or_string: bool,
    pub list_type: Option<ListType>,
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type: granular` or absent (`false`) versus `atomic` (`true`).
    pub map_atomic: bool,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub rules: Vec<CompiledRule>,
}

impl Node {
    /// The schema of property `name`, if declared.
    pub fn property(&self, name: &str) -> Option<&Node> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, node)| node)
    }

    /// The type name Kubernetes shows for a node in CEL errors (`object`, `integer`, ...).
    pub fn type_name(&self) -> &'static str {
        match self.ty {
            Some(ty) => ty.name(),
            None if self.int_or_string => "integer-or-string",
            None => "",
        }
    }
}

/// Where a node sits; a few rules differ at the root and for array items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
}

/// State carried down the walk.
#[derive(Debug, Clone)]
struct Scope {
    level: Level,
    /// Inside `allOf`/`anyOf`/`oneOf`/`not`: only value validations are allowed.
    nested: bool,
    /// The path of the nearest array that is not a list-map: `oldSelf` cannot be correlated below it.
    uncorrelatable: Option<String>,
    /// A branch of `anyOf` under `x-kubernetes-int-or-string`, where `type: integer` and
    /// `type: string` are tolerated (generators emit that pattern).
    int_or_string_branch: bool,
}

/// Parses `schema` found at `at` (e.g. `spec.versions[0].schema.openAPIV3Schema`), collecting
/// every structural violation into `errors`.
pub(crate) fn parse_root(schema: &Value, at: &str, errors: &mut Vec<FieldError>) -> Node {
    let scope = Scope {
        level: Level::Root,
        nested: false,
        uncorrelatable: None,
        int_or_string_branch: false,
    };
    let node = parse(schema, at, &scope, errors);
    if node.nullable {
        errors.push(FieldError::forbidden(
            &path::child(at, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    node
}

fn parse(json: &Value, at: &str, scope: &Scope, errors: &mut Vec<FieldError>) -> Node {
    let Some(obj) = json.as_object() else {
        errors.push(FieldError::invalid(
            at,
            json.clone(),
            "must be a schema object",
        ));
        return Node::default();
    };
    let mut node = Node::default();
    check_unsupported(obj, at, errors);
    parse_type(obj, at, &mut node, errors);
    parse_value_keywords(obj, at, &mut node, errors);
    parse_extensions(obj, at, &mut node, errors);
    node.default = obj.get("default").cloned();

    let is_map_list = node.list_type == Some(ListType::Map);
    if let Some(items) = obj.get("items") {
        let items_at = path::child(at, "items");
        if items.is_array() {
            errors.push(FieldError::forbidden(
                &items_at,
                "items must be a schema object and not an array",
            ));
        } else {
            let uncorrelatable = match (&scope.uncorrelatable, is_map_list) {
                (Some(p), _) => Some(p.clone()),
                (None, true) => None,
                (None, false) => Some(at.to_string()),
            };
            let child = Scope {
                level: Level::Item,
                nested: scope.nested,
                uncorrelatable,
                int_or_string_branch: false,
            };
            node.items = Some(Box::new(parse(items, &items_at, &child, errors)));
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let child = Scope {
            level: Level::Field,
            nested: scope.nested,
            uncorrelatable: scope.uncorrelatable.clone(),
            int_or_string_branch: false,
        };
        let props_at = path::child(at, "properties");
        for (name, prop) in props {
            let prop_at = path::key(&props_at, name);
            node.properties
                .push((name.clone(), parse(prop, &prop_at, &child, errors)));
        }
    }
    parse_additional(obj, at, scope, &mut node, errors);
    parse_junctors(obj, at, scope, &mut node, errors);

    if scope.nested {
        check_nested(obj, at, scope.int_or_string_branch, &node, errors);
    } else {
        let type_given = obj
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty());
        check_structural(at, scope.level, type_given, &node, errors);
        check_list_and_map(at, &node, errors);
        check_metadata(at, scope.level, &node, errors);
    }
    node.rules = crate::cel::rule::compile_all(
        obj.get("x-kubernetes-validations"),
        at,
        &node,
        scope.uncorrelatable.as_deref(),
        errors,
    );
    if let Some(default) = &node.default
        && !scope.nested
    {
        check_default(default, at, &node, errors);
    }
    node
}

fn check_unsupported(obj: &Map<String, Value>, at: &str, errors: &mut Vec<FieldError>) {
    for (keyword, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if obj.get(keyword).is_some_and(|v| !v.is_null()) {
            errors.push(FieldError::forbidden(&path::child(at, keyword), detail));
        }
    }
    if obj.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        errors.push(FieldError::forbidden(
            &path::child(at, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
}

fn parse_type(obj: &Map<String, Value>, at: &str, node: &mut Node, errors: &mut Vec<FieldError>) {
    let Some(ty) = obj
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return;
    };
    if ty == "null" {
        errors.push(FieldError::forbidden(
            &path::child(at, "type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
        return;
    }
    match Type::parse(ty) {
        Some(parsed) => node.ty = Some(parsed),
        None => errors.push(FieldError::not_supported(
            &path::child(at, "type"),
            Value::from(ty),
            &TYPE_NAMES,
        )),
    }
}

fn number(obj: &Map<String, Value>, key: &str) -> Option<f64> {
    obj.get(key).and_then(Value::as_f64)
}

fn count(obj: &Map<String, Value>, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64)
}

fn flag(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool) == Some(true)
}

fn parse_value_keywords(
    obj: &Map<String, Value>,
    at: &str,
    node: &mut Node,
    errors: &mut Vec<FieldError>,
) {
    node.format = obj
        .get("format")
        .and_then(Value::as_str)
        .filter(|f| format::is_known(node.ty, f))
        .map(str::to_string);
    node.nullable = flag(obj, "nullable");
    node.enumeration = obj.get("enum").and_then(Value::as_array).cloned();
    node.maximum = number(obj, "maximum");
    node.exclusive_maximum = flag(obj, "exclusiveMaximum");
    node.minimum = number(obj, "minimum");
    node.exclusive_minimum = flag(obj, "exclusiveMinimum");
    node.multiple_of = number(obj, "multipleOf");
    node.max_length = count(obj, "maxLength");
    node.min_length = count(obj, "minLength");
    node.max_items = count(obj, "maxItems");
    node.min_items = count(obj, "minItems");
    node.unique_items = flag(obj, "uniqueItems");
    node.max_properties = count(obj, "maxProperties");
    node.min_properties = count(obj, "minProperties");
    node.required = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(pattern) = obj.get("pattern").and_then(Value::as_str) {
        match Regex::new(pattern) {
            Ok(re) => node.pattern = Some((pattern.to_string(), re)),
            Err(err) => errors.push(FieldError::invalid(
                &path::child(at, "pattern"),
                Value::from(pattern),
                &format!("must be a valid regular expression, but isn't: {err}"),
            )),
        }
    }
}

fn parse_extensions(
    obj: &Map<String, Value>,
    at: &str,
    node: &mut Node,
    errors: &mut Vec<FieldError>,
) {
    if let Some(preserve) = obj.get("x-kubernetes-preserve-unknown-fields") {
        node.preserve_unknown = preserve.as_bool() == Some(true);
        if preserve.as_bool() == Some(false) {
            errors.push(FieldError::invalid(
                &path::child(at, "x-kubernetes-preserve-unknown-fields"),
                Value::Bool(false),
                "must be true or undefined",
            ));
        }
    }
    node.embedded = flag(obj, "x-kubernetes-embedded-resource");
    node.int_or_string = flag(obj, "x-kubernetes-int-or-string");
    if let Some(list_type) = obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
        node.list_type = match list_type {
            "atomic" => Some(ListType::Atomic),
            "set" => Some(ListType::Set),
            "map" => Some(ListType::Map),
            other => {
                errors.push(FieldError::not_supported(
                    &path::child(at, "x-kubernetes-list-type"),
                    Value::from(other),
                    &["atomic", "set", "map"],
                ));
                None
            }
        };
    }
    node.list_map_keys = obj
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| {
            k.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(map_type) = obj.get("x-kubernetes-map-type").and_then(Value::as_str) {
        node.map_atomic = map_type == "atomic";
        if map_type != "atomic" && map_type != "granular" {
            errors.push(FieldError::not_supported(
                &path::child(at, "x-kubernetes-map-type"),
                Value::from(map_type),
                &["atomic", "granular"],
            ));
        }
        match node.ty {
            Some(Type::Object) => {}
            None => errors.push(FieldError::required(
                &path::child(at, "type"),
                "must be object if x-kubernetes-map-type is specified",
            )),
            Some(other) => errors.push(FieldError::invalid(
                &path::child(at, "type"),
                Value::from(other.name()),
                "must be object if x-kubernetes-map-type is specified",
            )),
        }
    }
}

fn parse_additional(
    obj: &Map<String, Value>,
    at: &str,
    scope: &Scope,
    node: &mut Node,
    errors: &mut Vec<FieldError>,
) {
    let additional_at = path::child(at, "additionalProperties");
    node.additional = match obj.get("additionalProperties") {
        None | Some(Value::Null) => Additional::Absent,
        Some(Value::Bool(allowed)) => Additional::Allowed(*allowed),
        Some(schema) => {
            let child = Scope {
                level: Level::Field,
                nested: scope.nested,
                uncorrelatable: scope.uncorrelatable.clone(),
                int_or_string_branch: false,
            };
            Additional::Schema(Box::new(parse(schema, &additional_at, &child, errors)))
        }
    };
    let conflicting = match node.additional {
        Additional::Absent | Additional::Allowed(true) => false,
        Additional::Allowed(false) | Additional::Schema(_) => true,
    };
    if conflicting && !node.properties.is_empty() {
        errors.push(FieldError::forbidden(
            &additional_at,
            "additionalProperties and properties are mutual exclusive",
        ));
    }
}

fn parse_junctors(
    obj: &Map<String, Value>,
    at: &str,
    scope: &Scope,
    node: &mut Node,
    errors: &mut Vec<FieldError>,
) {
    let list = |keyword: &str, errors: &mut Vec<FieldError>| -> Vec<Node> {
        let nested = Scope {
            level: scope.level,
            nested: true,
            uncorrelatable: scope.uncorrelatable.clone(),
            int_or_string_branch: keyword == "anyOf" && node.int_or_string,
        };
        let keyword_at = path::child(at, keyword);
        obj.get(keyword)
            .and_then(Value::as_array)
            .map(|schemas| {
                schemas
                    .iter()
                    .enumerate()
                    .map(|(i, s)| parse(s, &path::index(&keyword_at, i), &nested, errors))
                    .collect()
            })
            .unwrap_or_default()
    };
    node.all_of = list("allOf", errors);
    node.any_of = list("anyOf", errors);
    node.one_of = list("oneOf", errors);
    if let Some(not) = obj.get("not") {
        let nested = Scope {
            level: scope.level,
            nested: true,
            uncorrelatable: scope.uncorrelatable.clone(),
            int_or_string_branch: false,
        };
        node.not = Some(Box::new(parse(
            not,
            &path::child(at, "not"),
            &nested,
            errors,
        )));
    }
}

/// The rules for a node in the structural part of a schema.
/// `type_given`: a `type` was written, even an unsupported one (already reported).
fn check_structural(
    at: &str,
    level: Level,
    type_given: bool,
    node: &Node,
    errors: &mut Vec<FieldError>,
) {
    let type_at = path::child(at, "type");
    if node.ty == Some(Type::Array) && node.items.is_none() {
        errors.push(FieldError::required(
            &path::child(at, "items"),
            "must be specified",
        ));
    }
    if !matches!(node.additional, Additional::Absent) && level == Level::Root {
        errors.push(FieldError::forbidden(
            &path::child(at, "additionalProperties"),
            "must not be used at the root",
        ));
    }
    if node.embedded && node.ty != Some(Type::Object) {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        match node.ty {
            None => errors.push(FieldError::required(&type_at, detail)),
            Some(other) => errors.push(FieldError::invalid(
                &type_at,
                Value::from(other.name()),
                detail,
            )),
        }
    } else if !type_given && !node.int_or_string && !node.preserve_unknown {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(FieldError::required(&type_at, detail));
    }
    if node.embedded && !matches!(node.additional, Additional::Absent) {
        errors.push(FieldError::forbidden(
            &path::child(at, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root
        && let Some(ty) = node.ty
        && ty != Type::Object
    {
        errors.push(FieldError::invalid(
            &type_at,
            Value::from(ty.name()),
            "must be object at the root",
        ));
    }
    if node.embedded && !node.preserve_unknown && node.properties.is_empty() {
        errors.push(FieldError::required(
            &path::child(at, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    if node.int_or_string && node.preserve_unknown {
        errors.push(FieldError::invalid(
            &path::child(at, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if node.int_or_string && node.embedded {
        errors.push(FieldError::invalid(
            &path::child(at, "x-kubernetes-embedded-resource"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
}

/// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys` consistency.
fn check_list_and_map(at: &str, node: &Node, errors: &mut Vec<FieldError>) {
    let type_at = path::child(at, "type");
    let items_at = path::child(at, "items");
    let keys_at = path::child(at, "x-kubernetes-list-map-keys");
    if let Some(list_type) = node.list_type {
        let detail = "must be array if x-kubernetes-list-type is specified";
        match node.ty {
            Some(Type::Array) => {}
            None => errors.push(FieldError::required(&type_at, detail)),
            Some(other) => errors.push(FieldError::invalid(
                &type_at,
                Value::from(other.name()),
                detail,
            )),
        }
        let name = match list_type {
            ListType::Atomic => "atomic",
            ListType::Set => "set",
            ListType::Map => "map",
        };
        if let Some(items) = &node.items
            && list_type != ListType::Atomic
            && items.nullable
        {
            errors.push(FieldError::forbidden(
                &path::child(&items_at, "nullable"),
                &format!("cannot be nullable when x-kubernetes-list-type is {name}"),
            ));
        }
        if list_type == ListType::Set
            && let Some(items) = &node.items
        {
            let atomic_item = match items.ty {
                Some(Type::Object) => items.map_atomic,
                Some(Type::Array) => items.list_type == Some(ListType::Atomic),
                _ => true,
            };
            if !atomic_item {
                errors.push(FieldError::invalid(
                    &path::child(&items_at, "x-kubernetes-list-type"),
                    Value::from(name),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
        }
    }
    if !node.list_map_keys.is_empty() && node.list_type != Some(ListType::Map) {
        let list_type_at = path::child(at, "x-kubernetes-list-type");
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match node.list_type {
            None => errors.push(FieldError::required(&list_type_at, detail)),
            Some(_) => errors.push(FieldError::invalid(
                &list_type_at,
                Value::from(if node.list_type == Some(ListType::Set) {
                    "set"
                } else {
                    "atomic"
                }),
                detail,
            )),
        }
    }
    if node.list_type != Some(ListType::Map) {
        return;
    }
    if node.list_map_keys.is_empty() {
        errors.push(FieldError::required(
            &keys_at,
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = &node.items else {
        errors.push(FieldError::required(
            &items_at,
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    if items.ty != Some(Type::Object) {
        errors.push(FieldError::invalid(
            &path::child(&items_at, "type"),
            Value::from(items.ty.map_or("", Type::name)),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let keys_value = Value::from(node.list_map_keys.clone());
    let mut seen: Vec<&str> = Vec::new();
    for key in &node.list_map_keys {
        let Some(prop) = items.property(key) else {
            errors.push(FieldError::invalid(
                &keys_at,
                keys_value.clone(),
                "entries must all be names of item properties",
            ));
            continue;
        };
        let prop_at = path::key(&path::child(&items_at, "properties"), key);
        if !prop.ty.is_some_and(Type::is_scalar) {
            errors.push(FieldError::invalid(
                &path::child(&prop_at, "type"),
                Value::from(prop.ty.map_or("", Type::name)),
                "must be a scalar type if parent array's x-kubernetes-list-type is map",
            ));
        }
        if prop.default.is_none() && !items.required.iter().any(|r| r == key) {
            errors.push(FieldError::required(
                &path::child(&prop_at, "default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if prop.nullable {
            errors.push(FieldError::forbidden(
                &path::child(&prop_at, "nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
        if seen.contains(&key.as_str()) {
            errors.push(FieldError::invalid(
                &keys_at,
                keys_value.clone(),
                "must not contain duplicate entries",
            ));
        }
        seen.push(key);
    }
}

/// `apiVersion`, `kind` and `metadata` at a resource root (the schema root or an embedded
/// resource): the API server owns metadata, so a schema may only narrow `name`/`generateName`.
fn check_metadata(at: &str, level: Level, node: &Node, errors: &mut Vec<FieldError>) {
    let resource_root = level == Level::Root || node.embedded;
    if !resource_root {
        return;
    }
    let props_at = path::child(at, "properties");
    for name in ["kind", "apiVersion"] {
        if let Some(prop) = node.property(name)
            && prop.ty != Some(Type::String)
        {
            errors.push(FieldError::invalid(
                &path::child(&path::key(&props_at, name), "type"),
                Value::from(prop.ty.map_or("", Type::name)),
                "must be string",
            ));
        }
    }
    let Some(metadata) = node.property("metadata") else {
        return;
    };
    let metadata_at = path::key(&props_at, "metadata");
    if metadata.ty != Some(Type::Object) {
        errors.push(FieldError::invalid(
            &path::child(&metadata_at, "type"),
            Value::from(metadata.ty.map_or("", Type::name)),
            "must be object",
        ));
    }
    if level != Level::Root {
        return;
    }
    let only_names = metadata
        .properties
        .iter()
        .all(|(name, prop)| (name == "name" || name == "generateName") && is_plain_string(prop));
    let extras = metadata.nullable
        || metadata.default.is_some()
        || !matches!(metadata.additional, Additional::Absent)
        || metadata.items.is_some()
        || metadata.preserve_unknown
        || metadata.embedded
        || metadata.int_or_string
        || metadata.list_type.is_some()
        || !metadata.required.is_empty()
        || !metadata.rules.is_empty();
    if !only_names || extras {
        errors.push(FieldError::forbidden(
            &metadata_at,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

fn is_plain_string(node: &Node) -> bool {
    node.ty == Some(Type::String)
        && node.properties.is_empty()
        && node.items.is_none()
        && !node.nullable
        && node.default.is_none()
}

/// Rules for nodes inside `allOf`/`anyOf`/`oneOf`/`not`.
fn check_nested(
    obj: &Map<String, Value>,
    at: &str,
    int_or_string_branch: bool,
    node: &Node,
    errors: &mut Vec<FieldError>,
) {
    let forbidden = |keyword: &str, detail: &str, errors: &mut Vec<FieldError>| {
        errors.push(FieldError::forbidden(&path::child(at, keyword), detail));
    };
    let tolerated_type =
        int_or_string_branch && matches!(node.ty, Some(Type::Integer | Type::String));
    if !tolerated_type
        && obj
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
    {
        forbidden("type", "must be empty to be structural", errors);
    }
    if !matches!(node.additional, Additional::Absent) {
        forbidden(
            "additionalProperties",
            "must be undefined to be structural",
            errors,
        );
    }
    if node.default.is_some() {
        forbidden("default", "must be undefined to be structural", errors);
    }
    for keyword in ["title", "description"] {
        if obj
            .get(keyword)
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
        {
            forbidden(keyword, "must be empty to be structural", errors);
        }
    }
    if node.nullable {
        forbidden("nullable", "must be false to be structural", errors);
    }
    for (flag_set, keyword) in [
        (
            node.preserve_unknown,
            "x-kubernetes-preserve-unknown-fields",
        ),
        (node.embedded, "x-kubernetes-embedded-resource"),
        (node.int_or_string, "x-kubernetes-int-or-string"),
    ] {
        if flag_set {
            forbidden(keyword, "must be false to be structural", errors);
        }
    }
    if !node.list_map_keys.is_empty() {
        forbidden(
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
            errors,
        );
    }
    if node.list_type.is_some() {
        forbidden(
            "x-kubernetes-list-type",
            "must be undefined to be structural",
            errors,
        );
    }
    if obj.contains_key("x-kubernetes-map-type") {
        forbidden(
            "x-kubernetes-map-type",
            "must be undefined to be structural",
            errors,
        );
    }
    if obj
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|v| !v.is_empty())
    {
        forbidden(
            "x-kubernetes-validations",
            "must be empty to be structural",
            errors,
        );
    }
    if node.property("metadata").is_some() {
        errors.push(FieldError::forbidden(
            &path::key(&path::child(at, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// A `default` must itself be valid for its schema and survive pruning.
fn check_default(default: &Value, at: &str, node: &Node, errors: &mut Vec<FieldError>) {
    let default_at = path::child(at, "default");
    let mut pruned = default.clone();
    if !crate::schema::prune::prune_value(node, &mut pruned, &default_at, false).is_empty() {
        errors.push(FieldError::invalid(
            &default_at,
            default.clone(),
            "must not have unknown fields",
        ));
    }
    errors.extend(validate::validate_value(node, default, &default_at));
}
