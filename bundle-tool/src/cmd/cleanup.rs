//! `bundle-tool cleanup <package>`: removes what `run bundle` created for a package (and what
//! OLM made from it: CSVs, InstallPlans, and with `--delete-crds` the CRDs the CSV owns), like
//! `operator-sdk cleanup`, never what `run bundle` did not create. The work is olmkit-cluster's
//! `cleanup`.

use crate::cmd::common::cluster::{ClusterArgs, event_printer, print_json};
use crate::exit::CmdError;
use crate::output::{GlobalArgs, OutputFormat, spinner};
use olmkit_cluster::cleanup::{CleanupError, CleanupRequest, cleanup};
use olmkit_cluster::names::parse_go_duration;
use std::time::Duration;

fn duration(s: &str) -> Result<Duration, String> {
    parse_go_duration("duration", s).map_err(|e| e.reason)
}

/// Arguments of `bundle-tool cleanup`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The package `run bundle` installed.
    #[arg(value_name = "PACKAGE")]
    pub package: String,
    /// Namespace of the run (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Turn on every delete option below (operator-sdk's default; --delete-all=false to choose).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub delete_all: bool,
    /// Delete the CRDs the installed CSV owns, and with them every custom resource of them
    /// (a CRD another CSV of the cluster owns is kept).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub delete_crds: bool,
    /// Delete the OperatorGroup run bundle created, once no Subscription of the namespace is
    /// left (an OperatorGroup run bundle did not create is never deleted).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub delete_operator_groups: bool,
    /// Give up waiting for deletions after this long (Go duration).
    #[arg(long, default_value = "2m", value_parser = duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Time between two looks while waiting.
    #[arg(long, default_value = "250ms", value_parser = duration, hide = true)]
    pub poll_interval: Duration,
    /// Report format on stdout: nothing (text; what was deleted goes to stderr) or the deleted
    /// and kept objects (json).
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

fn cleanup_err(e: CleanupError) -> CmdError {
    let hints = e.hints();
    let mut err = if e.is_user_error() {
        CmdError::user(e)
    } else {
        CmdError::unexpected(e)
    };
    for h in hints {
        err = err.hint(h);
    }
    err
}

/// Runs the command.
pub async fn run(a: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    let cluster = a.cluster.connect().await?;
    let namespace = a
        .namespace
        .clone()
        .unwrap_or_else(|| cluster.default_namespace().to_string());
    let req = CleanupRequest {
        namespace: namespace.clone(),
        package: a.package.clone(),
        delete_crds: a.delete_all || a.delete_crds,
        delete_operator_groups: a.delete_all || a.delete_operator_groups,
        timeout: a.timeout,
        poll_interval: a.poll_interval.max(Duration::from_millis(20)),
    };
    let bar = spinner(g, "cleaning up");
    let mut printer = event_printer(&bar);
    let result = cleanup(&cluster, &req, &mut printer).await;
    bar.finish_and_clear();
    let report = result.map_err(cleanup_err)?;
    for k in &report.kept {
        eprintln!("kept {}: {}", k.object, k.reason);
    }
    if report.deleted.is_empty() {
        eprintln!(
            "warning: nothing of package {} created by run bundle in namespace {namespace}: nothing to clean up",
            a.package
        );
    } else {
        eprintln!(
            "cleanup complete: package {} removed from namespace {namespace} ({} object(s) deleted)",
            a.package,
            report.deleted.len()
        );
    }
    if a.output == OutputFormat::Json {
        print_json(&serde_json::to_value(&report).map_err(CmdError::unexpected)?)?;
    }
    Ok(())
}
