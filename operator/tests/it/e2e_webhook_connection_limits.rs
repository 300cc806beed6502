//! The connection limits of the real `operator webhook` binary, with raw sockets on 127.0.0.1:
//! on the HTTPS port and on the plain health port (`--webhook-health-port`), a connection that
//! sends nothing, one that completes the TLS handshake and then sends nothing, one that speaks
//! HTTP/2 and then sends nothing, and one that trickles its request headers are all closed
//! within the request timeout (plus the second a closing connection gets to finish); and at the
//! connection cap, idle connections are closed to make room for a client with a request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// `--webhook-request-timeout` of these tests.
const TIMEOUT: Duration = Duration::from_secs(1);
/// What a closed connection may take beyond it: the close grace (1 s) and scheduling.
const SLACK: Duration = Duration::from_millis(2500);

struct Webhook {
    child: Child,
    port: u16,
    health_port: u16,
    ca: String,
    _dir: tempfile::TempDir,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// The child is killed and waited for by `Webhook`'s Drop, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn start(request_timeout: &str, extra: &[&str]) -> Webhook {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    let health_port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_operator"))
        .env("RUST_LOG", "info")
        .args(["webhook", "--webhook-bind-address", "127.0.0.1"])
        .args(["--webhook-port", "0"])
        .args(["--webhook-health-port", &health_port.to_string()])
        .args(["--webhook-request-timeout", request_timeout])
        .args(extra)
        .arg("--webhook-cert-path")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("operator webhook did not report its address");
        if let Some(rest) = line.split("listening on https://127.0.0.1:").nth(1) {
            break rest.trim_end_matches("/convert").trim().parse().unwrap();
        }
    };
    Webhook {
        child,
        port,
        health_port,
        ca: ca_cert.pem(),
        _dir: dir,
    }
}

fn tls_config(ca_pem: &str, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

/// A plain TCP connection that gives up reading after 20 s.
fn tcp_connect(port: u16) -> TcpStream {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp
}

/// A TLS connection, handshake completed.
fn tls_connect(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let tcp = tcp_connect(port);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(config, name).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).unwrap();
    }
    stream
}

/// Reads until the server closes the connection (EOF, reset or a TLS close); panics after
/// 20 s.
fn wait_closed(mut stream: impl Read) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("connection still open after 20 s")
            }
            Err(_) => return,
        }
    }
}

/// Runs `f` on a thread; how long it took.
fn timed(f: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let started = Instant::now();
        f();
        started.elapsed()
    })
}

fn trickle(mut stream: impl Write, request_head: &'static [u8]) {
    for byte in request_head
        .iter()
        .chain(b"x-slow: ".iter())
        .chain([b'a'; 200].iter())
    {
        if stream
            .write_all(&[*byte])
            .and_then(|()| stream.flush())
            .is_err()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("a trickling client was never cut off");
}

#[test]
fn idle_and_trickling_connections_are_closed_within_the_request_timeout() {
    let webhook = start("1s", &[]);
    let (port, health) = (webhook.port, webhook.health_port);
    let h1 = tls_config(&webhook.ca, b"http/1.1");
    let h2 = tls_config(&webhook.ca, b"h2");
    let mut cases = Vec::new();
    // HTTPS port: nothing at all (no TLS handshake).
    cases.push((
        "https: idle before the handshake",
        timed(move || wait_closed(tcp_connect(port))),
    ));
    // HTTPS port: handshake, then nothing.
    let c = h1.clone();
    cases.push((
        "https: idle after the handshake",
        timed(move || wait_closed(tls_connect(port, c))),
    ));
    // HTTPS port: HTTP/2 preface and SETTINGS, then nothing.
    cases.push((
        "https: idle HTTP/2 connection",
        timed(move || {
            let mut s = tls_connect(port, h2);
            s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                .unwrap();
            s.flush().unwrap();
            wait_closed(s);
        }),
    ));
    // HTTPS port: request headers one byte at a time.
    cases.push((
        "https: trickling headers",
        timed(move || trickle(tls_connect(port, h1), b"POST /convert HTTP/1.1\r\n")),
    ));
    // Health port: nothing, and trickling headers.
    cases.push((
        "health: idle",
        timed(move || wait_closed(tcp_connect(health))),
    ));
    cases.push((
        "health: trickling headers",
        timed(move || trickle(tcp_connect(health), b"GET /readyz HTTP/1.1\r\n")),
    ));
    let mut report = Vec::new();
    for (name, case) in cases {
        let took = case.join().unwrap_or_else(|_| panic!("{name}: still open"));
        report.push(format!("{name}: closed after {took:.2?}"));
        assert!(took <= TIMEOUT + SLACK, "{name}: closed after {took:?}");
    }
    eprintln!("FIGURES: {}", report.join("; "));
}

#[test]
fn at_the_connection_cap_idle_connections_make_room() {
    let webhook = start("60s", &["--webhook-max-connections", "4"]);
    let config = tls_config(&webhook.ca, b"http/1.1");
    // Eight idle connections, handshakes done (the last four wait for room at first).
    let idle: Vec<_> = (0..8)
        .map(|_| {
            let (port, config) = (webhook.port, config.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let stream = tls_connect(port, config);
                wait_closed(stream);
                started.elapsed()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    // A client with a request is served, though the cap is reached.
    let review = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"cache.example.com/v1","objects":[]}}"#;
    let started = Instant::now();
    let mut s = tls_connect(webhook.port, config);
    write!(
        s,
        "POST /convert HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        review.len()
    )
    .unwrap();
    s.write_all(review).unwrap();
    s.flush().unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let served_in = started.elapsed();
    assert!(served_in < Duration::from_secs(5), "{served_in:?}");
    // Idle connections were closed to make room (at most four open at once, and never the
    // one with a request); with a 60 s idle timeout, none would have closed by now otherwise.
    drop(s);
    std::thread::sleep(Duration::from_secs(1));
    let closed = idle.iter().filter(|t| t.is_finished()).count();
    eprintln!(
        "FIGURES: cap 4, 8 idle connections: {closed} closed to make room; a review answered in {served_in:.2?}"
    );
    assert!(closed >= 5, "{closed} idle connections closed");
}
