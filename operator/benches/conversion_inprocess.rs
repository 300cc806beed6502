//! Conversion throughput in process, on one thread (so objects/s is objects/s/core).
//!
//! Three layers, each for every ordered pair of versions:
//! - typed: `AnyMemcached::convert` on owned Rust objects (the pure conversion);
//! - json: `conversion::convert_json` on `serde_json::Value`s (what the webhook does per object);
//! - review: `webhook::review::answer` on a 100-object ConversionReview body (parse, convert,
//!   encode: the whole request minus HTTP and TLS).
//!
//! The v1 source objects use every v1-only field, so v1 -> v1alpha1 writes the conversion
//! annotation and v1alpha1 -> v1 reads it back (the expensive paths).
//!
//! Run: `cargo bench -p memcached-operator --bench conversion_inprocess`. Under `cargo test` (no
//! `--bench` argument) it runs a few iterations only, as a smoke test.

use std::hint::black_box;
use std::time::{Duration, Instant};

use memcached_api::conversion::{AnyMemcached, Version, convert_json};
use serde_json::{Value, json};

fn rich_v1(i: usize) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1",
        "kind": "Memcached",
        "metadata": {
            "name": format!("cache-{i}"), "namespace": "shop", "uid": format!("6d1c8f2e-2b7a-4f3e-9a51-{i:012}"),
            "resourceVersion": "48213", "generation": 3, "creationTimestamp": "2026-03-14T09:26:53Z",
            "labels": {"app.kubernetes.io/part-of": "shop"},
            "annotations": {"team": "payments"},
            "finalizers": ["cache.example.com/finalizer"],
            "managedFields": [{"apiVersion": "cache.example.com/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "manager": "kubectl", "operation": "Update", "time": "2026-03-14T09:26:53Z"}]
        },
        "spec": {
            "replicas": 3, "image": "quay.io/acme/memcached:1.6.39",
            "memcached": {"memoryLimitMiB": 256, "maxConnections": 4096, "threads": 8, "extraArgs": ["-o", "modern"]},
            "resources": {"limits": {"cpu": "2", "memory": "384Mi"}, "requests": {"cpu": "500m", "memory": "320Mi"}},
            "port": 11311,
            "podTemplate": {"nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"}], "priorityClassName": "high"}
        },
        "status": {
            "observedGeneration": 3, "replicas": 3, "readyReplicas": 3,
            "nodes": ["cache-a", "cache-b", "cache-c"], "selector": "app.kubernetes.io/instance=cache",
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "3 of 3 pods ready", "lastTransitionTime": "2026-03-14T09:27:10Z", "observedGeneration": 3}]
        }
    })
}

/// Source objects of `version`: v1 objects converted down, so spokes carry the annotation.
fn sources(version: Version, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| match convert_json(rich_v1(i), version) {
            Ok(c) => c.object,
            Err(e) => panic!("bench fixture does not convert: {e}"),
        })
        .collect()
}

struct Figure {
    objects: u64,
    elapsed: Duration,
}

impl Figure {
    fn per_second(&self) -> f64 {
        self.objects as f64 / self.elapsed.as_secs_f64()
    }
}

/// Runs `batch` (which converts `per_batch` objects) until `budget` is spent.
fn measure(budget: Duration, per_batch: usize, mut batch: impl FnMut()) -> Figure {
    // Warm-up: caches, allocator.
    batch();
    let mut objects = 0u64;
    let started = Instant::now();
    let mut elapsed = Duration::ZERO;
    while elapsed < budget {
        batch();
        objects += per_batch as u64;
        elapsed = started.elapsed();
    }
    Figure { objects, elapsed }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (budget, n) = if full {
        (Duration::from_millis(1500), 1000)
    } else {
        (Duration::from_millis(10), 10)
    };
    println!("conversion_inprocess: one thread, {n} objects per batch, {budget:?} per figure");
    println!(
        "{:<22} {:>14} {:>14} {:>16}",
        "pair", "typed obj/s", "json obj/s", "review obj/s"
    );
    let mut slowest_typed = f64::MAX;
    for from in Version::ALL {
        let json_sources = sources(from, n);
        let typed_sources: Vec<AnyMemcached> = json_sources
            .iter()
            .map(|v| AnyMemcached::from_json(v.clone()).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        for to in Version::ALL {
            if from == to {
                continue;
            }
            // Typed: clone outside the timed region, convert inside.
            let mut total = Duration::ZERO;
            let mut objects = 0u64;
            let typed = {
                let started = Instant::now();
                while started.elapsed() < budget {
                    let batch = typed_sources.clone();
                    let t = Instant::now();
                    for o in batch {
                        black_box(o.convert(to));
                    }
                    total += t.elapsed();
                    objects += n as u64;
                }
                Figure {
                    objects,
                    elapsed: total,
                }
            };
            slowest_typed = slowest_typed.min(typed.per_second());

            let mut json_total = Duration::ZERO;
            let mut json_objects = 0u64;
            let started = Instant::now();
            while started.elapsed() < budget {
                let batch = json_sources.clone();
                let t = Instant::now();
                for o in batch {
                    let _ = black_box(convert_json(o, to));
                }
                json_total += t.elapsed();
                json_objects += n as u64;
            }
            let json_fig = Figure {
                objects: json_objects,
                elapsed: json_total,
            };

            let body = serde_json::to_vec(&json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "request": {"uid": "bench", "desiredAPIVersion": to.api_version(), "objects": &json_sources[..n.min(100)]}
            }))
            .unwrap_or_default();
            let review = measure(budget, n.min(100), || {
                black_box(memcached_operator::webhook::review::answer(&body));
            });
            println!(
                "{:<22} {:>14.0} {:>14.0} {:>16.0}",
                format!("{from} -> {to}"),
                typed.per_second(),
                json_fig.per_second(),
                review.per_second()
            );
        }
    }
    println!("slowest typed pair: {slowest_typed:.0} objects/s/core (target > 200000)");
}
