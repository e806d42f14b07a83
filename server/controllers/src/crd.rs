//! The CRD controller: from CustomResourceDefinitions to served types, in every logical cluster.
//!
//! One storage watch covers the CRDs of all logical clusters. For each cluster that changed it:
//! accepts names (a plural, kind or short name already used by a built-in type or by an older CRD of
//! the same group is a conflict, reported in `NamesAccepted`), publishes the accepted CRDs' types in
//! the registry, and only then marks them `Established`, so a client that sees `Established` can
//! create resources at once. A CRD being deleted first loses all its resources in that cluster, then
//! its cleanup finalizer.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apiextensions::CrdInfo;
use kcp_apimachinery::{ApiError, meta, time};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use kcp_registry::LogicalClusterName;
use kcp_registry::crds::CLEANUP_FINALIZER;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ListRequest};
use kcp_registry::store::RestStore;
use kcp_registry::{ResourceType, custom};

use crate::cleanup;

/// How long to wait before looking again at a cluster whose CRD cleanup is not finished.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The CRDs of every logical cluster, as last seen.
type Definitions = HashMap<LogicalClusterName, BTreeMap<String, Value>>;

/// A CRD as parsed for one generation of its spec: parsing (validation, structural schemas, CEL
/// compilation) is by far the controller's most expensive step, and status writes, which are most
/// of its events, do not change the spec.
#[derive(Clone)]
struct Parsed {
    uid: String,
    generation: i64,
    /// Identifies the spec's content, so identical CRDs in different clusters share types.
    content: u64,
    info: Option<Arc<CrdInfo>>,
}

/// Parsed CRDs by logical cluster and name.
type Cache = HashMap<(LogicalClusterName, String), Parsed>;

fn parse(cache: &mut Cache, cluster: &LogicalClusterName, crd: &Value) -> Parsed {
    let key = (
        cluster.clone(),
        meta::name(crd).unwrap_or_default().to_string(),
    );
    let uid = meta::uid(crd).unwrap_or_default();
    let generation = meta::generation(crd).unwrap_or(0);
    if let Some(parsed) = cache
        .get(&key)
        .filter(|p| p.uid == uid && p.generation == generation)
    {
        return parsed.clone();
    }
    let mut hasher = DefaultHasher::new();
    crd.get("spec").map(Value::to_string).hash(&mut hasher);
    let parsed = Parsed {
        uid: uid.to_string(),
        generation,
        content: hasher.finish(),
        info: CrdInfo::from_crd(crd).ok().map(Arc::new),
    };
    cache.insert(key, parsed.clone());
    parsed
}

fn crd_type(store: &RestStore) -> Result<Arc<ResourceType>, ApiError> {
    store
        .registry()
        .builtin_type("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .ok_or_else(|| ApiError::internal_error("customresourcedefinitions are not registered"))
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

/// Serves the types of every stored CRD. Run before the server accepts requests, so resources of
/// existing CRDs are served from the first request on.
pub(crate) async fn serve_existing(store: &RestStore) -> Result<(), ApiError> {
    load(store).await.map(|_| ())
}

/// Reads every CRD and serves their types; returns the state and the revision read at.
async fn load(store: &RestStore) -> Result<(Definitions, Cache, i64), ApiError> {
    let crds = crd_type(store)?;
    let prefix = store.keys(&crds).all_clusters().to_string();
    let page = store
        .list(&crds, ListRequest::everything(&prefix), &|_| true)
        .await?;
    let mut definitions = Definitions::new();
    for crd in page.items {
        if let (Some(cluster), Some(name)) =
            (cluster_of(&crd), meta::name(&crd).map(str::to_string))
        {
            definitions.entry(cluster).or_default().insert(name, crd);
        }
    }
    let mut cache = Cache::new();
    for (cluster, crds) in &definitions {
        publish(store, cluster, &accept(store, cluster, crds, &mut cache));
    }
    Ok((definitions, cache, page.revision))
}

/// Runs until `shutdown`, restarting its watch when the store drops it.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let (retry, mut retries) = mpsc::unbounded_channel::<LogicalClusterName>();
    while !shutdown.is_cancelled() {
        if let Err(error) = watch(&store, &shutdown, &retry, &mut retries).await {
            tracing::warn!(%error, "CRD watch ended, restarting");
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}

async fn watch(
    store: &RestStore,
    shutdown: &CancellationToken,
    retry: &mpsc::UnboundedSender<LogicalClusterName>,
    retries: &mut mpsc::UnboundedReceiver<LogicalClusterName>,
) -> Result<(), ApiError> {
    let (mut definitions, mut cache, revision) = load(store).await?;
    let clusters: Vec<LogicalClusterName> = definitions.keys().cloned().collect();
    for cluster in clusters {
        reconcile(store, &definitions, &mut cache, &cluster, retry).await;
    }
    let crds = crd_type(store)?;
    let prefix = store.keys(&crds).all_clusters().to_string();
    let mut changes = store.objects().watch_current(&prefix, revision + 1).await?;
    loop {
        let cluster = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            Some(cluster) = retries.recv() => cluster,
            change = changes.next() => match change {
                None => return Err(ApiError::service_unavailable("CRD watch closed")),
                Some(Err(error)) => return Err(error),
                Some(Ok(change)) => {
                    let (Some(cluster), Some(name)) = (cluster_of(&change.object), meta::name(&change.object).map(str::to_string)) else {
                        continue;
                    };
                    let crds = definitions.entry(cluster.clone()).or_default();
                    match change.kind {
                        kcp_registry::storage::objects::ChangeType::Deleted => {
                            crds.remove(&name);
                            cache.remove(&(cluster.clone(), name));
                        }
                        _ => {
                            crds.insert(name, change.object);
                        }
                    }
                    cluster
                }
            },
        };
        reconcile(store, &definitions, &mut cache, &cluster, retry).await;
        if definitions.get(&cluster).is_some_and(BTreeMap::is_empty) {
            definitions.remove(&cluster);
        }
    }
}

/// A CRD with the outcome of name acceptance.
struct Accepted {
    crd: Value,
    parsed: Parsed,
    /// Why the names were not accepted.
    conflict: Option<String>,
}

/// Decides which CRDs of a cluster get their names: built-in names always win, then CRDs that
/// already hold their names (`NamesAccepted` is True), then older CRDs. Like kube's naming
/// controller, an established type keeps its names: `creationTimestamp` has whole seconds, so age
/// alone would let a newer CRD of the same second, whose name sorts first, take them.
fn accept(
    store: &RestStore,
    cluster: &LogicalClusterName,
    crds: &BTreeMap<String, Value>,
    cache: &mut Cache,
) -> Vec<Accepted> {
    let mut ordered: Vec<&Value> = crds.values().collect();
    ordered.sort_by_key(|crd| {
        (
            !holds_names(crd),
            meta::creation_timestamp(crd)
                .unwrap_or_default()
                .to_string(),
            meta::name(crd).unwrap_or_default().to_string(),
        )
    });
    let builtin = store.registry().builtin().clone();
    let mut taken: Vec<(String, String)> = Vec::new();
    for t in builtin.types() {
        taken.push((t.group.clone(), t.plural.clone()));
        taken.push((t.group.clone(), t.kind.to_lowercase()));
        taken.extend(t.short_names.iter().map(|s| (t.group.clone(), s.clone())));
    }
    let mut accepted = Vec::new();
    for crd in ordered {
        let parsed = parse(cache, cluster, crd);
        let conflict = parsed.info.as_ref().and_then(|info| {
            let mut names = vec![
                ("plural", info.plural.clone()),
                ("kind", info.kind.to_lowercase()),
            ];
            names.extend(info.short_names.iter().map(|s| ("short name", s.clone())));
            names
                .iter()
                .find(|(_, n)| taken.contains(&(info.group.clone(), n.clone())))
                .map(|(what, n)| format!("{what} {n:?} is already in use"))
        });
        if let (Some(info), None) = (&parsed.info, &conflict) {
            taken.push((info.group.clone(), info.plural.clone()));
            taken.push((info.group.clone(), info.kind.to_lowercase()));
            taken.extend(
                info.short_names
                    .iter()
                    .map(|s| (info.group.clone(), s.clone())),
            );
        }
        accepted.push(Accepted {
            crd: crd.clone(),
            parsed,
            conflict,
        });
    }
    accepted
}

/// Whether a CRD's names were accepted when its status was last written.
fn holds_names(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("NamesAccepted")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Serves the types of a cluster's accepted CRDs (building them only for content no cluster serves).
fn publish(store: &RestStore, cluster: &LogicalClusterName, accepted: &[Accepted]) {
    let served: Vec<&Accepted> = accepted
        .iter()
        .filter(|a| a.parsed.info.is_some() && a.conflict.is_none())
        .collect();
    let fingerprint = match served.is_empty() {
        true => 0,
        false => {
            let mut hasher = DefaultHasher::new();
            for a in &served {
                a.parsed.content.hash(&mut hasher);
            }
            hasher.finish().max(1)
        }
    };
    store.registry().set_custom_types(cluster, fingerprint, || {
        served
            .iter()
            .filter_map(|a| a.parsed.info.as_deref())
            .flat_map(custom::resource_types)
            .collect()
    });
}

async fn reconcile(
    store: &RestStore,
    definitions: &Definitions,
    cache: &mut Cache,
    cluster: &LogicalClusterName,
    retry: &mpsc::UnboundedSender<LogicalClusterName>,
) {
    let empty = BTreeMap::new();
    let crds = definitions.get(cluster).unwrap_or(&empty);
    let accepted = accept(store, cluster, crds, cache);
    publish(store, cluster, &accepted);
    let mut again = false;
    for a in &accepted {
        let result = if meta::deletion_timestamp(&a.crd).is_some() {
            cleanup(store, cluster, a).await
        } else {
            write_status(store, cluster, a).await.map(|()| true)
        };
        match result {
            Ok(done) => again |= !done,
            Err(error) => {
                tracing::warn!(%cluster, crd = meta::name(&a.crd).unwrap_or_default(), %error, "reconciling CRD failed");
                again = true;
            }
        }
    }
    if again {
        let retry = retry.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move {
            tokio::time::sleep(RETRY_AFTER).await;
            let _ = retry.send(cluster);
        });
    }
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, previous: &Value) -> Value {
    let status = if status { "True" } else { "False" };
    let unchanged = previous
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .filter(|c| c["status"] == status);
    let since = unchanged
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(time::now_rfc3339()));
    json!({"type": kind, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
}

/// The status a CRD should have, given the status it has now. `lastTransitionTime`s carry over
/// unchanged conditions, so a CRD whose status is right yields exactly its status again.
fn desired_status(crd: &Value, info: &CrdInfo, conflict: Option<&str>, previous: &Value) -> Value {
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let (accepted_names, conditions) = match conflict {
        None => (
            names,
            vec![
                condition(
                    "NamesAccepted",
                    true,
                    "NoConflicts",
                    "no conflicts found",
                    previous,
                ),
                condition(
                    "Established",
                    true,
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    previous,
                ),
            ],
        ),
        Some(conflict) => (
            previous
                .get("acceptedNames")
                .cloned()
                .unwrap_or_else(|| json!({"plural": "", "kind": ""})),
            vec![
                condition("NamesAccepted", false, "NameConflict", conflict, previous),
                condition(
                    "Established",
                    false,
                    "NotAccepted",
                    "not all names are accepted",
                    previous,
                ),
            ],
        ),
    };
    let mut stored: Vec<Value> = previous
        .get("storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(version) = info.versions.iter().find(|v| v.storage)
        && !stored.iter().any(|v| v == version.name.as_str())
    {
        stored.push(json!(version.name));
    }
    json!({"acceptedNames": accepted_names, "conditions": conditions, "storedVersions": stored})
}

/// Writes the status a CRD should have. The desired status is computed from the stored object
/// inside the update, never from the controller's possibly older copy, so a burst of events cannot
/// make the controller rewrite statuses in a loop; an unchanged status is not written at all.
async fn write_status(
    store: &RestStore,
    cluster: &LogicalClusterName,
    a: &Accepted,
) -> Result<(), ApiError> {
    let Some(info) = a.parsed.info.as_deref() else {
        return Ok(());
    };
    let conflict = a.conflict.as_deref();
    let cached = a.crd.get("status").cloned().unwrap_or_else(|| json!({}));
    if desired_status(&a.crd, info, conflict, &cached) == cached {
        return Ok(());
    }
    let crds = crd_type(store)?;
    let name = meta::name(&a.crd).unwrap_or_default().to_string();
    let set_status = |object: &mut Value| {
        let previous = object.get("status").cloned().unwrap_or_else(|| json!({}));
        object["status"] = desired_status(object, info, conflict, &previous);
    };
    cleanup::edit_unless_gone(store, &crds, cluster, &name, Some("status"), &set_status).await
}

/// Deletes a terminating CRD's resources, then its finalizer. Returns whether it is done.
async fn cleanup(
    store: &RestStore,
    cluster: &LogicalClusterName,
    a: &Accepted,
) -> Result<bool, ApiError> {
    let name = meta::name(&a.crd).unwrap_or_default().to_string();
    if let Some(rt) = a
        .parsed
        .info
        .as_deref()
        .and_then(|info| custom::resource_types(info).into_iter().next())
        && cleanup::delete_all(store, &rt, cluster).await? > 0
    {
        return Ok(false);
    }
    let crds = crd_type(store)?;
    cleanup::remove_finalizer(store, &crds, cluster, &name, CLEANUP_FINALIZER).await?;
    Ok(true)
}
