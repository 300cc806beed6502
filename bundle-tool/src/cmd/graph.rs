//! `bundle-tool graph`: the upgrade graph of a catalog's packages as text, Mermaid, DOT, a
//! self-drawn SVG or JSON.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, print_data};
use clap::ValueEnum;
use olmkit_catalog::declcfg::{LoadOptions, load_dir};
use olmkit_catalog::graph::{PackageGraph, package_graphs};
use olmkit_catalog::graph_draw::{GraphFormat, render};
use serde_json::{Value, json};
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
    /// JSON: channels, entries with their edges as written, heads, default channel and
    /// deprecations.
    Json,
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

/// One package as JSON. Entries keep the edges as written in the catalog (FBC field names);
/// `edges` adds what they mean, with skipRange expanded to the bundles it covers. Deprecation
/// messages are on the package, channel or entry they concern and listed in `deprecations`.
fn package_json(pkg: &PackageGraph) -> Value {
    let mut deprecations = Vec::new();
    if let Some(m) = &pkg.deprecated {
        deprecations.push(json!({ "schema": "olm.package", "name": pkg.package, "message": m }));
    }
    let mut bundle_deps = std::collections::BTreeMap::new();
    let channels: Vec<Value> = pkg
        .channels
        .iter()
        .map(|c| {
            if let Some(m) = &c.deprecated {
                deprecations.push(json!({ "schema": "olm.channel", "name": c.name, "message": m }));
            }
            let entries: Vec<Value> = c
                .nodes
                .iter()
                .filter(|n| n.in_channel)
                .map(|n| {
                    let mut e = json!(n.entry);
                    e["version"] = json!(n.version);
                    if let Some(m) = &n.deprecated {
                        e["deprecated"] = json!(m);
                        bundle_deps.insert(n.name.clone(), m.clone());
                    }
                    e
                })
                .collect();
            let mut ch = json!({
                "name": c.name,
                "default": c.is_default,
                "heads": c.heads,
                "entries": entries,
                "edges": c.edges,
            });
            if let Some(m) = &c.deprecated {
                ch["deprecated"] = json!(m);
            }
            ch
        })
        .collect();
    deprecations.extend(
        bundle_deps
            .into_iter()
            .map(|(name, m)| json!({ "schema": "olm.bundle", "name": name, "message": m })),
    );
    let mut p = json!({
        "package": pkg.package,
        "defaultChannel": pkg.default_channel,
        "channels": channels,
        "deprecations": deprecations,
    });
    if let Some(m) = &pkg.deprecated {
        p["deprecated"] = json!(m);
    }
    p
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
        Format::Json => {
            let v = json!({ "packages": graphs.iter().map(package_json).collect::<Vec<_>>() });
            let mut s = serde_json::to_string_pretty(&v).unexpected_err()?;
            s.push('\n');
            return print_data(&s).unexpected_err();
        }
    };
    print_data(&render(&graphs, format)).unexpected_err()
}
