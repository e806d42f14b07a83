//! The admission configuration of every logical cluster, in memory: its webhook configurations,
//! admission policies and bindings (compiled), and which of its namespaces have ResourceQuotas.
//!
//! kube-apiserver's admission plugins read these objects from informers; upstream kcp keeps one
//! informer per type across all logical clusters and builds each cluster's dispatcher from its
//! slice. Here one list per type fills the index, and a cluster is marked stale whenever one of
//! its configuration objects is written: at once by a write hook of the store (so the writer's
//! next request sees its change), and by a storage watch for the writes of other replicas
//! sharing the store ([`ConfigIndex::follow`]). The next request in a stale cluster rebuilds its
//! configuration from storage, so compilation happens once per change, not per request. A
//! cluster without any configuration costs one map lookup per write.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select_all;
use k8s_openapi::api::admissionregistration::{v1, v1beta1};
use kcp_apimachinery::{ApiError, meta};
use kcp_registry::hooks::{AfterWrite, WriteKind, Written};
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ChangeType, ListRequest};
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::policy::Policies;
use crate::webhook::Webhooks;

const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

/// The configuration types, as `(group, version, plural)`.
const CONFIGURATION_TYPES: [(&str, &str, &str); 7] = [
    (ADMISSION_GROUP, "v1", "mutatingwebhookconfigurations"),
    (ADMISSION_GROUP, "v1", "validatingwebhookconfigurations"),
    (ADMISSION_GROUP, "v1", "validatingadmissionpolicies"),
    (ADMISSION_GROUP, "v1", "validatingadmissionpolicybindings"),
    (ADMISSION_GROUP, "v1beta1", "mutatingadmissionpolicies"),
    (
        ADMISSION_GROUP,
        "v1beta1",
        "mutatingadmissionpolicybindings",
    ),
    ("", "v1", "resourcequotas"),
];

fn is_configuration(rt: &ResourceType) -> bool {
    CONFIGURATION_TYPES
        .iter()
        .any(|(group, _, plural)| rt.group == *group && rt.plural == *plural)
}

/// One logical cluster's admission configuration.
pub struct ClusterConfig {
    pub webhooks: Webhooks,
    pub policies: Policies,
    /// Namespaces holding at least one ResourceQuota.
    pub quota_namespaces: BTreeSet<String>,
}

impl ClusterConfig {
    /// Builds the configuration from the cluster's objects, by plural name of their type.
    fn build(objects: &BTreeMap<&str, Vec<Value>>) -> ClusterConfig {
        let of = |plural: &str| objects.get(plural).map(Vec::as_slice).unwrap_or_default();
        let webhooks = Webhooks::new(
            &typed::<v1::MutatingWebhookConfiguration>(of("mutatingwebhookconfigurations")),
            &typed::<v1::ValidatingWebhookConfiguration>(of("validatingwebhookconfigurations")),
        );
        let policies = Policies::new(
            &typed::<v1::ValidatingAdmissionPolicy>(of("validatingadmissionpolicies")),
            &typed::<v1::ValidatingAdmissionPolicyBinding>(of("validatingadmissionpolicybindings")),
            &typed::<v1beta1::MutatingAdmissionPolicy>(of("mutatingadmissionpolicies")),
            &typed::<v1beta1::MutatingAdmissionPolicyBinding>(of(
                "mutatingadmissionpolicybindings",
            )),
        );
        let quota_namespaces = of("resourcequotas")
            .iter()
            .filter_map(|quota| meta::namespace(quota).map(str::to_string))
            .collect();
        ClusterConfig {
            webhooks,
            policies,
            quota_namespaces,
        }
    }

    /// Whether nothing is configured (the common case, which admission skips entirely).
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.policies.is_empty() && self.quota_namespaces.is_empty()
    }
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// Objects of a configuration type in their typed form; one that does not decode (stored by an
/// older or newer server) is logged and left out.
fn typed<T: DeserializeOwned>(objects: &[Value]) -> Vec<T> {
    objects
        .iter()
        .filter_map(|object| match serde_json::from_value(object.clone()) {
            Ok(typed) => Some(typed),
            Err(error) => {
                tracing::warn!(name = ?meta::name(object), %error, "admission configuration object does not decode; ignored");
                None
            }
        })
        .collect()
}

enum Slot {
    Loaded(Arc<ClusterConfig>),
    /// Changed since it was loaded; the number identifies the change (from one counter of the
    /// index), so a rebuild that raced with a newer change does not mark the cluster current.
    Stale(u64),
}

/// The admission configuration of all logical clusters.
#[derive(Default)]
pub struct ConfigIndex {
    loaded: OnceCell<()>,
    clusters: RwLock<HashMap<LogicalClusterName, Slot>>,
    changes: AtomicU64,
    empty: Arc<ClusterConfig>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig::build(&BTreeMap::new())
    }
}

impl ConfigIndex {
    pub fn new() -> ConfigIndex {
        ConfigIndex::default()
    }

    /// The configuration of `cluster`, loading everything on first use and rebuilding a cluster
    /// whose configuration objects changed.
    pub async fn get(
        &self,
        store: &RestStore,
        cluster: &LogicalClusterName,
    ) -> Result<Arc<ClusterConfig>, ApiError> {
        self.loaded.get_or_try_init(|| self.load_all(store)).await?;
        let stale = {
            let clusters = self
                .clusters
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match clusters.get(cluster) {
                None => return Ok(self.empty.clone()),
                Some(Slot::Loaded(config)) => return Ok(config.clone()),
                Some(Slot::Stale(changes)) => *changes,
            }
        };
        let config = Arc::new(self.load_cluster(store, cluster).await?);
        let mut clusters = self
            .clusters
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if matches!(clusters.get(cluster), Some(Slot::Stale(changes)) if *changes == stale) {
            if config.is_empty() {
                clusters.remove(cluster);
            } else {
                clusters.insert(cluster.clone(), Slot::Loaded(config.clone()));
            }
        }
        Ok(config)
    }

    /// Reads every configuration object of every cluster (at the first request, and whenever
    /// [`follow`](Self::follow) starts watching again). A cluster marked stale after the read
    /// began keeps its mark.
    async fn load_all(&self, store: &RestStore) -> Result<(), ApiError> {
        let began = self.changes.load(Ordering::Acquire);
        let mut by_cluster: HashMap<LogicalClusterName, BTreeMap<&str, Vec<Value>>> =
            HashMap::new();
        for (group, version, plural) in CONFIGURATION_TYPES {
            let Some(rt) = store.registry().builtin_type(group, version, plural) else {
                continue;
            };
            let keys = store.keys(&rt);
            let page = store
                .list(&rt, ListRequest::everything(keys.all_clusters()), &|_| true)
                .await?;
            for object in page.items {
                let Some(cluster) = cluster_of(&object) else {
                    continue;
                };
                by_cluster
                    .entry(cluster)
                    .or_default()
                    .entry(plural)
                    .or_default()
                    .push(object);
            }
        }
        let mut clusters = self
            .clusters
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        clusters.retain(|_, slot| matches!(slot, Slot::Stale(change) if *change > began));
        for (cluster, objects) in by_cluster {
            clusters
                .entry(cluster)
                .or_insert_with(|| Slot::Loaded(Arc::new(ClusterConfig::build(&objects))));
        }
        Ok(())
    }

    /// Marks clusters stale as their configuration objects change in storage, whoever wrote
    /// them (other replicas sharing the store included); runs until `shutdown`.
    pub async fn follow(self: Arc<Self>, store: RestStore, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            if let Err(error) = self.follow_once(&store, &shutdown).await {
                tracing::warn!(%error, "admission configuration watch ended, restarting");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }

    async fn follow_once(
        &self,
        store: &RestStore,
        shutdown: &CancellationToken,
    ) -> Result<(), ApiError> {
        let objects = store.objects();
        let from = objects.current_revision().await? + 1;
        // Two watches, not one per type: every storage watch is woken by every write.
        let mut streams = vec![Box::pin(
            objects
                .watch_current(&objects.group_root(ADMISSION_GROUP), from)
                .await?,
        )];
        if let Some(quotas) = store.registry().builtin_type("", "v1", "resourcequotas") {
            let keys = store.keys(&quotas);
            streams.push(Box::pin(
                objects.watch_current(keys.all_clusters(), from).await?,
            ));
        }
        // What changed before the watch started is unknown: read everything again.
        self.load_all(store).await?;
        let mut changes = select_all(streams);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                change = changes.next() => match change {
                    None => return Err(ApiError::service_unavailable("admission configuration watch closed")),
                    Some(Err(error)) => return Err(error),
                    Some(Ok(change)) => {
                        let quota_update = change.kind == ChangeType::Modified
                            && meta::kind(&change.object) == Some("ResourceQuota");
                        if !quota_update && let Some(cluster) = cluster_of(&change.object) {
                            self.mark_stale(&cluster);
                        }
                    }
                },
            }
        }
    }

    async fn load_cluster(
        &self,
        store: &RestStore,
        cluster: &LogicalClusterName,
    ) -> Result<ClusterConfig, ApiError> {
        let mut objects = BTreeMap::new();
        for (group, version, plural) in CONFIGURATION_TYPES {
            let Some(rt) = store.registry().builtin_type(group, version, plural) else {
                continue;
            };
            let at = Location {
                cluster,
                namespace: None,
            };
            let prefix = store.keys(&rt).scope(at.cluster, at.namespace);
            let page = store
                .list(&rt, ListRequest::everything(&prefix), &|_| true)
                .await?;
            objects.insert(plural, page.items);
        }
        Ok(ClusterConfig::build(&objects))
    }

    fn mark_stale(&self, cluster: &LogicalClusterName) {
        let mut clusters = self
            .clusters
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let change = self.changes.fetch_add(1, Ordering::AcqRel) + 1;
        clusters.insert(cluster.clone(), Slot::Stale(change));
    }
}

/// Marks a cluster stale when one of its configuration objects is written. Updates of a
/// ResourceQuota (its usage, raised by every admitted create) change nothing indexed here.
impl AfterWrite for ConfigIndex {
    fn after_write(&self, written: &Written<'_>) {
        let quota_update =
            written.rt.plural == "resourcequotas" && written.kind == WriteKind::Updated;
        if is_configuration(written.rt) && !quota_update {
            self.mark_stale(written.cluster);
        }
    }
}
