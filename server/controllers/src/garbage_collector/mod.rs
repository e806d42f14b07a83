//! Garbage collection by owner references, as kube-controller-manager's garbage collector does
//! it: an object whose owners are all gone is deleted; an owner deleted with
//! `propagationPolicy: Orphan` waits (finalizer `orphan`) until its dependents no longer point
//! at it; one deleted with `Foreground` waits (finalizer `foregroundDeletion`) until its blocking
//! dependents are gone. This is what makes a host of this server delete a Deployment's children
//! or an operator's objects when their owner goes.
//!
//! One controller for every logical cluster and every type: a single storage watch over the whole
//! key space feeds the [`graph`], which remembers only objects that have owners. A pass reads the
//! owners by name and compares UIDs, so a recreated owner of the same name does not keep stale
//! dependents alive.

mod graph;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::graph::{FOREGROUND_FINALIZER, Graph, Node, ORPHAN_FINALIZER, OwnerRef, Work};
use super::runner::{self, Controller, Pass, Queue};
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::storage::continuation::Continuation;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ChangeType, ListRequest, RawChange};
use kcp_registry::store::{DeleteOptions, Deleted, RestStore};

/// How long an owner waiting for its dependents waits before it is looked at again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// What stored objects that matter to the collector contain (JSON field names as stored).
const OWNER_REFERENCES: &[u8] = b"\"ownerReferences\"";
const DELETION_TIMESTAMP: &[u8] = b"\"deletionTimestamp\"";

/// Objects per page of the initial list.
const PAGE: usize = 500;

/// Runs until `shutdown`.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let collector = GarbageCollector {
        store,
        graph: Arc::new(Mutex::new(Graph::default())),
    };
    runner::run(collector, shutdown).await;
}

struct GarbageCollector {
    store: RestStore,
    graph: Arc<Mutex<Graph>>,
}

/// What a pass found of one owner reference.
enum OwnerState {
    /// Exists and is not waiting for its dependents.
    Solid,
    /// Not there, or a different object (another UID) by that name.
    Gone,
    /// Being deleted in the foreground: its dependents go first.
    WaitingForDependents,
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

impl Controller for GarbageCollector {
    type Key = Work;
    const NAME: &'static str = "garbage-collector";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<Work>) -> Result<(), ApiError> {
        let prefix = format!("{}/", self.store.objects().prefix().trim_end_matches('/'));
        *self.lock() = Graph::default();
        let mut continuation = None;
        let revision = loop {
            let request = ListRequest {
                prefix: &prefix,
                revision: 0,
                limit: PAGE,
                continuation,
            };
            let page = self.store.objects().list(request, &|_| true).await?;
            // The graph starts empty on every (re)start, so observing the list hands every
            // dependent (owners may have gone meanwhile) and every held owner to the queue once.
            for object in &page.items {
                if let Some(cluster) = cluster_of(object) {
                    for work in self.lock().observe(object, cluster) {
                        queue.add(work);
                    }
                }
            }
            match page.continue_token {
                Some(token) => continuation = Some(Continuation::decode(&token)?),
                None => break page.revision,
            }
        };
        // Only what can matter is decoded: objects that have (or had) owner references, objects
        // being deleted (an owner with the orphan or foreground finalizer), and deletions while
        // some object has owners. Every other write passes undecoded.
        let graph = self.graph.clone();
        let wanted = move |raw: &RawChange<'_>| {
            let mentions =
                |bytes: &[u8], what: &[u8]| bytes.windows(what.len()).any(|window| window == what);
            let owned = |bytes: Option<&[u8]>| bytes.is_some_and(|b| mentions(b, OWNER_REFERENCES));
            if raw.deleted {
                owned(raw.previous)
                    || !graph
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_empty()
            } else {
                owned(Some(raw.value))
                    || owned(raw.previous)
                    || mentions(raw.value, DELETION_TIMESTAMP)
            }
        };
        let mut changes = self
            .store
            .objects()
            .watch_where(&prefix, revision + 1, wanted)
            .await?;
        while let Some(change) = changes.next().await {
            let change = change?;
            let Some(cluster) = cluster_of(&change.object) else {
                continue;
            };
            let work = match change.kind {
                ChangeType::Deleted => self.lock().forget(&change.object, cluster),
                _ => self.lock().observe(&change.object, cluster),
            };
            for item in work {
                queue.add(item);
            }
        }
        Err(ApiError::service_unavailable(
            "garbage collector watch closed",
        ))
    }

    async fn reconcile(&self, work: &Work) -> Result<Pass, ApiError> {
        match work {
            Work::Dependent(node) => self.check_dependent(node).await,
            Work::Owner(node) => self.settle_owner(node).await,
        }
    }
}

impl GarbageCollector {
    fn lock(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The served type of `kind` in the group of `api_version`, preferring that exact version
    /// (owner references name a kind, any served version of its group will do to read it).
    fn resolve(
        &self,
        cluster: &LogicalClusterName,
        api_version: &str,
        kind: &str,
    ) -> Option<Arc<ResourceType>> {
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let types = self.store.registry().for_cluster(cluster);
        let mut candidates = types
            .types()
            .iter()
            .filter(|t| t.group == group && t.kind == kind);
        let first = candidates.next()?.clone();
        if first.version == version {
            return Some(first);
        }
        Some(
            candidates
                .find(|t| t.version == version)
                .cloned()
                .unwrap_or(first),
        )
    }

    async fn get(&self, rt: &ResourceType, node: &Node) -> Result<Option<Value>, ApiError> {
        let at = node.location();
        match self.store.get(rt, at, &node.name).await {
            Ok(stored) => Ok(Some(stored.object)),
            Err(error) if error.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn owner_state(
        &self,
        dependent: &Node,
        owner: &OwnerRef,
    ) -> Result<OwnerState, ApiError> {
        let Some(rt) = self.resolve(&dependent.cluster, &owner.api_version, &owner.kind) else {
            // A kind nobody serves (yet): it cannot be told gone, so it holds the dependent.
            return Ok(OwnerState::Solid);
        };
        let namespace = if rt.namespaced {
            match &dependent.namespace {
                Some(namespace) => Some(namespace.clone()),
                // A cluster-scoped object cannot be owned by a namespaced one: leave it alone.
                None => return Ok(OwnerState::Solid),
            }
        } else {
            None
        };
        let node = Node {
            cluster: dependent.cluster.clone(),
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            namespace,
            name: owner.name.clone(),
        };
        let Some(object) = self.get(&rt, &node).await? else {
            return Ok(OwnerState::Gone);
        };
        if meta::uid(&object) != Some(owner.uid.as_str()) {
            return Ok(OwnerState::Gone);
        }
        let foreground = meta::deletion_timestamp(&object).is_some()
            && meta::finalizers(&object)
                .iter()
                .any(|f| f == FOREGROUND_FINALIZER);
        Ok(if foreground {
            OwnerState::WaitingForDependents
        } else {
            OwnerState::Solid
        })
    }

    /// Deletes a dependent none of whose owners is left; drops references to owners that are
    /// gone from one that still has others.
    async fn check_dependent(&self, node: &Node) -> Result<Pass, ApiError> {
        let Some(rt) = self.resolve(&node.cluster, &node.api_version, &node.kind) else {
            return Ok(Pass::Done);
        };
        let Some(current) = self.get(&rt, node).await? else {
            return Ok(Pass::Done);
        };
        if meta::deletion_timestamp(&current).is_some() {
            return Ok(Pass::Done);
        }
        let owners = OwnerRef::all(&current);
        if owners.is_empty() {
            return Ok(Pass::Done);
        }
        let mut solid = 0;
        let mut gone = Vec::new();
        for owner in &owners {
            match self.owner_state(node, owner).await? {
                OwnerState::Solid => solid += 1,
                OwnerState::Gone => gone.push(owner.uid.clone()),
                OwnerState::WaitingForDependents => {}
            }
        }
        let at = node.location();
        if solid == 0 {
            let options = DeleteOptions {
                precondition_uid: meta::uid(&current).map(str::to_string),
                ..DeleteOptions::default()
            };
            tracing::info!(cluster = %node.cluster, kind = %node.kind, namespace = ?node.namespace,
                name = %node.name, "deleting an object whose owners are gone");
            return match self.store.delete(&rt, at, &node.name, &options).await {
                Ok(_) => Ok(Pass::Done),
                Err(error) if matches!(error.code, 404 | 409) => Ok(Pass::Done),
                Err(error) => Err(error),
            };
        }
        if !gone.is_empty() {
            self.drop_owner_references(&rt, node, &gone).await?;
        }
        Ok(Pass::Done)
    }

    async fn drop_owner_references(
        &self,
        rt: &ResourceType,
        node: &Node,
        uids: &[String],
    ) -> Result<(), ApiError> {
        let kept = |current: &Value| {
            let kept: Vec<Value> = meta::owner_references(current)
                .into_iter()
                .filter(|owner| {
                    owner
                        .get("uid")
                        .and_then(Value::as_str)
                        .is_none_or(|uid| !uids.iter().any(|u| u == uid))
                })
                .collect();
            (!kept.is_empty()).then(|| json!(kept))
        };
        self.edit_metadata(rt, node, "ownerReferences", &kept).await
    }

    /// Sets (or, with `None`, removes) one metadata field of `node`, computed from its current
    /// state; an object already gone is fine.
    async fn edit_metadata(
        &self,
        rt: &ResourceType,
        node: &Node,
        field: &str,
        compute: &(dyn Fn(&Value) -> Option<Value> + Sync),
    ) -> Result<(), ApiError> {
        let update = |current: &Value| {
            let mut new = current.clone();
            let value = compute(current);
            let metadata = meta::metadata_mut(&mut new);
            match value {
                Some(value) => metadata.insert(field.to_string(), value),
                None => metadata.remove(field),
            };
            metadata.remove("resourceVersion");
            Ok(new)
        };
        match self
            .store
            .update(rt, node.location(), &node.name, &update, None, false)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.code == 404 => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// An owner held by `orphan` or `foregroundDeletion`: orphans or deletes its dependents,
    /// then lets it go.
    async fn settle_owner(&self, node: &Node) -> Result<Pass, ApiError> {
        let Some(rt) = self.resolve(&node.cluster, &node.api_version, &node.kind) else {
            return Ok(Pass::Done);
        };
        let Some(owner) = self.get(&rt, node).await? else {
            return Ok(Pass::Done);
        };
        let Some(uid) = meta::uid(&owner).map(str::to_string) else {
            return Ok(Pass::Done);
        };
        if meta::deletion_timestamp(&owner).is_none() {
            return Ok(Pass::Done);
        }
        let finalizers = meta::finalizers(&owner);
        let dependents = self.lock().dependents_of(&node.cluster, &uid);
        if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
            for dependent in &dependents {
                if let Some(dependent_type) =
                    self.resolve(&dependent.cluster, &dependent.api_version, &dependent.kind)
                {
                    self.drop_owner_references(
                        &dependent_type,
                        dependent,
                        std::slice::from_ref(&uid),
                    )
                    .await?;
                }
            }
            return self.release(&rt, node, ORPHAN_FINALIZER).await;
        }
        if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
            let mut blocking = 0;
            for dependent in &dependents {
                let Some(dependent_type) =
                    self.resolve(&dependent.cluster, &dependent.api_version, &dependent.kind)
                else {
                    continue;
                };
                let blocks = self
                    .lock()
                    .owners_of(dependent)
                    .iter()
                    .any(|o| o.uid == uid && o.block_owner_deletion);
                let at = dependent.location();
                match self
                    .store
                    .delete(
                        &dependent_type,
                        at,
                        &dependent.name,
                        &DeleteOptions::default(),
                    )
                    .await
                {
                    Ok(Deleted::Gone(_)) => {}
                    Ok(Deleted::Pending(_)) => blocking += usize::from(blocks),
                    Err(error) if error.code == 404 => {}
                    Err(error) => return Err(error),
                }
            }
            if blocking > 0 {
                return Ok(Pass::Again);
            }
            return self.release(&rt, node, FOREGROUND_FINALIZER).await;
        }
        Ok(Pass::Done)
    }

    /// Removes `finalizer` from the owner (the store deletes it when that was the last one).
    async fn release(
        &self,
        rt: &ResourceType,
        node: &Node,
        finalizer: &str,
    ) -> Result<Pass, ApiError> {
        let kept = |current: &Value| {
            let kept: Vec<String> = meta::finalizers(current)
                .into_iter()
                .filter(|f| f != finalizer)
                .collect();
            Some(json!(kept))
        };
        self.edit_metadata(rt, node, "finalizers", &kept).await?;
        Ok(Pass::Done)
    }
}
