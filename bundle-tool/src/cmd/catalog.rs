//! `bundle-tool catalog ...` (being built; owned by its issue).

use crate::exit::CmdError;
use crate::output::GlobalArgs;

/// Subcommands of `bundle-tool catalog`.
#[derive(clap::Subcommand, Debug)]
pub enum CatalogCommand {}

/// Runs the command.
pub async fn run(command: CatalogCommand, _g: &GlobalArgs) -> Result<(), CmdError> {
    match command {}
}
