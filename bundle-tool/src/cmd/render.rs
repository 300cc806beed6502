//! `bundle-tool render` (being built; owned by its issue).

use crate::exit::CmdError;
use crate::output::GlobalArgs;

/// Arguments of `bundle-tool render`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the command.
pub async fn run(_args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    Err(CmdError::msg("`render` is not available in this build yet"))
}
