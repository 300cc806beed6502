//! bundle-tool: the OLM packaging CLI.
//!
//! This crate owns the command line only: argument parsing ([`cli`]), one module per command
//! group ([`cmd`]) that calls into the `olmkit-*` library crates, error-to-exit-code mapping
//! ([`exit`]) and terminal output helpers ([`output`]). Exit codes: 0 ok, 1 validation or user
//! error, 2 unexpected failure.

pub mod cli;
pub mod cmd;
pub mod exit;
pub mod output;

use clap::Parser;
use std::process::ExitCode;

/// Runs the CLI with the process arguments and returns the exit code.
pub fn main() -> ExitCode {
    // kube and oci-client both use rustls; pin one process-wide provider (ring) before either
    // builds a client, or rustls cannot choose and panics.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = cli::Cli::parse();
    output::init_logging(&cli.global);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::UNEXPECTED);
        }
    };
    let result = runtime.block_on(cli::dispatch(cli));
    exit::report(result)
}
