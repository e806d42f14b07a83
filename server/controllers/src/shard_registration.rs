//! A shard's own `Shard` object in `root`: created at start, then kept up to date every
//! [`HEARTBEAT`] with a `Ready` heartbeat and the shard's capacity (upstream kcp's shards
//! register themselves the same way; the capacity and the heartbeat are ours).
//!
//! The root shard writes the object in its own store ([`LocalShards`]); other shards write it in
//! the root shard through its API (the kcp binary's `root_shard`). The name is claimed by one process at a
//! time: the object carries the process's identity in an annotation, and a process finding
//! another's identity with a heartbeat younger than [`STALE_AFTER`] refuses to start (see
//! `kcp_tenancy::shard::check_claim`); a stopped or crashed process frees the name by no longer
//! beating, and one that stops gracefully frees it at once (`Ready=False`, so a restart is not
//! refused). The shard's capacity (its logical clusters and `--max-logical-clusters`) is also
//! what the workspace scheduler reads, through [`Registration::capacity`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kcp_apimachinery::ApiError;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use kcp_tenancy::shard::{self, Capacity, ClaimError, Urls};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::shard_directory::ShardDirectory;
use crate::tenancy_index::TenancyIndex;

/// How often a shard renews its heartbeat and capacity.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
/// The shortest time between two writes of `status.capacity` while logical clusters come and go.
pub const CAPACITY_EVERY: Duration = Duration::from_secs(1);
/// How old another process's heartbeat must be before its shard name may be taken over.
pub const STALE_AFTER: Duration = Duration::from_secs(90);

/// Why a shard could not register.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("registering shard {name:?}: {source}")]
    Claim {
        name: String,
        #[source]
        source: ClaimError,
    },
    #[error("registering shard {name:?}: {message}")]
    Store { name: String, message: String },
    #[error("this server does not serve core.kcp.io/v1alpha1 shards in root")]
    NotServed,
}

/// Who this shard is and how big it may grow.
#[derive(Debug, Clone)]
pub struct Registration {
    /// `--shard-name`.
    pub name: String,
    /// Unique per process (host, process id, start time).
    pub process: String,
    pub urls: Urls,
    /// `--max-logical-clusters` (`None`: unlimited).
    pub max_logical_clusters: Option<u64>,
}

impl Registration {
    /// The shard's capacity now.
    pub fn capacity(&self, index: &TenancyIndex) -> Capacity {
        Capacity {
            logical_clusters: index.logical_cluster_count(),
            max_logical_clusters: self.max_logical_clusters,
        }
    }
}

/// Where a shard's `Shard` lives: the own store's `root` (the root shard, [`LocalShards`]) or
/// the root shard's API (other shards; the kcp binary implements that over HTTPS).
pub trait ShardObjects: Send + Sync + 'static {
    /// The `Shard` named `name`, if it exists.
    fn get(&self, name: &str) -> impl Future<Output = Result<Option<Value>, ApiError>> + Send;
    fn create(&self, object: Value) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Replaces the object (`status`: its status) with `change` of its current state.
    fn update(
        &self,
        name: &str,
        status: bool,
        change: &(dyn Fn(&Value) -> Value + Sync),
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// The `Shard`s of this shard's own store (the root shard's); also the root shard's
/// [`ShardDirectory`].
pub struct LocalShards {
    store: RestStore,
    shards: Arc<ResourceType>,
}

impl LocalShards {
    pub fn new(store: RestStore) -> Result<LocalShards, RegistrationError> {
        let shards = store
            .registry()
            .root_type(shard::GROUP, shard::VERSION, shard::RESOURCE)
            .ok_or(RegistrationError::NotServed)?;
        Ok(LocalShards { store, shards })
    }
}

fn root() -> Location<'static> {
    static ROOT: std::sync::LazyLock<LogicalClusterName> =
        std::sync::LazyLock::new(LogicalClusterName::root);
    Location {
        cluster: &ROOT,
        namespace: None,
    }
}

impl ShardObjects for LocalShards {
    async fn get(&self, name: &str) -> Result<Option<Value>, ApiError> {
        match self.store.get(&self.shards, root(), name).await {
            Ok(stored) => Ok(Some(stored.object)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create(&self, object: Value) -> Result<(), ApiError> {
        self.store
            .create(&self.shards, root(), object, false)
            .await
            .map(|_| ())
    }

    async fn update(
        &self,
        name: &str,
        status: bool,
        change: &(dyn Fn(&Value) -> Value + Sync),
    ) -> Result<(), ApiError> {
        let replace = |current: &Value| Ok(change(current));
        self.store
            .update(
                &self.shards,
                root(),
                name,
                &replace,
                status.then_some("status"),
                false,
            )
            .await
            .map(|_| ())
    }
}

impl ShardDirectory for LocalShards {
    fn list(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        Box::pin(async move {
            let prefix = self.store.keys(&self.shards).scope(root().cluster, None);
            let page = self
                .store
                .list(&self.shards, ListRequest::everything(&prefix), &|_| true)
                .await?;
            Ok(page.items)
        })
    }
}

/// Keeps a shard's `Shard` up to date wherever it lives.
pub struct Registrar<S> {
    objects: S,
    index: Arc<TenancyIndex>,
    registration: Arc<Registration>,
}

impl<S: ShardObjects> Registrar<S> {
    pub fn new(objects: S, index: Arc<TenancyIndex>, registration: Arc<Registration>) -> Self {
        Registrar {
            objects,
            index,
            registration,
        }
    }

    fn store_error(&self, error: &ApiError) -> RegistrationError {
        RegistrationError::Store {
            name: self.registration.name.clone(),
            message: error.message.clone(),
        }
    }

    /// Creates or claims the `Shard` and writes its first heartbeat; refuses a name another
    /// live process holds.
    pub async fn register(&self) -> Result<(), RegistrationError> {
        let Registration {
            name,
            process,
            urls,
            ..
        } = &*self.registration;
        let existing = self
            .objects
            .get(name)
            .await
            .map_err(|e| self.store_error(&e))?;
        match existing {
            Some(existing) => {
                let stale = i64::try_from(STALE_AFTER.as_secs()).unwrap_or(i64::MAX);
                shard::check_claim(&existing, name, process, jiff::Timestamp::now(), stale)
                    .map_err(|source| RegistrationError::Claim {
                        name: name.clone(),
                        source,
                    })?;
                let claim = |current: &Value| shard::claimed(current, name, process, urls);
                self.objects
                    .update(name, false, &claim)
                    .await
                    .map_err(|e| self.store_error(&e))?;
            }
            None => self
                .objects
                .create(shard::object(name, process, urls))
                .await
                .map_err(|e| self.store_error(&e))?,
        }
        self.heartbeat().await.map_err(|e| self.store_error(&e))
    }

    /// Renews `Ready` and `status.capacity`.
    async fn heartbeat(&self) -> Result<(), ApiError> {
        let capacity = self.registration.capacity(&self.index);
        let beat = |current: &Value| shard::heartbeat(current, capacity, jiff::Timestamp::now());
        self.objects
            .update(&self.registration.name, true, &beat)
            .await
    }

    /// Sets `Ready=False` so that the name is free at once for a restart.
    async fn release(&self) {
        let stop = |current: &Value| shard::stopped(current, jiff::Timestamp::now());
        if let Err(error) = self
            .objects
            .update(&self.registration.name, true, &stop)
            .await
        {
            tracing::warn!(shard = %self.registration.name, %error, "could not mark the shard stopped");
        }
    }

    /// Beats every [`HEARTBEAT`], and when the number of logical clusters changes (so
    /// `status.capacity` follows creations and deletions, at most once per [`CAPACITY_EVERY`]),
    /// until `stop`; a failed beat is logged and retried at the next.
    pub async fn run(self, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(HEARTBEAT);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut logical_clusters = self.index.subscribe();
        let mut reported = None;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return self.release().await,
                _ = ticks.tick() => reported = None,
                change = logical_clusters.recv() => if change.is_none() { return },
            }
            // Only the count matters: the changes queued meanwhile are read now, not one per
            // pass (they hold LogicalClusters, thousands a second during a burst).
            while logical_clusters.try_recv().is_ok() {}
            let count = self.index.logical_cluster_count();
            if reported == Some(count) {
                continue;
            }
            match self.heartbeat().await {
                Ok(()) => reported = Some(count),
                Err(error) => {
                    tracing::warn!(shard = %self.registration.name, %error, "shard heartbeat failed")
                }
            }
            // A burst of workspaces costs at most one write per CAPACITY_EVERY; a change
            // meanwhile waits in the subscription and brings the count up to date after it.
            tokio::select! {
                _ = stop.cancelled() => return self.release().await,
                _ = tokio::time::sleep(CAPACITY_EVERY) => {}
            }
        }
    }
}
