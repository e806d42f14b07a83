//! The REST operations of each served kind, described once and rendered as OpenAPI v3 and v2.
//!
//! Clients read more from the paths than one might expect: `kubectl explain` finds the kind of a
//! resource through the `x-kubernetes-group-version-kind` of the operations under
//! `/api[s]/<gv>/[namespaces/{namespace}/]<plural>[/{name}]`; `kubectl apply` decides whether to
//! validate client-side by looking for the `fieldValidation` query parameter on the kind's PATCH,
//! and computes a strategic merge patch only if that PATCH lists
//! `application/strategic-merge-patch+json`. Both versions are rendered from the same
//! [`PathItem`] list so they cannot disagree.

use serde_json::{Map, Value, json};

use crate::definitions::{
    API_RESOURCE_LIST, DELETE_OPTIONS, PATCH, STATUS, ServedKind, group_version_path, schema_ref,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    Path,
    Query,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Parameter {
    pub name: &'static str,
    pub location: Location,
    pub description: &'static str,
    pub json_type: &'static str,
    pub unique_items: bool,
}

const fn query(
    name: &'static str,
    json_type: &'static str,
    description: &'static str,
) -> Parameter {
    Parameter {
        name,
        location: Location::Query,
        description,
        json_type,
        unique_items: true,
    }
}

const NAME: Parameter = Parameter {
    name: "name",
    location: Location::Path,
    description: "name of the object",
    json_type: "string",
    unique_items: true,
};
const NAMESPACE: Parameter = Parameter {
    name: "namespace",
    location: Location::Path,
    description: "object name and auth scope, such as for teams and projects",
    json_type: "string",
    unique_items: true,
};
const PRETTY: Parameter = query(
    "pretty",
    "string",
    "If 'true', then the output is pretty printed.",
);
const ALLOW_WATCH_BOOKMARKS: Parameter = query(
    "allowWatchBookmarks",
    "boolean",
    "Requests watch events of type BOOKMARK. Servers may send them at their discretion; clients must not assume any.",
);
const CONTINUE: Parameter = query(
    "continue",
    "string",
    "Opaque token from a previous list response with a limit, used to fetch the next chunk.",
);
const FIELD_SELECTOR: Parameter = query(
    "fieldSelector",
    "string",
    "Restricts the returned objects by their fields. Defaults to everything.",
);
const LABEL_SELECTOR: Parameter = query(
    "labelSelector",
    "string",
    "Restricts the returned objects by their labels. Defaults to everything.",
);
const LIMIT: Parameter = query(
    "limit",
    "integer",
    "Maximum number of objects to return; a continue token is set when more exist.",
);
const RESOURCE_VERSION: Parameter = query(
    "resourceVersion",
    "string",
    "Constrains which resource versions the request may be served from. Defaults to the most recent.",
);
const RESOURCE_VERSION_MATCH: Parameter = query(
    "resourceVersionMatch",
    "string",
    "How resourceVersion applies to list calls: Exact or NotOlderThan.",
);
const SEND_INITIAL_EVENTS: Parameter = query(
    "sendInitialEvents",
    "boolean",
    "With watch=true, starts the stream with synthetic events for the current state, ending with a bookmark.",
);
const TIMEOUT_SECONDS: Parameter = query(
    "timeoutSeconds",
    "integer",
    "Timeout for list and watch calls, regardless of activity.",
);
const WATCH: Parameter = query(
    "watch",
    "boolean",
    "Watch for changes to the described resources and return them as a stream of add, update and remove notifications.",
);
const DRY_RUN: Parameter = query(
    "dryRun",
    "string",
    "When present, modifications are not persisted. The only valid value is All.",
);
const FIELD_MANAGER: Parameter = query(
    "fieldManager",
    "string",
    "Name of the actor making the change, recorded in managedFields.",
);
const FIELD_VALIDATION: Parameter = query(
    "fieldValidation",
    "string",
    "How the server treats unknown or duplicate fields in the request body: Ignore, Warn or Strict.",
);
const FORCE: Parameter = query(
    "force",
    "boolean",
    "Takes ownership of conflicting fields on apply requests. Must be unset for other patch types.",
);
const GRACE_PERIOD_SECONDS: Parameter = query(
    "gracePeriodSeconds",
    "integer",
    "Seconds before the object is deleted; zero means immediately.",
);
const IGNORE_STORE_READ_ERROR: Parameter = query(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
    "Deletes an object that cannot be read from storage. Dangerous; needs a special permission.",
);
const ORPHAN_DEPENDENTS: Parameter = query(
    "orphanDependents",
    "boolean",
    "Deprecated: use propagationPolicy. Whether dependents are orphaned.",
);
const PROPAGATION_POLICY: Parameter = query(
    "propagationPolicy",
    "string",
    "Whether and how garbage collection deletes dependents: Orphan, Background or Foreground.",
);

const LIST_PARAMETERS: &[Parameter] = &[
    ALLOW_WATCH_BOOKMARKS,
    CONTINUE,
    FIELD_SELECTOR,
    LABEL_SELECTOR,
    LIMIT,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
    WATCH,
];
const WRITE_PARAMETERS: &[Parameter] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
const PATCH_PARAMETERS: &[Parameter] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE];
const DELETE_PARAMETERS: &[Parameter] = &[
    DRY_RUN,
    GRACE_PERIOD_SECONDS,
    IGNORE_STORE_READ_ERROR,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
];
const DELETE_COLLECTION_PARAMETERS: &[Parameter] = &[
    CONTINUE,
    DRY_RUN,
    FIELD_SELECTOR,
    GRACE_PERIOD_SECONDS,
    IGNORE_STORE_READ_ERROR,
    LABEL_SELECTOR,
    LIMIT,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
];

const ANY_BODY: &[&str] = &["*/*"];
const JSON: &[&str] = &["application/json"];
const JSON_AND_WATCH: &[&str] = &["application/json", "application/json;stream=watch"];
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
const PATCH_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    STRATEGIC_MERGE_PATCH,
];

#[derive(Debug, Clone)]
pub(crate) struct Body {
    pub definition: String,
    pub content_types: Vec<&'static str>,
    pub required: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Operation {
    pub method: &'static str,
    pub action: Option<&'static str>,
    pub id: String,
    pub tag: String,
    pub description: String,
    pub parameters: &'static [Parameter],
    pub body: Option<Body>,
    pub response: String,
    pub response_codes: &'static [&'static str],
    pub produces: &'static [&'static str],
    pub gvk: Option<Value>,
}

#[derive(Debug, Clone)]
pub(crate) struct PathItem {
    pub path: String,
    pub parameters: Vec<Parameter>,
    pub operations: Vec<Operation>,
}

/// `coordination.k8s.io`/`v1` → `CoordinationV1`, core → `CoreV1`, as in upstream operation ids.
fn id_infix(group: &str, version: &str) -> String {
    let group = group.strip_suffix(".k8s.io").unwrap_or(group);
    let group = if group.is_empty() { "core" } else { group };
    let mut out = String::new();
    for word in group.split(['.', '-']).chain(std::iter::once(version)) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

fn tag(group: &str, version: &str) -> String {
    let group = group.strip_suffix(".k8s.io").unwrap_or(group);
    let group = if group.is_empty() { "core" } else { group };
    format!("{}_{version}", group.replace(['.', '-'], "_"))
}

/// The discovery path of one group-version (`GET /api/v1/`), which upstream also publishes.
pub(crate) fn group_version_root(group: &str, version: &str) -> PathItem {
    PathItem {
        path: format!("/{}/", group_version_path(group, version)),
        parameters: Vec::new(),
        operations: vec![Operation {
            method: "get",
            action: None,
            id: format!("get{}APIResources", id_infix(group, version)),
            tag: tag(group, version),
            description: "get available resources".into(),
            parameters: &[],
            body: None,
            response: API_RESOURCE_LIST.into(),
            response_codes: &["200"],
            produces: JSON,
            gvk: None,
        }],
    }
}

/// Collection and object paths of one kind, plus the all-namespaces list of namespaced kinds.
pub(crate) fn paths_of(kind: &ServedKind) -> Vec<PathItem> {
    let base = format!("/{}", group_version_path(&kind.group, &kind.version));
    let infix = id_infix(&kind.group, &kind.version);
    let scope = if kind.namespaced { "Namespaced" } else { "" };
    let op = |method, action, verb: &str, description: String| Operation {
        method,
        action: Some(action),
        id: format!("{verb}{infix}{scope}{}", kind.kind),
        tag: tag(&kind.group, &kind.version),
        description,
        parameters: &[],
        body: None,
        response: kind.definition.clone(),
        response_codes: &["200"],
        produces: JSON,
        gvk: Some(kind.gvk()),
    };
    let body = |definition: &str, content_types: &[&'static str], required| {
        Some(Body {
            definition: definition.to_owned(),
            content_types: content_types.to_vec(),
            required,
        })
    };
    let mut patch_types = PATCH_TYPES.to_vec();
    if !kind.strategic_merge_patch {
        patch_types.retain(|content_type| *content_type != STRATEGIC_MERGE_PATCH);
    }
    let kind_name = &kind.kind;

    let list = Operation {
        parameters: LIST_PARAMETERS,
        response: kind.list_definition(),
        produces: JSON_AND_WATCH,
        ..op(
            "get",
            "list",
            "list",
            format!("list or watch objects of kind {kind_name}"),
        )
    };
    let collection_operations = vec![
        list.clone(),
        Operation {
            parameters: WRITE_PARAMETERS,
            body: body(&kind.definition, ANY_BODY, true),
            response_codes: &["200", "201", "202"],
            ..op("post", "post", "create", format!("create a {kind_name}"))
        },
        Operation {
            parameters: DELETE_COLLECTION_PARAMETERS,
            body: body(DELETE_OPTIONS, ANY_BODY, false),
            response: STATUS.into(),
            ..op(
                "delete",
                "deletecollection",
                "deleteCollection",
                format!("delete collection of {kind_name}"),
            )
        },
    ];
    let object_operations = vec![
        op(
            "get",
            "get",
            "read",
            format!("read the specified {kind_name}"),
        ),
        Operation {
            parameters: WRITE_PARAMETERS,
            body: body(&kind.definition, ANY_BODY, true),
            response_codes: &["200", "201"],
            ..op(
                "put",
                "put",
                "replace",
                format!("replace the specified {kind_name}"),
            )
        },
        Operation {
            parameters: PATCH_PARAMETERS,
            body: Some(Body {
                definition: PATCH.to_owned(),
                content_types: patch_types,
                required: true,
            }),
            response_codes: &["200", "201"],
            ..op(
                "patch",
                "patch",
                "patch",
                format!("partially update the specified {kind_name}"),
            )
        },
        Operation {
            parameters: DELETE_PARAMETERS,
            body: body(DELETE_OPTIONS, ANY_BODY, false),
            response: STATUS.into(),
            response_codes: &["200", "202"],
            ..op(
                "delete",
                "delete",
                "delete",
                format!("delete a {kind_name}"),
            )
        },
    ];

    let mut paths = Vec::new();
    let (collection, object, scope_parameters) = if kind.namespaced {
        (
            format!("{base}/namespaces/{{namespace}}/{}", kind.plural),
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", kind.plural),
            vec![NAMESPACE],
        )
    } else {
        (
            format!("{base}/{}", kind.plural),
            format!("{base}/{}/{{name}}", kind.plural),
            Vec::new(),
        )
    };
    paths.push(PathItem {
        path: collection,
        parameters: [scope_parameters.clone(), vec![PRETTY]].concat(),
        operations: collection_operations,
    });
    paths.push(PathItem {
        path: object,
        parameters: [vec![NAME], scope_parameters, vec![PRETTY]].concat(),
        operations: object_operations,
    });
    if kind.namespaced {
        paths.push(PathItem {
            path: format!("{base}/{}", kind.plural),
            parameters: vec![PRETTY],
            operations: vec![Operation {
                id: format!("list{infix}{}ForAllNamespaces", kind.kind),
                ..list
            }],
        });
    }
    paths
}

/// The definitions a path item refers to, for computing a document's closure.
pub(crate) fn referenced_definitions(item: &PathItem) -> Vec<String> {
    let mut names = Vec::new();
    for operation in &item.operations {
        names.push(operation.response.clone());
        if let Some(body) = &operation.body {
            names.push(body.definition.clone());
        }
    }
    names
}

fn status_text(code: &str) -> &'static str {
    match code {
        "201" => "Created",
        "202" => "Accepted",
        _ => "OK",
    }
}

/// The two renderings differ only in how parameters, bodies and responses are spelled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavour {
    V2,
    V3,
}

fn parameter(parameter: &Parameter, flavour: Flavour) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), json!(parameter.name));
    let location = match parameter.location {
        Location::Path => "path",
        Location::Query => "query",
    };
    out.insert("in".into(), json!(location));
    out.insert("description".into(), json!(parameter.description));
    if parameter.location == Location::Path {
        out.insert("required".into(), json!(true));
    }
    let schema = json!({ "type": parameter.json_type, "uniqueItems": parameter.unique_items });
    match (flavour, schema) {
        (Flavour::V3, schema) => {
            out.insert("schema".into(), schema);
        }
        (Flavour::V2, Value::Object(inline)) => out.extend(inline),
        (Flavour::V2, _) => {}
    }
    Value::Object(out)
}

/// The flavour-specific fields of one operation: parameters, body, content types, responses.
fn exchange(operation: &Operation, flavour: Flavour) -> Map<String, Value> {
    let v2_ref = |definition: &str| json!({ "$ref": format!("#/definitions/{definition}") });
    let content = |types: &[&str], definition: &str| -> Map<String, Value> {
        types
            .iter()
            .map(|content_type| {
                let media = json!({ "schema": schema_ref(definition) });
                ((*content_type).to_owned(), media)
            })
            .collect()
    };
    let mut out = Map::new();
    let mut parameters: Vec<Value> = Vec::new();
    if let Some(body) = &operation.body {
        if flavour == Flavour::V3 {
            let request = json!({
                "content": content(&body.content_types, &body.definition),
                "required": body.required,
            });
            out.insert("requestBody".into(), request);
        } else {
            out.insert("consumes".into(), json!(body.content_types));
            parameters.push(json!({
                "name": "body",
                "in": "body",
                "required": body.required,
                "schema": v2_ref(&body.definition),
            }));
        }
    }
    if flavour == Flavour::V2 {
        out.insert("produces".into(), json!(operation.produces));
        out.insert("schemes".into(), json!(["https"]));
    }
    parameters.extend(operation.parameters.iter().map(|p| parameter(p, flavour)));
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    let mut responses = Map::new();
    for code in operation.response_codes {
        let mut response = json!({ "description": status_text(code) });
        if flavour == Flavour::V3 {
            response["content"] = Value::Object(content(operation.produces, &operation.response));
        } else {
            response["schema"] = v2_ref(&operation.response);
        }
        responses.insert((*code).to_owned(), response);
    }
    responses.insert("401".into(), json!({ "description": "Unauthorized" }));
    out.insert("responses".into(), Value::Object(responses));
    out
}

fn render(items: &[PathItem], flavour: Flavour) -> Map<String, Value> {
    let mut paths = Map::new();
    for item in items {
        let mut path = Map::new();
        for operation in &item.operations {
            let mut out = Map::new();
            out.insert("description".into(), json!(operation.description));
            out.insert("operationId".into(), json!(operation.id));
            out.insert("tags".into(), json!([operation.tag]));
            out.extend(exchange(operation, flavour));
            if let Some(action) = operation.action {
                out.insert("x-kubernetes-action".into(), json!(action));
            }
            if let Some(gvk) = &operation.gvk {
                out.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
            }
            path.insert(operation.method.into(), Value::Object(out));
        }
        if !item.parameters.is_empty() {
            let parameters = item.parameters.iter().map(|p| parameter(p, flavour));
            path.insert("parameters".into(), parameters.collect());
        }
        paths.insert(item.path.clone(), Value::Object(path));
    }
    paths
}

/// Renders path items as an OpenAPI v3 `paths` object.
pub(crate) fn render_v3(items: &[PathItem]) -> Map<String, Value> {
    render(items, Flavour::V3)
}

/// Renders path items as a Swagger 2.0 `paths` object (`$ref`s into `#/definitions/`).
pub(crate) fn render_v2(items: &[PathItem]) -> Map<String, Value> {
    render(items, Flavour::V2)
}
