//! The `system:apibindings` initializer (upstream's APIBinder in
//! `pkg/reconciler/tenancy/initialization`): a workspace whose type lists
//! `spec.defaultAPIBindings` of exports other than kcp's own gets those APIBindings while it
//! initializes, and becomes Ready only once they are bound (kcp-apis' `default_bindings` rules).
//!
//! A workspace whose types bind only kcp's own exports never reaches this controller: the
//! LogicalCluster controller removes the initializer in the same write that starts
//! initialization, so the common case costs nothing here. LogicalCluster changes come from the
//! tenancy index (after it has them, see `tenancy_index`); a change of a binding in a waiting
//! workspace requeues it; a missing export is looked for again every [`MISSING_EXPORT_RETRY`]
//! (it may be created later, or arrive from another shard).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, time};
use kcp_apis::conditions::Condition;
use kcp_apis::default_bindings::{self, API_BINDINGS_INITIALIZED, Progress};
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use kcp_tenancy::Phase;
use kcp_tenancy::logical_cluster::{self as lc, NAME};
use kcp_tenancy::types::{API_BINDINGS_INITIALIZER, DefaultApiBinding};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{cluster_of, local_or_copy, stored_type};
use crate::TenancyIndex;
use crate::cleanup;
use crate::runner::{self, Controller, Pass, Queue};
use crate::tenancy_index::IndexedLogicalCluster;

/// How long a workspace whose export is missing waits before it looks again.
const MISSING_EXPORT_RETRY: Duration = Duration::from_secs(2);

/// Runs until `shutdown`.
pub async fn run(store: RestStore, tenancy: Arc<TenancyIndex>, shutdown: CancellationToken) {
    let types = match (
        stored_type(&store, kcp_apis::API_BINDINGS),
        stored_type(&store, kcp_apis::API_EXPORTS),
        TenancyIndex::types(&store),
    ) {
        (Ok(bindings), Ok(exports), Ok([logical_clusters, _])) => Types {
            bindings,
            exports,
            logical_clusters,
        },
        (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
            tracing::error!(%error, "the default APIBindings initializer cannot start");
            return;
        }
    };
    let controller = DefaultBindings {
        store,
        tenancy,
        types,
        waiting: Mutex::new(HashSet::new()),
    };
    runner::run(controller, shutdown).await;
}

struct Types {
    bindings: Arc<ResourceType>,
    exports: Arc<ResourceType>,
    logical_clusters: Arc<ResourceType>,
}

struct DefaultBindings {
    store: RestStore,
    tenancy: Arc<TenancyIndex>,
    types: Types,
    /// Clusters initializing with `system:apibindings`, whose bindings' changes requeue them.
    waiting: Mutex<HashSet<LogicalClusterName>>,
}

/// Whether a LogicalCluster waits for this initializer.
fn waits(logical_cluster: &IndexedLogicalCluster) -> bool {
    logical_cluster.phase() == Some(Phase::Initializing)
        && logical_cluster
            .initializers()
            .any(|i| i == API_BINDINGS_INITIALIZER)
}

impl DefaultBindings {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashSet<LogicalClusterName>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records whether `cluster` waits; whether it does.
    fn track(&self, cluster: &LogicalClusterName, logical_cluster: &IndexedLogicalCluster) -> bool {
        let waits = waits(logical_cluster);
        if waits {
            self.waiting().insert(cluster.clone());
        } else {
            self.waiting().remove(cluster);
        }
        waits
    }

    /// The exports of `defaults`, each `None` when its workspace or the export is not found.
    async fn exports(
        &self,
        defaults: &[DefaultApiBinding],
    ) -> Result<BTreeMap<DefaultApiBinding, Option<Value>>, ApiError> {
        let mut found = BTreeMap::new();
        for default in defaults {
            let export = match self.tenancy.resolve_with_copies(&default.path) {
                Some(cluster) => {
                    local_or_copy(
                        &self.store,
                        &self.tenancy,
                        &self.types.exports,
                        &cluster,
                        &default.export,
                    )
                    .await?
                }
                None => None,
            };
            found.insert(default.clone(), export);
        }
        Ok(found)
    }

    /// The cluster's bindings by export reference `(path, name)`.
    async fn bindings(
        &self,
        cluster: &LogicalClusterName,
    ) -> Result<BTreeMap<(String, String), Value>, ApiError> {
        let prefix = self.store.keys(&self.types.bindings).scope(cluster, None);
        let page = self
            .store
            .list(
                &self.types.bindings,
                ListRequest::everything(&prefix),
                &|_| true,
            )
            .await?;
        Ok(page
            .items
            .into_iter()
            .filter_map(|b| Some((default_bindings::export_of(&b)?, b)))
            .collect())
    }

    /// Writes `condition` on the LogicalCluster and, when `done`, removes the initializer.
    async fn report(
        &self,
        cluster: &LogicalClusterName,
        condition: &Condition,
        done: bool,
    ) -> Result<(), ApiError> {
        let now = time::now_rfc3339();
        let edit = |object: &mut Value| {
            condition.set_on(object, &now);
            if done {
                lc::remove_initializer(object, API_BINDINGS_INITIALIZER);
            }
        };
        cleanup::edit_unless_gone(
            &self.store,
            &self.types.logical_clusters,
            cluster,
            NAME,
            Some("status"),
            &edit,
        )
        .await
    }
}

impl Controller for DefaultBindings {
    type Key = LogicalClusterName;
    const NAME: &'static str = "default-apibindings";
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    async fn follow(&self, queue: &Queue<LogicalClusterName>) -> Result<(), ApiError> {
        let mut logical_clusters = self.tenancy.subscribe();
        let lc_prefix = self
            .store
            .keys(&self.types.logical_clusters)
            .all_clusters()
            .to_string();
        let page = self
            .store
            .list(
                &self.types.logical_clusters,
                ListRequest::everything(&lc_prefix),
                &|_| true,
            )
            .await?;
        for object in &page.items {
            if let Some(cluster) = cluster_of(object)
                && self.track(&cluster, &IndexedLogicalCluster::new(&cluster, object))
            {
                queue.add(cluster);
            }
        }
        let bindings_prefix = self
            .store
            .keys(&self.types.bindings)
            .all_clusters()
            .to_string();
        let mut bindings = self
            .store
            .objects()
            .watch_current(&bindings_prefix, page.revision + 1)
            .await?;
        loop {
            tokio::select! {
                change = bindings.next() => match change {
                    Some(change) => {
                        let object = change?.object;
                        if let Some(cluster) = cluster_of(&object)
                            && self.waiting().contains(&cluster)
                        {
                            queue.add(cluster);
                        }
                    }
                    None => break,
                },
                logical_cluster = logical_clusters.recv() => match logical_cluster {
                    Some(logical_cluster) => {
                        let cluster = logical_cluster.cluster();
                        if self.track(cluster, &logical_cluster) {
                            queue.add(cluster.clone());
                        }
                    }
                    None => break,
                },
            }
        }
        Err(ApiError::service_unavailable("APIBinding watch closed"))
    }

    async fn reconcile(&self, cluster: &LogicalClusterName) -> Result<Pass, ApiError> {
        let Some(logical_cluster) = self.tenancy.logical_cluster(cluster) else {
            self.waiting().remove(cluster);
            return Ok(Pass::Done);
        };
        if !self.track(cluster, &logical_cluster) {
            return Ok(Pass::Done);
        }
        let defaults = match self
            .tenancy
            .default_api_bindings(logical_cluster.workspace_type())
        {
            Ok(defaults) => default_bindings::to_make(defaults),
            Err(error) => {
                let condition = default_bindings::types_invalid(&error.to_string());
                self.report(cluster, &condition, false).await?;
                return Ok(Pass::Done);
            }
        };
        let exports = self.exports(&defaults).await?;
        let mut bindings = self.bindings(cluster).await?;
        let at = Location {
            cluster,
            namespace: None,
        };
        for default in &defaults {
            let key = (default.path.clone(), default.export.clone());
            if bindings.contains_key(&key) {
                continue;
            }
            if let Some(Some(export)) = exports.get(default) {
                let binding = default_bindings::binding_for(cluster.as_str(), default, export);
                self.store
                    .create_if_absent(&self.types.bindings, at, binding.clone())
                    .await?;
                // Not bound yet: what `progress` needs of it is its name.
                bindings.insert(key, binding);
            }
        }
        match default_bindings::progress(&defaults, &exports, &bindings) {
            Progress::ExportsMissing(condition) => {
                self.report(cluster, &condition, false).await?;
                Ok(Pass::After(MISSING_EXPORT_RETRY))
            }
            Progress::Waiting(condition) => {
                self.report(cluster, &condition, false).await?;
                Ok(Pass::Done)
            }
            Progress::Done => {
                let bound = Condition::holds(API_BINDINGS_INITIALIZED);
                self.report(cluster, &bound, true).await?;
                self.waiting().remove(cluster);
                Ok(Pass::Done)
            }
        }
    }
}
