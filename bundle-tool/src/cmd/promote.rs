//! `bundle-tool promote`: add an already released bundle to another channel without breaking
//! that channel's graph, atomically.

use crate::cmd::common::fbc::change_json;
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_catalog::catalog_dir::{CatalogDir, write_package_update};
use olmkit_catalog::release::{Outcome, PlanReleaseError, ReleasePlan, plan_promote};
use serde_json::json;
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
    /// Plan format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Hints for a refused promotion; every refusal happens before anything is written.
fn plan_err(e: PlanReleaseError, args: &Args) -> CmdError {
    let graph = format!(
        "bundle-tool graph --catalog-dir {} shows the channels, their heads and the released versions",
        args.catalog_dir.display()
    );
    let hints: Vec<String> = match &e {
        PlanReleaseError::UnknownVersion { .. } => vec![
            "promote adds an already released version to another channel; release new versions with bundle-tool release".into(),
            graph,
        ],
        PlanReleaseError::Options(_) => {
            vec!["pass a released version such as 0.2.0 (a leading v is accepted)".into()]
        }
        PlanReleaseError::WouldFork { channel, .. } => vec![
            format!("promote a version above the head of {channel}, or release a new one"),
            graph,
        ],
        PlanReleaseError::Invalid(_) => vec![format!(
            "bundle-tool catalog validate {} shows the catalog's problems",
            args.catalog_dir.display()
        )],
        _ => vec![graph],
    };
    hints
        .into_iter()
        .fold(CmdError::user(e), |err, h| err.hint(h))
}

/// The plan as JSON; `result` is the validation of the package after the change, as in the
/// text plan's `result:` line.
fn plan_json(plan: &ReleasePlan, channel: &str, applied: bool) -> Result<String, CmdError> {
    let report =
        olmkit_catalog::validate::validate(&plan.catalog.only_package(&plan.package), None);
    let counts = report.counts();
    let v = json!({
        "package": plan.package,
        "bundle": plan.bundle,
        "version": plan.version,
        "channel": channel,
        "outcome": match plan.outcome {
            Outcome::Changed => "changed",
            Outcome::NoOp => "noOp",
        },
        "changes": plan.changes.iter().map(change_json).collect::<Vec<_>>(),
        "result": {
            "valid": counts.errors == 0,
            "packages": plan.catalog.packages.len(),
            "bundles": plan.catalog.bundles.len(),
            "errors": counts.errors,
            "warnings": counts.warnings,
        },
        "applied": applied,
    });
    let mut s = serde_json::to_string_pretty(&v).unexpected_err()?;
    s.push('\n');
    Ok(s)
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
    // A promote killed while writing left a journal here: complete it before reading, or the
    // plan would start from a half-written catalog.
    olmkit_core::fsio::recover(&args.catalog_dir).user_hint(
        "an interrupted promote left a journal that cannot be completed; check that the catalog directory is writable",
    )?;
    let catalog = CatalogDir::open(&args.catalog_dir)
        .user_hint("fix the catalog first: bundle-tool catalog validate")?;
    let names: Vec<&str> = catalog
        .config
        .packages
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let package = match (&args.package, names.as_slice()) {
        (Some(p), known) if !known.contains(&p.as_str()) => {
            return Err(CmdError::msg(format!(
                "package {p:?} is not in {}",
                args.catalog_dir.display()
            ))
            .hint(if known.is_empty() {
                "the catalog has no package yet: release one with bundle-tool release".to_string()
            } else {
                format!("packages: {}", known.join(", "))
            }));
        }
        (Some(p), _) => p.clone(),
        (None, [one]) => one.to_string(),
        (None, []) => {
            return Err(CmdError::msg(format!(
                "{} has no package",
                args.catalog_dir.display()
            ))
            .hint("release a bundle first (bundle-tool release), or pass the --catalog-dir that holds it"));
        }
        (None, many) => {
            return Err(CmdError::msg("the catalog has several packages")
                .hint(format!("pass --package (one of {})", many.join(", "))));
        }
    };
    let plan = plan_promote(&catalog.config, &package, &args.bundle_version, &args.to)
        .map_err(|e| plan_err(e, &args))?;
    let write = !args.plan && plan.outcome == Outcome::Changed;
    // Text shows the plan before writing; JSON comes after, so that it can say whether the
    // write happened.
    if args.output == OutputFormat::Text {
        print_data(&plan.render_text()).unexpected_err()?;
    }
    if write {
        let format = catalog.format_of(&package);
        write_package_update(&catalog, &package, &plan.changes, format).unexpected_err()?;
    }
    if args.output == OutputFormat::Json {
        print_data(&plan_json(&plan, &args.to, write)?).unexpected_err()?;
    }
    Ok(())
}
