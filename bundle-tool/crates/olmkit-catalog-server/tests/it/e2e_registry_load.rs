//! Load and abuse tests of the real `catalog-server` binary (loopback only, bounded, seconds):
//!
//! - one HTTP/2 connection opens 600 `ListBundles` streams and never reads them while other
//!   clients call `GetBundle`: the others all succeed with a p99 within a generous multiple of
//!   the unloaded baseline, the attacker gets `RESOURCE_EXHAUSTED` beyond its per-connection
//!   share, the server's threads and RSS stay bounded (`/proc/<pid>/status`) and health answers
//!   `SERVING`;
//! - a server whose stream budget stays exhausted reports `NOT_SERVING`, and `SERVING` again
//!   once the streams go away;
//! - a long name is echoed in the error only as a bounded prefix, and a megabyte-long one is
//!   refused unread (`RESOURCE_EXHAUSTED`);
//! - SIGTERM while the catalog is still loading ends the process at once.
//!
//! The attacker speaks raw HTTP/2 with the `h2` crate, so nothing in a gRPC client library
//! reads or cancels its streams behind its back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::registry_harness as harness;

use bytes::Bytes;
use harness::Server;
use olmkit_catalog_server::pb::{self, registry_client::RegistryClient};
use olmkit_catalog_server::tonic::transport::{Channel, Endpoint};
use olmkit_catalog_server::tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_catalog-server"))
}

const PACKAGES: usize = 20;
const BUNDLES: usize = 40;
/// Bytes of padding per bundle, so a whole `ListBundles` (800 bundles, ~3 MB) is far more than
/// HTTP/2 flow control lets through unread.
const PAD: usize = 4096;

/// A valid FBC catalog: `PACKAGES` packages with one channel of `BUNDLES` bundles each, every
/// bundle with an image (so `ListBundles` sends metadata only) and a padding property.
fn write_catalog(dir: &Path) {
    let pad = "x".repeat(PAD);
    for p in 0..PACKAGES {
        let pkg = format!("pkg-{p:03}");
        let pdir = dir.join(&pkg);
        std::fs::create_dir_all(&pdir).unwrap();
        let mut out =
            std::io::BufWriter::new(std::fs::File::create(pdir.join("catalog.json")).unwrap());
        let write = |out: &mut std::io::BufWriter<std::fs::File>, v: serde_json::Value| {
            serde_json::to_writer(&mut *out, &v).unwrap();
            out.write_all(b"\n").unwrap();
        };
        write(
            &mut out,
            json!({"schema": "olm.package", "name": pkg, "defaultChannel": "stable"}),
        );
        let entries: Vec<_> = (0..BUNDLES)
            .map(|b| {
                let mut e = json!({"name": format!("{pkg}.v1.0.{b}")});
                if b > 0 {
                    e["replaces"] = json!(format!("{pkg}.v1.0.{}", b - 1));
                }
                e
            })
            .collect();
        write(
            &mut out,
            json!({"schema": "olm.channel", "package": pkg, "name": "stable", "entries": entries}),
        );
        for b in 0..BUNDLES {
            write(
                &mut out,
                json!({
                    "schema": "olm.bundle",
                    "package": pkg,
                    "name": format!("{pkg}.v1.0.{b}"),
                    "image": format!("quay.io/example/{pkg}-bundle:v1.0.{b}"),
                    "properties": [
                        {"type": "olm.package", "value": {"packageName": pkg, "version": format!("1.0.{b}")}},
                        {"type": "example.padding", "value": {"pad": pad}},
                    ],
                }),
            );
        }
    }
}

/// Reads one field (in kB for memory) of `/proc/<pid>/status`.
fn proc_status(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

async fn connect(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(20))
        .connect()
        .await
        .unwrap()
}

async fn health(channel: Channel) -> ServingStatus {
    let answer = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    ServingStatus::try_from(answer.status).unwrap()
}

async fn wait_serving(addr: &str) -> Channel {
    let channel = connect(addr).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while health(channel.clone()).await != ServingStatus::Serving {
        assert!(Instant::now() < deadline, "never SERVING");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    channel
}

/// `clients` clients on their own connections, each calling `GetBundle` `calls` times; every
/// call must succeed. Returns the latencies in ms, sorted.
async fn get_bundles(addr: &str, clients: usize, calls: usize) -> Vec<f64> {
    let mut tasks = Vec::new();
    for c in 0..clients {
        let channel = connect(addr).await;
        tasks.push(tokio::spawn(async move {
            let mut client = RegistryClient::new(channel);
            let mut lat = Vec::new();
            for i in 0..calls {
                let pkg = format!("pkg-{:03}", (c * 7 + i) % PACKAGES);
                let started = Instant::now();
                let bundle = client
                    .get_bundle(pb::GetBundleRequest {
                        pkg_name: pkg.clone(),
                        channel_name: "stable".into(),
                        csv_name: format!("{pkg}.v1.0.{}", i % BUNDLES),
                    })
                    .await
                    .unwrap_or_else(|e| panic!("GetBundle failed during the attack: {e}"))
                    .into_inner();
                lat.push(started.elapsed().as_secs_f64() * 1000.0);
                assert_eq!(bundle.package_name, pkg);
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by(f64::total_cmp);
    all
}

fn p99(sorted: &[f64]) -> f64 {
    sorted[((sorted.len() as f64 * 0.99).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// The gRPC request frame of an empty message.
const EMPTY_MESSAGE: [u8; 5] = [0, 0, 0, 0, 0];

/// An attacker: one HTTP/2 connection, `streams` `ListBundles` calls, none of them read.
/// Returns the open response bodies (kept alive, unread) and how many calls were refused
/// (`RESOURCE_EXHAUSTED`, or HTTP/2 `REFUSED_STREAM`).
struct Attack {
    _open: Vec<h2::RecvStream>,
    refused: usize,
    other: Vec<String>,
    _conn: tokio::task::JoinHandle<()>,
}

async fn attack(addr: &str, streams: usize) -> Attack {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut pending = Vec::new();
    for _ in 0..streams {
        let mut client = client.clone().ready().await.unwrap();
        let request = http::Request::post(format!("http://{addr}/api.Registry/ListBundles"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut send) = client.send_request(request, false).unwrap();
        send.send_data(Bytes::from_static(&EMPTY_MESSAGE), true)
            .unwrap();
        pending.push(response);
    }
    let mut open = Vec::new();
    let mut refused = 0;
    let mut other = Vec::new();
    for response in pending {
        let response = match response.await {
            Ok(response) => response,
            // Streams sent before the client saw the server's max_concurrent_streams are
            // refused by HTTP/2 itself.
            Err(e) if e.reason() == Some(h2::Reason::REFUSED_STREAM) => {
                refused += 1;
                continue;
            }
            Err(e) => panic!("attacker stream failed: {e}"),
        };
        // A refused call is "trailers only": grpc-status in the headers.
        match response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
        {
            Some("8") => refused += 1,
            Some(code) => other.push(code.to_string()),
            None => open.push(response.into_body()),
        }
    }
    Attack {
        _open: open,
        refused,
        other,
        _conn: conn,
    }
}

/// A socket whose reads can be stopped: the client then never reads what the server sends,
/// while its own writes (requests) went out before.
struct Pausable {
    inner: tokio::net::TcpStream,
    paused: Arc<AtomicBool>,
}

impl tokio::io::AsyncRead for Pausable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.paused.load(Ordering::SeqCst) {
            // Never ready again: nothing is read from the socket any more.
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Pausable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The hostile variant: the client advertises 1 GiB flow-control windows (so HTTP/2 flow
/// control does not hold the server back), stops reading its socket, and sends as many
/// `ListBundles` calls as the server's `max_concurrent_streams` allows. What the server can then
/// buffer is bounded by its per-stream send buffer, not by the catalog.
async fn attack_without_reading(
    addr: &str,
) -> (tokio::task::JoinHandle<()>, Vec<h2::client::ResponseFuture>) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let paused = Arc::new(AtomicBool::new(false));
    let io = Pausable {
        inner: tcp,
        paused: paused.clone(),
    };
    let (client, conn) = h2::client::Builder::new()
        .initial_window_size(1 << 30)
        .initial_connection_window_size(1 << 30)
        .handshake::<_, Bytes>(io)
        .await
        .unwrap();
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    // From here on nothing is read; the requests below are still written.
    paused.store(true, Ordering::SeqCst);
    let mut pending = Vec::new();
    let max = olmkit_catalog_server::limits::DEFAULT_MAX_CONCURRENT_STREAMS as usize;
    for _ in 0..max {
        let mut client = client.clone().ready().await.unwrap();
        let request = http::Request::post(format!("http://{addr}/api.Registry/ListBundles"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut send) = client.send_request(request, false).unwrap();
        send.send_data(Bytes::from_static(&EMPTY_MESSAGE), true)
            .unwrap();
        pending.push(response);
    }
    (conn, pending)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn unread_list_bundles_streams_do_not_starve_other_clients() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    let server = Server::start(&bin(), &[cat.to_str().unwrap(), "--no-index"]);
    let pid = server.pid();
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        // Warm up, then the unloaded baseline.
        get_bundles(&server.addr, 2, 20).await;
        let base = get_bundles(&server.addr, 4, 50).await;
        let threads_before = proc_status(pid, "Threads:");
        let rss_before = proc_status(pid, "VmRSS:");

        let attacker = attack(&server.addr, 600).await;
        let open = 600 - attacker.refused - attacker.other.len();
        assert!(
            attacker.other.is_empty(),
            "unexpected codes {:?}",
            attacker.other
        );
        assert!(
            open <= olmkit_catalog_server::limits::DEFAULT_MAX_OPEN_STREAMS_PER_CONNECTION,
            "{open} streams open on one connection"
        );
        assert!(open > 0, "the attacker's first streams are served");

        let during = get_bundles(&server.addr, 4, 50).await;
        assert_eq!(health(channel.clone()).await, ServingStatus::Serving);
        let threads = proc_status(pid, "Threads:");
        let rss = proc_status(pid, "VmRSS:");
        let peak = proc_status(pid, "VmHWM:");
        let (p_base, p_during) = (p99(&base), p99(&during));
        eprintln!(
            "FIGURES: GetBundle p99 unloaded {p_base:.2} ms, during the attack {p_during:.2} ms \
             ({} calls); attacker: {open} open, {} refused; threads {threads_before} -> {threads}; \
             RSS {} -> {} MiB (peak {} MiB)",
            during.len(),
            attacker.refused,
            rss_before / 1024,
            rss / 1024,
            peak / 1024
        );
        // Generous: a loaded 2-core machine may be slow, but not starved (the bug: every call
        // timed out).
        assert!(
            p_during <= p_base * 20.0 + 1000.0,
            "p99 {p_during:.1} ms during the attack vs {p_base:.1} ms before"
        );
        assert!(threads <= 64, "{threads} threads (was 515 before the fix)");
        assert!(
            rss.saturating_sub(rss_before) < 64 * 1024,
            "RSS grew from {rss_before} kB to {rss} kB"
        );
        drop(attacker);
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn a_client_that_stops_reading_its_socket_costs_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    let server = Server::start(&bin(), &[cat.to_str().unwrap(), "--no-index"]);
    let pid = server.pid();
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        get_bundles(&server.addr, 2, 10).await;
        let rss_before = proc_status(pid, "VmRSS:");
        // Two such connections, so the server-wide budget is exercised as well.
        let first = attack_without_reading(&server.addr).await;
        let second = attack_without_reading(&server.addr).await;
        // Let the server push all it can into the stalled connections.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let during = get_bundles(&server.addr, 4, 25).await;
        assert_eq!(health(channel.clone()).await, ServingStatus::Serving);
        let rss = proc_status(pid, "VmRSS:");
        let threads = proc_status(pid, "Threads:");
        eprintln!(
            "FIGURES: two connections with 1 GiB windows not reading their sockets: other \
             clients' GetBundle p99 {:.2} ms; RSS {} -> {} MiB; threads {threads}",
            p99(&during),
            rss_before / 1024,
            rss / 1024
        );
        // 2 x 16 streams x h2's 400 KiB send buffer is ~13 MiB; the catalog streamed would be
        // 2 x 16 x 3.3 MB.
        assert!(
            rss.saturating_sub(rss_before) < 48 * 1024,
            "RSS grew from {rss_before} kB to {rss} kB"
        );
        assert!(threads <= 64, "{threads} threads");
        drop((first, second));
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn an_exhausted_stream_budget_reports_not_serving_until_it_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    let server = Server::start(
        &bin(),
        &[
            cat.to_str().unwrap(),
            "--no-index",
            "--max-open-streams",
            "4",
            "--max-open-streams-per-connection",
            "4",
            "--overload-grace-secs",
            "1",
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        let attacker = attack(&server.addr, 6).await;
        assert_eq!(attacker.refused, 2, "{:?}", attacker.other);
        // Another connection's stream is refused too: the server-wide budget is used up.
        let mut other = RegistryClient::new(connect(&server.addr).await);
        let refused = other
            .list_bundles(pb::ListBundlesRequest {})
            .await
            .expect_err("no stream slot left");
        assert_eq!(
            refused.code(),
            olmkit_catalog_server::tonic::Code::ResourceExhausted
        );
        assert!(
            refused.message().contains("limit 4"),
            "{}",
            refused.message()
        );
        // Unary calls still work.
        other
            .get_package(pb::GetPackageRequest {
                name: "pkg-000".into(),
            })
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while health(channel.clone()).await != ServingStatus::NotServing {
            assert!(
                Instant::now() < deadline,
                "never NOT_SERVING:\n{}",
                server.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(attacker);
        let deadline = Instant::now() + Duration::from_secs(20);
        while health(channel.clone()).await != ServingStatus::Serving {
            assert!(
                Instant::now() < deadline,
                "never SERVING again:\n{}",
                server.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(log.contains("health reports NOT_SERVING"), "{log}");
}

#[test]
fn errors_echo_only_a_bounded_prefix_of_client_input() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    let server = Server::start(&bin(), &[cat.to_str().unwrap(), "--no-index"]);
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        let mut client = RegistryClient::new(channel);
        // Long names that still fit in a request (--max-request-bytes, 4 KiB by default).
        let long = "n".repeat(1_000);
        let err = client
            .get_bundle(pb::GetBundleRequest {
                pkg_name: long.clone(),
                channel_name: long.clone(),
                csv_name: long,
            })
            .await
            .expect_err("no such package");
        assert_eq!(err.code(), olmkit_catalog_server::tonic::Code::NotFound);
        assert!(err.message().len() < 512, "{} bytes", err.message().len());
        assert!(err.message().contains("(1000 bytes)"), "{}", err.message());
        // A megabyte-long name does not even get read.
        let huge = "n".repeat(1 << 20);
        let err = client
            .get_bundle(pb::GetBundleRequest {
                pkg_name: huge,
                ..Default::default()
            })
            .await
            .expect_err("too large");
        assert_eq!(
            err.code(),
            olmkit_catalog_server::tonic::Code::ResourceExhausted
        );
        assert!(err.message().len() < 512, "{} bytes", err.message().len());
    });
    server.stop();
}

#[test]
fn sigterm_during_a_slow_load_exits_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    // The hidden delay blocks the loader thread, as a load of a huge catalog does.
    let server = Server::start(
        &bin(),
        &[
            cat.to_str().unwrap(),
            "--no-index",
            "--debug-load-delay-ms",
            "600000",
        ],
    );
    server.wait_log("delaying the load", Duration::from_secs(30));
    let rt = runtime();
    rt.block_on(async {
        let channel = connect(&server.addr).await;
        assert_eq!(health(channel).await, ServingStatus::NotServing);
    });
    let started = Instant::now();
    server.signal_term();
    let (status, log) = server.wait_exit(Duration::from_secs(15));
    let took = started.elapsed();
    eprintln!("FIGURES: SIGTERM during the load: exited in {took:?}");
    assert!(status.success(), "{log}");
    assert!(took < Duration::from_secs(5), "took {took:?}:\n{log}");
    assert!(log.contains("received SIGTERM"), "{log}");
}
