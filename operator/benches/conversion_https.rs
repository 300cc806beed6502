//! The conversion webhook over real HTTPS: the `operator webhook` binary as a separate process,
//! driven from loopback by an in-bench Rust client (reqwest + rustls, keep-alive) and, when
//! installed, by `wrk` as a peer load generator.
//!
//! Figures:
//! - throughput: closed loop, 4 connections, 100-object reviews (v1 -> v1alpha1, which writes the
//!   conversion annotation, alternating with v1alpha1 -> v1, which reads it); objects/s on the
//!   wall clock and per second of server CPU (objects/s/core), from /proc/<pid>/stat;
//! - latency: open loop (requests sent on a fixed schedule whether or not earlier ones finished;
//!   latency counted from the scheduled send time, so queueing is not hidden) at 1,000 req/s with
//!   1-object reviews and at 200 req/s with 100-object reviews: p50, p90, p99, p99.9, max;
//! - wrk (closed loop, its own HTTP/1.1 + OpenSSL client) for the same two bodies.
//!
//! Run: `cargo bench -p memcached-operator --bench conversion_https`. Under `cargo test` (no
//! `--bench` argument) it runs for a fraction of a second as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Writes a CA-signed serving certificate for localhost into `dir`; returns the CA PEM.
fn certificates(dir: &Path) -> String {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("write");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("write");
    ca_cert.pem()
}

fn start(cert_dir: &Path) -> Server {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_operator"))
        .args(["webhook", "--webhook-bind-address", "127.0.0.1"])
        .args(["--webhook-port", &port.to_string()])
        .arg("--webhook-cert-path")
        .arg(cert_dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start operator webhook");
    Server {
        child,
        base: format!("https://localhost:{port}"),
    }
}

/// utime + stime of `pid` in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields after the command name start at field 3 (state); utime and stime are 14 and 15.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn client(ca_pem: &str) -> reqwest::Client {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der.expect("pem")).expect("root");
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

fn rich_v1(i: usize) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1", "kind": "Memcached",
        "metadata": {"name": format!("cache-{i}"), "namespace": "shop", "uid": format!("uid-{i}"), "resourceVersion": "1", "generation": 2,
                     "creationTimestamp": "2026-03-14T09:26:53Z", "labels": {"app": "shop"}},
        "spec": {"replicas": 3, "image": "quay.io/acme/memcached:1.6.39",
                 "memcached": {"memoryLimitMiB": 256, "maxConnections": 4096, "threads": 8, "extraArgs": ["-o", "modern"]},
                 "resources": {"limits": {"cpu": "2", "memory": "384Mi"}}, "port": 11311,
                 "podTemplate": {"nodeSelector": {"kubernetes.io/os": "linux"}}},
        "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "nodes": ["a", "b", "c"], "selector": "app=shop",
                   "conditions": [{"type": "Available", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-03-14T09:27:10Z"}]}
    })
}

fn review(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "desiredAPIVersion": desired, "objects": objects}
    }))
    .expect("encode")
}

/// A v1 -> v1alpha1 body and the v1alpha1 -> v1 body of its answer (annotation included).
fn bodies(n: usize) -> (Vec<u8>, Vec<u8>) {
    let down = review("cache.example.com/v1alpha1", (0..n).map(rich_v1).collect());
    let (reply, _) = olmkit_runtime::webhook::review::answer(
        &down,
        &[std::sync::Arc::new(memcached_api::conversion::converter())],
    );
    let answer: Value = serde_json::from_slice(&reply.body()).expect("answer");
    let spokes = answer["response"]["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(spokes.len(), n);
    (down, review("cache.example.com/v1", spokes))
}

async fn send(client: &reqwest::Client, url: &str, body: Vec<u8>) -> bool {
    match client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
        _ => false,
    }
}

async fn throughput(
    client: &reqwest::Client,
    url: &str,
    pid: u32,
    run: Duration,
    connections: usize,
) {
    let (down, up) = bodies(100);
    let cpu_before = cpu_seconds(pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..connections {
        let client = client.clone();
        let url = url.to_string();
        let (down, up) = (down.clone(), up.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            let mut i = c;
            while started.elapsed() < run {
                let body = if i % 2 == 0 { down.clone() } else { up.clone() };
                if send(&client, &url, body).await {
                    done += 100;
                }
                i += 1;
            }
            done
        }));
    }
    let mut objects = 0u64;
    for t in tasks {
        objects += t.await.unwrap_or(0);
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu_before;
    println!(
        "throughput  {connections} connections, 100-object reviews: {:.0} objects/s wall, server CPU {:.2}s over {:.2}s -> {:.0} objects/s/core",
        objects as f64 / wall,
        cpu,
        wall,
        if cpu > 0.0 {
            objects as f64 / cpu
        } else {
            f64::NAN
        }
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn open_loop(
    client: &reqwest::Client,
    url: &str,
    pid: u32,
    body: Vec<u8>,
    objects: usize,
    rate: u32,
    run: Duration,
) {
    let total = (run.as_secs_f64() * rate as f64) as usize;
    let interval = Duration::from_secs(1) / rate;
    let cpu_before = cpu_seconds(pid);
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        let at = start + interval * i as u32;
        tokio::time::sleep_until(at).await;
        let client = client.clone();
        let url = url.to_string();
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let ok = send(&client, &url, body).await;
            (ok, tokio::time::Instant::now() - at)
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    let mut failed = 0;
    for t in tasks {
        match t.await {
            Ok((true, latency)) => latencies.push(latency),
            _ => failed += 1,
        }
    }
    let cpu = cpu_seconds(pid) - cpu_before;
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "open loop   {rate} req/s x {objects}-object review, {} requests ({failed} failed): p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms  (server CPU {:.0}%)",
        latencies.len(),
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 90.0)),
        ms(percentile(&latencies, 99.0)),
        ms(percentile(&latencies, 99.9)),
        ms(latencies.last().copied().unwrap_or_default()),
        100.0 * cpu / run.as_secs_f64()
    );
}

/// `wrk` as a peer generator (closed loop), if installed.
fn wrk(url: &str, dir: &Path, name: &str, body: &[u8], objects: usize, run: Duration, pid: u32) {
    if Command::new("wrk").arg("--version").output().is_err() {
        println!(
            "wrk         not installed (tests/scripts/setup.sh installs it); peer figures skipped"
        );
        return;
    }
    let body_path = dir.join(format!("{name}.json"));
    std::fs::write(&body_path, body).expect("write body");
    let script = dir.join(format!("{name}.lua"));
    let mut f = std::fs::File::create(&script).expect("script");
    writeln!(
        f,
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nlocal f = io.open(\"{}\", \"rb\")\nwrk.body = f:read(\"*a\")\nf:close()",
        body_path.display()
    )
    .expect("write script");
    let cpu_before = cpu_seconds(pid);
    let out = Command::new("wrk")
        .args(["-t1", "-c4", "--latency"])
        .arg(format!("-d{}s", run.as_secs().max(1)))
        .arg("-s")
        .arg(&script)
        .arg(url)
        .output()
        .expect("run wrk");
    let cpu = cpu_seconds(pid) - cpu_before;
    let text = String::from_utf8_lossy(&out.stdout);
    let rps: f64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    println!(
        "wrk         -t1 -c4 closed loop, {objects}-object review: {rps:.0} req/s = {:.0} objects/s, server CPU {:.2}s -> {:.0} objects/s/core",
        rps * objects as f64,
        cpu,
        if cpu > 0.0 {
            rps * objects as f64 * run.as_secs().max(1) as f64 / cpu
        } else {
            f64::NAN
        }
    );
    for line in text.lines().filter(|l| {
        let l = l.trim_start();
        l.starts_with("Latency")
            || l.starts_with("50%")
            || l.starts_with("90%")
            || l.starts_with("99%")
            || l.starts_with("Non-2xx")
    }) {
        println!("            wrk: {}", line.trim());
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = certificates(dir.path());
    let server = start(dir.path());
    let pid = server.child.id();
    let url = format!("{}/convert", server.base);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (long, short) = if full {
        (Duration::from_secs(10), Duration::from_secs(5))
    } else {
        (Duration::from_millis(200), Duration::from_millis(200))
    };
    println!(
        "conversion_https: `operator webhook` pid {pid} on {}, {} CPUs, client on a single-threaded runtime in this process",
        server.base,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    runtime.block_on(async {
        let client = client(&ca);
        // Wait until the server answers.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (one, _) = bodies(1);
        while !send(&client, &url, one.clone()).await {
            assert!(Instant::now() < deadline, "webhook did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Warm-up.
        for _ in 0..200 {
            send(&client, &url, one.clone()).await;
        }
        throughput(&client, &url, pid, short, 4).await;
        open_loop(&client, &url, pid, one.clone(), 1, 1000, long).await;
        let (hundred, _) = bodies(100);
        open_loop(&client, &url, pid, hundred.clone(), 100, 200, long).await;
        if full {
            wrk(&url, dir.path(), "one", &one, 1, short, pid);
            wrk(&url, dir.path(), "hundred", &hundred, 100, short, pid);
        }
    });
}
