//! Command line of the `operator` binary.
//!
//! `operator run` runs the controller (and the conversion webhook); `operator webhook` runs only
//! the conversion webhook, for clusters that deploy it separately and for tests; `operator crd`
//! prints the merged CustomResourceDefinition generated from the Rust types; `operator rbac`
//! prints the RBAC roles generated from the table of API calls the operator makes.

use clap::{Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

/// The Memcached operator.
#[derive(Parser, Debug)]
#[command(name = "operator", version, about)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Commands of the operator binary.
// Parsed once per process: the size of the `Run` variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the controller manager: reconcile Memcached objects, serve metrics, health probes and
    /// the conversion webhook.
    Run(crate::run::RunArgs),
    /// Serve only the conversion webhook.
    Webhook(crate::webhook::WebhookArgs),
    /// Print the merged multi-version CustomResourceDefinition.
    Crd(CrdArgs),
    /// Print the RBAC role the operator needs (generated from the API calls it makes).
    Rbac(RbacArgs),
}

/// Which generated role `operator rbac` prints.
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

/// Arguments of `operator rbac`.
#[derive(clap::Args, Debug)]
pub struct RbacArgs {
    /// The role to print.
    #[arg(long, value_enum, default_value_t = RbacRole::Manager)]
    pub role: RbacRole,
}

fn print_rbac(args: &RbacArgs) -> anyhow::Result<()> {
    let text = match args.role {
        RbacRole::Manager => crate::rbac::to_yaml(&crate::rbac::manager_role())?,
        RbacRole::LeaderElection => crate::rbac::to_yaml(&crate::rbac::leader_election_role())?,
        RbacRole::MetricsAuth => crate::rbac::to_yaml(&crate::rbac::metrics_auth_role())?,
    };
    write_stdout(&text)
}

/// Output format of `operator crd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum CrdFormat {
    /// YAML.
    #[default]
    Yaml,
    /// JSON.
    Json,
}

/// Arguments of `operator crd`.
#[derive(clap::Args, Debug)]
pub struct CrdArgs {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = CrdFormat::Yaml)]
    pub output: CrdFormat,
}

fn print_crd(args: &CrdArgs) -> anyhow::Result<()> {
    let crd = memcached_api::crd();
    let text = match args.output {
        CrdFormat::Yaml => serde_saphyr::to_string(&crd)?,
        CrdFormat::Json => serde_json::to_string_pretty(&crd)? + "\n",
    };
    write_stdout(&text)
}

/// Writes data to stdout; a closed pipe (`operator crd | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Parses the process arguments and runs the command. Exit codes: 0 ok, 1 bad input or
/// configuration, 2 unexpected failure.
pub fn main() -> ExitCode {
    // kube uses rustls with ring; the webhook too. Install the provider before anything builds
    // a TLS config, or rustls cannot choose one and panics.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Crd(args) => match print_crd(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Rbac(args) => match print_rbac(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Run(args) => crate::run::main(args),
        Command::Webhook(args) => crate::webhook::main(args),
    }
}
