//! `operator run`: the controller manager process (being built by the operator work).

use std::process::ExitCode;

/// Arguments of `operator run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {}

/// Runs the controller manager until SIGTERM.
pub fn main(_args: RunArgs) -> ExitCode {
    eprintln!("error: `operator run` is not available in this build yet");
    ExitCode::from(2)
}
