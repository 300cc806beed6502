//! Throughput and latency of the stand-in through the real kube-rs client: creates, spec patches
//! observed by a watcher (change-to-event latency, what an operator's reconcile loop waits on),
//! lists and server-side applies, at 1,000 objects. Prints its figures; no peer API-server
//! emulator is installed on this machine to compare with.
//!
//! Run: `cargo bench -p kube-standin --bench throughput`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube_standin::{StandIn, StandInOptions};
use serde_json::json;

const N: usize = 1000;
const CONCURRENCY: usize = 16;

fn crd() -> serde_json::Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer", "minimum": 0},
                        "image": {"type": "string", "default": "busybox"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or_default()
}

fn report(name: &str, total: Duration, lat: &mut [Duration]) {
    let n = lat.len();
    println!(
        "{name:<34} n={n:<5} {:>8.0} ops/s   p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms",
        n as f64 / total.as_secs_f64(),
        pct(lat, 0.50).as_secs_f64() * 1e3,
        pct(lat, 0.99).as_secs_f64() * 1e3,
        pct(lat, 1.0).as_secs_f64() * 1e3,
    );
}

async fn run_concurrent<F, Fut>(n: usize, f: F) -> (Duration, Vec<Duration>)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let lat = futures::stream::iter(0..n)
        .map(|i| {
            let f = f.clone();
            async move {
                let t = Instant::now();
                f(i).await;
                t.elapsed()
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    (start.elapsed(), lat)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let standin = StandIn::start(StandInOptions {
            crds: vec![crd()],
            namespaces: vec!["bench".into()],
            ..Default::default()
        })
        .await
        .expect("start");
        let mut config = kube::Config::new(standin.url().parse().expect("url"));
        config.default_namespace = "bench".into();
        let client = kube::Client::try_from(config).expect("client");
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("bench.example.com", "v1", "Widget"), "widgets");
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "bench", &ar);
        println!("kube-standin throughput ({N} objects, {CONCURRENCY} concurrent requests, kube-rs client over HTTP/1.1 loopback)");

        let (a, ar2) = (api.clone(), ar.clone());
        let (total, mut lat) = run_concurrent(N, move |i| {
            let api = a.clone();
            let ar = ar2.clone();
            async move {
                let mut o = DynamicObject::new(&format!("w{i:04}"), &ar);
                o.data = json!({"spec": {"replicas": 1}});
                api.create(&PostParams::default(), &o).await.expect("create");
            }
        })
        .await;
        report("create", total, &mut lat);

        // Change-to-event: a watcher timestamps each MODIFIED event; latency is measured from
        // just before the patch is sent.
        let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let seen: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let (s2, seen2) = (sent.clone(), seen.clone());
        let watch_api = api.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(watch_api, watcher::Config::default()).applied_objects().boxed();
            while let Some(Ok(o)) = stream.next().await {
                if o.data["spec"]["replicas"] == json!(2)
                    && let Some(t) = o.metadata.name.as_ref().and_then(|n| s2.lock().ok()?.remove(n))
                    && let Ok(mut v) = seen2.lock()
                {
                    v.push(t.elapsed());
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (a, s3) = (api.clone(), sent.clone());
        let (total, mut lat) = run_concurrent(N, move |i| {
            let api = a.clone();
            let sent = s3.clone();
            async move {
                let name = format!("w{i:04}");
                if let Ok(mut m) = sent.lock() {
                    m.insert(name.clone(), Instant::now());
                }
                api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 2}})))
                    .await
                    .expect("patch");
            }
        })
        .await;
        report("merge patch (spec change)", total, &mut lat);
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.lock().map(|v| v.len()).unwrap_or(0) < N && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut events = seen.lock().map(|v| v.clone()).unwrap_or_default();
        report("change-to-watch-event", total, &mut events);
        task.abort();

        let a = api.clone();
        let (total, mut lat) = run_concurrent(N, move |i| {
            let api = a.clone();
            async move {
                api.patch(
                    &format!("w{i:04}"),
                    &PatchParams::apply("bench").force(),
                    &Patch::Apply(json!({"apiVersion": "bench.example.com/v1", "kind": "Widget",
                        "metadata": {"name": format!("w{i:04}")}, "spec": {"replicas": 3}})),
                )
                .await
                .expect("apply");
            }
        })
        .await;
        report("server-side apply", total, &mut lat);

        let mut lat = Vec::new();
        let start = Instant::now();
        for _ in 0..20 {
            let t = Instant::now();
            let l = api.list(&ListParams::default()).await.expect("list");
            assert_eq!(l.items.len(), N);
            lat.push(t.elapsed());
        }
        report("list all 1000", start.elapsed(), &mut lat);
        let mut lat = Vec::new();
        let start = Instant::now();
        for i in 0..N {
            let t = Instant::now();
            api.get(&format!("w{i:04}")).await.expect("get");
            lat.push(t.elapsed());
        }
        report("get (sequential)", start.elapsed(), &mut lat);
        standin.shutdown().await;
    });
}
