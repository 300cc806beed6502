//! HTTPS conversion webhook for `memcacheds.cache.example.com`.
//!
//! Owns the webhook's command-line flags ([`WebhookArgs`]), its readiness signal
//! ([`WebhookReadiness`]), the server ([`serve`]) and the `operator webhook` entry point
//! ([`main`]).
//!
//! Contract with the rest of the operator:
//! - [`WebhookArgs`]: clap flags, flattened into `operator run` and used by `operator webhook`.
//!   Every flag is prefixed `--webhook-` (or is `--disable-webhook`) so it cannot collide with the
//!   controller's own flags.
//! - [`serve`]: the server, spawned by `operator run`. It waits for the serving certificate
//!   without failing (OLM may mount it after the pod starts), reloads it when it changes and
//!   returns when `shutdown` is cancelled.
//! - [`WebhookReadiness`]: tells `/readyz` whether a certificate is loaded and the server is
//!   serving, with a reason when it is not.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Where OLM mounts the serving certificate it generates for webhooks (controller-runtime's
/// default directory), as `tls.crt`/`tls.key`.
pub const OLM_WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Where OLM mounts the same certificate for API services, as `apiserver.crt`/`apiserver.key`.
pub const OLM_APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
/// The API server's own limit on a request body (3 MiB); a ConversionReview it sends is never
/// larger.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// Flags of the conversion webhook server.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct WebhookArgs {
    /// Do not serve the conversion webhook (for clusters that run it elsewhere, or local runs
    /// where the CRD uses no conversion webhook).
    #[arg(long, env = "DISABLE_WEBHOOK", default_value_t = false)]
    pub disable_webhook: bool,

    /// Address the webhook listens on.
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS", default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub webhook_bind_address: IpAddr,

    /// HTTPS port of the webhook (`/convert`, `/healthz`, `/readyz`). 0 picks a free port.
    #[arg(long, env = "WEBHOOK_PORT", default_value_t = 9443)]
    pub webhook_port: u16,

    /// Directory holding the serving certificate and key. Default: the first of
    /// /tmp/k8s-webhook-server/serving-certs/tls.{crt,key} and
    /// /apiserver.local.config/certificates/apiserver.{crt,key} that exists (both are where OLM
    /// mounts the certificate it generates).
    #[arg(long, env = "WEBHOOK_CERT_PATH")]
    pub webhook_cert_path: Option<PathBuf>,

    /// File name of the PEM certificate chain inside --webhook-cert-path.
    #[arg(long, env = "WEBHOOK_CERT_NAME", default_value = "tls.crt")]
    pub webhook_cert_name: String,

    /// File name of the PEM private key inside --webhook-cert-path.
    #[arg(long, env = "WEBHOOK_CERT_KEY", default_value = "tls.key")]
    pub webhook_cert_key: String,

    /// How often the certificate files are checked for changes (rotation) or for first
    /// appearance, e.g. `5s`, `500ms`.
    #[arg(long, env = "WEBHOOK_CERT_POLL_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub webhook_cert_poll_interval: Duration,

    /// Largest accepted request body in bytes; larger requests get 413.
    #[arg(long, env = "WEBHOOK_MAX_REQUEST_BYTES", default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub webhook_max_request_bytes: usize,

    /// Longest time one request may take, from headers to response, e.g. `10s`.
    #[arg(long, env = "WEBHOOK_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub webhook_request_timeout: Duration,
}

impl Default for WebhookArgs {
    fn default() -> Self {
        Self {
            disable_webhook: false,
            webhook_bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            webhook_port: 9443,
            webhook_cert_path: None,
            webhook_cert_name: "tls.crt".into(),
            webhook_cert_key: "tls.key".into(),
            webhook_cert_poll_interval: Duration::from_secs(5),
            webhook_max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            webhook_request_timeout: Duration::from_secs(10),
        }
    }
}

impl WebhookArgs {
    /// The socket address the server binds.
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.webhook_bind_address, self.webhook_port)
    }
}

/// Parses `10s`, `500ms`, `1m 30s` or ISO 8601 `PT10S` into a non-negative duration.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("`{text}` is not a duration like 10s or 500ms: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("`{text}` must not be negative"))
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

/// Why the webhook server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeWebhookError {
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("webhook server on {addr} failed: {source}")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// Serves the conversion webhook until `shutdown` is cancelled.
pub async fn serve(
    args: WebhookArgs,
    readiness: WebhookReadiness,
    shutdown: CancellationToken,
) -> Result<(), ServeWebhookError> {
    if args.disable_webhook {
        readiness.set(true, "webhook disabled");
        return Ok(());
    }
    readiness.set(false, "webhook server not implemented in this build");
    shutdown.cancelled().await;
    Ok(())
}

/// Runs only the webhook server until SIGTERM or SIGINT.
pub fn main(args: WebhookArgs) -> ExitCode {
    let _ = (args, serve);
    eprintln!("error: `operator webhook` is not available in this build yet");
    ExitCode::from(2)
}
