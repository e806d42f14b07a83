//! The bound types of a consumer cluster: the schemas its APIBindings bound, parsed once per
//! schema (schemas never change) and published in the registry as the cluster's binding layer,
//! stored under each export's identity. Clusters bound to the same schemas share one API set.
//! [`serve_existing`] publishes what the stored bindings record before the first request, so a
//! restarted server serves bound resources at once (the controller's first pass re-decides them).
//! A schema with more than one version converts between them by the APIConversion of its name in
//! the export's workspace, when there is one (compiled once per revision of the APIConversion).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use kcp_apiextensions::CrdInfo;
use kcp_apimachinery::{ApiError, meta};
use kcp_apis::api_conversion::Converter;
use kcp_apis::binding::{self, BoundResource, ExportReference};
use kcp_apis::schema;
use kcp_registry::custom::ConvertVersions;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::RestStore;
use kcp_registry::{BoundPolicy, LogicalClusterName, ResourceType, custom};
use serde_json::Value;

use super::{cluster_of, local_or_copy, stored_type};
use crate::TenancyIndex;

/// A bound resource as served: its schema's UID, its identity, its parsed schema, the export
/// whose maximal permission policy caps it and its schema's APIConversion.
pub(super) struct Served {
    uid: String,
    identity: String,
    info: Arc<CrdInfo>,
    policy: Option<BoundPolicy>,
    conversion: Option<Conversion>,
}

/// An APIConversion compiled for one schema: its revision (`uid/resourceVersion`) and converter.
#[derive(Clone)]
struct Conversion {
    revision: String,
    convert: ConvertVersions,
}

pub(super) struct BoundTypes {
    store: RestStore,
    /// Where schemas and exports of other shards are read from (copies from the cache).
    tenancy: Arc<TenancyIndex>,
    schemas: Arc<ResourceType>,
    exports: Arc<ResourceType>,
    conversions: Arc<ResourceType>,
    /// Schemas as CRDs, by schema UID.
    parsed: Mutex<HashMap<String, Arc<CrdInfo>>>,
    /// Compiled APIConversions, by schema UID.
    converters: Mutex<HashMap<String, Conversion>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The cluster a binding's schemas live in, as its status records it.
pub(super) fn recorded_export_cluster(binding: &Value) -> Option<LogicalClusterName> {
    binding
        .pointer("/status/apiExportClusterName")
        .and_then(Value::as_str)
        .and_then(LogicalClusterName::parse)
}

impl BoundTypes {
    pub(super) fn new(
        store: &RestStore,
        tenancy: Arc<TenancyIndex>,
    ) -> Result<BoundTypes, ApiError> {
        Ok(BoundTypes {
            store: store.clone(),
            tenancy,
            schemas: stored_type(store, kcp_apis::API_RESOURCE_SCHEMAS)?,
            exports: stored_type(store, kcp_apis::API_EXPORTS)?,
            conversions: stored_type(store, kcp_apis::API_CONVERSIONS)?,
            parsed: Mutex::new(HashMap::new()),
            converters: Mutex::new(HashMap::new()),
        })
    }

    /// How `resource` is served: its schema from `schemas` or, when the pass did not read it (the
    /// export is gone but the binding keeps serving what it bound), from `schema_cluster`.
    pub(super) async fn served(
        &self,
        schema_cluster: Option<&LogicalClusterName>,
        resource: &BoundResource,
        schemas: &BTreeMap<String, Value>,
        policy: Option<&BoundPolicy>,
    ) -> Result<Option<Served>, ApiError> {
        let Some(info) = self.parsed(schema_cluster, resource, schemas).await? else {
            return Ok(None);
        };
        let conversion = match schema_cluster {
            Some(cluster) if info.versions.len() > 1 => {
                self.conversion(cluster, resource, &info).await?
            }
            _ => None,
        };
        Ok(Some(Served {
            uid: resource.schema_uid.clone(),
            identity: resource.identity_hash.clone(),
            info,
            policy: policy.cloned(),
            conversion,
        }))
    }

    /// The schema of `resource` as a CRD, parsed once.
    async fn parsed(
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
                let schema = local_or_copy(
                    &self.store,
                    &self.tenancy,
                    &self.schemas,
                    cluster,
                    &resource.schema_name,
                )
                .await?;
                match schema {
                    Some(schema) => schema,
                    None => return Ok(None),
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

    /// The APIConversion named like the schema of `resource` in `schema_cluster`, compiled
    /// against `info` (once per revision); one that no longer compiles converts nothing.
    async fn conversion(
        &self,
        schema_cluster: &LogicalClusterName,
        resource: &BoundResource,
        info: &Arc<CrdInfo>,
    ) -> Result<Option<Conversion>, ApiError> {
        let Some(conversion) = local_or_copy(
            &self.store,
            &self.tenancy,
            &self.conversions,
            schema_cluster,
            &resource.schema_name,
        )
        .await?
        else {
            lock(&self.converters).remove(&resource.schema_uid);
            return Ok(None);
        };
        let revision = format!(
            "{}/{}",
            meta::uid(&conversion).unwrap_or_default(),
            meta::resource_version(&conversion).unwrap_or_default()
        );
        if let Some(known) = lock(&self.converters).get(&resource.schema_uid)
            && known.revision == revision
        {
            return Ok(Some(known.clone()));
        }
        let converter = match Converter::compile(&conversion, info) {
            Ok(converter) => Arc::new(converter),
            Err(errors) => {
                tracing::warn!(
                    schema = resource.schema_name,
                    ?errors,
                    "an APIConversion does not compile; not converting"
                );
                return Ok(None);
            }
        };
        let compiled = Conversion {
            revision,
            convert: Arc::new(move |object, to| converter.convert(object, to)),
        };
        lock(&self.converters).insert(resource.schema_uid.clone(), compiled.clone());
        Ok(Some(compiled))
    }

    /// The type objects of `resource` are stored as (its first served version).
    pub(super) async fn storage_type(
        &self,
        schema_cluster: Option<&LogicalClusterName>,
        resource: &BoundResource,
    ) -> Result<Option<Arc<ResourceType>>, ApiError> {
        let Some(served) = self
            .served(schema_cluster, resource, &BTreeMap::new(), None)
            .await?
        else {
            return Ok(None);
        };
        Ok(types_of(&served).into_iter().next())
    }

    /// How what a stored binding records in `status.boundResources` is served, from the schemas
    /// of the export cluster it recorded: for a binding no pass decides again (at start, or
    /// while it is being deleted and its objects must stay reachable to release their finalizers).
    pub(super) async fn served_as_recorded(
        &self,
        binding: &Value,
    ) -> Result<Vec<Served>, ApiError> {
        let schema_cluster = recorded_export_cluster(binding);
        let policy = self.recorded_policy(binding).await?;
        let mut served = Vec::new();
        for resource in BoundResource::of_status(binding) {
            served.extend(
                self.served(
                    schema_cluster.as_ref(),
                    &resource,
                    &BTreeMap::new(),
                    policy.as_ref(),
                )
                .await?,
            );
        }
        Ok(served)
    }

    /// The maximal permission policy of the export a stored binding recorded, if it has one.
    async fn recorded_policy(&self, binding: &Value) -> Result<Option<BoundPolicy>, ApiError> {
        let (Some(cluster), Some(reference)) = (
            recorded_export_cluster(binding),
            ExportReference::of(binding),
        ) else {
            return Ok(None);
        };
        let export = local_or_copy(
            &self.store,
            &self.tenancy,
            &self.exports,
            &cluster,
            &reference.name,
        )
        .await?;
        Ok(export.and_then(|export| policy_of(&export, &cluster, &reference.name)))
    }

    /// Serves the bound types of a cluster (built only for content no cluster serves yet).
    pub(super) fn publish(&self, cluster: &LogicalClusterName, served: &[Served]) {
        let mut content: Vec<(&str, &str, Option<&BoundPolicy>, Option<&str>)> = served
            .iter()
            .map(|s| {
                (
                    s.uid.as_str(),
                    s.identity.as_str(),
                    s.policy.as_ref(),
                    s.conversion.as_ref().map(|c| c.revision.as_str()),
                )
            })
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
                served.iter().flat_map(types_of).collect()
            });
    }
}

/// The policy an export's bound types carry: itself, when it has `maximalPermissionPolicy.local`.
pub(super) fn policy_of(
    export: &Value,
    cluster: &LogicalClusterName,
    name: &str,
) -> Option<BoundPolicy> {
    binding::has_local_maximal_permission_policy(export).then(|| BoundPolicy {
        cluster: cluster.clone(),
        export: name.to_string(),
    })
}

fn types_of(served: &Served) -> Vec<Arc<ResourceType>> {
    custom::resource_types_serving(
        &served.info,
        &custom::Serving {
            bound_identity: Some(served.identity.as_str().into()),
            bound_policy: served.policy.clone(),
            convert: served.conversion.as_ref().map(|c| c.convert.clone()),
            ..custom::Serving::default()
        },
    )
}

/// Serves what every stored APIBinding (being deleted or not) records in `status.boundResources`
/// from this shard's own schemas: before the first request nothing was read back from the cache
/// yet, so a binding of another shard's export is served from the controller's first pass that
/// has the copies.
pub(crate) async fn serve_existing(store: &RestStore) -> Result<(), ApiError> {
    let bound = BoundTypes::new(store, Arc::new(TenancyIndex::default()))?;
    let bindings = stored_type(store, kcp_apis::API_BINDINGS)?;
    let prefix = store.keys(&bindings).all_clusters().to_string();
    let page = store
        .list(&bindings, ListRequest::everything(&prefix), &|_| true)
        .await?;
    let mut by_cluster: BTreeMap<LogicalClusterName, Vec<Value>> = BTreeMap::new();
    for binding in page.items {
        if let Some(cluster) = cluster_of(&binding) {
            by_cluster.entry(cluster).or_default().push(binding);
        }
    }
    for (cluster, bindings) in by_cluster {
        let mut served = Vec::new();
        for binding in &bindings {
            served.extend(bound.served_as_recorded(binding).await?);
        }
        bound.publish(&cluster, &served);
    }
    Ok(())
}
