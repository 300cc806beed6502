//! `bundle-tool generate ...` (being built; owned by its issue).

use crate::exit::CmdError;
use crate::output::GlobalArgs;

/// Subcommands of `bundle-tool generate`.
#[derive(clap::Subcommand, Debug)]
pub enum GenerateCommand {}

/// Runs the command.
pub async fn run(command: GenerateCommand, _g: &GlobalArgs) -> Result<(), CmdError> {
    match command {}
}
