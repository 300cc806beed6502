//! Benchmark of `status` on a busy cluster, next to `kubectl get csv -A` as the peer.
//!
//! A kube-standin API server gets the OLM CRDs and N Subscriptions, N InstallPlans and 3N CSVs
//! (one namespace per 10 Subscriptions); then the library's status path (three lists, the
//! report, the text rendering) and `kubectl get csv -A` (one list, server-side table) run R
//! times each. Figures, not assertions: `cargo bench -p olmkit-cluster --bench status_bench`.
//! Environment: STATUS_BENCH_N (default 300), STATUS_BENCH_RUNS (default 10).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use olmkit_cluster::client::Cluster;
use olmkit_cluster::olm::{csv_resource, install_plan_resource, subscription_resource};
use olmkit_cluster::status::{build_report, gather, render_text};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
    format!(
        "min {:7.1} ms   median {:7.1} ms   mean {:7.1} ms   max {:7.1} ms",
        ms(v[0]),
        ms(v[v.len() / 2]),
        mean,
        ms(v[v.len() - 1])
    )
}

async fn create(
    client: &kube::Client,
    ar: &kube::core::ApiResource,
    ns: &str,
    v: serde_json::Value,
    status: serde_json::Value,
) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let name = v["metadata"]["name"].as_str().unwrap().to_string();
    api.create(&PostParams::default(), &serde_json::from_value(v).unwrap())
        .await
        .unwrap();
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n = env_usize("STATUS_BENCH_N", 300);
    let runs = env_usize("STATUS_BENCH_RUNS", 10);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fixtures/olm-crds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let namespaces: Vec<String> = (0..n.div_ceil(10)).map(|i| format!("team-{i}")).collect();
    let standin = kube_standin::StandIn::start(kube_standin::StandInOptions {
        crds: kube_standin::load_crd_files(&files).unwrap(),
        namespaces: namespaces.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    standin.write_kubeconfig(&kubeconfig, "default").unwrap();
    let cluster = Cluster::connect(&olmkit_cluster::client::ClusterOptions {
        kubeconfig: Some(kubeconfig.clone()),
        context: None,
    })
    .await
    .unwrap();
    let client = cluster.client().clone();

    let t = Instant::now();
    for i in 0..n {
        let ns = &namespaces[i / 10];
        let pkg = format!("op-{i}");
        create(&client, &subscription_resource(), ns, json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": pkg, "namespace": ns},
            "spec": {"name": pkg, "channel": "stable", "source": "cat", "sourceNamespace": ns}}),
            json!({"installedCSV": format!("{pkg}.v1.2.0"), "currentCSV": format!("{pkg}.v1.2.0"), "state": "AtLatestKnown",
                   "installPlanRef": {"name": format!("install-{i}"), "namespace": ns}, "lastUpdated": "2026-01-01T00:00:00Z"})).await;
        create(&client, &install_plan_resource(), ns, json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": format!("install-{i}"), "namespace": ns},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": [format!("{pkg}.v1.2.0")]}}),
            json!({"phase": "Complete", "catalogSources": []})).await;
        for (v, replaces) in [("1.0.0", ""), ("1.1.0", "1.0.0"), ("1.2.0", "1.1.0")] {
            let mut spec = json!({"displayName": format!("Operator {i}"), "version": v,
                "install": {"strategy": "deployment", "spec": {"deployments": []}}});
            if !replaces.is_empty() {
                spec["replaces"] = json!(format!("{pkg}.v{replaces}"));
            }
            create(&client, &csv_resource(), ns, json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": format!("{pkg}.v{v}"), "namespace": ns}, "spec": spec}),
                json!({"phase": if v == "1.2.0" { "Succeeded" } else { "Replacing" }, "reason": "InstallSucceeded"})).await;
        }
    }
    println!(
        "status_bench: {n} Subscriptions, {n} InstallPlans, {} CSVs in {} namespaces (populated in {:.1} s)",
        3 * n,
        namespaces.len(),
        t.elapsed().as_secs_f64()
    );

    let mut ours = Vec::new();
    let mut bytes = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let gathered = gather(&cluster, None).await.unwrap();
        let text = render_text(&build_report(None, gathered, None));
        ours.push(t.elapsed());
        bytes = text.len();
    }
    println!(
        "bundle-tool status -A (library: 4 lists + report + render, {bytes} bytes): {}",
        stats(ours)
    );

    let kubectl = std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output();
    if kubectl.is_ok() {
        let mut peer = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let out = std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["get", "csv", "-A"])
                .env("HOME", dir.path())
                .output()
                .unwrap();
            peer.push(t.elapsed());
            assert!(out.status.success());
        }
        println!(
            "kubectl get csv -A (process, discovery, 1 list, server table):        {}",
            stats(peer)
        );
    } else {
        println!("kubectl not found: no peer figures");
    }
    standin.shutdown().await;
}
