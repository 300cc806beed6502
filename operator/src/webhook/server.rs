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
use http_body_util::{BodyExt, LengthLimitError, Limited};

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
    if declared.is_some_and(|len| len > limits.max_request_bytes as u64) {
        return too_large(limits.max_request_bytes);
    }
    let work = async {
        let bytes = match Limited::new(body, limits.max_request_bytes).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<LengthLimitError>() => return too_large(limits.max_request_bytes),
            Err(e) => {
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
