//! Load test of the real `operator webhook` binary (loopback only, bounded, seconds): many
//! concurrent large ConversionReviews, over HTTP/1.1 connections of their own and multiplexed on
//! one HTTP/2 connection as the API server does.
//!
//! Checks that the reviews beyond the webhook's budgets are answered `429` with `Retry-After`
//! and a Status body saying why, that every admitted review converts, that the refused ones
//! convert when retried as the API server retries them, and that the process' peak RSS
//! (`VmHWM` in `/proc/<pid>/status`) stays under the budget the webhook documents
//! (`memcached_operator::webhook::MEMORY_BUDGET_BYTES`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

/// Reviews sent at once.
const CONCURRENT: usize = 48;
/// Size of each review.
const REVIEW_BYTES: usize = 2 * 1024 * 1024;

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
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// The child is killed and waited for by `Webhook`'s Drop, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn start(cert_dir: &Path) -> Webhook {
    let mut child = Command::new(env!("CARGO_BIN_EXE_operator"))
        .env("RUST_LOG", "info")
        .env_remove("LOG_FORMAT")
        .args(["webhook", "--webhook-bind-address", "127.0.0.1"])
        .args(["--webhook-port", "0", "--webhook-request-timeout", "60s"])
        .arg("--webhook-cert-path")
        .arg(cert_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("rejected request") {
                continue; // one per 429: expected, and many
            }
            eprintln!("[operator] {line}");
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("operator webhook did not report its address");
        if let Some(rest) = line.split("listening on ").nth(1) {
            let base = rest.trim().trim_end_matches("/convert").to_string();
            return Webhook { child, base };
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

/// A v1alpha1 → v1 review of about `bytes` bytes.
fn big_review(uid: &str, bytes: usize) -> Vec<u8> {
    let one = json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "memcached-sample-000000", "namespace": "default",
                     "uid": "6f2b4a3c-0000-4000-8000-000000000000"},
        "spec": {"size": 3}
    });
    let per = serde_json::to_vec(&one).unwrap().len() + 1;
    let objects: Vec<Value> = (0..bytes / per)
        .map(|i| {
            let mut o = one.clone();
            o["metadata"]["name"] = json!(format!("memcached-sample-{i:06}"));
            o
        })
        .collect();
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": "cache.example.com/v1", "objects": objects}
    }))
    .unwrap()
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

enum Outcome {
    Converted,
    Refused { retry_after: String },
}

async fn send(client: &reqwest::Client, base: &str, uid: &str, body: Vec<u8>) -> Outcome {
    let response = client
        .post(format!("{base}/convert"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let answer: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    match status {
        200 => {
            assert_eq!(answer["response"]["uid"], uid);
            assert_eq!(
                answer["response"]["result"]["status"], "Success",
                "{answer}"
            );
            Outcome::Converted
        }
        429 => {
            assert_eq!(answer["reason"], "TooManyRequests", "{answer}");
            let message = answer["message"].as_str().unwrap();
            assert!(message.contains("--webhook-max-"), "{message}");
            Outcome::Refused { retry_after }
        }
        other => panic!("unexpected {other}: {answer}"),
    }
}

#[test]
fn concurrent_large_reviews_stay_within_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ca = install_pki(dir.path());
    let webhook = start(dir.path());
    let pid = webhook.child.id();
    let base = webhook.base.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let h2 = client(&ca, vec![b"h2".to_vec()]);
        // Warm up: one review converts.
        let warm = big_review("warm", REVIEW_BYTES);
        assert!(matches!(
            send(&h2, &base, "warm", warm).await,
            Outcome::Converted
        ));
        let idle = vm_hwm_kib(pid);
        let body = Arc::new(big_review("load", REVIEW_BYTES));
        let started = Arc::new(tokio::sync::Barrier::new(CONCURRENT));
        let mut tasks = Vec::new();
        for i in 0..CONCURRENT {
            // Half on connections of their own (HTTP/1.1), half on one HTTP/2 connection.
            let c = if i % 2 == 0 {
                client(&ca, vec![b"http/1.1".to_vec()])
            } else {
                h2.clone()
            };
            let (base, body, started) = (base.clone(), body.clone(), started.clone());
            tasks.push(tokio::spawn(async move {
                let uid = "load";
                started.wait().await;
                let mut refusals = 0;
                // Retry as the API server does, honouring Retry-After (bounded).
                for _ in 0..200 {
                    match send(&c, &base, uid, body.to_vec()).await {
                        Outcome::Converted => return refusals,
                        Outcome::Refused { retry_after } => {
                            assert_eq!(retry_after, "1");
                            refusals += 1;
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
                panic!("a review was refused 200 times");
            }));
        }
        let mut refused = 0;
        let mut first_try = 0;
        for t in tasks {
            let r = t.await.unwrap();
            refused += r;
            first_try += usize::from(r == 0);
        }
        let peak = vm_hwm_kib(pid);
        eprintln!(
            "FIGURES: {CONCURRENT} concurrent {} MiB reviews: {first_try} converted at once, \
             {refused} refusals (429) before the rest converted; peak RSS {} MiB \
             (idle after one review {} MiB; budget {} MiB)",
            REVIEW_BYTES >> 20,
            peak / 1024,
            idle / 1024,
            memcached_operator::webhook::MEMORY_BUDGET_BYTES >> 20
        );
        assert!(refused > 0, "48 x 2 MiB at once exceed the 6 MiB budget");
        assert!(first_try > 0, "some reviews are admitted at once");
        assert!(
            (peak as usize) * 1024 <= memcached_operator::webhook::MEMORY_BUDGET_BYTES,
            "peak RSS {peak} KiB over the documented budget"
        );
    });
}
