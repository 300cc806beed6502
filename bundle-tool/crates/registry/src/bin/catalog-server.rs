//! `catalog-server`: the entrypoint of catalog images. Serves a File-Based Catalog over
//! operator-registry's gRPC API, like `opm serve`, from a small static binary.
//!
//! Exit codes: 0 after a clean shutdown, 1 when the catalog cannot be loaded and
//! `--exit-on-load-error` is set, 2 for anything else (port in use, ...).

use clap::Parser;
use olmkit_registry::server::{IndexChoice, ServeOptions, serve, shutdown_signal};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Serve a File-Based Catalog over operator-registry's gRPC API (api.Registry), with gRPC
/// health and reflection.
#[derive(Parser, Debug)]
#[command(name = "catalog-server", version, about, long_about = None)]
struct Args {
    /// The catalog directory (File-Based Catalog).
    configs: PathBuf,
    /// Port to listen on.
    #[arg(short, long, default_value_t = 50051, env = "CATALOG_SERVER_PORT")]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    address: IpAddr,
    /// Precomputed index (from `bundle-tool catalog index`). Default: `<configs>/../index`
    /// when that file exists.
    #[arg(long, conflicts_with = "no_index")]
    index: Option<PathBuf>,
    /// Ignore any index and scan the catalog.
    #[arg(long)]
    no_index: bool,
    /// Exit with code 1 when the catalog cannot be loaded (default: stay up, NOT_SERVING).
    #[arg(long)]
    exit_on_load_error: bool,
    /// Write the load error to this file (Kubernetes terminationMessagePath).
    #[arg(long)]
    termination_log: Option<PathBuf>,
    /// Threads used to scan the catalog (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Log lines as JSON.
    #[arg(long)]
    log_json: bool,
    /// Wait this many milliseconds before loading (to exercise probes against a slow start).
    #[arg(long, default_value_t = 0, hide = true)]
    debug_load_delay_ms: u64,
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

    let opts = ServeOptions {
        configs: args.configs,
        address: args.address,
        port: args.port,
        index: match (args.index, args.no_index) {
            (_, true) => IndexChoice::Off,
            (Some(p), false) => IndexChoice::File(p),
            (None, false) => IndexChoice::Auto,
        },
        exit_on_load_error: args.exit_on_load_error,
        termination_log: args.termination_log,
        load_delay: Duration::from_millis(args.debug_load_delay_ms),
        threads: args.threads,
    };
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
