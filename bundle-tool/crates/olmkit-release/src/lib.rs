//! olmkit-release: one release of an operator, from its manifests to a released version, all or
//! nothing; and the promotion of a released version to another channel ([`promote`]).
//!
//! A release generates the bundle for the version (with `replaces` set to the head of the
//! first target channel), validates it (with CRD upgrade safety against the bundle it
//! replaces), plans its catalog entries (one per target channel, each replacing that channel's
//! head, so no channel gets a second head), validates the package's whole graph, builds the
//! operator, bundle and catalog images, publishes them, and only then writes
//! `bundle/<package>/<version>/` and the catalog, in one changeset. Any failure before that
//! last step leaves `bundle/` and `catalog/` as they were.
//!
//! Released versions are immutable: re-running a finished release regenerates the same bytes
//! (it reuses the recorded `createdAt`, edges and bundle image) and changes nothing but the
//! images; releasing an existing version with other content is refused.
//!
//! The pipeline is a chain of typed stages: each stage is a type, and its one method consumes
//! it and returns the next stage or that step's own error (all of them convert into
//! [`ReleaseError`]), so no step can be skipped or run twice:
//!
//! 1. [`open`](open::open) → [`Opened`]: finishes a release killed while committing
//!    ([`recover`]), parses the version (the one parse: a `semver::Version` flows through, and is
//!    formatted only in names and files) and reads the catalog.
//! 2. [`Opened::plan`] → [`Planned`] ([`plan`]): the package (read where the generator reads
//!    it, without generating), its target channels and CSV edges, `createdAt` and the image
//!    names (a manager image with no registry host and no `--operator-repo` is refused).
//! 3. [`Planned::generate`] → [`Generated`] ([`generate`]): the bundle, with the operator's
//!    containers pointed at the new image (built first when the CSV pins it by digest).
//! 4. [`Generated::validate`] → [`Validated`] ([`validate`]): the bundle as it will be on disk,
//!    and the immutability of released versions.
//! 5. [`Validated::build`] → [`Built`] ([`images`]): operator and bundle images, the catalog
//!    entries naming the bundle image ([`catalog_plan`]), the catalog image. The operator binary
//!    goes where the CSV's manager container `command` points (else to
//!    `/usr/local/bin/<name>`, the entrypoint), and the built image is checked against that
//!    CSV. With `--plan`, this stage's [`Release`] is what would be released.
//! 6. [`Built::publish`] → [`Published`] ([`publish`]): the images into the OCI layout and, when
//!    the caller passes a registry, there, through olmkit-image's `Publisher`.
//! 7. [`Published::commit`] → [`Committed`] ([`commit`]): `bundle/` and the catalog in one
//!    crash-safe changeset.
//!
//! The caller loads the manifests between 1 and 2 (how is a command-line matter: kustomize,
//! files, stdin). The pipeline does no terminal I/O: it reports its stages, image builds, notes
//! and warnings through an [`Event`] callback, and its errors carry their `hint:` lines
//! ([`ReleaseError::hints`]).

pub mod build;
pub mod catalog_plan;
pub mod commit;
pub mod generate;
pub mod images;
pub mod inputs;
pub mod manager;
pub mod open;
pub mod plan;
pub mod promote;
pub mod publish;
pub mod recover;
pub mod validate;

use catalog_plan::ReleasePlan;
use olmkit_bundle::generate::GeneratedBundle;
use olmkit_catalog::catalog_dir::CatalogDir;
use olmkit_core::Report;
use semver::Version;
use std::fmt;
use std::path::PathBuf;
use thiserror::Error;

pub use build::Built;
pub use commit::{CommitError, Committed};
pub use generate::{GenerateError, Generated};
pub use images::{BuiltImage, ImageKind, ImagesError};
pub use open::{OpenError, Opened, open};
pub use plan::{PlanError, Planned};
pub use publish::{Published, ReleasePublishError};
pub use recover::RecoverError;
pub use validate::{ValidateError, Validated};

/// What to release and how: the release's options, as the command line gives them.
#[derive(Clone, Debug, Default)]
pub struct ReleaseConfig {
    /// Version to release (semver; a leading `v` is dropped).
    pub version: String,
    /// Target channels as given (repeats allowed); empty for the defaults.
    pub channels: Vec<String>,
    /// The package's new default channel.
    pub default_channel: Option<String>,
    /// skipRange of the new entries: `None` for none, `Some("")` for `<VERSION`, else the range.
    pub skip_range: Option<String>,
    /// Decide and report only: no images, no writes.
    pub plan_only: bool,
    /// Package name (default: the base CSV's name without `.vX.Y.Z`).
    pub package: Option<String>,
    /// The File-Based Catalog directory.
    pub catalog_dir: PathBuf,
    /// Where released bundles live: `<bundle_root>/<package>/<version>/`.
    pub bundle_root: PathBuf,
    /// Operator image repository (default: the manifests' manager image's repository, which
    /// must then name a registry: a placeholder such as `controller:latest` is refused).
    pub operator_repo: Option<String>,
    /// Bundle image repository (default: `<operator repo>-bundle`).
    pub bundle_repo: Option<String>,
    /// Catalog image repository (default: `<operator repo>-catalog`).
    pub catalog_repo: Option<String>,
    /// Build no images.
    pub no_images: bool,
    /// Static operator binary for the operator image; without it, no operator image.
    pub operator_binary: Option<PathBuf>,
    /// Static catalog server for the catalog image's entrypoint.
    pub catalog_server: Option<PathBuf>,
    /// OCI image layout the images go to (read to report a kept catalog image).
    pub layout: PathBuf,
    /// The images will be pushed (only changes what a warning says).
    pub push: bool,
    /// Pin the operator image in the CSV and the bundle image in the catalog by digest.
    pub use_image_digests: bool,
    /// Tool name and version for the bundle's `builder` annotations.
    pub builder: String,
}

impl ReleaseConfig {
    /// The bundle generator's options for this release.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn generate_options(
        &self,
        version: &Version,
        created_at: String,
        replaces: Option<String>,
        skips: Vec<String>,
        skip_range: Option<String>,
        default_channel: Option<String>,
    ) -> olmkit_bundle::generate::GenerateOptions {
        olmkit_bundle::generate::GenerateOptions {
            version: Some(version.clone()),
            package: self.package.clone(),
            channels: self.channels.clone(),
            default_channel,
            replaces,
            skips,
            skip_range,
            created_at,
            builder: self.builder.clone(),
        }
    }

    /// Whether this run builds images at all.
    pub fn images_on(&self) -> bool {
        !self.no_images && !self.plan_only
    }
}

/// A step of the pipeline, reported as it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Generating the bundle.
    Generate,
    /// Validating the bundle.
    Validate,
    /// Building the images (and planning the catalog entries that name the bundle image).
    Images,
    /// Writing `bundle/` and the catalog.
    Commit,
}

impl Stage {
    /// The stage's name, as progress lines show it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Generate => "generate",
            Stage::Validate => "validate",
            Stage::Images => "images",
            Stage::Commit => "commit",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// What the pipeline reports while it runs; the caller decides how (if at all) to show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A stage starts.
    Stage(Stage),
    /// An image build starts (it may take seconds).
    BuildStarted(ImageKind),
    /// That image build ended (successfully or not).
    BuildFinished(ImageKind),
    /// What the release did on the user's behalf before starting (an interrupted release
    /// completed).
    Note(&'a str),
    /// Something the user should know now, with how to act on it.
    Warning {
        /// The warning.
        message: &'a str,
        /// `hint:` lines.
        hints: &'a [String],
    },
}

/// The progress callback of the pipeline.
pub type Progress<'p> = dyn FnMut(Event<'_>) + 'p;

/// A release as decided (from [`Built`] on) and, at the end, done.
#[derive(Debug)]
pub struct Release {
    /// Package name.
    pub package: String,
    /// The version released.
    pub version: Version,
    /// The CSV's name.
    pub csv_name: String,
    /// `<bundle_root>/<package>/<version>`.
    pub bundle_dir: PathBuf,
    /// The bundle's files.
    pub generated: GeneratedBundle,
    /// The bundle directory already holds exactly these files.
    pub bundle_unchanged: bool,
    /// The catalog changes.
    pub plan: ReleasePlan,
    /// The catalog as read.
    pub catalog: CatalogDir,
    /// Validation findings (warnings only: errors stop the release).
    pub report: Report,
    /// What the release decided on the user's behalf, and why.
    pub notes: Vec<String>,
    /// The images built, in order: operator, bundle, catalog.
    pub images: Vec<BuiltImage>,
    /// Why the catalog image was not rebuilt (a re-release after later versions).
    pub skipped_catalog: Option<String>,
    /// Staging directories the images were built from, kept as long as the release.
    pub(crate) _staging: Vec<tempfile::TempDir>,
}

/// A release failed; nothing under `bundle/` or the catalog was changed.
#[derive(Debug, Error)]
pub enum ReleaseError {
    /// The release cannot start (recovery, version, catalog).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Planning failed.
    #[error(transparent)]
    Plan(PlanError),
    /// Generating the bundle failed.
    #[error(transparent)]
    Generate(GenerateError),
    /// The bundle does not validate, or would overwrite a release.
    #[error(transparent)]
    Validate(#[from] ValidateError),
    /// Building an image failed.
    #[error(transparent)]
    Images(ImagesError),
    /// Publishing the images failed.
    #[error(transparent)]
    Publish(#[from] ReleasePublishError),
    /// Writing failed (the changeset is all or nothing).
    #[error(transparent)]
    Commit(#[from] CommitError),
}

/// A stage's error wrapping another step's is reported as that step's: an input too large is
/// a validation error, an operator image built for the CSV an image error, a catalog plan made
/// while building a plan error.
impl From<PlanError> for ReleaseError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::InputSizes(v) => ReleaseError::Validate(ValidateError::ObjectTooLarge(v)),
            other => ReleaseError::Plan(other),
        }
    }
}

impl From<GenerateError> for ReleaseError {
    fn from(e: GenerateError) -> Self {
        match e {
            GenerateError::OperatorImage(i) => ReleaseError::from(*i),
            other => ReleaseError::Generate(other),
        }
    }
}

impl From<ImagesError> for ReleaseError {
    fn from(e: ImagesError) -> Self {
        match e {
            ImagesError::CatalogPlan(p) => ReleaseError::from(*p),
            other => ReleaseError::Images(other),
        }
    }
}

impl ReleaseError {
    /// `hint:` lines: how to fix it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            ReleaseError::Open(e) => e.hints(),
            ReleaseError::Plan(e) => e.hints(),
            ReleaseError::Generate(e) => e.hints(),
            ReleaseError::Validate(e) => e.hints(),
            ReleaseError::Images(e) => e.hints(),
            ReleaseError::Publish(e) => e.hints(),
            ReleaseError::Commit(e) => e.hints(),
        }
    }

    /// True when the input or the environment is at fault (bad flags, manifests, catalog,
    /// binaries, permissions); false for what should not happen.
    pub fn is_user_error(&self) -> bool {
        match self {
            ReleaseError::Open(e) => e.is_user_error(),
            ReleaseError::Plan(e) => e.is_user_error(),
            ReleaseError::Generate(e) => e.is_user_error(),
            ReleaseError::Validate(e) => e.is_user_error(),
            ReleaseError::Images(e) => e.is_user_error(),
            ReleaseError::Publish(e) => e.is_user_error(),
            ReleaseError::Commit(e) => e.is_user_error(),
        }
    }
}

/// A library error with the `hint:` lines that say how to fix it here. It displays and chains
/// exactly as the error itself, so wrapping changes nothing in what is printed.
#[derive(Debug)]
pub struct Hinted<E> {
    /// The error.
    pub error: E,
    /// `hint:` lines.
    pub hints: Vec<String>,
}

impl<E> Hinted<E> {
    pub(crate) fn new(error: E, hints: impl IntoIterator<Item = String>) -> Self {
        Hinted {
            error,
            hints: hints.into_iter().collect(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Hinted<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl<E: std::error::Error> std::error::Error for Hinted<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hinted_errors_print_and_chain_as_the_error_itself() {
        let inner = std::io::Error::other("disk on fire");
        let outer = olmkit_core::fsio::WriteOutputError::Io {
            action: "write",
            path: PathBuf::from("x"),
            source: inner,
        };
        let text = outer.to_string();
        let hinted = Hinted::new(outer, ["check x".to_string()]);
        assert_eq!(hinted.to_string(), text);
        let source = std::error::Error::source(&hinted).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk on fire"));
        assert_eq!(hinted.hints, ["check x"]);
    }

    #[test]
    fn stage_names_are_the_progress_words() {
        let names: Vec<String> = [
            Stage::Generate,
            Stage::Validate,
            Stage::Images,
            Stage::Commit,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(names, ["generate", "validate", "images", "commit"]);
    }
}
