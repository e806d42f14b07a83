//! What the watch cache's integration tests share: ConfigMaps written at random across logical
//! clusters and namespaces, the scopes lists and watches cover (every cluster, one cluster, one
//! namespace), storage's answer at a revision to compare with, asking the cache until it serves
//! (its first read is `Cold`, the second `Starting`), and a store whose watches break on demand
//! (as etcd ends them when the history they need is compacted); and a real etcd of the test's own,
//! which the randomized tests run on besides the embedded store. kube-apiserver's cacher tests
//! share an etcd test server and object helpers the same way (`storage/testing`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use kcp_registry::LogicalClusterName;
use kcp_registry::storage::continuation::Continuation;
use kcp_registry::storage::objects::{ListPage, ListRequest, ObjectRef};
use kcp_registry::storage::{KeyLayout, ObjectStore, ResourceKeys};
use kcp_storage::etcd::{EtcdConfig, EtcdStore};
use kcp_storage::{RangeRequest, RangeResponse, Revision, Storage, StorageError, WatchStream};
use kcp_testing::EtcdProcess;
use kcp_watchcache::NotServed;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

pub const CLUSTERS: [&str; 3] = ["root", "c1", "c2"];
pub const NAMESPACES: [&str; 3] = ["default", "ns1", "ns2"];
pub const NAMES: usize = 12;
/// How long anything the tests wait for may take.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub type Keep = dyn Fn(&Value) -> bool + Sync;

/// A real etcd of the test's own (its own process, ports and data dir), and the store connected to
/// it as the server connects for `--etcd-servers`; the process is killed when this is dropped.
pub struct OwnEtcd {
    pub storage: Arc<dyn Storage>,
    _process: EtcdProcess,
}

impl OwnEtcd {
    /// Starts etcd (`$ETCD_BIN`, else Debian's `etcd-server`) on free loopback ports.
    pub async fn start() -> OwnEtcd {
        let process = EtcdProcess::start(false).await;
        let config = EtcdConfig {
            servers: vec![process.client_url().to_owned()],
            ..EtcdConfig::default()
        };
        OwnEtcd {
            storage: Arc::new(EtcdStore::connect(&config).await.unwrap()),
            _process: process,
        }
    }
}

pub fn configmaps(objects: &ObjectStore) -> ResourceKeys {
    objects.keys("", "configmaps", KeyLayout::BuiltIn)
}

pub fn what(name: &str) -> ObjectRef<'_> {
    ObjectRef {
        group: "",
        resource: "configmaps",
        name,
    }
}

pub fn configmap(namespace: &str, name: &str, tier: &str, value: u64) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"tier": tier}},
        "data": {"v": value.to_string()}})
}

pub fn logical_cluster(name: &str) -> LogicalClusterName {
    LogicalClusterName::parse(name).unwrap()
}

/// One random write of a ConfigMap named `cm-<n>`; conflicts and missing objects are part of the
/// game.
pub async fn random_write(objects: &ObjectStore, rng: &mut StdRng) {
    let keys = configmaps(objects);
    let cluster = logical_cluster(CLUSTERS[rng.random_range(0..3)]);
    let namespace = NAMESPACES[rng.random_range(0..3)];
    let name = format!("cm-{}", rng.random_range(0..NAMES));
    let key = keys.object(&cluster, Some(namespace), &name);
    let tier = if rng.random_bool(0.5) { "a" } else { "b" };
    let object = configmap(namespace, &name, tier, rng.random());
    match rng.random_range(0..3) {
        0 => {
            let _ = objects.create(&key, &object, what(&name)).await;
        }
        1 => {
            if let Ok(Some(current)) = objects.get(&key, what(&name)).await {
                let _ = objects
                    .update(&key, &object, current.revision, what(&name))
                    .await;
            }
        }
        _ => {
            let _ = objects.delete(&key, None, what(&name)).await;
        }
    }
}

/// What a list or watch covers: every logical cluster, one, or one namespace of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    All,
    Cluster(&'static str),
    Namespace(&'static str, &'static str),
}

impl Scope {
    /// A random scope over [`CLUSTERS`] and [`NAMESPACES`].
    pub fn random(rng: &mut StdRng) -> Scope {
        let cluster = CLUSTERS[rng.random_range(0..3)];
        match rng.random_range(0..3) {
            0 => Scope::All,
            1 => Scope::Cluster(cluster),
            _ => Scope::Namespace(cluster, NAMESPACES[rng.random_range(0..3)]),
        }
    }

    /// The storage prefix of the scope.
    pub fn prefix(self, keys: &ResourceKeys) -> String {
        match self {
            Scope::All => keys.all_clusters().to_string(),
            Scope::Cluster(name) => keys.scope(&logical_cluster(name), None),
            Scope::Namespace(name, namespace) => {
                keys.scope(&logical_cluster(name), Some(namespace))
            }
        }
    }
}

/// Asks the cache again while it is not ready to answer (the first read of a type is `Cold`, the
/// second creates the cache, which then fills; a cache listing again is `NotReady`), and returns
/// its first lasting answer.
pub async fn answer<T, F>(mut ask: impl FnMut() -> F) -> Result<T, NotServed>
where
    F: Future<Output = Result<T, NotServed>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match ask().await {
            Err(NotServed::Cold | NotServed::NotReady | NotServed::Behind(_))
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            answer => return answer,
        }
    }
}

/// Asks the cache until it serves; answers that retrying cannot change fail the test.
pub async fn served<T, F>(ask: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, NotServed>>,
{
    answer(ask).await.unwrap_or_else(|error| panic!("{error}"))
}

/// Storage's page at exactly `revision`.
pub async fn storage_page(
    objects: &ObjectStore,
    prefix: &str,
    revision: Revision,
    limit: usize,
    token: Option<&str>,
    keep: &Keep,
) -> ListPage {
    objects
        .list(
            ListRequest {
                prefix,
                revision,
                limit,
                continuation: token.map(|t| Continuation::decode(t).unwrap()),
            },
            keep,
        )
        .await
        .unwrap()
}

/// A store whose watches all end with an error when the test says so, as etcd ends them when the
/// history they need is compacted.
pub struct Breakable {
    inner: Arc<dyn Storage>,
    breaks: tokio::sync::watch::Sender<u64>,
}

impl Breakable {
    /// `inner` with watches that break; `inner`'s own never do.
    pub fn over(inner: Arc<dyn Storage>) -> Arc<Breakable> {
        Arc::new(Breakable {
            inner,
            breaks: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Ends every watch open now; later ones run until the next break.
    pub fn break_watches(&self) {
        self.breaks.send_modify(|n| *n += 1);
    }
}

#[async_trait]
impl Storage for Breakable {
    async fn current_revision(&self) -> kcp_storage::Result<Revision> {
        self.inner.current_revision().await
    }
    async fn get(&self, key: &str) -> kcp_storage::Result<Option<kcp_storage::KeyValue>> {
        self.inner.get(key).await
    }
    async fn range(&self, request: RangeRequest) -> kcp_storage::Result<RangeResponse> {
        self.inner.range(request).await
    }
    async fn create(
        &self,
        key: &str,
        value: bytes::Bytes,
    ) -> kcp_storage::Result<kcp_storage::KeyValue> {
        self.inner.create(key, value).await
    }
    async fn update(
        &self,
        key: &str,
        value: bytes::Bytes,
        expected: Revision,
    ) -> kcp_storage::Result<kcp_storage::KeyValue> {
        self.inner.update(key, value, expected).await
    }
    async fn delete(
        &self,
        key: &str,
        expected: Option<Revision>,
    ) -> kcp_storage::Result<(kcp_storage::KeyValue, Revision)> {
        self.inner.delete(key, expected).await
    }
    async fn watch(&self, prefix: &str, from: Revision) -> kcp_storage::Result<WatchStream> {
        let events = self.inner.watch(prefix, from).await?;
        let mut broken = self.breaks.subscribe();
        broken.mark_unchanged();
        let end = futures::stream::once(async move {
            Err(StorageError::Compacted {
                requested: from,
                compacted: from,
            })
        });
        Ok(Box::pin(
            events
                .take_until(async move { broken.changed().await.ok() })
                .chain(end),
        ))
    }
    async fn compact(&self, revision: Revision) -> kcp_storage::Result<()> {
        self.inner.compact(revision).await
    }
    async fn compacted_revision(&self) -> kcp_storage::Result<Revision> {
        self.inner.compacted_revision().await
    }
    async fn close(&self) -> kcp_storage::Result<()> {
        self.inner.close().await
    }
}
