//! `bundle-tool explain upgrade`: replays how OLM v0 (Subscriptions) and OLM v1
//! (ClusterExtensions) would upgrade an installed CSV through the catalog, step by step, and
//! names the missing edge when the channel head is out of reach.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use clap::ValueEnum;
use olmkit_catalog::declcfg::{LoadOptions, load_dir};
use olmkit_catalog::explain::{self, UpgradePath};
use olmkit_catalog::graph::{PackageGraph, package_graphs};
use std::path::PathBuf;

/// Subcommands of `bundle-tool explain`.
#[derive(clap::Subcommand, Debug)]
pub enum ExplainCommand {
    /// How a Subscription (v0) or ClusterExtension (v1) on --from would be upgraded.
    Upgrade(UpgradeArgs),
}

/// Which OLM to replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OlmChoice {
    /// OLM v0 only.
    V0,
    /// OLM v1 only.
    V1,
    /// Both.
    #[default]
    Both,
}

/// Arguments of `explain upgrade`.
#[derive(clap::Args, Debug)]
pub struct UpgradeArgs {
    /// Package (optional when the catalog has one).
    #[arg(long)]
    pub package: Option<String>,
    /// Channel the Subscription follows now.
    #[arg(long)]
    pub channel: String,
    /// Installed CSV (bundle name), e.g. memcached-operator.v0.1.0.
    #[arg(long, value_name = "CSV")]
    pub from: String,
    /// Channel the Subscription is switched to (default: stay on --channel).
    #[arg(long, value_name = "CHANNEL")]
    pub to_channel: Option<String>,
    /// Catalog directory.
    #[arg(long, default_value = "catalog")]
    pub catalog_dir: PathBuf,
    /// OLM version(s) to replay.
    #[arg(long, value_enum, default_value_t = OlmChoice::Both)]
    pub olm: OlmChoice,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

fn pick_package(graphs: Vec<PackageGraph>, wanted: Option<&str>) -> Result<PackageGraph, CmdError> {
    let names: Vec<String> = graphs.iter().map(|g| g.package.clone()).collect();
    match wanted {
        Some(p) => graphs.into_iter().find(|g| g.package == p).ok_or_else(|| {
            CmdError::msg(format!("package {p:?} is not in the catalog"))
                .hint(format!("packages: {}", names.join(", ")))
        }),
        None if graphs.len() == 1 => graphs
            .into_iter()
            .next()
            .ok_or_else(|| CmdError::msg("the catalog has no package")),
        None => Err(CmdError::msg("the catalog has several packages")
            .hint(format!("pass --package (one of {})", names.join(", ")))),
    }
}

/// Runs the command.
pub async fn run(command: ExplainCommand, _g: &GlobalArgs) -> Result<(), CmdError> {
    let ExplainCommand::Upgrade(a) = command;
    let cfg = load_dir(&a.catalog_dir, &LoadOptions::graph_only())
        .user_hint("fix the catalog first: bundle-tool catalog validate")?;
    let pkg = pick_package(package_graphs(&cfg), a.package.as_deref())?;
    let channel = a.to_channel.as_deref().unwrap_or(&a.channel);
    pkg.channel(&a.channel).ok_or_else(|| {
        CmdError::msg(format!(
            "package {:?} has no channel {:?}",
            pkg.package, a.channel
        ))
        .hint(format!(
            "--channel is the channel the Subscription follows now, one of: {}",
            pkg.channels
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let explain_err = |e: explain::ExplainError| {
        let hint = match &e {
            explain::ExplainError::UnknownChannel { .. } => format!(
                "bundle-tool graph --catalog-dir {} shows the channels",
                a.catalog_dir.display()
            ),
            explain::ExplainError::UnknownBundle { .. } => {
                "--from is the installed CSV: bundle-tool status shows it on a cluster".to_string()
            }
        };
        CmdError::user(e).hint(hint)
    };
    let mut paths: Vec<UpgradePath> = Vec::new();
    if a.olm != OlmChoice::V1 {
        paths.push(explain::explain_v0(&pkg, channel, &a.from).map_err(explain_err)?);
    }
    if a.olm != OlmChoice::V0 {
        paths.push(explain::explain_v1(&pkg, channel, &a.from).map_err(explain_err)?);
    }
    let initial_replaces = pkg
        .channel(&a.channel)
        .and_then(|c| c.node(&a.from))
        .map(|n| n.entry.replaces.clone())
        .unwrap_or_default();
    match a.output {
        OutputFormat::Json => {
            let v = serde_json::json!({
                "package": pkg.package,
                "fromChannel": a.channel,
                "toChannel": channel,
                "from": a.from,
                "paths": paths,
            });
            let mut s = serde_json::to_string_pretty(&v).unexpected_err()?;
            s.push('\n');
            print_data(&s).unexpected_err()?;
        }
        OutputFormat::Text => {
            let mut out = String::new();
            if channel != a.channel {
                out.push_str(&format!("channel switch: {} -> {channel}\n\n", a.channel));
            }
            for p in &paths {
                match p.olm {
                    explain::Olm::V0 => {
                        out.push_str(&explain::render_v0_text(&pkg, p, &initial_replaces))
                    }
                    explain::Olm::V1 => out.push_str(&explain::render_v1_text(&pkg, p)),
                }
                out.push('\n');
            }
            print_data(&out).unexpected_err()?;
        }
    }
    Ok(())
}
