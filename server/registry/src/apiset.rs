//! An API set: the resource types one logical cluster serves.
//!
//! Every logical cluster serves the built-in types plus the types its CRDs define. Discovery and
//! OpenAPI documents are a function of that set alone, so sets are immutable, fingerprinted by
//! content, and shared: all clusters with the same CRDs hold the same `Arc<ApiSet>` and its documents
//! are built once (lazily, on the first request that needs them). That is what keeps an empty
//! workspace at the cost of one map entry.

use std::sync::{Arc, OnceLock};

use kcp_apimachinery::version_priority::discovery_order;
use kcp_openapi::{Definitions, OpenApiDocuments, ServedKind};

use super::ResourceType;

pub struct ApiSet {
    types: Vec<Arc<ResourceType>>,
    /// Identifies the custom part of the set (0 for built-ins only).
    fingerprint: u64,
    openapi: OnceLock<OpenApiDocuments>,
}

impl ApiSet {
    pub fn new(types: Vec<Arc<ResourceType>>, fingerprint: u64) -> ApiSet {
        ApiSet {
            types,
            fingerprint,
            openapi: OnceLock::new(),
        }
    }

    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    pub fn types(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// Group versions in discovery order: the legacy core group first, then groups by name.
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut gvs: Vec<(String, String)> = Vec::new();
        for t in &self.types {
            let gv = (t.group.clone(), t.version.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
        // The core group first, then groups by name; a group's versions in Kubernetes' priority
        // order, so discovery prefers the version kube would (`v1alpha2` over `v1alpha1`).
        gvs.sort_by(|a, b| {
            (!a.0.is_empty(), &a.0)
                .cmp(&(!b.0.is_empty(), &b.0))
                .then_with(|| discovery_order(&a.1, &b.1))
        });
        gvs
    }

    /// The OpenAPI documents of this set, built on first use.
    pub fn openapi(&self) -> &OpenApiDocuments {
        self.openapi.get_or_init(|| {
            let (mut definitions, mut kinds) = kcp_openapi::builtin();
            add_custom_kinds(&self.types, &mut definitions, &mut kinds);
            OpenApiDocuments::new(&definitions, &kinds)
        })
    }
}

/// Publishes the schema of every custom type (built-in kinds are already in `builtin()`).
fn add_custom_kinds(
    types: &[Arc<ResourceType>],
    definitions: &mut Definitions,
    kinds: &mut Vec<ServedKind>,
) {
    for t in types {
        let Some(schema) = &t.schema else { continue };
        let definition =
            kcp_openapi::custom_resource_definition_name(&t.group, &t.version, &t.kind);
        definitions.insert(
            definition.clone(),
            kcp_openapi::custom_resource_schema(schema),
        );
        kinds.push(ServedKind {
            group: t.group.clone(),
            version: t.version.clone(),
            kind: t.kind.clone(),
            plural: t.plural.clone(),
            namespaced: t.namespaced,
            definition,
            strategic_merge_patch: t.strategic_merge_patch,
        });
    }
}
