//! `bundle-tool approve`: approve a pending manual InstallPlan, after saying which CSV it
//! installs and where the channel leads next, then wait for that CSV. With `-o json`, stdout
//! gets that plan and how the approval ended instead of the CSV table.

use crate::cmd::common::cluster::{
    ClusterArgs, WaitArgs, change_err, cluster_err, event_printer, finish, load_catalog,
    olm_missing, outcome_json, print_json,
};
use crate::exit::CmdError;
use crate::output::{GlobalArgs, OutputFormat, spinner};
use olmkit_cluster::catalog_view::PackageView;
use olmkit_cluster::install::Outcome;
use olmkit_cluster::olm::{
    InstallPlan, Subscription, install_plan_resource, subscription_resource,
};
use olmkit_cluster::upgrade::{ApprovalPlan, approve};
use serde_json::{Value, json};
use std::path::PathBuf;

/// Arguments of `bundle-tool approve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// InstallPlan to approve (default: the only one waiting in the namespace).
    #[arg(long, value_name = "NAME")]
    pub install_plan: Option<String>,
    /// Namespace (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Local catalog (default: ./catalog when it exists).
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
    /// Result format on stdout: the CSV table (text) or the plan and its outcome (json).
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs the command.
pub async fn run(args: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    let cluster = args.cluster.connect().await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| cluster.default_namespace().to_string());
    cluster.check_olm_v0().await.map_err(olm_missing)?;
    // Find the package of the plan's Subscription to read the right part of the catalog.
    let ips: Vec<InstallPlan> = cluster
        .list(&install_plan_resource(), Some(&namespace))
        .await
        .map_err(cluster_err)?;
    let subs: Vec<Subscription> = cluster
        .list(&subscription_resource(), Some(&namespace))
        .await
        .map_err(cluster_err)?;
    let plan = olmkit_cluster::upgrade::plan_approval(
        &ips,
        &subs,
        args.install_plan.as_deref(),
        &namespace,
        None,
    )
    .map_err(|e| change_err(olmkit_cluster::upgrade::ChangeError::Plan(e)))?;
    let catalog = match &plan.subscription {
        Some(s) => load_catalog(args.catalog_dir.as_deref(), &s.spec.name)?,
        None => None,
    };
    let name = plan.install_plan.metadata.name.clone();
    let bar = spinner(g, "waiting for OLM");
    let mut printer = event_printer(&bar);
    let result = approve(
        &cluster,
        &namespace,
        Some(&name),
        catalog.as_ref(),
        args.wait.settings(),
        &mut printer,
    )
    .await;
    bar.finish_and_clear();
    let (plan, outcome) = result.map_err(change_err)?;
    if args.output == OutputFormat::Json {
        print_json(&approval_json(&plan, catalog.as_ref(), &outcome))?;
    }
    finish(outcome, "approval", &cluster, &namespace, args.output).await
}

/// `approve -o json`: the InstallPlan, its Subscription and channel, the CSV the approval
/// leads to (with its version and the hops after it when the local catalog knows them), and
/// how it ended. `applied` is always true: a refused approval is an error, not a document.
fn approval_json(plan: &ApprovalPlan, catalog: Option<&PackageView>, outcome: &Outcome) -> Value {
    let ip = &plan.install_plan;
    let sub = plan.subscription.as_ref();
    let cat = catalog.filter(|c| sub.is_some_and(|s| s.spec.name == c.name));
    let channel = sub.map(|s| match cat {
        Some(c) => c.effective_channel(&s.spec.channel).to_string(),
        None => s.spec.channel.clone(),
    });
    let next = match (cat, &channel) {
        (Some(c), Some(ch)) => c
            .upgrade_path(ch, &plan.target)
            .ok()
            .map(|p| p.steps.into_iter().map(|s| s.to).collect::<Vec<_>>()),
        _ => None,
    };
    json!({
        "installPlan": { "namespace": ip.metadata.namespace, "name": ip.metadata.name },
        "csvs": ip.spec.cluster_service_version_names,
        "subscription": sub.map(|s| json!({
            "namespace": s.metadata.namespace,
            "name": s.metadata.name,
            "package": s.spec.name,
        })),
        "channel": channel.filter(|c| !c.is_empty()),
        "installed": sub
            .map(|s| s.status.installed_csv.as_str())
            .filter(|c| !c.is_empty()),
        "leadsTo": (!plan.target.is_empty()).then_some(&plan.target),
        "version": cat.and_then(|c| c.version(&plan.target)),
        "next": next,
        "applied": true,
        "outcome": outcome_json(outcome),
    })
}
