//! HTTPS conversion webhook for `memcacheds.cache.example.com` (being built by the conversion
//! work).
//!
//! Contract with the rest of the operator:
//! - [`WebhookArgs`]: clap flags, flattened into `operator run` and used by `operator webhook`.
//! - [`main`]: `operator webhook` (serve until SIGTERM).
//! - `serve(args, readiness, shutdown)`: the server, spawned by `operator run`; `WebhookReadiness`
//!   tells `/readyz` whether a certificate is loaded and the server is serving.

use std::process::ExitCode;

/// Flags of the conversion webhook server.
#[derive(clap::Args, Debug, Clone)]
pub struct WebhookArgs {}

/// Runs only the webhook server until SIGTERM.
pub fn main(_args: WebhookArgs) -> ExitCode {
    eprintln!("error: `operator webhook` is not available in this build yet");
    ExitCode::from(2)
}
