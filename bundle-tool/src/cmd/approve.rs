//! `bundle-tool approve`: approve a pending manual InstallPlan, after saying which CSV it
//! installs and where the channel leads next, then wait for that CSV.

use crate::cmd::install::{
    ClusterArgs, WaitArgs, cluster_err, event_printer, load_catalog, olm_missing, report_outcome,
};
use crate::cmd::upgrade::change_err;
use crate::exit::CmdError;
use crate::output::{GlobalArgs, spinner};
use olmkit_cluster::olm::{
    InstallPlan, Subscription, install_plan_resource, subscription_resource,
};
use olmkit_cluster::upgrade::approve;
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
    let (_plan, outcome) = result.map_err(change_err)?;
    report_outcome(outcome, "approval", &cluster, &namespace).await
}
