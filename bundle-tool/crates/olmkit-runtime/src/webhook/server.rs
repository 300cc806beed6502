//! HTTP routes of the webhook: `POST /convert`, `GET /healthz`, `GET /readyz`.
//!
//! Owns the request-level limits (Content-Type, body size, time, header size, and admission by
//! [`super::admission`]); the review itself is answered by [`super::review`]. Every error answer
//! — 404, 405, 408, 413, 415, 429, 431, 500 — has a `meta/v1` Status body in JSON saying why, as
//! the API server's own errors do. (Headers beyond hyper's own ceilings, see
//! [`super::HYPER_MAX_HEADERS`], are refused by hyper with a bare 431 before any route runs.)

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Version, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt;

use super::admission::{Admission, Refused, Ticket};
use super::pool::ConvertPool;
use super::review::{self, LOG_REJECTIONS, Outcome, Reply};
use crate::conversion::Converter;
use crate::http::WebhookReadiness;
use std::sync::Arc;

/// Bodies above this size are converted on the conversion threads ([`ConvertPool`]), so a 3 MiB
/// review does not stall the async workers serving other connections.
const INLINE_BODY_BYTES: usize = 64 * 1024;
/// Conversion threads: admission bounds the memory, these the CPU and the malloc arenas.
const CONVERT_THREADS: usize = 2;

/// Most request headers we accept; more get 431 with a reason (hyper's own ceiling is higher).
pub const MAX_HEADERS: usize = 100;
/// Most bytes of request headers (names and values) we accept; more get 431 with a reason.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// Seconds a client told 429 should wait before retrying.
const RETRY_AFTER_SECS: u64 = 1;
// A client that waits as told is not evicted at the connection cap meanwhile.
const _: () = assert!(RETRY_AFTER_SECS < crate::http::listener::EVICTABLE_AFTER.as_secs());

/// Request limits of `/convert`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest body in bytes.
    pub max_request_bytes: usize,
    /// Longest time from the start of the body to the response.
    pub request_timeout: Duration,
    /// Reviews handled at once; more get 429.
    pub max_concurrent_requests: usize,
    /// Request body bytes held at once by the reviews being handled; more get 429.
    pub max_inflight_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_bytes: super::DEFAULT_MAX_REQUEST_BYTES,
            request_timeout: Duration::from_secs(10),
            max_concurrent_requests: super::DEFAULT_MAX_CONCURRENT_REQUESTS,
            max_inflight_bytes: super::DEFAULT_MAX_INFLIGHT_BYTES,
        }
    }
}

#[derive(Clone)]
struct AppState {
    limits: Limits,
    admission: Admission,
    pool: ConvertPool,
    converters: Arc<Vec<Arc<dyn Converter>>>,
}

/// The webhook's routes (served over TLS).
pub fn router(
    limits: Limits,
    converters: Vec<Arc<dyn Converter>>,
    readiness: WebhookReadiness,
) -> Router {
    let admission = Admission::new(
        limits.max_concurrent_requests,
        limits.max_inflight_bytes,
        limits.max_request_bytes,
    );
    health_router(readiness)
        .route("/convert", post(convert))
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(AppState {
            pool: ConvertPool::new(CONVERT_THREADS, limits.max_concurrent_requests),
            limits,
            admission,
            converters: Arc::new(converters),
        })
        .layer(middleware::from_fn(check_headers))
}

async fn method_not_allowed(method: Method) -> Response {
    into_response(review::status_reply(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!(
            "method {} is not allowed here; the conversion webhook takes POST /convert and GET /healthz, /readyz",
            review_echo(method.as_str())
        ),
    ))
}

/// At most 64 bytes of a client-chosen token in a message.
fn review_echo(text: &str) -> String {
    let mut end = text.len().min(64);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Refuses oversized header sections with a reason (hyper would answer a bare 431 only beyond
/// its own, higher, ceilings).
async fn check_headers(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let count = headers.len();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if count > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        let message = format!(
            "request headers too large: {count} headers, {bytes} bytes (limits {MAX_HEADERS} headers, {MAX_HEADER_BYTES} bytes)"
        );
        warn_rejected(&message);
        let mut response = into_response(review::status_reply(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "RequestHeaderFieldsTooLarge",
            &message,
        ));
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    next.run(request).await
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
        .method_not_allowed_fallback(method_not_allowed)
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
        reply.body(),
    )
        .into_response()
}

/// Logs a refused request, at most as often as [`LOG_REJECTIONS`] allows (a flood of 429s must
/// not become a flood of log lines).
fn warn_rejected(message: &str) {
    if let Some(suppressed) = LOG_REJECTIONS.allow() {
        tracing::warn!(suppressed, "rejected request: {message}");
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The answer to a body that is not JSON (by its Content-Type).
fn unsupported_media_type(headers: &HeaderMap) -> Response {
    let found = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| "none".to_string(), review_echo);
    let message = format!("Content-Type must be application/json, got {found}");
    warn_rejected(&message);
    into_response(review::status_reply(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        &message,
    ))
}

/// The 413 of a body declared over the limit: not admitted; read and discard (bounded, when a
/// drain slot is free) so that the client sees the answer (see `refuse`).
async fn refuse_too_large(
    admission: &Admission,
    version: Version,
    body: Body,
    limit: usize,
) -> Response {
    let mut response = too_large(limit);
    let drained = match admission.drain_slot() {
        Some(_slot) => drain(body, limit).await.is_ok(),
        None => false,
    };
    if version < Version::HTTP_2 && !drained {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn convert(
    State(state): State<AppState>,
    version: Version,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let limits = state.limits;
    if !is_json(&headers) {
        return unsupported_media_type(&headers);
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
        if declared.is_some_and(|len| len > limit as u64) {
            return refuse_too_large(&state.admission, version, body, limit).await;
        }
        let declared = declared.and_then(|len| usize::try_from(len).ok());
        let mut ticket = match state.admission.admit(declared.map(review::base_cost)) {
            Ok(ticket) => ticket,
            Err(refused) => return refuse(&state.admission, version, body, limit, &refused).await,
        };
        let bytes = match read_body(body, limit, declared, &mut ticket).await {
            ReadBody::Complete(bytes) => bytes,
            ReadBody::TooLarge => return too_large(limit),
            ReadBody::Refused(refused, rest) => {
                drop(ticket);
                return refuse(&state.admission, version, rest, limit, &refused).await;
            }
            ReadBody::Failed(e) => {
                let message = format!("cannot read the request body: {e}");
                warn_rejected(&message);
                return into_response(review::status_reply(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &message,
                ));
            }
        };
        let size = bytes.len();
        let (answered, ticket) = answer(&state, bytes, ticket).await;
        match answered {
            Ok((reply, outcome)) => {
                match &outcome {
                    Outcome::Converted { objects } => tracing::debug!(
                        objects,
                        bytes = size,
                        elapsed_us = started.elapsed().as_micros() as u64,
                        "converted"
                    ),
                    Outcome::Failed { .. } | Outcome::Rejected { .. } => {}
                }
                held_response(reply, ticket)
            }
            // The body is read already: nothing to drain.
            Err(refused) => {
                drop(ticket);
                let message = refused.to_string();
                warn_rejected(&message);
                too_many(&message)
            }
        }
    };
    match tokio::time::timeout(limits.request_timeout, work).await {
        Ok(response) => response,
        Err(_) => {
            let message = format!(
                "request not answered within {:?} (--webhook-request-timeout)",
                limits.request_timeout
            );
            warn_rejected(&message);
            into_response(review::status_reply(
                StatusCode::REQUEST_TIMEOUT,
                "Timeout",
                &message,
            ))
        }
    }
}

/// The answer, in its chunks, keeping the request's budget until hyper has taken the last of
/// them: the answer is memory too, and so is what the conversion held. A client that does not
/// read it loses its connection after the listener's request lifetime, which frees both.
fn held_response(reply: Reply, ticket: Option<Ticket>) -> Response {
    let length = reply.len();
    let chunks = futures::stream::iter(
        reply
            .chunks
            .into_iter()
            .map(Ok::<Bytes, std::convert::Infallible>),
    );
    let body = Body::from_stream(chunks).map_frame(move |frame| {
        let _held = &ticket;
        frame
    });
    (
        reply.status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CONTENT_LENGTH, HeaderValue::from(length)),
        ],
        Body::new(body),
    )
        .into_response()
}

/// `429 Too Many Requests` with `Retry-After`.
fn too_many(message: &str) -> Response {
    let mut response = into_response(review::status_reply(
        StatusCode::TOO_MANY_REQUESTS,
        "TooManyRequests",
        message,
    ));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

/// Answers 429 with `Retry-After`, after reading the body and throwing it away (bounded, if a
/// drain slot is free): an HTTP/1.1 client writes all of it before reading the answer, and over
/// HTTP/2 an answer sent while the client still sends is followed by a stream reset that some
/// clients report instead of the answer. Without a drain slot the answer goes out at once (and
/// an HTTP/1.1 connection is closed after it).
async fn refuse(
    admission: &Admission,
    version: Version,
    body: Body,
    limit: usize,
    refused: &Refused,
) -> Response {
    let message = refused.to_string();
    warn_rejected(&message);
    let drained = match admission.drain_slot() {
        Some(_slot) => drain(body, limit).await.is_ok(),
        None => false,
    };
    let mut response = too_many(&message);
    let headers = response.headers_mut();
    if !drained && version < Version::HTTP_2 {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Reads a body to its end, keeping nothing; fails beyond [`drain_limit`] or on a read error.
async fn drain(mut body: Body, limit: usize) -> Result<(), ()> {
    let mut seen: u64 = 0;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return Err(()) };
        if let Ok(data) = frame.into_data() {
            seen = seen.saturating_add(data.len() as u64);
            if seen > drain_limit(limit) {
                return Err(());
            }
        }
    }
    Ok(())
}

/// Converts a review within the byte budget `limit`, charging `ticket` as it goes; gives the
/// ticket back (unless the conversion thread failed) to be held by the answer.
async fn answer(
    state: &AppState,
    bytes: Bytes,
    mut ticket: Ticket,
) -> (Result<(Reply, Outcome), Refused>, Option<Ticket>) {
    let (pool, limit) = (&state.pool, state.admission.max_bytes());
    let converters = state.converters.clone();
    if bytes.len() <= INLINE_BODY_BYTES {
        let answered = review::answer_within(&bytes, &converters, limit, &mut |total| {
            ticket.charge_up_to(total)
        });
        return (answered, Some(ticket));
    }
    let job = move || {
        let answered = review::answer_within(&bytes, &converters, limit, &mut |total| {
            ticket.charge_up_to(total)
        });
        // The body is not needed any more (its charge stays until the answer is sent).
        drop(bytes);
        (answered, ticket)
    };
    match pool.run(job).await {
        Ok((answered, ticket)) => (answered, Some(ticket)),
        Err(e) => {
            let message = format!("conversion task failed: {e}");
            tracing::error!("{message}");
            (
                Ok((
                    review::status_reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalError",
                        &message,
                    ),
                    Outcome::Rejected { message },
                )),
                None,
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
    /// The byte budget ran out part way; the rest of the body is handed back to be drained.
    Refused(Refused, Body),
    Failed(String),
}

async fn read_body(
    mut body: Body,
    limit: usize,
    declared: Option<usize>,
    ticket: &mut Ticket,
) -> ReadBody {
    let drain = drain_limit(limit);
    let mut buffer: Vec<u8> = Vec::with_capacity(declared.filter(|len| *len <= limit).unwrap_or(0));
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
            let len = seen as usize;
            if len > buffer.capacity() {
                // A body without a declared length grows its buffer (never past the limit) and
                // is charged for it as it arrives.
                let grown = (buffer.capacity() * 2).clamp(len, limit);
                buffer.reserve_exact(grown - buffer.len());
            }
            if let Err(refused) = ticket.charge_up_to(review::base_cost(buffer.capacity())) {
                return ReadBody::Refused(refused, body);
            }
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
    warn_rejected(&message);
    into_response(review::status_reply(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        &message,
    ))
}
