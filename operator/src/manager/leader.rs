//! Leader election on the Lease `kcp-operator` with kube-lease-manager.
//!
//! kube-lease-manager acquires the lease (a standby waits until the holder's lease runs out or
//! is released) and renews it: the leader renews every retry period (its `grace` is the lease
//! duration minus the retry period). It reports a lost lease only once it can read the Lease
//! again, so a watchdog beside it reads the Lease every retry period and gives up when the
//! lease was not renewed for the renew deadline (measured from the `renewTime` the leader wrote
//! with its own clock) or names another holder, like controller-runtime: the leader stops before
//! its lease can run out, and a standby never takes over while the old leader still runs.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};

use super::options::Timing;
use crate::naming::LEADER_LEASE;

/// Why this process stopped leading.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Lost {
    #[error("the lease is held by {0:?}")]
    TakenOver(String),
    #[error("the lease was released")]
    Released,
    #[error("the lease could not be renewed for {0:?}")]
    NotRenewed(Duration),
}

/// One process's part in the election.
pub struct Election {
    manager: LeaseManager,
    leases: Api<Lease>,
    identity: String,
    timing: Timing,
}

/// `<pod or host name>_<random>`, unique per process like controller-runtime's.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| crate::naming::FIELD_MANAGER.to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

impl Election {
    /// Makes sure the Lease exists in `namespace` (creating it when missing).
    pub async fn new(
        client: Client,
        namespace: &str,
        identity: String,
        timing: Timing,
    ) -> Result<Self, LeaseManagerError> {
        let params = LeaseParams::new(
            identity.clone(),
            timing.lease_duration.as_secs(),
            timing.grace_seconds(),
        );
        let manager = LeaseManager::new(
            client.clone(),
            LEADER_LEASE,
            namespace,
            params,
            LeaseCreateMode::AutoCreate,
        )
        .await?;
        Ok(Self {
            manager,
            leases: Api::namespaced(client, namespace),
            identity,
            timing,
        })
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Resolves once this process holds the lease; failed lease requests are retried.
    pub async fn acquire(&self) {
        loop {
            match self.manager.changed().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => self.failed(&error).await,
            }
        }
    }

    /// Keeps renewing the lease; resolves when it is lost.
    pub async fn hold(&self) -> Lost {
        let renew = async {
            loop {
                match self.manager.changed().await {
                    Ok(true) => {}
                    Ok(false) => return Lost::Released,
                    Err(error) => self.failed(&error).await,
                }
            }
        };
        tokio::select! {
            lost = renew => lost,
            lost = self.watchdog() => lost,
        }
    }

    /// Gives the lease up (a no-op when another process holds it).
    pub async fn release(&self) {
        if let Err(error) = self.manager.release().await {
            tracing::warn!(error = %crate::controller::error_chain(&error), "failed to release the leader lease");
        }
    }

    async fn failed(&self, error: &LeaseManagerError) {
        tracing::warn!(error = %crate::controller::error_chain(error), "leader lease request failed");
        tokio::time::sleep(self.timing.retry_period).await;
    }

    /// Reads the Lease every retry period; resolves when it names another holder or was not
    /// renewed for the renew deadline.
    async fn watchdog(&self) -> Lost {
        let deadline = self.timing.renew_deadline;
        let mut valid_until = after(Timestamp::now(), deadline);
        loop {
            let left = valid_until.duration_since(Timestamp::now());
            let Ok(left) = Duration::try_from(left) else {
                return Lost::NotRenewed(deadline);
            };
            let read = async {
                tokio::time::sleep(self.timing.retry_period).await;
                tokio::time::timeout(self.timing.retry_period, self.leases.get(LEADER_LEASE)).await
            };
            match tokio::time::timeout(left, read).await {
                Err(_) => return Lost::NotRenewed(deadline),
                Ok(Err(_)) => tracing::warn!("reading the leader lease timed out"),
                Ok(Ok(Err(error))) => {
                    tracing::warn!(%error, "failed to read the leader lease");
                }
                Ok(Ok(Ok(lease))) => match held_until(&lease, &self.identity, deadline) {
                    Ok(Some(until)) => valid_until = valid_until.max(until),
                    Ok(None) => {}
                    Err(lost) => return lost,
                },
            }
        }
    }
}

fn after(time: Timestamp, duration: Duration) -> Timestamp {
    SignedDuration::try_from(duration)
        .ok()
        .and_then(|duration| time.checked_add(duration).ok())
        .unwrap_or(time)
}

/// Until when `lease` lets `identity` keep leading: its last renewal plus the renew deadline
/// (`None` without a renewal time), or why it is lost.
pub fn held_until(
    lease: &Lease,
    identity: &str,
    renew_deadline: Duration,
) -> Result<Option<Timestamp>, Lost> {
    let spec = lease.spec.as_ref();
    match spec.and_then(|spec| spec.holder_identity.as_deref()) {
        Some(holder) if holder == identity => Ok(spec
            .and_then(|spec| spec.renew_time.as_ref())
            .map(|renewed| after(renewed.0, renew_deadline))),
        Some(holder) => Err(Lost::TakenOver(holder.to_owned())),
        None => Err(Lost::Released),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    fn lease(holder: Option<&str>, renewed: Option<Timestamp>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed.map(MicroTime),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn held_until_the_renew_deadline() {
        let renewed: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let deadline = Duration::from_secs(10);
        assert_eq!(
            held_until(&lease(Some("me"), Some(renewed)), "me", deadline),
            Ok(Some("2026-01-01T00:00:10Z".parse().expect("time")))
        );
        assert_eq!(
            held_until(&lease(Some("me"), None), "me", deadline),
            Ok(None)
        );
        assert_eq!(
            held_until(&lease(Some("other"), Some(renewed)), "me", deadline),
            Err(Lost::TakenOver("other".into()))
        );
        assert_eq!(
            held_until(&lease(None, None), "me", deadline),
            Err(Lost::Released)
        );
        assert_eq!(
            held_until(&Lease::default(), "me", deadline),
            Err(Lost::Released)
        );
    }

    #[test]
    fn identities_differ_per_process() {
        assert_ne!(identity(), identity());
    }
}
