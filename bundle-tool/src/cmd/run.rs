//! `bundle-tool run bundle` and `run bundle-upgrade`: try a bundle on a cluster before
//! publishing it, like operator-sdk's commands of the same names. The bundle comes from a
//! directory, an OCI layout or a registry (olmkit-image's puller); the catalog serving it lives
//! in ConfigMaps and is served either
//! by a registry pod (the index image's catalog server) or by bundle-tool itself
//! (`--catalog-address`); olmkit-cluster's `run_bundle` does the rest. `cleanup` removes it all.

use crate::cmd::common::cluster::{
    ClusterArgs, cluster_err, event_printer, finish, non_empty, outcome_json, print_json,
};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, spinner};
use clap::{Subcommand, ValueEnum};
use olmkit_catalog_server::server::{IndexChoice, ServeOptions, serve, shutdown_signal};
use olmkit_catalog_server::tonic::transport::Endpoint;
use olmkit_catalog_server::tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use olmkit_cluster::client::Cluster;
use olmkit_cluster::install::{Event, Outcome, WaitSettings};
use olmkit_cluster::names::parse_go_duration;
use olmkit_cluster::run_bundle::bundle::{BundleToRun, LoadRunBundleError};
use olmkit_cluster::run_bundle::live::{
    CatalogRevision, Hosted, InstallModeRequest, PodOptions, PreparedRun, PreparedUpgrade,
    PreviousServing, RunBundleError, RunRequest, complete_run, complete_upgrade,
    create_config_maps, created_objects, prepare_run, prepare_upgrade, remove_stale,
    start_registry_pod,
};
use olmkit_cluster::run_bundle::manifests::{RegistryServer, ServedBy};
use olmkit_cluster::run_bundle::{CATALOG_FILE, DEFAULT_INDEX_IMAGE};
use serde_json::{Value, json};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;

/// `run` subcommands.
#[derive(Subcommand, Debug)]
pub enum RunCommand {
    /// Install a bundle through OLM from a catalog made for it, like `operator-sdk run bundle`:
    /// ConfigMaps with the catalog, a registry pod serving them (or bundle-tool itself, with
    /// --catalog-address), a CatalogSource, an OperatorGroup when the namespace has none, a
    /// Subscription; then approves the InstallPlan and waits for the CSV.
    Bundle(BundleArgs),
    /// Upgrade what `run bundle` installed to a newer bundle, like
    /// `operator-sdk run bundle-upgrade`: adds it to the same catalog and waits for the
    /// Subscription to move to its CSV.
    BundleUpgrade(UpgradeArgs),
}

/// The catalog server of the registry pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RegistryServerArg {
    /// `opm serve` (operator-framework's opm images).
    Opm,
    /// `/bin/catalog-server` (catalog images built by `bundle-tool image build catalog`).
    CatalogServer,
}

/// Pod security settings of the registry pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SecurityContextArg {
    /// Pod security "restricted": RuntimeDefault seccomp, no privilege escalation, all
    /// capabilities dropped.
    Restricted,
    /// No security settings (operator-sdk's default).
    Legacy,
}

/// `imagePullPolicy` of the registry pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PullPolicyArg {
    /// Pull every time (operator-sdk's default).
    #[value(name = "Always")]
    Always,
    /// Pull when the node does not have it.
    #[value(name = "IfNotPresent")]
    IfNotPresent,
    /// Never pull.
    #[value(name = "Never")]
    Never,
}

impl PullPolicyArg {
    fn as_str(self) -> &'static str {
        match self {
            PullPolicyArg::Always => "Always",
            PullPolicyArg::IfNotPresent => "IfNotPresent",
            PullPolicyArg::Never => "Never",
        }
    }
}

/// How long to wait.
#[derive(clap::Args, Debug, Clone)]
pub struct RunWaitArgs {
    /// Give up after this long (the whole command; Go duration: 90s, 10m).
    #[arg(long, default_value = "2m", value_parser = duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Time between two looks at the cluster while waiting.
    #[arg(long, default_value = "1s", value_parser = duration, hide = true)]
    pub poll_interval: Duration,
    /// How long a CSV must stay Succeeded before the wait ends.
    #[arg(long, default_value = "5s", value_parser = duration, hide = true)]
    pub settle: Duration,
    /// How long OLM may report that an error prevents resolution (an unreachable catalog)
    /// before the command gives up.
    #[arg(long, default_value = "1m", value_parser = duration, value_name = "DURATION")]
    pub resolution_grace: Duration,
}

impl RunWaitArgs {
    fn settings(&self) -> WaitSettings {
        WaitSettings {
            timeout: self.timeout,
            poll_interval: self.poll_interval.max(Duration::from_millis(20)),
            settle: self.settle,
            resolution_grace: self.resolution_grace,
        }
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_go_duration("duration", s).map_err(|e| e.reason)
}

fn install_mode(s: &str) -> Result<InstallModeRequest, String> {
    s.parse::<InstallModeRequest>().map_err(|e| e.reason)
}

/// Serving the catalog from this machine.
#[derive(clap::Args, Debug, Clone)]
pub struct LocalServingArgs {
    /// Serve the catalog from bundle-tool instead of a registry pod, at this address as OLM
    /// reaches it (the CatalogSource's spec.address; e.g. the host's address on a kind
    /// cluster's network, 172.18.0.1:50051).
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["index_image", "registry_server", "service_account", "pull_secret_name", "image_pull_policy"])]
    pub catalog_address: Option<String>,
    /// Where bundle-tool listens with --catalog-address (default: 0.0.0.0 and the port of
    /// --catalog-address).
    #[arg(long, value_name = "ADDR:PORT", requires = "catalog_address")]
    pub listen: Option<String>,
    /// With --catalog-address: keep serving the catalog once the install is done, until
    /// interrupted (otherwise OLM finds the catalog gone and reports it on the Subscription;
    /// the operator keeps running).
    #[arg(long, requires = "catalog_address")]
    pub keep_serving: bool,
}

/// Arguments of `run bundle`.
#[derive(clap::Args, Debug)]
pub struct BundleArgs {
    /// The bundle: a bundle directory (manifests/, metadata/annotations.yaml), an image in an
    /// OCI layout as `bundle-tool image build bundle` writes it (`oci:DIR[:NAME]`, or
    /// `DIR:NAME`), or a bundle image in a registry (`[docker://]REGISTRY/REPO:TAG`, pulled by
    /// bundle-tool; the cluster never pulls it).
    #[arg(value_name = "BUNDLE")]
    pub bundle: String,
    /// Install namespace (default: the kubeconfig context's namespace). It must exist.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Install mode: AllNamespaces, OwnNamespace, SingleNamespace=NS or
    /// MultiNamespace=NS,NS... (default: AllNamespaces when the CSV supports it, else
    /// OwnNamespace). An existing OperatorGroup of the namespace is used when it fits.
    #[arg(long, value_name = "MODE", value_parser = install_mode)]
    pub install_mode: Option<InstallModeRequest>,
    /// Image of the registry pod. Its catalog server is chosen from the image: `opm serve`
    /// for an image named `opm`, else `/bin/catalog-server` (bundle-tool catalog images);
    /// --registry-server overrides. The image's own catalog is not served.
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_INDEX_IMAGE)]
    pub index_image: String,
    /// The catalog server the registry pod runs (default: from --index-image).
    #[arg(long, value_enum, value_name = "SERVER")]
    pub registry_server: Option<RegistryServerArg>,
    /// Service account of the registry pod (default: the namespace's default).
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Image pull secret for the index image (also set on the CatalogSource).
    #[arg(long, value_name = "NAME")]
    pub pull_secret_name: Option<String>,
    /// imagePullPolicy of the registry pod.
    #[arg(long, value_enum, value_name = "POLICY", default_value = "Always")]
    pub image_pull_policy: PullPolicyArg,
    /// Security settings of the registry pod (and the CatalogSource's
    /// grpcPodConfig.securityContextConfig).
    #[arg(long, value_enum, value_name = "CONFIG", default_value = "legacy")]
    pub security_context_config: SecurityContextArg,
    #[command(flatten)]
    pub local: LocalServingArgs,
    #[command(flatten)]
    pub pull: PullArgs,
    /// Result format on stdout: the CSV table (text) or what was created and how it ended
    /// (json).
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub wait: RunWaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Arguments of `run bundle-upgrade`.
#[derive(clap::Args, Debug)]
pub struct UpgradeArgs {
    /// The newer bundle: a bundle directory, an OCI layout image `oci:DIR[:NAME]` or a
    /// registry image.
    #[arg(value_name = "BUNDLE")]
    pub bundle: String,
    /// Namespace of the run (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Service account of the new registry pod (default: the old pod's).
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Image pull secret of the new registry pod (default: the old pod's).
    #[arg(long, value_name = "NAME")]
    pub pull_secret_name: Option<String>,
    /// imagePullPolicy of the new registry pod (default: the old pod's).
    #[arg(long, value_enum, value_name = "POLICY")]
    pub image_pull_policy: Option<PullPolicyArg>,
    /// Where bundle-tool listens when `run bundle --catalog-address` served the catalog
    /// (default: 0.0.0.0 and the port of the CatalogSource's address).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// When bundle-tool serves the catalog: keep serving once the upgrade is done, until
    /// interrupted.
    #[arg(long)]
    pub keep_serving: bool,
    #[command(flatten)]
    pub pull: PullArgs,
    /// Result format on stdout: the CSV table (text) or the plan and how it ended (json).
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub wait: RunWaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Where a bundle comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BundleSource {
    /// A bundle directory.
    Dir(PathBuf),
    /// An image in an OCI layout (the only image when no name is given).
    Layout(PathBuf, Option<String>),
    /// An image in a registry.
    Registry(String),
}

impl BundleSource {
    /// Reads `BUNDLE`: `oci:DIR[:NAME]`, `DIR:NAME` or `DIR` naming an OCI layout, a
    /// directory, `docker://REF` or a registry reference.
    pub fn parse(s: &str) -> BundleSource {
        if let Some(r) = s.strip_prefix("docker://") {
            return BundleSource::Registry(r.to_string());
        }
        let explicit = s.strip_prefix("oci:");
        let rest = explicit.unwrap_or(s);
        let is_layout = |p: &str| olmkit_image::layout::is_layout(Path::new(p));
        if is_layout(rest) || (explicit.is_some() && !rest.contains(':')) {
            return BundleSource::Layout(PathBuf::from(rest), None);
        }
        for (i, c) in rest.char_indices() {
            if c == ':' && (is_layout(&rest[..i]) || (explicit.is_some() && i > 0)) {
                return BundleSource::Layout(
                    PathBuf::from(&rest[..i]),
                    Some(rest[i + 1..].to_string()).filter(|n| !n.is_empty()),
                );
            }
        }
        if Path::new(s).exists() {
            return BundleSource::Dir(PathBuf::from(s));
        }
        let looks_like_image = s.contains('/')
            && (s.contains('@') || s.rsplit('/').next().is_some_and(|l| l.contains(':')));
        if looks_like_image && !s.starts_with('.') && !s.starts_with('/') {
            return BundleSource::Registry(s.to_string());
        }
        BundleSource::Dir(PathBuf::from(s))
    }

    /// The project trees it reads (for the half-done-commit check).
    pub fn trees(&self) -> Vec<PathBuf> {
        match self {
            BundleSource::Dir(d) => vec![d.clone()],
            _ => Vec::new(),
        }
    }
}

impl BundleArgs {
    /// The project trees `run bundle` reads.
    pub fn trees_read(&self) -> Vec<PathBuf> {
        BundleSource::parse(&self.bundle).trees()
    }
}

impl UpgradeArgs {
    /// The project trees `run bundle-upgrade` reads.
    pub fn trees_read(&self) -> Vec<PathBuf> {
        BundleSource::parse(&self.bundle).trees()
    }
}

fn load_err(e: LoadRunBundleError) -> CmdError {
    CmdError::user(e).hint(
        "BUNDLE is a bundle directory (manifests/ with a ClusterServiceVersion, metadata/annotations.yaml), an OCI layout image oci:DIR:NAME or a registry image",
    )
}

/// Pulling bundle images.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PullArgs {
    /// Talk plain HTTP to the registry of a bundle image (a local registry without TLS).
    /// Credentials come from ~/.docker/config.json, $REGISTRY_AUTH_FILE, or
    /// BUNDLE_TOOL_REGISTRY_USERNAME / BUNDLE_TOOL_REGISTRY_PASSWORD.
    #[arg(long)]
    pub use_http: bool,
    /// Deprecated operator-sdk spelling of --use-http.
    #[arg(long, hide = true)]
    pub skip_tls: bool,
}

/// Loads the bundle. An image (OCI layout or registry) is unpacked into a temporary
/// directory by olmkit-image's bounded, confined puller, then read like a bundle directory.
async fn load_bundle(arg: &str, pull: &PullArgs) -> Result<BundleToRun, CmdError> {
    use olmkit_image::pull::{ImageKind, PullLimits};
    let source = BundleSource::parse(arg);
    if let BundleSource::Dir(dir) = &source {
        if !dir.is_dir() {
            return Err(CmdError::msg(format!(
                "{arg}: no such bundle directory, OCI layout or image"
            ))
            .hint("BUNDLE is a bundle directory, an OCI layout image oci:DIR:NAME (bundle-tool image build bundle writes one) or a registry image REGISTRY/REPO:TAG"));
        }
        let (dir, shown) = (dir.clone(), arg.to_string());
        return tokio::task::spawn_blocking(move || BundleToRun::load(&dir, &shown, ""))
            .await
            .unexpected_err()?
            .map_err(load_err);
    }
    let tmp = tempfile::Builder::new()
        .prefix("bundle-tool-run-")
        .tempdir()
        .unexpected_err()?;
    let dest = tmp.path().join("bundle");
    std::fs::create_dir(&dest).unexpected_err()?;
    let limits = PullLimits::default();
    let use_http = pull.use_http || pull.skip_tls;
    let (pulled, shown) = match &source {
        BundleSource::Layout(dir, name) => {
            let shown = match name {
                Some(n) => format!("oci:{}:{n}", dir.display()),
                None => format!("oci:{}", dir.display()),
            };
            let (dir, name, d) = (dir.clone(), name.clone(), dest.clone());
            let r = tokio::task::spawn_blocking(move || {
                olmkit_image::pull::unpack_from_layout(&dir, name.as_deref(), &d, &limits)
            })
            .await
            .unexpected_err()?;
            (r, shown)
        }
        BundleSource::Registry(r) => {
            let auth = olmkit_image::auth::AuthSources::from_env().user_hint(format!(
                "set both {} and {}, or neither",
                olmkit_image::auth::ENV_USERNAME,
                olmkit_image::auth::ENV_PASSWORD
            ))?;
            let remote = olmkit_image::remote::RemoteOptions {
                insecure: use_http,
                auth,
                ..Default::default()
            };
            let pulled = olmkit_image::pull::pull_from_registry(r, &remote, &dest, &limits).await;
            (pulled, r.clone())
        }
        BundleSource::Dir(_) => unreachable!("handled above"),
    };
    let pulled = pulled.map_err(|e| {
        // The puller's advice speaks of `image push`'s --insecure; here it is --use-http.
        let mut hints: Vec<String> = e
            .hints()
            .into_iter()
            .map(|h| h.replace("--insecure", "--use-http"))
            .collect();
        if matches!(source, BundleSource::Registry(_))
            && !use_http
            && !hints.iter().any(|h| h.contains("--use-http"))
        {
            hints.push("a local registry without TLS needs --use-http".into());
        }
        let mut err = if e.is_user_error() {
            CmdError::user(e)
        } else {
            CmdError::unexpected(e)
        };
        for h in hints {
            err = err.hint(h);
        }
        err
    })?;
    if let ImageKind::Catalog(_) = pulled.kind {
        return Err(CmdError::msg(format!(
            "{shown}: a catalog image, not a bundle image"
        ))
        .hint("give a bundle image (bundle-tool image build bundle DIR), a bundle directory, or an OCI layout with one"));
    }
    // No bundle image in the catalog: OLM pulls (unpacks) the image of every catalog bundle
    // that names one, and the cluster may not reach where this one came from (a layout is in
    // no registry at all). Without one, the catalog serves the bundle's manifests and OLM
    // installs from them.
    tokio::task::spawn_blocking(move || {
        let _keep = tmp;
        BundleToRun::load(&dest, &shown, "")
    })
    .await
    .unexpected_err()?
    .map_err(load_err)
}

pub(crate) fn run_err(e: RunBundleError) -> CmdError {
    let hints = e.hints();
    let mut err = if e.is_user_error() {
        CmdError::user(e)
    } else {
        CmdError::unexpected(e)
    };
    for h in hints {
        err = err.hint(h);
    }
    err
}

type ServeThread = std::thread::JoinHandle<Result<(), olmkit_catalog_server::ServeError>>;

/// The catalog served by this process, on a thread of its own whose log shows only warnings
/// (the server's info lines would interleave with the command's report).
struct LocalServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<ServeThread>,
    listen: SocketAddr,
    _dir: tempfile::TempDir,
}

impl LocalServer {
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// Runs the catalog server on a new thread with a current-thread runtime.
fn spawn_server(
    opts: ServeOptions,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<ServeThread, CmdError> {
    std::thread::Builder::new()
        .name("catalog-server".into())
        .spawn(move || {
            let quiet = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_writer(std::io::stderr)
                .with_target(false)
                .finish();
            let _guard = tracing::subscriber::set_default(quiet);
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    return Err(olmkit_catalog_server::ServeError::Bind {
                        addr: SocketAddr::new(opts.address, opts.port),
                        source: e,
                    });
                }
            };
            rt.block_on(serve(opts, async move {
                let _ = stop.await;
            }))
        })
        .unexpected_err()
}

/// `host:port` to a socket address (a name is resolved).
fn socket_addr(what: &str, s: &str) -> Result<SocketAddr, CmdError> {
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            CmdError::msg(format!("{what} {s:?}: expected HOST:PORT"))
                .hint(format!("e.g. {what} 172.18.0.1:50051"))
        })
}

/// Where to listen: `--listen`, else all interfaces on the port of the address OLM dials.
fn listen_addr(listen: Option<&str>, address: &str) -> Result<SocketAddr, CmdError> {
    match listen {
        Some(l) => socket_addr("--listen", l),
        None => {
            let port = address
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .ok_or_else(|| {
                    CmdError::msg(format!("--catalog-address {address:?}: expected HOST:PORT"))
                        .hint("e.g. --catalog-address 172.18.0.1:50051")
                })?;
            Ok(SocketAddr::from(([0, 0, 0, 0], port)))
        }
    }
}

/// Serves a catalog revision from this process and waits until it answers SERVING.
async fn serve_locally(
    revision: &CatalogRevision,
    listen: SocketAddr,
) -> Result<LocalServer, CmdError> {
    let dir = tempfile::tempdir().unexpected_err()?;
    let configs = dir.path().join("configs");
    for (name, text) in &revision.files {
        let d = configs.join(name);
        std::fs::create_dir_all(&d).unexpected_err()?;
        std::fs::write(d.join(CATALOG_FILE), text).unexpected_err()?;
    }
    let mut opts = ServeOptions::new(&configs);
    opts.address = listen.ip();
    opts.port = listen.port();
    opts.index = IndexChoice::Off;
    opts.exit_on_load_error = true;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = spawn_server(opts, rx)?;
    let probe = if listen.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], listen.port()))
    } else {
        listen
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if thread.is_finished() {
            let result = tokio::task::spawn_blocking(move || thread.join())
                .await
                .unexpected_err()?
                .map_err(|_| {
                    CmdError::unexpected(anyhow::anyhow!("the catalog server panicked"))
                })?;
            return Err(match result {
                Err(e @ olmkit_catalog_server::ServeError::Bind { .. }) => CmdError::user(e)
                    .hint("is an earlier `run bundle --keep-serving` still serving? stop it, or pass another --listen"),
                Err(e) => CmdError::unexpected(e),
                Ok(()) => CmdError::unexpected(anyhow::anyhow!("the catalog server stopped")),
            });
        }
        if serving(probe).await {
            break;
        }
        if Instant::now() >= deadline {
            let _ = tx.send(());
            return Err(CmdError::unexpected(anyhow::anyhow!(
                "the catalog server on {listen} did not report SERVING within 30s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(LocalServer {
        stop: Some(tx),
        thread: Some(thread),
        listen,
        _dir: dir,
    })
}

async fn serving(addr: SocketAddr) -> bool {
    let Ok(endpoint) = Endpoint::from_shared(format!("http://{addr}")) else {
        return false;
    };
    let Ok(channel) = endpoint
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
    else {
        return false;
    };
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32)
}

async fn namespace_of(cluster: &olmkit_cluster::client::Cluster, ns: &Option<String>) -> String {
    ns.clone()
        .unwrap_or_else(|| cluster.default_namespace().to_string())
}

fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// Waits for SIGINT/SIGTERM while the catalog is served (`--keep-serving`).
async fn keep_serving(server: LocalServer, address: &str) {
    eprintln!(
        "serving the catalog on {} (OLM connects to {address}) until interrupted (Ctrl-C)",
        server.listen
    );
    shutdown_signal().await;
    server.stop().await;
}

/// Where a command hosts its catalog revision, and until when.
struct HostSetup<'a> {
    cluster: &'a Cluster,
    /// The CatalogSource's namespace.
    namespace: &'a str,
    package: &'a str,
    deadline: Instant,
    poll: Duration,
}

/// Serves a revision from this process; OLM connects to `address`.
async fn host_locally(
    revision: &CatalogRevision,
    listen: SocketAddr,
    address: &str,
    printer: &mut dyn FnMut(Event<'_>),
) -> Result<(Hosted, LocalServer), CmdError> {
    let s = serve_locally(revision, listen).await?;
    printer(Event::Note(&format!(
        "serving the catalog from bundle-tool on {listen} (OLM connects to {address})"
    )));
    let hosted = Hosted {
        address: address.to_string(),
        served_by: ServedBy::Local,
    };
    Ok((hosted, s))
}

/// `run bundle`.
async fn run_bundle(a: BundleArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let started = Instant::now();
    let deadline = started + a.wait.timeout;
    let bundle = load_bundle(&a.bundle, &a.pull).await?;
    let cluster = a.cluster.connect().await?;
    let namespace = namespace_of(&cluster, &a.namespace).await;
    let security = match a.security_context_config {
        SecurityContextArg::Restricted => "restricted",
        SecurityContextArg::Legacy => "legacy",
    };
    let req = RunRequest {
        namespace: namespace.clone(),
        install_mode: a.install_mode.clone(),
        security_context_config: Some(security.into()),
        pull_secret: a.pull_secret_name.clone(),
    };
    let local = match &a.local.catalog_address {
        Some(addr) => Some((addr.clone(), listen_addr(a.local.listen.as_deref(), addr)?)),
        None => None,
    };
    let prepared = prepare_run(&cluster, &req, bundle).await.map_err(run_err)?;
    for n in &prepared.notes {
        eprintln!("{n}");
    }
    let settings = a.wait.settings();
    let bar = spinner(g, "waiting for OLM");
    let mut printer = event_printer(&bar);
    let package = prepared.bundle.package.clone();
    let setup = HostSetup {
        cluster: &cluster,
        namespace: &namespace,
        package: &package,
        deadline,
        poll: settings.poll_interval,
    };
    let hosted = host_run_catalog(&setup, &a, &prepared, local.as_ref(), &mut printer).await;
    let cleanup_hint = format!(
        "remove what run bundle created with bundle-tool cleanup {package} --namespace {namespace}"
    );
    let (hosted, server) = match hosted {
        Ok(h) => h,
        Err(e) => {
            bar.finish_and_clear();
            return Err(e.hint(cleanup_hint));
        }
    };
    let result = complete_run(
        &cluster,
        &prepared,
        &hosted,
        settings,
        deadline,
        &mut printer,
    )
    .await;
    bar.finish_and_clear();
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            if let Some(s) = server {
                s.stop().await;
            }
            return Err(run_err(e).hint(cleanup_hint));
        }
    };
    if a.output == OutputFormat::Json {
        print_json(&run_json(&prepared, &hosted, &outcome))?;
    }
    let succeeded = matches!(outcome, Outcome::Installed { .. });
    let finished = finish(outcome, "run bundle", &cluster, &namespace, a.output).await;
    match &finished {
        Ok(()) if succeeded => eprintln!(
            "next: bundle-tool run bundle-upgrade NEWER_BUNDLE --namespace {namespace}; bundle-tool cleanup {package} --namespace {namespace}"
        ),
        _ => {}
    }
    match (server, finished) {
        (Some(s), Ok(())) if a.local.keep_serving => {
            keep_serving(s, &hosted.address).await;
            Ok(())
        }
        (Some(s), r) => {
            s.stop().await;
            if r.is_ok() {
                eprintln!(
                    "note: the catalog is no longer served (bundle-tool exits): OLM reports it unreachable on the Subscription until run bundle-upgrade serves it again; the operator keeps running (--keep-serving keeps serving)"
                );
            }
            r.map_err(|e| e.hint(cleanup_hint))
        }
        (None, r) => r.map_err(|e| e.hint(cleanup_hint)),
    }
}

/// Stores the run's catalog in its ConfigMaps and serves it: from this process
/// (`--catalog-address`) or from a registry pod. Returns where, and the local server.
async fn host_run_catalog(
    h: &HostSetup<'_>,
    a: &BundleArgs,
    prepared: &PreparedRun,
    local: Option<&(String, SocketAddr)>,
    printer: &mut dyn FnMut(Event<'_>),
) -> Result<(Hosted, Option<LocalServer>), CmdError> {
    // ConfigMaps and pods of an earlier run bundle that failed before its CatalogSource
    // existed (prepare_run refuses when one does): replaced, not reused.
    remove_stale(h.cluster, h.namespace, h.package, &[], printer)
        .await
        .map_err(run_err)?;
    create_config_maps(
        h.cluster,
        h.namespace,
        h.package,
        &prepared.revision,
        printer,
    )
    .await
    .map_err(run_err)?;
    if let Some((address, listen)) = local {
        let (hosted, s) = host_locally(&prepared.revision, *listen, address, printer).await?;
        return Ok((hosted, Some(s)));
    }
    let server = match a.registry_server {
        Some(RegistryServerArg::Opm) => RegistryServer::Opm,
        Some(RegistryServerArg::CatalogServer) => RegistryServer::CatalogServer,
        None => RegistryServer::for_image(&a.index_image),
    };
    let opts = PodOptions {
        index_image: a.index_image.clone(),
        server,
        service_account: a.service_account.clone(),
        pull_secret: a.pull_secret_name.clone(),
        image_pull_policy: a.image_pull_policy.as_str().into(),
    };
    let (pod, address) = start_registry_pod(
        h.cluster,
        h.namespace,
        h.package,
        &prepared.catalog_source,
        &prepared.revision,
        &opts,
        a.security_context_config == SecurityContextArg::Restricted,
        h.deadline,
        h.poll,
        printer,
    )
    .await
    .map_err(run_err)?;
    let hosted = Hosted {
        address,
        served_by: ServedBy::RegistryPod {
            pod,
            image: a.index_image.clone(),
        },
    };
    Ok((hosted, None))
}

/// The `--output json` document of `run bundle`.
fn run_json(prepared: &PreparedRun, hosted: &Hosted, outcome: &Outcome) -> Value {
    json!({
        "package": prepared.bundle.package,
        "namespace": prepared.namespace,
        "bundle": prepared.bundle.csv_name,
        "source": prepared.bundle.source,
        "catalogSource": prepared.catalog_source,
        "address": hosted.address,
        "servedBy": served_by_json(&hosted.served_by),
        "created": created_objects(prepared, hosted),
        "outcome": outcome_json(outcome),
    })
}

fn served_by_json(s: &ServedBy) -> Value {
    match s {
        ServedBy::RegistryPod { pod, image } => {
            json!({ "kind": "registryPod", "pod": pod, "image": image })
        }
        ServedBy::Local => json!({ "kind": "local" }),
    }
}

/// `run bundle-upgrade`.
async fn run_upgrade(a: UpgradeArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let started = Instant::now();
    let deadline = started + a.wait.timeout;
    let bundle = load_bundle(&a.bundle, &a.pull).await?;
    let cluster = a.cluster.connect().await?;
    let namespace = namespace_of(&cluster, &a.namespace).await;
    let prepared = prepare_upgrade(&cluster, &namespace, bundle)
        .await
        .map_err(run_err)?;
    for n in &prepared.notes {
        eprintln!("{n}");
    }
    print_warnings(&prepared.warnings);
    let package = prepared.bundle.package.clone();
    let cs_ns = if prepared.catalog_source.metadata.namespace.is_empty() {
        namespace.clone()
    } else {
        prepared.catalog_source.metadata.namespace.clone()
    };
    let settings = a.wait.settings();
    let bar = spinner(g, "waiting for OLM");
    let mut printer = event_printer(&bar);
    let local_address = local_address(&prepared, &a).inspect_err(|_| bar.finish_and_clear())?;
    let setup = HostSetup {
        cluster: &cluster,
        namespace: &cs_ns,
        package: &package,
        deadline,
        poll: settings.poll_interval,
    };
    let hosted = host_upgrade_catalog(
        &setup,
        &a,
        &prepared,
        local_address.as_deref(),
        &mut printer,
    )
    .await;
    let cleanup_hint = format!(
        "to start over: bundle-tool cleanup {package} --namespace {namespace}, then bundle-tool run bundle"
    );
    let (hosted, server) = match hosted {
        Ok(h) => h,
        Err(e) => {
            bar.finish_and_clear();
            return Err(e);
        }
    };
    let result = complete_upgrade(
        &cluster,
        &prepared,
        if prepared.revision.is_some() {
            hosted.as_ref()
        } else {
            None
        },
        settings,
        deadline,
        &mut printer,
    )
    .await;
    bar.finish_and_clear();
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            if let Some(s) = server {
                s.stop().await;
            }
            return Err(run_err(e).hint(cleanup_hint));
        }
    };
    if a.output == OutputFormat::Json {
        print_json(&upgrade_json(&prepared, hosted.as_ref(), &outcome))?;
    }
    let finished = finish(
        outcome,
        "run bundle-upgrade",
        &cluster,
        &namespace,
        a.output,
    )
    .await;
    match (server, finished) {
        (Some(s), Ok(())) if a.keep_serving => {
            let address = hosted.map(|h| h.address).unwrap_or_default();
            keep_serving(s, &address).await;
            Ok(())
        }
        (Some(s), r) => {
            s.stop().await;
            r
        }
        (None, r) => r,
    }
}

/// Where OLM connects to a catalog bundle-tool served (`run bundle --catalog-address`);
/// `None` for a registry pod, which `--listen` and `--keep-serving` do not apply to.
fn local_address(prepared: &PreparedUpgrade, a: &UpgradeArgs) -> Result<Option<String>, CmdError> {
    let local_address = match &prepared.serving {
        PreviousServing::Local { address } => Some(address.clone()),
        PreviousServing::RegistryPod { .. } => None,
    };
    if local_address.is_none() && (a.listen.is_some() || a.keep_serving) {
        return Err(CmdError::msg(format!(
            "the catalog of package {} is served by a registry pod, not by bundle-tool",
            prepared.bundle.package
        ))
        .hint(
            "drop --listen and --keep-serving (they apply when run bundle had --catalog-address)",
        ));
    }
    Ok(local_address)
}

/// The `--output json` document of `run bundle-upgrade`.
fn upgrade_json(prepared: &PreparedUpgrade, hosted: Option<&Hosted>, outcome: &Outcome) -> Value {
    json!({
        "package": prepared.bundle.package,
        "namespace": prepared.namespace,
        "from": prepared.installed,
        "bundle": prepared.bundle.csv_name,
        "source": prepared.bundle.source,
        "catalogSource": prepared.catalog_source.metadata.name,
        "catalogRevision": prepared.revision.as_ref().map(|r| r.generation),
        "address": hosted.map(|h| h.address.clone()).or_else(|| non_empty(&prepared.catalog_source.spec.address).map(String::from)),
        "warnings": prepared.warnings,
        "outcome": outcome_json(outcome),
    })
}

/// Stores the upgrade's catalog revision and serves it where the run served the last one.
/// `None` when nothing new is hosted: an upgrade that already put the bundle into the catalog
/// only waits (a locally served catalog is served again all the same: bundle-tool stopped
/// serving it).
async fn host_upgrade_catalog(
    h: &HostSetup<'_>,
    a: &UpgradeArgs,
    prepared: &PreparedUpgrade,
    local_address: Option<&str>,
    printer: &mut dyn FnMut(Event<'_>),
) -> Result<(Option<Hosted>, Option<LocalServer>), CmdError> {
    let revision_to_serve: Option<CatalogRevision> = match &prepared.revision {
        Some(r) => Some(r.clone()),
        None if local_address.is_some() => {
            let current = current_revision(h.cluster, h.namespace, prepared).await?;
            Some(current)
        }
        None => None,
    };
    let Some(rev) = revision_to_serve else {
        return Ok((None, None));
    };
    if prepared.revision.is_some() {
        // What an earlier attempt left (not the revision served now) goes first.
        let mut keep = prepared.current_config_maps.clone();
        if let PreviousServing::RegistryPod { pod, .. } = &prepared.serving {
            keep.push(pod.clone());
        }
        remove_stale(h.cluster, h.namespace, h.package, &keep, printer)
            .await
            .map_err(run_err)?;
        create_config_maps(h.cluster, h.namespace, h.package, &rev, printer)
            .await
            .map_err(run_err)?;
    }
    match (&prepared.serving, local_address) {
        (_, Some(address)) => {
            let listen = listen_addr(a.listen.as_deref(), address)?;
            let (hosted, s) = host_locally(&rev, listen, address, printer).await?;
            Ok((Some(hosted), Some(s)))
        }
        (
            PreviousServing::RegistryPod {
                options,
                restricted,
                ..
            },
            None,
        ) => {
            let opts = upgrade_pod_options(options, a);
            let (pod, address) = start_registry_pod(
                h.cluster,
                h.namespace,
                h.package,
                &prepared.catalog_source.metadata.name,
                &rev,
                &opts,
                *restricted,
                h.deadline,
                h.poll,
                printer,
            )
            .await
            .map_err(run_err)?;
            let hosted = Hosted {
                address,
                served_by: ServedBy::RegistryPod {
                    pod,
                    image: opts.index_image.clone(),
                },
            };
            Ok((Some(hosted), None))
        }
        (PreviousServing::Local { .. }, None) => Ok((None, None)),
    }
}

/// The previous registry pod's options, with the flags given to the upgrade.
fn upgrade_pod_options(previous: &PodOptions, a: &UpgradeArgs) -> PodOptions {
    let mut opts = previous.clone();
    if let Some(sa) = &a.service_account {
        opts.service_account = Some(sa.clone());
    }
    if let Some(s) = &a.pull_secret_name {
        opts.pull_secret = Some(s.clone());
    }
    if let Some(p) = a.image_pull_policy {
        opts.image_pull_policy = p.as_str().into();
    }
    opts
}

/// The revision a CatalogSource serves now (to serve it again locally).
async fn current_revision(
    cluster: &olmkit_cluster::client::Cluster,
    namespace: &str,
    p: &olmkit_cluster::run_bundle::live::PreparedUpgrade,
) -> Result<CatalogRevision, CmdError> {
    let mut files = Vec::new();
    for name in &p.current_config_maps {
        let cm: Option<Value> = cluster
            .get(
                &olmkit_cluster::run_bundle::config_map_resource(),
                Some(namespace),
                name,
            )
            .await
            .map_err(cluster_err)?;
        let text = cm
            .as_ref()
            .and_then(|c| c["data"][CATALOG_FILE].as_str())
            .unwrap_or("")
            .to_string();
        files.push((name.clone(), text));
    }
    let config = olmkit_cluster::run_bundle::catalog::from_partitions(&files)
        .map_err(|e| run_err(RunBundleError::Catalog(e)))?;
    Ok(CatalogRevision {
        generation: 0,
        config,
        files,
        bundles: Vec::new(),
    })
}

/// Runs the command.
pub async fn run(command: RunCommand, g: &GlobalArgs) -> Result<(), CmdError> {
    match command {
        RunCommand::Bundle(a) => run_bundle(a, g).await,
        RunCommand::BundleUpgrade(a) => run_upgrade(a, g).await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bundle_sources() {
        let d = tempfile::tempdir().unwrap();
        let layout = d.path().join("images");
        std::fs::create_dir_all(&layout).unwrap();
        std::fs::write(layout.join("oci-layout"), "{}").unwrap();
        let l = layout.display().to_string();
        assert_eq!(
            BundleSource::parse(&l),
            BundleSource::Layout(layout.clone(), None)
        );
        assert_eq!(
            BundleSource::parse(&format!("oci:{l}:quay.io/x/b:v1")),
            BundleSource::Layout(layout.clone(), Some("quay.io/x/b:v1".into()))
        );
        assert_eq!(
            BundleSource::parse(&format!("{l}:quay.io/x/b:v1")),
            BundleSource::Layout(layout.clone(), Some("quay.io/x/b:v1".into()))
        );
        assert_eq!(
            BundleSource::parse("oci:not-there:v1"),
            BundleSource::Layout(PathBuf::from("not-there"), Some("v1".into()))
        );
        let b = d.path().join("bundle");
        std::fs::create_dir_all(&b).unwrap();
        assert_eq!(
            BundleSource::parse(&b.display().to_string()),
            BundleSource::Dir(b.clone())
        );
        assert_eq!(
            BundleSource::parse("quay.io/example/bundle:v1"),
            BundleSource::Registry("quay.io/example/bundle:v1".into())
        );
        assert_eq!(
            BundleSource::parse("docker://quay.io/example/bundle:v1"),
            BundleSource::Registry("quay.io/example/bundle:v1".into())
        );
        assert_eq!(
            BundleSource::parse("bundle/missing"),
            BundleSource::Dir(PathBuf::from("bundle/missing"))
        );
        assert_eq!(
            BundleSource::parse(&b.display().to_string()).trees(),
            vec![b]
        );
    }

    #[test]
    fn listen_defaults_to_all_interfaces_on_the_catalog_port() {
        assert_eq!(
            listen_addr(None, "172.18.0.1:50051").unwrap(),
            "0.0.0.0:50051".parse().unwrap()
        );
        assert_eq!(
            listen_addr(Some("127.0.0.1:6000"), "x:1").unwrap(),
            "127.0.0.1:6000".parse().unwrap()
        );
        assert!(listen_addr(None, "no-port").is_err());
    }
}
