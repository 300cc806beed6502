//! Catalog server benchmarks (figures, not assertions):
//! `cargo bench -p olmkit-catalog-server --bench registry_bench`.
//!
//! Declared by the `olmkit-catalog-server` package (so it needs only the server's dependencies in
//! release mode, not all of bundle-tool's). Runs the real `catalog-server` binary — the same
//! server as `bundle-tool serve` — on the community-sized catalog that the catalog
//! benchmark generates and caches (`cargo bench -p bundle-tool --bench catalog_bench` writes it
//! once to $OLMKIT_BENCH_DIR or /tmp/olmkit-bench: 330 packages, 7,000 bundles with
//! `olm.bundle.object` payloads, about 1.6 GB of JSON). `OLMKIT_BENCH_CATALOG` points the
//! benchmark at another catalog directory instead. Measured:
//! - building the index (what `bundle-tool catalog index` runs; this benchmark re-executes
//!   itself under /usr/bin/time to get the build's own peak RSS);
//! - `catalog-server` from plain FBC and from the index: time from process start to health
//!   `SERVING` (polled with a tonic health client), RSS once serving;
//! - 8 concurrent tonic clients: `GetBundle` latency (p50/p95/p99, full CSV + manifests read
//!   lazily from disk) and whole-catalog `ListBundles` streams; the server's peak RSS after all
//!   of it;
//! - the same `GetBundle` load while one raw HTTP/2 connection holds 600 `ListBundles` streams
//!   open and never reads them (the starvation attack of issue 18): p99 against the unloaded
//!   run, how many streams the server let the attacker keep, the server's threads and RSS.
//!
//! `opm` is not installed here, so its figures are the ones reported in the issue: SERVING
//! after ~177 s with 2.4 GB RSS from plain FBC, 27-38 s from its prebuilt cache.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_catalog_server::build::{BuildOptions, build_index};
use olmkit_catalog_server::index::write_index;
use olmkit_catalog_server::pb::{self, registry_client::RegistryClient};
use olmkit_catalog_server::tonic::transport::{Channel, Endpoint};
use olmkit_catalog_server::tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CLIENTS: usize = 8;
const GETS_PER_CLIENT: usize = 150;
const CATALOG_GENERATOR: &str = "olmkit catalog bench generator v1";

fn bench_dir() -> PathBuf {
    std::env::var_os("OLMKIT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/olmkit-bench"))
}

fn catalog() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OLMKIT_BENCH_CATALOG") {
        return Some(PathBuf::from(p));
    }
    let root = bench_dir();
    let marker = std::fs::read_to_string(root.join("community-catalog.done")).ok()?;
    (marker == CATALOG_GENERATOR).then(|| root.join("community-catalog"))
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                total += dir_size(&p);
            } else if let Ok(m) = e.metadata() {
                total += m.len();
            }
        }
    }
    total
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_catalog-server")
}

/// Set when this benchmark re-executes itself to build an index: `<catalog>\n<out>`.
const INDEX_ONLY: &str = "REGISTRY_BENCH_INDEX_ONLY";

/// Builds and writes the index like `bundle-tool catalog index` (checksums included).
fn build_and_write(catalog: &Path, out: &Path) -> bool {
    match build_index(catalog, &BuildOptions::default()) {
        Ok(built) => write_index(out, &built.index).is_ok(),
        Err(e) => {
            eprintln!("index build failed: {e}");
            false
        }
    }
}

/// Builds the index in a child process under /usr/bin/time -v: (wall s, peak RSS MB, success).
fn measure_index(catalog: &Path, out: &Path) -> (f64, f64, bool) {
    let t = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(std::env::current_exe().expect("own path"))
        .env(
            INDEX_ONLY,
            format!("{}\n{}", catalog.display(), out.display()),
        )
        .stdout(Stdio::null())
        .output()
        .expect("run /usr/bin/time");
    let wall = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss_kb: f64 = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN);
    (wall, rss_kb / 1024.0, out.status.success())
}

fn proc_status_mb(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Server {
    child: Child,
    endpoint: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

async fn connect(endpoint: &str) -> Channel {
    loop {
        if let Ok(c) = Endpoint::from_shared(endpoint.to_string())
            .expect("endpoint")
            .connect()
            .await
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts `bundle-tool serve` and returns it with the seconds it took to report SERVING.
async fn start(catalog: &Path, extra: &[&str]) -> (Server, f64) {
    let port = free_port();
    let t = Instant::now();
    let child = Command::new(bin())
        .arg(catalog)
        .args(["--address", "127.0.0.1", "--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start catalog-server");
    let server = Server {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    let mut health = HealthClient::new(connect(&server.endpoint).await);
    loop {
        let s = health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .map(|r| r.into_inner().status);
        if s.is_ok_and(|s| s == ServingStatus::Serving as i32) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (server, t.elapsed().as_secs_f64())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Every (package, channel, bundle) of the served catalog, from ListBundles.
async fn members(channel: Channel) -> Vec<(String, String, String)> {
    let mut client = RegistryClient::new(channel).max_decoding_message_size(256 << 20);
    let mut stream = client
        .list_bundles(pb::ListBundlesRequest {})
        .await
        .expect("ListBundles")
        .into_inner();
    let mut out = Vec::new();
    while let Some(b) = stream.message().await.expect("stream") {
        out.push((b.package_name, b.channel_name, b.csv_name));
    }
    out
}

async fn get_bundle_load(
    channel: Channel,
    all: &[(String, String, String)],
) -> (Vec<f64>, u64, f64) {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let channel = channel.clone();
        // Each client walks the catalog from its own pseudo-random starting point and stride.
        let picks: Vec<(String, String, String)> = (0..GETS_PER_CLIENT)
            .map(|i| all[(c * 7919 + i * 104_729) % all.len()].clone())
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut client = RegistryClient::new(channel).max_decoding_message_size(256 << 20);
            let mut lat = Vec::with_capacity(picks.len());
            let mut bytes = 0u64;
            for (p, ch, name) in picks {
                let t = Instant::now();
                let b = client
                    .get_bundle(pb::GetBundleRequest {
                        pkg_name: p,
                        channel_name: ch,
                        csv_name: name,
                    })
                    .await
                    .expect("GetBundle")
                    .into_inner();
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                bytes +=
                    b.csv_json.len() as u64 + b.object.iter().map(|o| o.len() as u64).sum::<u64>();
            }
            (lat, bytes)
        }));
    }
    let mut lat = Vec::new();
    let mut bytes = 0;
    for t in tasks {
        let (l, b) = t.await.expect("client task");
        lat.extend(l);
        bytes += b;
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    (lat, bytes, t.elapsed().as_secs_f64())
}

/// One HTTP/2 connection opening `streams` `ListBundles` calls and never reading them. Returns
/// what keeps them open (drop it to end the attack) and how many the server kept open.
async fn unread_streams(endpoint: &str, streams: usize) -> (Vec<h2::RecvStream>, usize) {
    let addr = endpoint.trim_start_matches("http://").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut pending = Vec::new();
    for _ in 0..streams {
        let mut client = client.clone().ready().await.expect("h2 ready");
        let request = http::Request::post(format!("http://{addr}/api.Registry/ListBundles"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .expect("request");
        let (response, mut send) = client.send_request(request, false).expect("send");
        send.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), true)
            .expect("send body");
        pending.push(response);
    }
    let mut open = Vec::new();
    for response in pending {
        let response = response.await.expect("response");
        if response.headers().get("grpc-status").is_none() {
            open.push(response.into_body());
        }
    }
    let n = open.len();
    (open, n)
}

async fn list_bundles_load(channel: Channel) -> (f64, usize) {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let channel = channel.clone();
        tasks.push(tokio::spawn(async move { members(channel).await.len() }));
    }
    let mut n = 0;
    for t in tasks {
        n = t.await.expect("list task");
    }
    (t.elapsed().as_secs_f64(), n)
}

fn main() {
    if let Some(job) = std::env::var_os(INDEX_ONLY) {
        let job = job.to_string_lossy().into_owned();
        let (catalog, out) = job.split_once('\n').expect("catalog and output");
        std::process::exit(i32::from(!build_and_write(
            Path::new(catalog),
            Path::new(out),
        )));
    }
    // `cargo bench` passes --bench; `cargo test --benches` runs us with no args: keep that cheap.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!(
            "registry_bench: run with `cargo bench -p olmkit-catalog-server --bench registry_bench`"
        );
        return;
    }
    let Some(catalog) = catalog() else {
        eprintln!(
            "registry_bench: no benchmark catalog in {}: generate it once with \
             `cargo bench -p bundle-tool --bench catalog_bench` (or set OLMKIT_BENCH_CATALOG)",
            bench_dir().display()
        );
        return;
    };
    let index = bench_dir().join("registry.index");
    let index_s = index.to_str().expect("utf-8 path").to_string();
    println!(
        "machine: {} cores; catalog {} ({:.2} GB)",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        catalog.display(),
        dir_size(&catalog) as f64 / 1e9
    );
    // Warm the page cache so the figures measure the server, not the disk.
    let _ = measure_index(&catalog, &index);
    let (w, r, ok) = measure_index(&catalog, &index);
    let index_kb = std::fs::metadata(&index)
        .map(|m| m.len() / 1024)
        .unwrap_or(0);
    println!(
        "index build (catalog index):    {w:6.2} s wall, {r:6.0} MB peak RSS, ok={ok}, index {index_kb} KiB"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (scan, t_scan) = start(&catalog, &["--no-index"]).await;
        let pid = scan.child.id();
        println!(
            "catalog-server, plain FBC:       {t_scan:6.2} s to SERVING, {:6.0} MB RSS    (opm serve: ~177 s, 2.4 GB)",
            proc_status_mb(pid, "VmRSS:")
        );
        drop(scan);

        let (server, t_index) = start(&catalog, &["--index", &index_s]).await;
        let pid = server.child.id();
        println!(
            "catalog-server, index:           {t_index:6.2} s to SERVING, {:6.0} MB RSS    (opm serve from its cache: 27-38 s)",
            proc_status_mb(pid, "VmRSS:")
        );
        let channel = connect(&server.endpoint).await;
        let all = members(channel.clone()).await;
        let (lat, bytes, wall) = get_bundle_load(channel.clone(), &all).await;
        println!(
            "GetBundle x{} ({CLIENTS} clients): p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, {:.0} req/s, {:.0} MB/s of CSV+manifests",
            lat.len(),
            percentile(&lat, 0.50),
            percentile(&lat, 0.95),
            percentile(&lat, 0.99),
            lat.len() as f64 / wall,
            bytes as f64 / 1e6 / wall
        );
        let p99_base = percentile(&lat, 0.99);
        let threads_before = proc_status_mb(pid, "Threads:") * 1024.0;
        let (held, open) = unread_streams(&server.endpoint, 600).await;
        // Fresh connections for the other clients, as other OLM components would have.
        let (lat, _, _) = get_bundle_load(connect(&server.endpoint).await, &all).await;
        println!(
            "GetBundle x{} during the attack (one connection, 600 unread ListBundles, {open} kept open): \
             p50 {:.1} ms, p99 {:.1} ms (unloaded p99 {p99_base:.1} ms); threads {threads_before:.0} -> {:.0}; RSS {:.0} MB",
            lat.len(),
            percentile(&lat, 0.50),
            percentile(&lat, 0.99),
            proc_status_mb(pid, "Threads:") * 1024.0,
            proc_status_mb(pid, "VmRSS:")
        );
        drop(held);
        let (wall, n) = list_bundles_load(channel).await;
        println!(
            "ListBundles, whole catalog x{CLIENTS} concurrent streams: {wall:.2} s ({n} bundles each)"
        );
        println!(
            "server peak RSS over load + queries: {:.0} MB (target < 300 MB)",
            proc_status_mb(pid, "VmHWM:")
        );
        drop(server);
        load_scaling().await;
    });
}

/// Start-to-SERVING from one catalog file of 10, 40 and 160 MB in three shapes (written by
/// `catalog_bench`'s scaling section into the bench dir; skipped when absent): loading must be
/// linear in the input, whatever its layout (issue 18: one big file loaded in quadratic time).
async fn load_scaling() {
    println!("load scaling, one file, --no-index (time per MB should be flat):");
    let shapes = [
        ("JSON stream", "one-file-{}mb-json"),
        ("YAML documents", "one-file-{}mb-yaml"),
        ("tiny blobs", "tiny-blobs-{}mb"),
    ];
    for (shape, pattern) in shapes {
        let mut per_mb = Vec::new();
        for mb in [10, 40, 160] {
            let dir = bench_dir().join(pattern.replace("{}", &mb.to_string()));
            if !dir.is_dir() {
                println!(
                    "  {shape}: {} missing; run catalog_bench first",
                    dir.display()
                );
                return;
            }
            let size = dir_size(&dir) as f64 / (1u64 << 20) as f64;
            let (server, secs) = start(&dir, &["--no-index"]).await;
            drop(server);
            per_mb.push(secs / size);
            println!(
                "  {shape:16} {size:6.1} MB: SERVING after {secs:6.2} s, {:6.2} ms/MB",
                secs / size * 1000.0
            );
        }
        let max = per_mb.iter().copied().fold(f64::MIN, f64::max);
        let min = per_mb.iter().copied().fold(f64::MAX, f64::min);
        println!("  {shape:16} time per MB max/min: {:.2}", max / min);
    }
}
