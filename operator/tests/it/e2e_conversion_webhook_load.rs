//! Load tests of the real `operator webhook` binary (loopback only, bounded, seconds): many
//! concurrent large ConversionReviews, over HTTP/1.1 connections of their own and multiplexed on
//! one HTTP/2 connection as the API server does, each attack against a fresh process.
//!
//! Each checks that the reviews beyond the webhook's budgets are answered `429` with
//! `Retry-After` and a Status body saying why, that every admitted review gets its answer (a
//! conversion, or a Failure result for reviews whose objects cannot convert), that the refused
//! ones get it when retried as the API server retries them, and that the process' peak RSS
//! (`VmHWM` in `/proc/<pid>/status`) stays under the budget the webhook documents
//! (`olmkit_runtime::webhook::MEMORY_BUDGET_BYTES`) at the default limits. A well-behaved
//! one-object review is sent every 20 ms while the attack runs; its latencies are printed.
//!
//! The attacks (the figures are in BENCHMARKS.md, "Attacks"):
//! - 48 concurrent 2 MiB reviews that convert;
//! - 32 concurrent 2.9 MB reviews that convert (just under the 3 MiB request limit);
//! - 16 concurrent 3 MB reviews whose 16,000 objects all fail to convert (the error path);
//! - 16 concurrent 3 MB reviews of 1.5 million one-byte objects (the most objects a body can
//!   carry) and 16 of one object whose metadata holds 3 MB of tiny managed-field entries (the
//!   most parsed values a body can carry).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

/// Writes a CA and a serving certificate for 127.0.0.1 into `dir`; returns the CA PEM.
fn install_pki(dir: &Path) -> String {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "load test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    ca_cert.pem()
}

/// The running binary; killed on drop.
struct Webhook {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
    ca: String,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// The child is killed and waited for by `Webhook`'s Drop, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn start() -> Webhook {
    let dir = tempfile::tempdir().unwrap();
    let ca = install_pki(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_operator"))
        .env("RUST_LOG", "info")
        .env_remove("LOG_FORMAT")
        .args(["webhook", "--webhook-bind-address", "127.0.0.1"])
        .args(["--webhook-port", "0", "--webhook-request-timeout", "60s"])
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
        let mut failures = 0usize;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("rejected request") {
                continue; // one per 429: expected, and many
            }
            if line.contains("conversion failed") || line.contains("cannot convert object") {
                // Logged (rate-limited) for the failing reviews; show a few.
                failures += 1;
                if failures > 3 {
                    continue;
                }
            }
            eprintln!("[operator] {}", &line[..line.len().min(400)]);
            let _ = tx.send(line);
        }
        eprintln!("[operator] {failures} lines about failed conversions in all");
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("operator webhook did not report its address");
        if let Some(rest) = line.split("listening on ").nth(1) {
            let base = rest.trim().trim_end_matches("/convert").to_string();
            return Webhook {
                child,
                base,
                _dir: dir,
                ca,
            };
        }
    }
}

fn client(ca_pem: &str, alpn: Vec<Vec<u8>>) -> reqwest::Client {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = alpn;
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

fn envelope(uid: &str, objects: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(objects.len() + 200);
    body.extend_from_slice(
        br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"#,
    );
    body.extend_from_slice(serde_json::to_string(uid).unwrap().as_bytes());
    body.extend_from_slice(br#","desiredAPIVersion":"cache.example.com/v1","objects":["#);
    body.extend_from_slice(objects);
    body.extend_from_slice(b"]}}");
    body
}

/// A v1alpha1 → v1 review of about `bytes` bytes whose objects are in `api_version` (they
/// convert for a served version, and all fail for another).
fn review_of(uid: &str, bytes: usize, api_version: &str) -> (Vec<u8>, usize) {
    let one = |i: usize| {
        json!({
            "apiVersion": api_version,
            "kind": "Memcached",
            "metadata": {"name": format!("memcached-sample-{i:06}"), "namespace": "default",
                         "uid": "6f2b4a3c-0000-4000-8000-000000000000"},
            "spec": {"size": 3}
        })
    };
    let per = serde_json::to_vec(&one(0)).unwrap().len() + 1;
    let count = bytes.saturating_sub(200) / per;
    let objects: Vec<Value> = (0..count).map(one).collect();
    let list = serde_json::to_vec(&objects).unwrap();
    (envelope(uid, &list[1..list.len() - 1]), count)
}

/// A review of about `bytes` bytes of one-byte objects (`0,0,0,...`): each fails.
fn tiny_objects_review(uid: &str, bytes: usize) -> Vec<u8> {
    let count = bytes.saturating_sub(200) / 2;
    let mut objects = Vec::with_capacity(count * 2);
    for i in 0..count {
        if i > 0 {
            objects.push(b',');
        }
        objects.push(b'0');
    }
    envelope(uid, &objects)
}

/// A review of one v1alpha1 object of about `bytes` bytes whose managed fields hold tiny
/// entries (`{"f:k0":{},"f:k1":{},...}`): it converts, and its parsed form has the most values a
/// body of that size can carry.
fn dense_object_review(uid: &str, bytes: usize) -> Vec<u8> {
    let mut fields = String::with_capacity(bytes);
    fields.push('{');
    let mut i = 0usize;
    while fields.len() + 400 < bytes {
        if i > 0 {
            fields.push(',');
        }
        fields.push_str(&format!("\"f:{i:x}\":{{}}"));
        i += 1;
    }
    fields.push('}');
    let object = format!(
        r#"{{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{{"name":"dense","namespace":"default","managedFields":[{{"manager":"m","operation":"Apply","apiVersion":"cache.example.com/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{fields}}}]}},"spec":{{"size":3}}}}"#
    );
    envelope(uid, object.as_bytes())
}

fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Success,
    Failure,
}

/// What the load tests check in a 200 answer; serde reads past the rest (`convertedObjects`).
#[derive(serde::Deserialize)]
struct AnswerHead {
    response: ResponseHead,
}

#[derive(serde::Deserialize)]
struct ResponseHead {
    uid: String,
    result: Value,
}

enum Outcome {
    /// 200 with the expected result; the answer's size.
    Answered {
        bytes: usize,
    },
    Refused {
        retry_after: String,
    },
    /// The connection closed while the review was still being sent: over HTTP/1.1 the webhook
    /// answers a refused review (`429`) without reading its body and hangs up, so a client
    /// still writing 2 MiB can see the hang-up before the answer. kube-apiserver's webhook
    /// client retries such a reset (`DefaultShouldRetry` in k8s.io/apiserver/pkg/util/webhook
    /// retries `utilnet.IsConnectionReset` errors), and so do the attackers here. (A connection
    /// closed before the review went out, or before its answer, is not one: at the connection
    /// cap the webhook closes only connections idle longer than the Retry-After it sends.)
    Reset(String),
    /// Anything else (status, what went wrong): counted, then reported.
    Unexpected(String),
}

async fn send(
    client: &reqwest::Client,
    base: &str,
    uid: &str,
    body: Vec<u8>,
    expect: Expect,
) -> Outcome {
    let response = match client
        .post(format!("{base}/convert"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
    {
        Ok(response) => response,
        Err(e) if hung_up_while_sending(&e) => return Outcome::Reset(format!("{e:?}")),
        Err(e) => return Outcome::Unexpected(format!("request failed: {e:?}")),
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = match response.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return Outcome::Unexpected(format!("{status}, body not read: {e:?}")),
    };
    if status == 200 {
        // Only the head of the answer: its converted objects (up to 5 MB) are read past, not
        // built into a `Value` (which cost the debug test client as much CPU as the webhook).
        let Ok(answer) = serde_json::from_slice::<AnswerHead>(&bytes) else {
            return Outcome::Unexpected(format!("{status}, body not a ConversionReview"));
        };
        assert_eq!(answer.response.uid, uid);
        let result = &answer.response.result;
        match expect {
            Expect::Success => assert_eq!(result["status"], "Success", "{result}"),
            Expect::Failure => {
                assert_eq!(result["status"], "Failure", "{result}");
                assert_eq!(result["code"], 422, "{result}");
            }
        }
        return Outcome::Answered { bytes: bytes.len() };
    }
    let Ok(answer) = serde_json::from_slice::<Value>(&bytes) else {
        return Outcome::Unexpected(format!("{status}, body not JSON"));
    };
    match status {
        429 => {
            assert_eq!(answer["reason"], "TooManyRequests", "{answer}");
            let message = answer["message"].as_str().unwrap();
            assert!(message.contains("--webhook-max-"), "{message}");
            Outcome::Refused { retry_after }
        }
        other => Outcome::Unexpected(format!("{other}: {:.300}", answer.to_string())),
    }
}

/// Whether `e` is the peer closing the connection (broken pipe, reset) while the request was
/// being sent.
fn hung_up_while_sending(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            );
        }
        source = err.source();
    }
    false
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One attack: `concurrent` copies of `body` at once against a fresh webhook, half on HTTP/1.1
/// connections of their own and half on one HTTP/2 connection, each retried after a 429 as the
/// API server does; meanwhile a one-object review every 20 ms on another HTTP/2 connection.
/// Prints the figures; asserts the answers and the memory budget.
fn attack(name: &str, concurrent: usize, body: Vec<u8>, expect: Expect) {
    let webhook = start();
    let pid = webhook.child.id();
    let base = webhook.base.clone();
    let ca = webhook.ca.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let h2 = client(&ca, vec![b"h2".to_vec()]);
        // Warm up: one 2 MiB review converts.
        let (warm, _) = review_of("warm", 2 << 20, "cache.example.com/v1alpha1");
        assert!(matches!(
            send(&h2, &base, "warm", warm, Expect::Success).await,
            Outcome::Answered { .. }
        ));
        let idle = vm_hwm_kib(pid);

        // The well-behaved client.
        let done = Arc::new(AtomicBool::new(false));
        let probe = {
            let (client, base, done) = (
                client(&ca, vec![b"h2".to_vec()]),
                base.clone(),
                done.clone(),
            );
            let (small, _) = review_of("probe", 400, "cache.example.com/v1alpha1");
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut refused = 0usize;
                while !done.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    match send(&client, &base, "probe", small.clone(), Expect::Success).await {
                        Outcome::Answered { .. } => latencies.push(started.elapsed()),
                        Outcome::Refused { .. } => refused += 1,
                        Outcome::Reset(e) | Outcome::Unexpected(e) => {
                            panic!("the well-behaved review got {e}")
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (latencies, refused)
            })
        };

        let body = Arc::new(body);
        let started = Arc::new(tokio::sync::Barrier::new(concurrent));
        let began = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..concurrent {
            let c = if i % 2 == 0 {
                client(&ca, vec![b"http/1.1".to_vec()])
            } else {
                h2.clone()
            };
            let (base, body, started) = (base.clone(), body.clone(), started.clone());
            tasks.push(tokio::spawn(async move {
                started.wait().await;
                let mut refusals = 0;
                // Retry as the API server does: client-go's rest client retries a 429 that
                // has a Retry-After after sleeping that long (`IsNextRetry` in
                // k8s.io/client-go/rest/with_retry.go). Bounded: the reviews are converted
                // one or two at a time, seconds each in a debug build.
                let deadline = Instant::now() + Duration::from_secs(300);
                while Instant::now() < deadline {
                    match send(&c, &base, "load", body.to_vec(), expect).await {
                        Outcome::Answered { bytes } => return Ok((refusals, bytes)),
                        Outcome::Refused { retry_after } => {
                            assert_eq!(retry_after, "1");
                            refusals += 1;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        Outcome::Reset(_) => {
                            refusals += 1;
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Outcome::Unexpected(e) => return Err(e),
                    }
                }
                Err(format!("still refused after 300 s ({refusals} times)"))
            }));
        }
        let mut refused = 0;
        let mut first_try = 0;
        let mut largest_answer = 0;
        let mut unexpected = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok((r, bytes)) => {
                    refused += r;
                    first_try += usize::from(r == 0);
                    largest_answer = largest_answer.max(bytes);
                }
                Err(e) => unexpected.push(e),
            }
        }
        let elapsed = began.elapsed();
        done.store(true, Ordering::SeqCst);
        let (mut latencies, probe_refused) = probe.await.unwrap();
        latencies.sort();
        let peak = vm_hwm_kib(pid);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        eprintln!(
            "FIGURES: {name}: {concurrent} concurrent {:.1} MB reviews answered in {:.1} s: \
             {first_try} at once, {refused} refusals (429) before the rest, {} unanswered; answers \
             of {largest_answer} bytes at most; peak RSS {} MiB \
             (idle after one 2 MiB review {} MiB; budget {} MiB); one-object review every 20 ms \
             meanwhile: {} answered, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {probe_refused} \
             refused",
            body.len() as f64 / 1e6,
            elapsed.as_secs_f64(),
            unexpected.len(),
            peak / 1024,
            idle / 1024,
            olmkit_runtime::webhook::MEMORY_BUDGET_BYTES >> 20,
            latencies.len(),
            ms(percentile(&latencies, 50.0)),
            ms(percentile(&latencies, 99.0)),
            ms(latencies.last().copied().unwrap_or_default()),
        );
        assert!(
            unexpected.is_empty(),
            "{name}: {:?}",
            &unexpected[..unexpected.len().min(3)]
        );
        assert!(first_try > 0, "some reviews are admitted at once");
        // The answer stays small whatever the number of failing objects.
        if expect == Expect::Failure {
            assert!(
                largest_answer < 16 * 1024,
                "{name}: answers of {largest_answer} bytes"
            );
        }
        assert!(
            (peak as usize) * 1024 <= olmkit_runtime::webhook::MEMORY_BUDGET_BYTES,
            "{name}: peak RSS {peak} KiB over the documented budget"
        );
    });
}

#[test]
fn concurrent_large_reviews_stay_within_the_memory_budget() {
    let (body, _) = review_of("load", 2 << 20, "cache.example.com/v1alpha1");
    attack("48 x 2 MiB converting", 48, body, Expect::Success);
}

#[test]
fn reviews_at_the_size_limit_stay_within_the_memory_budget() {
    let (body, _) = review_of("load", 2_900_000, "cache.example.com/v1alpha1");
    attack("32 x 2.9 MB converting", 32, body, Expect::Success);
}

#[test]
fn failing_reviews_stay_within_the_memory_budget() {
    let (body, count) = review_of("load", 3_000_000, "cache.example.com/v9");
    assert!(count >= 15_000, "{count} objects");
    attack(
        "16 x 3 MB, 16,000 failing objects each",
        16,
        body,
        Expect::Failure,
    );
}

#[test]
fn reviews_of_tiny_objects_stay_within_the_memory_budget() {
    let body = tiny_objects_review("load", 3_000_000);
    attack(
        "16 x 3 MB, 1.5 million one-byte objects each",
        16,
        body,
        Expect::Failure,
    );
}

#[test]
fn reviews_of_dense_objects_stay_within_the_memory_budget() {
    let body = dense_object_review("load", 3_000_000);
    attack(
        "16 x 3 MB, one object of 300,000 managed fields",
        16,
        body,
        Expect::Failure,
    );
}
