//! `/metrics`: the server's Prometheus metrics in the OpenMetrics text format, for what
//! `kubectl get --raw /metrics` and a Prometheus scrape read from kube-apiserver.
//!
//! So far the shared watch cache (issue 17): per cached type, what it holds and costs, and the
//! watchers it serves, under kube's names where kube has the metric
//! (`apiserver_watch_cache_resource_version`, `apiserver_terminated_watchers_total`) and `kcp_`
//! names for what kube does not count (objects and bytes held, events kept, watchers served,
//! caches released for being idle: `kcp_watch_cache_released_total`),
//! plus `process_resident_memory_bytes` as Go's process collector reports it. Built on each
//! scrape from the caches' own counts, so nothing on the request path updates a metric.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use kcp_registry::storage::ResourceKeys;
use kcp_watchcache::{CacheStats, WatchCaches};

use super::response::{self, Body};

/// The OpenMetrics text format's media type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    group: String,
    resource: String,
}

fn labels(stats: &CacheStats) -> TypeLabels {
    root_labels(&stats.root)
}

/// The labels of the type whose storage root is `root`.
fn root_labels(root: &str) -> TypeLabels {
    let (group, resource) = ResourceKeys::group_and_resource(root).unwrap_or(("", root));
    TypeLabels {
        group: group.to_string(),
        resource: resource.to_string(),
    }
}

/// A gauge per cached type, set from one figure of its stats.
fn per_type(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    stats: &[CacheStats],
    value: impl Fn(&CacheStats) -> i64,
) {
    let family = Family::<TypeLabels, Gauge>::default();
    for s in stats {
        family.get_or_create(&labels(s)).set(value(s));
    }
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, family),
        None => registry.register(name, help, family),
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The metrics of the watch caches and the process, encoded.
fn encode(caches: &WatchCaches) -> Result<String, std::fmt::Error> {
    let stats = caches.stats();
    let mut registry = Registry::default();
    per_type(
        &mut registry,
        "kcp_watch_cache_objects",
        "Objects held by the type's watch cache (all logical clusters)",
        None,
        &stats,
        |s| count(s.objects),
    );
    per_type(
        &mut registry,
        "kcp_watch_cache_object",
        "Bytes of the objects held (keys, JSON and the encodings kept beside it)",
        Some(Unit::Bytes),
        &stats,
        |s| count(s.object_bytes),
    );
    per_type(
        &mut registry,
        "kcp_watch_cache_history_events",
        "Recent events kept for watches that start from a revision",
        None,
        &stats,
        |s| count(s.history_events),
    );
    per_type(
        &mut registry,
        "kcp_watch_cache_history",
        "Bytes of the objects the kept events hold (mostly shared with the objects held)",
        Some(Unit::Bytes),
        &stats,
        |s| count(s.history_bytes),
    );
    per_type(
        &mut registry,
        "kcp_watch_cache_watchers",
        "Watches the type's watch cache serves",
        None,
        &stats,
        |s| count(s.watchers),
    );
    per_type(
        &mut registry,
        "apiserver_watch_cache_resource_version",
        "The revision the type's watch cache holds the objects at",
        None,
        &stats,
        |s| s.revision,
    );
    let terminated = Family::<TypeLabels, Counter>::default();
    for s in &stats {
        terminated.get_or_create(&labels(s)).inc_by(s.cut_watchers);
    }
    registry.register(
        "apiserver_terminated_watchers",
        "Watchers closed because they did not read their events fast enough",
        terminated,
    );
    let released = Family::<TypeLabels, Counter>::default();
    for (root, times) in caches.released() {
        released.get_or_create(&root_labels(&root)).inc_by(times);
    }
    registry.register(
        "kcp_watch_cache_released",
        "Times the type's watch cache was released after 10 minutes without reads or watchers",
        released,
    );
    if let Some(rss) = resident_memory() {
        let gauge = Gauge::<i64>::default();
        gauge.set(rss);
        registry.register_with_unit(
            "process_resident_memory",
            "Resident memory size",
            Unit::Bytes,
            gauge,
        );
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

/// The process's resident memory (`VmRSS` of `/proc/self/status`), where Linux tells it.
fn resident_memory() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: i64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

pub fn serve(caches: &WatchCaches) -> http::Response<Body> {
    match encode(caches) {
        Ok(text) => response::bytes(200, OPENMETRICS, text.into_bytes()),
        Err(error) => response::error(&kcp_apimachinery::ApiError::internal_error(&format!(
            "encoding metrics: {error}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_on_linux() {
        assert!(resident_memory().is_some_and(|rss| rss > 0));
    }

    #[tokio::test]
    async fn no_cache_means_only_the_process_figures() {
        let storage = kcp_storage::open_in_memory().await.unwrap();
        let objects = kcp_registry::storage::ObjectStore::new(storage, "/registry");
        let shutdown = tokio_util::sync::CancellationToken::new();
        let caches = WatchCaches::new(objects, &shutdown);
        let text = encode(&caches).unwrap();
        assert!(text.contains("process_resident_memory_bytes "), "{text}");
        assert!(!text.contains("kcp_watch_cache"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
