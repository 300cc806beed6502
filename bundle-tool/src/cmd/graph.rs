//! `bundle-tool graph`: the upgrade graph of a catalog's packages as text, Mermaid, DOT or a
//! self-drawn SVG.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, print_data};
use clap::ValueEnum;
use olmkit_catalog::declcfg::{LoadOptions, load_dir};
use olmkit_catalog::graph::package_graphs;
use olmkit_catalog::graph_render::{GraphFormat, render};
use std::path::PathBuf;

/// Drawing format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Indented text.
    #[default]
    Text,
    /// Mermaid flowchart.
    Mermaid,
    /// Graphviz DOT.
    Dot,
    /// SVG (drawn by bundle-tool, no graphviz needed).
    Svg,
}

/// Arguments of `bundle-tool graph`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Catalog directory.
    #[arg(long, default_value = "catalog")]
    pub catalog_dir: PathBuf,
    /// Only this package.
    #[arg(long)]
    pub package: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Runs the command.
pub async fn run(args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    let cfg = load_dir(&args.catalog_dir, &LoadOptions::graph_only())
        .user_hint("fix the catalog first: bundle-tool catalog validate")?;
    let mut graphs = package_graphs(&cfg);
    if let Some(p) = &args.package {
        graphs.retain(|g| &g.package == p);
        if graphs.is_empty() {
            return Err(CmdError::msg(format!(
                "package {p:?} is not in {}",
                args.catalog_dir.display()
            ))
            .hint(format!(
                "packages: {}",
                cfg.packages
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let format = match args.format {
        Format::Text => GraphFormat::Text,
        Format::Mermaid => GraphFormat::Mermaid,
        Format::Dot => GraphFormat::Dot,
        Format::Svg => GraphFormat::Svg,
    };
    print_data(&render(&graphs, format)).unexpected_err()
}
