//! `bundle-tool release`: one step from an operator's manifests to a released version, all or
//! nothing.
//!
//! The pipeline is olmkit-release's, a chain of typed stages (open, plan, generate, validate,
//! build, publish, commit; where the operator binary goes, and the refusal of a placeholder
//! manager image without `--operator-repo`, are in its `images` and `plan` stages); this
//! module maps the flags to its [`ReleaseConfig`] and the registry flags to a publisher, loads
//! the manifests between the open and plan stages, prints one line per stage, the notes and
//! the images' spinners on stderr, and reports what was released on stdout as text or JSON.
//! Any failure before the commit leaves `bundle/` and `catalog/` as they were.

use crate::cmd::common::fbc::change_json;
use crate::cmd::common::inputs::{InputArgs, load_inputs};
use crate::cmd::common::registry::{self, RegistryArgs, build_err, human_size, registry_publisher};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data, spinner};
use olmkit_image::publish::Publisher;
use olmkit_release::catalog_plan::Outcome;
use olmkit_release::{
    Built, Event, ImagesError, Progress, Release, ReleaseConfig, ReleaseError, ReleasePublishError,
    ValidateError,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

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
    /// repository, when it names a registry host; a placeholder such as the kubebuilder
    /// scaffold's controller:latest is refused].
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
    /// one), put where the manager container's `command` points (kubebuilder: /manager), else
    /// at /usr/local/bin/<file name> as the entrypoint; without it, no operator image is built.
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

/// The pipeline's configuration from the flags.
fn config(args: &Args) -> ReleaseConfig {
    ReleaseConfig {
        version: args.version.clone(),
        channels: args.channels.clone(),
        default_channel: args.default_channel.clone(),
        skip_range: args.skip_range.clone(),
        plan_only: args.plan,
        package: args.package.clone(),
        catalog_dir: args.catalog_dir.clone(),
        bundle_root: args.bundle_root.clone(),
        operator_repo: args.operator_repo.clone(),
        bundle_repo: args.bundle_repo.clone(),
        catalog_repo: args.catalog_repo.clone(),
        no_images: args.no_images,
        operator_binary: args.operator_binary.clone(),
        catalog_server: args.catalog_server.clone(),
        layout: args.layout.clone(),
        push: args.push,
        use_image_digests: args.use_image_digests,
        builder: format!("bundle-tool-v{}", env!("CARGO_PKG_VERSION")),
    }
}

/// Runs the command: the pipeline's stages, one after the other.
pub async fn run(args: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    let mut progress = progress_printer(g);
    let built = tokio::task::block_in_place(|| build(&args, g, &mut progress))?;
    if args.plan {
        return report(&args, built.release(), true);
    }
    let registry = if args.push {
        Some(registry_publisher(&args.registry, args.force, g)?)
    } else {
        None
    };
    let published = built
        .publish(registry.as_ref().map(|(r, _)| r as &dyn Publisher))
        .await;
    if let Some((_, bars)) = &registry {
        bars.clear();
    }
    let published = published.map_err(publish_err)?;
    let committed =
        tokio::task::block_in_place(|| published.commit(&mut progress)).map_err(release_err)?;
    report(&args, committed.release(), false)
}

/// Opens the release, loads the manifests and runs the pipeline up to the images.
fn build(args: &Args, g: &GlobalArgs, progress: &mut Progress<'_>) -> Result<Built, CmdError> {
    let opened = olmkit_release::open(config(args), progress).map_err(release_err)?;
    require_manifests_here(&args.inputs)?;
    let inputs = load_inputs(&args.inputs, g)?;
    let planned = opened.plan(inputs).map_err(release_err)?;
    let generated = planned.generate(progress).map_err(release_err)?;
    let validated = generated.validate(progress).map_err(release_err)?;
    validated.build(progress).map_err(release_err)
}

/// A failed publication: the publisher's error, and what it means for the release.
fn publish_err(e: ReleasePublishError) -> CmdError {
    let hint = e.hint();
    let err = registry::publish_err(e.error);
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Prints the pipeline's events on stderr: one line per stage, a spinner per image build,
/// warnings with their hints.
fn progress_printer(g: &GlobalArgs) -> impl FnMut(Event<'_>) + '_ {
    let mut building: Option<indicatif::ProgressBar> = None;
    move |e| match e {
        Event::Stage(stage) => eprintln!("release: {stage}"),
        Event::BuildStarted(kind) => {
            building = Some(spinner(g, &format!("building the {kind} image")));
        }
        Event::BuildFinished(_) => {
            if let Some(bar) = building.take() {
                bar.finish_and_clear();
            }
        }
        Event::Note(message) => eprintln!("note: {message}"),
        Event::Warning { message, hints } => {
            eprintln!("warning: {message}");
            for h in hints {
                eprintln!("hint: {h}");
            }
        }
    }
}

/// The pipeline's error as an exit code: a failed validation prints its report; the rest keep
/// their hints, as user errors (exit 1) or unexpected ones (exit 2).
fn release_err(e: impl Into<ReleaseError>) -> CmdError {
    match e.into() {
        ReleaseError::Validate(v @ ValidateError::Invalid { .. }) => {
            if let ValidateError::Invalid { report, .. } = &v {
                eprint!("{}", report.render_text());
            }
            eprintln!("error: {v}");
            for h in v.hints() {
                eprintln!("hint: {h}");
            }
            CmdError::Reported
        }
        ReleaseError::Images(ImagesError::Build(b)) => build_err(*b),
        other => {
            let hints = other.hints();
            let err = if other.is_user_error() {
                CmdError::user(other)
            } else {
                CmdError::unexpected(other)
            };
            hints.into_iter().fold(err, CmdError::hint)
        }
    }
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

/// Reports what was (or, with `--plan`, would be) released: notes and findings on stderr,
/// the release on stdout as text or JSON.
fn report(args: &Args, p: &Release, plan_only: bool) -> Result<(), CmdError> {
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
                        "kind": i.kind.name(),
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
                "changes": p.plan.changes.iter().map(change_json).collect::<Vec<_>>(),
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
                    i.kind.name(),
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
