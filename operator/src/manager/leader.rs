//! Leader election on the Lease `kcp-operator`, like client-go's leaderelection (which upstream
//! kcp-operator uses through controller-runtime), with one request per renewal.
//!
//! A standby reads the Lease every retry period and takes it over (an update carrying the
//! `resourceVersion` it read) once it is free, released, or was not renewed for the lease
//! duration as measured by the standby's own clock since it last saw the record change, so clock
//! skew does not matter. A missing Lease is created with this process as holder. The leader
//! renews every retry period with one update of the Lease it holds, carrying the held
//! `resourceVersion`: the answer is the proof of leadership (no watchdog read). A 409 Conflict
//! means somebody else wrote the Lease: it is read once, and leadership is lost unless it still
//! names this process. The leader gives up when it could not renew for the renew deadline, so
//! it stops before its lease can run out and a standby never takes over while it still runs.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

use super::options::Timing;
use crate::naming::{FIELD_MANAGER, LEADER_LEASE};

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

/// What one renewal did.
#[derive(Debug)]
pub enum Renewal {
    Renewed,
    /// The request failed; the leader tries again until the renew deadline.
    Failed(kube::Error),
    /// Somebody else edited the Lease, which still names this process: it was read again and
    /// the next renewal carries its new resourceVersion.
    Stale,
    Lost(Lost),
}

/// The Lease record a standby saw last, and when (by its own clock).
#[derive(Debug)]
struct Observed {
    holder: Option<String>,
    renewed: Option<Timestamp>,
    at: Instant,
}

/// One process's part in the election.
pub struct Election {
    leases: Api<Lease>,
    identity: String,
    timing: Timing,
    /// The Lease as this process last wrote it while holding it.
    held: Mutex<Option<Lease>>,
    observed: Mutex<Option<Observed>>,
}

/// `<pod or host name>_<random>`, unique per process like controller-runtime's.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| FIELD_MANAGER.to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

fn params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    }
}

fn whole_seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

impl Election {
    pub fn new(client: Client, namespace: &str, identity: String, timing: Timing) -> Self {
        Self {
            leases: Api::namespaced(client, namespace),
            identity,
            timing,
            held: Mutex::new(None),
            observed: Mutex::new(None),
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn held(&self) -> Option<Lease> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Keeps `lease` as the one this process holds (without managedFields, which an update
    /// must not send back).
    fn hold_lease(&self, lease: Option<Lease>) {
        let lease = lease.map(|mut lease| {
            lease.metadata.managed_fields = None;
            lease
        });
        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = lease;
    }

    /// Resolves once this process holds the lease; failed lease requests are retried.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(error = %crate::controller::error_chain(&error), "leader lease request failed");
                }
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// One attempt: read the Lease, and take it when it is free or ran out. `Ok(true)`: held.
    pub async fn try_acquire(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let Some(lease) = self.leases.get_opt(LEADER_LEASE).await? else {
            let lease = self.record(None, now);
            return match self.leases.create(&params(), &lease).await {
                Ok(created) => {
                    self.hold_lease(Some(created));
                    Ok(true)
                }
                Err(error) if is_conflict(&error) => Ok(false),
                Err(error) => Err(error),
            };
        };
        if !self.may_take(&lease) {
            return Ok(false);
        }
        let taken = self.record(Some(&lease), now);
        match self.leases.replace(LEADER_LEASE, &params(), &taken).await {
            Ok(written) => {
                self.hold_lease(Some(written));
                Ok(true)
            }
            Err(error) if is_conflict(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Whether `lease` (just read) may be taken: free, held by this process, or not renewed for
    /// its duration since this process saw its record change.
    fn may_take(&self, lease: &Lease) -> bool {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.filter(|holder| !holder.is_empty());
        let renewed = spec.renew_time.map(|time| time.0);
        let Some(current) = holder.clone() else {
            return true;
        };
        if current == self.identity {
            return true;
        }
        let duration = spec
            .lease_duration_seconds
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map_or(self.timing.lease_duration, Duration::from_secs);
        let mut observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let changed = observed
            .as_ref()
            .is_none_or(|seen| seen.holder != holder || seen.renewed != renewed);
        if changed {
            *observed = Some(Observed {
                holder,
                renewed,
                at: now,
            });
            return false;
        }
        observed
            .as_ref()
            .is_some_and(|seen| now.duration_since(seen.at) >= duration)
    }

    /// The Lease naming this process as holder at `now`, from the `previous` one if any (its
    /// resourceVersion makes the write conditional).
    fn record(&self, previous: Option<&Lease>, now: Timestamp) -> Lease {
        let spec = previous
            .and_then(|lease| lease.spec.clone())
            .unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let transitions = spec.lease_transitions.unwrap_or(0);
        Lease {
            metadata: ObjectMeta {
                name: Some(LEADER_LEASE.into()),
                resource_version: previous
                    .and_then(|lease| lease.metadata.resource_version.clone()),
                managed_fields: None,
                ..previous
                    .map(|lease| lease.metadata.clone())
                    .unwrap_or_default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(whole_seconds(self.timing.lease_duration)),
                acquire_time: if ours {
                    spec.acquire_time.clone()
                } else {
                    Some(MicroTime(now))
                },
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(if ours || previous.is_none() {
                    transitions
                } else {
                    transitions.saturating_add(1)
                }),
                ..spec
            }),
        }
    }

    /// One renewal: a single update of the held Lease (with its resourceVersion). On a conflict
    /// the Lease is read once: still ours (somebody edited it) keeps leading, else it is lost.
    pub async fn renew(&self) -> Renewal {
        let Some(held) = self.held() else {
            return Renewal::Lost(Lost::Released);
        };
        let mut renewed = held;
        if let Some(spec) = renewed.spec.as_mut() {
            spec.renew_time = Some(MicroTime(Timestamp::now()));
        }
        match self.leases.replace(LEADER_LEASE, &params(), &renewed).await {
            Ok(written) => {
                self.hold_lease(Some(written));
                Renewal::Renewed
            }
            Err(error) if is_conflict(&error) => self.reread().await,
            Err(error) if is_not_found(&error) => Renewal::Lost(Lost::Released),
            Err(error) => Renewal::Failed(error),
        }
    }

    /// After a conflict: whether the Lease still names this process.
    async fn reread(&self) -> Renewal {
        match self.leases.get_opt(LEADER_LEASE).await {
            Ok(Some(lease)) => {
                match lease
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.holder_identity.clone())
                    .filter(|holder| !holder.is_empty())
                {
                    Some(holder) if holder == self.identity => {
                        self.hold_lease(Some(lease));
                        Renewal::Stale
                    }
                    Some(holder) => Renewal::Lost(Lost::TakenOver(holder)),
                    None => Renewal::Lost(Lost::Released),
                }
            }
            Ok(None) => Renewal::Lost(Lost::Released),
            Err(error) => Renewal::Failed(error),
        }
    }

    /// Keeps renewing the lease every retry period; resolves when it is lost or could not be
    /// renewed for the renew deadline.
    pub async fn hold(&self) -> Lost {
        let deadline = self.timing.renew_deadline;
        let mut renewed_at = Instant::now();
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            let Some(left) = (renewed_at + deadline).checked_duration_since(Instant::now()) else {
                return Lost::NotRenewed(deadline);
            };
            match tokio::time::timeout(left, self.renew()).await {
                Err(_) => return Lost::NotRenewed(deadline),
                Ok(Renewal::Renewed) => renewed_at = Instant::now(),
                Ok(Renewal::Failed(error)) => {
                    tracing::warn!(error = %crate::controller::error_chain(&error), "failed to renew the leader lease");
                }
                Ok(Renewal::Stale) => tracing::info!("the leader lease was edited; renewing again"),
                Ok(Renewal::Lost(lost)) => {
                    self.hold_lease(None);
                    return lost;
                }
            }
        }
    }

    /// Gives the lease up (a no-op unless this process holds it): one update that clears the
    /// holder, so a standby takes over at once.
    pub async fn release(&self) {
        let Some(mut lease) = self.held() else {
            return;
        };
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
        }
        match self.leases.replace(LEADER_LEASE, &params(), &lease).await {
            Ok(_) => self.hold_lease(None),
            Err(error) => {
                tracing::warn!(error = %crate::controller::error_chain(&error), "failed to release the leader lease");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;

    type Log = Arc<Mutex<Vec<(String, Value)>>>;

    fn timing() -> Timing {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// A Lease server: a create succeeds while there is no Lease, an update while it carries the
    /// stored resourceVersion (409 otherwise); each write stores the next resourceVersion.
    fn server(stored: Arc<Mutex<Option<Value>>>) -> (Client, Log) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let log = Log::default();
        let seen = log.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let method = request.method().to_string();
                let bytes = request.into_body().collect_bytes().await.expect("body");
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                seen.lock()
                    .expect("lock")
                    .push((method.clone(), body.clone()));
                let mut stored = stored.lock().expect("lock");
                let version = |lease: &Value| lease["metadata"]["resourceVersion"].clone();
                let current = stored.as_ref().map_or(Value::Null, version);
                let writes = match method.as_str() {
                    "POST" => stored.is_none(),
                    "PUT" => stored.is_some() && version(&body) == current,
                    _ => false,
                };
                let (code, answer) = if method == "GET" {
                    stored.clone().map_or_else(
                        || {
                            (
                                404,
                                json!({"kind": "Status", "code": 404, "reason": "NotFound"}),
                            )
                        },
                        |lease| (200, lease),
                    )
                } else if writes {
                    let next = current
                        .as_str()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                        + 1;
                    let mut written = body.clone();
                    written["metadata"]["resourceVersion"] = json!(next.to_string());
                    *stored = Some(written.clone());
                    (200, written)
                } else {
                    (
                        409,
                        json!({"kind": "Status", "code": 409, "reason": "Conflict"}),
                    )
                };
                send.send_response(
                    Response::builder()
                        .status(code)
                        .body(Body::from(serde_json::to_vec(&answer).expect("json")))
                        .expect("response"),
                );
            }
        });
        (Client::new(service, "kcp-operator"), log)
    }

    fn methods(log: &Log) -> Vec<String> {
        std::mem::take(&mut *log.lock().expect("lock"))
            .into_iter()
            .map(|(method, _)| method)
            .collect()
    }

    #[tokio::test]
    async fn each_renewal_is_one_update_with_the_held_resource_version() {
        let stored = Arc::new(Mutex::new(None));
        let (client, log) = server(stored.clone());
        let election = Election::new(client, "kcp-operator", "me".into(), timing());
        assert!(election.try_acquire().await.expect("acquires"));
        assert_eq!(methods(&log), ["GET", "POST"], "a missing Lease is created");
        for round in 1..=3u64 {
            assert!(matches!(election.renew().await, Renewal::Renewed));
            let seen = std::mem::take(&mut *log.lock().expect("lock"));
            assert_eq!(seen.len(), 1, "round {round}: {seen:?}");
            assert_eq!(seen[0].0, "PUT");
            assert_eq!(seen[0].1["metadata"]["resourceVersion"], round.to_string());
            assert_eq!(seen[0].1["spec"]["holderIdentity"], "me");
        }
    }

    #[tokio::test]
    async fn a_conflict_with_another_holder_loses_the_lease() {
        let stored = Arc::new(Mutex::new(None));
        let (client, log) = server(stored.clone());
        let election = Election::new(client, "kcp-operator", "me".into(), timing());
        assert!(election.try_acquire().await.expect("acquires"));
        methods(&log);
        if let Some(lease) = stored.lock().expect("lock").as_mut() {
            lease["spec"]["holderIdentity"] = json!("other");
            lease["metadata"]["resourceVersion"] = json!("40");
        }
        assert!(matches!(
            election.renew().await,
            Renewal::Lost(Lost::TakenOver(holder)) if holder == "other"
        ));
        assert_eq!(methods(&log), ["PUT", "GET"], "the conflict is read once");
    }

    #[tokio::test]
    async fn a_standby_waits_for_a_held_lease_and_release_frees_it() {
        let stored = Arc::new(Mutex::new(None));
        let (client, _) = server(stored.clone());
        let leader = Election::new(client.clone(), "kcp-operator", "leader".into(), timing());
        let standby = Election::new(client, "kcp-operator", "standby".into(), timing());
        assert!(leader.try_acquire().await.expect("acquires"));
        assert!(
            !standby.try_acquire().await.expect("reads"),
            "held and fresh"
        );
        assert!(
            !standby.try_acquire().await.expect("reads"),
            "not yet run out"
        );
        leader.release().await;
        assert!(standby.try_acquire().await.expect("takes over"));
        let lease = stored.lock().expect("lock").clone().expect("stored");
        assert_eq!(lease["spec"]["holderIdentity"], "standby");
        assert_eq!(
            lease["spec"]["leaseTransitions"], 1,
            "a new holder is a transition"
        );
        assert!(matches!(
            leader.renew().await,
            Renewal::Lost(Lost::Released)
        ));
    }

    #[test]
    fn identities_differ_per_process() {
        assert_ne!(identity(), identity());
    }
}
