//! Which replica of a shard runs the controllers. Several `kcp` replicas can serve one store (the
//! operator runs two by default); requests go to all of them, but two copies of every controller
//! would do every piece of work twice and race each other. With `--enable-leader-election` the
//! replicas compete for a coordination.k8s.io Lease (`--leader-election-namespace`/`-name` in the
//! `system:admin` logical cluster, which every shard has, as upstream's), as kube-controller-manager does: the holder renews it every retry
//! period and runs the controllers; a holder that cannot renew within the renew deadline stops
//! them, and another replica takes the Lease once it has not been renewed for its duration.
//!
//! Only the controllers are elected: the caches that requests read (tenancy index, RBAC) follow
//! the store in every replica.
//!
//! Releases before this one kept the Lease in `root`. During a rolling upgrade an older replica
//! elects itself there and would not see a newer one leading in `system:admin`, so where that
//! older Lease exists in the store a replica leads only while it holds both: it defers to an
//! older replica holding the old Lease, and fences it out by holding the old Lease itself. A store
//! that never had the old Lease gets no object in `root` (it is only renewed, never created).

use std::time::{Duration, Instant};

use jiff::Timestamp;
use kcp_apimachinery::{ApiError, time};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use kcp_rbac::bootstrap::BOOTSTRAP_CLUSTER;
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::store::{Location, RestStore};
use kcp_tenancy::paths::ROOT;

/// Whether and how this replica runs the controllers.
#[derive(Debug, Clone)]
pub enum ControllerMode {
    /// `--run-controllers=false`.
    Off,
    /// The only replica: run them.
    Always,
    /// Run them while holding the Lease.
    Elected(Election),
}

/// The Lease and the timings (kube-controller-manager's defaults).
#[derive(Debug, Clone)]
pub struct Election {
    pub namespace: String,
    pub name: String,
    /// This replica's name in `holderIdentity`.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Election {
    pub fn new(namespace: String, name: String, identity: String) -> Election {
        Election {
            namespace,
            name,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Runs `controllers` (given a token that stops them) as `mode` says, until `shutdown`.
pub async fn run<F, Fut>(
    store: RestStore,
    mode: ControllerMode,
    shutdown: CancellationToken,
    controllers: F,
) where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    let election = match mode {
        ControllerMode::Off => return,
        ControllerMode::Always => return controllers(shutdown).await,
        ControllerMode::Elected(election) => election,
    };
    let Some(leases) = store
        .registry()
        .builtin_type("coordination.k8s.io", "v1", "leases")
    else {
        tracing::error!("leases are not served: the controllers cannot be elected");
        return;
    };
    let lease = Leases {
        current: Lease {
            store: &store,
            rt: &leases,
            election: &election,
            cluster: BOOTSTRAP_CLUSTER,
        },
        older: Lease {
            store: &store,
            rt: &leases,
            election: &election,
            cluster: ROOT,
        },
    };
    while !shutdown.is_cancelled() {
        // Follower: try every retry period until the Lease is ours.
        match lease.try_hold().await {
            Ok(true) => {}
            Ok(false) => {
                sleep_or_shutdown(election.retry_period, &shutdown).await;
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, "reading the controllers' lease failed");
                sleep_or_shutdown(election.retry_period, &shutdown).await;
                continue;
            }
        }
        tracing::info!(identity = %election.identity, lease = %election.name, "leading: starting the controllers");
        let leading = shutdown.child_token();
        let renewing = async {
            let mut renewed = Instant::now();
            loop {
                sleep_or_shutdown(election.retry_period, &shutdown).await;
                if shutdown.is_cancelled() {
                    break;
                }
                match lease.try_hold().await {
                    Ok(true) => renewed = Instant::now(),
                    Ok(false) => break,
                    Err(error) if renewed.elapsed() > election.renew_deadline => {
                        tracing::warn!(%error, "could not renew the controllers' lease in time");
                        break;
                    }
                    Err(_) => {}
                }
            }
            leading.cancel();
        };
        tokio::join!(controllers(leading.clone()), renewing);
        if shutdown.is_cancelled() {
            // Hand over at once instead of after the lease duration (client-go's
            // ReleaseOnCancel): the next replica takes it on its next try.
            if let Err(error) = lease.release().await {
                tracing::warn!(%error, "could not release the controllers' lease");
            }
        } else {
            tracing::warn!(identity = %election.identity, "lost the controllers' lease: controllers stopped");
        }
    }
}

async fn sleep_or_shutdown(period: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(period) => {}
    }
}

/// The Lease in `system:admin` (upstream's `--leader-election-namespace` is a "namespace in
/// system:admin workspace"; `root` exists on the root shard only) and the one older releases
/// kept in `root`.
struct Leases<'a> {
    current: Lease<'a>,
    older: Lease<'a>,
}

impl Leases<'_> {
    /// Takes or renews the Lease, and the older one where it exists; `false` while another
    /// replica holds either.
    async fn try_hold(&self) -> Result<bool, ApiError> {
        if !self.current.try_hold(Missing::Create).await? {
            return Ok(false);
        }
        let older = self.older.try_hold(Missing::Free).await?;
        if !older {
            tracing::info!(lease = %self.current.election.name, "an older replica holds the Lease in root: deferring to it");
        }
        Ok(older)
    }

    async fn release(&self) -> Result<(), ApiError> {
        self.older.release().await?;
        self.current.release().await
    }
}

/// What [`Lease::try_hold`] does when the Lease does not exist.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Create it, held by this replica.
    Create,
    /// Nothing: nobody holds it.
    Free,
}

struct Lease<'a> {
    store: &'a RestStore,
    rt: &'a ResourceType,
    election: &'a Election,
    cluster: &'static str,
}

impl Lease<'_> {
    fn cluster(&self) -> Result<LogicalClusterName, ApiError> {
        LogicalClusterName::parse(self.cluster)
            .ok_or_else(|| ApiError::internal_error("invalid lease cluster name"))
    }

    /// Takes or renews the Lease; `false` while another replica holds it.
    async fn try_hold(&self, missing: Missing) -> Result<bool, ApiError> {
        let cluster = self.cluster()?;
        let at = Location {
            cluster: &cluster,
            namespace: Some(&self.election.namespace),
        };
        let now = time::now_micro_rfc3339();
        let seconds = self.election.lease_duration.as_secs();
        let current = match self.store.get(self.rt, at, &self.election.name).await {
            Ok(stored) => stored.object,
            Err(error) if error.code == 404 && missing == Missing::Free => return Ok(true),
            Err(error) if error.code == 404 => {
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.election.name, "namespace": self.election.namespace},
                    "spec": {"holderIdentity": self.election.identity, "leaseDurationSeconds": seconds,
                        "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
                });
                return match self.store.create(self.rt, at, lease, false).await {
                    Ok(_) => Ok(true),
                    Err(error) if error.code == 409 => Ok(false),
                    Err(error) => Err(error),
                };
            }
            Err(error) => return Err(error),
        };
        let spec = &current["spec"];
        let ours = spec["holderIdentity"] == self.election.identity.as_str();
        if !ours && !expired(spec) {
            return Ok(false);
        }
        let mut next = current.clone();
        next["spec"]["holderIdentity"] = json!(self.election.identity);
        next["spec"]["leaseDurationSeconds"] = json!(seconds);
        next["spec"]["renewTime"] = json!(now);
        if !ours {
            next["spec"]["acquireTime"] = json!(now);
            let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);
            next["spec"]["leaseTransitions"] = json!(transitions + 1);
        }
        // `next` carries the resourceVersion read: the store refuses it (409) when another
        // replica wrote the Lease meanwhile, so only one of them takes it.
        let replace = |_: &Value| Ok(next.clone());
        match self
            .store
            .update(self.rt, at, &self.election.name, &replace, None, false)
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if error.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }
}

impl Lease<'_> {
    /// Gives the Lease up, if it is still ours.
    async fn release(&self) -> Result<(), ApiError> {
        let cluster = self.cluster()?;
        let at = Location {
            cluster: &cluster,
            namespace: Some(&self.election.namespace),
        };
        let identity = self.election.identity.as_str();
        let release = |current: &Value| {
            if current["spec"]["holderIdentity"] != identity {
                return Err(ApiError::conflict(
                    "coordination.k8s.io",
                    "leases",
                    &self.election.name,
                    "held by another replica",
                ));
            }
            let mut next = current.clone();
            next["spec"]["holderIdentity"] = json!("");
            next["spec"]["renewTime"] = json!("1970-01-01T00:00:00.000000Z");
            Ok(next)
        };
        match self
            .store
            .update(self.rt, at, &self.election.name, &release, None, false)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if matches!(error.code, 404 | 409) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// Whether a Lease's holder has not renewed it for its duration.
fn expired(spec: &Value) -> bool {
    let Some(renewed) = spec["renewTime"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok())
    else {
        return true;
    };
    let duration = spec["leaseDurationSeconds"].as_i64().unwrap_or(15);
    Timestamp::now() > renewed + jiff::SignedDuration::from_secs(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_renewed_within_its_duration_is_held() {
        let now = time::now_micro_rfc3339();
        assert!(!expired(
            &json!({"renewTime": now, "leaseDurationSeconds": 15})
        ));
        assert!(expired(
            &json!({"renewTime": "2020-01-01T00:00:00.000000Z", "leaseDurationSeconds": 15})
        ));
        assert!(expired(&json!({})), "a lease never renewed is free");
    }
}
