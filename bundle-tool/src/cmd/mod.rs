//! One module per command group; each exposes its clap arguments and an async `run`.

pub mod approve;
pub mod catalog;
pub mod common;
pub mod explain;
pub mod generate;
pub mod graph;
pub mod image;
pub mod install;
pub mod promote;
pub mod release;
pub mod render;
pub mod serve;
pub mod status;
pub mod upgrade;
pub mod validate;

use crate::cli::{Cli, Command};
use crate::exit::CmdError;

/// Runs the parsed command.
pub async fn dispatch(cli: Cli) -> Result<(), CmdError> {
    let g = &cli.global;
    match cli.command {
        Command::Generate(c) => generate::run(c, g).await,
        Command::Validate(a) => validate::run(a, g).await,
        Command::Render(a) => render::run(a, g).await,
        Command::Catalog(c) => catalog::run(c, g).await,
        Command::Release(a) => release::run(a, g).await,
        Command::Promote(a) => promote::run(a, g).await,
        Command::Graph(a) => graph::run(a, g).await,
        Command::Explain(c) => explain::run(c, g).await,
        Command::Image(c) => image::run(c, g).await,
        Command::Serve(a) => serve::run(a, g).await,
        Command::Install(a) => install::run(a, g).await,
        Command::Status(a) => status::run(a, g).await,
        Command::Upgrade(a) => upgrade::run(a, g).await,
        Command::Approve(a) => approve::run(a, g).await,
    }
}
