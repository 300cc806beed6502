//! HTTP routes of the webhook: `POST /convert`, `GET /healthz`, `GET /readyz`.
//!
//! Owns the request-level limits (Content-Type, body size, time); the review itself is answered by
//! [`super::review`]. Every error body is a `meta/v1` Status in JSON, as the API server's own.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt;

use super::WebhookReadiness;
use super::review::{self, Outcome, Reply};

/// Bodies above this size are converted on the blocking pool, so a 3 MiB review does not stall
/// the async workers serving other connections.
const INLINE_BODY_BYTES: usize = 64 * 1024;

/// Request limits of `/convert`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest body in bytes.
    pub max_request_bytes: usize,
    /// Longest time from the start of the body to the response.
    pub request_timeout: Duration,
}

/// The webhook's routes (served over TLS).
pub fn router(limits: Limits, readiness: WebhookReadiness) -> Router {
    health_router(readiness)
        .route("/convert", post(convert))
        .with_state(limits)
}

/// Only the health routes (for the optional plain-HTTP health port).
pub fn health_router<S: Clone + Send + Sync + 'static>(readiness: WebhookReadiness) -> Router<S> {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let readiness = readiness.clone();
                async move { readyz(&readiness) }
            }),
        )
        .fallback(|| async {
            into_response(review::status_reply(
                StatusCode::NOT_FOUND,
                "NotFound",
                "no such path; the conversion webhook serves POST /convert",
            ))
        })
}

fn readyz(readiness: &WebhookReadiness) -> Response {
    let (ready, reason) = readiness.status();
    if ready {
        (StatusCode::OK, format!("ok: {reason}\n")).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        )
            .into_response()
    }
}

fn into_response(reply: Reply) -> Response {
    (
        reply.status,
        [(header::CONTENT_TYPE, "application/json")],
        reply.body,
    )
        .into_response()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

async fn convert(State(limits): State<Limits>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    if !is_json(&headers) {
        let found = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let message = format!("Content-Type must be application/json, got {found}");
        tracing::warn!("rejected request: {message}");
        return into_response(review::status_reply(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            &message,
        ));
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let limit = limits.max_request_bytes;
    if declared.is_some_and(|len| len > drain_limit(limit)) {
        // Too big even to read and discard: answer now; the connection closes after the reply.
        return too_large(limit);
    }
    let work = async {
        let bytes = match read_body(body, limit, declared).await {
            ReadBody::Complete(bytes) => bytes,
            ReadBody::TooLarge => return too_large(limit),
            ReadBody::Failed(e) => {
                let message = format!("cannot read the request body: {e}");
                tracing::warn!("{message}");
                return into_response(review::status_reply(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &message,
                ));
            }
        };
        let size = bytes.len();
        let (reply, outcome) = answer(bytes).await;
        match &outcome {
            Outcome::Converted { objects } => tracing::debug!(
                objects,
                bytes = size,
                elapsed_us = started.elapsed().as_micros() as u64,
                "converted"
            ),
            Outcome::Failed { .. } | Outcome::Rejected { .. } => {}
        }
        into_response(reply)
    };
    match tokio::time::timeout(limits.request_timeout, work).await {
        Ok(response) => response,
        Err(_) => {
            let message = format!(
                "request not answered within {:?} (--webhook-request-timeout)",
                limits.request_timeout
            );
            tracing::warn!("{message}");
            into_response(review::status_reply(
                StatusCode::REQUEST_TIMEOUT,
                "Timeout",
                &message,
            ))
        }
    }
}

async fn answer(bytes: Bytes) -> (Reply, Outcome) {
    if bytes.len() <= INLINE_BODY_BYTES {
        return review::answer(&bytes);
    }
    match tokio::task::spawn_blocking(move || review::answer(&bytes)).await {
        Ok(answered) => answered,
        Err(e) => {
            let message = format!("conversion task failed: {e}");
            tracing::error!("{message}");
            (
                review::status_reply(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &message),
                Outcome::Rejected { message },
            )
        }
    }
}

/// Up to how many bytes of an oversized body are read and thrown away before answering 413.
///
/// An HTTP/1.1 client writes its whole body before it reads the answer; closing the connection
/// under it turns the 413 into a "broken pipe" on the client side. Draining a bounded amount lets
/// the client see the 413; beyond the bound the connection is closed.
fn drain_limit(limit: usize) -> u64 {
    (limit as u64).saturating_mul(4).max(16 * 1024 * 1024)
}

enum ReadBody {
    Complete(Bytes),
    TooLarge,
    Failed(String),
}

async fn read_body(mut body: Body, limit: usize, declared: Option<u64>) -> ReadBody {
    let drain = drain_limit(limit);
    let mut buffer: Vec<u8> = Vec::with_capacity(
        declared
            .and_then(|len| usize::try_from(len).ok())
            .filter(|len| *len <= limit)
            .unwrap_or(0),
    );
    let mut seen: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => return ReadBody::Failed(e.to_string()),
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len() as u64);
        if seen <= limit as u64 {
            buffer.extend_from_slice(&data);
        } else if seen > drain {
            return ReadBody::TooLarge;
        } else if !buffer.is_empty() {
            buffer = Vec::new();
        }
    }
    if seen > limit as u64 {
        ReadBody::TooLarge
    } else {
        ReadBody::Complete(Bytes::from(buffer))
    }
}

fn too_large(limit: usize) -> Response {
    let message =
        format!("request body is larger than {limit} bytes (--webhook-max-request-bytes)");
    tracing::warn!("rejected request: {message}");
    into_response(review::status_reply(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        &message,
    ))
}
