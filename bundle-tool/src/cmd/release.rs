//! `bundle-tool release` (being built; owned by its issue).

use crate::exit::CmdError;
use crate::output::GlobalArgs;

/// Arguments of `bundle-tool release`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the command.
pub async fn run(_args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    Err(CmdError::msg(
        "`release` is not available in this build yet",
    ))
}
