//! Conversion throughput in process, on one thread (so objects/s is objects/s/core).
//!
//! Three layers, each for every ordered pair of versions:
//! - typed: `AnyMemcached::convert` on owned Rust objects (the pure conversion);
//! - value: `conversion::convert_json` on `serde_json::Value`s;
//! - text: `conversion::convert_json_str` on JSON text (what the webhook does per object);
//! - review: `webhook::review::answer` on a 100-object ConversionReview body (parse, convert,
//!   encode: the whole request minus HTTP and TLS).
//!
//! The v1 source objects use every v1-only field, so v1 -> v1alpha1 writes the conversion
//! annotation and v1alpha1 -> v1 reads it back (the expensive paths).
//!
//! Figures are objects per second of this thread's CPU time (from /proc/thread-self/schedstat,
//! nanosecond resolution), so they stay meaningful on a busy machine; the wall-clock rate of the
//! slowest pair is printed too.
//!
//! Run: `cargo bench -p memcached-operator --bench conversion_inprocess`. Under `cargo test` (no
//! `--bench` argument) it runs a few iterations only, as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use memcached_api::conversion::{AnyMemcached, Version, convert_json, convert_json_str};
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

/// CPU time this thread has run, in nanoseconds (Linux schedstat; 0 elsewhere).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

#[derive(Clone, Copy, Default)]
struct Figure {
    objects: u64,
    cpu_ns: u64,
    wall: Duration,
}

impl Figure {
    /// Objects per CPU-second (per core); falls back to wall time without schedstat.
    fn per_core(&self) -> f64 {
        if self.cpu_ns > 0 {
            self.objects as f64 / (self.cpu_ns as f64 / 1e9)
        } else {
            self.per_wall_second()
        }
    }

    fn per_wall_second(&self) -> f64 {
        self.objects as f64 / self.wall.as_secs_f64()
    }
}

/// Repeats `prepare` (untimed) then `run` (timed) until `budget` of wall time is spent.
fn measure<T>(
    budget: Duration,
    per_batch: usize,
    mut prepare: impl FnMut() -> T,
    mut run: impl FnMut(T),
) -> Figure {
    // Warm-up: caches, allocator.
    run(prepare());
    let mut figure = Figure::default();
    let started = Instant::now();
    while started.elapsed() < budget {
        let input = prepare();
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        run(input);
        figure.cpu_ns += thread_cpu_ns().saturating_sub(cpu);
        figure.wall += wall.elapsed();
        figure.objects += per_batch as u64;
    }
    figure
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (budget, n) = if full {
        (Duration::from_millis(1500), 1000)
    } else {
        (Duration::from_millis(10), 10)
    };
    println!("conversion_inprocess: one thread, {n} objects per batch, {budget:?} per figure");
    println!("objects per CPU-second of one thread (= objects/s/core):");
    println!(
        "{:<22} {:>10} {:>10} {:>10} {:>18}",
        "pair", "typed", "value", "text", "review (100 obj)"
    );
    let mut slowest = (String::new(), Figure::default());
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
            // Inputs are cloned outside the timed region.
            let typed = measure(
                budget,
                n,
                || typed_sources.clone(),
                |batch| {
                    for o in batch {
                        black_box(o.convert(to));
                    }
                },
            );
            if typed.per_core() < slowest.1.per_core() || slowest.0.is_empty() {
                slowest = (format!("{from} -> {to}"), typed);
            }
            let json_fig = measure(
                budget,
                n,
                || json_sources.clone(),
                |batch| {
                    for o in batch {
                        let _ = black_box(convert_json(o, to));
                    }
                },
            );
            let text_sources: Vec<String> = json_sources
                .iter()
                .map(|v| serde_json::to_string(v).unwrap_or_default())
                .collect();
            let text_fig = measure(
                budget,
                n,
                || (),
                |()| {
                    for o in &text_sources {
                        let _ = black_box(convert_json_str(o, to));
                    }
                },
            );
            let body = serde_json::to_vec(&json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "request": {"uid": "bench", "desiredAPIVersion": to.api_version(), "objects": &json_sources[..n.min(100)]}
            }))
            .unwrap_or_default();
            let converters: [std::sync::Arc<dyn olmkit_runtime::conversion::Converter>; 1] =
                [std::sync::Arc::new(memcached_api::conversion::converter())];
            let review = measure(
                budget,
                n.min(100),
                || (),
                |()| {
                    black_box(olmkit_runtime::webhook::review::answer(&body, &converters));
                },
            );
            println!(
                "{:<22} {:>10.0} {:>10.0} {:>10.0} {:>18.0}",
                format!("{from} -> {to}"),
                typed.per_core(),
                json_fig.per_core(),
                text_fig.per_core(),
                review.per_core()
            );
        }
    }
    println!(
        "slowest typed pair: {} at {:.0} objects/s/core (target > 200000); wall clock {:.0} objects/s on this (shared) machine",
        slowest.0,
        slowest.1.per_core(),
        slowest.1.per_wall_second()
    );
}
