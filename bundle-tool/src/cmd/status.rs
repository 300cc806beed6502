//! `bundle-tool status`: Subscriptions, InstallPlans and CSVs like `kubectl get csv`, with
//! each Subscription's channel and next upgrade (from OLM, or from the local catalog), and the
//! namespace's OperatorGroups (several of them stop OLM without a word on the Subscription).

use crate::cmd::common::cluster::{ClusterArgs, cluster_err, olm_missing};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_cluster::catalog_view::CatalogView;
use olmkit_cluster::status::{UpgradeOracle, build_report, gather, render_json, render_text};
use std::path::PathBuf;

/// Arguments of `bundle-tool status`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Local catalog, to show the next upgrade of each Subscription (default: ./catalog when
    /// it exists).
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs the command.
pub async fn run(args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    let catalog = match &args.catalog_dir {
        Some(d) => Some(
            CatalogView::load(d)
                .user_hint("pass --catalog-dir with the catalog the image was built from")?,
        ),
        None if PathBuf::from("catalog").is_dir() => {
            CatalogView::load(&PathBuf::from("catalog")).ok()
        }
        None => None,
    };
    let cluster = args.cluster.connect().await?;
    cluster.check_olm_v0().await.map_err(olm_missing)?;
    let namespace = if args.all_namespaces {
        None
    } else {
        Some(
            args.namespace
                .clone()
                .unwrap_or_else(|| cluster.default_namespace().to_string()),
        )
    };
    let gathered = gather(&cluster, namespace.as_deref())
        .await
        .map_err(cluster_err)?;
    let report = build_report(
        namespace.as_deref(),
        gathered,
        catalog.as_ref().map(|c| c as &dyn UpgradeOracle),
    );
    let text = match args.output {
        OutputFormat::Text => render_text(&report),
        OutputFormat::Json => render_json(&report),
    };
    print_data(&text).unexpected_err()
}
