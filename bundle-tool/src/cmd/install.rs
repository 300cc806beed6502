//! `bundle-tool install`: install an operator through OLM v0 (CatalogSource, OperatorGroup,
//! Subscription, then wait for the CSV) or OLM v1 (`--olm-v1`: ClusterCatalog, ClusterExtension
//! and the installer ServiceAccount with its RBAC), or print those manifests (`--print`).

use crate::cmd::common::cluster::{
    ClusterArgs, WaitArgs, cluster_err, event_printer, load_catalog, olm_missing, report_outcome,
};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, print_data, spinner};
use clap::ValueEnum;
use olmkit_cluster::catalog_view::PackageView;
use olmkit_cluster::install::{InstallError, InstallRequest, Outcome, install, plan_install};
use olmkit_cluster::install_mode::OperatorGroupMode;
use olmkit_cluster::manifests::{Approval, render_yaml};
use olmkit_cluster::names::parse_go_duration;
use olmkit_cluster::olmv1::live::install_v1;
use olmkit_cluster::olmv1::manifests::{V1Params, v1_manifests};
use olmkit_cluster::olmv1::resolve::{bundle_roots, choose_bundle, find_bundle_dir};
use olmkit_cluster::olmv1::support::check_olmv1_support;
use olmkit_cluster::olmv1::{BundleFacts, ReadBundleFactsError};
use std::path::{Path, PathBuf};

/// InstallPlan approval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ApprovalArg {
    /// OLM installs and upgrades without asking.
    #[default]
    #[value(name = "Automatic", alias = "automatic")]
    Automatic,
    /// Every InstallPlan waits for `bundle-tool approve`.
    #[value(name = "Manual", alias = "manual")]
    Manual,
}

/// Whether the install includes an OperatorGroup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OperatorGroupModeArg {
    /// Applying: reuse the namespace's OperatorGroup when it fits, create one when there is
    /// none, refuse when there are several. --print: none for `operators` and
    /// `openshift-operators`, which already have `global-operators` on standard OLM
    /// installations; one for any other namespace.
    #[default]
    Auto,
    /// --print: include an OperatorGroup even for `operators`/`openshift-operators` (a cluster
    /// where it does not exist). Applying: as auto.
    Create,
    /// Never create an OperatorGroup: the namespace must already have one that fits.
    Skip,
}

/// `grpcPodConfig.securityContextConfig` of the CatalogSource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SecurityContextArg {
    /// Pod security "restricted" compatible (the catalog image must run as non-root).
    Restricted,
    /// OLM's legacy pod settings.
    Legacy,
}

/// Arguments of `bundle-tool install`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Catalog image OLM serves the package from (tag or digest).
    #[arg(long, value_name = "REF")]
    pub catalog_image: String,
    /// Package to install.
    #[arg(long)]
    pub package: String,
    /// Channel to subscribe to (default: the package's default channel in --catalog-dir).
    #[arg(long)]
    pub channel: Option<String>,
    /// Install namespace (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// InstallPlan approval of the Subscription.
    #[arg(long, value_enum, default_value_t = ApprovalArg::Automatic)]
    pub approval: ApprovalArg,
    /// First CSV to install (OLM then upgrades along the channel).
    #[arg(long, value_name = "CSV")]
    pub starting_csv: Option<String>,
    /// Namespaces the operator watches (default: chosen from the CSV's install modes).
    #[arg(long, value_delimiter = ',', value_name = "NS,...")]
    pub target_namespaces: Option<Vec<String>>,
    /// Local catalog the image was built from (for channels, install modes and upgrade paths;
    /// default: ./catalog when it exists).
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
    /// Write the manifests to stdout instead of applying them (for kubectl apply -f).
    #[arg(long)]
    pub print: bool,
    /// Install through OLM v1 (ClusterCatalog + ClusterExtension) instead of OLM v0.
    #[arg(long)]
    pub olm_v1: bool,
    /// Bundle directory of the version to install (OLM v1: to derive the installer RBAC and
    /// check OLM v1 support when the catalog has no olm.bundle.object properties).
    #[arg(long, value_name = "DIR")]
    pub bundle_dir: Option<PathBuf>,
    /// OLM v1: version or range to install (e.g. 0.2.0 or ">=0.2.0, <1.0.0").
    #[arg(long, value_name = "RANGE")]
    pub version_range: Option<String>,
    /// OLM v1: go ahead even when the bundle has features OLM v1 rejects.
    #[arg(long)]
    pub force: bool,
    /// CatalogSource / ClusterCatalog name (default: <package>-catalog).
    #[arg(long, value_name = "NAME")]
    pub catalog_source: Option<String>,
    /// Subscription / ClusterExtension name (default: the package).
    #[arg(long, value_name = "NAME")]
    pub subscription: Option<String>,
    /// Name of the OperatorGroup to create (default: the package).
    #[arg(long, value_name = "NAME")]
    pub operator_group: Option<String>,
    /// Whether to create an OperatorGroup (OLM allows one per namespace).
    #[arg(long, value_enum, default_value_t = OperatorGroupModeArg::Auto, value_name = "MODE")]
    pub operator_group_mode: OperatorGroupModeArg,
    /// OLM v1: installer ServiceAccount name (default: <package>-installer).
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// CatalogSource display name.
    #[arg(long)]
    pub display_name: Option<String>,
    /// CatalogSource publisher.
    #[arg(long)]
    pub publisher: Option<String>,
    /// How often OLM polls the catalog image for a new digest (Go duration; ignored for
    /// digest references).
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub registry_poll: String,
    /// Pod security settings of the catalog pod.
    #[arg(long, value_enum)]
    pub security_context_config: Option<SecurityContextArg>,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

pub(crate) fn install_err(e: InstallError) -> CmdError {
    match e {
        InstallError::Plan(p) => {
            let hint = p.hint();
            let mut err = CmdError::user(p);
            if let Some(h) = hint {
                err = err.hint(h);
            }
            err
        }
        InstallError::OlmMissing(m) => olm_missing(m),
        InstallError::Cluster(c) => cluster_err(c),
    }
}

/// The namespace: `--namespace`, else the kubeconfig context's, else `default` (offline).
async fn namespace_for(args: &Args) -> String {
    if let Some(ns) = &args.namespace {
        return ns.clone();
    }
    match args.cluster.connect().await {
        Ok(c) => c.default_namespace().to_string(),
        Err(_) => "default".into(),
    }
}

fn request(args: &Args, namespace: &str) -> InstallRequest {
    InstallRequest {
        catalog_image: args.catalog_image.clone(),
        package: args.package.clone(),
        channel: args.channel.clone(),
        namespace: namespace.into(),
        approval: match args.approval {
            ApprovalArg::Automatic => Approval::Automatic,
            ApprovalArg::Manual => Approval::Manual,
        },
        starting_csv: args.starting_csv.clone(),
        target_namespaces: args.target_namespaces.clone(),
        catalog_source_name: args.catalog_source.clone(),
        subscription_name: args.subscription.clone(),
        operator_group_name: args.operator_group.clone(),
        display_name: args.display_name.clone(),
        publisher: args.publisher.clone(),
        poll_interval: args.registry_poll.clone(),
        security_context_config: args.security_context_config.map(|s| match s {
            SecurityContextArg::Restricted => "restricted".into(),
            SecurityContextArg::Legacy => "legacy".into(),
        }),
        operator_group_mode: match args.operator_group_mode {
            OperatorGroupModeArg::Auto => OperatorGroupMode::Auto,
            OperatorGroupModeArg::Create => OperatorGroupMode::Create,
            OperatorGroupModeArg::Skip => OperatorGroupMode::Skip,
        },
    }
}

/// Says which local catalog the predictions come from, and warns when it cannot be the
/// catalog image the manifests name: after a new release, `./catalog` is no longer what an older
/// image holds, and what it says about versions would be wrong for that image.
fn announce_catalog(cat: &PackageView, image: &str, channel: Option<&str>) {
    let path = shown_path(&cat.root);
    eprintln!(
        "note: local catalog {path}: read for channels, install modes and the version OLM will install (the image itself is not pulled)"
    );
    let Some(m) = cat.image_mismatch(image, channel.unwrap_or("")) else {
        return;
    };
    eprintln!(
        "warning: the local catalog {path} cannot be the catalog image {image}: its tag names {}, but {}; what follows about versions describes {path}, not the image",
        m.tag_version,
        m.reasons.join("; ")
    );
    let matching = match &m.matching_tag {
        Some(t) => format!(
            ", or use the image tag that matches {path} (--catalog-image {}:{t})",
            olmkit_core::image_ref::repository_as_written(image)
        ),
        None => String::new(),
    };
    eprintln!(
        "hint: pass --catalog-dir with the catalog as it was at {} (e.g. a `git worktree` of that release){matching}",
        m.tag
    );
}

/// `catalog` as `./catalog`, so that a relative path reads as one.
fn shown_path(p: &Path) -> String {
    if p.is_relative() && !p.starts_with(".") && !p.starts_with("..") {
        format!("./{}", p.display())
    } else {
        p.display().to_string()
    }
}

/// Runs the command.
pub async fn run(args: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    let catalog = load_catalog(args.catalog_dir.as_deref(), &args.package)?;
    if let Some(cat) = &catalog {
        announce_catalog(cat, &args.catalog_image, args.channel.as_deref());
    }
    let namespace = namespace_for(&args).await;
    if args.olm_v1 {
        return run_v1(&args, g, catalog.as_ref(), &namespace).await;
    }
    let req = request(&args, &namespace);
    if args.print {
        let plan = plan_install(&req, catalog.as_ref(), None)
            .map_err(|e| install_err(InstallError::Plan(e)))?;
        for n in &plan.notes {
            eprintln!("{n}");
        }
        if plan
            .objects
            .iter()
            .any(|o| o.get("kind").and_then(serde_json::Value::as_str) == Some("OperatorGroup"))
        {
            eprintln!(
                "note: OLM allows one OperatorGroup per namespace; drop the OperatorGroup below if {namespace} already has one that fits (or pass --operator-group-mode skip)"
            );
        }
        let yaml = render_yaml(&plan.objects).unexpected_err()?;
        return print_data(&yaml).unexpected_err();
    }
    let cluster = args.cluster.connect().await?;
    let bar = spinner(g, "waiting for OLM");
    let mut printer = event_printer(&bar);
    let result = install(
        &cluster,
        &req,
        catalog.as_ref(),
        args.wait.settings(),
        &mut printer,
    )
    .await;
    bar.finish_and_clear();
    let (_plan, outcome) = result.map_err(install_err)?;
    report_outcome(outcome, "install", &cluster, &namespace).await
}

/// The bundle OLM v1 will install, as OLM v1 sees it: `--bundle-dir`; else the local catalog's
/// choice (the highest version in the channel and range), from its `olm.bundle.object`
/// properties or, for a catalog that carries `olm.csv.metadata` only, from its released bundle
/// directory (`bundle/<package>/<version>/` beside the catalog, or under `./bundle`).
fn v1_bundle_facts(args: &Args, catalog: Option<&PackageView>) -> Result<BundleFacts, CmdError> {
    let cat = match (&args.bundle_dir, catalog) {
        (Some(dir), _) => {
            let b = olmkit_bundle::load_bundle_dir(dir).user_err()?;
            return BundleFacts::from_bundle_dir(&b).user_err();
        }
        (None, Some(cat)) => cat,
        (None, None) => {
            return Err(CmdError::msg(
                "--olm-v1 needs the bundle to derive the installer's RBAC: there is no local catalog to find it in",
            )
            .hint("pass --catalog-dir with the catalog the image was built from, or --bundle-dir with the bundle of the version to install"));
        }
    };
    let choice = choose_bundle(cat, args.channel.as_deref(), args.version_range.as_deref())
        .user_hint(
            "pass another --channel or --version-range (`bundle-tool graph` lists the versions)",
        )?;
    if let Some(c) = &choice.caveat {
        eprintln!("note: {c}");
    }
    eprintln!(
        "OLM v1 will install {} (version {}), the highest version {}",
        choice.bundle,
        choice.version,
        match (&args.channel, &args.version_range) {
            (Some(c), Some(r)) => format!("in channel {c} within {r:?}"),
            (Some(c), None) => format!("in channel {c}"),
            (None, Some(r)) => format!("of package {} within {r:?}", cat.name),
            (None, None) => format!("of package {}", cat.name),
        }
    );
    let bundle = cat
        .bundle(&choice.bundle)
        .ok_or_else(|| CmdError::msg(format!("bundle {} is not in the catalog", choice.bundle)))?;
    match BundleFacts::from_catalog_bundle(bundle, None) {
        Err(ReadBundleFactsError::NoObjects(_)) => {}
        other => {
            return other.user_hint(
                "pass --bundle-dir with the bundle directory of the version to install",
            );
        }
    }
    // The catalog names the bundle but does not carry its manifests: use the released bundle.
    let roots = bundle_roots(&cat.root);
    let found = find_bundle_dir(&roots, &cat.name, &choice.bundle, &choice.version)
        .user_hint("pass --bundle-dir with the bundle directory of the version to install")?;
    let Some(b) = found else {
        let looked: Vec<String> = roots
            .iter()
            .map(|r| format!("{}/", r.join(&cat.name).display()))
            .collect();
        return Err(CmdError::msg(format!(
            "{}: the catalog carries olm.csv.metadata, not the manifests of {} that OLM v1 needs for the installer RBAC, and no bundle directory of it was found under {}",
            shown_path(&cat.root),
            choice.bundle,
            looked.join(" or ")
        ))
        .hint(format!(
            "pass --bundle-dir with the bundle directory of {} (version {})",
            choice.bundle, choice.version
        )));
    };
    eprintln!(
        "note: {} carries olm.csv.metadata, not the manifests of {}: read them from {}",
        shown_path(&cat.root),
        choice.bundle,
        b.root.display()
    );
    BundleFacts::from_bundle_dir(&b).user_err()
}

async fn run_v1(
    args: &Args,
    g: &GlobalArgs,
    catalog: Option<&PackageView>,
    namespace: &str,
) -> Result<(), CmdError> {
    let facts = v1_bundle_facts(args, catalog)?;
    let report = check_olmv1_support(&facts);
    if !report.findings.is_empty() {
        eprint!("{}", report.render_text());
    }
    if report.has_errors() && !args.force {
        return Err(CmdError::msg(format!(
            "OLM v1 cannot install {} as it is (see the errors above)",
            facts.csv_name()
        ))
        .hint(
            "fix the bundle, install with OLM v0 (without --olm-v1), or pass --force to try anyway",
        ));
    }
    let name = args
        .subscription
        .clone()
        .unwrap_or_else(|| args.package.clone());
    let params = V1Params {
        extension_name: name.clone(),
        package: args.package.clone(),
        namespace: namespace.into(),
        catalog_name: args
            .catalog_source
            .clone()
            .unwrap_or_else(|| format!("{}-catalog", args.package)),
        catalog_image: args.catalog_image.clone(),
        poll_interval_minutes: Some(
            parse_go_duration("--registry-poll", &args.registry_poll)
                .user_err()?
                .as_secs()
                .div_ceil(60)
                .max(1),
        ),
        channel: args.channel.clone(),
        version: args.version_range.clone(),
        service_account: args
            .service_account
            .clone()
            .unwrap_or_else(|| format!("{name}-installer")),
    };
    olmkit_cluster::names::check_dns1123_label("--namespace", &params.namespace).user_err()?;
    for (what, v) in [
        ("--subscription", params.extension_name.as_str()),
        ("--catalog-source", params.catalog_name.as_str()),
        ("--service-account", params.service_account.as_str()),
        ("--package", params.package.as_str()),
    ] {
        olmkit_cluster::names::check_dns1123_subdomain(what, v).user_err()?;
    }
    olmkit_cluster::names::check_image_ref("--catalog-image", &params.catalog_image).user_err()?;
    let objects = v1_manifests(&params, &facts);
    eprintln!(
        "installer ServiceAccount {namespace}/{}: RBAC derived from {} ({} cluster rule(s), {} namespace rule(s))",
        params.service_account,
        facts.origin,
        objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .and_then(|o| o["rules"].as_array().map(Vec::len))
            .unwrap_or(0),
        objects
            .iter()
            .find(|o| o["kind"] == "Role")
            .and_then(|o| o["rules"].as_array().map(Vec::len))
            .unwrap_or(0),
    );
    if args.print {
        let yaml = render_yaml(&objects).unexpected_err()?;
        return print_data(&yaml).unexpected_err();
    }
    let cluster = args.cluster.connect().await?;
    let bar = spinner(g, "waiting for OLM v1");
    let mut printer = event_printer(&bar);
    let result = install_v1(&cluster, &objects, args.wait.settings(), &mut printer).await;
    bar.finish_and_clear();
    match result.map_err(install_err)? {
        Outcome::Installed { csv } => {
            eprintln!("install complete: ClusterExtension {name} installed bundle {csv}");
            print_data(&format!("{name}\t{csv}\n")).unexpected_err()
        }
        other => report_outcome(other, "install", &cluster, namespace).await,
    }
}
