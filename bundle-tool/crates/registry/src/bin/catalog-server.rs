//! `catalog-server`: the entrypoint of catalog images. Serves a File-Based Catalog over
//! operator-registry's gRPC API, like `opm serve`, from a small static binary.
//!
//! Exit codes: 0 after a clean shutdown, 1 when the catalog cannot be loaded and
//! `--exit-on-load-error` is set, 2 for anything else (port in use, ...).

use clap::Parser;
use olmkit_registry::server::{ServeArgs, serve, shutdown_signal};
use std::process::ExitCode;

/// Serve a File-Based Catalog over operator-registry's gRPC API (api.Registry), with gRPC
/// health and reflection.
#[derive(Parser, Debug)]
#[command(name = "catalog-server", version, about, long_about = None)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Log lines as JSON.
    #[arg(long)]
    log_json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = if args.log_json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };

    let opts = args.serve.into_options();
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
    match runtime.block_on(serve(opts, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ olmkit_registry::ServeError::Load { .. }) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
