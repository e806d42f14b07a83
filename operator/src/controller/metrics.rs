//! Prometheus metrics of the controllers, served at `/metrics` in the OpenMetrics text format
//! (prometheus-client). Labels are per controller only (the kind, lowercased), never per object,
//! so the number of series stays fixed.
//!
//! - `kcp_operator_reconcile_total{controller}`: reconciles finished, successful or not;
//! - `kcp_operator_reconcile_errors_total{controller}`: reconciles that returned an error;
//! - `kcp_operator_reconcile_duration_seconds{controller}`: histogram of reconcile durations;
//! - `kcp_operator_leader`: 1 while this process holds the leader lease (or runs without leader
//!   election), else 0;
//! - `kcp_operator_api_requests_total{verb}`: requests sent to the host cluster's API server, by
//!   Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...), counted
//!   by the client's layer (`manager::api_requests`): what an idle operator costs its cluster.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// The label set of every per-controller series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

/// The label set of the API request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabel {
    verb: &'static str,
}

/// Reconcile duration buckets: 5 ms doubling up to about 80 s (a reconcile may wait on kcp's
/// 30 s read timeout).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Every metric of the operator and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabel, Counter>,
    errors: Family<ControllerLabel, Counter>,
    durations: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    leader: Gauge,
    api_requests: Family<VerbLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("kcp_operator");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let errors = Family::<ControllerLabel, Counter>::default();
        let durations: Family<ControllerLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(duration_histogram);
        let leader = Gauge::default();
        let api_requests = Family::<VerbLabel, Counter>::default();
        registry.register(
            "reconcile",
            "Reconciles finished, per controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that returned an error, per controller",
            errors.clone(),
        );
        registry.register_with_unit(
            "reconcile_duration",
            "Time a reconcile took, per controller",
            Unit::Seconds,
            durations.clone(),
        );
        registry.register(
            "leader",
            "1 while this process is the leader and runs the controllers",
            leader.clone(),
        );
        registry.register(
            "api_requests",
            "Requests sent to the host cluster's API server, per Kubernetes verb",
            api_requests.clone(),
        );
        Self {
            registry,
            reconciles,
            errors,
            durations,
            leader,
            api_requests,
        }
    }
}

impl Metrics {
    /// Counts one reconcile of `controller` that took `took` and failed or not.
    pub fn reconciled(&self, controller: &str, took: Duration, failed: bool) {
        let label = ControllerLabel {
            controller: controller.to_owned(),
        };
        self.reconciles.get_or_create(&label).inc();
        if failed {
            self.errors.get_or_create(&label).inc();
        }
        self.durations
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// Records whether this process is the leader.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts one request to the host cluster's API server.
    pub fn api_request(&self, verb: &'static str) {
        self.api_requests.get_or_create(&VerbLabel { verb }).inc();
    }

    /// Every metric in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_controller() {
        let metrics = Metrics::default();
        metrics.reconciled("rootshard", Duration::from_millis(3), false);
        metrics.reconciled("rootshard", Duration::from_millis(40), true);
        metrics.reconciled("shard", Duration::from_secs(2), false);
        metrics.set_leader(true);
        metrics.api_request("patch");
        metrics.api_request("patch");
        metrics.api_request("watch");
        let text = metrics.encode().expect("encodes");
        for line in [
            "kcp_operator_reconcile_total{controller=\"rootshard\"} 2",
            "kcp_operator_reconcile_total{controller=\"shard\"} 1",
            "kcp_operator_reconcile_errors_total{controller=\"rootshard\"} 1",
            "kcp_operator_reconcile_duration_seconds_count{controller=\"rootshard\"} 2",
            "kcp_operator_reconcile_duration_seconds_bucket{le=\"0.005\",controller=\"rootshard\"} 1",
            "kcp_operator_reconcile_duration_seconds_bucket{le=\"0.04\",controller=\"rootshard\"} 2",
            "kcp_operator_reconcile_duration_seconds_bucket{le=\"1.28\",controller=\"shard\"} 0",
            "kcp_operator_leader 1",
            "kcp_operator_api_requests_total{verb=\"patch\"} 2",
            "kcp_operator_api_requests_total{verb=\"watch\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("reconcile_errors_total{controller=\"shard\"}"));
        assert!(text.ends_with("# EOF\n"));
    }
}
