//! The Memcached operator's own metrics, computed at scrape time from the controller's caches
//! so they can never drift from what the controller sees (the runtime's metrics, such as
//! reconcile counts and the leader gauge, are in `olmkit_runtime::metrics`):
//! - `memcached_operator_managed_objects{kind}`: objects in the caches, by kind;
//! - `memcached_operator_degraded_objects`: Memcached objects whose Degraded condition is True.

use std::sync::{Arc, Mutex};

use kube::runtime::reflector::Store;
use memcached_api::v1::Memcached;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

use crate::controller::cache::{CachedDeployment, CachedPod, CachedService};

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

/// The caches the gauges read: set by the controllers of the current term, empty while this
/// replica does not reconcile. Cloning shares them.
#[derive(Clone, Debug, Default)]
pub struct CacheGauges {
    scopes: Arc<Mutex<Vec<ScopeStores>>>,
}

impl CacheGauges {
    /// Replaces the caches the gauges read.
    pub fn set_scopes(&self, scopes: Vec<ScopeStores>) {
        *self.scopes.lock().unwrap_or_else(|p| p.into_inner()) = scopes;
    }

    /// The collector to register with the operator's metrics.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(self.clone())
    }
}

impl Collector for CacheGauges {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_render_beside_the_runtime_metrics() {
        let metrics = olmkit_runtime::metrics::Metrics::new("memcached-operator");
        let gauges = CacheGauges::default();
        metrics.register_collector(gauges.collector());
        metrics.set_leader(true);
        let text = metrics.render().unwrap();
        for needle in [
            "memcached_operator_leader 1",
            "memcached_operator_managed_objects{kind=\"Memcached\"} 0",
            "memcached_operator_degraded_objects 0",
            "# EOF",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
