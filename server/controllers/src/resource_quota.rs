//! The ResourceQuota controller, as kube-controller-manager's `resourcequota` controller: every
//! quota's `status.hard` is its `spec.hard` and `status.used` what the objects of its namespace
//! use of each hard resource (see [`kcp_registry::resourcequotas::usage`]); types the logical
//! cluster does not serve use nothing.
//!
//! How it learns of changes: one storage watch over the whole key space, like the garbage
//! collector's, filtered on the raw key before anything is decoded. The store's write hooks
//! would be cheaper still but only see the writes of this replica, while controllers run on
//! the replica holding the lease and must see every replica's writes; the tenancy index only
//! knows LogicalClusters. The filter keeps the namespaces that have quotas in memory, so a
//! write elsewhere costs a key split and a map lookup, and nothing at all while no quota exists.
//! A namespace with quotas is recounted after any object in it is created or deleted (or a pod,
//! service or claim changes), after its quotas change (quota admission raising `status.used`
//! included, so a charge for a create that then failed is given back), and every five minutes
//! (kube's resync).
//!
//! Usage is only lowered once the quota has not changed for a moment: quota admission charges
//! a create just before the object is written, and a count taken in between would otherwise
//! hand that charge back and let a parallel create overshoot the limit.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta};
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::resourcequotas::quantity::Quantity;
use kcp_registry::resourcequotas::usage::{
    self, ResourceList, measured_type, object_usage, quota_covers, resource_list, scope_selectors,
};
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ChangeType, ListRequest, RawChange};
use kcp_registry::store::{Location, RestStore};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::runner::{self, Controller, Pass, Queue};

/// How long a quota must stay unchanged before its usage may be lowered, and how long a
/// namespace waits before its next pass when it is not done.
const SETTLE: Duration = Duration::from_secs(1);
/// kube-controller-manager's `--resource-quota-sync-period` default.
const RESYNC: Duration = Duration::from_secs(5 * 60);

type Key = (LogicalClusterName, String);

/// Names of the quotas of each namespace that has some, by cluster and namespace.
type Watched = HashMap<String, HashMap<String, BTreeSet<String>>>;

/// Runs until `shutdown`.
pub async fn run(store: RestStore, shutdown: CancellationToken) {
    let Some(quotas) = store.registry().builtin_type("", "v1", "resourcequotas") else {
        return;
    };
    let controller = QuotaController {
        store,
        quotas,
        watched: Arc::new(Mutex::new(Watched::new())),
        settling: Mutex::new(HashMap::new()),
    };
    runner::run(controller, shutdown).await;
}

struct QuotaController {
    store: RestStore,
    quotas: Arc<ResourceType>,
    watched: Arc<Mutex<Watched>>,
    /// Quotas whose usage would go down: the resourceVersion seen and since when.
    settling: Mutex<HashMap<(Key, String), (String, Instant)>>,
}

impl Controller for QuotaController {
    type Key = Key;
    const NAME: &'static str = "resourcequota";
    const RETRY_AFTER: Duration = SETTLE;

    async fn follow(&self, queue: &Queue<Key>) -> Result<(), ApiError> {
        let quota_prefix = self.store.keys(&self.quotas).all_clusters().to_string();
        let page = self
            .store
            .list(
                &self.quotas,
                ListRequest::everything(&quota_prefix),
                &|_| true,
            )
            .await?;
        let mut watched = Watched::new();
        for quota in &page.items {
            if let Some((cluster, namespace, name)) = quota_key(quota) {
                remember(&mut watched, &cluster, &namespace, &name);
                queue.add((cluster, namespace));
            }
        }
        *lock(&self.watched) = watched;
        let root = format!("{}/", self.store.objects().prefix().trim_end_matches('/'));
        let filter = WriteFilter {
            root: root.clone(),
            quota_prefix,
            watched: self.watched.clone(),
        };
        let mut changes = self
            .store
            .objects()
            .watch_where(&root, page.revision + 1, move |raw| filter.wanted(raw))
            .await?;
        let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + RESYNC, RESYNC);
        loop {
            tokio::select! {
                change = changes.next() => {
                    let Some(change) = change else { break };
                    let change = change?;
                    self.observe(&change.object, change.kind, queue);
                }
                _ = resync.tick() => {
                    for key in watched_keys(&lock(&self.watched)) {
                        queue.add(key);
                    }
                }
            }
        }
        Err(ApiError::service_unavailable("resource quota watch closed"))
    }

    async fn reconcile(&self, key: &Key) -> Result<Pass, ApiError> {
        self.recount(key).await
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn quota_key(quota: &Value) -> Option<(LogicalClusterName, String, String)> {
    let cluster = LogicalClusterName::parse(meta::annotations(quota).get(CLUSTER_ANNOTATION)?)?;
    Some((
        cluster,
        meta::namespace(quota)?.to_string(),
        meta::name(quota)?.to_string(),
    ))
}

fn remember(watched: &mut Watched, cluster: &LogicalClusterName, namespace: &str, name: &str) {
    watched
        .entry(cluster.to_string())
        .or_default()
        .entry(namespace.to_string())
        .or_default()
        .insert(name.to_string());
}

fn forget(watched: &mut Watched, cluster: &LogicalClusterName, namespace: &str, name: &str) {
    let Some(namespaces) = watched.get_mut(cluster.as_str()) else {
        return;
    };
    if let Some(names) = namespaces.get_mut(namespace) {
        names.remove(name);
        if names.is_empty() {
            namespaces.remove(namespace);
        }
    }
    if namespaces.is_empty() {
        watched.remove(cluster.as_str());
    }
}

fn watched_keys(watched: &Watched) -> Vec<Key> {
    watched
        .iter()
        .filter_map(|(cluster, namespaces)| {
            let cluster = LogicalClusterName::parse(cluster)?;
            Some(
                namespaces
                    .keys()
                    .map(move |namespace| (cluster.clone(), namespace.clone())),
            )
        })
        .flatten()
        .collect()
}

/// Picks the writes that can change a quota's usage from their raw keys, undecoded.
struct WriteFilter {
    /// `/<prefix>/`: every key starts with it.
    root: String,
    quota_prefix: String,
    watched: Arc<Mutex<Watched>>,
}

impl WriteFilter {
    fn wanted(&self, raw: &RawChange<'_>) -> bool {
        if raw.key.starts_with(&self.quota_prefix) {
            return true;
        }
        let watched = lock(&self.watched);
        if watched.is_empty() {
            return false;
        }
        let Some(location) = KeyLocation::parse(&self.root, raw.key) else {
            return false;
        };
        let Some(namespace) = location.namespace else {
            return false;
        };
        let quota_namespace = watched
            .get(location.cluster)
            .is_some_and(|namespaces| namespaces.contains_key(namespace));
        // Counts change when objects come and go; pods, services and claims also by updates.
        let created_or_deleted = raw.deleted || raw.previous.is_none();
        let measured_on_update = location.group == "core"
            && matches!(
                location.resource,
                "pods" | "services" | "persistentvolumeclaims"
            );
        quota_namespace && (created_or_deleted || measured_on_update)
    }
}

/// Where a storage key points: `<root><group>/<resource>/[customresources/]<cluster>/[<ns>/]<name>`.
struct KeyLocation<'a> {
    group: &'a str,
    resource: &'a str,
    cluster: &'a str,
    namespace: Option<&'a str>,
}

impl<'a> KeyLocation<'a> {
    fn parse(root: &str, key: &'a str) -> Option<KeyLocation<'a>> {
        let mut segments = key.strip_prefix(root)?.split('/');
        let group = segments.next()?;
        let resource = segments.next()?;
        let rest: Vec<&str> = segments.collect();
        let rest = match rest.first() {
            Some(&"customresources") if rest.len() > 2 => &rest[1..],
            _ => &rest[..],
        };
        match rest {
            [cluster, namespace, _name] => Some(KeyLocation {
                group,
                resource,
                cluster,
                namespace: Some(namespace),
            }),
            [cluster, _name] => Some(KeyLocation {
                group,
                resource,
                cluster,
                namespace: None,
            }),
            _ => None,
        }
    }
}

impl QuotaController {
    /// Notes a decoded change: quotas update what is watched, and the namespace is recounted.
    fn observe(&self, object: &Value, kind: ChangeType, queue: &Queue<Key>) {
        let Some(cluster) = meta::annotations(object)
            .get(CLUSTER_ANNOTATION)
            .and_then(|c| LogicalClusterName::parse(c))
        else {
            return;
        };
        let Some(namespace) = meta::namespace(object).map(str::to_string) else {
            return;
        };
        let is_quota = object.get("kind").and_then(Value::as_str) == Some("ResourceQuota")
            && meta::api_version(object) == Some("v1");
        if is_quota {
            let name = meta::name(object).unwrap_or_default();
            let mut watched = lock(&self.watched);
            match kind {
                ChangeType::Deleted => forget(&mut watched, &cluster, &namespace, name),
                _ => remember(&mut watched, &cluster, &namespace, name),
            }
        }
        queue.add((cluster, namespace));
    }

    /// Recomputes the status of every quota of a namespace and writes those that differ.
    async fn recount(&self, key: &Key) -> Result<Pass, ApiError> {
        let (cluster, namespace) = key;
        let at = Location {
            cluster,
            namespace: Some(namespace),
        };
        let prefix = self
            .store
            .keys(&self.quotas)
            .scope(cluster, Some(namespace));
        let quotas = self
            .store
            .list(&self.quotas, ListRequest::everything(&prefix), &|_| true)
            .await?
            .items;
        if quotas.is_empty() {
            lock(&self.settling).retain(|(k, _), _| k != key);
            return Ok(Pass::Done);
        }
        let measured = self.measured_objects(cluster, namespace, &quotas).await?;
        let now = jiff::Timestamp::now().as_second();
        let mut pass = Pass::Done;
        for quota in &quotas {
            let hard = resource_list(quota.pointer("/spec/hard"));
            let used = usage_under(quota, &hard, &measured, now);
            if !self.should_write(key, quota, &hard, &used) {
                pass = Pass::Again;
                continue;
            }
            let status = json!({"hard": usage::to_json(&hard), "used": usage::to_json(&used)});
            let revision = meta::resource_version(quota)
                .unwrap_or_default()
                .to_string();
            let name = meta::name(quota).unwrap_or_default().to_string();
            let set_status = |current: &Value| {
                let mut updated = current.clone();
                updated["status"] = status.clone();
                meta::set_resource_version(&mut updated, &revision);
                Ok(updated)
            };
            match self
                .store
                .update(&self.quotas, at, &name, &set_status, Some("status"), false)
                .await
            {
                Ok(_) => {
                    lock(&self.settling).remove(&(key.clone(), name));
                }
                Err(e) if e.code == 404 => {}
                // Quota admission charged a write meanwhile: count again.
                Err(e) if e.code == 409 => pass = Pass::Again,
                Err(e) => return Err(e),
            }
        }
        Ok(pass)
    }

    /// Whether a quota's status must be written now: it differs, and any usage it lowers has
    /// been stable for [`SETTLE`] (otherwise the quota is noted and looked at again).
    fn should_write(
        &self,
        key: &Key,
        quota: &Value,
        hard: &ResourceList,
        used: &ResourceList,
    ) -> bool {
        let name = meta::name(quota).unwrap_or_default().to_string();
        let status_hard = resource_list(quota.pointer("/status/hard"));
        let status_used = resource_list(quota.pointer("/status/used"));
        let same = |a: &ResourceList, b: &ResourceList| {
            a.len() == b.len() && a.iter().all(|(r, q)| b.get(r) == Some(q))
        };
        let mut settling = lock(&self.settling);
        let settle_key = (key.clone(), name);
        if same(&status_hard, hard) && same(&status_used, used) {
            settling.remove(&settle_key);
            return false;
        }
        let lowers = used
            .iter()
            .any(|(r, q)| status_used.get(r).is_some_and(|current| q < current));
        if !lowers {
            return true;
        }
        let revision = meta::resource_version(quota)
            .unwrap_or_default()
            .to_string();
        match settling.get(&settle_key) {
            Some((seen, since)) if *seen == revision && since.elapsed() >= SETTLE => true,
            Some((seen, _)) if *seen == revision => false,
            _ => {
                settling.insert(settle_key, (revision, Instant::now()));
                false
            }
        }
    }

    /// The objects of every type some quota of the namespace measures, by (group, plural),
    /// read once for all quotas; types the cluster does not serve have none.
    async fn measured_objects(
        &self,
        cluster: &LogicalClusterName,
        namespace: &str,
        quotas: &[Value],
    ) -> Result<Vec<MeasuredType>, ApiError> {
        let wanted: BTreeSet<(String, String)> = quotas
            .iter()
            .flat_map(|quota| resource_list(quota.pointer("/spec/hard")).into_keys())
            .filter_map(|resource| measured_type(&resource))
            .collect();
        let served = self.store.registry().for_cluster(cluster);
        let mut measured = Vec::new();
        for (group, plural) in wanted {
            let Some(rt) = served
                .types()
                .iter()
                .find(|t| t.group == group && t.plural == plural && t.namespaced)
            else {
                continue;
            };
            let prefix = self.store.keys(rt).scope(cluster, Some(namespace));
            let objects = self
                .store
                .list(rt, ListRequest::everything(&prefix), &|_| true)
                .await?
                .items;
            measured.push(MeasuredType {
                group,
                plural,
                objects,
            });
        }
        Ok(measured)
    }
}

/// The objects of one type in the namespace being counted.
struct MeasuredType {
    group: String,
    plural: String,
    objects: Vec<Value>,
}

/// What the objects use of a quota's hard resources (zero where nothing does).
fn usage_under(
    quota: &Value,
    hard: &ResourceList,
    measured: &[MeasuredType],
    now: i64,
) -> ResourceList {
    let names: BTreeSet<String> = hard.keys().cloned().collect();
    let selectors = scope_selectors(quota);
    let mut used: ResourceList = hard.keys().map(|r| (r.clone(), Quantity::ZERO)).collect();
    for measured_type in measured {
        let (group, plural) = (&measured_type.group, &measured_type.plural);
        for object in &measured_type.objects {
            if !quota_covers(&names, &selectors, group, plural, object) {
                continue;
            }
            let mut cost = object_usage(group, plural, object, now);
            cost.retain(|resource, _| names.contains(resource));
            usage::add_all(&mut used, &cost);
        }
    }
    used
}

#[cfg(test)]
mod tests;
