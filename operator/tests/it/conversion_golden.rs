//! Golden ConversionReviews of the Memcached conversion through the runtime's webhook server:
//! every `operator/tests/fixtures/conversion/<case>/request.json` is POSTed to the in-process
//! router and the answer compared with `response.json` byte for byte
//! (pretty-printed, keys in the order the webhook writes them). Cases named `reject-*` expect
//! HTTP 400, all others 200. `UPDATE_GOLDEN=1` rewrites the responses; review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

use olmkit_runtime::http::WebhookReadiness;
use olmkit_runtime::webhook::DEFAULT_MAX_REQUEST_BYTES;
use olmkit_runtime::webhook::server::{Limits, router};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conversion")
}

async fn post(body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let app = router(
        Limits {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            request_timeout: std::time::Duration::from_secs(10),
            ..Limits::default()
        },
        vec![std::sync::Arc::new(memcached_api::conversion::converter())],
        WebhookReadiness::new(),
    );
    let request = Request::post("/convert")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let response = app.oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, bytes.to_vec())
}

#[tokio::test]
async fn golden_reviews() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("request.json").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 15, "golden cases missing: {cases:?}");
    let mut mismatches = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let request = std::fs::read(case.join("request.json")).expect("request");
        let (status, body) = post(request).await;
        let expected_status = if name.starts_with("reject-") {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        assert_eq!(status, expected_status, "{name}");
        let value: serde_json::Value = serde_json::from_slice(&body).expect("JSON answer");
        let pretty = serde_json::to_string_pretty(&value).expect("encodes") + "\n";
        let golden = case.join("response.json");
        if update {
            std::fs::write(&golden, &pretty).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != pretty {
            mismatches.push(format!(
                "--- {name}: expected\n{expected}\n--- got\n{pretty}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} golden responses differ (UPDATE_GOLDEN=1 to accept):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// The API server's own checks on a response, applied to every golden success.
#[tokio::test]
async fn golden_successes_satisfy_the_api_server_contract() {
    for case in std::fs::read_dir(fixtures()).expect("fixtures dir") {
        let case = case.expect("entry").path();
        let Ok(request) = std::fs::read(case.join("request.json")) else {
            continue;
        };
        let Ok(request_json) = serde_json::from_slice::<serde_json::Value>(&request) else {
            continue;
        };
        let (_, body) = post(request).await;
        let response: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        let Some(result) = response.pointer("/response/result/status") else {
            continue;
        };
        let name = case.display();
        assert_eq!(
            response.pointer("/response/uid"),
            request_json.pointer("/request/uid"),
            "{name}: uid echoed"
        );
        if result != "Success" {
            assert_eq!(result, "Failure", "{name}");
            continue;
        }
        let objects = request_json["request"]["objects"]
            .as_array()
            .expect("objects");
        let converted = response["response"]["convertedObjects"]
            .as_array()
            .expect("convertedObjects");
        assert_eq!(
            objects.len(),
            converted.len(),
            "{name}: one object per object"
        );
        let desired = &request_json["request"]["desiredAPIVersion"];
        for (original, converted) in objects.iter().zip(converted) {
            assert_eq!(&converted["apiVersion"], desired, "{name}");
            assert_eq!(converted["kind"], original["kind"], "{name}");
            for key in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "labels",
                "managedFields",
                "creationTimestamp",
            ] {
                assert_eq!(
                    converted["metadata"].get(key),
                    original["metadata"].get(key),
                    "{name}: metadata.{key} unchanged"
                );
            }
        }
    }
}
