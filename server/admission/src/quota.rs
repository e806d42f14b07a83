//! ResourceQuota admission, as kube-apiserver's `ResourceQuota` plugin
//! (`k8s.io/apiserver/pkg/admission/plugin/resourcequota`): a write that would take a namespace
//! past one of its quotas is refused with kube's 403, otherwise its cost is charged to
//! `status.used` of every quota covering it before the write goes ahead.
//!
//! What a write costs is the change of its object's usage ([`object_usage`]): creates are
//! charged for the new object, updates of services and claims for what grew (a pod's usage
//! only changes with its phase, which gives back and never takes). Quotas are judged by their
//! `status.hard` (what the quota controller last accepted), as in kube, so a quota is enforced
//! once the controller has computed its status. The charge is a
//! compare-and-swap write of the quota's status, retried against the new status when it lost a
//! race; writes to one namespace are charged one at a time in this process (kube serialises
//! them per namespace the same way), so N parallel creates against a quota of N cannot
//! overshoot and seldom retry. Dry runs are checked but charge nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use kcp_apimachinery::{ApiError, meta};
use kcp_registry::admission::Operation;
use kcp_registry::resourcequotas::usage::{
    self, ResourceList, matching_resources, missing_pod_constraints, object_usage, quota_covers,
    resource_list, scope_selectors, subtract_non_negative,
};
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{Location, RestStore};
use serde_json::Value;

use crate::Attributes;

/// How many times a charge that lost a race for a quota's status is computed again.
const CHARGE_ATTEMPTS: usize = 8;

/// Admits one write of a namespaced object against the quotas of its namespace.
pub async fn admit(
    store: &RestStore,
    attrs: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let (Some(namespace), Some(object)) = (attrs.namespace.as_deref(), object) else {
        return Ok(());
    };
    if !is_charged(attrs) {
        return Ok(());
    }
    let Some(quotas_type) = store.registry().builtin_type("", "v1", "resourcequotas") else {
        return Ok(());
    };
    let at = Location {
        cluster: &attrs.cluster,
        namespace: Some(namespace),
    };
    let prefix = store
        .keys(&quotas_type)
        .scope(&attrs.cluster, Some(namespace));
    let namespace_lock = NamespaceLock::acquire(attrs.cluster.as_str(), namespace);
    let _charging = namespace_lock.mutex.lock().await;
    for _ in 0..CHARGE_ATTEMPTS {
        let quotas = store
            .list(&quotas_type, ListRequest::everything(&prefix), &|_| true)
            .await?
            .items;
        let now = now_seconds();
        let charges =
            charges(attrs, object, old, &quotas, now).map_err(|e| forbidden(attrs, object, &e))?;
        if charges.is_empty() || attrs.dry_run {
            return Ok(());
        }
        let mut lost_race = false;
        for charge in &charges {
            let revision = meta::resource_version(charge.quota)
                .unwrap_or_default()
                .to_string();
            let used = usage::to_json(&charge.used);
            let raise = |current: &Value| {
                let mut updated = current.clone();
                updated["status"]["used"] = used.clone();
                meta::set_resource_version(&mut updated, &revision);
                Ok(updated)
            };
            let name = meta::name(charge.quota).unwrap_or_default();
            match store
                .update(&quotas_type, at, name, &raise, Some("status"), false)
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == 409 || e.code == 404 => {
                    lost_race = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if !lost_race {
            return Ok(());
        }
    }
    Err(ApiError::conflict(
        "",
        "resourcequotas",
        "",
        "too many concurrent changes to the namespace's quotas, try again",
    ))
}

/// Whether quota measures this write: creates of anything but events, and updates of the
/// types whose usage an update can change (kube's evaluators' `Handles`).
fn is_charged(attrs: &Attributes) -> bool {
    if attrs.subresource.is_some() || (attrs.group.is_empty() && attrs.resource == "events") {
        return false;
    }
    match attrs.operation {
        Operation::Create => true,
        Operation::Update => {
            attrs.group.is_empty()
                && matches!(
                    attrs.resource.as_str(),
                    "services" | "persistentvolumeclaims"
                )
        }
        Operation::Delete => false,
    }
}

fn now_seconds() -> i64 {
    kcp_apimachinery::time::parse_rfc3339(&kcp_apimachinery::time::now_rfc3339())
        .map_or(0, |t| t.as_second())
}

/// One quota's new usage after this write.
struct Charge<'a> {
    quota: &'a Value,
    used: ResourceList,
}

/// What the write costs under each quota covering it, or why it may not be admitted (the
/// reason kube gives, without the object prefix). Quotas it costs nothing under are left out.
fn charges<'a>(
    attrs: &Attributes,
    object: &Value,
    old: Option<&Value>,
    quotas: &'a [Value],
    now: i64,
) -> Result<Vec<Charge<'a>>, String> {
    let (group, plural) = (attrs.group.as_str(), attrs.resource.as_str());
    let mut covering = Vec::new();
    for quota in quotas {
        let hard = resource_list(quota.pointer("/status/hard"));
        let names: BTreeSet<String> = hard.keys().cloned().collect();
        let selectors = scope_selectors(quota);
        if !quota_covers(&names, &selectors, group, plural, object) {
            continue;
        }
        let quota_name = meta::name(quota).unwrap_or_default();
        let restricted = matching_resources(group, plural, &names);
        if group.is_empty() && plural == "pods" {
            let missing = missing_pod_constraints(object, &restricted);
            if !missing.is_empty() {
                return Err(format!(
                    "failed quota: {quota_name}: must specify {}",
                    describe_missing(&missing)
                ));
            }
        }
        let used = resource_list(quota.pointer("/status/used"));
        if restricted.iter().any(|r| !used.contains_key(r)) {
            let mut names = restricted.clone();
            names.sort();
            return Err(format!(
                "status unknown for quota: {quota_name}, resources: {}",
                names.join(",")
            ));
        }
        let old_covered = old.is_some_and(|old| {
            meta::resource_version(old).is_some_and(|rv| !rv.is_empty())
                && quota_covers(&names, &selectors, group, plural, old)
        });
        covering.push((quota, hard, used, old_covered));
    }
    if covering.is_empty() {
        return Ok(Vec::new());
    }
    let input = object_usage(group, plural, object, now);
    let negative: Vec<&String> = input
        .iter()
        .filter(|(_, q)| q.is_negative())
        .map(|(r, _)| r)
        .collect();
    if !negative.is_empty() {
        let names: Vec<&str> = negative.iter().map(|r| r.as_str()).collect();
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            names.join(",")
        ));
    }
    let growth = old
        .filter(|_| attrs.operation == Operation::Update)
        .map(|old| subtract_non_negative(&input, &object_usage(group, plural, old, now)));
    let mut charges = Vec::new();
    for (quota, hard, used, old_covered) in covering {
        let delta = match (&growth, old_covered) {
            (Some(growth), true) => growth,
            _ => &input,
        };
        let requested: ResourceList = delta
            .iter()
            .filter(|(r, q)| hard.contains_key(*r) && !q.is_zero())
            .map(|(r, q)| (r.clone(), *q))
            .collect();
        if requested.is_empty() {
            continue;
        }
        let mut new_used = used.clone();
        usage::add_all(&mut new_used, &requested);
        let exceeded: Vec<&String> = requested
            .keys()
            .filter(|r| matches!((new_used.get(*r), hard.get(*r)), (Some(n), Some(h)) if n > h))
            .collect();
        if !exceeded.is_empty() {
            let show = |list: &ResourceList| {
                exceeded
                    .iter()
                    .filter_map(|r| list.get(*r).map(|q| format!("{r}={q}")))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            return Err(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                meta::name(quota).unwrap_or_default(),
                show(&requested),
                show(&used),
                show(&hard)
            ));
        }
        charges.push(Charge {
            quota,
            used: new_used,
        });
    }
    Ok(charges)
}

/// `limits.cpu for: a,b; requests.cpu for: b`.
fn describe_missing(missing: &BTreeMap<String, BTreeSet<String>>) -> String {
    missing
        .iter()
        .map(|(resource, containers)| {
            let names: Vec<&str> = containers.iter().map(String::as_str).collect();
            format!("{resource} for: {}", names.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// kube's `admission.NewForbidden`: named after the object (its generateName before it has a
/// name, `Unknown` without either).
fn forbidden(attrs: &Attributes, object: &Value, reason: &str) -> ApiError {
    let name = [
        attrs.name.as_str(),
        meta::name(object).unwrap_or_default(),
        meta::generate_name(object).unwrap_or_default(),
    ]
    .into_iter()
    .find(|n| !n.is_empty())
    .unwrap_or("Unknown");
    ApiError::forbidden(&attrs.group, &attrs.resource, name, reason)
}

/// The lock that charges one namespace's writes one at a time; dropped from the table when
/// the last writer lets go, so idle namespaces cost nothing.
struct NamespaceLock {
    key: (String, String),
    mutex: Arc<tokio::sync::Mutex<()>>,
}

type LockTable = Mutex<HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>>;

static LOCKS: LazyLock<LockTable> = LazyLock::new(|| Mutex::new(HashMap::new()));

impl NamespaceLock {
    fn acquire(cluster: &str, namespace: &str) -> NamespaceLock {
        let key = (cluster.to_string(), namespace.to_string());
        let mut table = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
        let mutex = table.entry(key.clone()).or_default().clone();
        NamespaceLock { key, mutex }
    }
}

impl Drop for NamespaceLock {
    fn drop(&mut self) {
        let mut table = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
        // The table's reference and ours: nobody else waits for this namespace.
        if Arc::strong_count(&self.mutex) == 2 {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests;
