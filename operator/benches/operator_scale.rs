//! Benchmark of the real `operator run` binary (bench profile = release) against the in-process
//! Kubernetes API stand-in with workload simulation:
//!
//! 1. resident memory (VmRSS from /proc/<pid>/status) when idle;
//! 2. time to converge N new Memcached objects (default 1,000) and the RSS while managing them;
//! 3. latency from a spec change (`spec.replicas`) to the operator's Deployment update, seen by a
//!    watch on Deployments, over M sequential changes (default 1,000): p50, p90, p99, max.
//!
//! Prints the figures; asserts nothing. No peer operator (operator-sdk/Go) exists on this
//! machine to compare with. `OPERATOR_BENCH_OBJECTS` and `OPERATOR_BENCH_CHANGES` change N and M.
//! Run: `CARGO_TARGET_DIR=... cargo bench -p memcached-operator --bench operator_scale`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/it/harness/operator_harness.rs"]
mod harness;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use harness::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use memcached_api::v1;
use serde_json::json;

const NS: &str = "bench";

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Highest RSS over `samples` readings 100 ms apart.
async fn peak_rss(pid: u32, samples: usize) -> u64 {
    let mut peak = 0;
    for _ in 0..samples {
        peak = peak.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    peak
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn available(v: &serde_json::Value) -> bool {
    v.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let load_before = loadavg();
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a tiny pass then.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let objects = env_usize("OPERATOR_BENCH_OBJECTS", if bench_mode { 1000 } else { 5 });
    let changes =
        env_usize("OPERATOR_BENCH_CHANGES", if bench_mode { 1000 } else { 5 }).min(objects);

    let env = Env::start(&[NS]).await;
    let op = Operator::spawn(
        &env,
        OperatorOptions {
            webhook: false,
            rust_log: "warn",
            ..Default::default()
        },
    );
    let pid = op.child.id();
    op.wait_ready().await;
    eventually("leader", 30, || async {
        op.is_leader().await.then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = peak_rss(pid, 10).await;

    // Converge N objects.
    let api: Api<v1::Memcached> = Api::namespaced(env.client.clone(), NS);
    let started = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &v1::Memcached::new(&format!("mc-{i:04}"), v1::MemcachedSpec::default()),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let created = started.elapsed();
    let peak_during = std::cell::Cell::new(0u64);
    eventually("all objects available", 600, || async {
        peak_during.set(peak_during.get().max(rss_kib(pid)));
        let ready = (0..objects)
            .filter(|i| {
                env.standin
                    .object("cache.example.com", "memcacheds", NS, &format!("mc-{i:04}"))
                    .is_some_and(|o| available(&o))
            })
            .count();
        (ready == objects).then_some(())
    })
    .await;
    let converged = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let managing = peak_rss(pid, 20).await;

    // Change-to-apply latency: watch Deployments, change replicas one object at a time.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, i32, Instant)>();
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), NS);
    let watch = tokio::spawn(async move {
        let mut stream = watcher(deployments, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(d)) = stream.next().await {
            let name = d.metadata.name.clone().unwrap_or_default();
            let replicas = d.spec.replicas.unwrap_or(0);
            if tx.send((name, replicas, Instant::now())).is_err() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    while rx.try_recv().is_ok() {}
    let mut latencies = Vec::with_capacity(changes);
    let mut pending: HashMap<String, i32> = HashMap::new();
    for i in 0..changes {
        let name = format!("mc-{i:04}");
        let t0 = Instant::now();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
        loop {
            let (n, r, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .expect("deployment update within 30s")
                .unwrap();
            if n == name && r == 2 {
                latencies.push(at.duration_since(t0));
                break;
            }
            pending.insert(n, r);
        }
    }
    watch.abort();
    latencies.sort();
    let managing_after = peak_rss(pid, 5).await;
    let reconciles = op
        .metric("memcached_operator_reconciliations_total{result=\"success\"}")
        .await
        .unwrap_or(0.0);
    let skipped_deploy = op
        .metric("memcached_operator_apply_skipped_total{resource=\"deployments\"}")
        .await
        .unwrap_or(0.0);

    println!(
        "operator_scale ({} binary; stand-in in process; {} CPUs; load average {} before, {} after)",
        if cfg!(debug_assertions) {
            "debug (smoke run: use `cargo bench`)"
        } else {
            "release"
        },
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        load_before,
        loadavg()
    );
    println!("  idle RSS                          {}", mib(idle));
    println!(
        "  create {objects} Memcached             {:.2?} (API), all Available after {:.2?}",
        created, converged
    );
    println!(
        "  RSS peak while converging         {}",
        mib(peak_during.get())
    );
    println!("  RSS managing {objects} objects        {}", mib(managing));
    println!(
        "  RSS after {changes} changes            {}",
        mib(managing_after)
    );
    println!(
        "  change -> Deployment update ({changes} sequential changes): p50 {:.2?}  p90 {:.2?}  p99 {:.2?}  max {:.2?}",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.90),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default()
    );
    println!("  successful reconciles             {reconciles}");
    println!("  Deployment applies skipped (unchanged) {skipped_deploy}");
    drop(op);
    env.standin.shutdown().await;
}
