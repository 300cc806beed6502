//! In-process checks of the HTTP layer: media type, size and time limits, health routes.

use std::time::Duration;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::server::{Limits, router};
use crate::http::WebhookReadiness;

const REVIEW: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u1","desiredAPIVersion":"demo.example.com/v1","objects":[{"apiVersion":"demo.example.com/v1alpha1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":2}}]}}"#;

fn app(max: usize, timeout: Duration, readiness: WebhookReadiness) -> axum::Router {
    router(
        Limits {
            max_request_bytes: max,
            request_timeout: timeout,
            ..Limits::default()
        },
        crate::testing::widget_converters(),
        readiness,
    )
}

async fn send(app: axum::Router, request: Request<Body>) -> (StatusCode, String) {
    let response = app.oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn post(content_type: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut builder = Request::post("/convert");
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    builder.body(body.into()).expect("request")
}

#[tokio::test]
async fn converts_with_json_media_type_and_parameters() {
    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
    ] {
        let (status, body) = send(
            app(1 << 20, Duration::from_secs(5), WebhookReadiness::new()),
            post(Some(ct), REVIEW),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{ct}: {body}");
        assert!(body.contains(r#""status":"Success""#), "{body}");
    }
}

#[tokio::test]
async fn other_media_types_get_415() {
    for ct in [Some("text/plain"), Some("application/yaml"), None] {
        let (status, body) = send(
            app(1 << 20, Duration::from_secs(5), WebhookReadiness::new()),
            post(ct, REVIEW),
        )
        .await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        assert!(body.contains("application/json"), "{body}");
        assert!(body.contains(r#""kind":"Status""#), "{body}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_declared_or_streamed() {
    let big = vec![b' '; 4096];
    let (status, body) = send(
        app(1024, Duration::from_secs(5), WebhookReadiness::new()),
        post(Some("application/json"), big.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(body.contains("1024 bytes"), "{body}");

    // No Content-Length: the limit is enforced while reading.
    let chunks = futures::stream::iter(
        big.chunks(512)
            .map(|c| Ok::<_, std::io::Error>(axum::body::Bytes::copy_from_slice(c)))
            .collect::<Vec<_>>(),
    );
    let (status, _) = send(
        app(1024, Duration::from_secs(5), WebhookReadiness::new()),
        post(Some("application/json"), Body::from_stream(chunks)),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn a_body_that_never_finishes_gets_408() {
    let endless = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
    let (status, body) = send(
        app(1 << 20, Duration::from_millis(100), WebhookReadiness::new()),
        post(Some("application/json"), Body::from_stream(endless)),
    )
    .await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{body}");
    assert!(body.contains("--webhook-request-timeout"), "{body}");
}

#[tokio::test]
async fn wrong_method_and_path() {
    let a = || app(1 << 20, Duration::from_secs(5), WebhookReadiness::new());
    let (status, _) = send(
        a(),
        Request::get("/convert").body(Body::empty()).expect("req"),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, body) = send(
        a(),
        Request::delete("/healthz")
            .body(Body::empty())
            .expect("req"),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        body.contains("MethodNotAllowed") && body.contains("POST /convert"),
        "{body}"
    );
    let (status, body) = send(
        a(),
        Request::post("/mutate").body(Body::empty()).expect("req"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("/convert"), "{body}");
}

#[tokio::test]
async fn readyz_follows_readiness_and_healthz_is_always_ok() {
    let readiness = WebhookReadiness::new();
    let get = |path: &str| Request::get(path).body(Body::empty()).expect("req");
    let a = || app(1 << 20, Duration::from_secs(5), readiness.clone());
    assert_eq!(send(a(), get("/healthz")).await.0, StatusCode::OK);
    let (status, body) = send(a(), get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("not started"), "{body}");
    readiness.set(true, "serving");
    let (status, body) = send(a(), get("/readyz")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("serving"), "{body}");
}

#[test]
fn readiness_is_shared_between_clones() {
    let a = WebhookReadiness::new();
    let b = a.clone();
    assert!(!a.is_ready());
    b.set(true, "ok");
    assert!(a.is_ready());
    assert_eq!(a.reason(), "ok");
}

#[test]
fn flags_parse_with_defaults_and_durations() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::WebhookArgs,
    }
    let defaults = Cli::try_parse_from(["x"]).expect("parses").args;
    assert_eq!(defaults, super::WebhookArgs::default());
    assert_eq!(defaults.webhook_port, 9443);
    let custom = Cli::try_parse_from([
        "x",
        "--webhook-port",
        "8443",
        "--webhook-cert-path",
        "/certs",
        "--webhook-cert-poll-interval",
        "500ms",
        "--webhook-request-timeout",
        "1m",
        "--webhook-max-request-bytes",
        "1048576",
        "--webhook-max-concurrent-requests",
        "4",
        "--webhook-max-inflight-bytes",
        "2097152",
        "--webhook-max-connections",
        "3",
    ])
    .expect("parses")
    .args;
    assert_eq!(custom.webhook_port, 8443);
    assert_eq!(custom.webhook_max_concurrent_requests, 4);
    assert_eq!(custom.webhook_max_inflight_bytes, 2 << 20);
    assert_eq!(defaults.webhook_max_concurrent_requests, 16);
    assert_eq!(defaults.webhook_max_inflight_bytes, 16 << 20);
    assert_eq!(defaults.webhook_max_connections, 16);
    assert_eq!(custom.webhook_max_connections, 3);
    // The documented budget holds at the defaults (see "Memory budget").
    let bound = super::memory_bound(
        defaults.webhook_max_inflight_bytes,
        defaults.webhook_max_connections,
        defaults.webhook_max_concurrent_requests,
    );
    assert!(bound <= super::MEMORY_BUDGET_BYTES, "{} MiB", bound >> 20);
    // The figures the "Memory budget" doc states.
    use crate::http::listener::{HTTP1_CONNECTION_BYTES, HTTPS_CONNECTION_BYTES, REQUEST_BYTES};
    assert_eq!(HTTPS_CONNECTION_BYTES, 696 * 1024);
    assert_eq!(HTTP1_CONNECTION_BYTES, 304 * 1024);
    assert_eq!(REQUEST_BYTES, 168 * 1024);
    assert_eq!(bound, 50944 * 1024, "49.75 MiB");
    assert_eq!(
        custom.webhook_cert_poll_interval,
        Duration::from_millis(500)
    );
    assert_eq!(custom.webhook_request_timeout, Duration::from_secs(60));
    let bad = Cli::try_parse_from(["x", "--webhook-cert-poll-interval", "soon"]);
    assert!(bad.is_err());
    let negative = Cli::try_parse_from(["x", "--webhook-request-timeout", "-5s"]);
    assert!(negative.is_err());
}

#[test]
fn default_certificate_locations_are_olms() {
    let defaults = super::cert_candidates(&super::WebhookArgs::default());
    let paths: Vec<_> = defaults
        .iter()
        .map(|c| (c.cert.display().to_string(), c.key.display().to_string()))
        .collect();
    assert_eq!(
        paths,
        [
            (
                "/tmp/k8s-webhook-server/serving-certs/tls.crt".to_string(),
                "/tmp/k8s-webhook-server/serving-certs/tls.key".to_string()
            ),
            (
                "/apiserver.local.config/certificates/apiserver.crt".to_string(),
                "/apiserver.local.config/certificates/apiserver.key".to_string()
            ),
        ]
    );
    let explicit = super::WebhookArgs {
        webhook_cert_path: Some("/certs".into()),
        webhook_cert_name: "serving.pem".into(),
        ..Default::default()
    };
    let only = super::cert_candidates(&explicit);
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].cert, std::path::Path::new("/certs/serving.pem"));
}

#[tokio::test]
async fn the_first_existing_pair_wins_and_bad_pairs_name_the_file() {
    use crate::http::certs::{self, CertFiles};
    let dir = tempfile::tempdir().expect("tempdir");
    let a = CertFiles {
        cert: dir.path().join("a.crt"),
        key: dir.path().join("a.key"),
    };
    let b = CertFiles {
        cert: dir.path().join("b.crt"),
        key: dir.path().join("b.key"),
    };
    let missing = certs::read_first(&[a.clone(), b.clone()]).await;
    let message = missing.expect_err("nothing there").to_string();
    assert!(
        message.contains("a.crt") && message.contains("b.key"),
        "{message}"
    );

    let provider = rustls::crypto::ring::default_provider();
    let one = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    std::fs::write(&b.cert, one.cert.pem()).expect("write");
    std::fs::write(&b.key, one.signing_key.serialize_pem()).expect("write");
    let bytes = certs::read_first(&[a.clone(), b.clone()])
        .await
        .expect("b exists");
    assert_eq!(bytes.files, b);
    let loaded = certs::parse(&bytes, &provider).expect("valid pair");
    assert_eq!(loaded.fingerprint.len(), 64);

    // `a` appears: it is first, and its key belongs to another certificate.
    std::fs::write(&a.cert, one.cert.pem()).expect("write");
    std::fs::write(&a.key, other.signing_key.serialize_pem()).expect("write");
    let bytes = certs::read_first(&[a.clone(), b.clone()])
        .await
        .expect("a exists");
    assert_eq!(bytes.files, a);
    let err = certs::parse(&bytes, &provider)
        .expect_err("mismatch")
        .to_string();
    assert!(err.contains("a.crt") && err.contains("key pair"), "{err}");

    std::fs::write(&a.cert, "not a certificate").expect("write");
    let bytes = certs::read_first(std::slice::from_ref(&a))
        .await
        .expect("exists");
    let err = certs::parse(&bytes, &provider)
        .expect_err("garbage")
        .to_string();
    assert!(
        err.contains("a.crt") && err.contains("no PEM certificate"),
        "{err}"
    );
}

#[tokio::test]
async fn oversized_headers_get_431_with_a_reason() {
    let mut builder = Request::post("/convert").header("content-type", "application/json");
    for i in 0..(super::server::MAX_HEADERS + 1) {
        builder = builder.header(format!("x-filler-{i}"), "v");
    }
    let (status, body) = send(
        app(1 << 20, Duration::from_secs(5), WebhookReadiness::new()),
        builder.body(Body::from(REVIEW)).expect("req"),
    )
    .await;
    assert_eq!(status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(body.contains("RequestHeaderFieldsTooLarge"), "{body}");

    let (status, body) = send(
        app(1 << 20, Duration::from_secs(5), WebhookReadiness::new()),
        Request::post("/convert")
            .header("content-type", "application/json")
            .header("x-big", "a".repeat(super::server::MAX_HEADER_BYTES))
            .body(Body::from(REVIEW))
            .expect("req"),
    )
    .await;
    assert_eq!(status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(body.contains("bytes"), "{body}");
}

#[tokio::test]
async fn requests_beyond_the_budgets_get_429_with_retry_after() {
    let app = router(
        Limits {
            max_concurrent_requests: 1,
            max_inflight_bytes: 4096,
            max_request_bytes: 4096,
            request_timeout: Duration::from_secs(30),
        },
        crate::testing::widget_converters(),
        WebhookReadiness::new(),
    );
    // The first request holds the only slot: its body never ends.
    let endless = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
    let held = tokio::spawn(
        app.clone()
            .oneshot(post(Some("application/json"), Body::from_stream(endless))),
    );
    let mut answered = None;
    for _ in 0..200 {
        let response = app
            .clone()
            .oneshot(post(Some("application/json"), REVIEW))
            .await
            .expect("infallible");
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            answered = Some(response);
            break;
        }
        // Its body holds its budget until read or dropped.
        drop(response);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let response = answered.expect("a second request is refused while the first holds the slot");
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("TooManyRequests") && body.contains("--webhook-max-concurrent-requests"),
        "{body}"
    );
    held.abort();
    let _ = held.await;
    // The slot is given back: the next review converts.
    let (status, body) = send(app, post(Some("application/json"), REVIEW)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_body_larger_than_the_free_byte_budget_gets_429() {
    let app = router(
        Limits {
            max_concurrent_requests: 4,
            max_inflight_bytes: 64 * 1024,
            max_request_bytes: 64 * 1024,
            request_timeout: Duration::from_secs(30),
        },
        crate::testing::widget_converters(),
        WebhookReadiness::new(),
    );
    // Declares 60 KiB and sends none of it: holds 60 KiB of the 64 KiB budget.
    let endless = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
    let mut request = post(Some("application/json"), Body::from_stream(endless));
    request
        .headers_mut()
        .insert("content-length", http::HeaderValue::from(60 * 1024));
    let held = tokio::spawn(app.clone().oneshot(request));
    let mut refused = None;
    for _ in 0..200 {
        let padded = format!("{REVIEW}{}", " ".repeat(8 * 1024));
        let (status, body) = send(app.clone(), post(Some("application/json"), padded)).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let body = refused.expect("an 8 KiB review does not fit next to 60 KiB in a 64 KiB budget");
    assert!(body.contains("--webhook-max-inflight-bytes"), "{body}");
    // A small review still fits.
    let (status, body) = send(app.clone(), post(Some("application/json"), REVIEW)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    held.abort();
}
