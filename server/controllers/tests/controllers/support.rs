//! What every controller test needs: a RestStore over a fresh in-memory store, controllers that
//! stop when the test ends, and waiting for an outcome with a deadline instead of sleeping.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcp_apimachinery::ApiError;
use kcp_registry::storage::ObjectStore;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, Registry, ResourceType};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// How long a controller may take to bring about what a test waits for. Generous for a loaded
/// machine; a controller that works needs milliseconds.
pub const DEADLINE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

/// A RestStore over a new, empty in-memory store with the built-in types.
pub async fn store() -> RestStore {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    RestStore::new(
        ObjectStore::new(storage, "/registry"),
        Arc::new(Registry::new()),
    )
}

/// Stops the controllers it started when dropped (at the end of the test, pass or fail).
pub struct Controllers(CancellationToken);

impl Controllers {
    pub fn new() -> Controllers {
        Controllers(CancellationToken::new())
    }

    /// Runs a controller task until the test ends.
    pub fn start<F>(&self, run: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(run(self.0.clone()));
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Polls `check` until it returns `Ok`, failing the test with the last `Err` after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(last) => last,
        };
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: not within {DEADLINE:?}; last seen: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

pub fn builtin(store: &RestStore, group: &str, version: &str, plural: &str) -> Arc<ResourceType> {
    store
        .registry()
        .builtin_type(group, version, plural)
        .unwrap_or_else(|| panic!("{plural}.{group} is not built in"))
}

pub fn cluster(name: &str) -> LogicalClusterName {
    LogicalClusterName::parse(name).unwrap()
}

pub fn at<'a>(cluster: &'a LogicalClusterName, namespace: Option<&'a str>) -> Location<'a> {
    Location { cluster, namespace }
}

/// The object, or the error as text (for `eventually`).
pub async fn get(
    store: &RestStore,
    rt: &ResourceType,
    at: Location<'_>,
    name: &str,
) -> Result<Value, ApiError> {
    store.get(rt, at, name).await.map(|stored| stored.object)
}

/// `Ok` once the object is gone (404), its current state as the error until then.
pub async fn absent(
    store: &RestStore,
    rt: &ResourceType,
    at: Location<'_>,
    name: &str,
) -> Result<(), String> {
    match get(store, rt, at, name).await {
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(format!("{e:?}")),
        Ok(object) => Err(object.to_string()),
    }
}

pub async fn create_namespace(
    store: &RestStore,
    cluster: &LogicalClusterName,
    name: &str,
) -> Value {
    let namespaces = builtin(store, "", "v1", "namespaces");
    store
        .create(
            &namespaces,
            at(cluster, None),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            false,
        )
        .await
        .unwrap()
}

/// The names of the objects of a type in a cluster (and namespace).
pub async fn names(
    store: &RestStore,
    rt: &ResourceType,
    cluster: &LogicalClusterName,
    namespace: Option<&str>,
) -> Vec<String> {
    let prefix = store.keys(rt).scope(cluster, namespace);
    let page = store
        .list(
            rt,
            kcp_registry::storage::objects::ListRequest::everything(&prefix),
            &|_| true,
        )
        .await
        .unwrap();
    page.items
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}
