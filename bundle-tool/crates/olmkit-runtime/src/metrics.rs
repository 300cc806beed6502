//! Prometheus metrics of an operator, rendered in the OpenMetrics text format on `/metrics`.
//!
//! Every metric is prefixed with the operator's name (`memcached-operator` gives
//! `memcached_operator_`); the runtime exports what every controller has:
//! - `reconciliations_total{result}`: finished reconciles, `success` or `error`;
//! - `reconcile_errors_total{reason}`: failed reconciles by failed action (the controller's
//!   names, e.g. `apply_deployment`);
//! - `reconcile_duration_seconds`: reconcile latency histogram;
//! - `writes_total{resource,verb}` and `apply_skipped_total{resource}`: API writes issued and
//!   applies skipped because the observed object already matched (idempotency, visible);
//! - `leader`: 1 while this replica holds the leader Lease (or runs without leader election).
//!
//! An operator adds its own with [`Metrics::register_collector`] (computed at scrape time, e.g.
//! from its caches, so they can never drift from what the controller sees).
//!
//! ```
//! let m = olmkit_runtime::metrics::Metrics::new("demo-operator");
//! m.reconciled(std::time::Duration::from_millis(3), None);
//! assert!(m.render().unwrap().contains("demo_operator_reconciliations_total{result=\"success\"} 1"));
//! ```

use std::sync::Mutex;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set `{result}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success` or `error`.
    pub result: &'static str,
}

/// Label set `{reason}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The failed action.
    pub reason: &'static str,
}

/// Label set `{resource, verb}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// Plural resource, with `/status` for the status subresource.
    pub resource: &'static str,
    /// Kubernetes verb (`patch`, `delete`, `create`).
    pub verb: &'static str,
}

/// Label set `{resource}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// Plural resource.
    pub resource: &'static str,
}

/// The metric-name prefix of an operator: its name with every character that is not a letter or
/// digit replaced by `_`.
pub fn prefix(operator: &str) -> String {
    operator
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Every metric of the operator.
#[derive(Debug)]
pub struct Metrics {
    prefix: String,
    registry: Mutex<Registry>,
    reconciliations: Family<ResultLabels, Counter>,
    errors: Family<ReasonLabels, Counter>,
    duration: Histogram,
    writes: Family<WriteLabels, Counter>,
    skipped: Family<ResourceLabels, Counter>,
    leader: Gauge<i64, AtomicI64>,
}

impl Metrics {
    /// A registry with every runtime metric of `operator` registered at zero.
    pub fn new(operator: &str) -> Self {
        let prefix = prefix(operator);
        let mut registry = Registry::default();
        let name = |n: &str| format!("{prefix}_{n}");
        let reconciliations = Family::<ResultLabels, Counter>::default();
        registry.register(
            name("reconciliations"),
            "Finished reconciles, by result.",
            reconciliations.clone(),
        );
        let errors = Family::<ReasonLabels, Counter>::default();
        registry.register(
            name("reconcile_errors"),
            "Failed reconciles, by the action that failed.",
            errors.clone(),
        );
        // 1 ms to ~16 s.
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        registry.register(
            name("reconcile_duration_seconds"),
            "Time one reconcile takes.",
            duration.clone(),
        );
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            name("writes"),
            "Write requests sent to the API server, by resource and verb.",
            writes.clone(),
        );
        let skipped = Family::<ResourceLabels, Counter>::default();
        registry.register(
            name("apply_skipped"),
            "Applies skipped because the observed object already matched the desired one.",
            skipped.clone(),
        );
        let leader = Gauge::<i64, AtomicI64>::default();
        registry.register(
            name("leader"),
            "1 while this replica holds the leader-election lease (or runs without leader election).",
            leader.clone(),
        );
        // Zero-valued series for the two results, so rate() works from the first scrape.
        let _ = reconciliations.get_or_create(&ResultLabels { result: "success" });
        let _ = reconciliations.get_or_create(&ResultLabels { result: "error" });
        Self {
            prefix,
            registry: Mutex::new(registry),
            reconciliations,
            errors,
            duration,
            writes,
            skipped,
            leader,
        }
    }

    /// The metric-name prefix (without the trailing `_`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Adds metrics computed at scrape time.
    pub fn register_collector(&self, collector: Box<dyn Collector>) {
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .register_collector(collector);
    }

    /// Records one finished reconcile; `error` is the failed action, if it failed.
    pub fn reconciled(&self, elapsed: Duration, error: Option<&'static str>) {
        self.duration.observe(elapsed.as_secs_f64());
        let result = if error.is_some() { "error" } else { "success" };
        self.reconciliations
            .get_or_create(&ResultLabels { result })
            .inc();
        if let Some(reason) = error {
            self.errors.get_or_create(&ReasonLabels { reason }).inc();
        }
    }

    /// Records one write request.
    pub fn wrote(&self, resource: &'static str, verb: &'static str) {
        self.writes
            .get_or_create(&WriteLabels { resource, verb })
            .inc();
    }

    /// Records one apply skipped because nothing would change.
    pub fn skipped_apply(&self, resource: &'static str) {
        self.skipped
            .get_or_create(&ResourceLabels { resource })
            .inc();
    }

    /// Sets the leader gauge.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_under_the_operators_prefix() {
        let m = Metrics::new("memcached-operator");
        m.reconciled(Duration::from_millis(3), None);
        m.reconciled(Duration::from_millis(5), Some("apply_deployment"));
        m.wrote("deployments", "patch");
        m.skipped_apply("services");
        m.set_leader(true);
        let text = m.render().unwrap();
        for needle in [
            "memcached_operator_reconciliations_total{result=\"success\"} 1",
            "memcached_operator_reconciliations_total{result=\"error\"} 1",
            "memcached_operator_reconcile_errors_total{reason=\"apply_deployment\"} 1",
            "memcached_operator_reconcile_duration_seconds_count 2",
            "memcached_operator_writes_total{resource=\"deployments\",verb=\"patch\"} 1",
            "memcached_operator_apply_skipped_total{resource=\"services\"} 1",
            "memcached_operator_leader 1",
            "# EOF",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }

    #[test]
    fn prefixes_are_metric_names() {
        assert_eq!(prefix("whalesay-operator"), "whalesay_operator");
        assert_eq!(prefix("a.b/c"), "a_b_c");
    }
}
