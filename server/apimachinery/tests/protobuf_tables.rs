//! Generates the protobuf message tables (`src/protobuf/messages/generated.rs`) from crates we
//! did not write, and fails when the committed file is stale: run
//! `UPDATE_PROTOBUF_TABLES=1 cargo test -p kcp-apimachinery --test protobuf_tables` after
//! changing a source (a new k8s-pb or k8s-openapi version, a new root kind, a Go shape).
//!
//! Sources, all offline from the cargo registry (found with `cargo metadata`):
//! - field numbers, protobuf types and message references: kube-rs's `k8s-pb` (prost code
//!   generated from the Kubernetes `.proto` files, the version pinned in the root `Cargo.toml`);
//! - JSON keys and Go type names: `k8s-openapi`'s structs for the Kubernetes version the server
//!   follows (`v1_35`), matched field by field with k8s-pb's (prost's snake_case names lose the
//!   JSON spelling: `podIPs`, `volumeID`); messages k8s-openapi has no struct for (lists,
//!   `PartialObjectMetadata`) take the lowerCamelCase of prost's name;
//! - Go shapes (pointer, value, embedded), which no `.proto` records: `src/protobuf/go_shapes.txt`.
//!
//! The generator is ours; no upstream `.proto` or Go source is committed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The k8s-openapi version module whose JSON the server follows.
const OPENAPI_VERSION: &str = "v1_35";

/// The kinds the server encodes (with their lists), as (k8s-pb module, message).
const ROOTS: &[(&str, &str)] = &[
    ("api/core/v1", "ConfigMap"),
    ("api/core/v1", "ConfigMapList"),
    ("api/core/v1", "Secret"),
    ("api/core/v1", "SecretList"),
    ("api/core/v1", "Namespace"),
    ("api/core/v1", "NamespaceList"),
    ("api/core/v1", "ServiceAccount"),
    ("api/core/v1", "ServiceAccountList"),
    ("api/core/v1", "Event"),
    ("api/core/v1", "EventList"),
    ("api/core/v1", "PodTemplate"),
    ("api/core/v1", "PodTemplateList"),
    ("api/core/v1", "Service"),
    ("api/core/v1", "ServiceList"),
    ("api/core/v1", "Pod"),
    ("api/core/v1", "PodList"),
    ("api/core/v1", "PersistentVolumeClaim"),
    ("api/core/v1", "PersistentVolumeClaimList"),
    ("api/core/v1", "ResourceQuota"),
    ("api/core/v1", "ResourceQuotaList"),
    ("api/core/v1", "Endpoints"),
    ("api/core/v1", "EndpointsList"),
    ("api/events/v1", "Event"),
    ("api/events/v1", "EventList"),
    ("api/coordination/v1", "Lease"),
    ("api/coordination/v1", "LeaseList"),
    ("api/apps/v1", "Deployment"),
    ("api/apps/v1", "DeploymentList"),
    ("api/apps/v1", "StatefulSet"),
    ("api/apps/v1", "StatefulSetList"),
    ("api/apps/v1", "ReplicaSet"),
    ("api/apps/v1", "ReplicaSetList"),
    ("api/apps/v1", "DaemonSet"),
    ("api/apps/v1", "DaemonSetList"),
    ("api/policy/v1", "PodDisruptionBudget"),
    ("api/policy/v1", "PodDisruptionBudgetList"),
    ("api/policy/v1", "Eviction"),
    ("api/discovery/v1", "EndpointSlice"),
    ("api/discovery/v1", "EndpointSliceList"),
    ("api/autoscaling/v1", "Scale"),
    ("api/rbac/v1", "Role"),
    ("api/rbac/v1", "RoleList"),
    ("api/rbac/v1", "ClusterRole"),
    ("api/rbac/v1", "ClusterRoleList"),
    ("api/rbac/v1", "RoleBinding"),
    ("api/rbac/v1", "RoleBindingList"),
    ("api/rbac/v1", "ClusterRoleBinding"),
    ("api/rbac/v1", "ClusterRoleBindingList"),
    (
        "api/admissionregistration/v1",
        "ValidatingWebhookConfiguration",
    ),
    (
        "api/admissionregistration/v1",
        "ValidatingWebhookConfigurationList",
    ),
    (
        "api/admissionregistration/v1",
        "MutatingWebhookConfiguration",
    ),
    (
        "api/admissionregistration/v1",
        "MutatingWebhookConfigurationList",
    ),
    ("api/admissionregistration/v1", "ValidatingAdmissionPolicy"),
    (
        "api/admissionregistration/v1",
        "ValidatingAdmissionPolicyList",
    ),
    (
        "api/admissionregistration/v1",
        "ValidatingAdmissionPolicyBinding",
    ),
    (
        "api/admissionregistration/v1",
        "ValidatingAdmissionPolicyBindingList",
    ),
    (
        "api/admissionregistration/v1beta1",
        "MutatingAdmissionPolicy",
    ),
    (
        "api/admissionregistration/v1beta1",
        "MutatingAdmissionPolicyList",
    ),
    (
        "api/admissionregistration/v1beta1",
        "MutatingAdmissionPolicyBinding",
    ),
    (
        "api/admissionregistration/v1beta1",
        "MutatingAdmissionPolicyBindingList",
    ),
    ("api/certificates/v1", "CertificateSigningRequest"),
    ("api/certificates/v1", "CertificateSigningRequestList"),
    ("api/authentication/v1", "TokenReview"),
    ("api/authentication/v1", "SelfSubjectReview"),
    ("api/authentication/v1", "TokenRequest"),
    ("api/authorization/v1", "SubjectAccessReview"),
    ("api/authorization/v1", "LocalSubjectAccessReview"),
    ("api/authorization/v1", "SelfSubjectAccessReview"),
    ("api/authorization/v1", "SelfSubjectRulesReview"),
    (
        "apiextensions_apiserver/pkg/apis/apiextensions/v1",
        "CustomResourceDefinition",
    ),
    (
        "apiextensions_apiserver/pkg/apis/apiextensions/v1",
        "CustomResourceDefinitionList",
    ),
    ("apimachinery/pkg/apis/meta/v1", "PartialObjectMetadata"),
    ("apimachinery/pkg/apis/meta/v1", "PartialObjectMetadataList"),
    ("apimachinery/pkg/apis/meta/v1", "Status"),
    ("apimachinery/pkg/apis/meta/v1", "DeleteOptions"),
    ("apimachinery/pkg/apis/meta/v1", "WatchEvent"),
];

/// Messages the codec represents by a field type of its own rather than a table:
/// (k8s-pb module, message) → `FieldType` expression (`{schema}` is `JSONSchemaProps`' static).
const SPECIAL: &[(&str, &str, &str)] = &[
    ("apimachinery/pkg/apis/meta/v1", "Time", "T::Time"),
    ("apimachinery/pkg/apis/meta/v1", "MicroTime", "T::MicroTime"),
    ("apimachinery/pkg/apis/meta/v1", "FieldsV1", "T::FieldsV1"),
    ("apimachinery/pkg/api/resource", "Quantity", "T::Quantity"),
    (
        "apimachinery/pkg/util/intstr",
        "IntOrString",
        "T::IntOrString",
    ),
    ("apimachinery/pkg/runtime", "RawExtension", "T::Object"),
    ("api/authentication/v1", "ExtraValue", "T::ExtraValue"),
    ("api/authorization/v1", "ExtraValue", "T::ExtraValue"),
    ("api/certificates/v1", "ExtraValue", "T::ExtraValue"),
    (
        "apiextensions_apiserver/pkg/apis/apiextensions/v1",
        "Json",
        "T::Json",
    ),
    (
        "apiextensions_apiserver/pkg/apis/apiextensions/v1",
        "JsonSchemaPropsOrArray",
        "T::SchemaOrArray(&{schema})",
    ),
    (
        "apiextensions_apiserver/pkg/apis/apiextensions/v1",
        "JsonSchemaPropsOrBool",
        "T::SchemaOrBool(&{schema})",
    ),
    (
        "apiextensions_apiserver/pkg/apis/apiextensions/v1",
        "JsonSchemaPropsOrStringArray",
        "T::SchemaOrStringArray(&{schema})",
    ),
];

/// JSON keys neither k8s-openapi's field names nor lowerCamelCase give:
/// (k8s-pb module, message, prost field) → JSON key.
const JSON_KEYS: &[(&str, &str, &str, &str)] = &[(
    "apiextensions_apiserver/pkg/apis/apiextensions/v1",
    "JsonSchemaProps",
    "ref",
    "$ref",
)];

// ---- k8s-pb ----

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct MessageId {
    module: String,
    name: String,
}

#[derive(Debug, Clone)]
enum PbType {
    Scalar(String),
    Message(MessageId),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum PbLabel {
    Singular,
    Repeated,
    Map,
}

#[derive(Debug, Clone)]
struct PbField {
    number: u32,
    /// prost's field name, without `r#`.
    rust: String,
    ty: PbType,
    label: PbLabel,
}

/// The messages of one k8s-pb module (`src/<module>/mod.rs`), by name.
fn parse_pb_module(pb_src: &Path, module: &str) -> BTreeMap<String, Vec<PbField>> {
    let path = pb_src.join(module).join("mod.rs");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut messages = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut attribute: Option<String> = None;
    let mut declaration = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(rest) = line.strip_prefix("pub struct ") {
            let name = rest
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_string();
            messages.insert(name.clone(), Vec::new());
            // `pub struct Empty {}` has no body.
            current = (!rest.ends_with("{}")).then_some(name);
            continue;
        }
        if line == "}" {
            current = None;
            continue;
        }
        let Some(message) = &current else { continue };
        if let Some(attr) = trimmed.strip_prefix("#[prost(") {
            attribute = Some(attr.trim_end_matches(")]").to_string());
            continue;
        }
        if attribute.is_none() {
            continue;
        }
        declaration.push(' ');
        declaration.push_str(trimmed);
        let open = declaration.matches('<').count() > declaration.matches('>').count();
        if open || !trimmed.ends_with(',') {
            continue;
        }
        let attr = attribute.take().unwrap();
        let decl = std::mem::take(&mut declaration);
        let field = parse_pb_field(module, &attr, &decl);
        messages.get_mut(message).unwrap().push(field);
    }
    messages
}

fn parse_pb_field(module: &str, attr: &str, decl: &str) -> PbField {
    let number: u32 = attr
        .split("tag = \"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no tag in {attr}"));
    let (name, ty) = decl
        .trim()
        .trim_start_matches("pub ")
        .split_once(':')
        .unwrap_or_else(|| panic!("no field in {decl}"));
    let rust = name.trim().trim_start_matches("r#").to_string();
    let ty = ty.trim().trim_end_matches(',');
    let label = if attr.starts_with("btree_map") || attr.starts_with("map") {
        PbLabel::Map
    } else if attr.contains("repeated") {
        PbLabel::Repeated
    } else {
        PbLabel::Singular
    };
    let kind = if label == PbLabel::Map {
        attr.split('"').nth(1).unwrap().split(", ").nth(1).unwrap()
    } else {
        attr.split([',', ' ']).next().unwrap()
    };
    let ty = if kind == "message" {
        // The innermost type path: the map's value, without Option/Vec/Box.
        let inner = ty
            .trim_end_matches(['>', ',', ' '])
            .rsplit(',')
            .next()
            .unwrap();
        let path = inner
            .replace("::core::option::Option<", "")
            .replace("::prost::alloc::vec::Vec<", "")
            .replace("::prost::alloc::boxed::Box<", "")
            .replace('>', "");
        PbType::Message(resolve(module, path.trim()))
    } else {
        PbType::Scalar(kind.to_string())
    };
    PbField {
        number,
        rust,
        ty,
        label,
    }
}

/// A prost type path (`super::super::x::Y` or `Y`) seen from `module`.
fn resolve(module: &str, path: &str) -> MessageId {
    let mut components: Vec<&str> = module.split('/').collect();
    let segments: Vec<&str> = path.split("::").collect();
    let (name, prefix) = segments.split_last().unwrap();
    let mut rest = Vec::new();
    for segment in prefix {
        if *segment == "super" {
            components.pop();
        } else {
            rest.push(*segment);
        }
    }
    let module = if prefix.is_empty() {
        module.to_string()
    } else {
        components.extend(rest);
        components.join("/")
    };
    MessageId {
        module,
        name: name.to_string(),
    }
}

// ---- k8s-openapi ----

/// One k8s-openapi struct: its Go name and JSON keys by normalized Rust field name.
struct OpenApiStruct {
    go_name: String,
    keys: BTreeMap<String, String>,
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// k8s-openapi's structs of `module`, by lowercased name.
fn parse_openapi_module(openapi_src: &Path, module: &str) -> BTreeMap<String, OpenApiStruct> {
    let dir = openapi_src.join(OPENAPI_VERSION).join(module);
    let mut structs = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return structs;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(go_name) = text
            .lines()
            .find_map(|l| l.strip_prefix("pub struct "))
            .map(|rest| {
                rest.split([' ', '{', '<', '('])
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
        else {
            continue;
        };
        let mut keys = BTreeMap::new();
        for line in text.lines() {
            // `"podIPs" => Field::Key_pod_ips,` in the Deserialize impl.
            let line = line.trim();
            if let Some((json, rust)) = line.split_once("\" => Field::Key_") {
                let json = json.trim_start_matches('"');
                keys.insert(normalize(rust.trim_end_matches(',')), json.to_string());
            }
        }
        structs.insert(normalize(&go_name), OpenApiStruct { go_name, keys });
    }
    structs
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    for (i, part) in snake.split('_').enumerate() {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            if i == 0 {
                out.push(first);
            } else {
                out.push(first.to_ascii_uppercase());
            }
            out.extend(chars);
        }
    }
    out
}

fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The static's name of a message: its module's group and version, then its name.
fn static_name(id: &MessageId) -> String {
    let parts: Vec<&str> = id.module.split('/').collect();
    let group = match parts.as_slice() {
        ["api", group, _] => group.to_string(),
        ["apimachinery", "pkg", "apis", group, _] => group.to_string(),
        ["apiextensions_apiserver", .., _] => "apiextensions".to_string(),
        other => panic!("unexpected module {other:?}"),
    };
    let version = parts.last().unwrap();
    format!(
        "{}_{}_{}",
        group.to_ascii_uppercase(),
        version.to_ascii_uppercase(),
        screaming(&id.name)
    )
}

// ---- generation ----

struct Sources {
    pb_src: PathBuf,
    openapi_src: PathBuf,
}

fn locate_sources() -> Sources {
    // Only this platform's packages: every one of them is downloaded already (the test builds).
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host, "--manifest-path"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .output()
        .expect("cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let src_of = |name: &str| {
        let package = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in the workspace's dependency graph"));
        Path::new(package["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .join("src")
    };
    Sources {
        pb_src: src_of("k8s-pb"),
        openapi_src: src_of("k8s-openapi"),
    }
}

/// (module, message lowercased, JSON key) → "pointer" | "inline".
fn go_shapes() -> BTreeMap<(String, String, String), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protobuf/go_shapes.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut shapes = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [module, message, field, shape] = parts.as_slice() else {
            panic!("go_shapes.txt: bad line {line:?}");
        };
        assert!(
            matches!(*shape, "pointer" | "inline"),
            "go_shapes.txt: {line:?}"
        );
        shapes.insert(
            (module.to_string(), normalize(message), field.to_string()),
            shape.to_string(),
        );
    }
    shapes
}

struct Generator {
    sources: Sources,
    pb: BTreeMap<String, BTreeMap<String, Vec<PbField>>>,
    openapi: BTreeMap<String, BTreeMap<String, OpenApiStruct>>,
    shapes: BTreeMap<(String, String, String), String>,
    used_shapes: BTreeSet<(String, String, String)>,
    /// Messages to emit, in the order they were reached.
    order: Vec<MessageId>,
    seen: BTreeSet<MessageId>,
    problems: Vec<String>,
}

impl Generator {
    fn messages(&mut self, module: &str) -> &BTreeMap<String, Vec<PbField>> {
        if !self.pb.contains_key(module) {
            let parsed = parse_pb_module(&self.sources.pb_src, module);
            self.pb.insert(module.to_string(), parsed);
        }
        &self.pb[module]
    }

    fn openapi_struct(&mut self, id: &MessageId) -> Option<&OpenApiStruct> {
        if !self.openapi.contains_key(&id.module) {
            let parsed = parse_openapi_module(&self.sources.openapi_src, &id.module);
            self.openapi.insert(id.module.clone(), parsed);
        }
        self.openapi[&id.module].get(&normalize(&id.name))
    }

    fn special(id: &MessageId) -> Option<&'static str> {
        SPECIAL
            .iter()
            .find(|(m, n, _)| *m == id.module && *n == id.name)
            .map(|(_, _, t)| *t)
    }

    fn visit(&mut self, id: &MessageId) {
        if Self::special(id).is_some() || !self.seen.insert(id.clone()) {
            return;
        }
        let fields = self
            .messages(&id.module)
            .get(&id.name)
            .cloned()
            .unwrap_or_else(|| panic!("k8s-pb has no message {id:?}"));
        self.order.push(id.clone());
        for field in fields {
            if let PbType::Message(nested) = &field.ty {
                self.visit(nested);
            }
        }
    }

    fn json_key(&mut self, id: &MessageId, field: &PbField) -> String {
        if let Some((_, _, _, key)) = JSON_KEYS
            .iter()
            .find(|(m, n, f, _)| *m == id.module && *n == id.name && *f == field.rust)
        {
            return key.to_string();
        }
        let rust = normalize(&field.rust);
        // An embedded struct has no key of its own; its prost name names it in errors.
        let camel = lower_camel(&field.rust);
        let shape_key = (id.module.clone(), normalize(&id.name), camel.clone());
        if self.shapes.get(&shape_key).is_some_and(|s| s == "inline") {
            return camel;
        }
        match self.openapi_struct(id) {
            Some(s) => match s.keys.get(&rust) {
                Some(key) => key.clone(),
                None => {
                    let name = id.name.clone();
                    self.problems.push(format!(
                        "{}.{}: field {} has no JSON key in k8s-openapi {OPENAPI_VERSION}",
                        id.module, name, field.rust
                    ));
                    lower_camel(&field.rust)
                }
            },
            // No struct of its own (a list, or a struct k8s-openapi inlines into another, like
            // VolumeSource into Volume): the key the module's structs spell this field with.
            None => {
                let keys: BTreeSet<&String> = self.openapi[&id.module]
                    .values()
                    .filter_map(|s| s.keys.get(&rust))
                    .collect();
                match keys.len() {
                    0 => camel,
                    1 => keys.into_iter().next().unwrap().clone(),
                    _ => {
                        let problem = format!(
                            "{}.{}: field {} is spelled {keys:?} in k8s-openapi",
                            id.module, id.name, field.rust
                        );
                        self.problems.push(problem);
                        camel
                    }
                }
            }
        }
    }

    fn field_type(&self, field: &PbField) -> String {
        match &field.ty {
            PbType::Scalar(s) => match s.as_str() {
                "string" => "T::String",
                "bool" => "T::Bool",
                "int32" => "T::Int32",
                "int64" => "T::Int64",
                "double" => "T::Double",
                "bytes" => "T::Bytes",
                other => panic!("unexpected protobuf type {other}"),
            }
            .to_string(),
            PbType::Message(id) => match Self::special(id) {
                Some(t) if t.contains("{schema}") => t.replace(
                    "{schema}",
                    &static_name(&MessageId {
                        module: id.module.clone(),
                        name: "JsonSchemaProps".to_string(),
                    }),
                ),
                Some(t) => t.to_string(),
                None => format!("T::Message(&{})", static_name(id)),
            },
        }
    }

    fn emit(&mut self, id: &MessageId, out: &mut String) {
        let mut fields = self.pb[&id.module][&id.name].clone();
        fields.sort_by_key(|f| f.number);
        let go_name = self
            .openapi_struct(id)
            .map_or_else(|| id.name.clone(), |s| s.go_name.clone());
        writeln!(
            out,
            "pub(in crate::protobuf) static {}: Message = Message {{",
            static_name(id)
        )
        .unwrap();
        writeln!(out, "    name: {go_name:?},").unwrap();
        writeln!(out, "    fields: &[").unwrap();
        for field in &fields {
            let key = self.json_key(id, field);
            let ty = self.field_type(field);
            let shape_key = (id.module.clone(), normalize(&id.name), key.clone());
            let shape = self.shapes.get(&shape_key).cloned();
            if shape.is_some() {
                self.used_shapes.insert(shape_key);
            }
            let constructor = match (field.label, shape.as_deref(), &field.ty) {
                (PbLabel::Repeated, _, _) => {
                    format!("Field::repeated({}, {key:?}, {ty})", field.number)
                }
                (PbLabel::Map, _, _) => format!("Field::map({}, {key:?}, {ty})", field.number),
                (PbLabel::Singular, Some("inline"), PbType::Message(nested)) => format!(
                    "Field::inline({}, {key:?}, &{})",
                    field.number,
                    static_name(nested)
                ),
                (PbLabel::Singular, Some("pointer"), _) => {
                    format!("Field::optional({}, {key:?}, {ty})", field.number)
                }
                // Go `[]byte`: written only when non-nil.
                (PbLabel::Singular, None, PbType::Scalar(s)) if s == "bytes" => {
                    format!("Field::optional({}, {key:?}, {ty})", field.number)
                }
                (PbLabel::Singular, None, _) => {
                    format!("Field::value({}, {key:?}, {ty})", field.number)
                }
                (_, Some(other), _) => panic!("{id:?}.{key}: shape {other} does not fit"),
            };
            writeln!(out, "        {constructor},").unwrap();
        }
        writeln!(out, "    ],").unwrap();
        writeln!(out, "}};").unwrap();
        writeln!(out).unwrap();
    }
}

/// The generated file's text, formatted by rustfmt.
fn generate() -> String {
    let sources = locate_sources();
    let mut generator = Generator {
        sources,
        pb: BTreeMap::new(),
        openapi: BTreeMap::new(),
        shapes: go_shapes(),
        used_shapes: BTreeSet::new(),
        order: Vec::new(),
        seen: BTreeSet::new(),
        problems: Vec::new(),
    };
    for (module, name) in ROOTS {
        generator.visit(&MessageId {
            module: module.to_string(),
            name: name.to_string(),
        });
    }
    let mut ids = generator.order.clone();
    ids.sort();
    let mut out = String::from(
        "//! Protobuf message tables for every kind the server encodes, GENERATED by\n\
         //! `tests/protobuf_tables.rs` (`UPDATE_PROTOBUF_TABLES=1 cargo test -p kcp-apimachinery\n\
         //! --test protobuf_tables`) from kube-rs's k8s-pb (field numbers and types), k8s-openapi\n\
         //! (JSON keys, Go names) and `go_shapes.txt` (Go pointer, value and embedded fields). Do not\n\
         //! edit: change a source and generate again.\n\n\
         use crate::protobuf::schema::{Field, FieldType as T, Message};\n\n",
    );
    for id in &ids {
        generator.emit(id, &mut out);
    }
    let unused: Vec<_> = generator
        .shapes
        .keys()
        .filter(|k| !generator.used_shapes.contains(*k))
        .collect();
    for (module, message, field) in unused {
        generator.problems.push(format!(
            "go_shapes.txt: {module} {message} {field} names no field of a generated message"
        ));
    }
    assert!(
        generator.problems.is_empty(),
        "{}",
        generator.problems.join("\n")
    );
    rustfmt(&out)
}

fn rustfmt(code: &str) -> String {
    use std::io::Write as _;
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("rustfmt");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(code.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "rustfmt failed");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn generated_tables_are_current() {
    let generated = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protobuf/messages/generated.rs");
    if std::env::var_os("UPDATE_PROTOBUF_TABLES").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "src/protobuf/messages/generated.rs is stale: run \
         UPDATE_PROTOBUF_TABLES=1 cargo test -p kcp-apimachinery --test protobuf_tables"
    );
}
