//! `bundle-tool upgrade`: switch a Subscription to another channel, after saying from the local
//! catalog which CSV the switch leads to (and refusing a switch that would do nothing).
//!
//! With `-o json`, stdout gets what was predicted and done instead of the CSV table.

use crate::cmd::common::cluster::{
    ClusterArgs, WaitArgs, change_err, cluster_err, event_printer, finish, load_catalog, non_empty,
    olm_missing, outcome_json, print_json,
};
use crate::exit::CmdError;
use crate::output::{GlobalArgs, OutputFormat, spinner};
use olmkit_cluster::install::Outcome;
use olmkit_cluster::olm::{Subscription, subscription_resource};
use olmkit_cluster::upgrade::{
    ChangeError, SwitchPlan, SwitchRequest, SwitchVerdict, switch_channel,
};
use serde_json::{Value, json};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

/// Arguments of `bundle-tool upgrade`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Channel to switch to.
    #[arg(long)]
    pub channel: String,
    /// Subscription to switch (default: the only one in the namespace).
    #[arg(long, value_name = "NAME")]
    pub subscription: Option<String>,
    /// Namespace (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Local catalog (default: ./catalog when it exists).
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Switch even when the catalog shows no upgrade path from the installed CSV.
    #[arg(long)]
    pub force: bool,
    /// Result format on stdout: the CSV table (text) or the plan and its outcome (json).
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

fn confirm(yes: bool) -> impl FnMut(&SwitchPlan) -> bool {
    move |_plan| {
        if yes {
            return true;
        }
        if !std::io::stdin().is_terminal() {
            return false;
        }
        eprint!("Switch the channel? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
    }
}

/// Runs the command.
pub async fn run(args: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    let cluster = args.cluster.connect().await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| cluster.default_namespace().to_string());
    // The package comes from the Subscription, so the catalog is loaded once it is known.
    cluster.check_olm_v0().await.map_err(olm_missing)?;
    let subs: Vec<Subscription> = cluster
        .list(&subscription_resource(), Some(&namespace))
        .await
        .map_err(cluster_err)?;
    let package = olmkit_cluster::upgrade::choose_subscription(
        &subs,
        args.subscription.as_deref(),
        &namespace,
    )
    .map_err(|e| change_err(ChangeError::Plan(e)))?
    .spec
    .name
    .clone();
    let catalog = load_catalog(args.catalog_dir.as_deref(), &package)?;
    let bar = spinner(g, "waiting for OLM");
    let mut printer = event_printer(&bar);
    let interactive = !args.yes && std::io::stdin().is_terminal();
    let mut confirm = confirm(args.yes);
    let result = switch_channel(
        &cluster,
        &SwitchRequest {
            namespace: &namespace,
            subscription: args.subscription.as_deref(),
            to_channel: &args.channel,
            catalog: catalog.as_ref(),
            force: args.force,
            settings: args.wait.settings(),
        },
        &mut |p| bar.suspend(|| confirm(p)),
        &mut printer,
    )
    .await;
    bar.finish_and_clear();
    let (plan, outcome) = result.map_err(change_err)?;
    if args.output == OutputFormat::Json {
        print_json(&switch_json(&plan, outcome.as_ref()))?;
    }
    match outcome {
        Some(o) => finish(o, "upgrade", &cluster, &namespace, args.output).await,
        None if interactive => Err(CmdError::msg("channel switch cancelled")),
        None => Err(
            CmdError::msg("not switching without confirmation (stdin is not a terminal)")
                .hint("pass --yes to switch without asking"),
        ),
    }
}

/// `upgrade -o json`: the Subscription, both channels, where the catalog said the switch
/// leads (`prediction`, `leadsTo`), whether the Subscription was changed and how it ended.
fn switch_json(plan: &SwitchPlan, outcome: Option<&Outcome>) -> Value {
    let sub = &plan.subscription;
    let (prediction, leads_to) = match &plan.verdict {
        SwitchVerdict::Upgrades { hops } => (
            json!({ "kind": "upgrades", "hops": hops }),
            hops.last().cloned(),
        ),
        SwitchVerdict::AtHead => (json!({ "kind": "atHead" }), Some(plan.installed.clone())),
        SwitchVerdict::FreshInstall { head } => (
            json!({ "kind": "freshInstall", "head": head }),
            head.clone(),
        ),
        SwitchVerdict::NoPath { reason } => (
            json!({ "kind": "noPath", "reason": reason }),
            Some(plan.installed.clone()),
        ),
        SwitchVerdict::Unknown => (json!({ "kind": "unknown" }), None),
    };
    json!({
        "subscription": {
            "namespace": sub.metadata.namespace,
            "name": sub.metadata.name,
            "package": sub.spec.name,
            "approval": sub.approval(),
        },
        "fromChannel": plan.from_channel,
        "toChannel": plan.to_channel,
        "installed": non_empty(&plan.installed),
        "prediction": prediction,
        "leadsTo": leads_to.as_deref().and_then(non_empty),
        "applied": outcome.is_some(),
        "outcome": outcome.map(outcome_json),
    })
}
