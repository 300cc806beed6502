//! `<operator> run`: the controller manager process.
//!
//! Wires the pieces together: configuration and flags ([`RunArgs`], kubebuilder's names), the
//! Kubernetes client, the health and metrics listeners, the conversion webhook (when the
//! operator has one), leader election, and the operator's controllers, started afresh in each
//! leadership term; then handles SIGTERM/SIGINT: `/readyz` turns unready, in-flight reconciles
//! finish (for at most `--shutdown-timeout`), the Lease is released, the servers stop, and the
//! process exits 0.
//!
//! Exit codes: 0 after a clean shutdown, 1 for bad flags or configuration (no kubeconfig, an
//! address that cannot be bound), 2 for unexpected failures.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use olmkit_core::duration::parse_duration;
use thiserror::Error;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::conversion::Converter;
use crate::http::WebhookReadiness;
use crate::http::{self, Health, ServeHttpError};
use crate::leader::{self, LeaderElectionConfig, LeaderElectionConfigError};
use crate::metrics::Metrics;
use crate::scope::{ParseWatchScopeError, WatchScope};
use crate::telemetry::{self, LogFormat};
use crate::webhook::{self, WebhookArgs};

/// Arguments of `<operator> run`. Every flag can also be set through the environment variable
/// named after it.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Namespaces to watch, comma-separated; empty watches all namespaces. OLM passes its
    /// target namespaces here (the `olm.targetNamespaces` annotation via the downward API).
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    pub watch_namespace: String,

    /// Address of the Prometheus `/metrics` endpoint (`HOST:PORT` or `:PORT`); `0` disables it.
    #[arg(long, env = "METRICS_BIND_ADDRESS", default_value = ":8080", value_parser = parse_optional_bind_address)]
    pub metrics_bind_address: OptionalAddr,

    /// Serve `/metrics` over HTTPS to callers the API server authenticates (TokenReview) and
    /// authorizes for `get` on the non-resource URL `/metrics` (SubjectAccessReview), as
    /// kubebuilder managers do; `--metrics-secure=false` serves plain HTTP to anyone (local use).
    #[arg(long, env = "METRICS_SECURE", default_value_t = true, action = clap::ArgAction::Set,
        num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub metrics_secure: bool,

    /// Directory of the metrics serving certificate; without it a self-signed certificate is
    /// generated at start.
    #[arg(long, env = "METRICS_CERT_PATH")]
    pub metrics_cert_path: Option<std::path::PathBuf>,

    /// File name of the metrics certificate (PEM chain) in --metrics-cert-path.
    #[arg(long, env = "METRICS_CERT_NAME", default_value = "tls.crt")]
    pub metrics_cert_name: String,

    /// File name of the metrics private key (PEM) in --metrics-cert-path.
    #[arg(long, env = "METRICS_CERT_KEY", default_value = "tls.key")]
    pub metrics_cert_key: String,

    /// Address of the `/healthz` and `/readyz` endpoints (`HOST:PORT` or `:PORT`).
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: SocketAddr,

    /// Elect a leader through a Lease so that only one replica reconciles.
    #[arg(long, env = "LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,

    /// Name of the leader-election Lease. Default: `<operator>-leader`.
    #[arg(long, env = "LEADER_ELECTION_ID")]
    pub leader_election_id: Option<String>,

    /// Namespace of the Lease. Default: POD_NAMESPACE, else the in-cluster service-account
    /// namespace, else the kubeconfig's namespace.
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// This replica's identity in the Lease. Default: POD_NAME, else the host name plus a
    /// random suffix.
    #[arg(long, env = "POD_NAME")]
    pub leader_election_identity: Option<String>,

    /// How long a lease stays valid after its last renewal (whole seconds).
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,

    /// How long before expiry a leader that could not renew gives up leading (whole seconds,
    /// below the lease duration): the renew deadline is the lease duration minus this.
    #[arg(long, env = "LEADER_ELECTION_RENEW_GRACE", default_value = "5s", value_parser = parse_duration)]
    pub leader_election_renew_grace: Duration,

    /// How often standbys look at the Lease and the leader renews it (controller-runtime's
    /// RetryPeriod): a released Lease is taken over within about this long.
    #[arg(long, env = "LEADER_ELECTION_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: Duration,

    /// Most reconciles running at once (never two for one object).
    #[arg(long, env = "MAX_CONCURRENT_RECONCILES", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,

    /// Requeue period of a converged, valid object (catches anything a watch missed).
    #[arg(long, env = "RESYNC_PERIOD", default_value = "5m", value_parser = parse_duration)]
    pub resync_period: Duration,

    /// First retry delay after a failed reconcile; doubles per consecutive failure.
    #[arg(long, env = "BACKOFF_BASE", default_value = "500ms", value_parser = parse_duration)]
    pub backoff_base: Duration,

    /// Longest retry delay after failed reconciles.
    #[arg(long, env = "BACKOFF_MAX", default_value = "5m", value_parser = parse_duration)]
    pub backoff_max: Duration,

    /// Longest wait for in-flight reconciles on shutdown.
    #[arg(long, env = "SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Log line format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Conversion webhook flags.
    #[command(flatten)]
    pub webhook: WebhookArgs,
}

/// A listen address, or none (`0`: the endpoint is off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionalAddr(pub Option<SocketAddr>);

/// Parses `HOST:PORT`, or `:PORT` for all interfaces (the Go/kubebuilder form).
pub fn parse_bind_address(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    let full = if t.starts_with(':') {
        format!("0.0.0.0{t}")
    } else {
        t.to_string()
    };
    full.parse()
        .map_err(|_| format!("`{text}` is not an address like :8080 or 127.0.0.1:8080"))
}

fn parse_optional_bind_address(text: &str) -> Result<OptionalAddr, String> {
    match text.trim() {
        "0" | "" => Ok(OptionalAddr(None)),
        t => parse_bind_address(t).map(|a| OptionalAddr(Some(a))),
    }
}

/// What a controller gets in each leadership term: everything is fresh per term except the
/// client, recorder and metrics.
#[derive(Clone)]
pub struct ControllerContext {
    /// API client (the operator's User-Agent).
    pub client: Client,
    /// Event publisher (reporting controller = the operator's name, instance = this replica).
    pub recorder: Recorder,
    /// The operator's metrics.
    pub metrics: Arc<Metrics>,
    /// The namespaces to watch.
    pub scope: WatchScope,
    /// Most reconciles at once (`--max-concurrent-reconciles`).
    pub concurrency: u16,
    /// Requeue period of a converged object (`--resync-period`).
    pub resync: Duration,
    /// First retry delay after a failure (`--backoff-base`).
    pub backoff_base: Duration,
    /// Longest retry delay (`--backoff-max`).
    pub backoff_max: Duration,
    /// The field manager of the operator's writes (its name).
    pub field_manager: String,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("scope", &self.scope)
            .field("concurrency", &self.concurrency)
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

/// The operator's controllers for one term: run until the token is cancelled, then let
/// in-flight reconciles finish and return.
pub type Controllers =
    Arc<dyn Fn(ControllerContext, CancellationToken) -> BoxFuture<'static, ()> + Send + Sync>;

/// What the manager runs: the operator's identity, controllers and conversion.
#[derive(Clone)]
pub struct Plan {
    /// The operator's name (`memcached-operator`): field manager, event reporter, Lease default,
    /// metric prefix, User-Agent.
    pub name: String,
    /// The operator's version, for the User-Agent.
    pub version: String,
    /// The operator's crate name, for the default log filter.
    pub crate_name: String,
    /// The controllers.
    pub controllers: Controllers,
    /// The conversion webhook's converters (empty: no conversion webhook to serve).
    pub converters: Vec<Arc<dyn Converter>>,
    /// Metrics, with the operator's own collectors registered.
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Why `run` stopped with an error.
#[derive(Debug, Error)]
pub enum RunError {
    /// `WATCH_NAMESPACE` is malformed.
    #[error(transparent)]
    WatchScope(#[from] ParseWatchScopeError),
    /// Leader-election durations are unusable.
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionConfigError),
    /// No usable kubeconfig or in-cluster configuration.
    #[error("cannot load the Kubernetes client configuration: {0}")]
    KubeConfig(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// A listener could not be opened.
    #[error(transparent)]
    Http(#[from] ServeHttpError),
    /// The webhook server failed.
    #[error("conversion webhook failed: {0}")]
    Webhook(#[source] webhook::ServeWebhookError),
    /// The webhook task ended without a result (it panicked or was cancelled).
    #[error("conversion webhook failed: {0}")]
    WebhookTask(String),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl RunError {
    /// 1 for configuration problems the user can fix, 2 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::WatchScope(_)
            | Self::LeaderElection(_)
            | Self::KubeConfig(_)
            | Self::Http(ServeHttpError::Bind { .. } | ServeHttpError::MetricsTls(_)) => 1,
            Self::Webhook(_)
            | Self::WebhookTask(_)
            | Self::Client(_)
            | Self::Http(_)
            | Self::Runtime(_) => 2,
        }
    }

    /// What the user can do about the error, printed as `hint:` lines after it. Empty when
    /// there is nothing better to say than the error itself.
    pub fn hints(&self) -> Vec<String> {
        match self {
            Self::WatchScope(_) => vec![
                "set WATCH_NAMESPACE (or --watch-namespace) to comma-separated namespace names \
                 such as `team-a,team-b`, or leave it empty to watch all namespaces"
                    .into(),
            ],
            Self::LeaderElection(e) => vec![leader_hint(e)],
            Self::KubeConfig(_) => vec![
                "set KUBECONFIG to a readable kubeconfig (default ~/.kube/config), or run \
                 in-cluster with a service account"
                    .into(),
            ],
            Self::Client(_) => vec![
                "check the server URL, certificates and credentials of the current context in \
                 the kubeconfig (KUBECONFIG), or run in-cluster"
                    .into(),
            ],
            Self::Http(ServeHttpError::Bind { addr, what, source }) => {
                let flag = bind_flag(what);
                vec![bind_hint(*addr, source, flag, flag)]
            }
            Self::Webhook(webhook::ServeWebhookError::Bind { addr, source }) => vec![
                bind_hint(*addr, source, "--webhook-port", "--webhook-bind-address"),
                "a cluster without conversion webhook can run with --disable-webhook".into(),
            ],
            Self::Http(ServeHttpError::MetricsTls(_)) => vec![
                "check the files in --metrics-cert-path (--metrics-cert-name, --metrics-cert-key), \
                 or leave --metrics-cert-path unset to serve a self-signed certificate"
                    .into(),
            ],
            _ => Vec::new(),
        }
    }
}

fn leader_hint(e: &LeaderElectionConfigError) -> String {
    match e {
        LeaderElectionConfigError::NotWholeSeconds { flag, .. } => {
            format!("give --leader-election-{flag} in whole seconds, e.g. 15s")
        }
        LeaderElectionConfigError::GraceTooLong { .. } => {
            "lower --leader-election-renew-grace or raise --leader-election-lease-duration \
             (defaults: 5s and 15s)"
                .into()
        }
        LeaderElectionConfigError::RetryTooLong { .. } => {
            "lower --leader-election-retry-period, or raise --leader-election-lease-duration \
             or lower --leader-election-renew-grace (defaults: 2s, 15s and 5s)"
                .into()
        }
    }
}

/// The flag that sets the address of an HTTP endpoint, by the name [`http::bind`] was given.
fn bind_flag(what: &str) -> &'static str {
    match what {
        "metrics" => "--metrics-bind-address",
        "health probes" => "--health-probe-bind-address",
        // Unknown endpoint names still point at the two address flags `run` has.
        _ => "--metrics-bind-address/--health-probe-bind-address",
    }
}

/// The hint for a listener that could not be opened on `addr`; `port_flag` and `addr_flag`
/// are the flags that set its port and its address.
fn bind_hint(
    addr: SocketAddr,
    source: &std::io::Error,
    port_flag: &str,
    addr_flag: &str,
) -> String {
    match source.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "port {} is already in use: pick another {port_flag}, or stop the process using it",
            addr.port()
        ),
        std::io::ErrorKind::PermissionDenied => {
            format!("ports below 1024 need privileges: pick a port above 1024 with {port_flag}")
        }
        std::io::ErrorKind::AddrNotAvailable => format!(
            "{} is not an address of this host: pick another {addr_flag} (0.0.0.0 listens on \
             all interfaces)",
            addr.ip()
        ),
        _ => format!("pick another {addr_flag}"),
    }
}

/// Runs the controller manager until SIGTERM.
pub fn main(plan: Plan, args: RunArgs) -> ExitCode {
    telemetry::init(args.log_format, &plan.crate_name);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return report(RunError::Runtime(e)),
    };
    match runtime.block_on(run(plan, args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report(e),
    }
}

fn report(e: RunError) -> ExitCode {
    error!(error = %e, "operator stopped");
    eprintln!("error: {e}");
    for hint in e.hints() {
        eprintln!("hint: {hint}");
    }
    ExitCode::from(e.exit_code())
}

fn in_cluster_namespace() -> Option<String> {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn default_identity(name: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| name.to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{host}_{:x}",
        (nanos ^ u128::from(std::process::id()) << 32) & 0xffff_ffff_ffff
    )
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn termination_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => info!("received SIGTERM"),
                    _ = int.recv() => info!("received SIGINT"),
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// How `/metrics` is served: plain, or HTTPS behind the TokenReview/SubjectAccessReview filter
/// (the reviews go through the operator's own client, so its ServiceAccount needs the
/// `metrics-auth-role`).
async fn metrics_serving(
    args: &RunArgs,
    client: &Client,
    stop: CancellationToken,
) -> Result<http::MetricsServing, RunError> {
    if !args.metrics_secure {
        warn!("--metrics-secure=false: /metrics is served over plain HTTP without authentication");
        return Ok(http::MetricsServing::Plain);
    }
    let source = http::tls::CertSource::from_flags(
        args.metrics_cert_path.clone(),
        &args.metrics_cert_name,
        &args.metrics_cert_key,
    );
    let tls = http::tls::server_config(&source, stop)
        .await
        .map_err(ServeHttpError::from)?;
    let reviewer = Arc::new(http::auth::ApiReviewer::new(client.clone()));
    Ok(http::MetricsServing::Secure {
        tls: Arc::new(tls),
        auth: Arc::new(http::auth::MetricsAuth::new(reviewer)),
    })
}

/// The servers every replica runs, leader or not: probes, metrics, the conversion webhook.
struct Servers {
    set: tokio::task::JoinSet<Result<(), ServeHttpError>>,
    webhook: tokio::task::JoinHandle<Result<(), RunError>>,
    webhook_failed: CancellationToken,
    stop: CancellationToken,
}

async fn start_servers(
    plan: &Plan,
    args: &RunArgs,
    client: &Client,
    shutting_down: Arc<AtomicBool>,
    shutdown: &CancellationToken,
) -> Result<Servers, RunError> {
    let readiness = WebhookReadiness::new();
    // Servers outlive the controllers: probes and metrics stay up while shutdown drains.
    let stop = CancellationToken::new();
    let probe_listener = http::bind(args.health_probe_bind_address, "health probes").await?;
    info!(address = %args.health_probe_bind_address, "serving /healthz and /readyz");
    let mut set = tokio::task::JoinSet::new();
    set.spawn(http::serve_probes(
        probe_listener,
        Health {
            webhook: readiness.clone(),
            shutting_down,
        },
        stop.clone(),
    ));
    if let Some(addr) = args.metrics_bind_address.0 {
        let listener = http::bind(addr, "metrics").await?;
        let serving = metrics_serving(args, client, stop.clone()).await?;
        let scheme = match serving {
            http::MetricsServing::Plain => "http",
            http::MetricsServing::Secure { .. } => "https",
        };
        info!(address = %addr, scheme, "serving /metrics");
        set.spawn(http::serve_metrics(
            listener,
            plan.metrics.clone(),
            serving,
            stop.clone(),
        ));
    }
    // The webhook runs on every replica: the API server may call any of them.
    let webhook_failed = CancellationToken::new();
    let webhook = {
        let mut wargs = args.webhook.clone();
        wargs.disable_webhook |= plan.converters.is_empty();
        let (readiness, stop, failed, shutdown) = (
            readiness,
            stop.clone(),
            webhook_failed.clone(),
            shutdown.clone(),
        );
        let converters = plan.converters.clone();
        tokio::spawn(async move {
            let result = webhook::serve(wargs, converters, readiness, stop).await;
            if let Err(e) = &result {
                error!(error = %e, "conversion webhook stopped; shutting down");
                failed.cancel();
                shutdown.cancel();
            }
            result.map_err(RunError::Webhook)
        })
    };
    Ok(Servers {
        set,
        webhook,
        webhook_failed,
        stop,
    })
}

impl Servers {
    /// Stops every server, each within a few seconds; the webhook's error if it failed.
    async fn stop(mut self) -> Result<(), RunError> {
        self.stop.cancel();
        let webhook_result =
            match tokio::time::timeout(Duration::from_secs(5), &mut self.webhook).await {
                Ok(Ok(r)) => r,
                Ok(Err(join)) => Err(RunError::WebhookTask(join.to_string())),
                Err(_) => {
                    warn!("webhook server did not stop in 5s");
                    self.webhook.abort();
                    Ok(())
                }
            };
        while let Ok(Some(joined)) =
            tokio::time::timeout(Duration::from_secs(5), self.set.join_next()).await
        {
            if let Ok(Err(e)) = joined {
                warn!(error = %e, "HTTP server stopped with an error");
            }
        }
        self.set.abort_all();
        if self.webhook_failed.is_cancelled() {
            webhook_result?;
        }
        Ok(())
    }
}

/// How long the API server may take to answer `GET /version` during shutdown before in-flight
/// reconciles are given up on.
const API_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often it is asked during shutdown.
const API_PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Resolves once the API server fails to answer `GET /version` within [`API_PROBE_TIMEOUT`]
/// (asked every [`API_PROBE_INTERVAL`]): no answer, or no connection. Any HTTP answer, error
/// statuses included, means it is there.
async fn api_server_gone(client: &Client) {
    loop {
        match tokio::time::timeout(API_PROBE_TIMEOUT, client.apiserver_version()).await {
            Err(_) => return,
            Ok(Err(kube::Error::HyperError(_) | kube::Error::Service(_))) => return,
            Ok(_) => {}
        }
        tokio::time::sleep(API_PROBE_INTERVAL).await;
    }
}

/// The controllers of one term: they get the shutdown timeout to finish in-flight reconciles,
/// unless the API server stops answering, when their requests cannot complete and waiting is
/// pointless (the main client's read timeout is minutes).
async fn term(controllers: Controllers, ctx: ControllerContext, token: CancellationToken) {
    let api = ctx.client.clone();
    let work = (controllers)(ctx, token.clone());
    tokio::select! {
        () = work => {}
        () = async { token.cancelled().await; api_server_gone(&api).await } => {
            warn!(
                timeout = ?API_PROBE_TIMEOUT,
                "the API server does not answer; stopping in-flight reconciles instead of \
                 waiting for --shutdown-timeout"
            );
        }
    }
}

/// The leader-election settings, when `--leader-elect`.
fn election(
    plan: &Plan,
    args: &RunArgs,
    config: &kube::Config,
    identity: &str,
    (lease_duration_secs, renew_grace_secs): (u64, u64),
) -> Option<LeaderElectionConfig> {
    args.leader_elect.then(|| LeaderElectionConfig {
        lease_name: args
            .leader_election_id
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("{}-leader", plan.name)),
        namespace: args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .filter(|s| !s.is_empty())
            .or_else(in_cluster_namespace)
            .unwrap_or_else(|| config.default_namespace.clone()),
        identity: identity.to_string(),
        lease_duration_secs,
        renew_grace_secs,
        retry_period: args.leader_election_retry_period,
        field_manager: format!("{}-leader-election", plan.name),
    })
}

/// The operator's work: under leader election, or at once.
async fn work(
    plan: &Plan,
    args: &RunArgs,
    config: kube::Config,
    ctx: ControllerContext,
    election: Option<LeaderElectionConfig>,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let controllers = plan.controllers.clone();
    let metrics = plan.metrics.clone();
    let start = move |token: CancellationToken| term(controllers.clone(), ctx.clone(), token);
    let grace = args.shutdown_timeout;
    match election {
        Some(cfg) => {
            let timeout = leader::lease_request_timeout(&cfg);
            let mut c = config;
            c.connect_timeout = Some(timeout);
            c.read_timeout = Some(timeout);
            c.write_timeout = Some(timeout);
            let lease_client = Client::try_from(c).map_err(RunError::Client)?;
            // Bounds the drain itself and releases the Lease even when it times out.
            leader::run(lease_client, cfg, metrics, shutdown, grace, start).await;
        }
        None => {
            metrics.set_leader(true);
            tokio::select! {
                () = start(shutdown.clone()) => {}
                () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
                    warn!(timeout = ?grace, "graceful shutdown timed out; stopping in-flight reconciles");
                }
            }
            metrics.set_leader(false);
        }
    }
    Ok(())
}

/// Runs the manager until SIGTERM/SIGINT (or a failed webhook).
pub async fn run(plan: Plan, args: RunArgs) -> Result<(), RunError> {
    let scope = WatchScope::parse(&args.watch_namespace)?;
    let lease = leader::lease_seconds(
        args.leader_election_lease_duration,
        args.leader_election_renew_grace,
        args.leader_election_retry_period,
    )?;
    let mut config = kube::Config::infer().await.map_err(RunError::KubeConfig)?;
    // Names the operator in API-server audit logs (kube-rs sends no User-Agent of its own).
    if let Ok(agent) = ::http::HeaderValue::from_str(&format!("{}/{}", plan.name, plan.version)) {
        config.headers.push((::http::header::USER_AGENT, agent));
    }
    let client = Client::try_from(config.clone()).map_err(RunError::Client)?;
    let shutting_down = Arc::new(AtomicBool::new(false));
    let shutdown = CancellationToken::new();
    let servers = start_servers(&plan, &args, &client, shutting_down.clone(), &shutdown).await?;
    {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            termination_signal().await;
            shutting_down.store(true, Ordering::SeqCst);
            shutdown.cancel();
        });
    }
    let identity = args
        .leader_election_identity
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| default_identity(&plan.name));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: plan.name.clone(),
            instance: Some(identity.clone()),
        },
    );
    let ctx = ControllerContext {
        client: client.clone(),
        recorder,
        metrics: plan.metrics.clone(),
        scope: scope.clone(),
        concurrency: args.max_concurrent_reconciles,
        resync: args.resync_period,
        backoff_base: args.backoff_base,
        backoff_max: args.backoff_max,
        field_manager: plan.name.clone(),
    };
    info!(scope = %scope, leader_elect = args.leader_elect, "starting the controller manager");
    let election = election(&plan, &args, &config, &identity, lease);
    let drained = work(&plan, &args, config, ctx, election, shutdown).await;
    let stopped = servers.stop().await;
    drained?;
    stopped?;
    info!("shutdown complete");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn defaults_follow_kubebuilder_conventions() {
        let w = Wrapper::try_parse_from(["x"]).unwrap();
        assert_eq!(
            w.run.metrics_bind_address,
            OptionalAddr(Some("0.0.0.0:8080".parse().unwrap()))
        );
        assert_eq!(w.run.health_probe_bind_address.port(), 8081);
        assert!(w.run.metrics_secure, "metrics are secure by default");
        assert_eq!(w.run.metrics_cert_path, None);
        assert_eq!(w.run.webhook.webhook_port, 9443);
        assert!(!w.run.leader_elect);
        assert_eq!(
            w.run.leader_election_lease_duration,
            Duration::from_secs(15)
        );
        assert_eq!(w.run.leader_election_retry_period, Duration::from_secs(2));
        assert_eq!(w.run.resync_period, Duration::from_secs(300));
    }

    #[test]
    fn metrics_secure_takes_go_style_booleans() {
        let parse = |args: &[&str]| {
            Wrapper::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map(|w| w.run.metrics_secure)
        };
        assert!(parse(&["--metrics-secure"]).unwrap());
        assert!(!parse(&["--metrics-secure=false"]).unwrap());
        assert!(parse(&["--metrics-secure=true"]).unwrap());
        assert!(parse(&["--metrics-secure=maybe"]).is_err());
    }

    #[test]
    fn config_errors_exit_1() {
        let e: RunError = WatchScope::parse("A").unwrap_err().into();
        assert_eq!(e.exit_code(), 1);
        assert_eq!(parse_optional_bind_address("0"), Ok(OptionalAddr(None)));
        assert_eq!(
            parse_bind_address("127.0.0.1:9"),
            Ok("127.0.0.1:9".parse().unwrap())
        );
        assert!(parse_bind_address("8080").is_err());
    }

    #[test]
    fn errors_come_with_hints() {
        let e: RunError = WatchScope::parse("A").unwrap_err().into();
        assert!(e.hints()[0].contains("WATCH_NAMESPACE"), "{:?}", e.hints());
        let in_use = |what| {
            RunError::Http(ServeHttpError::Bind {
                addr: "0.0.0.0:8081".parse().unwrap(),
                what,
                source: std::io::ErrorKind::AddrInUse.into(),
            })
        };
        assert_eq!(
            in_use("health probes").hints(),
            [
                "port 8081 is already in use: pick another --health-probe-bind-address, or stop \
              the process using it"
            ]
        );
        assert!(in_use("metrics").hints()[0].contains("--metrics-bind-address"));
        let e = RunError::Webhook(webhook::ServeWebhookError::Bind {
            addr: "10.9.9.9:9443".parse().unwrap(),
            source: std::io::ErrorKind::AddrNotAvailable.into(),
        });
        assert!(
            e.hints()[0].starts_with(
                "10.9.9.9 is not an address of this host: pick another --webhook-bind-address"
            ),
            "{:?}",
            e.hints()
        );
        assert_eq!(e.exit_code(), 2, "exit codes do not depend on hints");
        assert!(
            RunError::Runtime(std::io::ErrorKind::Other.into())
                .hints()
                .is_empty()
        );
    }

    #[test]
    fn identities_differ() {
        let a = default_identity("x");
        std::thread::sleep(Duration::from_millis(2));
        assert_ne!(a, default_identity("x"));
    }
}
