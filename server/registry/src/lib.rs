//! The registry: every resource type the server serves, the generic REST store that reads and
//! writes their objects, and the logical-cluster types that address them.
//!
//! This is k8s.io/apiserver's `registry/generic` for kcp: a [`Strategy`] is everything that differs
//! between resource types (defaulting, validation, selectable fields, `kubectl get` columns,
//! subresources); the [`store::RestStore`] does what all types share (metadata rules, preconditions,
//! finalizers, `generateName`, namespaces) on top of [`storage`] (objects in the revisioned key-value
//! store, keyed by logical cluster). Reactions to writes are [`hooks`], as upstream's
//! `AfterCreate`/`AfterUpdate`/`AfterDelete`. No HTTP here: the API server turns requests into calls
//! on this crate, and the controllers call it like any client.

pub mod admission;
pub mod admission_policies;
mod admission_webhooks;
mod apis;
mod apiset;
mod certificates;
mod cluster;
mod configmaps;
pub mod crds;
pub mod custom;
mod events;
pub mod hooks;
mod leases;
pub mod namespaces;
mod object_meta;
mod podtemplates;
mod rbac;
pub mod resourcequotas;
pub mod reviews;
mod secrets;
mod serviceaccounts;
pub mod sparse;
pub mod storage;
pub mod store;
pub mod table;
mod tenancy;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kcp_apiextensions::StructuralSchema;
use kcp_apimachinery::validation::NameRule;
use kcp_apimachinery::{FieldError, meta};
use kcp_fieldmanager::TypeSchema;

use crate::sparse::remove_and_shrink;
use crate::storage::KeyLayout;
pub use cluster::{ClusterTarget, LogicalClusterName};

pub use apiset::{ApiSet, Layer, Source};
use serde_json::Value;

pub use table::Column;

/// How one resource type behaves beyond what all types share.
pub trait Strategy: Send + Sync {
    /// Which rule the object's name must satisfy.
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Subdomain
    }

    /// Defaults a new object (after metadata was filled in, before validation).
    fn prepare_for_create(&self, _object: &mut Value) {}

    /// Defaults an updated object and carries over what clients may not change through this endpoint.
    /// `subresource` names the endpoint (`status`, `finalize`, `scale`) when it is not the object
    /// itself; the handler already took everything but that part from `old`.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value, _subresource: Option<&str>) {}

    /// Whether an update through `subresource` (`status`, `finalize`) also writes the request's
    /// metadata (labels, annotations, finalizers, ...). Most status strategies of kube-apiserver
    /// reset metadata to the stored object's (`ResetObjectMetaForStatus`, custom resources); the
    /// Namespace status and finalize strategies only reset the other half of the object, so
    /// metadata changes sent to them are persisted.
    fn subresource_writes_metadata(&self, _subresource: &str) -> bool {
        false
    }

    /// Type-specific validation of an object about to be created.
    fn validate(&self, _object: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Type-specific validation of an update; defaults to validating the new object.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Whether field selectors may use a field beyond `metadata.name`/`metadata.namespace`.
    fn supports_field(&self, _field: &str) -> bool {
        false
    }

    /// The value of a selectable field (absent fields select as "").
    fn field_value(&self, _object: &Value, _field: &str) -> Option<String> {
        None
    }

    /// The `autoscaling/v1` Scale of an object, for types with a `scale` subresource.
    fn to_scale(&self, _object: &Value) -> Option<Value> {
        None
    }

    /// The object after a Scale was written to its `scale` subresource.
    fn apply_scale(
        &self,
        _object: &Value,
        _scale: &Value,
    ) -> Result<Value, kcp_apimachinery::ApiError> {
        Err(kcp_apimachinery::ApiError::bad_request(
            "this resource has no scale subresource",
        ))
    }

    /// Converts an object of this API version to the shape it is stored in (identity unless several
    /// APIs share one storage, like the two Event APIs).
    fn api_to_storage(&self, object: Value) -> Value {
        object
    }

    /// Converts a stored object to this API version.
    fn storage_to_api(&self, object: Value) -> Value {
        object
    }

    /// The columns of `kubectl get` (after the always-present name column).
    fn columns(&self) -> Vec<Column> {
        Vec::new()
    }

    /// Whether tables end with the standard age column (CRDs that define their own columns don't).
    fn age_column(&self) -> bool {
        true
    }

    /// The cells of [`columns`](Self::columns) for one object.
    fn cells(&self, _object: &Value) -> Vec<Value> {
        Vec::new()
    }

    /// For review types: the question they ask (they are only created, answered and not stored).
    fn review(&self) -> Option<reviews::Review> {
        None
    }
}

/// A served resource type.
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Subresources served besides the object itself (`status`, `finalize`).
    pub subresources: Vec<String>,
    /// The group whose storage holds the objects (differs from `group` only when APIs share storage).
    pub storage_group: String,
    /// Built-in or defined by a CRD, which decides where its objects are stored.
    pub layout: KeyLayout,
    /// The OpenAPI v3 schema of a custom type (`openAPIV3Schema`); built-ins publish theirs from
    /// k8s-openapi instead.
    pub schema: Option<Value>,
    /// Merge rules and field ownership for server-side apply and `managedFields`.
    pub field_schema: Arc<TypeSchema>,
    /// Whether PATCH accepts strategic merge patches: built-ins do, custom resources only when
    /// their schema says how to merge lists (`x-kubernetes-patch-*`), like the workload CRDs.
    pub strategic_merge_patch: bool,
    /// The structural schema objects are pruned by (unknown fields dropped, and reported under
    /// `fieldValidation`): the CRD's for custom types, k8s-openapi's for built-ins.
    pub structural: Option<Arc<StructuralSchema>>,
    pub strategy: Box<dyn Strategy>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether objects are served as stored: `storage_to_api` is the identity unless several APIs
    /// share one storage (the two Event APIs, whose storage group differs) or a CRD defines the type
    /// (its version's apiVersion and schema defaults are applied on read).
    pub fn served_as_stored(&self) -> bool {
        self.layout == KeyLayout::BuiltIn && self.storage_group == self.group
    }

    /// Every field a field selector may name for this type.
    pub fn supports_field(&self, field: &str) -> bool {
        field == "metadata.name"
            || (self.namespaced && field == "metadata.namespace")
            || self.strategy.supports_field(field)
    }

    /// The value of a selectable field of an object.
    pub fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        match field {
            "metadata.name" => meta::name(object).map(str::to_string),
            "metadata.namespace" => meta::namespace(object).map(str::to_string),
            _ => self.strategy.field_value(object, field),
        }
    }

    /// Removes the fields the type does not declare, `metadata`'s included (by `ObjectMeta`), and
    /// returns their paths, for `fieldValidation`. Types without a structural schema keep all.
    pub fn prune_unknown(&self, object: &mut Value) -> Vec<String> {
        let Some(schema) = &self.structural else {
            return Vec::new();
        };
        let mut unknown = object_meta::prune_metadata(object);
        unknown.extend(schema.prune(object));
        unknown
    }

    pub fn has_subresource(&self, subresource: &str) -> bool {
        self.subresources.iter().any(|s| s == subresource)
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.strategy.review().is_some() {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// The resource types of every logical cluster: built-ins shared by all, the built-ins plus the
/// root-only types (Shards) for `root`, plus per-cluster sets for clusters whose CRDs add types
/// (kept up to date by the CRD controller).
pub struct Registry {
    builtin: Arc<ApiSet>,
    root: Arc<ApiSet>,
    clusters: RwLock<HashMap<LogicalClusterName, Arc<ApiSet>>>,
}

impl Registry {
    /// A registry serving the built-in types everywhere.
    pub fn new() -> Registry {
        let mut types = vec![
            namespaces::resource(),
            configmaps::resource(),
            podtemplates::resource(),
            secrets::resource(),
            serviceaccounts::resource(),
            events::core_resource(),
            events::events_k8s_io_resource(),
            leases::resource(),
            crds::resource(),
            rbac::roles(),
            rbac::cluster_roles(),
            rbac::role_bindings(),
            rbac::cluster_role_bindings(),
            resourcequotas::resource(),
            certificates::resource(),
        ];
        types.extend(admission_webhooks::resources());
        types.extend(admission_policies::resources());
        types.extend(reviews::resources());
        attach_builtin_schemas(&mut types);
        let mut types: Vec<Arc<ResourceType>> = types.into_iter().map(Arc::new).collect();
        types.extend(tenancy::resource_types());
        types.extend(apis::resource_types());
        let mut root_types = types.clone();
        root_types.extend(tenancy::root_resource_types());
        Registry {
            builtin: Arc::new(ApiSet::new(types)),
            root: Arc::new(ApiSet::new(root_types)),
            clusters: RwLock::new(HashMap::new()),
        }
    }

    /// The types a cluster serves before its CRDs: the root-only types are added for `root`.
    fn base(&self, cluster: &LogicalClusterName) -> &Arc<ApiSet> {
        if *cluster == LogicalClusterName::root() {
            &self.root
        } else {
            &self.builtin
        }
    }

    /// A type served in `root` only (Shards), for the controllers that write it.
    pub fn root_type(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.root.lookup(group, version, plural).cloned()
    }

    /// The types served in every logical cluster.
    pub fn builtin(&self) -> &Arc<ApiSet> {
        &self.builtin
    }

    /// A built-in type (for controllers and bootstrap, which know what they need).
    pub fn builtin_type(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceType>> {
        self.builtin.lookup(group, version, plural).cloned()
    }

    /// The types a request target serves: the cluster's set, or the built-ins for the `*` wildcard.
    pub fn for_target(&self, target: &ClusterTarget) -> Arc<ApiSet> {
        match target {
            ClusterTarget::One(cluster) => self.for_cluster(cluster),
            ClusterTarget::Wildcard => self.builtin.clone(),
        }
    }

    pub fn for_cluster(&self, cluster: &LogicalClusterName) -> Arc<ApiSet> {
        let clusters = self
            .clusters
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        clusters
            .get(cluster)
            .cloned()
            .unwrap_or_else(|| self.base(cluster).clone())
    }

    /// Replaces the custom types of a cluster (types from its established CRDs). `fingerprint`
    /// identifies their content (0: none); `build` makes the types and is only called when no
    /// cluster serves that content yet, so clusters with the same CRDs share one set and its
    /// documents, and an unchanged cluster costs nothing.
    pub fn set_custom_types(
        &self,
        cluster: &LogicalClusterName,
        fingerprint: u64,
        build: impl FnOnce() -> Vec<Arc<ResourceType>>,
    ) {
        self.set_layer(cluster, Source::Crds, fingerprint, build);
    }

    /// Replaces the bound types of a cluster (types its APIBindings bind), as
    /// [`set_custom_types`](Self::set_custom_types) replaces its CRD types; the other layer stays.
    pub fn set_bound_types(
        &self,
        cluster: &LogicalClusterName,
        fingerprint: u64,
        build: impl FnOnce() -> Vec<Arc<ResourceType>>,
    ) {
        self.set_layer(cluster, Source::Bindings, fingerprint, build);
    }

    fn set_layer(
        &self,
        cluster: &LogicalClusterName,
        source: Source,
        fingerprint: u64,
        build: impl FnOnce() -> Vec<Arc<ResourceType>>,
    ) {
        let mut clusters = self
            .clusters
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = clusters
            .get(cluster)
            .cloned()
            .unwrap_or_else(|| self.base(cluster).clone());
        if current.fingerprint(source) == fingerprint {
            return;
        }
        let wanted = current.fingerprints_with(source, fingerprint);
        if wanted == [0, 0] {
            remove_and_shrink(&mut clusters, cluster);
            return;
        }
        // Sets are shared between clusters with the same layers and the same base (root has its own).
        let is_root = *cluster == LogicalClusterName::root();
        let shared = clusters
            .iter()
            .find(|(other, set)| {
                set.fingerprints() == wanted && (**other == LogicalClusterName::root()) == is_root
            })
            .map(|(_, set)| set.clone());
        let set = shared.unwrap_or_else(|| {
            let layer = Layer {
                fingerprint,
                types: build(),
            };
            let (crds, bindings) = match source {
                Source::Crds => (layer, current.layer(Source::Bindings)),
                Source::Bindings => (current.layer(Source::Crds), layer),
            };
            Arc::new(ApiSet::layered(self.base(cluster).types(), crds, bindings))
        });
        clusters.insert(cluster.clone(), set);
    }

    /// A bound type of some logical cluster stored under `identity`, for wildcard requests naming
    /// `<resource>:<identity>` (every cluster bound to one export serves the same type).
    pub fn bound_type(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        identity: &str,
    ) -> Option<Arc<ResourceType>> {
        let clusters = self
            .clusters
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        clusters.values().find_map(|set| {
            set.lookup(group, version, plural)
                .filter(|t| matches!(&t.layout, KeyLayout::Bound(id) if &**id == identity))
                .cloned()
        })
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

/// Gives each built-in type the structural schema of its k8s-openapi definition, so built-in objects
/// lose unknown fields like typed decoding in kube-apiserver drops them.
fn attach_builtin_schemas(types: &mut [ResourceType]) {
    let (definitions, kinds) = kcp_openapi::builtin();
    let resolve = |reference: &str| {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        definitions.get(name).cloned()
    };
    for t in types {
        let Some(kind) = kinds
            .iter()
            .find(|k| k.group == t.group && k.version == t.version && k.kind == t.kind)
        else {
            continue;
        };
        if let Some(definition) = definitions.get(&kind.definition) {
            let field_schema = TypeSchema::from_openapi(definition, resolve)
                .with_status_subresource(t.has_subresource("status"));
            t.field_schema = Arc::new(field_schema);
        }
        let mut schema = kcp_openapi::structural_schema(&definitions, &kind.definition);
        // As in a CRD, the root metadata is ObjectMeta, checked by the metadata rules, not the schema.
        schema["properties"]["metadata"] = serde_json::json!({"type": "object"});
        match StructuralSchema::new(&schema) {
            Ok(schema) => t.structural = Some(Arc::new(schema)),
            Err(errors) => {
                tracing::warn!(kind = %t.kind, ?errors, "built-in schema is not structural; not pruning")
            }
        }
    }
}

/// Builds a `ResourceType` with Kubernetes' naming conventions; the fields that vary are arguments.
pub(crate) fn resource(
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short_names: &[&str],
    strategy: Box<dyn Strategy>,
) -> ResourceType {
    ResourceType {
        group: group.to_string(),
        version: "v1".to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        namespaced,
        subresources: Vec::new(),
        storage_group: group.to_string(),
        layout: KeyLayout::BuiltIn,
        schema: None,
        structural: None,
        field_schema: Arc::new(TypeSchema::deduced()),
        strategic_merge_patch: true,
        strategy,
    }
}

/// Number of entries of a map field (`data` of ConfigMaps and Secrets), for table cells.
pub(crate) fn map_len(object: &Value, field: &str) -> usize {
    object
        .get(field)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_types_are_found_and_ordered() {
        let registry = Registry::new();
        let set = registry.builtin();
        assert!(set.lookup("", "v1", "configmaps").is_some());
        assert!(set.lookup("coordination.k8s.io", "v1", "leases").is_some());
        assert!(set.lookup("", "v1", "pods").is_none());
        let gvs = set.group_versions();
        assert_eq!(gvs[0], ("".to_string(), "v1".to_string()));
        assert!(gvs.contains(&("events.k8s.io".to_string(), "v1".to_string())));
    }

    #[test]
    fn clusters_with_the_same_custom_types_share_one_set() {
        let registry = Registry::new();
        let a = LogicalClusterName::parse("a").unwrap();
        let b = LogicalClusterName::parse("b").unwrap();
        let custom = || {
            vec![Arc::new(resource(
                "example.com",
                "Widget",
                "widgets",
                true,
                &[],
                Box::new(NoStrategy),
            ))]
        };
        registry.set_custom_types(&a, 7, custom);
        registry.set_custom_types(&b, 7, || unreachable!("the set of a is shared"));
        assert!(Arc::ptr_eq(
            &registry.for_cluster(&a),
            &registry.for_cluster(&b)
        ));
        assert!(
            registry
                .for_cluster(&a)
                .lookup("example.com", "v1", "widgets")
                .is_some()
        );
        assert!(
            registry
                .for_target(&ClusterTarget::Wildcard)
                .lookup("example.com", "v1", "widgets")
                .is_none()
        );
        registry.set_custom_types(&a, 0, Vec::new);
        assert!(Arc::ptr_eq(&registry.for_cluster(&a), registry.builtin()));
    }

    #[test]
    fn crd_and_bound_types_are_replaced_independently_and_shared() {
        let registry = Registry::new();
        let a = LogicalClusterName::parse("a").unwrap();
        let b = LogicalClusterName::parse("b").unwrap();
        let widget = |plural: &str| {
            Arc::new(resource(
                "example.com",
                "Widget",
                plural,
                true,
                &[],
                Box::new(NoStrategy),
            ))
        };
        let bound = || {
            let mut t = resource(
                "example.com",
                "Gadget",
                "gadgets",
                true,
                &[],
                Box::new(NoStrategy),
            );
            t.layout = KeyLayout::Bound("id".into());
            vec![Arc::new(t)]
        };
        registry.set_bound_types(&a, 9, bound);
        registry.set_bound_types(&b, 9, || unreachable!("the set of a is shared"));
        assert!(Arc::ptr_eq(
            &registry.for_cluster(&a),
            &registry.for_cluster(&b)
        ));
        registry.set_custom_types(&a, 7, || vec![widget("widgets")]);
        let set = registry.for_cluster(&a);
        assert!(set.lookup("example.com", "v1", "widgets").is_some());
        assert!(
            set.lookup("example.com", "v1", "gadgets").is_some(),
            "the bound layer stays"
        );
        assert!(
            registry
                .bound_type("example.com", "v1", "gadgets", "id")
                .is_some()
        );
        assert!(
            registry
                .bound_type("example.com", "v1", "gadgets", "other")
                .is_none()
        );
        registry.set_bound_types(&a, 0, Vec::new);
        let set = registry.for_cluster(&a);
        assert!(set.lookup("example.com", "v1", "gadgets").is_none());
        assert!(
            set.lookup("example.com", "v1", "widgets").is_some(),
            "the CRD layer stays"
        );
        registry.set_custom_types(&a, 0, Vec::new);
        assert!(Arc::ptr_eq(&registry.for_cluster(&a), registry.builtin()));
    }

    #[test]
    fn shards_are_served_in_root_only_with_or_without_crds() {
        let registry = Registry::new();
        let root = LogicalClusterName::root();
        let other = LogicalClusterName::parse("other").unwrap();
        let serves_shards = |cluster: &LogicalClusterName| {
            registry
                .for_cluster(cluster)
                .lookup("core.kcp.io", "v1alpha1", "shards")
                .is_some()
        };
        assert!(serves_shards(&root));
        assert!(!serves_shards(&other));
        let custom = || {
            vec![Arc::new(resource(
                "example.com",
                "Widget",
                "widgets",
                true,
                &[],
                Box::new(NoStrategy),
            ))]
        };
        registry.set_custom_types(&root, 7, custom);
        registry.set_custom_types(&other, 7, custom);
        assert!(serves_shards(&root));
        assert!(!serves_shards(&other));
        assert!(
            registry
                .root_type("core.kcp.io", "v1alpha1", "shards")
                .is_some()
        );
        assert!(
            registry
                .builtin_type("core.kcp.io", "v1alpha1", "shards")
                .is_none()
        );
    }

    struct NoStrategy;
    impl Strategy for NoStrategy {}

    #[test]
    fn field_support() {
        let registry = Registry::new();
        let secrets = registry.builtin_type("", "v1", "secrets").unwrap();
        assert!(secrets.supports_field("type"));
        assert!(secrets.supports_field("metadata.namespace"));
        assert!(!secrets.supports_field("data"));
        let namespaces = registry.builtin_type("", "v1", "namespaces").unwrap();
        assert!(!namespaces.supports_field("metadata.namespace"));
    }
}
