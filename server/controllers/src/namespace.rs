//! Namespace deletion: once a namespace is marked for deletion, delete everything in it, then remove
//! the `kubernetes` finalizer so the namespace itself goes.
//!
//! The controller watches namespaces of every logical cluster through one storage watch. Content
//! held by its own finalizers keeps the namespace (retried until gone), as in Kubernetes.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::runner::{self, Controller, Pass, Queue};
use kcp_registry::LogicalClusterName;
use kcp_registry::namespaces::KUBERNETES_FINALIZER;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::store::{DeleteOptions, Deleted, Location, RestStore};

/// How long to wait before looking again at a namespace whose content is still going.
const RETRY_AFTER: Duration = Duration::from_millis(500);

type Key = (LogicalClusterName, String);

fn key_of(namespace: &Value) -> Option<Key> {
    let cluster = LogicalClusterName::parse(meta::annotations(namespace).get(CLUSTER_ANNOTATION)?)?;
    Some((cluster, meta::name(namespace)?.to_string()))
}

/// Runs until `shutdown`.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    runner::run(NamespaceDeletion { store }, shutdown).await;
}

struct NamespaceDeletion {
    store: RestStore,
}

impl Controller for NamespaceDeletion {
    type Key = Key;
    const NAME: &'static str = "namespace";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<Key>) -> Result<(), ApiError> {
        watch_namespaces(&self.store, queue).await
    }

    async fn reconcile(&self, key: &Key) -> Result<Pass, ApiError> {
        finish(&self.store, key).await
    }
}

/// Queues every namespace marked for deletion, now and as they come.
async fn watch_namespaces(store: &RestStore, queue: &Queue<Key>) -> Result<(), ApiError> {
    let Some(namespaces) = store.registry().builtin_type("", "v1", "namespaces") else {
        return Ok(());
    };
    let prefix = store.keys(&namespaces).all_clusters().to_string();
    let page = store
        .list(&namespaces, ListRequest::everything(&prefix), &|_| true)
        .await?;
    for namespace in page
        .items
        .iter()
        .filter(|n| meta::deletion_timestamp(n).is_some())
    {
        if let Some(key) = key_of(namespace) {
            queue.add(key);
        }
    }
    let mut changes = store
        .objects()
        .watch_current(&prefix, page.revision + 1)
        .await?;
    while let Some(change) = changes.next().await {
        let change = change?;
        if meta::deletion_timestamp(&change.object).is_some()
            && let Some(key) = key_of(&change.object)
        {
            queue.add(key);
        }
    }
    Err(ApiError::service_unavailable("namespace watch closed"))
}

/// Deletes the namespace's content; when it is all gone, finalizes the namespace.
async fn finish(store: &RestStore, (cluster, name): &Key) -> Result<Pass, ApiError> {
    let registry = store.registry().clone();
    let mut remaining = 0;
    let mut seen_storage = HashSet::new();
    let types = registry.for_cluster(cluster);
    for rt in types.types().iter().filter(|t| t.namespaced) {
        // Types sharing one storage (the two Event APIs) are emptied once.
        if !seen_storage.insert((rt.storage_group.clone(), rt.plural.clone())) {
            continue;
        }
        let prefix = store.keys(rt).scope(cluster, Some(name));
        let page = store
            .list(rt, ListRequest::everything(&prefix), &|_| true)
            .await?;
        for object in page.items {
            let object_name = meta::name(&object).unwrap_or_default().to_string();
            let at = Location {
                cluster,
                namespace: Some(name),
            };
            match store
                .delete(rt, at, &object_name, &DeleteOptions::default())
                .await
            {
                Ok(Deleted::Gone(_)) => {}
                Ok(Deleted::Pending(_)) => remaining += 1,
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    if remaining > 0 {
        return Ok(Pass::Again);
    }
    let Some(namespaces) = registry.builtin_type("", "v1", "namespaces") else {
        return Ok(Pass::Done);
    };
    let at = Location {
        cluster,
        namespace: None,
    };
    let drop_finalizer = |current: &Value| {
        let mut new = current.clone();
        let kept: Vec<Value> = meta_spec_finalizers(current)
            .into_iter()
            .filter(|f| f != KUBERNETES_FINALIZER)
            .map(|f| json!(f))
            .collect();
        new["spec"]["finalizers"] = json!(kept);
        meta::metadata_mut(&mut new).remove("resourceVersion");
        Ok(new)
    };
    match store
        .update(
            &namespaces,
            at,
            name,
            &drop_finalizer,
            Some("finalize"),
            false,
        )
        .await
    {
        Ok(_) | Err(ApiError { code: 404, .. }) => Ok(Pass::Done),
        Err(e) => Err(e),
    }
}

fn meta_spec_finalizers(namespace: &Value) -> Vec<String> {
    namespace
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
