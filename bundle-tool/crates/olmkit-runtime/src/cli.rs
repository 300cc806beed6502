//! An operator's command line, and the builder that declares the operator: [`Operator`].
//!
//! Every operator built on this runtime has the same four subcommands, so the toolkit, OLM
//! manifests and users can rely on them:
//!
//! - `run`: the controller manager ([`crate::manager`]), kubebuilder's flags;
//! - `webhook`: only the conversion webhook (clusters that deploy it separately; tests);
//! - `crd [--output-dir DIR] [-o yaml|json]`: the CustomResourceDefinitions generated from the
//!   Rust types, printed, or written as `DIR/<group>_<plural>.yaml` (controller-gen's names);
//! - `rbac [--role manager|leader-election|metrics-auth] [--output-dir DIR]`: the roles
//!   generated from the operator's table of API calls, or all three written as kubebuilder's
//!   `role.yaml`, `leader_election_role.yaml`, `metrics_auth_role.yaml`.
//!
//! `make manifests` in a scaffolded project (and in this repository) runs `crd` and `rbac`
//! with `--output-dir`, which is how CRD and RBAC stay generated from the code.
//!
//! ```no_run
//! use olmkit_runtime::cli::Operator;
//! use olmkit_runtime::manager::ControllerContext;
//! use tokio_util::sync::CancellationToken;
//!
//! async fn controllers(ctx: ControllerContext, stop: CancellationToken) {
//!     // kube::runtime::Controller::new(...).graceful_shutdown_on(stop.cancelled_owned())...
//!     stop.cancelled().await;
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     Operator::new("demo-operator", env!("CARGO_PKG_VERSION"))
//!         .permissions(&[olmkit_runtime::rbac::EVENTS])
//!         .controllers(controllers)
//!         .main()
//! }
//! ```

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use prometheus_client::collector::Collector;
use tokio_util::sync::CancellationToken;

use crate::conversion::Converter;
use crate::manager::{self, ControllerContext, Controllers, Plan, RunArgs};
use crate::metrics::Metrics;
use crate::rbac::{self, Permission};
use crate::webhook::{self, WebhookArgs};

/// The commands of an operator binary (name, version and about come from the [`Operator`]).
#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the `Run` variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the controller manager: reconcile, serve metrics, health probes and the conversion
    /// webhook.
    Run(RunArgs),
    /// Serve only the conversion webhook.
    Webhook(WebhookArgs),
    /// Print (or write) the CustomResourceDefinitions generated from the API types.
    Crd(CrdArgs),
    /// Print (or write) the RBAC roles generated from the table of API calls.
    Rbac(RbacArgs),
}

/// Which generated role `rbac` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum RbacRole {
    /// The ClusterRole `manager-role` (config/rbac/role.yaml).
    #[default]
    Manager,
    /// The Role `leader-election-role` (config/rbac/leader_election_role.yaml).
    LeaderElection,
    /// The ClusterRole `metrics-auth-role` (config/rbac/metrics_auth_role.yaml): TokenReviews
    /// and SubjectAccessReviews for the secure metrics endpoint.
    MetricsAuth,
}

impl RbacRole {
    /// kubebuilder's file name of the role in `config/rbac/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Manager => "role.yaml",
            Self::LeaderElection => "leader_election_role.yaml",
            Self::MetricsAuth => "metrics_auth_role.yaml",
        }
    }
}

#[derive(clap::Args, Debug)]
struct RbacArgs {
    /// The role to print.
    #[arg(long, value_enum, default_value_t = RbacRole::Manager)]
    role: RbacRole,
    /// Write all three roles into this directory (kubebuilder's file names) instead.
    #[arg(long)]
    output_dir: Option<PathBuf>,
}

/// Output format of `crd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
enum CrdFormat {
    #[default]
    Yaml,
    Json,
}

#[derive(clap::Args, Debug)]
struct CrdArgs {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = CrdFormat::Yaml)]
    output: CrdFormat,
    /// Write each CRD as `<group>_<plural>.yaml` into this directory instead.
    #[arg(long)]
    output_dir: Option<PathBuf>,
}

/// An operator: its name, API, permissions, conversion and controllers; [`Operator::main`]
/// runs the command line.
pub struct Operator {
    name: String,
    version: String,
    crate_name: String,
    binary: String,
    crds: Vec<CustomResourceDefinition>,
    permissions: Vec<Permission>,
    converters: Vec<Arc<dyn Converter>>,
    collectors: Vec<Box<dyn Collector>>,
    controllers: Option<Controllers>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Operator {
    /// An operator named `name` (field manager, event reporter, Lease `<name>-leader`, metric
    /// prefix, User-Agent `<name>/<version>`). Its logs default to info for the crate named
    /// like it (`-` as `_`); see [`Operator::log_target`].
    pub fn new(name: &str, version: &str) -> Self {
        Self {
            name: name.to_string(),
            version: version.to_string(),
            crate_name: name.replace('-', "_"),
            binary: "manager".into(),
            crds: Vec::new(),
            permissions: Vec::new(),
            converters: Vec::new(),
            collectors: Vec::new(),
            controllers: None,
        }
    }

    /// The crate whose logs are on at info level by default (when it is not named like the
    /// operator).
    #[must_use]
    pub fn log_target(mut self, crate_name: &str) -> Self {
        self.crate_name = crate_name.to_string();
        self
    }

    /// The binary's name, as generated files name the command that printed them (default
    /// `manager`, kubebuilder's).
    #[must_use]
    pub fn binary(mut self, binary: &str) -> Self {
        self.binary = binary.to_string();
        self
    }

    /// The CRDs `crd` prints.
    #[must_use]
    pub fn crds(mut self, crds: Vec<CustomResourceDefinition>) -> Self {
        self.crds = crds;
        self
    }

    /// The operator's table of API calls (the manager role; the runtime adds its own roles).
    #[must_use]
    pub fn permissions(mut self, permissions: &[Permission]) -> Self {
        self.permissions = permissions.to_vec();
        self
    }

    /// A resource whose versions the conversion webhook converts.
    #[must_use]
    pub fn conversion(mut self, converter: impl Converter + 'static) -> Self {
        self.converters.push(Arc::new(converter));
        self
    }

    /// Metrics of the operator's own, computed at scrape time.
    #[must_use]
    pub fn collector(mut self, collector: Box<dyn Collector>) -> Self {
        self.collectors.push(collector);
        self
    }

    /// The controllers: called at the start of every leadership term with a fresh context;
    /// must return soon after the token is cancelled.
    #[must_use]
    pub fn controllers<F, Fut>(mut self, controllers: F) -> Self
    where
        F: Fn(ControllerContext, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.controllers = Some(Arc::new(move |ctx, token| {
            Box::pin(controllers(ctx, token))
        }));
        self
    }

    /// Parses the process arguments and runs the command. Exit codes: 0 ok, 1 bad input or
    /// configuration, 2 unexpected failure.
    pub fn main(self) -> ExitCode {
        // kube uses rustls with ring; so do the webhook and metrics servers. Install the provider
        // before anything builds a TLS config, or rustls cannot choose one and panics.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let command = Cli::command()
            .name(self.binary.clone())
            .version(self.version.clone())
            .about(format!("The {} operator.", self.name));
        let cli = match Cli::from_arg_matches(&command.get_matches()) {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        };
        match cli.command {
            Command::Crd(args) => finish(self.print_crds(&args)),
            Command::Rbac(args) => finish(self.print_rbac(&args)),
            Command::Run(args) => {
                let plan = self.plan();
                manager::main(plan, args)
            }
            Command::Webhook(args) => webhook::main(args, self.converters),
        }
    }

    fn plan(self) -> Plan {
        let metrics = Arc::new(Metrics::new(&self.name));
        for c in self.collectors {
            metrics.register_collector(c);
        }
        let controllers = self.controllers.unwrap_or_else(|| {
            Arc::new(|_ctx, token: CancellationToken| {
                Box::pin(async move { token.cancelled().await })
            })
        });
        Plan {
            name: self.name,
            version: self.version,
            crate_name: self.crate_name,
            controllers,
            converters: self.converters,
            metrics,
        }
    }

    /// The YAML of a generated role.
    pub fn role_yaml(&self, role: RbacRole) -> Result<String, serde_saphyr::ser::Error> {
        let command = format!("{} rbac", self.binary);
        match role {
            RbacRole::Manager => rbac::to_yaml(&rbac::manager_role(&self.permissions), &command),
            RbacRole::LeaderElection => rbac::to_yaml(&rbac::leader_election_role(), &command),
            RbacRole::MetricsAuth => rbac::to_yaml(&rbac::metrics_auth_role(), &command),
        }
    }

    fn print_rbac(&self, args: &RbacArgs) -> anyhow::Result<()> {
        let Some(dir) = &args.output_dir else {
            return write_stdout(&self.role_yaml(args.role)?);
        };
        std::fs::create_dir_all(dir)?;
        for role in [
            RbacRole::Manager,
            RbacRole::LeaderElection,
            RbacRole::MetricsAuth,
        ] {
            write_file(&dir.join(role.file_name()), &self.role_yaml(role)?)?;
        }
        Ok(())
    }

    fn print_crds(&self, args: &CrdArgs) -> anyhow::Result<()> {
        if let Some(dir) = &args.output_dir {
            std::fs::create_dir_all(dir)?;
            for crd in &self.crds {
                let path = dir.join(crate::crd::file_name(crd));
                write_file(&path, &olmkit_core::docs::to_yaml("a CRD", crd)?)?;
            }
            return Ok(());
        }
        let mut text = String::new();
        for (i, crd) in self.crds.iter().enumerate() {
            match args.output {
                CrdFormat::Yaml => {
                    if i > 0 {
                        text.push_str("---\n");
                    }
                    text.push_str(&olmkit_core::docs::to_yaml("a CRD", crd)?);
                }
                CrdFormat::Json => text.push_str(&(serde_json::to_string_pretty(crd)? + "\n")),
            }
        }
        write_stdout(&text)
    }
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Writes a generated file atomically, saying which.
fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    olmkit_core::fsio::write_file_atomic(path, text.as_bytes())?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Writes data to stdout; a closed pipe (`manager crd | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
