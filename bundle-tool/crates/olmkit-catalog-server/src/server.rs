//! The serving loop shared by `bundle-tool serve` and the `catalog-server` binary.
//!
//! Order of events, chosen for Kubernetes probes: bind the port; answer at once with health
//! `NOT_SERVING` (for "" and for each service) while the catalog loads in the background; flip
//! to `SERVING` when it is loaded. A catalog that cannot be loaded is reported (log and
//! optional termination log) and either leaves the server up and `NOT_SERVING`, or — with
//! `exit_on_load_error` — stops it with an error. SIGTERM/SIGINT drain in-flight calls before
//! exiting.

use crate::build::{BuildIndexError, BuildOptions, build_index};
use crate::catalog::Catalog;
use crate::index::{OpenIndexError, check_fresh, default_index_path, read_index};
use crate::limits::{Budgets, Limits, Pressure, PressureChange};
use crate::pb::{
    self, experimental_registry_server::ExperimentalRegistryServer, registry_server::RegistryServer,
};
use crate::service::{CatalogSlot, ExperimentalService, RegistryService};
use crate::transport::Transport;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health as HealthService, HealthServer};
use tracing::{info, warn};

/// How long in-flight calls may take to finish after SIGTERM.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the overload watchdog looks at the budgets.
const PRESSURE_SAMPLE: Duration = Duration::from_millis(500);

/// Which precomputed index to use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IndexChoice {
    /// Use [`default_index_path`] if that file exists.
    #[default]
    Auto,
    /// Use this file (falling back to a scan, with a warning, if it is missing or stale).
    File(PathBuf),
    /// Always scan the catalog.
    Off,
}

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The FBC directory.
    pub configs: PathBuf,
    /// Address to listen on.
    pub address: IpAddr,
    /// Port to listen on (0: any free port).
    pub port: u16,
    /// Precomputed index to use.
    pub index: IndexChoice,
    /// Stop with an error when the catalog cannot be loaded, instead of staying up and
    /// `NOT_SERVING`.
    pub exit_on_load_error: bool,
    /// File that receives the load error (Kubernetes `terminationMessagePath`).
    pub termination_log: Option<PathBuf>,
    /// Artificial delay before loading (for testing probes against a slow start).
    pub load_delay: Duration,
    /// Threads used to scan the catalog (0: one per CPU).
    pub threads: usize,
    /// Stream and worker budgets.
    pub limits: Limits,
}

impl ServeOptions {
    /// Defaults for a catalog directory: all interfaces, port 50051, automatic index.
    pub fn new(configs: impl Into<PathBuf>) -> Self {
        Self {
            configs: configs.into(),
            address: IpAddr::from([0, 0, 0, 0]),
            port: 50051,
            index: IndexChoice::Auto,
            exit_on_load_error: false,
            termination_log: None,
            load_delay: Duration::ZERO,
            threads: 0,
            limits: Limits::default(),
        }
    }
}

/// Command-line flags of the catalog server, shared by `catalog-server` and `bundle-tool serve`
/// (names follow `opm serve` where it has the same option).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// The catalog directory (File-Based Catalog).
    #[arg(value_name = "CONFIGS_DIR")]
    pub configs: PathBuf,
    /// Port to listen on.
    #[arg(short, long, default_value_t = 50051)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub address: IpAddr,
    /// Precomputed index (from `bundle-tool catalog index`). Default: `<CONFIGS_DIR>/../index`
    /// when that file exists. A missing or stale index is ignored with a warning.
    #[arg(long, value_name = "FILE", conflicts_with = "no_index")]
    pub index: Option<PathBuf>,
    /// Ignore any index and scan the catalog.
    #[arg(long)]
    pub no_index: bool,
    /// Exit with code 1 when the catalog cannot be loaded (default: stay up and NOT_SERVING).
    #[arg(long)]
    pub exit_on_load_error: bool,
    /// Write the load error to this file (Kubernetes terminationMessagePath).
    #[arg(long, value_name = "FILE")]
    pub termination_log: Option<PathBuf>,
    /// Threads used to scan the catalog (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// HTTP/2 streams (calls) one connection may have open at once.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_CONCURRENT_STREAMS)]
    pub max_concurrent_streams: u32,
    /// Streaming calls (ListBundles, ListPackages, ...) open at once on the whole server; more
    /// fail with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_OPEN_STREAMS)]
    pub max_open_streams: usize,
    /// Streaming calls open at once on one connection; more fail with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_OPEN_STREAMS_PER_CONNECTION)]
    pub max_open_streams_per_connection: usize,
    /// Threads answering unary calls that read the catalog (0: two per CPU, at least 4).
    #[arg(long, default_value_t = 0)]
    pub query_threads: usize,
    /// Seconds the server may stay unable to serve (all stream slots taken, or calls or stream
    /// batches waiting for a worker the whole time) before health reports NOT_SERVING.
    #[arg(long, default_value_t = crate::limits::DEFAULT_OVERLOAD_GRACE.as_secs())]
    pub overload_grace_secs: u64,
    /// Client connections served at once (lowered to fit the open-file limit). At the limit the
    /// connection idle longest is closed to make room; when all are busy, new ones wait.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds a new connection has to send the HTTP/2 preface before it is closed.
    #[arg(long, default_value_t = crate::limits::DEFAULT_HANDSHAKE_TIMEOUT.as_secs())]
    pub handshake_timeout_secs: u64,
    /// Seconds a call may wait for its client (to take response data, or to send the rest of a
    /// request message) before that call alone is cancelled.
    #[arg(long, default_value_t = crate::limits::DEFAULT_STREAM_STALL_TIMEOUT.as_secs())]
    pub stream_stall_timeout_secs: u64,
    /// Largest request message in bytes; larger ones fail with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// Bytes of unfinished request messages the server holds for one connection; calls beyond
    /// fail with RESOURCE_EXHAUSTED (whole messages are never held).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_BUFFERED_REQUEST_BYTES_PER_CONNECTION)]
    pub max_buffered_request_bytes_per_connection: usize,
    /// Bytes of unfinished request messages the server holds in total; calls beyond fail with
    /// RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_BUFFERED_REQUEST_BYTES)]
    pub max_buffered_request_bytes: usize,
    /// Wait this many milliseconds before loading (to exercise probes against a slow start);
    /// the wait blocks the loader thread like a slow load does.
    #[arg(long, default_value_t = 0, hide = true)]
    pub debug_load_delay_ms: u64,
}

impl ServeArgs {
    /// The options these flags ask for.
    pub fn into_options(self) -> ServeOptions {
        ServeOptions {
            configs: self.configs,
            address: self.address,
            port: self.port,
            index: match (self.index, self.no_index) {
                (_, true) => IndexChoice::Off,
                (Some(p), false) => IndexChoice::File(p),
                (None, false) => IndexChoice::Auto,
            },
            exit_on_load_error: self.exit_on_load_error,
            termination_log: self.termination_log,
            load_delay: Duration::from_millis(self.debug_load_delay_ms),
            threads: self.threads,
            limits: Limits {
                max_concurrent_streams: self.max_concurrent_streams.max(1),
                max_open_streams: self.max_open_streams.max(1),
                max_open_streams_per_connection: self.max_open_streams_per_connection.max(1),
                unary_workers: self.query_threads,
                stream_workers: 0,
                overload_grace: Duration::from_secs(self.overload_grace_secs),
                max_connections: self.max_connections.max(1),
                handshake_timeout: Duration::from_secs(self.handshake_timeout_secs.max(1)),
                stream_stall_timeout: Duration::from_secs(self.stream_stall_timeout_secs.max(1)),
                max_request_bytes: self.max_request_bytes,
                max_buffered_request_bytes_per_connection: self
                    .max_buffered_request_bytes_per_connection,
                max_buffered_request_bytes: self.max_buffered_request_bytes,
            },
        }
    }
}

/// The server stopped with an error.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The catalog could not be loaded (with `exit_on_load_error`).
    #[error("cannot serve {configs}: {reason}")]
    Load {
        /// The catalog.
        configs: PathBuf,
        /// Why, possibly over several lines.
        reason: String,
    },
    /// Reflection descriptors could not be registered.
    #[error("cannot set up gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// A catalog could not be loaded.
#[derive(Debug, Error)]
pub enum LoadServedCatalogError {
    /// Scanning or validating the FBC failed.
    #[error(transparent)]
    Build(#[from] BuildIndexError),
    /// The index built from the catalog is inconsistent (a bug).
    #[error(transparent)]
    Index(#[from] OpenIndexError),
}

impl LoadServedCatalogError {
    /// The error with every validation finding, one per line.
    pub fn detailed(&self) -> String {
        match self {
            LoadServedCatalogError::Build(BuildIndexError::Invalid { report, root, .. }) => {
                format!(
                    "{}: the catalog cannot be served:\n{}",
                    root.display(),
                    report.render_text().trim_end()
                )
            }
            other => other.to_string(),
        }
    }
}

/// Where a loaded catalog came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadedFrom {
    /// A precomputed index file.
    Index(PathBuf),
    /// A scan of the FBC files.
    Scan,
}

fn try_index(path: &Path, configs: &Path) -> Result<Catalog, OpenIndexError> {
    let index = read_index(path)?;
    check_fresh(&index, path, configs)?;
    Catalog::new(configs, index, path)
}

/// Loads the catalog for serving: from the index when there is a fresh one, otherwise by
/// scanning the FBC directory.
pub fn load_catalog(
    configs: &Path,
    choice: &IndexChoice,
    threads: usize,
) -> Result<(Catalog, LoadedFrom), LoadServedCatalogError> {
    let index_path = match choice {
        IndexChoice::Off => None,
        IndexChoice::File(p) => Some(p.clone()),
        IndexChoice::Auto => Some(default_index_path(configs)).filter(|p| p.is_file()),
    };
    if let Some(path) = index_path {
        match try_index(&path, configs) {
            Ok(cat) => return Ok((cat, LoadedFrom::Index(path))),
            Err(e) => warn!("not using the catalog index: {e}; scanning the catalog instead"),
        }
    }
    let built = build_index(
        configs,
        &BuildOptions {
            threads,
            checksums: false,
        },
    )?;
    for f in &built.report.findings {
        warn!("{}", f.message);
    }
    let cat = Catalog::new(configs, built.index, configs)?;
    Ok((cat, LoadedFrom::Scan))
}

/// Resolves when SIGINT or SIGTERM arrives.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => info!("received SIGINT, shutting down"),
        () = term => info!("received SIGTERM, shutting down"),
    }
}

async fn set_all(reporter: &tonic_health::server::HealthReporter, status: ServingStatus) {
    for name in [
        "",
        <RegistryServer<RegistryService> as tonic::server::NamedService>::NAME,
        <ExperimentalRegistryServer<ExperimentalService> as tonic::server::NamedService>::NAME,
    ] {
        reporter.set_service_status(name, status).await;
    }
}

/// Health transitions, serialised so the overload watchdog never undoes the shutdown's
/// `NOT_SERVING`.
#[derive(Clone)]
struct Health {
    reporter: tonic_health::server::HealthReporter,
    /// True once shutdown began: no more transitions to `SERVING`.
    stopping: Arc<tokio::sync::Mutex<bool>>,
}

impl Health {
    async fn set(&self, status: ServingStatus) -> bool {
        let stopping = self.stopping.lock().await;
        if *stopping && status == ServingStatus::Serving {
            return false;
        }
        set_all(&self.reporter, status).await;
        true
    }

    async fn stop(&self) {
        let mut stopping = self.stopping.lock().await;
        *stopping = true;
        set_all(&self.reporter, ServingStatus::NotServing).await;
    }
}

/// Flips health to `NOT_SERVING` while the budgets stay exhausted past the grace period, and
/// back once they recover. Runs from the moment the catalog is served until shutdown.
async fn watch_pressure(budgets: Budgets, health: Health) {
    let mut pressure = Pressure::new(budgets.limits().overload_grace);
    let mut unhealthy = false;
    let mut tick = tokio::time::interval(PRESSURE_SAMPLE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now = tick.tick().await;
        match pressure.sample(budgets.overloaded(), now, unhealthy) {
            Some(PressureChange::Overloaded(reason)) => {
                if !health.set(ServingStatus::NotServing).await {
                    return;
                }
                warn!(
                    "overloaded for {:?}: {reason}; health reports NOT_SERVING",
                    budgets.limits().overload_grace
                );
                unhealthy = true;
            }
            Some(PressureChange::Recovered) => {
                if !health.set(ServingStatus::Serving).await {
                    return;
                }
                info!("no longer overloaded; health reports SERVING");
                unhealthy = false;
            }
            None => {}
        }
        if *health.stopping.lock().await {
            return;
        }
    }
}

/// Loads the catalog on a thread of its own and reports the outcome.
///
/// Not `spawn_blocking`: the runtime waits for its blocking tasks when it shuts down, so a
/// SIGTERM during a long load would not end the process until the load did. Nothing joins
/// this thread; process exit ends it.
async fn load(opts: &ServeOptions) -> Result<(Catalog, LoadedFrom), LoadFailure> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let configs = opts.configs.clone();
    let choice = opts.index.clone();
    let threads = opts.threads;
    let delay = opts.load_delay;
    let spawned = std::thread::Builder::new()
        .name("catalog-loader".into())
        .spawn(move || {
            if !delay.is_zero() {
                info!(delay_ms = delay.as_millis() as u64, "delaying the load");
                std::thread::sleep(delay);
            }
            let _ = tx.send(load_catalog(&configs, &choice, threads));
        });
    if let Err(e) = spawned {
        return Err(LoadFailure::Crashed(format!(
            "cannot start the loader thread: {e}"
        )));
    }
    match rx.await {
        Ok(loaded) => loaded.map_err(LoadFailure::Catalog),
        Err(_) => Err(LoadFailure::Crashed("the loader crashed".into())),
    }
}

/// Why the served catalog is not available.
#[derive(Debug, Error)]
enum LoadFailure {
    /// The catalog could not be loaded.
    #[error(transparent)]
    Catalog(LoadServedCatalogError),
    /// The loader itself failed.
    #[error("{0}")]
    Crashed(String),
}

impl LoadFailure {
    fn detailed(&self) -> String {
        match self {
            LoadFailure::Catalog(e) => e.detailed(),
            LoadFailure::Crashed(why) => why.clone(),
        }
    }
}

/// Loads the catalog, publishes it (or the failure), and starts the overload watchdog.
async fn load_and_publish(
    opts: ServeOptions,
    slot: CatalogSlot,
    health: Health,
    budgets: Budgets,
    failure: Arc<Mutex<Option<String>>>,
    fail_tx: tokio::sync::oneshot::Sender<()>,
) {
    let started = Instant::now();
    match load(&opts).await {
        Ok((cat, from)) => {
            let s = cat.stats();
            let source = match &from {
                LoadedFrom::Index(p) => format!("index {}", p.display()),
                LoadedFrom::Scan => "FBC scan".to_string(),
            };
            slot.set_ready(Arc::new(cat));
            health.set(ServingStatus::Serving).await;
            info!(
                packages = s.packages,
                channels = s.channels,
                bundles = s.bundles,
                channel_entries = s.entries,
                files = s.files,
                load_ms = started.elapsed().as_millis() as u64,
                from = %source,
                "catalog loaded; serving"
            );
            if s.packages == 0 {
                // opm serves an empty catalog too; say so, since a Subscription against it
                // can never resolve (linked package directories are not followed, as in opm).
                warn!(
                    configs = %opts.configs.display(),
                    "the catalog has no package: every query will come back empty (directories \
                     that are symbolic links are not read)"
                );
            }
            watch_pressure(budgets, health).await;
        }
        Err(why) => {
            let detailed = why.detailed();
            report_failure(&opts, &detailed);
            slot.set_failed(why.to_string());
            if let Ok(mut f) = failure.lock() {
                *f = Some(detailed);
            }
            if opts.exit_on_load_error {
                let _ = fail_tx.send(());
            }
        }
    }
}

/// The services: health, reflection (v1 and v1alpha), `api.Registry` and
/// `api.ExperimentalRegistry`.
fn routes<H: HealthService>(
    health: HealthServer<H>,
    slot: CatalogSlot,
    budgets: Budgets,
    max_request: usize,
) -> Result<tonic::service::Routes, ServeError> {
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    // tonic's limit too, though `request_limit` refuses larger messages before tonic sees them.
    Ok(
        tonic::service::Routes::new(health.max_decoding_message_size(max_request))
            .add_service(reflection_v1.max_decoding_message_size(max_request))
            .add_service(reflection_v1alpha.max_decoding_message_size(max_request))
            .add_service(
                RegistryServer::new(RegistryService::new(slot.clone(), budgets.clone()))
                    .max_decoding_message_size(max_request),
            )
            .add_service(
                ExperimentalRegistryServer::new(ExperimentalService::new(slot, budgets))
                    .max_decoding_message_size(max_request),
            )
            .prepare(),
    )
}

/// Serves the catalog until `shutdown` resolves (or, with `exit_on_load_error`, until loading
/// fails).
pub async fn serve(
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = SocketAddr::new(opts.address, opts.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    info!(address = %local, configs = %opts.configs.display(), "listening; loading the catalog");

    let (reporter, health_service) = tonic_health::server::health_reporter();
    let health = Health {
        reporter,
        stopping: Arc::default(),
    };
    health.set(ServingStatus::NotServing).await;

    let slot = CatalogSlot::new();
    let budgets = Budgets::new(opts.limits.clone());
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let (fail_tx, fail_rx) = tokio::sync::oneshot::channel::<()>();
    let loader = tokio::spawn(load_and_publish(
        opts.clone(),
        slot.clone(),
        health.clone(),
        budgets.clone(),
        failure.clone(),
        fail_tx,
    ));

    let (draining_tx, draining_rx) = tokio::sync::oneshot::channel::<()>();
    let stop = {
        let health = health.clone();
        async move {
            let load_failed = async {
                if fail_rx.await.is_err() {
                    // The loader finished without failing: only a signal stops us.
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = shutdown => {}
                () = load_failed => {}
            }
            // Tell watchers before the listener closes.
            health.stop().await;
            let _ = draining_tx.send(());
        }
    };

    let routes = routes(health_service, slot, budgets, opts.limits.max_request_bytes)?;
    let transport = Transport::new(routes, &opts.limits);
    info!(
        max_connections = transport.max_connections(),
        "accepting connections"
    );
    let server = transport.run(listener, stop);
    tokio::pin!(server);
    // Graceful shutdown waits for clients to go away; one that never does must not keep the
    // pod in Terminating until the kubelet's SIGKILL.
    let drain_deadline = async {
        if draining_rx.await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        () = &mut server => {}
        () = drain_deadline => warn!(
            "clients still connected {}s after the shutdown signal; closing their connections",
            DRAIN_TIMEOUT.as_secs()
        ),
    }
    // A load still in progress is abandoned with its thread; the watchdog ends with it.
    loader.abort();

    if opts.exit_on_load_error {
        let failed = failure.lock().ok().and_then(|f| f.clone());
        if let Some(reason) = failed {
            return Err(ServeError::Load {
                configs: opts.configs,
                reason,
            });
        }
    }
    info!("stopped");
    Ok(())
}

fn report_failure(opts: &ServeOptions, reason: &str) {
    if opts.exit_on_load_error {
        tracing::error!(
            "cannot serve the catalog ({}); exiting",
            opts.configs.display()
        );
    } else {
        tracing::error!(
            "cannot serve the catalog ({}); health stays NOT_SERVING:\n{reason}",
            opts.configs.display()
        );
    }
    if let Some(path) = &opts.termination_log
        && let Err(e) = std::fs::write(path, reason)
    {
        warn!("cannot write the termination log {}: {e}", path.display());
    }
}
