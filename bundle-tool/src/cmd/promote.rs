//! `bundle-tool promote`: add an already released bundle to another channel without breaking
//! that channel's graph, atomically. The promotion is olmkit-release's ([`Promotion`]); this
//! module maps the flags to it and prints the plan as text or JSON.

use crate::cmd::common::fbc::change_json;
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_release::catalog_plan::{Outcome, ReleasePlan};
use olmkit_release::promote::{PromoteError, PromoteRequest, Promotion};
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

/// A refused or failed promotion as an exit code: refusals are the user's (exit 1, with their
/// hints), a failed write is not (exit 2).
fn promote_err(e: PromoteError) -> CmdError {
    if !e.is_user_error() {
        return CmdError::unexpected(e);
    }
    let hints = e.hints();
    hints.into_iter().fold(CmdError::user(e), CmdError::hint)
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
        "version": plan.version.to_string(),
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
    let promotion = Promotion::plan(&PromoteRequest {
        catalog_dir: args.catalog_dir.clone(),
        package: args.package.clone(),
        version: args.bundle_version.clone(),
        channel: args.to.clone(),
    })
    .map_err(promote_err)?;
    let plan = &promotion.plan;
    // Text shows the plan before writing; JSON comes after, so that it can say whether the
    // write happened.
    if args.output == OutputFormat::Text {
        print_data(&plan.render_text()).unexpected_err()?;
    }
    let written = !args.plan && promotion.write().map_err(promote_err)?;
    if args.output == OutputFormat::Json {
        print_data(&plan_json(plan, &args.to, written)?).unexpected_err()?;
    }
    Ok(())
}
