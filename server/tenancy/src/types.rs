//! WorkspaceTypes: references, resolution, extension, constraints and lifecycle hooks.
//!
//! A workspace's type decides its initializers and terminators, which types of workspaces it may
//! contain and be contained in, and the default type of its children. Types live in any logical
//! cluster and extend others (`spec.extend.with`), transitively: a type *is* every type it extends
//! (its "aliases") when constraints are checked, and inherits their initializers. These are the
//! rules of upstream's `workspacetypeexists` admission plugin and `LogicalClustersInitializers`;
//! the server supplies type objects from whatever cluster holds them through a lookup closure
//! taking a fully qualified reference.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use kcp_apimachinery::gofmt::quote;
use serde_json::{Map, Value, json};

use crate::logical_cluster::{CLUSTER_ANNOTATION, PATH_ANNOTATION};
use crate::paths::{Path, SEPARATOR};

/// Names no user-supplied WorkspaceType may have.
pub const RESERVED_NAMES: [&str; 2] = ["any", "system"];
/// The initializer added when any alias of a type has `spec.defaultAPIBindings`.
pub const API_BINDINGS_INITIALIZER: &str = "system:apibindings";
/// The name of the root workspace's type (`root:root`), which only `root` may define.
pub const ROOT_TYPE_NAME: &str = "root";

/// A reference to a WorkspaceType: `{name, path}` in JSON, `path:name` as a string. An empty path
/// means "look in the current workspace, then its ancestors, then root".
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeRef {
    pub path: String,
    pub name: String,
}

impl TypeRef {
    pub fn new(path: &str, name: &str) -> TypeRef {
        TypeRef {
            path: path.to_string(),
            name: name.to_string(),
        }
    }

    /// Reads `{name, path}`; `None` without a non-empty name.
    pub fn from_json(value: &Value) -> Option<TypeRef> {
        let name = value.get("name").and_then(Value::as_str)?;
        if name.is_empty() {
            return None;
        }
        let path = value
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some(TypeRef::new(path, name))
    }

    /// Splits `path:name` at the last colon (`root:org:custom` is `custom` in `root:org`).
    pub fn parse(canonical: &str) -> TypeRef {
        match canonical.rsplit_once(SEPARATOR) {
            Some((path, name)) => TypeRef::new(path, name),
            None => TypeRef::new("", canonical),
        }
    }

    /// `{name, path}`, without `path` when it is empty.
    pub fn to_json(&self) -> Value {
        let mut reference = Map::new();
        reference.insert("name".into(), json!(self.name));
        if !self.path.is_empty() {
            reference.insert("path".into(), json!(self.path));
        }
        Value::Object(reference)
    }
}

impl fmt::Display for TypeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}{SEPARATOR}{}", self.path, self.name)
        }
    }
}

/// Why a type cannot be used. Admission answers every one with 403 Forbidden and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    #[error("workspace type {} cannot be resolved", quote(.0))]
    NotFound(String),
    #[error("unable to find inherited workspace type {0}")]
    InheritedNotFound(String),
    #[error("circular dependency detected in workspace type {type_name}: {chain}")]
    Cycle { type_name: String, chain: String },
    /// Every violated parent/child constraint, rendered as Go's error aggregate.
    #[error("{}", aggregate(.0))]
    NotAllowed(Vec<String>),
    #[error("root workspace type can only be created in root cluster")]
    RootOutsideRoot,
    #[error("{0}.path must be set")]
    PathRequired(String),
    #[error("workspace type name {} is reserved", quote(.0))]
    ReservedName(String),
}

/// Go's `utilerrors.NewAggregate(...).Error()`: one message alone, several as `[a, b]`.
fn aggregate(messages: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for message in messages {
        if !distinct.contains(&message.as_str()) {
            distinct.push(message);
        }
    }
    match distinct.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Which types a constraint admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeSelector {
    /// No constraint (field absent, or `types` empty).
    Any,
    /// `none: true`: no type at all.
    None,
    /// Any type whose aliases include one of these.
    Types(Vec<TypeRef>),
}

impl TypeSelector {
    fn from_json(value: Option<&Value>) -> TypeSelector {
        let Some(selector) = value.filter(|v| v.is_object()) else {
            return TypeSelector::Any;
        };
        if selector.get("none").and_then(Value::as_bool) == Some(true) {
            return TypeSelector::None;
        }
        let types: Vec<TypeRef> = selector
            .get("types")
            .and_then(Value::as_array)
            .map(|types| types.iter().filter_map(TypeRef::from_json).collect())
            .unwrap_or_default();
        if types.is_empty() {
            TypeSelector::Any
        } else {
            TypeSelector::Types(types)
        }
    }
}

/// A WorkspaceType object with the reference it is known by: its canonical path (`kcp.io/path`,
/// else the path it was looked up at) and name, and the logical cluster holding it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedType {
    pub reference: TypeRef,
    pub cluster: String,
    pub object: Value,
}

impl ResolvedType {
    /// Wraps `object`, found by looking up `at`.
    pub fn new(object: Value, at: &TypeRef) -> ResolvedType {
        let annotation = |key: &str| {
            object
                .pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))
                .and_then(Value::as_str)
                .filter(|value| !value.is_empty())
                .map(str::to_string)
        };
        let path = annotation(PATH_ANNOTATION).unwrap_or_else(|| at.path.clone());
        let cluster = annotation(CLUSTER_ANNOTATION).unwrap_or_else(|| path.clone());
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&at.name)
            .to_string();
        ResolvedType {
            reference: TypeRef { path, name },
            cluster,
            object,
        }
    }

    fn spec(&self, field: &str) -> Option<&Value> {
        self.object.get("spec").and_then(|spec| spec.get(field))
    }

    fn flag(&self, field: &str) -> bool {
        self.spec(field).and_then(Value::as_bool) == Some(true)
    }

    pub fn initializer(&self) -> bool {
        self.flag("initializer")
    }

    pub fn terminator(&self) -> bool {
        self.flag("terminator")
    }

    /// The initializer or terminator name of this type, `<logical cluster>:<name>`
    /// (upstream's `InitializerForType`, which uses the type's logical cluster name).
    pub fn lifecycle_name(&self) -> String {
        format!("{}{SEPARATOR}{}", self.cluster, self.reference.name)
    }

    /// `spec.extend.with`.
    pub fn extends(&self) -> Vec<TypeRef> {
        self.spec("extend")
            .and_then(|extend| extend.get("with"))
            .and_then(Value::as_array)
            .map(|with| with.iter().filter_map(TypeRef::from_json).collect())
            .unwrap_or_default()
    }

    /// `spec.defaultChildWorkspaceType` (never inherited through `extend`).
    pub fn default_child(&self) -> Option<TypeRef> {
        self.spec("defaultChildWorkspaceType")
            .and_then(TypeRef::from_json)
    }

    pub fn allowed_children(&self) -> TypeSelector {
        TypeSelector::from_json(self.spec("limitAllowedChildren"))
    }

    pub fn allowed_parents(&self) -> TypeSelector {
        TypeSelector::from_json(self.spec("limitAllowedParents"))
    }

    pub fn has_default_api_bindings(&self) -> bool {
        !self.default_api_bindings().is_empty()
    }

    /// `spec.defaultAPIBindings`, each export's path defaulted to this type's own workspace.
    pub fn default_api_bindings(&self) -> Vec<DefaultApiBinding> {
        self.spec("defaultAPIBindings")
            .and_then(Value::as_array)
            .map(|bindings| {
                bindings
                    .iter()
                    .filter_map(|binding| {
                        let export = binding.get("export")?.as_str()?;
                        let path = binding
                            .get("path")
                            .and_then(Value::as_str)
                            .filter(|path| !path.is_empty())
                            .unwrap_or(&self.reference.path);
                        Some(DefaultApiBinding {
                            path: path.to_string(),
                            export: export.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `spec.additionalWorkspaceLabels`.
    pub fn additional_workspace_labels(&self) -> BTreeMap<String, String> {
        self.spec("additionalWorkspaceLabels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Finds the type `reference` names, seen from the workspace at `from`: a reference with a path
/// is looked up there; one without is looked up in `from`, then each ancestor, then `root`.
pub fn resolve_reference(
    from: &Path,
    reference: &TypeRef,
    lookup: &impl Fn(&TypeRef) -> Option<Value>,
) -> Result<ResolvedType, TypeError> {
    if !reference.path.is_empty() {
        return lookup(reference)
            .map(|object| ResolvedType::new(object, reference))
            .ok_or_else(|| TypeError::NotFound(reference.to_string()));
    }
    let mut current = from.clone();
    loop {
        let at = TypeRef::new(current.as_str(), &reference.name);
        if let Some(object) = lookup(&at) {
            return Ok(ResolvedType::new(object, &at));
        }
        current = match current.parent() {
            Some(parent) => parent,
            None if !current.is_root() => Path::root(),
            None => return Err(TypeError::NotFound(reference.to_string())),
        };
    }
}

/// Every type `resolved` is: the types it extends, transitively (depth first, each once), then
/// itself. A type that extends itself through any chain is a cycle.
pub fn resolve_aliases(
    resolved: &ResolvedType,
    lookup: &impl Fn(&TypeRef) -> Option<Value>,
) -> Result<Vec<ResolvedType>, TypeError> {
    let mut aliases = Vec::new();
    let mut seen = HashSet::new();
    let mut chain = Vec::new();
    collect_extended(resolved, lookup, &mut seen, &mut chain, &mut aliases)?;
    aliases.push(resolved.clone());
    Ok(aliases)
}

fn collect_extended(
    resolved: &ResolvedType,
    lookup: &impl Fn(&TypeRef) -> Option<Value>,
    seen: &mut HashSet<String>,
    chain: &mut Vec<String>,
    aliases: &mut Vec<ResolvedType>,
) -> Result<(), TypeError> {
    let qualified = resolved.reference.to_string();
    seen.insert(qualified.clone());
    chain.push(qualified);
    for base_ref in resolved.extends() {
        let base = Path::parse(&resolved.reference.path)
            .ok()
            .and_then(|from| resolve_reference(&from, &base_ref, lookup).ok())
            .ok_or_else(|| TypeError::InheritedNotFound(base_ref.name.clone()))?;
        let base_qualified = base.reference.to_string();
        if let Some(start) = chain.iter().position(|t| *t == base_qualified) {
            return Err(TypeError::Cycle {
                type_name: base_qualified,
                chain: chain[start..].join(" -> "),
            });
        }
        if seen.contains(&base_qualified) {
            continue;
        }
        aliases.push(base.clone());
        collect_extended(&base, lookup, seen, chain, aliases)?;
    }
    chain.pop();
    Ok(())
}

/// The initializers of a logical cluster of a type with these aliases: each alias with
/// `initializer: true`, then `system:apibindings` if any alias has default API bindings.
pub fn initializers(aliases: &[ResolvedType]) -> Vec<String> {
    let mut initializers: Vec<String> = aliases
        .iter()
        .filter(|alias| alias.initializer())
        .map(ResolvedType::lifecycle_name)
        .collect();
    if aliases.iter().any(ResolvedType::has_default_api_bindings) {
        initializers.push(API_BINDINGS_INITIALIZER.to_string());
    }
    initializers
}

/// One APIExport a type binds in every workspace of it (`spec.defaultAPIBindings[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DefaultApiBinding {
    /// The export's workspace path (the type's own when the entry has none).
    pub path: String,
    pub export: String,
}

/// The exports a logical cluster of a type with these aliases binds while it initializes: the
/// union over every alias (upstream's transitive set), each once, in alias order.
pub fn default_api_bindings(aliases: &[ResolvedType]) -> Vec<DefaultApiBinding> {
    let mut seen = HashSet::new();
    aliases
        .iter()
        .flat_map(ResolvedType::default_api_bindings)
        .filter(|binding| seen.insert(binding.clone()))
        .collect()
}

/// The terminators of a logical cluster of a type with these aliases.
pub fn terminators(aliases: &[ResolvedType]) -> Vec<String> {
    aliases
        .iter()
        .filter(|alias| alias.terminator())
        .map(ResolvedType::lifecycle_name)
        .collect()
}

/// Whether any alias is one of `allowed`.
fn implements_any(aliases: &[ResolvedType], allowed: &[TypeRef]) -> bool {
    aliases
        .iter()
        .any(|alias| allowed.contains(&alias.reference))
}

/// Go's `%v` of a sorted string set: `[a b]`.
fn sorted_set(items: impl IntoIterator<Item = String>) -> String {
    let set: BTreeSet<String> = items.into_iter().collect();
    format!("[{}]", set.into_iter().collect::<Vec<_>>().join(" "))
}

/// Which side of the parent/child relation a constraint is checked on.
#[derive(Clone, Copy)]
enum Relation {
    Parent,
    Child,
}

/// Checks the constraints `constrained` (one side's aliases) put on `other` (the other side's
/// aliases); `constrained_type`/`other_type` are the `path:name` the messages name.
fn check_limits(
    relation: Relation,
    constrained: &[ResolvedType],
    other: &[ResolvedType],
    constrained_type: &str,
    other_type: &str,
) -> Vec<String> {
    let word = match relation {
        Relation::Parent => "parent",
        Relation::Child => "child",
    };
    let mut errors = Vec::new();
    for alias in constrained {
        let selector = match relation {
            Relation::Parent => alias.allowed_parents(),
            Relation::Child => alias.allowed_children(),
        };
        match selector {
            TypeSelector::Any => {}
            TypeSelector::None => {
                errors.push(format!(
                    "workspace type {constrained_type} cannot have any {word}"
                ));
            }
            TypeSelector::Types(allowed) if !implements_any(other, &allowed) => {
                let qualified = alias.reference.to_string();
                let extending = if qualified != constrained_type {
                    format!(" extends {qualified}, which")
                } else {
                    String::new()
                };
                errors.push(format!(
                    "workspace type {constrained_type}{extending} only allows {} {word} workspaces, but {word} type {other_type} only implements {}",
                    sorted_set(allowed.iter().map(ToString::to_string)),
                    sorted_set(other.iter().map(|a| a.reference.to_string())),
                ));
            }
            TypeSelector::Types(_) => {}
        }
    }
    errors
}

/// Checks that the parent's type admits the child's type as a child (`limitAllowedChildren` of
/// every parent alias) and the child's type admits the parent's (`limitAllowedParents` of every
/// child alias). `parent_type` and `child_type` are the `path:name` strings of the two types.
pub fn check_parent_and_child(
    parent_aliases: &[ResolvedType],
    child_aliases: &[ResolvedType],
    parent_type: &str,
    child_type: &str,
) -> Result<(), TypeError> {
    let parents = check_limits(
        Relation::Parent,
        child_aliases,
        parent_aliases,
        child_type,
        parent_type,
    );
    if !parents.is_empty() {
        return Err(TypeError::NotAllowed(parents));
    }
    let children = check_limits(
        Relation::Child,
        parent_aliases,
        child_aliases,
        parent_type,
        child_type,
    );
    if !children.is_empty() {
        return Err(TypeError::NotAllowed(children));
    }
    Ok(())
}

/// Admission of a WorkspaceType created or updated in `cluster` (upstream's
/// `tenancy.kcp.io/WorkspaceType` plugin, plus the reserved names its CRD schema forbids).
pub fn validate_workspace_type(object: &Value, cluster: &str) -> Result<(), TypeError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if RESERVED_NAMES.contains(&name) {
        return Err(TypeError::ReservedName(name.to_string()));
    }
    if name == ROOT_TYPE_NAME && cluster != crate::paths::ROOT {
        return Err(TypeError::RootOutsideRoot);
    }
    let spec = object.get("spec");
    let missing_path = |reference: &Value| {
        reference
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
    };
    if spec
        .and_then(|spec| spec.get("defaultChildWorkspaceType"))
        .filter(|reference| reference.is_object())
        .is_some_and(missing_path)
    {
        return Err(TypeError::PathRequired(
            ".spec.defaultChildWorkspaceType".into(),
        ));
    }
    for field in ["limitAllowedChildren", "limitAllowedParents"] {
        let types = spec
            .and_then(|spec| spec.get(field))
            .and_then(|selector| selector.get("types"))
            .and_then(Value::as_array);
        for (i, reference) in types.into_iter().flatten().enumerate() {
            if missing_path(reference) {
                return Err(TypeError::PathRequired(format!(".spec.{field}.types[{i}]")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn wst(path: &str, name: &str, spec: Value) -> (TypeRef, Value) {
        (
            TypeRef::new(path, name),
            json!({
                "apiVersion": "tenancy.kcp.io/v1alpha1",
                "kind": "WorkspaceType",
                "metadata": {"name": name, "annotations": {"kcp.io/path": path, "kcp.io/cluster": if path == "root" { "root".to_string() } else { format!("c-{}", path.replace(':', "-")) }}},
                "spec": spec,
            }),
        )
    }

    fn store(types: Vec<(TypeRef, Value)>) -> impl Fn(&TypeRef) -> Option<Value> {
        let map: HashMap<TypeRef, Value> = types.into_iter().collect();
        move |reference: &TypeRef| map.get(reference).cloned()
    }

    fn root_types() -> Vec<(TypeRef, Value)> {
        vec![
            wst(
                "root",
                "universal",
                json!({"initializer": true, "defaultAPIBindings": [{"path": "root", "export": "tenancy.kcp.io"}]}),
            ),
            wst(
                "root",
                "root",
                json!({"extend": {"with": [{"name": "universal", "path": "root"}]}, "limitAllowedParents": {"none": true}, "defaultChildWorkspaceType": {"name": "organization", "path": "root"}}),
            ),
            wst(
                "root",
                "organization",
                json!({"extend": {"with": [{"name": "universal", "path": "root"}]}, "limitAllowedChildren": {"types": [{"name": "universal", "path": "root"}]}, "limitAllowedParents": {"types": [{"name": "root", "path": "root"}]}}),
            ),
            wst(
                "root",
                "team",
                json!({"extend": {"with": [{"name": "universal", "path": "root"}]}, "limitAllowedParents": {"types": [{"name": "organization", "path": "root"}, {"name": "team", "path": "root"}]}}),
            ),
        ]
    }

    fn resolve(lookup: &impl Fn(&TypeRef) -> Option<Value>, canonical: &str) -> Vec<ResolvedType> {
        let resolved =
            resolve_reference(&Path::root(), &TypeRef::parse(canonical), lookup).unwrap();
        resolve_aliases(&resolved, lookup).unwrap()
    }

    #[test]
    fn references_render_and_parse() {
        let reference = TypeRef::parse("root:org:custom");
        assert_eq!(reference, TypeRef::new("root:org", "custom"));
        assert_eq!(reference.to_string(), "root:org:custom");
        assert_eq!(TypeRef::parse("universal").to_string(), "universal");
        assert_eq!(
            reference.to_json(),
            json!({"name": "custom", "path": "root:org"})
        );
        assert_eq!(TypeRef::new("", "x").to_json(), json!({"name": "x"}));
        assert_eq!(
            TypeRef::from_json(&json!({"name": "x"})),
            Some(TypeRef::new("", "x"))
        );
        assert_eq!(TypeRef::from_json(&json!({"name": ""})), None);
    }

    #[test]
    fn relative_references_walk_up_to_root() {
        let mut types = root_types();
        types.push(wst("root:org", "custom", json!({})));
        let lookup = store(types);
        let from = Path::parse("root:org:team").unwrap();
        let custom = resolve_reference(&from, &TypeRef::new("", "custom"), &lookup).unwrap();
        assert_eq!(custom.reference, TypeRef::new("root:org", "custom"));
        assert_eq!(custom.cluster, "c-root-org");
        let universal = resolve_reference(
            &Path::parse("abc123").unwrap(),
            &TypeRef::new("", "universal"),
            &lookup,
        )
        .unwrap();
        assert_eq!(universal.reference.to_string(), "root:universal");
        assert_eq!(
            resolve_reference(&from, &TypeRef::new("", "missing"), &lookup)
                .unwrap_err()
                .to_string(),
            r#"workspace type "missing" cannot be resolved"#
        );
        assert_eq!(
            resolve_reference(&from, &TypeRef::new("root:x", "custom"), &lookup).unwrap_err(),
            TypeError::NotFound("root:x:custom".into())
        );
    }

    #[test]
    fn aliases_are_transitive_and_end_with_the_type() {
        let mut types = root_types();
        types.push(wst("root", "a", json!({"extend": {"with": [{"name": "b", "path": "root"}, {"name": "team", "path": "root"}]}})));
        types.push(wst(
            "root",
            "b",
            json!({"extend": {"with": [{"name": "universal"}]}}),
        ));
        let lookup = store(types);
        let names: Vec<String> = resolve(&lookup, "root:a")
            .iter()
            .map(|a| a.reference.to_string())
            .collect();
        assert_eq!(names, ["root:b", "root:universal", "root:team", "root:a"]);
    }

    #[test]
    fn cycles_are_named() {
        let lookup = store(vec![
            wst(
                "root",
                "a",
                json!({"extend": {"with": [{"name": "b", "path": "root"}]}}),
            ),
            wst(
                "root",
                "b",
                json!({"extend": {"with": [{"name": "c", "path": "root"}]}}),
            ),
            wst(
                "root",
                "c",
                json!({"extend": {"with": [{"name": "b", "path": "root"}]}}),
            ),
        ]);
        let a = resolve_reference(&Path::root(), &TypeRef::new("root", "a"), &lookup).unwrap();
        assert_eq!(
            resolve_aliases(&a, &lookup).unwrap_err().to_string(),
            "circular dependency detected in workspace type root:b: root:b -> root:c"
        );
    }

    #[test]
    fn missing_extended_types_are_errors() {
        let lookup = store(vec![wst(
            "root",
            "a",
            json!({"extend": {"with": [{"name": "gone", "path": "root"}]}}),
        )]);
        let a = resolve_reference(&Path::root(), &TypeRef::new("root", "a"), &lookup).unwrap();
        assert_eq!(
            resolve_aliases(&a, &lookup).unwrap_err().to_string(),
            "unable to find inherited workspace type gone"
        );
    }

    #[test]
    fn initializers_and_terminators_come_from_aliases() {
        let mut types = root_types();
        types.push(wst("root:org", "custom", json!({"initializer": true, "terminator": true, "extend": {"with": [{"name": "universal", "path": "root"}]}})));
        let lookup = store(types);
        let aliases = resolve(&lookup, "root:org:custom");
        assert_eq!(
            initializers(&aliases),
            ["root:universal", "c-root-org:custom", "system:apibindings"]
        );
        assert_eq!(terminators(&aliases), ["c-root-org:custom"]);
        let plain = store(vec![wst("root", "plain", json!({}))]);
        assert!(initializers(&resolve(&plain, "root:plain")).is_empty());
    }

    #[test]
    fn default_api_bindings_are_the_union_of_the_aliases_with_paths_defaulted() {
        let mut types = root_types();
        types.push(wst(
            "root:org",
            "custom",
            json!({
                "extend": {"with": [{"name": "universal", "path": "root"}]},
                "defaultAPIBindings": [
                    {"export": "widgets"},
                    {"path": "root:provider", "export": "gadgets"},
                    {"path": "root", "export": "tenancy.kcp.io"},
                ],
            }),
        ));
        let lookup = store(types);
        let bindings = default_api_bindings(&resolve(&lookup, "root:org:custom"));
        let pairs: Vec<(&str, &str)> = bindings
            .iter()
            .map(|b| (b.path.as_str(), b.export.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("root", "tenancy.kcp.io"),
                ("root:org", "widgets"),
                ("root:provider", "gadgets"),
            ]
        );
        let plain = store(vec![wst("root", "plain", json!({}))]);
        assert!(default_api_bindings(&resolve(&plain, "root:plain")).is_empty());
    }

    #[test]
    fn parents_and_children_are_checked_through_aliases() {
        let lookup = store(root_types());
        let root = resolve(&lookup, "root:root");
        let org = resolve(&lookup, "root:organization");
        let team = resolve(&lookup, "root:team");
        let universal = resolve(&lookup, "root:universal");
        assert_eq!(
            check_parent_and_child(&root, &org, "root:root", "root:organization"),
            Ok(())
        );
        // team extends universal, so it is a universal child for organization's limit
        assert_eq!(
            check_parent_and_child(&org, &team, "root:organization", "root:team"),
            Ok(())
        );
        let plain = store(vec![wst("root", "plain", json!({}))]);
        let plain = resolve(&plain, "root:plain");
        assert_eq!(
            check_parent_and_child(&org, &plain, "root:organization", "root:plain")
                .unwrap_err()
                .to_string(),
            "workspace type root:organization only allows [root:universal] child workspaces, but child type root:plain only implements [root:plain]"
        );
        assert_eq!(
            check_parent_and_child(&org, &universal, "root:organization", "root:universal"),
            Ok(())
        );
        assert_eq!(
            check_parent_and_child(&root, &team, "root:root", "root:team")
                .unwrap_err()
                .to_string(),
            "workspace type root:team only allows [root:organization root:team] parent workspaces, but parent type root:root only implements [root:root root:universal]"
        );
        assert_eq!(
            check_parent_and_child(&org, &root, "root:organization", "root:root")
                .unwrap_err()
                .to_string(),
            "workspace type root:root cannot have any parent"
        );
    }

    #[test]
    fn inherited_constraints_say_which_type_imposes_them() {
        let mut types = root_types();
        types.push(wst(
            "root",
            "sub",
            json!({"extend": {"with": [{"name": "organization", "path": "root"}]}}),
        ));
        let lookup = store(types);
        let sub = resolve(&lookup, "root:sub");
        let team = resolve(&lookup, "root:team");
        assert_eq!(
            check_parent_and_child(&team, &sub, "root:team", "root:sub")
                .unwrap_err()
                .to_string(),
            "workspace type root:sub extends root:organization, which only allows [root:root] parent workspaces, but parent type root:team only implements [root:team root:universal]"
        );
    }

    #[test]
    fn several_violations_aggregate() {
        assert_eq!(
            TypeError::NotAllowed(vec!["a".into(), "b".into(), "a".into()]).to_string(),
            "[a, b]"
        );
    }

    #[test]
    fn workspace_type_admission() {
        let (_, ok) = wst(
            "root",
            "custom",
            json!({"defaultChildWorkspaceType": {"name": "universal", "path": "root"}}),
        );
        assert_eq!(validate_workspace_type(&ok, "abc"), Ok(()));
        let (_, root) = wst("root", "root", json!({}));
        assert_eq!(validate_workspace_type(&root, "root"), Ok(()));
        assert_eq!(
            validate_workspace_type(&root, "abc")
                .unwrap_err()
                .to_string(),
            "root workspace type can only be created in root cluster"
        );
        let (_, any) = wst("root", "any", json!({}));
        assert_eq!(
            validate_workspace_type(&any, "root"),
            Err(TypeError::ReservedName("any".into()))
        );
        let (_, relative) = wst(
            "root",
            "x",
            json!({"defaultChildWorkspaceType": {"name": "universal"}}),
        );
        assert_eq!(
            validate_workspace_type(&relative, "root")
                .unwrap_err()
                .to_string(),
            ".spec.defaultChildWorkspaceType.path must be set"
        );
        let (_, parents) = wst(
            "root",
            "x",
            json!({"limitAllowedParents": {"types": [{"name": "a", "path": "root"}, {"name": "b"}]}}),
        );
        assert_eq!(
            validate_workspace_type(&parents, "root")
                .unwrap_err()
                .to_string(),
            ".spec.limitAllowedParents.types[1].path must be set"
        );
    }

    #[test]
    fn spec_accessors() {
        let (at, object) = wst(
            "root:org",
            "custom",
            json!({"additionalWorkspaceLabels": {"team": "a"}, "limitAllowedChildren": {"types": []}}),
        );
        let resolved = ResolvedType::new(object, &at);
        assert_eq!(
            resolved
                .additional_workspace_labels()
                .get("team")
                .map(String::as_str),
            Some("a")
        );
        assert_eq!(resolved.allowed_children(), TypeSelector::Any);
        assert_eq!(resolved.allowed_parents(), TypeSelector::Any);
        assert_eq!(resolved.default_child(), None);
        assert_eq!(resolved.lifecycle_name(), "c-root-org:custom");
        let bare = ResolvedType::new(
            json!({"metadata": {"name": "t"}}),
            &TypeRef::new("root:x", "t"),
        );
        assert_eq!(bare.reference.to_string(), "root:x:t");
        assert_eq!(bare.lifecycle_name(), "root:x:t");
    }
}
