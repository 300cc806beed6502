//! HTTP endpoints of `operator run`: `/metrics` on the metrics address, `/healthz` and
//! `/readyz` on the probe address (two listeners, as kubebuilder managers have, so a metrics
//! scraper and the kubelet can be firewalled separately).
//!
//! `/metrics` is served over HTTPS and only to callers the API server authenticates and
//! authorizes (`--metrics-secure`, the default: [`auth`], [`tls`]), as controller-runtime's
//! secure metrics server with `filters.WithAuthenticationAndAuthorization` does;
//! `--metrics-secure=false` serves it over plain HTTP to anyone, for local use. The probes stay
//! plain, unauthenticated HTTP, as in kubebuilder managers: the kubelet's `httpGet` probes send
//! no credentials and do not verify certificates, the answers reveal nothing but liveness and
//! readiness, and the probe port is only reached by the node's kubelet (it is in no Service).
//!
//! `/healthz` answers 200 while the process serves. `/readyz` answers 200 only when every check
//! passes: `webhook` (the conversion webhook has a certificate and serves, or is disabled) and
//! `shutdown` (no SIGTERM received yet, so the Service stops sending conversion requests to a
//! replica that is going away). Non-leader replicas are ready: they serve the webhook. The body
//! lists each check as Kubernetes components do (`[+]name ok` / `[-]name failed: reason`).

pub mod auth;
pub mod certs;
pub mod listener;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// A listener could not be opened, or a server failed.
#[derive(Debug, Error)]
pub enum ServeHttpError {
    /// Binding the address failed.
    #[error("cannot listen on {addr} for {what}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Which endpoint.
        what: &'static str,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("{what} server failed: {source}")]
    Serve {
        /// Which endpoint.
        what: &'static str,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The metrics server's TLS certificate cannot be set up.
    #[error(transparent)]
    MetricsTls(#[from] tls::MetricsTlsError),
}

/// How `/metrics` is served.
#[derive(Clone, Debug)]
pub enum MetricsServing {
    /// Plain HTTP, no authentication (`--metrics-secure=false`).
    Plain,
    /// HTTPS; every request authenticated and authorized through the API server.
    Secure {
        /// TLS configuration (certificate resolver included).
        tls: Arc<rustls::ServerConfig>,
        /// The authentication and authorization filter.
        auth: Arc<auth::MetricsAuth>,
    },
}

/// How long in-flight scrapes may take to finish once the servers stop.
const METRICS_GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(5);
/// How long in-flight probes may take to finish once the servers stop.
const PROBES_GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(1);

/// The connection limits of the health probe port (the kubelet opens a connection per probe
/// and answers come at once): the webhook's at its defaults.
pub const PROBE_LIMITS: listener::ConnectionLimits = listener::ConnectionLimits {
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
    max_connections: listener::HEALTH_MAX_CONNECTIONS,
    max_request_time: Duration::from_secs(10),
};

/// The connection limits of the metrics port: the same, except that a request may take two
/// reviews by the API server ([`auth::REVIEW_TIMEOUT`] each) before its answer.
pub const METRICS_LIMITS: listener::ConnectionLimits = listener::ConnectionLimits {
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
    max_connections: 16,
    max_request_time: Duration::from_secs(30),
};

/// What `/readyz` looks at.
#[derive(Clone, Debug)]
pub struct Health {
    /// Readiness of the conversion webhook.
    pub webhook: WebhookReadiness,
    /// Set once shutdown began.
    pub shutting_down: Arc<AtomicBool>,
}

/// Result of the readiness checks: HTTP status and body.
pub fn readyz_report(health: &Health) -> (StatusCode, String) {
    let (webhook_ok, webhook_reason) = health.webhook.status();
    let stopping = health.shutting_down.load(Ordering::SeqCst);
    let checks = [
        ("ping", true, String::new()),
        ("webhook", webhook_ok, webhook_reason),
        ("shutdown", !stopping, "shutting down".to_string()),
    ];
    let mut body = String::new();
    for (name, ok, reason) in &checks {
        if *ok {
            body.push_str(&format!("[+]{name} ok\n"));
        } else {
            body.push_str(&format!("[-]{name} failed: {reason}\n"));
        }
    }
    if checks.iter().all(|c| c.1) {
        body.push_str("readyz check passed\n");
        (StatusCode::OK, body)
    } else {
        body.push_str("readyz check failed\n");
        (StatusCode::INTERNAL_SERVER_ERROR, body)
    }
}

async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "[+]ping ok\nhealthz check passed\n")
}

async fn readyz(State(health): State<Health>) -> impl IntoResponse {
    readyz_report(&health)
}

async fn metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.render() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Opens a listener, naming the endpoint in the error.
pub async fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, ServeHttpError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeHttpError::Bind { addr, what, source })
}

/// Serves `/healthz` and `/readyz` until `stop`.
pub async fn serve_probes(
    listener: TcpListener,
    health: Health,
    stop: CancellationToken,
) -> Result<(), ServeHttpError> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health);
    listener::serve(
        listener,
        None,
        app,
        PROBE_LIMITS,
        stop,
        PROBES_GRACEFUL_SHUTDOWN,
    )
    .await;
    Ok(())
}

/// Serves `/metrics` until `stop`: over plain HTTP, or over HTTPS behind the
/// [`auth::require`] filter.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics_state: Arc<Metrics>,
    serving: MetricsServing,
    stop: CancellationToken,
) -> Result<(), ServeHttpError> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(metrics_state);
    match serving {
        MetricsServing::Plain => {
            listener::serve(
                listener,
                None,
                app,
                METRICS_LIMITS,
                stop,
                METRICS_GRACEFUL_SHUTDOWN,
            )
            .await;
        }
        MetricsServing::Secure { tls, auth } => {
            // The filter wraps every route and the fallback, so even a 404 needs credentials.
            let app = app.layer(axum::middleware::from_fn_with_state(auth, auth::require));
            listener::serve(
                listener,
                Some(tls),
                app,
                METRICS_LIMITS,
                stop,
                METRICS_GRACEFUL_SHUTDOWN,
            )
            .await;
        }
    }
    Ok(())
}

/// Whether the webhook can answer ConversionReviews, shared between the server and the health
/// endpoints. Cloning shares the state.
#[derive(Clone, Debug, Default)]
pub struct WebhookReadiness {
    inner: Arc<Mutex<ReadinessState>>,
}

#[derive(Debug)]
struct ReadinessState {
    ready: bool,
    reason: String,
}

impl Default for ReadinessState {
    fn default() -> Self {
        Self {
            ready: false,
            reason: "webhook server not started".into(),
        }
    }
}

impl WebhookReadiness {
    /// A readiness signal in the not-ready state.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once a certificate is loaded and the listener accepts connections (or the webhook is
    /// disabled).
    pub fn is_ready(&self) -> bool {
        self.lock().ready
    }

    /// Why the webhook is (not) ready, for `/readyz` output and logs.
    pub fn reason(&self) -> String {
        self.lock().reason.clone()
    }

    /// Both at once, consistently.
    pub fn status(&self) -> (bool, String) {
        let state = self.lock();
        (state.ready, state.reason.clone())
    }

    pub(crate) fn set(&self, ready: bool, reason: impl Into<String>) {
        let mut state = self.lock();
        state.ready = ready;
        state.reason = reason.into();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReadinessState> {
        // A panic while holding this lock cannot leave the two plain fields inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_lists_every_check() {
        let health = Health {
            webhook: WebhookReadiness::new(),
            shutting_down: Arc::default(),
        };
        let (code, body) = readyz_report(&health);
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            body.starts_with("[+]ping ok\n[-]webhook failed: "),
            "{body}"
        );
        assert!(body.contains("[+]shutdown ok\n"));
        assert!(body.ends_with("readyz check failed\n"));
    }
}
