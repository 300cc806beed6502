//! End to end: the operator's HTTP endpoints and process behaviour. `/readyz` reports the
//! conversion webhook not ready while its certificate is missing and ready once it appears;
//! `/healthz` and `/metrics` serve; logs are JSON lines with `--log-format json`; bad
//! configuration exits 1 with a clear message and a hint; SIGTERM exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "harness/operator_harness.rs"]
mod harness;

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
