//! End to end: the operator's HTTP endpoints and process behaviour. `/readyz` reports the
//! conversion webhook not ready while its certificate is missing and ready once it appears;
//! `/healthz` and `/metrics` serve; logs are JSON lines with `--log-format json`; bad
//! configuration exits 1 with a clear message and a hint; SIGTERM exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;

use std::process::Command;

use harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let env = Env::start_with(&["cache"], false).await;
    let mut op = Operator::spawn(
        &env,
        OperatorOptions {
            leader_elect: false,
            extra_args: vec!["--log-format".into(), "json".into()],
            ..Default::default()
        },
    );
    let (code, body) = eventually("/readyz answers", 30, || async { op.readyz().await }).await;
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("[-]webhook failed"), "{body}");
    assert!(body.contains("[+]shutdown ok"), "{body}");
    let (code, body) = op.get(op.health_port, "/healthz").await.unwrap();
    assert_eq!(
        (code, body.as_str()),
        (200, "[+]ping ok\nhealthz check passed\n")
    );

    env.certs.install();
    op.wait_ready().await;
    let (_, body) = op.readyz().await.unwrap();
    assert!(
        body.contains("[+]webhook ok") && body.ends_with("readyz check passed\n"),
        "{body}"
    );

    let resp = reqwest::get(format!("http://127.0.0.1:{}/metrics", op.metrics_port))
        .await
        .unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = resp.text().await.unwrap();
    for family in [
        "memcached_operator_reconciliations_total",
        "memcached_operator_reconcile_duration_seconds_bucket",
        "memcached_operator_managed_objects{kind=\"Memcached\"}",
        "memcached_operator_leader 1",
    ] {
        assert!(text.contains(family), "no {family} in:\n{text}");
    }

    op.signal("TERM");
    let status = op.wait_exit(30).await;
    assert!(status.success(), "{status:?}");
    let log = op.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"));
        assert!(
            v.get("level").is_some() && v.get("timestamp").is_some(),
            "{l}"
        );
    }
    assert!(log.contains("shutdown complete"));
}

#[test]
fn bad_configuration_exits_1_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let run = |envs: &[(&str, &str)], args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_operator"));
        cmd.env_clear()
            .env("KUBECONFIG", dir.path().join("missing"))
            .arg("run")
            .args(["--disable-webhook", "--metrics-bind-address", "0"])
            .args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, err) = run(&[("WATCH_NAMESPACE", "good,Not Good")], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("error: WATCH_NAMESPACE entry \"Not Good\""),
        "{err}"
    );
    let (code, err) = run(&[], &["--leader-election-renew-grace", "20s"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--leader-election-renew-grace"), "{err}");
    let (code, err) = run(&[], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cannot load the Kubernetes client configuration"),
        "{err}"
    );
    assert!(
        err.contains("hint: set KUBECONFIG to a readable kubeconfig"),
        "{err}"
    );
    let (code, err) = run(&[], &["--health-probe-bind-address", "8081"]);
    assert_eq!(code, Some(2), "clap usage errors exit 2: {err}");
}

#[test]
fn port_in_use_exits_1_with_a_hint() {
    // A kubeconfig whose server is never contacted: the probe port is bound before any request.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:1'}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
",
    )
    .unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_operator"))
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .arg("run")
        .args(["--disable-webhook", "--metrics-bind-address", "0"])
        .args(["--health-probe-bind-address", &addr])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("error: cannot listen on {addr} for health probes")),
        "{err}"
    );
    let port = taken.local_addr().unwrap().port();
    assert!(
        err.contains(&format!(
            "hint: port {port} is already in use: pick another --health-probe-bind-address"
        )),
        "{err}"
    );
    drop(taken);
}

/// Reads until the server closes the connection; how long after `started` that was (panics
/// after `limit`).
fn closed_after(mut stream: std::net::TcpStream, started: std::time::Instant, limit: u64) -> f64 {
    use std::io::Read;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(limit)))
        .unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return started.elapsed().as_secs_f64(),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("connection still open after {limit} s")
            }
            Err(_) => return started.elapsed().as_secs_f64(),
        }
    }
}

/// The health probe port (and the plain metrics port) close connections that send nothing or
/// trickle their headers within 10 s, as the webhook's and the secure metrics port do; at the
/// port's connection cap, idle connections make room for the kubelet's probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_port_closes_idle_and_trickling_connections() {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};
    let env = Env::start_with(&["cache"], true).await;
    let op = Operator::spawn(
        &env,
        OperatorOptions {
            leader_elect: false,
            webhook: false,
            ..Default::default()
        },
    );
    op.wait_ready().await;
    let (health, metrics) = (op.health_port, op.metrics_port);
    let started = Instant::now();
    let mut cases = Vec::new();
    for (name, port) in [("health", health), ("metrics", metrics)] {
        let idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
        cases.push((
            format!("{name}: idle"),
            std::thread::spawn(move || closed_after(idle, started, 30)),
        ));
        let mut trickling = TcpStream::connect(("127.0.0.1", port)).unwrap();
        cases.push((
            format!("{name}: trickling headers"),
            std::thread::spawn(move || {
                let head = b"GET /healthz HTTP/1.1\r\nx-slow: ";
                for byte in head.iter().chain([b'a'; 300].iter()) {
                    if trickling.write_all(&[*byte]).is_err() {
                        return started.elapsed().as_secs_f64();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                panic!("a trickling client was never cut off");
            }),
        ));
    }
    let mut report = Vec::new();
    for (name, case) in cases {
        let took = case.join().unwrap_or_else(|_| panic!("{name}: still open"));
        report.push(format!("{name}: closed after {took:.1} s"));
        assert!(took <= 12.5, "{name}: closed after {took:.1} s");
    }
    // More idle connections than the probe port's cap: the probes still get through.
    let crowd: Vec<TcpStream> = (0..olmkit_runtime::http::listener::HEALTH_MAX_CONNECTIONS + 4)
        .map(|_| TcpStream::connect(("127.0.0.1", health)).unwrap())
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let probe_started = Instant::now();
    let (code, _) = op
        .readyz()
        .await
        .expect("/readyz answers at the connection cap");
    assert_eq!(code, 200);
    let probe_took = probe_started.elapsed();
    assert!(probe_took < Duration::from_secs(2), "{probe_took:?}");
    eprintln!(
        "FIGURES: {}; /readyz at the cap answered in {probe_took:.2?}",
        report.join("; ")
    );
    drop(crowd);
}
