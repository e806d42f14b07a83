//! The status page's own watches, started by every replica (leader or standby) when the process
//! starts: RootShards, Shards, FrontProxies and CacheServers as they are, the operator's
//! certificate Secrets (label `app.kubernetes.io/managed-by=kcp-operator`) reduced to their
//! validity at once, and `events.k8s.io` Events about operator objects. Each watch fills a
//! [`Digest`]: the objects of the last complete list plus what changed since, replaced as a whole
//! when the watch lists again, as kube-runtime's reflector stores do.
//!
//! These are list+watch of kinds the controllers already watch (Secrets, the custom resources)
//! plus Events; the RBAC of `crate::rbac` grants exactly that.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::certificate::CertificateExpiry;
use super::events::EventRecord;
use super::view::Snapshot;
use crate::api::{CacheServer, FrontProxy, RootShard, Shard, VirtualWorkspace};
use crate::controller::Watched;
use crate::manager::health::Phase;
use crate::naming::{FIELD_MANAGER, LABEL_MANAGED_BY};

/// What one watch has seen, keyed by `namespace/name`.
#[derive(Debug)]
pub struct Digest<T> {
    state: Mutex<DigestState<T>>,
}

#[derive(Debug)]
struct DigestState<T> {
    items: BTreeMap<String, T>,
    /// Objects of a list under way (between `Init` and `InitDone`).
    listing: Option<BTreeMap<String, T>>,
    synced: bool,
}

impl<T> Default for Digest<T> {
    fn default() -> Self {
        Self {
            state: Mutex::new(DigestState {
                items: BTreeMap::new(),
                listing: None,
                synced: false,
            }),
        }
    }
}

impl<T: Clone> Digest<T> {
    /// Applies one watch event; `view` turns an object into what is kept (`None`: nothing).
    pub fn apply<K: ResourceExt>(&self, event: watcher::Event<K>, view: impl Fn(&K) -> Option<T>) {
        let key = |object: &K| {
            format!(
                "{}/{}",
                object.namespace().unwrap_or_default(),
                object.name_any()
            )
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Init => state.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(object) => {
                if let (Some(listing), Some(kept)) = (state.listing.as_mut(), view(&object)) {
                    listing.insert(key(&object), kept);
                }
            }
            watcher::Event::InitDone => {
                if let Some(listing) = state.listing.take() {
                    state.items = listing;
                }
                state.synced = true;
            }
            watcher::Event::Apply(object) => match view(&object) {
                Some(kept) => {
                    state.items.insert(key(&object), kept);
                }
                None => {
                    state.items.remove(&key(&object));
                }
            },
            watcher::Event::Delete(object) => {
                state.items.remove(&key(&object));
            }
        }
    }

    pub fn values(&self) -> Vec<T> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.items.values().cloned().collect()
    }

    /// Whether the first list arrived.
    pub fn synced(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .synced
    }
}

/// Every watch of the page.
#[derive(Debug, Default)]
pub struct Caches {
    pub root_shards: Digest<RootShard>,
    pub shards: Digest<Shard>,
    pub front_proxies: Digest<FrontProxy>,
    pub cache_servers: Digest<CacheServer>,
    pub virtual_workspaces: Digest<VirtualWorkspace>,
    pub certificates: Digest<CertificateExpiry>,
    pub events: Digest<EventRecord>,
}

impl Caches {
    /// Starts every watch; they run until `stop` is cancelled.
    pub fn start(client: &Client, stop: &CancellationToken) -> (Arc<Self>, Vec<JoinHandle<()>>) {
        let caches = Arc::new(Self::default());
        let everything = watcher::Config::default();
        let certificates =
            watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={FIELD_MANAGER}"));
        let tasks = vec![
            follow::<RootShard, _>(
                client,
                everything.clone(),
                &caches,
                stop,
                |c| &c.root_shards,
                |o| Some(o.clone()),
            ),
            follow::<Shard, _>(
                client,
                everything.clone(),
                &caches,
                stop,
                |c| &c.shards,
                |o| Some(o.clone()),
            ),
            follow::<FrontProxy, _>(
                client,
                everything.clone(),
                &caches,
                stop,
                |c| &c.front_proxies,
                |o| Some(o.clone()),
            ),
            follow::<CacheServer, _>(
                client,
                everything.clone(),
                &caches,
                stop,
                |c| &c.cache_servers,
                |o| Some(o.clone()),
            ),
            follow::<VirtualWorkspace, _>(
                client,
                everything.clone(),
                &caches,
                stop,
                |c| &c.virtual_workspaces,
                |o| Some(o.clone()),
            ),
            follow::<Secret, _>(
                client,
                certificates,
                &caches,
                stop,
                |c| &c.certificates,
                CertificateExpiry::of_secret,
            ),
            follow::<Event, _>(
                client,
                everything,
                &caches,
                stop,
                |c| &c.events,
                EventRecord::of_event,
            ),
        ];
        (caches, tasks)
    }

    /// What the page shows now, for a replica in `replica`.
    pub fn snapshot(&self, replica: Phase) -> Snapshot {
        Snapshot {
            root_shards: self.root_shards.values(),
            shards: self.shards.values(),
            front_proxies: self.front_proxies.values(),
            cache_servers: self.cache_servers.values(),
            virtual_workspaces: self.virtual_workspaces.values(),
            certificates: self.certificates.values(),
            events: self.events.values(),
            synced: self.root_shards.synced()
                && self.shards.synced()
                && self.front_proxies.synced()
                && self.cache_servers.synced()
                && self.virtual_workspaces.synced()
                && self.certificates.synced()
                && self.events.synced(),
            replica,
        }
    }

    /// The page as HTML at `now`.
    pub fn render(
        &self,
        replica: Phase,
        now: Timestamp,
    ) -> Result<String, super::html::RenderError> {
        super::html::render(&super::view::page(&self.snapshot(replica), now))
    }
}

/// Watches every `K` matching `config` into the digest `pick` chooses, keeping `view` of each.
fn follow<K, T>(
    client: &Client,
    config: watcher::Config,
    caches: &Arc<Caches>,
    stop: &CancellationToken,
    pick: fn(&Caches) -> &Digest<T>,
    view: fn(&K) -> Option<T>,
) -> JoinHandle<()>
where
    K: Watched,
    T: Clone + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let caches = caches.clone();
    let stop = stop.clone();
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(event)) => pick(&caches).apply(event, view),
                    Some(Err(error)) => tracing::debug!(%error, kind = %K::kind(&()), "status page watch failed; retrying"),
                    None => break,
                },
                () = stop.cancelled() => break,
            }
        }
    })
}
