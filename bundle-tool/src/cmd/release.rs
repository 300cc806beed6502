//! `bundle-tool release`: one step from an operator's manifests to a released version, all or
//! nothing.
//!
//! A release generates the bundle for the version (with `replaces` set to the head of the
//! first target channel), validates it (with CRD upgrade safety against the bundle it
//! replaces), plans its catalog entries (one per target channel, each replacing that channel's
//! head, so no channel gets a second head), validates the package's whole graph, builds the
//! operator, bundle and catalog images into an OCI layout and optionally pushes them, and only
//! then writes `bundle/<package>/<version>/` and the catalog, in one changeset. Any failure
//! before that last step leaves `bundle/` and `catalog/` as they were.
//!
//! Released versions are immutable: re-running a finished release regenerates the same bytes
//! (it reuses the recorded `createdAt`, edges and bundle image) and changes nothing but the
//! images in the layout; releasing an existing version with other content is refused.

use crate::cmd::generate::{InputArgs, load_inputs};
use crate::cmd::image::{
    RegistryArgs, build_err, build_time, check_tag_free, existing_tag, human_size, layout_err,
    push_image,
};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data, spinner};
use olmkit_bundle::generate::{GenerateInputs, GenerateOptions, GeneratedBundle, generate_bundle};
use olmkit_catalog::declcfg::DeclarativeConfig;
use olmkit_catalog::layout::{CatalogDir, stage_package_update};
use olmkit_catalog::release::{
    Change, Outcome, ReleasePlan, ReleaseRequest, SkipRangeMode, csv_edges, plan_release,
    skip_range_for,
};
use olmkit_catalog::render::{RenderOptions, render_bundle_release};
use olmkit_core::fsio::{Changeset, read_tree};
use olmkit_core::{Report, epoch};
use olmkit_image::build::Image;
use olmkit_image::images::{
    BundleImageInputs, CatalogImageInputs, CatalogServer, HealthProbe, OciLabels,
    OperatorImageInputs, build_bundle_image, build_catalog_image, build_operator_image,
};
use olmkit_image::layout::write_to_layout;
use semver::Version;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Arguments of `bundle-tool release`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Version to release (semver, e.g. 0.4.0; a leading `v` is dropped).
    #[arg(long)]
    pub version: String,
    /// Channel to release into (repeatable) [default: the package's default channel, or
    /// `alpha` for a new package].
    #[arg(long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Make this the package's default channel (one of the target channels or an existing one).
    #[arg(long, value_name = "CHANNEL")]
    pub default_channel: Option<String>,
    /// Give the new entries a skipRange: `--skip-range` alone means `<VERSION` (every older
    /// version may upgrade straight to this one); `--skip-range '>=0.2.0 <0.4.0'` sets one.
    #[arg(long, value_name = "RANGE", num_args = 0..=1, default_missing_value = "")]
    pub skip_range: Option<String>,
    /// Print what would change and change nothing (no files, no images).
    #[arg(long)]
    pub plan: bool,
    /// Package name [default: the base CSV's name without .vX.Y.Z].
    #[arg(long)]
    pub package: Option<String>,
    /// The File-Based Catalog directory (created by the first release).
    #[arg(long, default_value = "catalog", value_name = "DIR")]
    pub catalog_dir: PathBuf,
    /// Where released bundles live, one directory per version: DIR/<package>/<version>/.
    #[arg(long, default_value = "bundle", value_name = "DIR")]
    pub bundle_root: PathBuf,
    /// Where the operator's manifests come from.
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Operator image repository, e.g. quay.io/example/memcached-operator: the containers that
    /// run the manifests' manager image are set to REPO:VERSION [default: that image's own
    /// repository].
    #[arg(long, value_name = "REPO")]
    pub operator_repo: Option<String>,
    /// Bundle image repository; the bundle is REPO:vVERSION [default: <operator-repo>-bundle].
    #[arg(long, value_name = "REPO")]
    pub bundle_repo: Option<String>,
    /// Catalog image repository; the catalog is REPO:vVERSION [default: <operator-repo>-catalog].
    #[arg(long, value_name = "REPO")]
    pub catalog_repo: Option<String>,
    /// Build no images (bundle and catalog only).
    #[arg(long, conflicts_with_all = ["push", "use_image_digests", "operator_binary", "catalog_server"])]
    pub no_images: bool,
    /// Statically linked operator binary for the operator image (hack/build-static.sh builds
    /// one); without it, no operator image is built.
    #[arg(long, value_name = "FILE")]
    pub operator_binary: Option<PathBuf>,
    /// Statically linked catalog server for the catalog image's entrypoint; without it, the
    /// catalog image carries the catalog and its label only.
    #[arg(long, value_name = "FILE")]
    pub catalog_server: Option<PathBuf>,
    /// OCI image layout the images are written into.
    #[arg(long, default_value = "images", value_name = "DIR")]
    pub layout: PathBuf,
    /// Also push the images to their registries. A tag that already names other content is
    /// refused (before anything is pushed) unless --force.
    #[arg(long)]
    pub push: bool,
    /// With --push: overwrite tags that already name other content in the registry.
    #[arg(long, requires = "push")]
    pub force: bool,
    /// Pin the operator image in the CSV (deployment, containerImage, relatedImages) and the
    /// bundle image in the catalog by digest instead of by tag.
    #[arg(long, requires = "operator_binary")]
    pub use_image_digests: bool,
    /// Registry options (with --push).
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Report format on stdout.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// One image of the release.
struct BuiltImage {
    kind: &'static str,
    /// Tag reference (the layout name and the push target).
    reference: String,
    image: Image,
    pushed: bool,
}

/// Everything decided before anything is written.
struct Prepared {
    package: String,
    version: Version,
    csv_name: String,
    bundle_dir: PathBuf,
    generated: GeneratedBundle,
    /// The bundle directory already holds exactly these files.
    bundle_unchanged: bool,
    plan: ReleasePlan,
    catalog: CatalogDir,
    report: Report,
    notes: Vec<String>,
    images: Vec<BuiltImage>,
    /// Why the catalog image was not rebuilt (a re-release after later versions).
    skipped_catalog: Option<String>,
    /// Kept alive until the images are built from them.
    _staging: Vec<tempfile::TempDir>,
}

/// Runs the command.
pub async fn run(args: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    tokio::task::block_in_place(|| recover_interrupted(&args))?;
    let mut p = tokio::task::block_in_place(|| prepare(&args, g))?;
    if args.plan {
        return report(&args, &p, true);
    }
    if !p.images.is_empty() {
        let names: Vec<(&Image, &str)> = p
            .images
            .iter()
            .map(|i| (&i.image, i.reference.as_str()))
            .collect();
        tokio::task::block_in_place(|| write_to_layout(&args.layout, &names))
            .map_err(layout_err)?;
    }
    if args.push {
        // Every tag is checked before the first push, so a refusal moves no tag at all.
        if !args.force {
            for i in &p.images {
                check_tag_free(&i.image, &i.reference, &args.registry, g)
                    .await
                    .map_err(|e| {
                        e.hint(
                            "nothing was pushed and nothing under bundle/ or catalog/ was changed",
                        )
                    })?;
            }
        }
        for i in &mut p.images {
            push_image(&i.image, &i.reference, &args.registry, existing_tag(args.force), g)
                .await
                .map_err(|e| {
                    e.hint("nothing under bundle/ or catalog/ was changed; re-run the release once the registry works")
                })?;
            i.pushed = true;
        }
    }
    tokio::task::block_in_place(|| commit(&args, &p))?;
    report(&args, &p, false)
}

fn prepare(args: &Args, g: &GlobalArgs) -> Result<Prepared, CmdError> {
    let version = Version::parse(args.version.trim_start_matches('v')).map_err(|e| {
        CmdError::msg(format!(
            "--version {:?} is not a semver version: {e}",
            args.version
        ))
        .hint("versions look like 0.4.0 or 1.0.0-rc.1")
    })?;
    olmkit_bundle::schemas::prewarm();
    let catalog = CatalogDir::open(&args.catalog_dir).map_err(|e| {
        CmdError::user(e).hint(format!(
            "fix the catalog first (bundle-tool catalog validate {})",
            args.catalog_dir.display()
        ))
    })?;
    require_manifests_here(&args.inputs)?;
    let mut inputs = load_inputs(&args.inputs, g)?;
    let mut notes = Vec::new();
    let images_on = !args.no_images && !args.plan;

    // The package, from a first generation with the manifests as they are.
    let probe_options = options(args, &version, String::new(), None, Vec::new(), None, None)?;
    let package = generate(&inputs, &probe_options)?.package;
    let channels = target_channels(args, &catalog.config, &package, &version);
    let bundle_dir = args.bundle_root.join(&package).join(version.to_string());

    // Edges of the CSV: the recorded ones for a released version, else the first channel's head.
    let recorded = catalog.config.bundles.iter().find(|b| {
        b.package == package
            && olmkit_catalog::validate::bundle_version(b)
                .is_some_and(|v| v.cmp_precedence(&version).is_eq())
    });
    if recorded.is_none() {
        require_above_heads(&catalog.config, &package, &channels, &version)?;
    }
    let skip_mode = skip_mode(args);
    let (replaces, skips, skip_range) =
        csv_edge_options(&catalog.config, &package, &channels, &version, &skip_mode)?;

    // createdAt: a released bundle keeps its own, so that re-running its release is a no-op.
    let existing = if bundle_dir.exists() {
        Some(olmkit_bundle::load_bundle_dir(&bundle_dir).map_err(|e| {
            CmdError::user(e).hint(format!(
                "{} exists but is not a bundle; move it away",
                bundle_dir.display()
            ))
        })?)
    } else {
        None
    };
    let created_at = created_at(existing.as_ref())?;
    // A released version's images are rebuilt with the time of its release (its CSV's
    // createdAt, which the release took from SOURCE_DATE_EPOCH): a re-run then reproduces the
    // published digests instead of making every image differ by its build time alone.
    let image_time = match existing
        .as_ref()
        .and_then(|_| created_at.parse::<jiff::Timestamp>().ok())
    {
        Some(t) => t,
        None => build_time(None)?,
    };

    // Image names. The manifests' manager image says which containers run the operator; the
    // release points them at REPO:VERSION (like `kustomize edit set image controller=...`).
    let current_repo = manager_image(&inputs).map(|i| repository(&i));
    let operator_repo = match &args.operator_repo {
        Some(r) => Some(repository(r)),
        None => current_repo.clone(),
    };
    let repo_for = |explicit: &Option<String>, suffix: &str| -> Option<String> {
        explicit
            .as_ref()
            .map(|r| repository(r))
            .or_else(|| operator_repo.as_ref().map(|o| format!("{o}{suffix}")))
    };
    let bundle_repo = repo_for(&args.bundle_repo, "-bundle");
    let catalog_repo = repo_for(&args.catalog_repo, "-catalog");
    let mut images = Vec::new();
    let mut staging = Vec::new();

    // The operator image first: with --use-image-digests its digest goes into the CSV.
    let mut operator_ref = operator_repo.as_ref().map(|r| format!("{r}:{version}"));
    if images_on && let Some(bin) = &args.operator_binary {
        let Some(reference) = operator_ref.clone() else {
            return Err(no_repo("operator"));
        };
        let mut oi = OperatorImageInputs::new(bin, image_time);
        oi.oci = OciLabels {
            title: Some(package.clone()),
            version: Some(version.to_string()),
            ..Default::default()
        };
        let sp = spinner(g, "building the operator image");
        let image = build_operator_image(&oi).map_err(build_err);
        sp.finish_and_clear();
        let image = image?;
        if args.use_image_digests
            && let Some(r) = &operator_repo
        {
            operator_ref = Some(format!("{r}@{}", image.digest()));
        }
        images.push(BuiltImage {
            kind: "operator",
            reference,
            image,
            pushed: false,
        });
    }
    match (&current_repo, &operator_ref) {
        (Some(repo), Some(new_ref)) => {
            set_operator_image(&mut inputs, repo, new_ref);
        }
        (None, _) if args.operator_repo.is_some() => {
            return Err(CmdError::msg(
                "--operator-repo: the manifests have no Deployment whose image could be set",
            )
            .hint("the operator's Deployment (config/manager) must be among the manifests"));
        }
        _ => {}
    }

    // The bundle.
    let default_channel = args.default_channel.clone().or_else(|| {
        catalog
            .config
            .packages
            .iter()
            .find(|p| p.name == package)
            .map(|p| p.default_channel.clone())
            .filter(|d| channels.contains(d))
    });
    let bundle_default = default_channel.clone().filter(|d| channels.contains(d));
    let opts = options(
        args,
        &version,
        created_at,
        replaces.clone(),
        skips,
        skip_range,
        bundle_default,
    )?;
    let mut opts = opts;
    opts.channels = channels.clone();
    let generated = generate(&inputs, &opts)?;
    notes.extend(generated.notes.iter().cloned());
    let loaded = generated.to_bundle(&bundle_dir).unexpected_err()?;

    // Validation, with upgrade safety against the bundle this one replaces.
    let previous = match &replaces {
        Some(r) => {
            let prev = find_bundle(&args.bundle_root.join(&package), r).map_err(|e| {
                CmdError::user(anyhow::anyhow!("cannot read the released bundle {r} replaces: {e}")).hint(
                    "released bundles are read for CRD upgrade safety; fix or restore the directory named above",
                )
            })?;
            if prev.is_none() {
                notes.push(format!(
                    "no bundle directory for {r} under {}: CRD upgrade safety against it was not checked",
                    args.bundle_root.join(&package).display()
                ));
            }
            prev
        }
        None => None,
    };
    let report = validate_release(&loaded, previous.as_ref(), &bundle_dir);
    if report.has_errors() {
        eprint!("{}", report.render_text());
        eprintln!(
            "error: the bundle for {} does not validate; nothing was released",
            generated.csv_name
        );
        eprintln!("hint: fix the inputs above (config/, the base CSV), then release again");
        return Err(CmdError::Reported);
    }

    // A released version is never overwritten.
    let bundle_unchanged = match &existing {
        None => false,
        Some(_) => {
            let on_disk = read_tree(&bundle_dir).unexpected_err()?;
            if on_disk != generated.files {
                return Err(CmdError::msg(format!(
                    "{} already holds a release of {version} with different content ({}); released versions are never overwritten",
                    bundle_dir.display(),
                    tree_diff(&on_disk, &generated.files)
                ))
                .hint("release a new version instead (e.g. bump the patch number)")
                .hint(format!(
                    "to add {version} to another channel, use `bundle-tool promote {version} --to CHANNEL`"
                ))
                .hint(format!(
                    "if {} was never published, delete it (and its catalog entries) and release again",
                    bundle_dir.display()
                )));
            }
            true
        }
    };

    // The bundle image (from a staged copy of the bundle), then the catalog blob that names it.
    let mut bundle_image_ref = bundle_repo.as_ref().map(|r| format!("{r}:v{version}"));
    if images_on {
        let Some(reference) = bundle_image_ref.clone() else {
            return Err(no_repo("bundle"));
        };
        let dir = tempfile::tempdir().unexpected_err()?;
        write_files(dir.path(), &generated.files)?;
        let sp = spinner(g, "building the bundle image");
        let built = build_bundle_image(&BundleImageInputs::new(dir.path(), image_time));
        sp.finish_and_clear();
        let built = built.map_err(build_err)?;
        notes.extend(built.dockerfile_drift.iter().cloned());
        if args.use_image_digests
            && let Some(r) = &bundle_repo
        {
            bundle_image_ref = Some(format!("{r}@{}", built.image.digest()));
        }
        images.push(BuiltImage {
            kind: "bundle",
            reference,
            image: built.image,
            pushed: false,
        });
        staging.push(dir);
    }
    let image_in_catalog = match recorded {
        // A released version keeps the bundle image its catalog entry names.
        Some(b) => b.image.clone(),
        None => bundle_image_ref.ok_or_else(|| no_repo("bundle"))?,
    };
    let blob =
        render_bundle_release(&loaded, &image_in_catalog, &RenderOptions::default()).user_err()?;
    let plan = plan_release(
        &catalog.config,
        &ReleaseRequest {
            bundle: blob,
            channels: channels.clone(),
            default_channel,
            skip_range: skip_mode,
        },
    )
    .map_err(|e| {
        CmdError::user(e)
            .hint("nothing was written; `bundle-tool graph` shows the channels as they are")
    })?;
    // The CSV's replaces must be the edge the catalog gets in the first target channel.
    let first_edge = plan.changes.iter().find_map(|c| match c {
        Change::AddEntry { channel, entry, .. } if Some(channel) == channels.first() => {
            Some(entry.replaces.clone())
        }
        Change::AddChannel(ch) if Some(&ch.name) == channels.first() => {
            ch.entries.first().map(|e| e.replaces.clone())
        }
        _ => None,
    });
    if let Some(edge) = first_edge
        && edge != replaces.clone().unwrap_or_default()
    {
        return Err(CmdError::unexpected(anyhow::anyhow!(
            "the CSV replaces {:?} but the catalog entry would replace {edge:?}",
            replaces
        )));
    }

    // The catalog image, from a staged copy of the catalog with the release applied; not for
    // a re-release once later versions are in the catalog (see `later_versions`).
    let later = match recorded {
        Some(_) => later_versions(&catalog.config, &package, &version),
        None => Vec::new(),
    };
    let mut skipped = None;
    if images_on && !later.is_empty() {
        let Some(repo) = &catalog_repo else {
            return Err(no_repo("catalog"));
        };
        skipped = Some(skip_catalog_image(args, repo, &version, &later));
    } else if images_on {
        let Some(repo) = &catalog_repo else {
            return Err(no_repo("catalog"));
        };
        let (built, dir) = catalog_image(args, &catalog, &plan, &package, &version, image_time, g)?;
        if args.catalog_server.is_none() {
            notes.push(
                "no --catalog-server: the catalog image carries the catalog and its label but no server"
                    .into(),
            );
        }
        images.push(BuiltImage {
            kind: "catalog",
            reference: format!("{repo}:v{version}"),
            image: built,
            pushed: false,
        });
        staging.push(dir);
    }
    if !args.no_images && args.operator_binary.is_none() && !args.plan {
        notes.push("no --operator-binary: the operator image was not built".into());
    }

    Ok(Prepared {
        package,
        version,
        csv_name: generated.csv_name.clone(),
        bundle_dir,
        generated,
        bundle_unchanged,
        plan,
        catalog,
        report,
        notes,
        images,
        skipped_catalog: skipped,
        _staging: staging,
    })
}

/// Refuses a release that reads stdin or nothing by accident: outside a project (no
/// `config/manifests` and no --kustomize/--manifests), `generate`'s fallback would read stdin
/// and report `<stdin>: no manifests`, which says nothing about the real mistake.
fn require_manifests_here(inputs: &InputArgs) -> Result<(), CmdError> {
    if inputs.manifests.is_some()
        || inputs.kustomize.is_some()
        || Path::new("config/manifests").is_dir()
    {
        return Ok(());
    }
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".into());
    Err(CmdError::msg(format!(
        "no config/manifests here ({cwd}): release reads the operator's manifests from config/manifests (the kubebuilder layout)"
    ))
    .hint("run it from the project root (the directory holding config/), or pass --kustomize DIR, or --manifests DIR|FILE|- (- for stdin)"))
}

/// A new version must be above the head of every target channel that has one: the release
/// makes it the new head (no channel gets a second one). Refused here, before a bundle is
/// generated, because later the refusal would surface as a validation error about config/.
fn require_above_heads(
    cfg: &DeclarativeConfig,
    package: &str,
    channels: &[String],
    version: &Version,
) -> Result<(), CmdError> {
    let Some(graph) = olmkit_catalog::graph::package_graphs(cfg)
        .into_iter()
        .find(|g| g.package == package)
    else {
        return Ok(());
    };
    for channel in channels {
        let Some(head) = graph.channel(channel).and_then(|c| c.head()) else {
            continue;
        };
        let Some(head_version) = cfg
            .bundles
            .iter()
            .find(|b| b.package == package && b.name == head)
            .and_then(olmkit_catalog::validate::bundle_version)
        else {
            continue;
        };
        if version.cmp_precedence(&head_version).is_gt() {
            continue;
        }
        let next = Version::new(
            head_version.major,
            head_version.minor,
            head_version.patch + 1,
        );
        return Err(CmdError::msg(format!(
            "--version {version} is not above the head of channel {channel}, {head} ({head_version}): a release adds the new head of its channels"
        ))
        .hint(format!(
            "release a version above {head_version} (e.g. --version {next})"
        ))
        .hint(format!(
            "to add an already released version to channel {channel}, use `bundle-tool promote VERSION --to {channel}`"
        )));
    }
    Ok(())
}

/// Versions of `package` in the catalog above `version`. Re-running the release of `version`
/// once these exist cannot rebuild its catalog image: today's catalog holds them, the image
/// released with `version` did not, and what else changed since (default channel, promotions,
/// new channels) is not recorded, so the old catalog cannot be reconstructed exactly.
fn later_versions(cfg: &DeclarativeConfig, package: &str, version: &Version) -> Vec<Version> {
    let mut out: Vec<Version> = cfg
        .bundles
        .iter()
        .filter(|b| b.package == package)
        .filter_map(olmkit_catalog::validate::bundle_version)
        .filter(|v| v.cmp_precedence(version).is_gt())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Why the catalog image of a re-release was not rebuilt, for the report; warns on stderr.
fn skip_catalog_image(args: &Args, repo: &str, version: &Version, later: &[Version]) -> String {
    let reference = format!("{repo}:v{version}");
    let list: Vec<String> = later.iter().map(Version::to_string).collect();
    let kept = olmkit_image::layout::list_layout(&args.layout)
        .ok()
        .and_then(|entries| {
            entries
                .into_iter()
                .find(|e| e.ref_name.as_deref() == Some(reference.as_str()))
        })
        .map(|e| {
            format!(
                " ({} keeps the one it has, {})",
                args.layout.display(),
                e.digest
            )
        })
        .unwrap_or_default();
    eprintln!(
        "warning: not rebuilding the catalog image {reference}: {} now also holds {} released after {version}, which that image never contained; the image stays as it was{kept}{}",
        args.catalog_dir.display(),
        list.join(", "),
        if args.push { ", and is not pushed" } else { "" }
    );
    eprintln!(
        "hint: to rebuild it, run this release from a checkout of the {version} release (e.g. `git worktree add ../v{version} <its commit>`), where catalog/ is as it was"
    );
    format!(
        "{reference} not rebuilt: {} holds later releases ({})",
        args.catalog_dir.display(),
        list.join(", ")
    )
}

/// The CSV's upgrade edges: `spec.replaces`, `spec.skips`, the `olm.skipRange` annotation.
type CsvEdges = (Option<String>, Vec<String>, Option<String>);

/// `--skip-range` as the planner's mode.
fn skip_mode(args: &Args) -> SkipRangeMode {
    match args.skip_range.as_deref() {
        None => SkipRangeMode::None,
        Some("") => SkipRangeMode::BelowNew,
        Some(r) => SkipRangeMode::Explicit(r.to_string()),
    }
}

/// The CSV's `replaces`, `skips` and `olm.skipRange`: the recorded ones for a released version
/// (so a re-run regenerates the same CSV), else the first target channel's edge and the
/// requested skipRange.
fn csv_edge_options(
    cfg: &DeclarativeConfig,
    package: &str,
    channels: &[String],
    version: &Version,
    mode: &SkipRangeMode,
) -> Result<CsvEdges, CmdError> {
    let released = cfg.bundles.iter().any(|b| {
        b.package == package
            && olmkit_catalog::validate::bundle_version(b)
                .is_some_and(|v| v.cmp_precedence(version).is_eq())
    });
    let edges = csv_edges(cfg, package, channels, version).user_err()?;
    let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
    Ok(match (released, edges) {
        (true, Some(e)) => (non_empty(&e.replaces), e.skips, non_empty(&e.skip_range)),
        (true, None) => (None, Vec::new(), None),
        (false, e) => (
            e.map(|e| e.replaces),
            Vec::new(),
            non_empty(&skip_range_for(mode, version).user_err()?),
        ),
    })
}

/// `createdAt`: a released bundle keeps its own, so that re-running its release is a no-op;
/// a new one gets SOURCE_DATE_EPOCH (or now).
fn created_at(existing: Option<&olmkit_bundle::Bundle>) -> Result<String, CmdError> {
    let recorded = existing
        .and_then(|b| b.csv())
        .and_then(|c| c.object.pointer("/metadata/annotations/createdAt"))
        .and_then(Value::as_str);
    match recorded {
        Some(c) => Ok(c.to_string()),
        None => epoch::build_time()
            .map(epoch::rfc3339)
            .user_hint("unset SOURCE_DATE_EPOCH or set it to seconds since 1970"),
    }
}

/// The default suite, upgrade safety against `previous`, and what OLM v1 could not install as
/// it is (warnings here: the release targets OLM v0 catalogs too; `validate --select-optional
/// suite=olm-v1` reports them with their severity). Files are named under `bundle_dir`.
fn validate_release(
    loaded: &olmkit_bundle::Bundle,
    previous: Option<&olmkit_bundle::Bundle>,
    bundle_dir: &Path,
) -> Report {
    let mut report = olmkit_bundle::validate_bundle(
        loaded,
        previous,
        &olmkit_bundle::ValidateOptions::default(),
    );
    report.extend(
        crate::cmd::validate::olm_v1_findings(loaded)
            .into_iter()
            .map(|mut f| {
                f.severity = olmkit_core::findings::Severity::Warning;
                f.message = format!("OLM v1: {}", f.message);
                f
            }),
    );
    for f in &mut report.findings {
        f.file = f
            .file
            .as_ref()
            .map(|p| bundle_dir.join(p).display().to_string());
    }
    report
}

/// Builds the catalog image from a staged copy of the catalog with the plan applied; returns
/// the image and the staging directory (kept until the image is written).
fn catalog_image(
    args: &Args,
    catalog: &CatalogDir,
    plan: &ReleasePlan,
    package: &str,
    version: &Version,
    image_time: jiff::Timestamp,
    g: &GlobalArgs,
) -> Result<(Image, tempfile::TempDir), CmdError> {
    let dir = tempfile::tempdir().unexpected_err()?;
    let configs = dir.path().join("configs");
    copy_tree(&args.catalog_dir, &configs)?;
    if plan.outcome == Outcome::Changed {
        let staged = CatalogDir {
            dir: configs.clone(),
            config: catalog.config.clone(),
            origins: catalog.origins.clone(),
        };
        let mut cs = Changeset::new(&configs).unexpected_err()?;
        stage_package_update(
            &mut cs,
            Path::new(""),
            &staged,
            package,
            &plan.changes,
            catalog.format_of(package),
        )
        .unexpected_err()?;
        cs.commit().unexpected_err()?;
    }
    let mut ci = CatalogImageInputs::new(&configs, image_time);
    ci.oci = OciLabels {
        title: Some(format!("{package} catalog")),
        version: Some(version.to_string()),
        ..Default::default()
    };
    if let Some(bin) = &args.catalog_server {
        let mut s = CatalogServer::new(bin);
        // OLM's catalog pods exec grpc_health_probe; the server answers under that name.
        s.health_probe = HealthProbe::ServerSymlink;
        ci.server = Some(s);
    }
    let sp = spinner(g, "building the catalog image");
    let image = build_catalog_image(&ci).map_err(build_err);
    sp.finish_and_clear();
    Ok((image?, dir))
}

fn no_repo(kind: &str) -> CmdError {
    CmdError::msg(format!(
        "cannot name the {kind} image: the manifests have no Deployment container image to derive it from"
    ))
    .hint(format!("pass --{kind}-repo REPO (or --operator-repo), or --no-images"))
}

#[allow(clippy::too_many_arguments)]
fn options(
    args: &Args,
    version: &Version,
    created_at: String,
    replaces: Option<String>,
    skips: Vec<String>,
    skip_range: Option<String>,
    default_channel: Option<String>,
) -> Result<GenerateOptions, CmdError> {
    Ok(GenerateOptions {
        version: version.to_string(),
        package: args.package.clone(),
        channels: args.channels.clone(),
        default_channel,
        replaces,
        skips,
        skip_range,
        created_at,
        builder: format!("bundle-tool-v{}", env!("CARGO_PKG_VERSION")),
    })
}

fn generate(
    inputs: &GenerateInputs,
    options: &GenerateOptions,
) -> Result<GeneratedBundle, CmdError> {
    generate_bundle(inputs, options).map_err(|e| {
        let hint = e.hint();
        let mut err = CmdError::user(e);
        if let Some(h) = hint {
            err = err.hint(h);
        }
        err
    })
}

/// The channels to release into: as given; else, for a released version, the channels it is
/// in (so that re-running its release needs no flags); else the package's default channel, or
/// `alpha` for a new package.
fn target_channels(
    args: &Args,
    cfg: &DeclarativeConfig,
    package: &str,
    version: &Version,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &args.channels {
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    if out.is_empty()
        && let Some(b) = cfg.bundles.iter().find(|b| {
            b.package == package
                && olmkit_catalog::validate::bundle_version(b)
                    .is_some_and(|v| v.cmp_precedence(version).is_eq())
        })
    {
        out = cfg
            .channels
            .iter()
            .filter(|c| c.package == package && c.entries.iter().any(|e| e.name == b.name))
            .map(|c| c.name.clone())
            .collect();
    }
    if out.is_empty() {
        out.push(
            cfg.packages
                .iter()
                .find(|p| p.name == package && !p.default_channel.is_empty())
                .map(|p| p.default_channel.clone())
                .unwrap_or_else(|| "alpha".into()),
        );
    }
    out
}

/// An image reference without its tag or digest.
fn repository(reference: &str) -> String {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => no_digest[..i].to_string(),
        _ => no_digest.to_string(),
    }
}

fn containers_mut(doc: &mut Value) -> impl Iterator<Item = &mut Value> {
    let spec = doc.pointer_mut("/spec/template/spec");
    let mut out = Vec::new();
    if let Some(Value::Object(spec)) = spec {
        for (k, v) in spec.iter_mut() {
            if (k == "containers" || k == "initContainers")
                && let Value::Array(list) = v
            {
                out.extend(list.iter_mut());
            }
        }
    }
    out.into_iter()
}

fn is_deployment(doc: &Value) -> bool {
    doc.get("kind").and_then(Value::as_str) == Some("Deployment")
}

/// The image of the manager container (kubebuilder's name) of the first Deployment, or of its
/// first container: the same choice the CSV's `containerImage` makes.
fn manager_image(inputs: &GenerateInputs) -> Option<String> {
    let d = inputs.manifests.iter().find(|d| is_deployment(&d.object))?;
    let list = d
        .object
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    let c = list
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some("manager"))
        .or_else(|| list.first())?;
    c.get("image").and_then(Value::as_str).map(str::to_string)
}

/// Points every Deployment container running an image of `repo` at `new_ref`; returns how many.
fn set_operator_image(inputs: &mut GenerateInputs, repo: &str, new_ref: &str) -> usize {
    let mut n = 0;
    for d in inputs
        .manifests
        .iter_mut()
        .filter(|d| is_deployment(&d.object))
    {
        for c in containers_mut(&mut d.object) {
            let runs_repo = c
                .get("image")
                .and_then(Value::as_str)
                .is_some_and(|i| repository(i) == repo);
            if runs_repo {
                c["image"] = Value::from(new_ref);
                n += 1;
            }
        }
    }
    n
}

/// The released bundle directory whose CSV is `csv_name`, under `package_dir`. A released
/// bundle that cannot be loaded (a broken file, a symlink out of it) is an error naming it, not
/// a reason to skip the upgrade-safety check silently.
fn find_bundle(
    package_dir: &Path,
    csv_name: &str,
) -> Result<Option<olmkit_bundle::Bundle>, olmkit_bundle::load::LoadBundleError> {
    // Released bundles live in <package>/<version>/: try the name's version first.
    if let Some((_, v)) = csv_name.split_once(".v") {
        let dir = package_dir.join(v);
        if dir.join("manifests").is_dir() {
            let b = olmkit_bundle::load_bundle_dir(&dir)?;
            if b.csv_name() == Some(csv_name) {
                return Ok(Some(b));
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(package_dir) else {
        return Ok(None);
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for d in dirs.into_iter().filter(|d| d.join("manifests").is_dir()) {
        let b = olmkit_bundle::load_bundle_dir(&d)?;
        if b.csv_name() == Some(csv_name) {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

fn tree_diff(a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>) -> String {
    let mut out = Vec::new();
    for (p, bytes) in a {
        match b.get(p) {
            None => out.push(format!("{} would go", p.display())),
            Some(x) if x != bytes => out.push(format!("{} differs", p.display())),
            _ => {}
        }
    }
    for p in b.keys().filter(|p| !a.contains_key(*p)) {
        out.push(format!("{} would be added", p.display()));
    }
    out.join(", ")
}

fn write_files(root: &Path, files: &BTreeMap<PathBuf, Vec<u8>>) -> Result<(), CmdError> {
    for (rel, bytes) in files {
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unexpected_err()?;
        }
        std::fs::write(&p, bytes).unexpected_err()?;
    }
    Ok(())
}

/// Copies the catalog for staging: hard links where possible (the release replaces files by
/// renaming new ones in, never writing into them), copies otherwise. Leftover staging
/// directories of interrupted runs are skipped.
fn copy_tree(from: &Path, to: &Path) -> Result<(), CmdError> {
    std::fs::create_dir_all(to).unexpected_err()?;
    if !from.is_dir() {
        return Ok(());
    }
    for entry in walkdir::WalkDir::new(from).min_depth(1).sort_by_file_name() {
        let entry = entry.unexpected_err()?;
        let rel = entry.path().strip_prefix(from).unexpected_err()?;
        if rel.components().any(|c| {
            c.as_os_str()
                .to_string_lossy()
                .starts_with(".bundle-tool-stage-")
        }) {
            continue;
        }
        let target = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unexpected_err()?;
        } else if entry.file_type().is_file() && std::fs::hard_link(entry.path(), &target).is_err()
        {
            std::fs::copy(entry.path(), &target).unexpected_err()?;
        }
    }
    Ok(())
}

/// `path` made absolute and with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> Result<PathBuf, CmdError> {
    let abs = std::path::absolute(path).unexpected_err()?;
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

/// The deepest directory holding both `a` and `b` (both made absolute): the root of the
/// release's changeset, and so where an interrupted release leaves its journal.
fn common_root(a: &Path, b: &Path) -> Result<PathBuf, CmdError> {
    let (a, b) = (normalize(a)?, normalize(b)?);
    Ok(a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.as_os_str().to_owned())
        .collect())
}

/// Finishes a release that was killed while committing (its journal is rolled forward, so the
/// tree holds that release in full) and removes staging left by dead runs, before anything is
/// read: otherwise a half-committed tree would make this run refuse or plan the wrong change.
fn recover_interrupted(args: &Args) -> Result<(), CmdError> {
    let root = common_root(&args.bundle_root, &args.catalog_dir)?;
    let rec = olmkit_core::fsio::recover(&root)
        .user_hint("an interrupted release left a journal that cannot be completed; check that bundle/ and catalog/ are writable")?;
    if rec.journal_found {
        eprintln!(
            "note: completed an interrupted release in {} ({} pending change(s) applied from {})",
            root.display(),
            rec.rolled_forward,
            olmkit_core::fsio::JOURNAL_FILE
        );
    }
    if rec.stale_stages_removed > 0 {
        eprintln!(
            "note: removed {} staging directories left by interrupted runs",
            rec.stale_stages_removed
        );
    }
    Ok(())
}

/// Writes the bundle directory and the catalog update in one changeset rooted where both live.
fn commit(args: &Args, p: &Prepared) -> Result<(), CmdError> {
    let write_bundle = !p.bundle_unchanged;
    let write_catalog = p.plan.outcome == Outcome::Changed;
    if !write_bundle && !write_catalog {
        return Ok(());
    }
    let bundle_abs = normalize(&p.bundle_dir)?;
    let catalog_abs = normalize(&args.catalog_dir)?;
    let root = common_root(&bundle_abs, &catalog_abs)?;
    let rel = |abs: &Path| -> Result<PathBuf, CmdError> {
        abs.strip_prefix(&root)
            .map(Path::to_path_buf)
            .unexpected_err()
    };
    let mut cs = Changeset::new(&root).user_hint("check that bundle/ and catalog/ are writable")?;
    if write_bundle {
        cs.put_dir(
            rel(&bundle_abs)?,
            p.generated
                .files
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        )
        .unexpected_err()?;
    }
    if write_catalog {
        let format = p.catalog.format_of(&p.package);
        stage_package_update(
            &mut cs,
            &rel(&catalog_abs)?,
            &p.catalog,
            &p.package,
            &p.plan.changes,
            format,
        )
        .unexpected_err()?;
    }
    cs.commit()
        .user_hint("nothing was changed; check that bundle/ and catalog/ are writable")
}

fn report(args: &Args, p: &Prepared, plan_only: bool) -> Result<(), CmdError> {
    if !p.report.findings.is_empty() {
        eprint!("{}", p.report.render_text());
    }
    for n in &p.notes {
        eprintln!("note: {n}");
    }
    let done = p.plan.outcome == Outcome::NoOp && p.bundle_unchanged;
    match args.output {
        OutputFormat::Json => {
            let images: Vec<Value> = p
                .images
                .iter()
                .map(|i| {
                    json!({
                        "kind": i.kind,
                        "reference": i.reference,
                        "digest": i.image.digest().to_string(),
                        "compressedSize": i.image.compressed_size(),
                        "pushed": i.pushed,
                    })
                })
                .collect();
            let validation: Value =
                serde_json::from_str(&p.report.render_json()).unexpected_err()?;
            let mut s = serde_json::to_string_pretty(&json!({
                "package": p.package,
                "version": p.version.to_string(),
                "csvName": p.csv_name,
                "bundleDir": p.bundle_dir.display().to_string(),
                "alreadyReleased": done,
                "planOnly": plan_only,
                "plan": p.plan.render_text(),
                "changes": p.plan.changes.iter().map(crate::cmd::promote::change_json).collect::<Vec<_>>(),
                "bundleWritten": !plan_only && !p.bundle_unchanged,
                "catalogChanged": !plan_only && p.plan.outcome == Outcome::Changed,
                "layout": if p.images.is_empty() || plan_only { Value::Null } else { json!(args.layout.display().to_string()) },
                "images": images,
                "catalogImageSkipped": p.skipped_catalog,
                "notes": p.notes,
                "validation": validation,
            }))
            .unexpected_err()?;
            s.push('\n');
            print_data(&s).unexpected_err()
        }
        OutputFormat::Text => {
            let mut s = String::new();
            if done {
                s.push_str(&format!(
                    "{} ({}) is already released: bundle/ and catalog/ unchanged\n",
                    p.csv_name, p.version
                ));
            } else {
                s.push_str(&p.plan.render_text());
                let verb = if plan_only { "would write" } else { "wrote" };
                if !p.bundle_unchanged {
                    s.push_str(&format!(
                        "{verb} {} ({} files)\n",
                        p.bundle_dir.display(),
                        p.generated.files.len()
                    ));
                }
                if p.plan.outcome == Outcome::Changed {
                    s.push_str(&format!(
                        "{verb} {}/{}\n",
                        args.catalog_dir.display(),
                        p.package
                    ));
                }
            }
            for i in &p.images {
                s.push_str(&format!(
                    "image {:<8} {} {} ({}){}\n",
                    i.kind,
                    i.reference,
                    i.image.digest(),
                    human_size(i.image.compressed_size()),
                    if i.pushed { ", pushed" } else { "" }
                ));
            }
            if let Some(why) = &p.skipped_catalog {
                s.push_str(&format!("image catalog  {why}\n"));
            }
            if !p.images.is_empty() {
                s.push_str(&format!(
                    "images written to the OCI layout {}\n",
                    args.layout.display()
                ));
            }
            print_data(&s).unexpected_err()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn repositories() {
        assert_eq!(repository("quay.io/x/op:0.1.0"), "quay.io/x/op");
        assert_eq!(repository("localhost:5000/x/op"), "localhost:5000/x/op");
        assert_eq!(repository("localhost:5000/x/op:v1"), "localhost:5000/x/op");
        assert_eq!(
            repository(
                "quay.io/x/op@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            ),
            "quay.io/x/op"
        );
        assert_eq!(repository("controller"), "controller");
    }

    #[test]
    fn operator_image_is_rewritten_only_where_it_runs() {
        let doc = |kind: &str, images: &[&str]| olmkit_bundle::load::InputDocument {
            source: "t".into(),
            index: 1,
            item: None,
            object: json!({
                "kind": kind,
                "spec": {"template": {"spec": {
                    "initContainers": [{"name": "init", "image": "busybox:1"}],
                    "containers": images.iter().map(|i| json!({"name": "manager", "image": i})).collect::<Vec<_>>()
                }}}
            }),
        };
        let mut inputs = GenerateInputs {
            manifests: vec![
                doc("Deployment", &["quay.io/x/op:0.1.0", "memcached:1.6"]),
                doc("StatefulSet", &["quay.io/x/op:0.1.0"]),
            ],
            ..Default::default()
        };
        assert_eq!(
            manager_image(&inputs).as_deref(),
            Some("quay.io/x/op:0.1.0")
        );
        assert_eq!(
            set_operator_image(&mut inputs, "quay.io/x/op", "quay.io/x/op:0.2.0"),
            1
        );
        let d = &inputs.manifests[0].object;
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("quay.io/x/op:0.2.0"))
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/1/image"),
            Some(&json!("memcached:1.6"))
        );
        assert_eq!(
            d.pointer("/spec/template/spec/initContainers/0/image"),
            Some(&json!("busybox:1"))
        );
        // Only Deployments are the operator's install strategy.
        assert_eq!(
            inputs.manifests[1]
                .object
                .pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("quay.io/x/op:0.1.0"))
        );
    }

    #[test]
    fn lexical_normalization() {
        let n = normalize(Path::new("/a/./b/../c")).unwrap();
        assert_eq!(n, PathBuf::from("/a/c"));
    }
}
