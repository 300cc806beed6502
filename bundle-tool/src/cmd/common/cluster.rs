//! What the cluster commands (`install`, `status`, `upgrade`, `approve`) share: kubeconfig and
//! wait flags, loading the local catalog, printing progress events, how olmkit-cluster's
//! errors become exit codes, and turning an outcome into output (text or JSON) and an exit
//! code.

use crate::exit::{CmdError, ResultExt};
use crate::output::{OutputFormat, print_data};
use olmkit_cluster::catalog_view::PackageView;
use olmkit_cluster::client::{Cluster, ClusterError, ClusterOptions, OlmMissingError};
use olmkit_cluster::install::{Event, Outcome, WaitSettings};
use olmkit_cluster::names::parse_go_duration;
use olmkit_cluster::upgrade::ChangeError;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the cluster is.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

impl ClusterArgs {
    pub(crate) async fn connect(&self) -> Result<Cluster, CmdError> {
        Cluster::connect(&ClusterOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        })
        .await
        .user_hint("pass --kubeconfig FILE or --context NAME, or set KUBECONFIG")
    }
}

/// How long to wait for OLM.
#[derive(clap::Args, Debug, Clone)]
pub struct WaitArgs {
    /// Give up waiting for OLM after this long (Go duration: 90s, 10m, 1h).
    #[arg(long, default_value = "10m", value_parser = duration)]
    pub timeout: Duration,
    /// Time between two looks at the cluster while waiting.
    #[arg(long, default_value = "1s", value_parser = duration, hide = true)]
    pub poll_interval: Duration,
    /// How long a CSV must stay Succeeded before the wait ends (OLM often moves a CSV that
    /// just succeeded back to Pending for a reinstall or certificate rotation).
    #[arg(long, default_value = "5s", value_parser = duration, hide = true)]
    pub settle: Duration,
    /// How long OLM may report that an error prevents resolution (typically an unreachable
    /// catalog, which OLM keeps retrying) before the command gives up (Go duration).
    #[arg(long, default_value = "2m", value_parser = duration, value_name = "DURATION")]
    pub resolution_grace: Duration,
}

impl WaitArgs {
    pub(crate) fn settings(&self) -> WaitSettings {
        WaitSettings {
            timeout: self.timeout,
            poll_interval: self.poll_interval.max(Duration::from_millis(20)),
            settle: self.settle,
            resolution_grace: self.resolution_grace,
        }
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_go_duration("duration", s).map_err(|e| e.reason)
}

/// Loads `package` from `--catalog-dir`, or from ./catalog when it exists. A missing default
/// catalog is not an error; a broken or explicitly named one is.
pub(crate) fn load_catalog(
    dir: Option<&Path>,
    package: &str,
) -> Result<Option<PackageView>, CmdError> {
    let (dir, explicit) = match dir {
        Some(d) => (d.to_path_buf(), true),
        None => (PathBuf::from("catalog"), false),
    };
    if !explicit && !dir.is_dir() {
        eprintln!(
            "note: no local catalog (./catalog does not exist; pass --catalog-dir): channels, install modes and upgrade paths are not checked beforehand"
        );
        return Ok(None);
    }
    PackageView::load(&dir, package)
        .map(Some)
        .user_hint("pass --catalog-dir with the catalog the image was built from")
}

pub(crate) fn cluster_err(e: ClusterError) -> CmdError {
    let hint = e.hint();
    if e.is_user_error() {
        let mut err = CmdError::user(e);
        if let Some(h) = hint {
            err = err.hint(h);
        }
        return err;
    }
    // Unexpected errors carry no hint lines, so the advice goes into the message.
    match hint {
        Some(h) => CmdError::unexpected(anyhow::Error::new(e).context(h)),
        None => CmdError::unexpected(e),
    }
}

pub(crate) fn olm_missing(e: OlmMissingError) -> CmdError {
    match e {
        OlmMissingError::Cluster(c) => cluster_err(c),
        other => {
            let hint = other.hint();
            CmdError::user(other).hint(hint)
        }
    }
}

/// Prints progress events on stderr (next to a spinner when stderr is a terminal).
pub(crate) fn event_printer(bar: &indicatif::ProgressBar) -> impl FnMut(Event<'_>) + '_ {
    move |e| {
        let line = match e {
            Event::Note(n) => n.to_string(),
            Event::Applied(what) => format!("applied {what}"),
            Event::Progress(p) => p.to_string(),
        };
        bar.suspend(|| eprintln!("{line}"));
        if let Event::Progress(p) = e {
            bar.set_message(p.to_string());
        }
    }
}

/// Turns a final outcome into stdout/stderr output and an exit code. `what` names the action
/// (`install`, `upgrade`, `approval`).
pub(crate) async fn report_outcome(
    outcome: Outcome,
    what: &str,
    cluster: &Cluster,
    namespace: &str,
) -> Result<(), CmdError> {
    match outcome {
        Outcome::Installed { csv } => {
            eprintln!(
                "{what} complete: {csv} is installed (phase Succeeded) in namespace {namespace}"
            );
            if let Some(table) = olmkit_cluster::status::csv_table_of(cluster, namespace, &csv)
                .await
                .map_err(cluster_err)?
            {
                print_data(&table).unexpected_err()?;
            }
            Ok(())
        }
        Outcome::Unchanged { csv } => {
            if csv.is_empty() {
                eprintln!("{what} done: nothing is installed yet");
            } else {
                eprintln!("{what} done: {csv} stays installed (no upgrade to perform)");
            }
            Ok(())
        }
        Outcome::AwaitingApproval { install_plan, csvs } => {
            eprintln!(
                "InstallPlan {install_plan} waits for approval to install {}",
                csvs.join(", ")
            );
            eprintln!(
                "next: bundle-tool approve --install-plan {install_plan} --namespace {namespace}"
            );
            Ok(())
        }
        Outcome::Failed(f) => {
            let mut msg = f.summary.clone();
            for d in &f.details {
                msg.push_str("\n  ");
                msg.push_str(d);
            }
            let mut err = CmdError::msg(msg);
            for h in f.hints {
                err = err.hint(h);
            }
            Err(err)
        }
        Outcome::TimedOut {
            after,
            last_seen,
            hints,
        } => {
            let mut msg = format!(
                "{what} did not finish within {}; last seen:",
                humanize(after)
            );
            for l in &last_seen {
                msg.push_str("\n  ");
                msg.push_str(l);
            }
            let mut err = CmdError::msg(msg);
            for h in hints {
                err = err.hint(h);
            }
            Err(err.hint("rerun with a longer --timeout if OLM is just slow"))
        }
    }
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 && s.fract() == 0.0 && (s as u64).is_multiple_of(60) {
        format!("{}m", s as u64 / 60)
    } else {
        format!("{s}s")
    }
}

pub(crate) fn change_err(e: ChangeError) -> CmdError {
    match e {
        ChangeError::Plan(p) => {
            let hint = p.hint();
            let mut err = CmdError::user(p);
            if let Some(h) = hint {
                err = err.hint(h);
            }
            err
        }
        ChangeError::OlmMissing(m) => olm_missing(m),
        ChangeError::Cluster(c) => cluster_err(c),
    }
}

pub(crate) fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// How a live change ended, as JSON (`result` names the case).
pub(crate) fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::Installed { csv } => json!({ "result": "installed", "csv": csv }),
        Outcome::Unchanged { csv } => json!({ "result": "unchanged", "csv": non_empty(csv) }),
        Outcome::AwaitingApproval { install_plan, csvs } => json!({
            "result": "awaitingApproval",
            "installPlan": install_plan,
            "csvs": csvs,
        }),
        Outcome::Failed(f) => json!({
            "result": "failed",
            "summary": f.summary,
            "details": f.details,
            "hints": f.hints,
        }),
        Outcome::TimedOut {
            after,
            last_seen,
            hints,
        } => json!({
            "result": "timedOut",
            "afterSeconds": after.as_secs_f64(),
            "lastSeen": last_seen,
            "hints": hints,
        }),
    }
}

pub(crate) fn print_json(v: &Value) -> Result<(), CmdError> {
    let mut s = serde_json::to_string_pretty(v).unexpected_err()?;
    s.push('\n');
    print_data(&s).unexpected_err()
}

/// Ends a live change: `report_outcome` for text. With JSON on stdout already, the CSV table
/// `report_outcome` prints for an installed CSV would corrupt it, so that case only gets its
/// stderr line; the other cases print to stderr only and keep their exit codes.
pub(crate) async fn finish(
    outcome: Outcome,
    what: &str,
    cluster: &Cluster,
    namespace: &str,
    format: OutputFormat,
) -> Result<(), CmdError> {
    match (format, outcome) {
        (OutputFormat::Json, Outcome::Installed { csv }) => {
            eprintln!(
                "{what} complete: {csv} is installed (phase Succeeded) in namespace {namespace}"
            );
            Ok(())
        }
        (_, o) => report_outcome(o, what, cluster, namespace).await,
    }
}
