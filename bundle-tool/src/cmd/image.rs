//! `bundle-tool image ...` (being built; owned by its issue).

use crate::exit::CmdError;
use crate::output::GlobalArgs;

/// Subcommands of `bundle-tool image`.
#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {}

/// Runs the command.
pub async fn run(command: ImageCommand, _g: &GlobalArgs) -> Result<(), CmdError> {
    match command {}
}
