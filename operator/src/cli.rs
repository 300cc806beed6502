//! Command line of the `operator` binary.
//!
//! `operator run` runs the controller (and the conversion webhook); `operator webhook` runs only
//! the conversion webhook, for clusters that deploy it separately and for tests; `operator crd`
//! prints the merged CustomResourceDefinition generated from the Rust types.

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
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the controller manager: reconcile Memcached objects, serve metrics, health probes and
    /// the conversion webhook.
    Run(crate::run::RunArgs),
    /// Serve only the conversion webhook.
    Webhook(crate::webhook::WebhookArgs),
    /// Print the merged multi-version CustomResourceDefinition.
    Crd(CrdArgs),
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
        Command::Run(args) => crate::run::main(args),
        Command::Webhook(args) => crate::webhook::main(args),
    }
}
