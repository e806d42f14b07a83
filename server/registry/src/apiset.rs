//! An API set: the resource types one logical cluster serves.
//!
//! Every logical cluster serves the built-in types plus the types its CRDs define plus the types its
//! APIBindings bind. Discovery and OpenAPI documents are a function of that set alone, so sets are
//! immutable, fingerprinted by content (one fingerprint per source, CRDs and bindings, so each can
//! be replaced alone), and shared: all clusters with the same CRDs and bindings hold the same
//! `Arc<ApiSet>` and its documents are built once (lazily, on the first request that needs them).
//! That is what keeps an empty workspace, and a workspace bound to a shared export, at the cost of
//! one map entry.

use std::sync::{Arc, OnceLock};

use kcp_apimachinery::version_priority::discovery_order;
use kcp_openapi::{Definitions, OpenApiDocuments, ServedKind};

use super::ResourceType;

/// Where a cluster's types beyond the built-ins come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Its established CustomResourceDefinitions.
    Crds,
    /// Its bound APIBindings.
    Bindings,
}

/// The types of one source and the fingerprint of their content (0: none).
pub struct Layer {
    pub fingerprint: u64,
    pub types: Vec<Arc<ResourceType>>,
}

pub struct ApiSet {
    types: Vec<Arc<ResourceType>>,
    /// The fingerprints of the CRD and binding layers (0 for a layer without types).
    fingerprints: [u64; 2],
    /// Where the CRD layer starts and the binding layer starts in `types`.
    layer_starts: [usize; 2],
    openapi: OnceLock<OpenApiDocuments>,
}

impl ApiSet {
    /// A set without layers (the built-ins).
    pub fn new(types: Vec<Arc<ResourceType>>) -> ApiSet {
        let len = types.len();
        ApiSet {
            types,
            fingerprints: [0, 0],
            layer_starts: [len, len],
            openapi: OnceLock::new(),
        }
    }

    /// `base` plus the CRD layer plus the binding layer.
    pub fn layered(base: &[Arc<ResourceType>], crds: Layer, bindings: Layer) -> ApiSet {
        let mut types = base.to_vec();
        let crd_start = types.len();
        types.extend(crds.types);
        let binding_start = types.len();
        types.extend(bindings.types);
        ApiSet {
            types,
            fingerprints: [crds.fingerprint, bindings.fingerprint],
            layer_starts: [crd_start, binding_start],
            openapi: OnceLock::new(),
        }
    }

    fn index(source: Source) -> usize {
        match source {
            Source::Crds => 0,
            Source::Bindings => 1,
        }
    }

    /// The fingerprint of a source's layer (0: no types from it).
    pub fn fingerprint(&self, source: Source) -> u64 {
        self.fingerprints[Self::index(source)]
    }

    pub fn fingerprints(&self) -> [u64; 2] {
        self.fingerprints
    }

    /// The fingerprints of this set with one source's replaced.
    pub fn fingerprints_with(&self, source: Source, fingerprint: u64) -> [u64; 2] {
        let mut fingerprints = self.fingerprints;
        fingerprints[Self::index(source)] = fingerprint;
        fingerprints
    }

    /// The types of a source's layer.
    pub fn layer(&self, source: Source) -> Layer {
        let range = match source {
            Source::Crds => self.layer_starts[0]..self.layer_starts[1],
            Source::Bindings => self.layer_starts[1]..self.types.len(),
        };
        Layer {
            fingerprint: self.fingerprint(source),
            types: self.types[range].to_vec(),
        }
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
