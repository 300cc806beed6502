//! The attacks of issue #24 against the real `catalog-server` binary, on loopback, each a
//! bounded correctness check (limits and timeouts are flags, so the tests stay fast):
//!
//! 1. HTTP/2 clients that advertise a zero flow-control window and open `ListBundles` streams
//!    they never read must not delay anyone else's `ListBundles`; such a stream is cancelled
//!    alone (`RST_STREAM(CANCEL)`) once it has waited for its client longer than
//!    `--stream-stall-timeout-secs`, and gives its slot back.
//! 2. Request messages are small: one larger than `--max-request-bytes`, or partial messages
//!    beyond the buffered-bytes budgets, are refused (`RESOURCE_EXHAUSTED`) before they are
//!    buffered, so memory stays flat and returns once the clients go; held partial messages
//!    are cancelled by the stall timeout, also on reflection's stream.
//! 3. Connections that never send the HTTP/2 preface are closed after
//!    `--handshake-timeout-secs`; connections are capped (`--max-connections`, and never above
//!    what the open-file limit allows): at the cap idle connections make room, so a health
//!    probe still gets in, and with every connection busy the server stops accepting (no busy
//!    loop) until one frees, and says so in its log.
//!
//! And the counterpart of the stall timeout: a call waiting for the server (a health `Watch`
//! with nothing new) is not cancelled.
//!
//! The attackers speak raw HTTP/2 with the `h2` crate (or plain TCP), so nothing in a gRPC client
//! library reads, resizes windows or cancels behind their backs. `OLMKIT_CATALOG_SERVER_BIN`
//! runs the suite against another build of the server (how each test was shown to fail before
//! the fix).

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
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    std::env::var_os("OLMKIT_CATALOG_SERVER_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_catalog-server")),
        PathBuf::from,
    )
}

const PACKAGES: usize = 10;
const BUNDLES: usize = 30;
/// 300 small bundles: far more than one batch of a `ListBundles` stream (the repo's 5-bundle
/// catalog fits in one and hides attack 1).
const TOTAL: usize = PACKAGES * BUNDLES;

fn write_catalog(dir: &Path) {
    for p in 0..PACKAGES {
        let pkg = format!("pkg-{p:03}");
        let pdir = dir.join(&pkg);
        std::fs::create_dir_all(&pdir).unwrap();
        let mut out = std::fs::File::create(pdir.join("catalog.json")).unwrap();
        let mut docs = vec![
            json!({"schema": "olm.package", "name": pkg, "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": pkg, "name": "stable",
                "entries": (0..BUNDLES).map(|b| {
                    let mut e = json!({"name": format!("{pkg}.v1.0.{b}")});
                    if b > 0 {
                        e["replaces"] = json!(format!("{pkg}.v1.0.{}", b - 1));
                    }
                    e
                }).collect::<Vec<_>>()}),
        ];
        docs.extend((0..BUNDLES).map(|b| {
            json!({
                "schema": "olm.bundle", "package": pkg, "name": format!("{pkg}.v1.0.{b}"),
                "image": format!("quay.io/example/{pkg}-bundle:v1.0.{b}"),
                "properties": [{"type": "olm.package",
                    "value": {"packageName": pkg, "version": format!("1.0.{b}")}}],
            })
        }));
        for d in docs {
            serde_json::to_writer(&mut out, &d).unwrap();
            out.write_all(b"\n").unwrap();
        }
    }
}

/// A catalog in a temporary directory and a server on it with `flags`.
fn start(flags: &[&str]) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    let mut args = vec![cat.to_str().unwrap(), "--no-index"];
    args.extend_from_slice(flags);
    let server = Server::start(&bin(), &args);
    (tmp, server)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Reads one field (kB for memory) of `/proc/<pid>/status`.
fn proc_status(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// CPU time (user + system) the process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces) are space-separated;
    // utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

async fn connect(addr: &str) -> Result<Channel, String> {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| format!("cannot connect: {e:?}"))
}

async fn health(channel: Channel) -> Result<ServingStatus, String> {
    let answer = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map_err(|e| format!("health check failed: {e}"))?
        .into_inner();
    Ok(ServingStatus::try_from(answer.status).unwrap())
}

async fn wait_serving(addr: &str) -> Channel {
    let channel = connect(addr).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while health(channel.clone()).await.unwrap() != ServingStatus::Serving {
        assert!(Instant::now() < deadline, "never SERVING");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    channel
}

/// A whole `ListBundles` read by a well-behaved client; returns how many bundles came.
async fn list_bundles(channel: Channel) -> Result<usize, String> {
    let mut client = RegistryClient::new(channel);
    let mut stream = client
        .list_bundles(pb::ListBundlesRequest {})
        .await
        .map_err(|e| format!("ListBundles refused: {e}"))?
        .into_inner();
    let mut n = 0;
    while let Some(b) = stream.message().await.map_err(|e| format!("{e}"))? {
        assert!(b.package_name.starts_with("pkg-"));
        n += 1;
    }
    Ok(n)
}

async fn get_bundle(channel: Channel, i: usize) -> Result<(), String> {
    let pkg = format!("pkg-{:03}", i % PACKAGES);
    let bundle = RegistryClient::new(channel)
        .get_bundle(pb::GetBundleRequest {
            pkg_name: pkg.clone(),
            channel_name: "stable".into(),
            csv_name: format!("{pkg}.v1.0.{}", i % BUNDLES),
        })
        .await
        .map_err(|e| format!("GetBundle failed: {e}"))?
        .into_inner();
    assert_eq!(bundle.package_name, pkg);
    Ok(())
}

/// `n` `GetBundle` calls on `channel`, one after the other, each within 10 s; their latencies in
/// milliseconds.
async fn get_bundle_latencies(channel: &Channel, n: usize) -> Vec<f64> {
    let mut ms = Vec::new();
    for i in 0..n {
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), get_bundle(channel.clone(), i))
            .await
            .expect("GetBundle within 10 s")
            .unwrap();
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    ms
}

fn p99(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[((ms.len() as f64 * 0.99).ceil() as usize).clamp(1, ms.len()) - 1]
}

/// A raw HTTP/2 connection; `window` is the initial stream window it advertises.
async fn h2_connect(addr: &str, window: u32) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake::<_, Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Opens one call of `method` (`/api.Registry/...`) and sends `body` (gRPC-framed bytes),
/// ending the request when `end` is set.
async fn h2_call(
    client: &h2::client::SendRequest<Bytes>,
    method: &str,
    body: Bytes,
    end: bool,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut client = client.clone().ready().await.unwrap();
    let request = http::Request::post(format!("http://localhost{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).unwrap();
    if !body.is_empty() || end {
        send.send_data(body, end).unwrap();
    }
    (response, send)
}

/// A gRPC message frame header announcing `len` bytes.
fn grpc_header(len: u32) -> [u8; 5] {
    let b = len.to_be_bytes();
    [0, b[0], b[1], b[2], b[3]]
}

/// How a raw call ended, as seen by its client.
#[derive(Debug)]
enum Outcome {
    /// Headers without `grpc-status`: the response is (still) open.
    Open(h2::RecvStream),
    /// Trailers-only answer with this `grpc-status`.
    Status(String),
    /// The stream was reset with this reason.
    Reset(h2::Reason),
}

async fn outcome(response: h2::client::ResponseFuture) -> Outcome {
    match response.await {
        Ok(r) => match r.headers().get("grpc-status") {
            Some(code) => Outcome::Status(code.to_str().unwrap().to_string()),
            None => Outcome::Open(r.into_body()),
        },
        Err(e) => Outcome::Reset(e.reason().unwrap_or_else(|| panic!("not a reset: {e}"))),
    }
}

/// Opens `n` `ListBundles` calls on `client` and returns the response bodies that stay open
/// (never read: with a zero window the server cannot send a byte of them).
async fn unread_list_bundles(
    client: &h2::client::SendRequest<Bytes>,
    n: usize,
) -> Vec<h2::RecvStream> {
    let mut open = Vec::new();
    for _ in 0..n {
        let (response, _send) = h2_call(
            client,
            "/api.Registry/ListBundles",
            Bytes::from_static(&[0; 5]),
            true,
        )
        .await;
        match outcome(response).await {
            Outcome::Open(body) => open.push(body),
            other => panic!("attacker's ListBundles not served: {other:?}"),
        }
    }
    open
}

/// Attack 1: two connections advertise a zero window and each hold 8 `ListBundles` streams they
/// never read (before the fix, two such streams were enough to hold the one stream worker of a
/// 2-core machine forever). Everyone else's `ListBundles` and `GetBundle` still complete well
/// within their deadlines, and health says `SERVING` because it is true.
#[test]
fn closed_window_streams_do_not_delay_other_clients() {
    let (_tmp, server) = start(&[]);
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        let started = Instant::now();
        assert_eq!(list_bundles(channel.clone()).await.unwrap(), TOTAL);
        let unloaded = started.elapsed().as_secs_f64() * 1000.0;
        let base = get_bundle_latencies(&channel, 100).await;
        let mut attackers = Vec::new();
        for _ in 0..2 {
            let client = h2_connect(&server.addr, 0).await;
            let held = unread_list_bundles(&client, 8).await;
            attackers.push((client, held));
        }
        // Let the attackers' streams get as far as they can: waiting for a window.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut ms = Vec::new();
        for i in 0..6 {
            let started = Instant::now();
            let fresh = connect(&server.addr).await.unwrap();
            let n = tokio::time::timeout(Duration::from_secs(10), list_bundles(fresh))
                .await
                .unwrap_or_else(|_| {
                    panic!("ListBundles #{i} still waiting after 10 s while the attackers hold")
                })
                .unwrap();
            assert_eq!(n, TOTAL);
            ms.push(started.elapsed().as_secs_f64() * 1000.0);
            tokio::time::timeout(Duration::from_secs(10), get_bundle(channel.clone(), i))
                .await
                .expect("GetBundle within 10 s")
                .unwrap();
        }
        let get = get_bundle_latencies(&channel, 100).await;
        assert_eq!(health(channel).await.unwrap(), ServingStatus::Serving);
        eprintln!(
            "FIGURES: attack 1 (2 connections x 8 unread ListBundles, zero window): a \
             well-behaved whole ListBundles ({TOTAL} bundles) {unloaded:.1} ms unloaded, max \
             {:.1} ms of 6 during the attack; GetBundle p99 {:.1} ms unloaded, {:.1} ms during \
             the attack (100 calls each); server peak RSS {} MiB",
            p99(ms),
            p99(base),
            p99(get),
            proc_status(server.pid(), "VmHWM:") / 1024
        );
        drop(attackers);
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

/// Attack 1, continued: a stream whose client never opens its window is cancelled alone after
/// `--stream-stall-timeout-secs` (`RST_STREAM(CANCEL)`), giving back its slot, while the
/// connection it lives on stays up.
#[test]
fn a_stream_that_cannot_send_is_cancelled_alone_after_the_stall_timeout() {
    let (_tmp, server) = start(&["--stream-stall-timeout-secs", "2"]);
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        let client = h2_connect(&server.addr, 0).await;
        let held = unread_list_bundles(&client, 8).await;
        // The connection's share of stream slots is used up.
        let (response, _send) = h2_call(
            &client,
            "/api.Registry/ListBundles",
            Bytes::from_static(&[0; 5]),
            true,
        )
        .await;
        assert!(
            matches!(outcome(response).await, Outcome::Status(ref c) if c == "8"),
            "a ninth stream on the connection is refused"
        );
        let started = Instant::now();
        for mut body in held {
            match tokio::time::timeout(Duration::from_secs(30), body.data()).await {
                Ok(Some(Err(e))) => assert_eq!(e.reason(), Some(h2::Reason::CANCEL), "{e}"),
                Ok(other) => panic!("expected a reset, got {other:?}"),
                Err(_) => panic!("a stream that cannot send is still open after 30 s"),
            }
        }
        let waited = started.elapsed();
        // Same connection: its slots are back.
        let again = unread_list_bundles(&client, 8).await;
        assert_eq!(again.len(), 8);
        assert_eq!(
            health(channel.clone()).await.unwrap(),
            ServingStatus::Serving
        );
        get_bundle(channel, 1).await.unwrap();
        eprintln!("FIGURES: 8 stalled streams cancelled {waited:?} after they were opened");
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

/// Sends a `GetPackage` message announced as `len` bytes, all but its last byte, as fast as
/// flow control lets it; returns the bytes sent and how the call ended.
async fn send_partial_message(client: h2::client::SendRequest<Bytes>, len: u32) -> (usize, String) {
    const CHUNK: usize = 16 * 1024;
    let zeros = Bytes::from(vec![0u8; CHUNK]);
    let (mut response, mut send) = h2_call(
        &client,
        "/api.Registry/GetPackage",
        Bytes::copy_from_slice(&grpc_header(len)),
        false,
    )
    .await;
    let mut sent = 0usize;
    let target = len as usize - 1;
    let answered = loop {
        if sent >= target {
            break None;
        }
        send.reserve_capacity(CHUNK.min(target - sent));
        let capacity = tokio::select! {
            r = &mut response => break Some(r),
            c = futures::future::poll_fn(|cx| send.poll_capacity(cx)) => c,
            () = tokio::time::sleep(Duration::from_secs(3)) => break None,
        };
        match capacity {
            Some(Ok(n)) if n > 0 => {
                let n = n.min(target - sent);
                if send.send_data(zeros.slice(..n), false).is_err() {
                    break None;
                }
                sent += n;
            }
            Some(Ok(_)) => {}
            _ => break None,
        }
    };
    let answer = match answered {
        Some(r) => Ok(r),
        None => match tokio::time::timeout(Duration::from_secs(5), response).await {
            Ok(r) => Ok(r),
            Err(_) => Err(()),
        },
    };
    let how = match answer {
        Ok(Ok(r)) => match r.headers().get("grpc-status") {
            Some(c) => format!("grpc-status {}", c.to_str().unwrap()),
            None => "open response".into(),
        },
        Ok(Err(e)) => format!("reset {:?}", e.reason()),
        Err(()) => "no answer".into(),
    };
    (sent, how)
}

/// Attack 2: 4 connections x 25 calls, each announcing a 4,000,000-byte `GetPackage` message and
/// sending all of it but its last byte. The server refuses each at its header
/// (`RESOURCE_EXHAUSTED`: requests are small), so its memory stays flat, other clients are
/// served, and RSS is back near where it started once the attackers go.
#[test]
fn oversized_request_messages_are_refused_before_they_are_buffered() {
    let (_tmp, server) = start(&[]);
    let pid = server.pid();
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        for i in 0..20 {
            get_bundle(channel.clone(), i).await.unwrap();
        }
        let rss_before = proc_status(pid, "VmRSS:");
        let mut clients = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let client = h2_connect(&server.addr, 65_535).await;
            for _ in 0..25 {
                tasks.push(tokio::spawn(send_partial_message(
                    client.clone(),
                    4_000_000,
                )));
            }
            clients.push(client);
        }
        let ms = get_bundle_latencies(&channel, 100).await;
        let mut sent = 0;
        let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
        for t in tasks {
            let (n, how) = t.await.unwrap();
            sent += n;
            *outcomes.entry(how).or_default() += 1;
        }
        let peak = proc_status(pid, "VmHWM:");
        let during = proc_status(pid, "VmRSS:");
        drop(clients);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = proc_status(pid, "VmRSS:");
        eprintln!(
            "FIGURES: attack 2 (100 calls x 4,000,000-byte message minus 1): {sent} bytes \
             accepted from the attackers, outcomes {outcomes:?}; others' GetBundle p99 {:.1} ms; \
             RSS {} -> {} MiB (peak {} MiB) -> {} MiB after they left",
            p99(ms),
            rss_before / 1024,
            during / 1024,
            peak / 1024,
            after / 1024
        );
        assert_eq!(
            outcomes.get("grpc-status 8"),
            Some(&100),
            "every oversized message refused with RESOURCE_EXHAUSTED: {outcomes:?}"
        );
        assert!(
            during.saturating_sub(rss_before) < 32 * 1024,
            "RSS grew from {rss_before} kB to {during} kB"
        );
        assert!(
            after.saturating_sub(rss_before) < 16 * 1024,
            "RSS {after} kB after the attackers left (was {rss_before} kB)"
        );
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

/// Opens a `GetPackage` call announcing a 4,000-byte message and sends 3,000 bytes of it: 3,005
/// bytes the server must hold until the rest comes.
async fn partial_request(
    client: &h2::client::SendRequest<Bytes>,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut body = grpc_header(4_000).to_vec();
    body.resize(5 + 3_000, b'x');
    h2_call(client, "/api.Registry/GetPackage", Bytes::from(body), false).await
}

/// Waits for the first of `calls` to be answered; it must be refused with `RESOURCE_EXHAUSTED`
/// and a message containing `why`. Returns the others (still waiting for their message).
async fn one_refused(
    calls: Vec<(h2::client::ResponseFuture, h2::SendStream<Bytes>)>,
    why: &str,
) -> Vec<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
    let (responses, sends): (Vec<_>, Vec<_>) = calls.into_iter().unzip();
    let first = tokio::time::timeout(
        Duration::from_secs(10),
        futures::future::select_all(responses),
    )
    .await
    .expect("no call refused within 10 s");
    let (answer, index, rest) = first;
    let r = answer.expect("an answer, not a reset");
    let header = |k: &str| {
        r.headers()
            .get(k)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(header("grpc-status"), "8", "{:?}", r.headers());
    assert!(header("grpc-message").contains(why), "{:?}", r.headers());
    let mut sends = sends;
    sends.remove(index);
    rest.into_iter().zip(sends).collect()
}

/// Attack 2, continued: partial messages are held only within the buffered-bytes budgets (per
/// connection and in total); beyond them a call is refused, calls whose messages arrive whole
/// are not affected, and held bytes are given back when the stall timeout cancels the calls.
#[test]
fn partial_requests_beyond_the_buffered_bytes_budgets_are_refused_and_released() {
    let (_tmp, server) = start(&[
        "--max-buffered-request-bytes-per-connection",
        "16384",
        "--max-buffered-request-bytes",
        "32768",
        "--stream-stall-timeout-secs",
        "3",
    ]);
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        let mut held = Vec::new();
        // Two connections: 5 partial messages of 3,005 bytes fit in each one's 16 KiB.
        for _ in 0..2 {
            let client = h2_connect(&server.addr, 65_535).await;
            let mut calls = Vec::new();
            for _ in 0..6 {
                calls.push(partial_request(&client).await);
            }
            held.extend(one_refused(calls, "connection").await);
        }
        assert_eq!(held.len(), 10);
        // 30,050 bytes held: a third connection's first partial message does not fit in 32 KiB.
        let third = h2_connect(&server.addr, 65_535).await;
        one_refused(vec![partial_request(&third).await], "server").await;
        // Whole messages are never held, so well-behaved calls go through meanwhile.
        for i in 0..10 {
            get_bundle(channel.clone(), i).await.unwrap();
        }
        // The stall timeout cancels the held calls, which gives their bytes back.
        for (response, _send) in held {
            let ended = tokio::time::timeout(Duration::from_secs(30), outcome(response))
                .await
                .expect("a held partial message still held after 30 s");
            assert!(
                matches!(ended, Outcome::Reset(h2::Reason::CANCEL)),
                "{ended:?}"
            );
        }
        let (response, _send) = partial_request(&third).await;
        let ended = tokio::time::timeout(Duration::from_secs(30), outcome(response))
            .await
            .expect("held, then cancelled");
        assert!(
            matches!(ended, Outcome::Reset(h2::Reason::CANCEL)),
            "held once the budget came back, then cancelled: {ended:?}"
        );
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

/// Attack 3: 300 TCP connections that never send a byte, against a server limited to 256 open
/// files. A new client (as a health probe is) still gets health and `GetBundle` answered, the
/// server does not spin, and it logs that the connection limit was reached.
#[test]
fn idle_connections_cannot_take_every_file_descriptor() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    write_catalog(&cat);
    let server = Server::start_with_open_files(&bin(), &[cat.to_str().unwrap(), "--no-index"], 256);
    let pid = server.pid();
    let rt = runtime();
    rt.block_on(async {
        drop(wait_serving(&server.addr).await);
        let idle: Vec<_> = (0..300)
            .map(|_| std::net::TcpStream::connect(&server.addr).unwrap())
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (ticks, t0) = (cpu_ticks(pid), Instant::now());
        let started = Instant::now();
        let served = tokio::time::timeout(Duration::from_secs(30), async {
            let channel = connect(&server.addr).await?;
            let status = health(channel.clone()).await?;
            Ok::<_, String>((status, channel))
        })
        .await;
        let (status, channel) = served
            .expect("no answer within 30 s while idle connections are held")
            .unwrap();
        assert_eq!(status, ServingStatus::Serving);
        let first = started.elapsed();
        let ms = get_bundle_latencies(&channel, 100).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Clock ticks are 10 ms: a spinning accept loop burns about one per 10 ms of wall time.
        let (used, wall) = (cpu_ticks(pid) - ticks, t0.elapsed());
        eprintln!(
            "FIGURES: attack 3 (300 idle TCP connections, 256 open files): a new client's \
             connection and health check {first:?}; its GetBundle p99 {:.1} ms (100 calls); \
             server CPU {} ms over {wall:?}; peak RSS {} MiB",
            p99(ms),
            used * 10,
            proc_status(pid, "VmHWM:") / 1024
        );
        assert!(
            Duration::from_millis(used * 10) < wall / 2,
            "the server used {used} ticks of CPU in {wall:?}"
        );
        drop(idle);
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(log.contains("connection limit"), "{log}");
}

/// Attack 3, continued: a connection that sends nothing (or not HTTP/2) is closed after
/// `--handshake-timeout-secs`, while a real client's idle connection stays up.
#[test]
fn connections_that_never_speak_http2_are_closed_after_the_handshake_timeout() {
    let (_tmp, server) = start(&["--handshake-timeout-secs", "1"]);
    let rt = runtime();
    let channel = rt.block_on(wait_serving(&server.addr));
    let mut silent = std::net::TcpStream::connect(&server.addr).unwrap();
    let mut http1 = std::net::TcpStream::connect(&server.addr).unwrap();
    http1
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    for (what, conn) in [("silent", &mut silent), ("HTTP/1", &mut http1)] {
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut buf = [0u8; 256];
        let closed = loop {
            match conn.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        assert!(closed, "the {what} connection is still open after 20 s");
    }
    rt.block_on(async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        get_bundle(channel, 3).await.unwrap();
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

/// Attack 3, continued: with every connection slot held by a busy connection, the server stops
/// accepting (the newcomer waits in the listen backlog; no busy loop) and logs it; as soon as a
/// slot frees, the waiting client is served.
#[test]
fn at_the_connection_cap_a_busy_server_stops_accepting_until_a_slot_frees() {
    let (_tmp, server) = start(&["--max-connections", "4"]);
    let pid = server.pid();
    let rt = runtime();
    rt.block_on(async {
        drop(wait_serving(&server.addr).await);
        let mut busy = Vec::new();
        for _ in 0..4 {
            let client = h2_connect(&server.addr, 0).await;
            let held = unread_list_bundles(&client, 1).await;
            busy.push((client, held));
        }
        let (ticks, t0) = (cpu_ticks(pid), Instant::now());
        let waiting = connect(&server.addr).await.unwrap();
        let refused =
            tokio::time::timeout(Duration::from_secs(2), get_bundle(waiting.clone(), 0)).await;
        assert!(
            !matches!(refused, Ok(Ok(()))),
            "a fifth connection was served"
        );
        let (used, wall) = (cpu_ticks(pid) - ticks, t0.elapsed());
        assert!(
            Duration::from_millis(used * 10) < wall / 2,
            "the server used {used} ticks of CPU in {wall:?}"
        );
        drop(busy.pop());
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if get_bundle(waiting.clone(), 1).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await
        .expect("served once a slot freed");
        drop(busy);
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(log.contains("connection limit (4) reached"), "{log}");
}

/// Calls that wait for the server, not for their client, are not stalls: a health `Watch` with
/// nothing new to say stays open across several stall timeouts.
#[test]
fn calls_waiting_for_the_server_are_not_cancelled() {
    let (_tmp, server) = start(&["--stream-stall-timeout-secs", "1"]);
    let rt = runtime();
    rt.block_on(async {
        let channel = wait_serving(&server.addr).await;
        let mut watch = HealthClient::new(channel.clone())
            .watch(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = watch.message().await.unwrap().unwrap();
        assert_eq!(first.status, ServingStatus::Serving as i32);
        let next = tokio::time::timeout(Duration::from_secs(3), watch.message()).await;
        assert!(next.is_err(), "the watch ended: {next:?}");
        get_bundle(channel, 2).await.unwrap();
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

/// Attack 2, continued: the stall timeout also reaches a partial message on a stream whose
/// handler reads its requests in a task of its own (reflection's bidirectional stream).
#[test]
fn a_partial_message_on_a_reflection_stream_is_cancelled_after_the_stall_timeout() {
    let (_tmp, server) = start(&["--stream-stall-timeout-secs", "1"]);
    let rt = runtime();
    rt.block_on(async {
        drop(wait_serving(&server.addr).await);
        let client = h2_connect(&server.addr, 65_535).await;
        let mut body = grpc_header(100).to_vec();
        body.resize(5 + 50, b'x');
        let (response, _send) = h2_call(
            &client,
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            Bytes::from(body),
            false,
        )
        .await;
        // The response headers may come first: the stream is open until the reset.
        let mut ended = tokio::time::timeout(Duration::from_secs(30), outcome(response))
            .await
            .expect("an answer");
        if let Outcome::Open(mut body) = ended {
            ended = match tokio::time::timeout(Duration::from_secs(30), body.data()).await {
                Ok(Some(Err(e))) => Outcome::Reset(e.reason().unwrap()),
                other => panic!("expected a reset, got {other:?}"),
            };
        }
        assert!(
            matches!(ended, Outcome::Reset(h2::Reason::CANCEL)),
            "{ended:?}"
        );
    });
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}
