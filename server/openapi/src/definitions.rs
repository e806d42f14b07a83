//! Schema definitions keyed by their Kubernetes definition names, and the built-in set.
//!
//! The built-in schemas come from k8s-openapi's `schemars` implementations rather than a vendored
//! `swagger.json`: the Rust types are what the server decodes with, so the published schema and
//! the accepted shape cannot drift apart. schemars emits JSON Schema; its OpenAPI 3.0 settings
//! already place definitions under `#/components/schemas/` and wrap `$ref`s that carry a
//! description into `allOf`, which is exactly the shape kubectl's explain templates and
//! strategic-merge-patch lookup expect. What schemars cannot know is added here: the
//! `x-kubernetes-patch-*` and `x-kubernetes-list-*` extensions that k8s-openapi encodes only as
//! Rust merge code, and upstream's optional `metadata` (k8s-openapi marks it required because the
//! Rust field is not an `Option`).

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1 as authentication;
use k8s_openapi::api::authorization::v1 as authorization;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::api::rbac::v1 as rbac;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// Where schemas live inside an OpenAPI v3 document; every `$ref` in a [`Definitions`] uses it.
pub(crate) const V3_REF_PREFIX: &str = "#/components/schemas/";

pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(crate) const API_RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const OBJECT_METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESCRIPTION: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// One kind a logical cluster serves, with the definition name of its schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServedKind {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Lower-case plural resource name used in URL paths.
    pub plural: String,
    pub namespaced: bool,
    /// Key of the kind's schema in [`Definitions`], e.g. `io.k8s.api.core.v1.ConfigMap`.
    pub definition: String,
    /// Whether PATCH accepts `application/strategic-merge-patch+json`: true for built-in kinds,
    /// false for custom resources. kubectl computes a strategic merge patch only when the
    /// document advertises it, so claiming it for a CRD would make `kubectl apply` send a patch
    /// type the server refuses.
    pub strategic_merge_patch: bool,
}

impl ServedKind {
    /// The group-version path as used in the `/openapi/v3` index: `api/v1` or `apis/<group>/<version>`.
    pub fn group_version_path(&self) -> String {
        group_version_path(&self.group, &self.version)
    }

    /// Definition name of the kind's list type; synthesised by [`crate::OpenApiDocuments`] when absent.
    pub fn list_definition(&self) -> String {
        format!("{}List", self.definition)
    }

    pub(crate) fn gvk(&self) -> Value {
        gvk(&self.group, &self.version, &self.kind)
    }
}

pub(crate) fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The value kubectl compares against: exactly these three keys, nothing else.
pub(crate) fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "kind": kind, "version": version })
}

pub(crate) fn schema_ref(definition: &str) -> Value {
    json!({ "$ref": format!("{V3_REF_PREFIX}{definition}") })
}

/// A set of definitions (OpenAPI v3 flavour, keyed by definition name).
///
/// References between definitions are written `#/components/schemas/<name>`; the v2 document
/// rewrites them to `#/definitions/<name>`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Definitions(BTreeMap<String, Value>);

impl Definitions {
    /// Adds or replaces one definition.
    pub fn insert(&mut self, name: impl Into<String>, schema: Value) {
        self.0.insert(name.into(), schema);
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }

    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.0.get_mut(name)
    }
}

impl From<BTreeMap<String, Value>> for Definitions {
    fn from(map: BTreeMap<String, Value>) -> Self {
        Self(map)
    }
}

impl Extend<(String, Value)> for Definitions {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

/// The definition name upstream gives a custom resource's schema: the group's DNS labels
/// reversed, then version and kind (`stable.example.com`, `v1`, `CronTab` →
/// `com.example.stable.v1.CronTab`).
pub fn custom_resource_definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut labels: Vec<&str> = group.split('.').collect();
    labels.reverse();
    format!("{}.{version}.{kind}", labels.join("."))
}

/// Turns a CRD version's `openAPIV3Schema` into the published schema of the kind: the object
/// gets the standard `apiVersion`, `kind` and `metadata` (a reference to `ObjectMeta`, replacing
/// whatever the CRD says about metadata, which may only constrain name and generateName).
pub fn custom_resource_schema(open_api_v3_schema: &Value) -> Value {
    let mut schema = match open_api_v3_schema {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    schema.insert("type".into(), json!("object"));
    let properties = schema.entry("properties").or_insert_with(|| json!({}));
    if !properties.is_object() {
        *properties = json!({});
    }
    if let Value::Object(properties) = properties {
        properties.insert(
            "apiVersion".into(),
            json!({ "description": API_VERSION_DESCRIPTION, "type": "string" }),
        );
        properties.insert(
            "kind".into(),
            json!({ "description": KIND_DESCRIPTION, "type": "string" }),
        );
        properties.insert(
            "metadata".into(),
            described_ref(OBJECT_META, OBJECT_METADATA_DESCRIPTION),
        );
    }
    Value::Object(schema)
}

/// The list type of a kind, in the shape upstream publishes (`items` required, `ListMeta`).
pub(crate) fn list_schema(kind: &ServedKind) -> Value {
    json!({
        "description": format!("{}List is a list of {} objects.", kind.kind, kind.kind),
        "type": "object",
        "properties": {
            "apiVersion": { "description": API_VERSION_DESCRIPTION, "type": "string" },
            "items": {
                "description": format!("Items is the list of {}.", kind.plural),
                "type": "array",
                "items": schema_ref(&kind.definition),
            },
            "kind": { "description": KIND_DESCRIPTION, "type": "string" },
            "metadata": described_ref(LIST_META, LIST_METADATA_DESCRIPTION),
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [gvk(&kind.group, &kind.version, &format!("{}List", kind.kind))],
    })
}

/// A reference with its own description: OpenAPI 3.0 ignores siblings of `$ref`, so upstream
/// (and kubectl explain) put the reference inside a one-element `allOf`.
fn described_ref(definition: &str, description: &str) -> Value {
    json!({ "description": description, "allOf": [schema_ref(definition)] })
}

/// Extensions Kubernetes declares on list fields of the built-in types. k8s-openapi knows the
/// list types only as merge code and does not know patch strategies at all, so they are listed
/// here: (definition, property, extensions).
fn list_extensions() -> Vec<(&'static str, &'static str, Value)> {
    let merge_by = |key: &str| {
        json!({
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": [key],
            "x-kubernetes-patch-merge-key": key,
            "x-kubernetes-patch-strategy": "merge",
        })
    };
    let atomic = || json!({ "x-kubernetes-list-type": "atomic" });
    vec![
        (
            OBJECT_META,
            "finalizers",
            json!({ "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge" }),
        ),
        (OBJECT_META, "ownerReferences", merge_by("uid")),
        (OBJECT_META, "managedFields", atomic()),
        (
            "io.k8s.api.core.v1.ServiceAccount",
            "secrets",
            merge_by("name"),
        ),
        (
            "io.k8s.api.core.v1.ServiceAccount",
            "imagePullSecrets",
            atomic(),
        ),
        ("io.k8s.api.core.v1.NamespaceSpec", "finalizers", atomic()),
        (
            "io.k8s.api.core.v1.NamespaceStatus",
            "conditions",
            merge_by("type"),
        ),
        (
            "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
            "causes",
            atomic(),
        ),
        ("io.k8s.api.rbac.v1.Role", "rules", atomic()),
        ("io.k8s.api.rbac.v1.ClusterRole", "rules", atomic()),
        ("io.k8s.api.rbac.v1.RoleBinding", "subjects", atomic()),
        (
            "io.k8s.api.rbac.v1.ClusterRoleBinding",
            "subjects",
            atomic(),
        ),
        (
            "io.k8s.api.rbac.v1.AggregationRule",
            "clusterRoleSelectors",
            atomic(),
        ),
        (DELETE_OPTIONS, "dryRun", atomic()),
        (API_RESOURCE_LIST, "resources", atomic()),
    ]
}

/// The built-in kinds plus every definition they reference (including meta types).
pub fn builtin() -> (Definitions, Vec<ServedKind>) {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut kinds = Vec::new();
    let mut serve = |kind: ServedKind| kinds.push(kind);
    serve(served::<core::Namespace>(
        &mut generator,
        "namespaces",
        false,
    ));
    serve(served::<core::ConfigMap>(
        &mut generator,
        "configmaps",
        true,
    ));
    serve(served::<core::PodTemplate>(
        &mut generator,
        "podtemplates",
        true,
    ));
    serve(served::<core::Secret>(&mut generator, "secrets", true));
    serve(served::<core::ServiceAccount>(
        &mut generator,
        "serviceaccounts",
        true,
    ));
    serve(served::<core::Event>(&mut generator, "events", true));
    serve(served::<events::Event>(&mut generator, "events", true));
    serve(served::<coordination::Lease>(
        &mut generator,
        "leases",
        true,
    ));
    serve(served::<rbac::Role>(&mut generator, "roles", true));
    serve(served::<rbac::ClusterRole>(
        &mut generator,
        "clusterroles",
        false,
    ));
    serve(served::<rbac::RoleBinding>(
        &mut generator,
        "rolebindings",
        true,
    ));
    serve(served::<rbac::ClusterRoleBinding>(
        &mut generator,
        "clusterrolebindings",
        false,
    ));
    serve(served::<authentication::TokenReview>(
        &mut generator,
        "tokenreviews",
        false,
    ));
    serve(served::<authentication::SelfSubjectReview>(
        &mut generator,
        "selfsubjectreviews",
        false,
    ));
    serve(served::<authorization::SubjectAccessReview>(
        &mut generator,
        "subjectaccessreviews",
        false,
    ));
    serve(served::<authorization::LocalSubjectAccessReview>(
        &mut generator,
        "localsubjectaccessreviews",
        true,
    ));
    serve(served::<authorization::SelfSubjectAccessReview>(
        &mut generator,
        "selfsubjectaccessreviews",
        false,
    ));
    serve(served::<authorization::SelfSubjectRulesReview>(
        &mut generator,
        "selfsubjectrulesreviews",
        false,
    ));
    generator.subschema_for::<authentication::TokenRequest>();
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::DeleteOptions>();
    generator.subschema_for::<meta::WatchEvent<RawExtension>>();
    generator.subschema_for::<meta::Patch>();
    generator.subschema_for::<meta::APIResourceList>();

    let mut definitions = Definitions(generator.take_definitions(true).into_iter().collect());
    for (_, schema) in definitions.0.iter_mut() {
        make_metadata_optional(schema);
    }
    // The Kubernetes 1.35 list/map/struct markers of the types the workload CRDs reach (the pod
    // spec of PodTemplate among them), then the few the other built-ins need.
    let mut markers: serde_json::Map<String, Value> =
        std::mem::take(&mut definitions.0).into_iter().collect();
    crate::crdgen::extensions::apply(&mut markers);
    definitions.0 = markers.into_iter().collect();
    for (definition, property, extensions) in list_extensions() {
        let field = definitions
            .get_mut(definition)
            .and_then(|schema| schema.get_mut("properties"))
            .and_then(|properties| properties.get_mut(property))
            .and_then(Value::as_object_mut);
        if let (Some(field), Value::Object(extensions)) = (field, extensions) {
            for (key, value) in extensions {
                field.entry(key).or_insert(value);
            }
        }
    }
    if let Some(Value::Object(status)) = definitions.get_mut(STATUS) {
        status.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk("", "v1", "Status")]),
        );
    }
    (definitions, kinds)
}

fn served<K>(
    generator: &mut schemars::SchemaGenerator,
    plural: &str,
    namespaced: bool,
) -> ServedKind
where
    K: k8s_openapi::Resource + schemars::JsonSchema,
{
    generator.subschema_for::<K>();
    ServedKind {
        group: K::GROUP.to_owned(),
        version: K::VERSION.to_owned(),
        kind: K::KIND.to_owned(),
        plural: plural.to_owned(),
        namespaced,
        definition: K::schema_name().into_owned(),
        strategic_merge_patch: true,
    }
}

/// k8s-openapi lists `metadata` as required wherever the Rust field is not optional; upstream
/// never requires it, and kubectl's client-side validation would reject manifests without it.
fn make_metadata_optional(schema: &mut Value) {
    let refers_to_meta = schema
        .pointer("/properties/metadata")
        .map(|metadata| {
            let text = metadata.to_string();
            text.contains(OBJECT_META) || text.contains(LIST_META)
        })
        .unwrap_or(false);
    if !refers_to_meta {
        return;
    }
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| name != "metadata");
        if required.is_empty() {
            object.remove("required");
        }
    }
}
