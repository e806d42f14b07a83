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
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::registry::namespaces::KUBERNETES_FINALIZER;
use crate::registry::store::{DeleteOptions, Deleted, Location, RestStore};
use crate::request::LogicalClusterName;
use crate::storage::objects::{CLUSTER_ANNOTATION, ListRequest};

/// How long to wait before looking again at a namespace whose content is still going.
const RETRY_AFTER: Duration = Duration::from_millis(500);

type Key = (LogicalClusterName, String);

fn key_of(namespace: &Value) -> Option<Key> {
    let cluster = LogicalClusterName::parse(meta::annotations(namespace).get(CLUSTER_ANNOTATION)?)?;
    Some((cluster, meta::name(namespace)?.to_string()))
}

/// Runs until `shutdown`; restarts its watch when the store drops it.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let (queue, mut work) = mpsc::unbounded_channel::<Key>();
    let worker_store = store.clone();
    let retry = queue.clone();
    let worker_shutdown = shutdown.clone();
    let worker = tokio::spawn(async move {
        loop {
            let key = tokio::select! {
                _ = worker_shutdown.cancelled() => return,
                key = work.recv() => match key { Some(key) => key, None => return },
            };
            match finish(&worker_store, &key).await {
                Ok(true) => {}
                Ok(false) => requeue(&retry, key),
                Err(error) => {
                    tracing::warn!(cluster = %key.0, namespace = %key.1, %error, "namespace deletion failed, retrying");
                    requeue(&retry, key);
                }
            }
        }
    });
    while !shutdown.is_cancelled() {
        if let Err(error) = watch_namespaces(&store, &queue, &shutdown).await {
            tracing::warn!(%error, "namespace watch ended, restarting");
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
    worker.abort();
}

fn requeue(queue: &mpsc::UnboundedSender<Key>, key: Key) {
    let queue = queue.clone();
    tokio::spawn(async move {
        tokio::time::sleep(RETRY_AFTER).await;
        let _ = queue.send(key);
    });
}

async fn watch_namespaces(
    store: &RestStore,
    queue: &mpsc::UnboundedSender<Key>,
    shutdown: &CancellationToken,
) -> Result<(), ApiError> {
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
            let _ = queue.send(key);
        }
    }
    let mut changes = store.objects().watch(&prefix, page.revision + 1).await?;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            change = changes.next() => match change {
                None => return Err(ApiError::service_unavailable("namespace watch closed")),
                Some(Err(error)) => return Err(error),
                Some(Ok(change)) => {
                    if meta::deletion_timestamp(&change.object).is_some()
                        && let Some(key) = key_of(&change.object)
                    {
                        let _ = queue.send(key);
                    }
                }
            }
        }
    }
}

/// Deletes the namespace's content; when it is all gone, finalizes the namespace. Returns whether the
/// namespace is done (gone or finalized).
async fn finish(store: &RestStore, (cluster, name): &Key) -> Result<bool, ApiError> {
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
        return Ok(false);
    }
    let Some(namespaces) = registry.builtin_type("", "v1", "namespaces") else {
        return Ok(true);
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
        Ok(_) => Ok(true),
        Err(e) if e.code == 404 => Ok(true),
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
