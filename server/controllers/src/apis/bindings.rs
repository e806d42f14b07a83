//! The APIBinding controller (upstream's `pkg/reconciler/apis/apibinding` and
//! `apibindingdeletion`): serves in each consumer's logical cluster what its bindings bind.
//!
//! One storage watch covers the bindings of every logical cluster, and two more the exports and
//! schemas, so a provider's change (a new schema version in `spec.resources`, an export appearing
//! after its binding) reaches every binding that reads it. A pass takes a whole consumer cluster:
//! its bindings are decided one after another (kcp-apis' rules, oldest holder first, so the first
//! binding of a group and resource keeps it and a later one reports `NamingConflicts`), the bound
//! types of all of them are published in the registry (shared with every cluster bound to the same
//! schemas), and only then are the statuses written, so a client that sees `Bound` can create
//! objects at once. A binding being deleted is unpublished first, then its objects in that cluster
//! are deleted, then its finalizer goes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select_all;
use kcp_apiextensions::CrdInfo;
use kcp_apimachinery::{ApiError, meta, time};
use kcp_apis::binding::{self, BoundResource, ExportReference, Holder, Inputs, Outcome};
use kcp_apis::schema;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{DeleteOptions, Deleted, Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType, custom};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{cluster_of, stored_type};
use crate::TenancyIndex;
use crate::runner::{self, Controller, Pass, Queue};

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
    let controller = Bindings {
        store,
        tenancy,
        types,
        sources: Mutex::new(HashMap::new()),
        parsed: Mutex::new(HashMap::new()),
    };
    runner::run(controller, shutdown).await;
}

struct Types {
    bindings: Arc<ResourceType>,
    exports: Arc<ResourceType>,
    schemas: Arc<ResourceType>,
    crds: Arc<ResourceType>,
}

impl Types {
    fn of(store: &RestStore) -> Result<Types, ApiError> {
        Ok(Types {
            bindings: stored_type(store, kcp_apis::API_BINDINGS)?,
            exports: stored_type(store, kcp_apis::API_EXPORTS)?,
            schemas: stored_type(store, kcp_apis::API_RESOURCE_SCHEMAS)?,
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
    /// Consumer cluster -> the clusters its bindings' exports live in (whose changes requeue it).
    sources: Mutex<HashMap<LogicalClusterName, BTreeSet<LogicalClusterName>>>,
    /// Schemas as CRDs, by schema UID (schemas never change).
    parsed: Mutex<HashMap<String, Arc<CrdInfo>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A bound resource as served: its identity and parsed schema.
struct Served {
    uid: String,
    identity: String,
    info: Arc<CrdInfo>,
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
        ]);
        while let Some(change) = changes.next().await {
            let object = change?.object;
            let Some(cluster) = cluster_of(&object) else {
                continue;
            };
            if object["kind"] == "APIBinding" {
                queue.add(cluster);
                continue;
            }
            let consumers: Vec<LogicalClusterName> = lock(&self.sources)
                .iter()
                .filter(|(_, sources)| sources.contains(&cluster))
                .map(|(consumer, _)| consumer.clone())
                .collect();
            for consumer in consumers {
                queue.add(consumer);
            }
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
                deleting.push(binding);
                continue;
            }
            let reference = ExportReference::of(binding);
            let export_cluster = match &reference {
                Some(r) if r.is_built_in() => Some(LogicalClusterName::root()),
                Some(r) if r.path.is_empty() => Some(cluster.clone()),
                Some(r) => self.tenancy.resolve(&r.path).ok(),
                None => None,
            };
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
                let schema_cluster = export_cluster.clone().or_else(|| {
                    binding
                        .pointer("/status/apiExportClusterName")
                        .and_then(Value::as_str)
                        .and_then(LogicalClusterName::parse)
                });
                if let Some(info) = self
                    .parsed_schema(schema_cluster.as_ref(), resource, &schemas)
                    .await?
                {
                    served.push(Served {
                        uid: resource.schema_uid.clone(),
                        identity: resource.identity_hash.clone(),
                        info,
                    });
                }
            }
            decided.push(Decided { name, outcome });
        }
        self.publish(cluster, &served);
        if sources.is_empty() {
            lock(&self.sources).remove(cluster);
        } else {
            lock(&self.sources).insert(cluster.clone(), sources);
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

    /// The export `name` of `export_cluster` (`None` when absent) and the schemas it exports that exist.
    async fn export_and_schemas(
        &self,
        export_cluster: &LogicalClusterName,
        name: &str,
    ) -> Result<(Option<Value>, BTreeMap<String, Value>), ApiError> {
        let at = Location {
            cluster: export_cluster,
            namespace: None,
        };
        let export = match self.store.get(&self.types.exports, at, name).await {
            Ok(stored) => stored.object,
            Err(e) if e.code == 404 => return Ok((None, BTreeMap::new())),
            Err(e) => return Err(e),
        };
        let mut schemas = BTreeMap::new();
        for schema_name in binding::exported_schemas(&export) {
            match self.store.get(&self.types.schemas, at, &schema_name).await {
                Ok(stored) => {
                    schemas.insert(schema_name, stored.object);
                }
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok((Some(export), schemas))
    }

    /// The schema of a bound resource as a CRD (read from the export's cluster when the pass did
    /// not read it, e.g. the export is gone but the binding keeps serving what it bound).
    async fn parsed_schema(
        &self,
        schema_cluster: Option<&LogicalClusterName>,
        resource: &BoundResource,
        schemas: &BTreeMap<String, Value>,
    ) -> Result<Option<Arc<CrdInfo>>, ApiError> {
        if let Some(info) = lock(&self.parsed).get(&resource.schema_uid) {
            return Ok(Some(info.clone()));
        }
        let schema = match (schemas.get(&resource.schema_name), schema_cluster) {
            (Some(schema), _) => schema.clone(),
            (None, Some(cluster)) => {
                let at = Location {
                    cluster,
                    namespace: None,
                };
                match self
                    .store
                    .get(&self.types.schemas, at, &resource.schema_name)
                    .await
                {
                    Ok(stored) => stored.object,
                    Err(e) if e.code == 404 => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            (None, None) => return Ok(None),
        };
        let info = match CrdInfo::from_crd(&schema::to_crd(&schema)) {
            Ok(info) => Arc::new(info),
            Err(error) => {
                tracing::warn!(schema = resource.schema_name, %error, "a bound schema is not a valid CRD");
                return Ok(None);
            }
        };
        lock(&self.parsed).insert(resource.schema_uid.clone(), info.clone());
        Ok(Some(info))
    }

    /// Serves the bound types of a cluster (built only for content no cluster serves yet).
    fn publish(&self, cluster: &LogicalClusterName, served: &[Served]) {
        let mut content: Vec<(&str, &str)> = served
            .iter()
            .map(|s| (s.uid.as_str(), s.identity.as_str()))
            .collect();
        content.sort_unstable();
        let fingerprint = if content.is_empty() {
            0
        } else {
            let mut hasher = DefaultHasher::new();
            content.hash(&mut hasher);
            hasher.finish().max(1)
        };
        self.store
            .registry()
            .set_bound_types(cluster, fingerprint, || {
                served
                    .iter()
                    .flat_map(|s| {
                        custom::resource_types_serving(
                            &s.info,
                            &custom::Serving {
                                bound_identity: Some(s.identity.as_str().into()),
                                ..custom::Serving::default()
                            },
                        )
                    })
                    .collect()
            });
    }

    /// Adds the finalizer a binding needs and writes its status, each only when it changes.
    async fn write_status(
        &self,
        cluster: &LogicalClusterName,
        binding: &Value,
        decided: &Decided,
    ) -> Result<(), ApiError> {
        let at = Location {
            cluster,
            namespace: None,
        };
        let result = if !meta::finalizers(binding)
            .iter()
            .any(|f| f == binding::FINALIZER)
        {
            let add_finalizer = |current: &Value| {
                let mut new = current.clone();
                let mut finalizers = meta::finalizers(current);
                finalizers.push(binding::FINALIZER.to_string());
                meta::set_finalizers(&mut new, finalizers);
                meta::metadata_mut(&mut new).remove("resourceVersion");
                Ok(new)
            };
            self.store
                .update(
                    &self.types.bindings,
                    at,
                    &decided.name,
                    &add_finalizer,
                    None,
                    false,
                )
                .await
                .map(|_| ())
        } else {
            Ok(())
        };
        match result {
            Err(e) if e.code == 404 => return Ok(()),
            other => other?,
        }
        let now = time::now_rfc3339();
        if !binding::apply(&mut binding.clone(), &decided.outcome, &now) {
            return Ok(());
        }
        let set_status = |current: &Value| {
            let mut new = current.clone();
            binding::apply(&mut new, &decided.outcome, &now);
            meta::metadata_mut(&mut new).remove("resourceVersion");
            Ok(new)
        };
        match self
            .store
            .update(
                &self.types.bindings,
                at,
                &decided.name,
                &set_status,
                Some("status"),
                false,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes the objects a terminating binding bound in its cluster, then its finalizer.
    /// Returns whether it is done.
    async fn delete_bound_objects(
        &self,
        cluster: &LogicalClusterName,
        binding: &Value,
    ) -> Result<bool, ApiError> {
        let schema_cluster = binding
            .pointer("/status/apiExportClusterName")
            .and_then(Value::as_str)
            .and_then(LogicalClusterName::parse);
        let mut remaining = 0;
        for resource in BoundResource::of_status(binding) {
            let Some(info) = self
                .parsed_schema(schema_cluster.as_ref(), &resource, &BTreeMap::new())
                .await?
            else {
                continue;
            };
            let serving = custom::Serving {
                bound_identity: Some(resource.identity_hash.as_str().into()),
                ..custom::Serving::default()
            };
            let Some(rt) = custom::resource_types_serving(&info, &serving)
                .into_iter()
                .next()
            else {
                continue;
            };
            let prefix = self.store.keys(&rt).scope(cluster, None);
            let page = self
                .store
                .list(&rt, ListRequest::everything(&prefix), &|_| true)
                .await?;
            for object in page.items {
                let at = Location {
                    cluster,
                    namespace: meta::namespace(&object),
                };
                match self
                    .store
                    .delete(
                        &rt,
                        at,
                        meta::name(&object).unwrap_or_default(),
                        &DeleteOptions::default(),
                    )
                    .await
                {
                    Ok(Deleted::Gone(_)) => {}
                    Ok(Deleted::Pending(_)) => remaining += 1,
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if remaining > 0 {
            return Ok(false);
        }
        let drop_finalizer = |current: &Value| {
            let mut new = current.clone();
            let kept: Vec<String> = meta::finalizers(current)
                .into_iter()
                .filter(|f| f != binding::FINALIZER)
                .collect();
            meta::set_finalizers(&mut new, kept);
            meta::metadata_mut(&mut new).remove("resourceVersion");
            Ok(new)
        };
        let at = Location {
            cluster,
            namespace: None,
        };
        let name = meta::name(binding).unwrap_or_default();
        match self
            .store
            .update(&self.types.bindings, at, name, &drop_finalizer, None, false)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.code == 404 => Ok(true),
            Err(e) => Err(e),
        }
    }
}
