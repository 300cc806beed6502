//! End to end: the real `operator webhook` binary over real HTTPS.
//!
//! Certificates come from rcgen (a CA and a serving certificate with the SANs the API server and
//! local clients use); reviews are POSTed by reqwest over rustls trusting only the test CA, as the
//! API server does with the CRD's caBundle. Covers certificate rotation on disk (checked through
//! the peer certificate the client sees), a certificate that appears after start, bad input, and
//! process-level behaviour (port in use, SIGTERM).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

const SERVICE_SAN: &str = "memcached-operator-webhook-service.memcached-operator-system.svc";

/// A CA and a serving certificate it signed, in PEM.
struct Pki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
    cert_der: Vec<u8>,
}

fn pki(name: &str) -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{name} test CA"));
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA cert");
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        SERVICE_SAN.to_string(),
    ])
    .expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{name} webhook"));
    let cert = params.signed_by(&key, &issuer).expect("cert");
    Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().to_vec(),
    }
}

/// Writes the pair the way the kubelet updates a Secret volume: complete files swapped in by
/// rename, so the server never sees a half-written file.
fn install(dir: &Path, pki: &Pki) {
    for (name, content) in [("tls.key", &pki.key_pem), ("tls.crt", &pki.cert_pem)] {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, content).expect("write");
        std::fs::rename(&tmp, dir.join(name)).expect("rename");
    }
}

/// The running binary; killed on drop so a failing test leaves nothing behind.
struct Webhook {
    child: Child,
    https: String,
    health: Option<String>,
    log: mpsc::Receiver<String>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn operator() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_operator"));
    cmd.env("RUST_LOG", "info")
        .env_remove("LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Starts `operator webhook` on free loopback ports and waits until it has bound them.
fn start(cert_dir: &Path, extra: &[&str]) -> Webhook {
    let mut child = operator()
        .args([
            "webhook",
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-port",
            "0",
        ])
        .args([
            "--webhook-health-port",
            "0",
            "--webhook-cert-poll-interval",
            "100ms",
        ])
        .arg("--webhook-cert-path")
        .arg(cert_dir)
        .args(extra)
        .spawn()
        .expect("start operator webhook");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[operator] {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut webhook = Webhook {
        child,
        https: String::new(),
        health: None,
        log: rx,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while webhook.https.is_empty() || webhook.health.is_none() {
        let line = webhook
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("operator webhook did not report its addresses");
        if let Some(rest) = line.split("listening on ").nth(1) {
            webhook.https = rest.trim().trim_end_matches("/convert").to_string();
        }
        if let Some(rest) = line.split("health probes on ").nth(1) {
            webhook.health = Some(rest.trim().trim_end_matches("/readyz").to_string());
        }
    }
    webhook
}

fn https_client(ca_pems: &[&str]) -> reqwest::Client {
    client_with_alpn(ca_pems, Vec::new())
}

/// Like the API server (Go's HTTP client offers h2 first).
fn h2_client(ca_pems: &[&str]) -> reqwest::Client {
    client_with_alpn(ca_pems, vec![b"h2".to_vec(), b"http/1.1".to_vec()])
}

fn client_with_alpn(ca_pems: &[&str], alpn: Vec<Vec<u8>>) -> reqwest::Client {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for pem in ca_pems {
        use rustls::pki_types::pem::PemObject;
        for der in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(der.expect("CA PEM")).expect("add root");
        }
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = alpn;
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .tls_info(true)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

struct Answer {
    version: reqwest::Version,
    status: u16,
    body: Value,
    peer_cert: Option<Vec<u8>>,
}

async fn post_raw(
    client: &reqwest::Client,
    base: &str,
    content_type: &str,
    body: Vec<u8>,
) -> reqwest::Result<Answer> {
    let response = client
        .post(format!("{base}/convert"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await?;
    let peer_cert = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate().map(<[u8]>::to_vec));
    let status = response.status().as_u16();
    let version = response.version();
    let bytes = response.bytes().await?;
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Answer {
        version,
        status,
        body,
        peer_cert,
    })
}

async fn post(client: &reqwest::Client, base: &str, review: &Value) -> reqwest::Result<Answer> {
    post_raw(
        client,
        base,
        "application/json",
        serde_json::to_vec(review).expect("encode"),
    )
    .await
}

fn review(uid: &str, desired: &str, objects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}
    })
}

fn alpha(name: &str, size: i32) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"), "resourceVersion": "7"},
        "spec": {"size": size}
    })
}

fn v1(name: &str) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
        "spec": {"replicas": 3, "image": "quay.io/acme/memcached:1.6", "port": 11300,
                 "memcached": {"memoryLimitMiB": 128, "maxConnections": 2048, "threads": 8}},
        "status": {"replicas": 3, "readyReplicas": 2, "selector": "app=x"}
    })
}

fn assert_success(answer: &Answer, uid: &str, count: usize) {
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["response"]["uid"], uid, "{}", answer.body);
    assert_eq!(
        answer.body["response"]["result"]["status"], "Success",
        "{}",
        answer.body
    );
    assert_eq!(
        answer.body["response"]["convertedObjects"]
            .as_array()
            .map(Vec::len),
        Some(count)
    );
}

/// Retries `f` until it returns `Some`, or panics with `what` after `limit`.
async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn converts_over_https_and_serves_a_rotated_certificate_without_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = pki("first");
    install(dir.path(), &first);
    let webhook = start(dir.path(), &[]);
    let base = webhook.https.replace("127.0.0.1", "localhost");
    runtime().block_on(async {
        let client = https_client(&[first.ca_pem.as_str()]);
        // Wait for readiness (the certificate is loaded on the first poll).
        let answer = eventually("first answer", Duration::from_secs(20), || async {
            post(
                &client,
                &base,
                &review("r-1", "cache.example.com/v1", vec![alpha("a", 2), v1("b")]),
            )
            .await
            .ok()
        })
        .await;
        assert_success(&answer, "r-1", 2);
        assert_eq!(answer.peer_cert.as_deref(), Some(first.cert_der.as_slice()));
        let converted = &answer.body["response"]["convertedObjects"];
        assert_eq!(converted[0]["apiVersion"], "cache.example.com/v1");
        assert_eq!(converted[0]["spec"]["replicas"], 2);
        assert_eq!(converted[0]["metadata"]["uid"], "uid-a");
        assert_eq!(
            converted[1],
            v1("b"),
            "same-version objects come back untouched"
        );

        assert_eq!(answer.version, reqwest::Version::HTTP_11);
        // HTTP/2, as the API server speaks it when offered.
        let h2 = post(
            &h2_client(&[first.ca_pem.as_str()]),
            &base,
            &review("r-h2", "cache.example.com/v1beta1", vec![alpha("a", 2)]),
        )
        .await
        .expect("h2 answer");
        assert_eq!(h2.version, reqwest::Version::HTTP_2);
        assert_success(&h2, "r-h2", 1);

        // Down to v1alpha1 and back up keeps the v1-only fields.
        let down = post(
            &client,
            &base,
            &review("r-2", "cache.example.com/v1alpha1", vec![v1("b")]),
        )
        .await
        .expect("down");
        assert_success(&down, "r-2", 1);
        let spoke = down.body["response"]["convertedObjects"][0].clone();
        assert_eq!(spoke["spec"], json!({"size": 3}));
        let up = post(
            &client,
            &base,
            &review("r-3", "cache.example.com/v1", vec![spoke]),
        )
        .await
        .expect("up");
        assert_success(&up, "r-3", 1);
        let back = &up.body["response"]["convertedObjects"][0];
        assert_eq!(back["spec"], v1("b")["spec"]);
        assert_eq!(back["status"], v1("b")["status"]);
        assert!(back["metadata"].get("annotations").is_none(), "{back}");

        // A rotation caught half-way (new certificate, old key) is refused; the old pair keeps
        // serving.
        let second = pki("second");
        std::fs::write(dir.path().join("tls.crt"), &second.cert_pem).expect("write");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let during = post(
            &https_client(&[first.ca_pem.as_str()]),
            &base,
            &review("r-mid", "cache.example.com/v1", vec![]),
        )
        .await
        .expect("still serving the old pair");
        assert_eq!(during.peer_cert.as_deref(), Some(first.cert_der.as_slice()));

        // Complete the rotation to the new CA; a client trusting both sees the new certificate.
        install(dir.path(), &second);
        let both = [first.ca_pem.as_str(), second.ca_pem.as_str()];
        let rotated = eventually(
            "the rotated certificate",
            Duration::from_secs(20),
            || async {
                // A fresh client per attempt: a pooled connection would keep the old session.
                let answer = post(
                    &https_client(&both),
                    &base,
                    &review("r-4", "cache.example.com/v1beta1", vec![alpha("c", 1)]),
                )
                .await
                .ok()?;
                (answer.peer_cert.as_deref() == Some(second.cert_der.as_slice())).then_some(answer)
            },
        )
        .await;
        assert_success(&rotated, "r-4", 1);
        // And a client that trusts only the old CA is now refused.
        let old_only = post(
            &https_client(&[first.ca_pem.as_str()]),
            &base,
            &review("r-5", "cache.example.com/v1", vec![]),
        )
        .await;
        assert!(old_only.is_err(), "old CA must no longer verify the server");
        // The service DNS name the API server uses is in the SAN.
        assert!(String::from_utf8_lossy(&second.cert_der).contains(SERVICE_SAN));
    });
    let logs: Vec<String> = webhook.log.try_iter().collect();
    assert!(
        logs.iter()
            .any(|l| l.contains("reloaded serving certificate")),
        "{logs:#?}"
    );
    assert!(
        logs.iter().any(
            |l| l.contains("keeping the current serving certificate") && l.contains("key pair")
        ),
        "{logs:#?}"
    );
}

#[test]
fn waits_not_ready_for_a_missing_certificate_then_serves_when_it_appears() {
    let dir = tempfile::tempdir().expect("tempdir");
    let webhook = start(dir.path(), &[]);
    let health = webhook.health.clone().expect("health address");
    let base = webhook.https.clone();
    runtime().block_on(async {
        // reqwest builds a (unused) TLS config even for plain HTTP: give it the ring provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plain = reqwest::Client::new();
        let readyz = || async {
            let response = plain.get(format!("{health}/readyz")).send().await.ok()?;
            Some((response.status().as_u16(), response.text().await.ok()?))
        };
        let (status, reason) = eventually("readyz", Duration::from_secs(10), readyz).await;
        assert_eq!(status, 503, "{reason}");
        assert!(reason.contains("no serving certificate yet"), "{reason}");
        assert!(
            reason.contains(&dir.path().join("tls.crt").display().to_string()),
            "{reason}"
        );
        let healthz = plain
            .get(format!("{health}/healthz"))
            .send()
            .await
            .expect("healthz");
        assert_eq!(
            healthz.status().as_u16(),
            200,
            "liveness holds while waiting"
        );

        let pki = pki("late");
        let client = https_client(&[pki.ca_pem.as_str()]);
        // TLS is refused while there is no certificate.
        assert!(
            post(
                &client,
                &base,
                &review("w-0", "cache.example.com/v1", vec![])
            )
            .await
            .is_err()
        );

        install(dir.path(), &pki);
        let (status, reason) = eventually("ready", Duration::from_secs(20), || async {
            readyz().await.filter(|(status, _)| *status == 200)
        })
        .await;
        assert_eq!(status, 200);
        assert!(reason.contains("tls.crt"), "{reason}");
        let answer = post(
            &client,
            &base,
            &review("w-1", "cache.example.com/v1beta1", vec![alpha("a", 4)]),
        )
        .await
        .expect("served once the certificate appeared");
        assert_success(&answer, "w-1", 1);
        assert_eq!(
            answer.body["response"]["convertedObjects"][0]["spec"]["replicas"],
            4
        );
    });
}

#[test]
fn bad_input_gets_the_right_answer_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki("bad-input");
    install(dir.path(), &pki);
    let webhook = start(dir.path(), &[]);
    let base = webhook.https.clone();
    runtime().block_on(async {
        let client = https_client(&[pki.ca_pem.as_str()]);
        eventually("ready", Duration::from_secs(20), || async {
            post(&client, &base, &review("warm", "cache.example.com/v1", vec![])).await.ok()
        })
        .await;

        // Malformed JSON: 400 with a Status body.
        let answer = post_raw(&client, &base, "application/json", b"{\"kind\": ".to_vec())
            .await
            .expect("answer");
        assert_eq!(answer.status, 400);
        assert_eq!(answer.body["kind"], "Status");
        assert!(answer.body["message"].as_str().unwrap_or_default().contains("not JSON"));

        // Wrong apiVersion/kind of the review, uid readable: a Failed review echoing it.
        let mut wrong = review("bad-kind", "cache.example.com/v1", vec![alpha("a", 1)]);
        wrong["apiVersion"] = json!("admission.k8s.io/v1");
        wrong["kind"] = json!("AdmissionReview");
        let answer = post(&client, &base, &wrong).await.expect("answer");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body["response"]["uid"], "bad-kind");
        assert_eq!(answer.body["response"]["result"]["status"], "Failure");

        // Missing request: nothing to echo, 400.
        let answer = post(&client, &base, &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}))
            .await
            .expect("answer");
        assert_eq!(answer.status, 400);

        // Unknown target version.
        let answer = post(&client, &base, &review("bad-target", "cache.example.com/v7", vec![alpha("a", 1)]))
            .await
            .expect("answer");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body["response"]["result"]["status"], "Failure");
        assert!(answer.body["response"]["result"]["message"].as_str().unwrap_or_default().contains("cache.example.com/v7"));

        // A foreign object among good ones: one Failure naming it.
        let foreign = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}});
        let answer = post(&client, &base, &review("bad-object", "cache.example.com/v1", vec![alpha("a", 1), foreign]))
            .await
            .expect("answer");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body["response"]["uid"], "bad-object");
        let result = &answer.body["response"]["result"];
        assert_eq!(result["status"], "Failure");
        let message = result["message"].as_str().unwrap_or_default();
        assert!(message.contains("objects[1] (shop/web)") && message.contains("apps/v1"), "{message}");

        // Wrong media type.
        let answer = post_raw(&client, &base, "text/plain", b"{}".to_vec()).await.expect("answer");
        assert_eq!(answer.status, 415);

        // Wrong method, oversized headers: answered with a Status body saying why (hyper alone
        // answered both with an empty body).
        let response = client.get(format!("{base}/convert")).send().await.expect("answer");
        assert_eq!(response.status().as_u16(), 405);
        let body: Value = response.json().await.expect("a Status body");
        assert_eq!(body["reason"], "MethodNotAllowed", "{body}");
        let mut request = client.post(format!("{base}/convert")).header("content-type", "application/json");
        for i in 0..150 {
            request = request.header(format!("x-filler-{i}"), "v");
        }
        let response = request.body("{}").send().await.expect("answer");
        assert_eq!(response.status().as_u16(), 431);
        let body: Value = response.json().await.expect("a Status body");
        assert_eq!(body["reason"], "RequestHeaderFieldsTooLarge", "{body}");

        // A 10 MiB body: 413 without reading it all.
        let mut huge = b"{\"pad\":\"".to_vec();
        huge.resize(10 * 1024 * 1024, b'x');
        huge.extend_from_slice(b"\"}");
        let answer = post_raw(&client, &base, "application/json", huge).await.expect("answer");
        assert_eq!(answer.status, 413);
        assert_eq!(answer.body["reason"], "RequestEntityTooLarge");

        // A request near the limit still converts (many objects in one review).
        let objects: Vec<Value> = (0..5000).map(|i| alpha(&format!("m{i}"), i % 1000)).collect();
        let big = post(&client, &base, &review("big", "cache.example.com/v1", objects)).await.expect("answer");
        assert_success(&big, "big", 5000);
        assert_eq!(big.body["response"]["convertedObjects"][4999]["metadata"]["name"], "m4999");

        // Still serving after all that.
        let answer = post(&client, &base, &review("after", "cache.example.com/v1alpha1", vec![v1("b")]))
            .await
            .expect("answer");
        assert_success(&answer, "after", 1);
    });
    let logs: Vec<String> = webhook.log.try_iter().collect();
    assert!(
        logs.iter().any(|l| l.contains("bad-object")),
        "failures are logged with the uid: {logs:#?}"
    );
}

#[test]
fn port_in_use_is_a_configuration_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let output = operator()
        .args([
            "webhook",
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-port",
            &port,
        ])
        .arg("--webhook-cert-path")
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot listen on 127.0.0.1:") && stderr.contains("hint:"),
        "{stderr}"
    );
}

#[test]
fn sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut webhook = start(dir.path(), &[]);
    let pid = webhook.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = wait_exit(&mut webhook.child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
}

fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "process did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}
