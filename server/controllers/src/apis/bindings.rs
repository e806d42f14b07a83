//! The APIBinding controller (upstream's `pkg/reconciler/apis/apibinding` and
//! `apibindingdeletion`): serves in each consumer's logical cluster what its bindings bind.
//!
//! One storage watch covers the bindings of every logical cluster, and three more the exports,
//! schemas and APIConversions, so a provider's change (a new schema version in `spec.resources`,
//! an export appearing after its binding, a changed conversion) reaches every binding that reads
//! it. A pass takes a whole consumer cluster:
//! its bindings are decided one after another (kcp-apis' rules, oldest holder first, so the first
//! binding of a group and resource keeps it and a later one reports `NamingConflicts`), the bound
//! types of all of them are published in the registry (shared with every cluster bound to the same
//! schemas), and only then are the statuses written, so a client that sees `Bound` can create
//! objects at once. A binding being deleted is unpublished first, then its objects in that cluster
//! are deleted, then its finalizer goes. A binding stored before bindings carried their export's
//! label (`internal.apis.kcp.io/export`) gets it from the first pass after a start.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select_all;
use kcp_apimachinery::{ApiError, meta, time};
use kcp_apis::admission;
use kcp_apis::binding::{self, BoundResource, ExportReference, Holder, Inputs, Outcome};
use kcp_apis::schema;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::RestStore;
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::bound_types::{BoundTypes, lock, policy_of, recorded_export_cluster};
use super::{cluster_of, local_or_copy, stored_type};
use crate::TenancyIndex;
use crate::cleanup;
use crate::runner::{self, Controller, Pass, Queue};
use crate::tenancy_index::CopiedKind;

/// How long a binding whose export's workspace does not resolve waits before it looks again.
const UNRESOLVED_RETRY: Duration = Duration::from_secs(5);

/// Runs until `shutdown`.
pub async fn run(store: RestStore, tenancy: Arc<TenancyIndex>, shutdown: CancellationToken) {
    let types = match Types::of(&store) {
        Ok(types) => types,
        Err(error) => {
            tracing::error!(%error, "the APIBinding controller cannot start");
            return;
        }
    };
    let bound = match BoundTypes::new(&store, tenancy.clone()) {
        Ok(bound) => bound,
        Err(error) => {
            tracing::error!(%error, "the APIBinding controller cannot start");
            return;
        }
    };
    let controller = Bindings {
        store,
        tenancy,
        types,
        bound,
        sources: Mutex::new(HashMap::new()),
    };
    runner::run(controller, shutdown).await;
}

struct Types {
    bindings: Arc<ResourceType>,
    exports: Arc<ResourceType>,
    schemas: Arc<ResourceType>,
    conversions: Arc<ResourceType>,
    crds: Arc<ResourceType>,
}

impl Types {
    fn of(store: &RestStore) -> Result<Types, ApiError> {
        Ok(Types {
            bindings: stored_type(store, kcp_apis::API_BINDINGS)?,
            exports: stored_type(store, kcp_apis::API_EXPORTS)?,
            schemas: stored_type(store, kcp_apis::API_RESOURCE_SCHEMAS)?,
            conversions: stored_type(store, kcp_apis::API_CONVERSIONS)?,
            crds: store
                .registry()
                .builtin_type("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                .ok_or_else(|| {
                    ApiError::internal_error("customresourcedefinitions are not registered")
                })?,
        })
    }
}

struct Bindings {
    store: RestStore,
    tenancy: Arc<TenancyIndex>,
    types: Types,
    bound: BoundTypes,
    /// Consumer cluster -> the clusters its bindings' exports live in (whose changes requeue it).
    /// A sorted list, as most consumers read one source (a tree would allocate a whole node).
    sources: Mutex<HashMap<LogicalClusterName, Box<[LogicalClusterName]>>>,
}

/// What a pass decided for one binding.
struct Decided {
    name: String,
    outcome: Outcome,
}

impl Controller for Bindings {
    type Key = LogicalClusterName;
    const NAME: &'static str = "apibindings";
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    async fn follow(&self, queue: &Queue<LogicalClusterName>) -> Result<(), ApiError> {
        let prefix = |rt: &ResourceType| self.store.keys(rt).all_clusters().to_string();
        let bindings_prefix = prefix(&self.types.bindings);
        let page = self
            .store
            .list(
                &self.types.bindings,
                ListRequest::everything(&bindings_prefix),
                &|_| true,
            )
            .await?;
        let clusters: BTreeSet<LogicalClusterName> =
            page.items.iter().filter_map(cluster_of).collect();
        for cluster in clusters {
            queue.add(cluster);
        }
        let from = page.revision + 1;
        let objects = self.store.objects();
        let mut changes = select_all([
            Box::pin(objects.watch_current(&bindings_prefix, from).await?),
            Box::pin(
                objects
                    .watch_current(&prefix(&self.types.exports), from)
                    .await?,
            ),
            Box::pin(
                objects
                    .watch_current(&prefix(&self.types.schemas), from)
                    .await?,
            ),
            Box::pin(
                objects
                    .watch_current(&prefix(&self.types.conversions), from)
                    .await?,
            ),
        ]);
        // Exports, schemas and conversions of other shards arrive as copies from the cache.
        let mut copies = self.tenancy.subscribe_copies();
        loop {
            let cluster = tokio::select! {
                change = changes.next() => {
                    let Some(change) = change else { break };
                    let object = change?.object;
                    let Some(cluster) = cluster_of(&object) else {
                        continue;
                    };
                    if object["kind"] == "APIBinding" {
                        queue.add(cluster);
                        continue;
                    }
                    cluster
                }
                copy = copies.recv() => match copy {
                    Some(cluster) => cluster.as_ref().clone(),
                    None => break,
                },
            };
            self.requeue_consumers_of(&cluster, queue);
        }
        Err(ApiError::service_unavailable("APIBinding watch closed"))
    }

    async fn reconcile(&self, cluster: &LogicalClusterName) -> Result<Pass, ApiError> {
        let prefix = self.store.keys(&self.types.bindings).scope(cluster, None);
        let mut bindings = self
            .store
            .list(
                &self.types.bindings,
                ListRequest::everything(&prefix),
                &|_| true,
            )
            .await?
            .items;
        bindings.sort_by_key(|b| {
            (
                BoundResource::of_status(b).is_empty(),
                meta::creation_timestamp(b).unwrap_or_default().to_string(),
                meta::name(b).unwrap_or_default().to_string(),
            )
        });
        let mut taken = self.taken_names(cluster).await?;
        let mut served = Vec::new();
        let mut decided = Vec::new();
        let mut deleting = Vec::new();
        let mut sources = BTreeSet::new();
        let mut unresolved = false;
        for binding in &bindings {
            if meta::deletion_timestamp(binding).is_some() {
                // Served, and its names held, until its objects are gone: their finalizers must
                // stay removable (as a terminating CRD's objects stay reachable).
                if let Some(reference) = ExportReference::of(binding) {
                    for resource in BoundResource::of_status(binding) {
                        taken.insert(
                            (resource.group, resource.resource),
                            Holder::Binding(
                                meta::name(binding).unwrap_or_default().to_string(),
                                reference.clone(),
                            ),
                        );
                    }
                }
                served.extend(self.bound.served_as_recorded(binding).await?);
                deleting.push(binding);
                continue;
            }
            let reference = ExportReference::of(binding);
            let export_cluster = match &reference {
                Some(r) if r.is_built_in() => Some(LogicalClusterName::root()),
                Some(r) if r.path.is_empty() => Some(cluster.clone()),
                Some(r) => self.tenancy.resolve_with_copies(&r.path),
                None => None,
            };
            if !self.absence_is_known(export_cluster.as_ref()) {
                // Another shard's export may only not be read back yet: decide nothing.
                return Ok(Pass::After(UNRESOLVED_RETRY));
            }
            unresolved |= export_cluster.is_none();
            let (export, schemas) = match &export_cluster {
                Some(export_cluster) if reference.as_ref().is_some_and(|r| !r.is_built_in()) => {
                    sources.insert(export_cluster.clone());
                    let name = reference
                        .as_ref()
                        .map(|r| r.name.as_str())
                        .unwrap_or_default();
                    self.export_and_schemas(export_cluster, name).await?
                }
                _ => (None, BTreeMap::new()),
            };
            let export_cluster_name = export_cluster
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_default();
            let outcome = binding::decide(&Inputs {
                binding,
                export: export.as_ref(),
                export_cluster: &export_cluster_name,
                schemas: &schemas,
                taken: &taken,
            });
            let name = meta::name(binding).unwrap_or_default().to_string();
            let policy = match (&export, &export_cluster, &reference) {
                (Some(export), Some(cluster), Some(reference)) => {
                    policy_of(export, cluster, &reference.name)
                }
                _ => None,
            };
            let bound = outcome
                .bound
                .clone()
                .unwrap_or_else(|| BoundResource::of_status(binding));
            for resource in &bound {
                if let Some(reference) = &reference {
                    taken.insert(
                        (resource.group.clone(), resource.resource.clone()),
                        Holder::Binding(name.clone(), reference.clone()),
                    );
                }
                let schema_cluster = export_cluster
                    .clone()
                    .or_else(|| recorded_export_cluster(binding));
                served.extend(
                    self.bound
                        .served(schema_cluster.as_ref(), resource, &schemas, policy.as_ref())
                        .await?,
                );
            }
            decided.push(Decided { name, outcome });
        }
        self.bound.publish(cluster, &served);
        if sources.is_empty() {
            lock(&self.sources).remove(cluster);
        } else {
            lock(&self.sources).insert(cluster.clone(), sources.into_iter().collect());
        }
        for (decided, binding) in decided.iter().zip(
            bindings
                .iter()
                .filter(|b| meta::deletion_timestamp(b).is_none()),
        ) {
            self.write_status(cluster, binding, decided).await?;
        }
        let mut pending = false;
        for binding in deleting {
            pending |= !self.delete_bound_objects(cluster, binding).await?;
        }
        Ok(if pending {
            Pass::Again
        } else if unresolved {
            Pass::After(UNRESOLVED_RETRY)
        } else {
            Pass::Done
        })
    }
}

impl Bindings {
    /// Queues the consumer clusters whose bindings read exports or schemas of `source`.
    fn requeue_consumers_of(&self, source: &LogicalClusterName, queue: &Queue<LogicalClusterName>) {
        let consumers: Vec<LogicalClusterName> = lock(&self.sources)
            .iter()
            .filter(|(_, sources)| sources.binary_search(source).is_ok())
            .map(|(consumer, _)| consumer.clone())
            .collect();
        for consumer in consumers {
            queue.add(consumer);
        }
    }

    /// The groups and resources the cluster's CRDs and the built-in types hold.
    async fn taken_names(
        &self,
        cluster: &LogicalClusterName,
    ) -> Result<BTreeMap<(String, String), Holder>, ApiError> {
        let mut taken = BTreeMap::new();
        for t in self.store.registry().for_cluster(cluster).types() {
            if matches!(t.layout, kcp_registry::storage::KeyLayout::BuiltIn) {
                taken.insert(
                    (t.group.clone(), t.plural.clone()),
                    Holder::Crd(format!("{}.{}", t.plural, schema::group_in_names(&t.group))),
                );
            }
        }
        let prefix = self.store.keys(&self.types.crds).scope(cluster, None);
        let crds = self
            .store
            .list(&self.types.crds, ListRequest::everything(&prefix), &|_| {
                true
            })
            .await?;
        for crd in &crds.items {
            let field = |pointer: &str| {
                crd.pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            taken.insert(
                (field("/spec/group"), field("/spec/names/plural")),
                Holder::Crd(meta::name(crd).unwrap_or_default().to_string()),
            );
        }
        Ok(taken)
    }

    /// Whether what a binding's export cluster (`None`: its path resolves nowhere) lacks is
    /// really missing: always for this shard's own clusters, and for other shards' once their
    /// copies were read back from the cache (so a restarted shard never unbinds what the cache
    /// still has to tell it).
    fn absence_is_known(&self, export_cluster: Option<&LogicalClusterName>) -> bool {
        let local = export_cluster.is_some_and(|cluster| {
            cluster == &LogicalClusterName::root()
                || self.tenancy.logical_cluster(cluster).is_some()
        });
        local
            || [
                CopiedKind::LogicalClusters,
                CopiedKind::ApiExports,
                CopiedKind::ApiResourceSchemas,
            ]
            .into_iter()
            .all(|kind| self.tenancy.copies_listed(kind))
    }

    /// The export `name` of `export_cluster` (`None` when absent) and the schemas it exports that
    /// exist: this shard's own, else copies of another shard's from the cache.
    async fn export_and_schemas(
        &self,
        export_cluster: &LogicalClusterName,
        name: &str,
    ) -> Result<(Option<Value>, BTreeMap<String, Value>), ApiError> {
        let (store, tenancy) = (&self.store, &self.tenancy);
        let Some(export) =
            local_or_copy(store, tenancy, &self.types.exports, export_cluster, name).await?
        else {
            return Ok((None, BTreeMap::new()));
        };
        let mut schemas = BTreeMap::new();
        for schema_name in binding::exported_schemas(&export) {
            let schema = local_or_copy(
                store,
                tenancy,
                &self.types.schemas,
                export_cluster,
                &schema_name,
            )
            .await?;
            if let Some(schema) = schema {
                schemas.insert(schema_name, schema);
            }
        }
        Ok((Some(export), schemas))
    }

    /// Adds the finalizer a binding needs and the export label a binding stored before the label
    /// existed lacks (one write), then writes its status, each only when it changes.
    async fn write_status(
        &self,
        cluster: &LogicalClusterName,
        binding: &Value,
        decided: &Decided,
    ) -> Result<(), ApiError> {
        let bindings = &self.types.bindings;
        let needs_finalizer = !meta::finalizers(binding)
            .iter()
            .any(|f| f == binding::FINALIZER);
        let missing_label =
            admission::missing_export_label(binding, decided.outcome.export_cluster.as_deref());
        if needs_finalizer || missing_label.is_some() {
            let edit_metadata = |object: &mut Value| {
                let mut finalizers = meta::finalizers(object);
                if !finalizers.iter().any(|f| f == binding::FINALIZER) {
                    finalizers.push(binding::FINALIZER.to_string());
                    meta::set_finalizers(object, finalizers);
                }
                if let Some(export_cluster) = missing_label {
                    admission::label_new_binding(object, export_cluster);
                }
            };
            cleanup::edit_unless_gone(
                &self.store,
                bindings,
                cluster,
                &decided.name,
                None,
                &edit_metadata,
            )
            .await?;
        }
        let now = time::now_rfc3339();
        if !binding::apply(&mut binding.clone(), &decided.outcome, &now) {
            return Ok(());
        }
        let set_status = |object: &mut Value| {
            binding::apply(object, &decided.outcome, &now);
        };
        cleanup::edit_unless_gone(
            &self.store,
            bindings,
            cluster,
            &decided.name,
            Some("status"),
            &set_status,
        )
        .await
    }

    /// Deletes the objects a terminating binding bound in its cluster, then its finalizer.
    /// Returns whether it is done.
    async fn delete_bound_objects(
        &self,
        cluster: &LogicalClusterName,
        binding: &Value,
    ) -> Result<bool, ApiError> {
        let schema_cluster = recorded_export_cluster(binding);
        let mut remaining = 0;
        for resource in BoundResource::of_status(binding) {
            if let Some(rt) = self
                .bound
                .storage_type(schema_cluster.as_ref(), &resource)
                .await?
            {
                remaining += cleanup::delete_all(&self.store, &rt, cluster).await?;
            }
        }
        if remaining > 0 {
            return Ok(false);
        }
        let name = meta::name(binding).unwrap_or_default();
        cleanup::remove_finalizer(
            &self.store,
            &self.types.bindings,
            cluster,
            name,
            binding::FINALIZER,
        )
        .await?;
        Ok(true)
    }
}
