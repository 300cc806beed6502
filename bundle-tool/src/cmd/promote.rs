//! `bundle-tool promote`: add an already released bundle to another channel without breaking
//! that channel's graph, atomically.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, print_data};
use olmkit_catalog::layout::{CatalogDir, write_package_update};
use olmkit_catalog::release::{Outcome, plan_promote};
use std::path::PathBuf;

/// Arguments of `bundle-tool promote`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Version to promote (e.g. 0.2.0).
    #[arg(value_name = "VERSION")]
    pub bundle_version: String,
    /// Target channel.
    #[arg(long = "to", value_name = "CHANNEL")]
    pub to: String,
    /// Package (optional when the catalog has one).
    #[arg(long)]
    pub package: Option<String>,
    /// Catalog directory.
    #[arg(long, default_value = "catalog")]
    pub catalog_dir: PathBuf,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub plan: bool,
}

/// Runs the command.
pub async fn run(args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    if !args.catalog_dir.is_dir() {
        return Err(CmdError::msg(format!(
            "{}: no catalog directory",
            args.catalog_dir.display()
        ))
        .hint("promote works on a released catalog; pass --catalog-dir"));
    }
    let catalog = CatalogDir::open(&args.catalog_dir)
        .user_hint("fix the catalog first: bundle-tool catalog validate")?;
    let package = match &args.package {
        Some(p) => p.clone(),
        None => match catalog.config.packages.as_slice() {
            [one] => one.name.clone(),
            many => {
                return Err(
                    CmdError::msg("the catalog has several packages").hint(format!(
                        "pass --package (one of {})",
                        many.iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                );
            }
        },
    };
    let plan =
        plan_promote(&catalog.config, &package, &args.bundle_version, &args.to).user_err()?;
    print_data(&plan.render_text()).unexpected_err()?;
    if args.plan || plan.outcome == Outcome::NoOp {
        return Ok(());
    }
    let format = catalog.format_of(&package);
    write_package_update(&catalog, &package, &plan.changes, format).unexpected_err()?;
    Ok(())
}
