//! The other direction of `index-lag` (issue 20): how soon the front-proxy stops routing what is
//! gone. Upstream's index was reported to keep deleted workspaces routable for minutes at scale
//! (kcp #3811, #4073); here a deleted Workspace leaves the index with its watch event.
//!
//! - **Deletion → 403.** The workspaces that became Ready are DELETEd at `--delete-rate` (open
//!   loop, through the root shard); from each DELETE's response, a poller GETs
//!   `/clusters/root:<name>/api/v1/namespaces/default` through the `kcp front-proxy` process every
//!   `--proxy-poll` until it answers 403 ("workspace access not permitted"), and another asks the
//!   in-process index every `--poll` until it stops resolving the path. Lag: DELETE's response →
//!   first 403 (and → unresolvable).
//! - **A shard deregistered.** With `--deregister-shard`, the workspaces that the index places on
//!   the last shard (up to [`KEPT`]) are left out of the deletion; afterwards that shard's `Shard`
//!   object in root is deleted and the same GETs through the proxy are polled until they stop
//!   answering 200 (the proxy answers 503 for a workspace whose shard is gone, or 403): DELETE's
//!   response → every kept workspace refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use serde::Serialize;
use tokio::time::Instant;

use crate::client::Client;
use crate::schedule::{self, Failure, Plan};
use crate::stats::{Latency, PhaseReport};
use crate::workspaces::WorkspaceError;

use super::{Index, IndexLagArgs, Resolve, lock};

/// Workspaces of the deregistered shard kept out of the deletion, at most.
pub const KEPT: usize = 20;

const WORKSPACES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
const SHARDS: &str = "/clusters/root/apis/core.kcp.io/v1alpha1/shards";

/// What the deletion phase found.
#[derive(Debug, Serialize)]
pub struct DeletionReport {
    /// The DELETEs (due time → 200 or 202).
    pub delete: PhaseReport,
    /// Deleted workspaces the proxy then answered 403 for, within `--index-timeout`.
    pub refused: u64,
    /// DELETE's response → the proxy's first 403.
    pub to_403: Option<Latency>,
    /// Deleted workspaces the in-process index stopped resolving.
    pub unresolved: u64,
    /// DELETE's response → the index no longer resolves the path.
    pub to_unresolvable: Option<Latency>,
    pub deregistered: Option<DeregistrationReport>,
}

/// A shard's `Shard` object deleted.
#[derive(Debug, Serialize)]
pub struct DeregistrationReport {
    pub shard: String,
    /// Its workspaces polled through the proxy.
    pub workspaces: u64,
    /// Of those, refused (not 200) within `--index-timeout`.
    pub refused: u64,
    /// DELETE of the Shard's response → each workspace's first answer other than 200.
    pub to_refused: Option<Latency>,
    /// The answers the proxy gave then, by status code.
    pub answers: HashMap<u16, u64>,
}

/// Names → when something happened to them.
type Times = Arc<Mutex<HashMap<String, Instant>>>;

/// Deletes the `ready` workspaces (but the kept ones of the shard to deregister) and times the
/// proxy's 403s, then deregisters that shard.
pub async fn measure(
    client: &Arc<Client>,
    proxy: &Arc<Client>,
    index: &Arc<Index>,
    ready: Vec<String>,
    rate: f64,
    args: &IndexLagArgs,
) -> Result<DeletionReport, WorkspaceError> {
    let (kept, doomed) = keep_for_deregistration(index, ready, args);
    let deleted: Times = Arc::default();
    let refused: Times = Arc::default();
    let unresolved: Times = Arc::default();
    let pollers = [
        spawn_poller(deleted.clone(), refused.clone(), args.proxy_poll, {
            let proxy = proxy.clone();
            move |name| {
                let proxy = proxy.clone();
                async move { answer(&proxy, &name).await == Some(StatusCode::FORBIDDEN) }
            }
        }),
        spawn_poller(deleted.clone(), unresolved.clone(), args.poll, {
            let index = index.clone();
            move |name| {
                let gone = index.resolve(&format!("root:{name}")).is_err();
                async move { gone }
            }
        }),
    ];
    let plan = Plan::exactly(rate, doomed.len() as u64).map_err(crate::load::LoadError::from)?;
    tracing::info!(workspaces = doomed.len(), rate, "delete phase starting");
    let doomed = Arc::new(doomed);
    let run = schedule::drive(&plan, args.drain, |i| {
        let (client, doomed, deleted) = (client.clone(), doomed.clone(), deleted.clone());
        async move {
            let name = doomed
                .get(usize::try_from(i).unwrap_or(usize::MAX))
                .ok_or(Failure::Transport("no such workspace"))?;
            let path = format!("{WORKSPACES}/{name}");
            let reply = client
                .request(Method::DELETE, &path, None)
                .await
                .map_err(|_| Failure::Transport("request"))?;
            if reply.status != StatusCode::OK && reply.status != StatusCode::ACCEPTED {
                return Err(Failure::Status(reply.status.as_u16()));
            }
            lock(&deleted).insert(name.clone(), Instant::now());
            Ok(())
        }
    })
    .await;
    let delete = PhaseReport::of("delete (DELETE -> 200/202)", plan.rate(), &run);
    let deadline = Instant::now() + args.index_timeout;
    let all = |seen: &Times| {
        let count = lock(seen).len();
        count >= lock(&deleted).len()
    };
    while Instant::now() < deadline && !(all(&refused) && all(&unresolved)) {
        tokio::time::sleep(args.poll).await;
    }
    for poller in pollers {
        poller.abort();
    }
    let (to_403, refused) = lags(&deleted, &refused);
    let (to_unresolvable, unresolved) = lags(&deleted, &unresolved);
    let deregistered = match kept {
        Some((shard, names)) => Some(deregister(client, proxy, &shard, names, args).await?),
        None => None,
    };
    Ok(DeletionReport {
        delete,
        refused,
        to_403,
        unresolved,
        to_unresolvable,
        deregistered,
    })
}

/// With `--deregister-shard`: the last shard (by name) that holds any of `ready`, and up to
/// [`KEPT`] of its workspaces, taken out of the rest.
fn keep_for_deregistration(
    index: &Index,
    ready: Vec<String>,
    args: &IndexLagArgs,
) -> (Option<(String, Vec<String>)>, Vec<String>) {
    if !args.deregister_shard {
        return (None, ready);
    }
    let shard_of = |name: &str| {
        index
            .resolve(&format!("root:{name}"))
            .ok()
            .map(|route| route.shard.to_string())
    };
    let Some(shard) = ready.iter().filter_map(|name| shard_of(name)).max() else {
        return (None, ready);
    };
    let (mut kept, mut doomed) = (Vec::new(), Vec::new());
    for name in ready {
        if kept.len() < KEPT && shard_of(&name).as_deref() == Some(shard.as_str()) {
            kept.push(name);
        } else {
            doomed.push(name);
        }
    }
    (Some((shard, kept)), doomed)
}

/// Deletes the `Shard` object and polls `names` through the proxy until each is refused.
async fn deregister(
    client: &Client,
    proxy: &Arc<Client>,
    shard: &str,
    names: Vec<String>,
    args: &IndexLagArgs,
) -> Result<DeregistrationReport, WorkspaceError> {
    tracing::info!(shard, workspaces = names.len(), "deregistering a shard");
    let reply = client
        .request(Method::DELETE, &format!("{SHARDS}/{shard}"), None)
        .await
        .map_err(crate::load::LoadError::from)?;
    let deleted_at = Instant::now();
    if !reply.status.is_success() {
        tracing::warn!(shard, status = %reply.status, "the Shard was not deleted");
    }
    let mut pending = names.clone();
    let mut lags = Vec::new();
    let mut answers: HashMap<u16, u64> = HashMap::new();
    let deadline = deleted_at + args.index_timeout;
    while !pending.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for name in pending {
            match answer(proxy, &name).await {
                Some(StatusCode::OK) | None => still.push(name),
                Some(code) => {
                    lags.push(deleted_at.elapsed());
                    *answers.entry(code.as_u16()).or_default() += 1;
                }
            }
        }
        pending = still;
        tokio::time::sleep(args.proxy_poll).await;
    }
    Ok(DeregistrationReport {
        shard: shard.to_owned(),
        workspaces: names.len() as u64,
        refused: lags.len() as u64,
        to_refused: Latency::of(lags),
        answers,
    })
}

/// The proxy's status for a GET in workspace `root:<name>`, `None` without an answer.
async fn answer(proxy: &Client, name: &str) -> Option<StatusCode> {
    let path = format!("/clusters/root:{name}/api/v1/namespaces/default");
    let reply = proxy.request(Method::GET, &path, None).await.ok()?;
    Some(reply.status)
}

/// Every `every`, checks each name in `from` not yet in `to` with `passed`; records when each
/// first passes.
fn spawn_poller<F, Fut>(
    from: Times,
    to: Times,
    every: Duration,
    passed: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(String) -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    tokio::spawn(async move {
        loop {
            let pending: Vec<String> = {
                let (from, to) = (lock(&from), lock(&to));
                from.keys()
                    .filter(|name| !to.contains_key(*name))
                    .cloned()
                    .collect()
            };
            for name in pending {
                if passed(name.clone()).await {
                    lock(&to).insert(name, Instant::now());
                }
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// `from` → `to` for each name in both, and how many there are.
fn lags(from: &Times, to: &Times) -> (Option<Latency>, u64) {
    let (from, to) = (lock(from), lock(to));
    let lags: Vec<Duration> = to
        .iter()
        .filter_map(|(name, at)| Some(at.saturating_duration_since(*from.get(name)?)))
        .collect();
    let count = lags.len() as u64;
    (Latency::of(lags), count)
}
