//! `catalog-server`: the entrypoint of catalog images. Serves a File-Based Catalog over
//! operator-registry's gRPC API, like `opm serve`, from a small static binary.
//!
//! Invoked as `grpc_health_probe` (catalog images link that name to it), it is a health probe
//! instead: see `olmkit_catalog_server::probe`.
//!
//! Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT at any moment, also while the catalog
//! is still loading: the load is abandoned), 1 when the catalog cannot be loaded and
//! `--exit-on-load-error` is set, or when it is part of an interrupted bundle-tool commit that
//! cannot be completed here (it is never served half written), 2 for anything else (port in
//! use, ...).

use clap::Parser;
use olmkit_catalog_server::server::{ServeArgs, serve, shutdown_signal};
use std::process::ExitCode;
use std::time::Duration;

/// How long blocking work may still run once the server has stopped.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

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

/// Invoked as `grpc_health_probe` (the link catalog images carry for OLM's exec probes):
/// check the server's health like that tool and exit with its codes.
fn probe_main(argv: &[String]) -> ExitCode {
    use olmkit_catalog_server::probe::{EXIT_FLAGS, EXIT_SERVING, parse_probe_args, probe};
    let args = match parse_probe_args(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_FLAGS);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FLAGS);
        }
    };
    let (code, message) = runtime.block_on(probe(&args));
    if code == EXIT_SERVING {
        if !args.quiet {
            println!("{message}");
        }
    } else {
        eprintln!("{message}");
    }
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let invoked_as = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if invoked_as == "grpc_health_probe" {
        return probe_main(&argv[1..]);
    }
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

    // Never serve (or report SERVING for) a catalog a bundle-tool commit left half done:
    // complete the commit, or refuse to start.
    match olmkit_core::fsio::recover_before_read(&args.serve.configs) {
        Ok(done) => {
            for (root, _) in done.iter().filter(|(_, r)| r.journal_found) {
                tracing::warn!(root = %root.display(), "completed an interrupted bundle-tool commit");
            }
        }
        Err(e) => {
            eprintln!("error: {e}\nhint: {}", e.hint());
            return ExitCode::from(1);
        }
    }
    let opts = args.serve.into_options();
    // Queries take blocking threads only through the budgets of `olmkit_catalog_server::limits`; the
    // cap is a backstop against anything else growing the pool towards tokio's 512.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(opts.limits.blocking_threads() + 4)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let served = runtime.block_on(serve(opts, shutdown_signal()));
    // Do not wait for a query still reading the disk: the process is going away.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ olmkit_catalog_server::ServeError::Load { .. }) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
