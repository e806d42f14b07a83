//! The proxy's `/metrics`, in the OpenMetrics text format the API server's `/metrics` uses
//! (prometheus-client): requests by verb and code, the time to the backend's response head by
//! verb, backend errors, and the size of the index. No label names a workspace, a user or a
//! shard: with thousands of workspaces, per-workspace series would cost more than the proxy.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use http::Method;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::index::IndexCounts;

/// The OpenMetrics text format's media type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

// Label values are static strings: counting a request allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: &'static str,
}

type LatencyFamily = Family<VerbLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 100 µs to ~13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Every metric of the proxy, registered once.
pub struct ProxyMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    backend_errors: Counter,
    index: [Gauge<i64, std::sync::atomic::AtomicI64>; 3],
}

impl Default for ProxyMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "kcp_front_proxy_requests",
            "Requests answered, by verb and HTTP code",
            requests.clone(),
        );
        let latency: LatencyFamily = Family::new_with_constructor(latency_histogram);
        registry.register(
            "kcp_front_proxy_request_duration_seconds",
            "Time from a request's arrival to its response head (the backend's or the proxy's own), by verb",
            latency.clone(),
        );
        let backend_errors = Counter::<u64, AtomicU64>::default();
        registry.register(
            "kcp_front_proxy_backend_errors",
            "Requests the backend did not answer (unreachable, TLS refused, connection lost)",
            backend_errors.clone(),
        );
        let index: [Gauge<i64, std::sync::atomic::AtomicI64>; 3] = Default::default();
        for (gauge, (name, help)) in index.iter().zip([
            ("kcp_front_proxy_index_shards", "Shards the index watches"),
            (
                "kcp_front_proxy_index_logical_clusters",
                "Logical clusters the index knows",
            ),
            (
                "kcp_front_proxy_index_workspaces",
                "Workspaces the index knows",
            ),
        ]) {
            registry.register(name, help, gauge.clone());
        }
        ProxyMetrics {
            registry,
            requests,
            latency,
            backend_errors,
            index,
        }
    }
}

/// The verb of a request as a label: the method, `WATCH` for `?watch=true`, and `OTHER` for a
/// method HTTP does not define (so that clients cannot mint label values).
pub fn verb(method: &Method, query: Option<&str>) -> &'static str {
    if crate::forward::query_flag(query, "watch") {
        return "WATCH";
    }
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "OTHER",
    }
}

impl ProxyMetrics {
    /// Counts one answered request.
    pub fn observe(&self, verb: &'static str, code: u16, elapsed: Duration) {
        self.latency
            .get_or_create(&VerbLabels { verb })
            .observe(elapsed.as_secs_f64());
        self.requests
            .get_or_create(&RequestLabels { verb, code })
            .inc();
    }

    /// Counts one request its backend did not answer.
    pub fn backend_error(&self) {
        self.backend_errors.inc();
    }

    /// The metrics as text, with the index's current size when there is an index.
    pub fn encode(&self, index: Option<IndexCounts>) -> Result<String, std::fmt::Error> {
        if let Some(size) = index {
            for (gauge, value) in
                self.index
                    .iter()
                    .zip([size.shards, size.logical_clusters, size.workspaces])
            {
                gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
            }
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_by_verb_and_code_without_workspace_labels() {
        let metrics = ProxyMetrics::default();
        metrics.observe(verb(&Method::GET, None), 200, Duration::from_millis(1));
        metrics.observe(
            verb(&Method::GET, Some("watch=true&labelSelector=a")),
            200,
            Duration::from_millis(1),
        );
        metrics.observe(verb(&Method::POST, None), 403, Duration::from_millis(2));
        metrics.backend_error();
        let text = metrics
            .encode(Some(IndexCounts {
                shards: 2,
                logical_clusters: 10,
                workspaces: 8,
            }))
            .unwrap();
        for line in [
            r#"kcp_front_proxy_requests_total{verb="GET",code="200"} 1"#,
            r#"kcp_front_proxy_requests_total{verb="WATCH",code="200"} 1"#,
            r#"kcp_front_proxy_requests_total{verb="POST",code="403"} 1"#,
            "kcp_front_proxy_backend_errors_total 1",
            "kcp_front_proxy_index_shards 2",
            "kcp_front_proxy_index_workspaces 8",
            r#"kcp_front_proxy_request_duration_seconds_count{verb="POST"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
