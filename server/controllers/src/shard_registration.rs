//! A shard's own `Shard` object in `root`: created at start, then kept up to date every
//! [`HEARTBEAT`] with a `Ready` heartbeat and the shard's capacity (upstream kcp's shards
//! register themselves the same way; the capacity and the heartbeat are ours).
//!
//! The root shard writes the object in its own store. The name is claimed by one process at a
//! time: the object carries the process's identity in an annotation, and a process finding
//! another's identity with a heartbeat younger than [`STALE_AFTER`] refuses to start (see
//! `kcp_tenancy::shard::check_claim`); a stopped or crashed process frees the name by no longer
//! beating, and one that stops gracefully frees it at once (`Ready=False`, so a restart is not
//! refused). The shard's capacity (its logical clusters and `--max-logical-clusters`) is also
//! what the workspace scheduler reads, through [`Registration::capacity`].

use std::sync::Arc;
use std::time::Duration;

use kcp_apimachinery::ApiError;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use kcp_tenancy::shard::{self, Capacity, ClaimError, Urls};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tenancy_index::TenancyIndex;

/// How often a shard renews its heartbeat and capacity.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
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

/// Writes the shard's `Shard` in its own store's `root`.
pub struct Registrar {
    store: RestStore,
    index: Arc<TenancyIndex>,
    shards: Arc<ResourceType>,
    registration: Arc<Registration>,
}

impl Registrar {
    pub fn new(
        store: RestStore,
        index: Arc<TenancyIndex>,
        registration: Arc<Registration>,
    ) -> Result<Registrar, RegistrationError> {
        let shards = store
            .registry()
            .root_type(shard::GROUP, shard::VERSION, shard::RESOURCE)
            .ok_or(RegistrationError::NotServed)?;
        Ok(Registrar {
            store,
            index,
            shards,
            registration,
        })
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
        let root = LogicalClusterName::root();
        let at = Location {
            cluster: &root,
            namespace: None,
        };
        let Registration {
            name,
            process,
            urls,
            ..
        } = &*self.registration;
        match self.store.get(&self.shards, at, name).await {
            Ok(existing) => {
                let stale = i64::try_from(STALE_AFTER.as_secs()).unwrap_or(i64::MAX);
                shard::check_claim(
                    &existing.object,
                    name,
                    process,
                    jiff::Timestamp::now(),
                    stale,
                )
                .map_err(|source| RegistrationError::Claim {
                    name: name.clone(),
                    source,
                })?;
                let claim = |current: &Value| Ok(shard::claimed(current, name, process, urls));
                self.store
                    .update(&self.shards, at, name, &claim, None, false)
                    .await
                    .map_err(|e| self.store_error(&e))?;
            }
            Err(e) if e.code == 404 => {
                self.store
                    .create(&self.shards, at, shard::object(name, process, urls), false)
                    .await
                    .map_err(|e| self.store_error(&e))?;
            }
            Err(e) => return Err(self.store_error(&e)),
        }
        self.heartbeat().await.map_err(|e| self.store_error(&e))
    }

    /// Renews `Ready` and `status.capacity`.
    async fn heartbeat(&self) -> Result<(), ApiError> {
        let root = LogicalClusterName::root();
        let at = Location {
            cluster: &root,
            namespace: None,
        };
        let capacity = self.registration.capacity(&self.index);
        let beat =
            |current: &Value| Ok(shard::heartbeat(current, capacity, jiff::Timestamp::now()));
        self.store
            .update(
                &self.shards,
                at,
                &self.registration.name,
                &beat,
                Some("status"),
                false,
            )
            .await
            .map(|_| ())
    }

    /// Sets `Ready=False` so that the name is free at once for a restart.
    async fn release(&self) {
        let root = LogicalClusterName::root();
        let at = Location {
            cluster: &root,
            namespace: None,
        };
        let stop = |current: &Value| Ok(shard::stopped(current, jiff::Timestamp::now()));
        let released = self
            .store
            .update(
                &self.shards,
                at,
                &self.registration.name,
                &stop,
                Some("status"),
                false,
            )
            .await;
        if let Err(error) = released {
            tracing::warn!(shard = %self.registration.name, %error, "could not mark the shard stopped");
        }
    }

    /// Beats every [`HEARTBEAT`], and whenever the number of logical clusters changes (so
    /// `status.capacity` follows creations and deletions), until `stop`; a failed beat is logged
    /// and retried at the next.
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
        }
    }
}
