//! Plain-HTTP endpoints of `operator run`: `/metrics` on the metrics address, `/healthz` and
//! `/readyz` on the probe address (two listeners, as kubebuilder managers have, so a metrics
//! scraper and the kubelet can be firewalled separately).
//!
//! `/healthz` answers 200 while the process serves. `/readyz` answers 200 only when every check
//! passes: `webhook` (the conversion webhook has a certificate and serves, or is disabled) and
//! `shutdown` (no SIGTERM received yet, so the Service stops sending conversion requests to a
//! replica that is going away). Non-leader replicas are ready: they serve the webhook. The body
//! lists each check as Kubernetes components do (`[+]name ok` / `[-]name failed: reason`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::webhook::WebhookReadiness;

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
}

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
    axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .map_err(|source| ServeHttpError::Serve {
            what: "health probe",
            source,
        })
}

/// Serves `/metrics` until `stop`.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics_state: Arc<Metrics>,
    stop: CancellationToken,
) -> Result<(), ServeHttpError> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(metrics_state);
    axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .map_err(|source| ServeHttpError::Serve {
            what: "metrics",
            source,
        })
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
