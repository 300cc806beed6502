//! The images of a release (built in stage 5, [`crate::build`]): the operator, bundle and
//! catalog images, through olmkit-image, each from a staged copy of what it packs (the bundle
//! as generated, the catalog with the release applied), so nothing under `bundle/` or the
//! catalog is written before the commit. The catalog entries are planned between
//! [`bundle_step`] and [`catalog_step`] ([`crate::plan::plan_catalog`]): they name the bundle
//! image, by digest with `--use-image-digests`, and the catalog image packs them.
//!
//! olmkit-image knows nothing of bundles: this module hands it plain data, the manager
//! container's command ([`crate::manager`])
//! and the bundle's annotations and `bundle.Dockerfile` ([`bundle_image_inputs`]).
//!
//! With `--use-image-digests` the operator image is built before generation instead
//! ([`operator_image_for_csv`]): its digest goes into the CSV.
//!
//! The operator binary goes where the manager container's `command[0]` points (kubebuilder's
//! `/manager`; a bare name through the image's `PATH`), or, without a command, to
//! `/usr/local/bin/<binary file name>` as the image's entrypoint (olmkit-image's
//! `images` module docs, "Where the operator binary goes"). Once the bundle is validated,
//! [`check_operator`] reads the operator image back and refuses it, before anything is
//! written, when its entrypoint is no executable file or the CSV's manager command names a
//! path the image lacks.

use crate::catalog_plan::{Outcome, ReleasePlan};
use crate::manager::manager_command_of_csv;
use crate::plan::{Decisions, PlanError, later_versions};
use crate::{Event, Progress, ReleaseConfig};
use olmkit_bundle::LoadBundleError;
use olmkit_bundle::generate::GeneratedBundle;
use olmkit_catalog::catalog_dir::{CatalogDir, WriteCatalogError, stage_package_update};
use olmkit_core::fsio::{Changeset, WriteOutputError};
use olmkit_image::build::{BuildImageError, Image};
use olmkit_image::images::{
    BundleImageInputs, CatalogImageInputs, CatalogServer, HealthProbe, OciLabels,
    OperatorImageCheckError, OperatorImageInputs, build_bundle_image, build_catalog_image,
    build_operator_image, check_operator_image,
};
use semver::Version;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The three images of a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// The operator's binary.
    Operator,
    /// The bundle.
    Bundle,
    /// The catalog (and its server).
    Catalog,
}

impl ImageKind {
    /// `operator`, `bundle` or `catalog`.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Operator => "operator",
            ImageKind::Bundle => "bundle",
            ImageKind::Catalog => "catalog",
        }
    }
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// One image of the release.
#[derive(Debug)]
pub struct BuiltImage {
    /// Which one.
    pub kind: ImageKind,
    /// Tag reference (the layout name and the push target).
    pub reference: String,
    /// The image.
    pub image: Image,
    /// Set by the caller once it is pushed.
    pub pushed: bool,
}

/// An image could not be built.
#[derive(Debug, Error)]
pub enum ImagesError {
    /// Nothing names the image's repository.
    #[error(
        "cannot name the {kind} image: the manifests have no Deployment container image to derive it from"
    )]
    NoRepository {
        /// Which image.
        kind: ImageKind,
    },
    /// olmkit-image refused or failed.
    #[error(transparent)]
    Build(Box<BuildImageError>),
    /// The operator image would not start as the CSV runs it.
    #[error(transparent)]
    Check(Box<OperatorImageCheckError>),
    /// The bundle the bundle image packs cannot be loaded.
    #[error(transparent)]
    Bundle(Box<LoadBundleError>),
    /// Staging what an image packs failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Staging the catalog with the release applied failed.
    #[error(transparent)]
    Stage(Box<WriteOutputError>),
    /// Staging the catalog's package update failed.
    #[error(transparent)]
    StageCatalog(Box<WriteCatalogError>),
    /// Copying the catalog for staging failed.
    #[error(transparent)]
    Walk(#[from] walkdir::Error),
    /// The catalog entries naming the bundle image cannot be planned.
    #[error(transparent)]
    CatalogPlan(Box<PlanError>),
}

impl ImagesError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            ImagesError::NoRepository { kind } => vec![format!(
                "pass --{kind}-repo REPO (or --operator-repo), or --no-images"
            )],
            ImagesError::Build(e) => build_hint(e).into_iter().map(String::from).collect(),
            ImagesError::Bundle(_) => vec![BUNDLE_LOAD_HINT.into()],
            ImagesError::Check(e) => e.hints(None),
            ImagesError::CatalogPlan(e) => e.hints(),
            ImagesError::Io(_)
            | ImagesError::Stage(_)
            | ImagesError::StageCatalog(_)
            | ImagesError::Walk(_) => Vec::new(),
        }
    }

    /// True for missing names and bad binaries; staging failures are not.
    pub fn is_user_error(&self) -> bool {
        match self {
            ImagesError::NoRepository { .. } | ImagesError::Bundle(_) => true,
            ImagesError::Build(e) => e.is_user_error(),
            ImagesError::Check(e) => e.is_user_error(),
            ImagesError::CatalogPlan(e) => e.is_user_error(),
            _ => false,
        }
    }
}

/// How to fix a bundle directory the bundle image cannot be built from.
pub const BUNDLE_LOAD_HINT: &str = "generate the bundle with `bundle-tool generate bundle`";

/// How to fix a failed image build, when there is something to say.
pub fn build_hint(e: &BuildImageError) -> Option<&'static str> {
    match e {
        BuildImageError::Binary { .. } => {
            Some("build static binaries with hack/build-static.sh (glibc static-pie)")
        }
        _ => None,
    }
}

/// The images built so far, and what goes with them.
#[derive(Debug, Default)]
pub struct ImageSet {
    pub(crate) images: Vec<BuiltImage>,
    pub(crate) notes: Vec<String>,
    pub(crate) skipped_catalog: Option<String>,
    /// Kept alive until the images are written from them.
    pub(crate) staging: Vec<tempfile::TempDir>,
}

/// With `--use-image-digests` (and images on), builds the operator image now, since the CSV
/// names it by digest; returns the reference the manager's containers get (by tag otherwise).
pub(crate) fn operator_image_for_csv(
    config: &ReleaseConfig,
    planned: &Decisions,
    built: &mut ImageSet,
    progress: &mut Progress<'_>,
) -> Result<Option<String>, ImagesError> {
    let repo = planned.names.operator_repo.as_ref();
    let by_tag = repo.map(|r| format!("{r}:{}", planned.version));
    if !(config.use_image_digests && config.images_on() && config.operator_binary.is_some()) {
        return Ok(by_tag);
    }
    let image = operator_image(config, planned, built, progress)?;
    Ok(repo.map(|r| format!("{r}@{}", image.digest())))
}

/// Builds the operator image (when there is a binary) and records it; returns a copy of it.
fn operator_image(
    config: &ReleaseConfig,
    planned: &Decisions,
    built: &mut ImageSet,
    progress: &mut Progress<'_>,
) -> Result<Image, ImagesError> {
    let (Some(bin), Some(repo)) = (&config.operator_binary, &planned.names.operator_repo) else {
        return Err(ImagesError::NoRepository {
            kind: ImageKind::Operator,
        });
    };
    let mut oi = OperatorImageInputs::new(bin, planned.image_time);
    oi.manager_command = planned.manager_command.clone();
    oi.oci = OciLabels {
        title: Some(planned.package.clone()),
        version: Some(planned.version.to_string()),
        ..Default::default()
    };
    let image = timed(progress, ImageKind::Operator, || build_operator_image(&oi))?;
    built.images.push(BuiltImage {
        kind: ImageKind::Operator,
        reference: format!("{repo}:{}", planned.version),
        image: image.clone(),
        pushed: false,
    });
    Ok(image)
}

/// Checks the operator image (when one was built) against the CSV of the bundle as it will be
/// on disk, `loaded`: its entrypoint must be an executable file in its layers, and the manager
/// container's `command[0]` must name one (see the module docs).
pub(crate) fn check_operator(
    built: &ImageSet,
    loaded: &olmkit_bundle::Bundle,
) -> Result<(), ImagesError> {
    let Some(op) = built.images.iter().find(|i| i.kind == ImageKind::Operator) else {
        return Ok(());
    };
    let manager = loaded.csv().and_then(|csv| {
        manager_command_of_csv(
            &csv.object,
            loaded.root.join(&csv.file).display().to_string(),
        )
    });
    check_operator_image(&op.image, manager.as_ref()).map_err(|e| ImagesError::Check(Box::new(e)))
}

/// The bundle image's inputs for the bundle directory `dir`: olmkit-bundle's loader reads its
/// annotations (the image's labels) and `bundle.Dockerfile` through the directory as the root.
pub fn bundle_image_inputs(
    dir: &Path,
    created: jiff::Timestamp,
) -> Result<BundleImageInputs, LoadBundleError> {
    let bundle = olmkit_bundle::load_bundle_dir(dir)?;
    let mut inputs = BundleImageInputs::new(dir, created);
    inputs.annotations_file = bundle.annotations_file.clone();
    inputs.annotations = bundle.annotations;
    inputs.dockerfile = bundle.dockerfile;
    Ok(inputs)
}

/// Runs one image build between its start and end events.
fn timed<T>(
    progress: &mut Progress<'_>,
    kind: ImageKind,
    build: impl FnOnce() -> Result<T, BuildImageError>,
) -> Result<T, ImagesError> {
    progress(Event::BuildStarted(kind));
    let result = build();
    progress(Event::BuildFinished(kind));
    result.map_err(|e| ImagesError::Build(Box::new(e)))
}

/// The images step up to the bundle image: the operator image (unless built for the CSV
/// already), then the bundle image from a staged copy of the bundle. Returns the reference the
/// catalog entry of a new version names: the bundle image by tag, or by digest with
/// `--use-image-digests`; `None` when nothing names it.
pub(crate) fn bundle_step(
    config: &ReleaseConfig,
    planned: &Decisions,
    generated: &GeneratedBundle,
    built: &mut ImageSet,
    progress: &mut Progress<'_>,
) -> Result<Option<String>, ImagesError> {
    let images_on = config.images_on();
    if images_on && config.operator_binary.is_some() && !config.use_image_digests {
        operator_image(config, planned, built, progress)?;
    }
    let bundle_repo = planned.names.bundle_repo.as_ref();
    let by_tag = bundle_repo.map(|r| format!("{r}:v{}", planned.version));
    if !images_on {
        return Ok(by_tag);
    }
    let Some(reference) = by_tag.clone() else {
        return Err(no_repo(ImageKind::Bundle));
    };
    let dir = tempfile::tempdir()?;
    write_files(dir.path(), &generated.files)?;
    let inputs = bundle_image_inputs(dir.path(), planned.image_time)
        .map_err(|e| ImagesError::Bundle(Box::new(e)))?;
    let image = timed(progress, ImageKind::Bundle, || build_bundle_image(&inputs))?;
    built.notes.extend(image.dockerfile_drift.iter().cloned());
    let in_catalog = match bundle_repo {
        Some(r) if config.use_image_digests => Some(format!("{r}@{}", image.image.digest())),
        _ => by_tag,
    };
    built.images.push(BuiltImage {
        kind: ImageKind::Bundle,
        reference,
        image: image.image,
        pushed: false,
    });
    built.staging.push(dir);
    Ok(in_catalog)
}

/// The images step after the catalog entries are planned: the catalog image (see
/// [`catalog_image_step`]), and the note when the operator image was left out.
pub(crate) fn catalog_step(
    config: &ReleaseConfig,
    planned: &Decisions,
    catalog: &CatalogDir,
    plan: &ReleasePlan,
    built: &mut ImageSet,
    progress: &mut Progress<'_>,
) -> Result<(), ImagesError> {
    if config.images_on() {
        catalog_image_step(config, planned, catalog, plan, built, progress)?;
    }
    if !config.no_images && config.operator_binary.is_none() && !config.plan_only {
        built
            .notes
            .push("no --operator-binary: the operator image was not built".into());
    }
    Ok(())
}

/// The catalog entry of a new version cannot name its bundle image.
pub(crate) fn no_repo(kind: ImageKind) -> ImagesError {
    ImagesError::NoRepository { kind }
}

/// The catalog image, from a staged copy of the catalog with the release applied; not for a
/// re-release once later versions are in the catalog (see [`later_versions`]).
fn catalog_image_step(
    config: &ReleaseConfig,
    planned: &Decisions,
    catalog: &CatalogDir,
    plan: &ReleasePlan,
    built: &mut ImageSet,
    progress: &mut Progress<'_>,
) -> Result<(), ImagesError> {
    let Some(repo) = &planned.names.catalog_repo else {
        return Err(no_repo(ImageKind::Catalog));
    };
    let later = match planned.recorded_image {
        Some(_) => later_versions(&catalog.config, &planned.package, &planned.version),
        None => Vec::new(),
    };
    if !later.is_empty() {
        built.skipped_catalog = Some(skip_catalog_image(
            config,
            repo,
            &planned.version,
            &later,
            progress,
        ));
        return Ok(());
    }
    let (image, dir) = catalog_image(config, catalog, plan, planned, progress)?;
    if config.catalog_server.is_none() {
        built.notes.push(
            "no --catalog-server: the catalog image carries the catalog and its label but no server"
                .into(),
        );
    }
    built.images.push(BuiltImage {
        kind: ImageKind::Catalog,
        reference: format!("{repo}:v{}", planned.version),
        image,
        pushed: false,
    });
    built.staging.push(dir);
    Ok(())
}

/// Why the catalog image of a re-release was not rebuilt, for the report; warns through
/// `progress`.
fn skip_catalog_image(
    config: &ReleaseConfig,
    repo: &str,
    version: &Version,
    later: &[Version],
    progress: &mut Progress<'_>,
) -> String {
    let reference = format!("{repo}:v{version}");
    let list: Vec<String> = later.iter().map(Version::to_string).collect();
    let kept = olmkit_image::layout::list_layout(&config.layout)
        .ok()
        .and_then(|entries| {
            entries
                .into_iter()
                .find(|e| e.ref_name.as_deref() == Some(reference.as_str()))
        })
        .map(|e| {
            format!(
                " ({} keeps the one it has, {})",
                config.layout.display(),
                e.digest
            )
        })
        .unwrap_or_default();
    let message = format!(
        "not rebuilding the catalog image {reference}: {} now also holds {} released after {version}, which that image never contained; the image stays as it was{kept}{}",
        config.catalog_dir.display(),
        list.join(", "),
        if config.push {
            ", and is not pushed"
        } else {
            ""
        }
    );
    let hints = [format!(
        "to rebuild it, run this release from a checkout of the {version} release (e.g. `git worktree add ../v{version} <its commit>`), where catalog/ is as it was"
    )];
    progress(Event::Warning {
        message: &message,
        hints: &hints,
    });
    format!(
        "{reference} not rebuilt: {} holds later releases ({})",
        config.catalog_dir.display(),
        list.join(", ")
    )
}

/// Builds the catalog image from a staged copy of the catalog with the plan applied; returns
/// the image and the staging directory (kept until the image is written).
fn catalog_image(
    config: &ReleaseConfig,
    catalog: &CatalogDir,
    plan: &ReleasePlan,
    planned: &Decisions,
    progress: &mut Progress<'_>,
) -> Result<(Image, tempfile::TempDir), ImagesError> {
    let package = &planned.package;
    let dir = tempfile::tempdir()?;
    let configs = dir.path().join("configs");
    copy_tree(&config.catalog_dir, &configs)?;
    if plan.outcome == Outcome::Changed {
        let staged = CatalogDir {
            dir: configs.clone(),
            config: catalog.config.clone(),
            origins: catalog.origins.clone(),
        };
        let stage_err = |e| ImagesError::Stage(Box::new(e));
        let mut cs = Changeset::new(&configs).map_err(stage_err)?;
        stage_package_update(
            &mut cs,
            Path::new(""),
            &staged,
            package,
            &plan.changes,
            catalog.format_of(package),
        )
        .map_err(|e| ImagesError::StageCatalog(Box::new(e)))?;
        cs.commit().map_err(stage_err)?;
    }
    let mut ci = CatalogImageInputs::new(&configs, planned.image_time);
    ci.oci = OciLabels {
        title: Some(format!("{package} catalog")),
        version: Some(planned.version.to_string()),
        ..Default::default()
    };
    if let Some(bin) = &config.catalog_server {
        let mut s = CatalogServer::new(bin);
        // OLM's catalog pods exec grpc_health_probe; the server answers under that name.
        s.health_probe = HealthProbe::ServerSymlink;
        ci.server = Some(s);
    }
    let image = timed(progress, ImageKind::Catalog, || build_catalog_image(&ci))?;
    Ok((image, dir))
}

fn write_files(root: &Path, files: &BTreeMap<PathBuf, Vec<u8>>) -> std::io::Result<()> {
    for (rel, bytes) in files {
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, bytes)?;
    }
    Ok(())
}

/// Copies the catalog for staging (`std::fs::copy`: `copy_file_range`, a reflink where the
/// file system has them). Not hard links: every reader refuses a file with several links (it
/// may be another name of a file outside the input, `olmkit_core::confine::HardLinks`), and a
/// staged link would give the catalog's own files a second one for the rest of the release.
/// Leftover staging directories of interrupted runs are skipped.
fn copy_tree(from: &Path, to: &Path) -> Result<(), ImagesError> {
    std::fs::create_dir_all(to)?;
    if !from.is_dir() {
        return Ok(());
    }
    for entry in walkdir::WalkDir::new(from).min_depth(1).sort_by_file_name() {
        let entry = entry?;
        let rel = entry
            .path()
            .strip_prefix(from)
            .map_err(std::io::Error::other)?;
        if rel.components().any(|c| {
            c.as_os_str()
                .to_string_lossy()
                .starts_with(".bundle-tool-stage-")
        }) {
            continue;
        }
        let target = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target)?;
        } else if entry.file_type().is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn staging_copies_the_catalog_but_not_leftover_stages() {
        let tmp = tempfile::tempdir().unwrap();
        let from = tmp.path().join("catalog");
        std::fs::create_dir_all(from.join("pkg")).unwrap();
        std::fs::create_dir_all(from.join(".bundle-tool-stage-1-x")).unwrap();
        std::fs::write(from.join("pkg/catalog.yaml"), "x").unwrap();
        std::fs::write(from.join(".bundle-tool-stage-1-x/f"), "y").unwrap();
        let to = tmp.path().join("staged");
        copy_tree(&from, &to).unwrap();
        assert_eq!(std::fs::read(to.join("pkg/catalog.yaml")).unwrap(), b"x");
        assert!(!to.join(".bundle-tool-stage-1-x").exists());
        // A catalog that does not exist yet stages as an empty directory.
        copy_tree(&tmp.path().join("none"), &tmp.path().join("empty")).unwrap();
        assert!(tmp.path().join("empty").is_dir());
    }

    #[test]
    fn the_bundle_image_is_labelled_with_the_loaded_annotations() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures/real-bundles/authorino-operator/0.13.0");
        let t0 = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let inputs = bundle_image_inputs(&dir, t0).unwrap();
        let built = build_bundle_image(&inputs).unwrap();
        let c: serde_json::Value = serde_json::from_slice(&built.image.config.data).unwrap();
        let labels: BTreeMap<String, String> =
            serde_json::from_value(c["config"]["Labels"].clone()).unwrap();
        assert_eq!(
            labels,
            olmkit_bundle::load_bundle_dir(&dir).unwrap().annotations
        );
        assert_eq!(
            labels["operators.operatorframework.io.bundle.package.v1"],
            "authorino-operator"
        );
    }

    #[test]
    fn a_missing_repository_names_its_flag() {
        let e = no_repo(ImageKind::Catalog);
        assert!(e.to_string().contains("cannot name the catalog image"));
        assert_eq!(
            e.hints(),
            ["pass --catalog-repo REPO (or --operator-repo), or --no-images"]
        );
        assert!(e.is_user_error());
    }
}
