//! The command-line grammar of bundle-tool.

use crate::cmd;
use crate::exit::CmdError;
use crate::output::GlobalArgs;
use clap::{Parser, Subcommand};

/// Build, validate, release, publish and install OLM operator bundles and catalogs.
#[derive(Parser, Debug)]
#[command(name = "bundle-tool", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Options shared by every command.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Generate CRDs or a registry+v1 bundle.
    #[command(subcommand)]
    Generate(cmd::generate::GenerateCommand),
    /// Validate bundles like `operator-sdk bundle validate`.
    Validate(cmd::validate::Args),
    /// Render bundles or catalogs to File-Based Catalog blobs, like `opm render`.
    Render(cmd::render::Args),
    /// File-Based Catalog commands.
    #[command(subcommand)]
    Catalog(cmd::catalog::CatalogCommand),
    /// Release a new version: bundle, catalog update, validation and images, in one step.
    #[command(disable_version_flag = true)]
    Release(cmd::release::Args),
    /// Add an already released bundle to another channel.
    Promote(cmd::promote::Args),
    /// Show the upgrade graph of a package.
    Graph(cmd::graph::Args),
    /// Explain how OLM resolves upgrades.
    #[command(subcommand)]
    Explain(cmd::explain::ExplainCommand),
    /// Build, push and inspect OCI images.
    #[command(subcommand)]
    Image(cmd::image::ImageCommand),
    /// Serve a catalog over operator-registry's gRPC API, like `opm serve`.
    Serve(cmd::serve::Args),
    /// Install an operator on a cluster through OLM.
    Install(cmd::install::Args),
    /// Show Subscriptions, InstallPlans and CSVs on a cluster.
    Status(cmd::status::Args),
    /// Switch a Subscription to another channel.
    Upgrade(cmd::upgrade::Args),
    /// Approve a pending manual InstallPlan.
    Approve(cmd::approve::Args),
}

/// Runs the parsed command (here, so that the command modules never import the CLI back).
pub async fn dispatch(cli: Cli) -> Result<(), CmdError> {
    let g = &cli.global;
    match cli.command {
        Command::Generate(c) => cmd::generate::run(c, g).await,
        Command::Validate(a) => cmd::validate::run(a, g).await,
        Command::Render(a) => cmd::render::run(a, g).await,
        Command::Catalog(c) => cmd::catalog::run(c, g).await,
        Command::Release(a) => cmd::release::run(a, g).await,
        Command::Promote(a) => cmd::promote::run(a, g).await,
        Command::Graph(a) => cmd::graph::run(a, g).await,
        Command::Explain(c) => cmd::explain::run(c, g).await,
        Command::Image(c) => cmd::image::run(c, g).await,
        Command::Serve(a) => cmd::serve::run(a, g).await,
        Command::Install(a) => cmd::install::run(a, g).await,
        Command::Status(a) => cmd::status::run(a, g).await,
        Command::Upgrade(a) => cmd::upgrade::run(a, g).await,
        Command::Approve(a) => cmd::approve::run(a, g).await,
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// clap's own consistency checks (unique names, valid groups...) over every subcommand;
    /// they would otherwise only fire when a user runs the broken command.
    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }
}
