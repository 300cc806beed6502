//! Prometheus metrics of the controller, rendered in the text exposition format on `/metrics`.
//!
//! Owns the registry and every metric the operator exports (all prefixed `memcached_operator_`):
//! - `reconciliations_total{result}`: finished reconciles, `success` or `error`;
//! - `reconcile_errors_total{reason}`: failed reconciles by failed action (`apply_deployment`...);
//! - `reconcile_duration_seconds`: reconcile latency histogram;
//! - `writes_total{resource,verb}` and `apply_skipped_total{resource}`: API writes issued and
//!   applies skipped because the observed object already matched (idempotency, visible);
//! - `managed_objects{kind}` and `degraded_objects`: computed at scrape time from the
//!   controller's caches, so they can never drift from what the controller sees;
//! - `leader`: 1 while this replica holds the leader lease.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::reflector::Store;
use memcached_api::v1::Memcached;

use crate::controller::cache::{CachedDeployment, CachedPod, CachedService};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
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

/// The caches of one watch scope (all namespaces, or one namespace).
#[derive(Clone)]
pub struct ScopeStores {
    /// Memcached objects.
    pub memcacheds: Store<Memcached>,
    /// Deployments labelled as managed by the operator.
    pub deployments: Store<CachedDeployment>,
    /// Services labelled as managed by the operator.
    pub services: Store<CachedService>,
    /// Pods labelled as managed by the operator.
    pub pods: Store<CachedPod>,
}

impl std::fmt::Debug for ScopeStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeStores").finish_non_exhaustive()
    }
}

/// Computes the cache-derived gauges at scrape time.
#[derive(Debug, Default)]
struct CacheCollector {
    scopes: Arc<Mutex<Vec<ScopeStores>>>,
}

impl Collector for CacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let scopes = self
            .scopes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut counts = [0i64; 4];
        let mut degraded = 0i64;
        for s in &scopes {
            let mcs = s.memcacheds.state();
            counts[0] += mcs.len() as i64;
            degraded += mcs
                .iter()
                .filter(|m| {
                    crate::controller::status::find(m.status.as_ref(), "Degraded")
                        .is_some_and(|c| c.status == "True")
                })
                .count() as i64;
            counts[1] += s.deployments.len() as i64;
            counts[2] += s.services.len() as i64;
            counts[3] += s.pods.len() as i64;
        }
        let mut family = encoder.encode_descriptor(
            "memcached_operator_managed_objects",
            "Objects in the controller's caches, by kind.",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (kind, n) in ["Memcached", "Deployment", "Service", "Pod"]
            .iter()
            .zip(counts)
        {
            let labels = [("kind", *kind)];
            ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
        }
        let gauge = ConstGauge::new(degraded);
        let m = encoder.encode_descriptor(
            "memcached_operator_degraded_objects",
            "Memcached objects whose Degraded condition is True.",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(m)
    }
}

/// Every metric of the operator.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciliations: Family<ResultLabels, Counter>,
    errors: Family<ReasonLabels, Counter>,
    duration: Histogram,
    writes: Family<WriteLabels, Counter>,
    skipped: Family<ResourceLabels, Counter>,
    leader: Gauge<i64, AtomicI64>,
    scopes: Arc<Mutex<Vec<ScopeStores>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered at zero.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciliations = Family::<ResultLabels, Counter>::default();
        registry.register(
            "memcached_operator_reconciliations",
            "Finished reconciles of Memcached objects, by result.",
            reconciliations.clone(),
        );
        let errors = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "memcached_operator_reconcile_errors",
            "Failed reconciles, by the action that failed.",
            errors.clone(),
        );
        // 1 ms to ~16 s.
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        registry.register(
            "memcached_operator_reconcile_duration_seconds",
            "Time one reconcile of a Memcached takes.",
            duration.clone(),
        );
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "memcached_operator_writes",
            "Write requests sent to the API server, by resource and verb.",
            writes.clone(),
        );
        let skipped = Family::<ResourceLabels, Counter>::default();
        registry.register(
            "memcached_operator_apply_skipped",
            "Applies skipped because the observed object already matched the desired one.",
            skipped.clone(),
        );
        let leader = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "memcached_operator_leader",
            "1 while this replica holds the leader-election lease (or runs without leader election).",
            leader.clone(),
        );
        let scopes: Arc<Mutex<Vec<ScopeStores>>> = Arc::default();
        registry.register_collector(Box::new(CacheCollector {
            scopes: scopes.clone(),
        }));
        // Zero-valued series for the two results, so rate() works from the first scrape.
        let _ = reconciliations.get_or_create(&ResultLabels { result: "success" });
        let _ = reconciliations.get_or_create(&ResultLabels { result: "error" });
        Self {
            registry,
            reconciliations,
            errors,
            duration,
            writes,
            skipped,
            leader,
            scopes,
        }
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

    /// Replaces the caches the cache-derived gauges read (empty when not reconciling).
    pub fn set_scopes(&self, scopes: Vec<ScopeStores>) {
        *self.scopes.lock().unwrap_or_else(|p| p.into_inner()) = scopes;
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let m = Metrics::new();
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
            "memcached_operator_managed_objects{kind=\"Memcached\"} 0",
            "memcached_operator_degraded_objects 0",
            "# EOF",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
