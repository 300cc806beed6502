//! The HTTPS conversion webhook server of an operator's CRDs.
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
//!
//! # Memory budget
//!
//! The manager container is limited to 128 MiB (`config/manager/manager.yaml`) and runs the
//! controller too; the webhook's stated budget is [`MEMORY_BUDGET_BYTES`], 64 MiB for the whole
//! `operator webhook` process (RSS), half the manager's limit. What bounds it, and the formula
//! ([`memory_bound`], checked against the budget by a unit test):
//!
//! ```text
//! peak RSS <= idle RSS                                        13 MiB (release; debug 21 MiB)
//!           + --webhook-max-inflight-bytes                    16 MiB
//!           + --webhook-max-connections x HTTPS_CONNECTION_BYTES   16 x 696 KiB
//!           + HEALTH_MAX_CONNECTIONS x HTTP1_CONNECTION_BYTES      16 x 304 KiB
//!           + --webhook-max-concurrent-requests x REQUEST_BYTES    16 x 168 KiB
//!           + 4 x --webhook-max-concurrent-requests x 40 KiB       (headers of drained bodies)
//!           = 49.75 MiB at the defaults
//! ```
//!
//! - **Reviews** ([`admission`], [`review`]): at most `--webhook-max-concurrent-requests`
//!   reviews at once (default [`DEFAULT_MAX_CONCURRENT_REQUESTS`]), holding at most
//!   `--webhook-max-inflight-bytes` (default [`DEFAULT_MAX_INFLIGHT_BYTES`], never below three
//!   times `--webhook-max-request-bytes`). Everything a review holds is charged before it is
//!   used and until hyper has taken the last byte of its answer: three times its body when it
//!   is admitted (the body, and its answer, which is written in 64 KiB chunks and never
//!   reallocated), more if the answer grows beyond that, and the parsed form of the largest of
//!   its objects so far, estimated from its text before it is parsed
//!   ([`review::parse_cost`]: its size plus 128 bytes per JSON value). Objects are read and
//!   converted one at a time from the body's text (no `serde_json::Value` of the review is
//!   built), a failing review keeps no converted objects and lists at most ten failures, so
//!   the error path costs no more than the success path (it used to cost 14 times the body: a
//!   `Value` per object, a cause and a log line per failing object). An object whose parsed
//!   form could never fit in the budget fails the review, named in its message, without being
//!   parsed. Reviews that do not fit now are answered `429 Too Many Requests` with
//!   `Retry-After` and a Status body; the API server retries those.
//! - **Connections** ([`crate::http::listener`]): at most `--webhook-max-connections` (default
//!   [`DEFAULT_MAX_CONNECTIONS`]) on the HTTPS port and [`HEALTH_MAX_CONNECTIONS`] on the plain
//!   health port; at the cap the connection idle longest is closed for a new one. Each buffers
//!   at most [`crate::http::listener::HTTPS_CONNECTION_BYTES`] (TLS buffers, the HTTP/2
//!   connection window of 512 KiB and one header block, or HTTP/1.1's 128 KiB read and write
//!   buffers) or, plain, [`crate::http::listener::HTTP1_CONNECTION_BYTES`]. Connections with
//!   no request in flight for `--webhook-request-timeout` are closed (idle, trickling headers,
//!   stuck in the TLS handshake or before HTTP/2's preface), and so is one whose request has
//!   been in flight twice that long (a client that does not read its answer), which frees
//!   what the request held.
//! - **Requests in flight** beyond their charge: headers (at most 40 KiB each), HTTP/2's send
//!   buffer (64 KiB per stream) and one answer chunk
//!   ([`crate::http::listener::REQUEST_BYTES`]); bodies refused with 429 are read and thrown
//!   away by at most four requests per request slot, each holding only its headers.
//!
//! The rest of the budget (14 MiB at the defaults) is for the allocator: the two conversion
//! threads ([`pool`]) and the async workers keep freed memory for reuse. The load test
//! `tests/it/e2e_conversion_webhook_load.rs` checks the budget (debug build, whose idle RSS after
//! one review is 31 MiB) under five attacks: 48 concurrent 2 MiB reviews, 32 of 2.9 MB, 16 of
//! 3 MB whose 16,000 objects all fail, 16 of 1.5 million one-byte objects and 16 of one object
//! of 300,000 managed fields (refused unparsed as too costly); peaks 38-48 MiB (before: 58-65,
//! 65, 115-116, 946-953 and 124 MiB).

pub mod admission;
pub mod pool;
pub mod review;
pub mod server;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use olmkit_core::duration::parse_duration;
use tokio_util::sync::CancellationToken;

/// Where OLM mounts the serving certificate it generates for webhooks (controller-runtime's
/// default directory), as `tls.crt`/`tls.key`.
pub const OLM_WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Where OLM mounts the same certificate for API services, as `apiserver.crt`/`apiserver.key`.
pub const OLM_APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
/// The API server's own limit on a request body (3 MiB); a ConversionReview it sends is never
/// larger.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;
/// Reviews handled at once by default.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 16;
/// Bytes the reviews being handled may hold at once by default (bodies, answers, parsed
/// objects; see [`admission`]): one review of the API server's largest size (9 MiB with its
/// answer) and room for smaller ones.
pub const DEFAULT_MAX_INFLIGHT_BYTES: usize = 16 * 1024 * 1024;
/// Connections open at once by default on the webhook's HTTPS port.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;
/// The webhook's stated peak memory (the whole `operator webhook` process, RSS) at the default
/// limits, whatever the load: half the manager's 128 MiB, leaving the rest to the controller.
pub const MEMORY_BUDGET_BYTES: usize = 64 * 1024 * 1024;
/// The idle process' RSS, release build, as measured (see "Memory budget").
pub const IDLE_RSS_BYTES: usize = 13 * 1024 * 1024;
use crate::http::WebhookReadiness;
use crate::http::certs::{self, CertFiles};
use crate::http::listener::{self, ConnectionLimits, HEALTH_MAX_CONNECTIONS};
pub use crate::http::listener::{HYPER_MAX_BUF_SIZE, HYPER_MAX_HEADERS};

/// The memory bound the defaults give (see "Memory budget"): idle process, reviews' budget,
/// per-connection and per-request buffers.
pub const fn memory_bound(
    max_inflight_bytes: usize,
    max_connections: usize,
    max_concurrent_requests: usize,
) -> usize {
    IDLE_RSS_BYTES
        + max_inflight_bytes
        + max_connections * listener::HTTPS_CONNECTION_BYTES
        + HEALTH_MAX_CONNECTIONS * listener::HTTP1_CONNECTION_BYTES
        // Requests admitted (headers, send buffers), and bodies being drained (headers).
        + max_concurrent_requests * listener::REQUEST_BYTES
        + max_concurrent_requests
            * admission::DRAINS_PER_REQUEST
            * listener::H2_MAX_HEADER_LIST as usize
}

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

    /// Reviews handled at once; more are answered 429 Too Many Requests with Retry-After (the
    /// API server retries them). Bounds the webhook's memory with --webhook-max-inflight-bytes.
    #[arg(long, env = "WEBHOOK_MAX_CONCURRENT_REQUESTS", default_value_t = DEFAULT_MAX_CONCURRENT_REQUESTS)]
    pub webhook_max_concurrent_requests: usize,

    /// Bytes the reviews being handled may hold at once: each is charged three times its body
    /// (body and answer) when admitted, plus the parsed form of its largest object (estimated
    /// before parsing) while it converts; reviews that do not fit are answered 429 with
    /// Retry-After, objects that could never fit fail. Never less than three times
    /// --webhook-max-request-bytes.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_BYTES", default_value_t = DEFAULT_MAX_INFLIGHT_BYTES)]
    pub webhook_max_inflight_bytes: usize,

    /// Connections open at once on the webhook port; at the cap the longest-idle connection is
    /// closed for a new one, or accepting waits while every connection has a request in flight.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub webhook_max_connections: usize,

    /// Longest time one request may take: the TLS handshake and reading its headers, from its
    /// body to the response, and again to write the response; also how long a connection may
    /// stay open without a request in flight, e.g. `10s`.
    #[arg(long, env = "WEBHOOK_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub webhook_request_timeout: Duration,

    /// Also serve GET /healthz and /readyz over plain HTTP on this port (for kubelet probes
    /// when `operator webhook` runs on its own; `operator run` has its own health port).
    #[arg(long, env = "WEBHOOK_HEALTH_PORT")]
    pub webhook_health_port: Option<u16>,
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
            webhook_max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            webhook_max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
            webhook_max_connections: DEFAULT_MAX_CONNECTIONS,
            webhook_request_timeout: Duration::from_secs(10),
            webhook_health_port: None,
        }
    }
}

impl WebhookArgs {
    /// The socket address the server binds.
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.webhook_bind_address, self.webhook_port)
    }

    /// The connection limits of the HTTPS port: a request's whole life is bounded by twice the
    /// request timeout (handling, then writing the answer).
    pub fn connection_limits(&self) -> ConnectionLimits {
        let timeout = self.webhook_request_timeout;
        ConnectionLimits {
            header_read_timeout: timeout,
            idle_timeout: timeout,
            max_connections: self.webhook_max_connections.max(1),
            max_request_time: timeout.saturating_mul(2),
        }
    }

    /// The connection limits of the plain-HTTP health port.
    pub fn health_connection_limits(&self) -> ConnectionLimits {
        let timeout = self.webhook_request_timeout;
        ConnectionLimits {
            header_read_timeout: timeout,
            idle_timeout: timeout,
            max_connections: HEALTH_MAX_CONNECTIONS,
            max_request_time: timeout,
        }
    }
}

/// Why the webhook server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeWebhookError {
    /// A listening socket could not be opened (port in use, address not local, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The server failed while running.
    #[error("webhook server on {addr} failed: {source}")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// How long in-flight requests may take to finish after shutdown is requested.
const GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(5);

fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ServeWebhookError> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| ServeWebhookError::Bind { addr, source })?;
    Ok(listener)
}

/// Serves the conversion webhook until `shutdown` is cancelled.
///
/// Binds the port at once (a port conflict is reported immediately), then waits for the serving
/// certificate without failing: until it loads, TLS handshakes are refused and `readiness` says
/// what is missing. The certificate files are re-read every `--webhook-cert-poll-interval` and a
/// changed certificate is served from the next handshake on. With `--disable-webhook` it marks
/// itself ready and returns at once.
pub async fn serve(
    args: WebhookArgs,
    converters: Vec<Arc<dyn crate::conversion::Converter>>,
    readiness: WebhookReadiness,
    shutdown: CancellationToken,
) -> Result<(), ServeWebhookError> {
    if args.disable_webhook {
        readiness.set(true, "conversion webhook disabled (--disable-webhook)");
        tracing::info!("conversion webhook disabled");
        return Ok(());
    }
    let addr = args.socket_addr();
    let listener = bind(addr)?;
    let local = listener.local_addr().unwrap_or(addr);

    // The provider is chosen here, not taken from the process default, so `serve` works the same
    // in any host process and never picks up aws-lc-rs.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = Arc::new(certs::ReloadableCert::default());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver.clone());
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

    let stop = shutdown.child_token();
    // The first look at the certificate happens before anything answers, so neither /readyz nor
    // a handshake ever sees a state older than the files on disk.
    let mut cert_watcher = CertWatcher {
        candidates: cert_candidates(&args),
        resolver,
        provider,
        readiness: readiness.clone(),
        local,
        serving: None,
        last_problem: None,
    };
    cert_watcher.check().await;
    let health = match args.webhook_health_port {
        Some(port) => {
            let health_addr = SocketAddr::new(args.webhook_bind_address, port);
            let listener =
                tokio::net::TcpListener::from_std(bind(health_addr)?).map_err(|source| {
                    ServeWebhookError::Bind {
                        addr: health_addr,
                        source,
                    }
                })?;
            let bound = listener.local_addr().unwrap_or(health_addr);
            let app = server::health_router::<()>(readiness.clone());
            tracing::info!("webhook health probes on http://{bound}/readyz");
            Some(tokio::spawn(listener::serve(
                listener,
                None,
                app,
                args.health_connection_limits(),
                stop.clone(),
                GRACEFUL_SHUTDOWN,
            )))
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|source| ServeWebhookError::Bind { addr, source })?;

    let watcher = tokio::spawn(cert_watcher.run(args.webhook_cert_poll_interval, stop.clone()));

    tracing::info!(
        "conversion webhook listening on https://{local}{}",
        crate::crd::CONVERSION_PATH
    );
    let app = server::router(
        server::Limits {
            max_request_bytes: args.webhook_max_request_bytes,
            request_timeout: args.webhook_request_timeout,
            max_concurrent_requests: args.webhook_max_concurrent_requests,
            max_inflight_bytes: args.webhook_max_inflight_bytes,
        },
        converters,
        readiness.clone(),
    );
    listener::serve(
        listener,
        Some(Arc::new(tls)),
        app,
        args.connection_limits(),
        stop.clone(),
        GRACEFUL_SHUTDOWN,
    )
    .await;

    readiness.set(false, "conversion webhook stopped");
    stop.cancel();
    let _ = watcher.await;
    if let Some(health) = health {
        let _ = health.await;
    }
    Ok(())
}

/// Polls the certificate files and keeps the served certificate and readiness current.
struct CertWatcher {
    candidates: Vec<CertFiles>,
    resolver: Arc<certs::ReloadableCert>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    readiness: WebhookReadiness,
    local: SocketAddr,
    serving: Option<certs::CertBytes>,
    last_problem: Option<String>,
}

impl CertWatcher {
    /// Loads the certificate if it appeared or changed; logs a problem once per change.
    async fn check(&mut self) {
        let problem = match certs::read_first(&self.candidates).await {
            Ok(bytes) if self.serving.as_ref() == Some(&bytes) => None,
            Ok(bytes) => match certs::parse(&bytes, &self.provider) {
                Ok(loaded) => {
                    self.resolver.set(loaded.key);
                    let path = bytes.files.cert.display().to_string();
                    tracing::info!(
                        cert = %path,
                        sha256 = %loaded.fingerprint,
                        "{} serving certificate",
                        if self.serving.is_some() { "reloaded" } else { "loaded" }
                    );
                    self.readiness.set(
                        true,
                        format!(
                            "serving on {} with the certificate from {path} (sha256 {})",
                            self.local, loaded.fingerprint
                        ),
                    );
                    self.serving = Some(bytes);
                    None
                }
                Err(e) => Some(e.to_string()),
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(problem) = &problem
            && self.last_problem.as_ref() != Some(problem)
        {
            if self.resolver.is_loaded() {
                tracing::warn!("keeping the current serving certificate: {problem}");
            } else {
                tracing::warn!("conversion webhook not ready: {problem}");
                self.readiness.set(false, problem.clone());
            }
        }
        self.last_problem = problem;
    }

    async fn run(mut self, interval: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            self.check().await;
        }
    }
}

/// Logging for `operator webhook`: human-readable lines on stderr, or JSON lines with
/// `LOG_FORMAT=json`; the level comes from `RUST_LOG` (default `info`).
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    // A subscriber may already be installed by a host process; keep it.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Resolves when the process receives SIGTERM or SIGINT.
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM ({e}); stopping on SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs only the webhook server until SIGTERM or SIGINT. Exit codes: 0 after a clean shutdown, 1
/// for configuration problems (port in use, webhook disabled), 2 for unexpected failures.
pub fn main(args: WebhookArgs, converters: Vec<Arc<dyn crate::conversion::Converter>>) -> ExitCode {
    init_logging();
    if args.disable_webhook {
        eprintln!("error: `operator webhook` has nothing to serve with --disable-webhook");
        eprintln!("hint: drop --disable-webhook (or unset DISABLE_WEBHOOK)");
        return ExitCode::from(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                termination().await;
                tracing::info!("shutting down");
                shutdown.cancel();
            }
        });
        match serve(args, converters, WebhookReadiness::new(), shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e @ ServeWebhookError::Bind { .. }) => {
                eprintln!("error: {e}");
                eprintln!(
                    "hint: choose another port with --webhook-port, or stop the process using it"
                );
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        }
    })
}

/// Where the webhook looks for its serving certificate, in order: `--webhook-cert-path` (with
/// the certificate and key names), else where OLM mounts it for webhooks and for APIServices.
pub fn cert_candidates(args: &WebhookArgs) -> Vec<CertFiles> {
    match &args.webhook_cert_path {
        Some(dir) => vec![CertFiles::in_dir(
            dir,
            &args.webhook_cert_name,
            &args.webhook_cert_key,
        )],
        None => vec![
            CertFiles::in_dir(
                std::path::Path::new(OLM_WEBHOOK_CERT_DIR),
                &args.webhook_cert_name,
                &args.webhook_cert_key,
            ),
            CertFiles::in_dir(
                std::path::Path::new(OLM_APISERVICE_CERT_DIR),
                "apiserver.crt",
                "apiserver.key",
            ),
        ],
    }
}

#[cfg(test)]
mod http_tests;
