//! The command-line grammar of bundle-tool.

use crate::cmd;
use crate::exit::CmdError;
use crate::output::GlobalArgs;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

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
    /// Validate bundles like `operator-sdk bundle validate` (also spelled `bundle validate`).
    Validate(cmd::validate::Args),
    /// Render bundles, catalogs, templates or images to File-Based Catalog blobs, like `opm render`.
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
    /// Try a bundle on a cluster before publishing it: `run bundle`, `run bundle-upgrade`, like
    /// operator-sdk's.
    #[command(subcommand)]
    Run(cmd::run::RunCommand),
    /// Remove what `run bundle` created for a package, like `operator-sdk cleanup`.
    Cleanup(cmd::cleanup::Args),
    /// operator-sdk's spelling: `bundle validate` is `validate`.
    #[command(subcommand, hide = true)]
    Bundle(SdkBundleCommand),
    /// opm's spelling: `alpha render-template` is `render` of a template.
    #[command(subcommand, hide = true)]
    Alpha(AlphaCommand),
    /// opm's command paths (`opm render|validate|serve|init|alpha render-template`), so that a
    /// Makefile can set `OPM = bundle-tool opm`.
    #[command(subcommand, hide = true)]
    Opm(OpmCommand),
    /// Scaffold a new kube-rs operator project on the olmkit runtime, like `kubebuilder init`.
    Init(cmd::scaffold::InitArgs),
    /// Scaffold into a project made by `init`: `create api`, like kubebuilder's.
    #[command(subcommand)]
    Create(cmd::scaffold::CreateCommand),
}

/// `bundle-tool bundle ...`: operator-sdk's `bundle` group (hidden; the same commands).
#[derive(Subcommand, Debug)]
pub enum SdkBundleCommand {
    /// `operator-sdk bundle validate`: the same as `bundle-tool validate`.
    Validate(cmd::validate::Args),
}

/// `bundle-tool alpha ...`: opm's `alpha` group (hidden).
#[derive(Subcommand, Debug)]
pub enum AlphaCommand {
    /// `opm alpha render-template [TYPE] FILE`: `bundle-tool render FILE`.
    RenderTemplate(cmd::render::TemplateArgs),
}

/// `bundle-tool opm ...`: opm's command paths (hidden), each the bundle-tool command it names.
#[derive(Subcommand, Debug)]
pub enum OpmCommand {
    /// `opm render`: `bundle-tool render`.
    Render(cmd::render::Args),
    /// `opm validate DIR`: `bundle-tool catalog validate DIR`.
    Validate(cmd::catalog::ValidateArgs),
    /// `opm serve DIR`: `bundle-tool serve DIR`.
    Serve(cmd::serve::Args),
    /// `opm init PACKAGE`: `bundle-tool catalog init PACKAGE`.
    Init(cmd::catalog::InitArgs),
    /// `opm alpha ...`.
    #[command(subcommand)]
    Alpha(AlphaCommand),
}

impl Command {
    /// The command an operator-sdk or opm spelling names (`bundle validate` is `validate`,
    /// `opm validate` is `catalog validate`...); every other command is itself.
    pub fn canonical(self) -> Command {
        use cmd::catalog::CatalogCommand as C;
        match self {
            Command::Bundle(SdkBundleCommand::Validate(a)) => Command::Validate(a),
            Command::Alpha(AlphaCommand::RenderTemplate(a))
            | Command::Opm(OpmCommand::Alpha(AlphaCommand::RenderTemplate(a))) => {
                Command::Render(a.into_render())
            }
            Command::Opm(OpmCommand::Render(a)) => Command::Render(a),
            Command::Opm(OpmCommand::Validate(a)) => Command::Catalog(C::Validate(a)),
            Command::Opm(OpmCommand::Serve(a)) => Command::Serve(a),
            Command::Opm(OpmCommand::Init(a)) => Command::Catalog(C::Init(a)),
            other => other,
        }
    }
}

/// The trees each command reads (or writes into) that a bundle-tool commit may have left half
/// done: before the command runs, an interrupted commit touching any of them is completed, or
/// the command is refused with a hint (`olmkit_core::fsio::recover_before_read`). Exhaustive,
/// so that a new command has to say what it reads. `release` completes interrupted commits
/// itself (its step 0, which also finishes a release's own journal), and `serve` in its module
/// (shared with the `catalog-server` binary).
pub fn trees_read(command: &Command) -> Vec<PathBuf> {
    use cmd::catalog::CatalogCommand as C;
    use cmd::generate::GenerateCommand as G;
    use cmd::image::{BuildCommand as B, ImageCommand as I};
    let local_catalog =
        |dir: &Option<PathBuf>| vec![dir.clone().unwrap_or_else(|| PathBuf::from("catalog"))];
    match command {
        Command::Generate(G::Kustomize(cmd::generate::KustomizeCommand::Manifests(a))) => {
            vec![
                a.input_dir.clone(),
                a.output_dir.clone(),
                a.crds_dir.clone(),
            ]
        }
        Command::Generate(G::Bundle(a)) => std::iter::once(
            a.output_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("bundle")),
        )
        .chain(a.input_dir.clone())
        .chain(a.deploy_dir.clone())
        .chain(a.crds_dir.clone())
        .collect(),
        Command::Validate(a) | Command::Bundle(SdkBundleCommand::Validate(a)) => a
            .bundle_dirs
            .iter()
            .cloned()
            .chain(a.previous.clone())
            .collect(),
        Command::Alpha(AlphaCommand::RenderTemplate(a))
        | Command::Opm(OpmCommand::Alpha(AlphaCommand::RenderTemplate(a))) => a.trees(),
        Command::Render(a) | Command::Opm(OpmCommand::Render(a)) => a
            .inputs
            .iter()
            .chain(&a.bundles)
            .chain(&a.catalogs)
            .cloned()
            .collect(),
        Command::Catalog(C::Validate(a) | C::Check(a)) | Command::Opm(OpmCommand::Validate(a)) => {
            vec![a.dir.clone()]
        }
        // Files named on the command line, and a server far away.
        Command::Catalog(C::Init(_) | C::Query(_)) | Command::Opm(OpmCommand::Init(_)) => {
            Vec::new()
        }
        Command::Catalog(C::Verify(a)) => std::iter::once(a.catalog_dir.clone())
            .chain(a.bundles.iter().cloned())
            .collect(),
        Command::Catalog(C::FromBundles(a)) => a.bundles.clone(),
        Command::Catalog(C::Index(a)) => vec![a.configs.clone()],
        Command::Release(_) | Command::Serve(_) | Command::Opm(OpmCommand::Serve(_)) => Vec::new(),
        Command::Promote(a) => vec![a.catalog_dir.clone()],
        Command::Graph(a) => vec![a.catalog_dir.clone()],
        Command::Explain(cmd::explain::ExplainCommand::Upgrade(a)) => vec![a.catalog_dir.clone()],
        Command::Image(I::Build(B::Operator(_)))
        | Command::Image(I::Push(_) | I::Inspect(_) | I::Dockerfile(_)) => Vec::new(),
        Command::Image(I::Build(B::Bundle(a))) => vec![a.bundle_dir.clone()],
        Command::Image(I::Build(B::Catalog(a))) => std::iter::once(a.configs_dir.clone())
            .chain(a.index.clone())
            .collect(),
        Command::Install(a) => local_catalog(&a.catalog_dir)
            .into_iter()
            .chain(a.bundle_dir.clone())
            .collect(),
        Command::Status(a) => local_catalog(&a.catalog_dir),
        Command::Upgrade(a) => local_catalog(&a.catalog_dir),
        Command::Approve(a) => local_catalog(&a.catalog_dir),
        // A bundle directory they are given; images and the cluster are no tree of the project.
        Command::Run(cmd::run::RunCommand::Bundle(a)) => a.trees_read(),
        Command::Run(cmd::run::RunCommand::BundleUpgrade(a)) => a.trees_read(),
        Command::Cleanup(_) => Vec::new(),
        // Their writes complete interrupted commits themselves (Changeset::new).
        Command::Init(_) | Command::Create(_) => Vec::new(),
    }
}

/// Runs the parsed command (here, so that the command modules never import the CLI back).
pub async fn dispatch(cli: Cli) -> Result<(), CmdError> {
    let g = &cli.global;
    let trees = trees_read(&cli.command);
    cmd::common::pending::recover_before_reading(trees.iter().map(PathBuf::as_path))?;
    match cli.command.canonical() {
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
        Command::Run(c) => cmd::run::run(c, g).await,
        Command::Cleanup(a) => cmd::cleanup::run(a, g).await,
        Command::Bundle(_) | Command::Alpha(_) | Command::Opm(_) => Err(CmdError::unexpected(
            anyhow::anyhow!("an operator-sdk or opm spelling was not mapped to its command"),
        )),
        Command::Init(a) => cmd::scaffold::init(a, g).await,
        Command::Create(c) => cmd::scaffold::create(c, g).await,
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
