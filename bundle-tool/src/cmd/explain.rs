//! `bundle-tool explain ...` (being built; owned by its issue).

use crate::exit::CmdError;
use crate::output::GlobalArgs;

/// Subcommands of `bundle-tool explain`.
#[derive(clap::Subcommand, Debug)]
pub enum ExplainCommand {}

/// Runs the command.
pub async fn run(command: ExplainCommand, _g: &GlobalArgs) -> Result<(), CmdError> {
    match command {}
}
