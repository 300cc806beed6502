//! Stage 2, plan ([`Opened::plan`] → [`Planned`]): everything a release decides before
//! generating anything, from the flags, the catalog and the manifests ([`Decisions`]): the
//! package and its target channels, the CSV's upgrade edges, `createdAt`, the image names;
//! and, once the bundle image is known (in the build stage), the catalog changes
//! ([`plan_catalog`]), through [`crate::catalog_plan`].
//!
//! The package name is read where the bundle generator reads it (`--package`, else the base
//! CSV's name without its version: olmkit-bundle's `collect` and `metadata::package_name`),
//! without generating a bundle.
//!
//! The image names come from the manifests' manager image (olmkit-bundle's manager-container
//! rule) unless `--operator-repo` names the repository; a manager image with no registry host
//! (kubebuilder's `controller:latest`) is a placeholder, and without `--operator-repo` the
//! release is refused ([`PlanError::PlaceholderImage`]) rather than publish `controller:<version>`.
//! The manager container's `command` is recorded too: the operator image puts its binary there.
//!
//! A version already in the catalog is a re-release: its recorded edges, channels, bundle
//! image and `createdAt` are reused, so that re-running it regenerates the same bytes.

use crate::catalog_plan::{
    PlanReleaseError, ReleasePlan, ReleaseRequest, SkipRangeMode, csv_edges, plan_release,
    skip_range_for,
};
use crate::inputs::{ObjectTooLarge, check_input_sizes};
use crate::open::Opened;
use crate::{Hinted, ReleaseConfig};
use olmkit_bundle::generate::collect::collect;
use olmkit_bundle::generate::{GenerateBundleError, GenerateInputs, GenerateOptions, metadata};
use olmkit_bundle::{Bundle, LoadBundleError};
use olmkit_catalog::catalog_dir::CatalogDir;
use olmkit_catalog::change::Change;
use olmkit_catalog::declcfg::DeclarativeConfig;
use olmkit_catalog::render::{RenderBundleError, RenderOptions, render_bundle_release};
use olmkit_core::epoch::{self, ReadEpochError};
use olmkit_core::image_ref::repository_as_written;
use olmkit_image::images::ManagerCommand;
use semver::Version;
use serde_json::Value;
use std::path::PathBuf;
use thiserror::Error;

/// The hint of every `SOURCE_DATE_EPOCH` problem.
const EPOCH_HINT: &str = "unset SOURCE_DATE_EPOCH or set it to seconds since 1970";

/// The hint of a placeholder manager image.
pub const PLACEHOLDER_HINT: &str =
    "pass --operator-repo REGISTRY/NAME (the image the CSV should reference)";

/// Planning refused the release, or could not read what it plans from.
#[derive(Debug, Error)]
pub enum PlanError {
    /// An input object is larger than etcd stores (checked before anything else is read
    /// from the inputs; a validation error, as the release reports it).
    #[error(transparent)]
    InputSizes(Box<ObjectTooLarge>),
    /// The manifests name no package (read as the generator reads it).
    #[error(transparent)]
    Generate(Box<GenerateBundleError>),
    /// A new version not above the head of a target channel.
    #[error(
        "--version {} is not above the head of channel {}, {} ({}): a release adds the new head of its channels",
        .0.version, .0.channel, .0.head, .0.head_version
    )]
    NotAboveHead(Box<HeadConflict>),
    /// The CSV's edges or skipRange cannot be derived.
    #[error(transparent)]
    Edges(Box<PlanReleaseError>),
    /// The version's bundle directory exists but is not a bundle.
    #[error(transparent)]
    Existing(Box<Hinted<LoadBundleError>>),
    /// `SOURCE_DATE_EPOCH` is not usable.
    #[error(transparent)]
    Epoch(#[from] ReadEpochError),
    /// The bundle cannot be rendered to its catalog blob.
    #[error(transparent)]
    Render(Box<RenderBundleError>),
    /// The catalog change would break the package's graph.
    #[error(transparent)]
    Graph(Box<PlanReleaseError>),
    /// The manager image is a placeholder (no registry host) and no `--operator-repo` names the
    /// real one: the release would publish the operator image under the placeholder's name.
    #[error(
        "the manifests' manager image {image:?} names no registry host: it is a placeholder (kubebuilder scaffolds controller:latest), and without --operator-repo the release would write {repo}:{version} into the CSV and build the operator image under that name"
    )]
    PlaceholderImage {
        /// The manager image as the manifests give it.
        image: String,
        /// Its repository.
        repo: String,
        /// The version released.
        version: Version,
    },
    /// The CSV's `replaces` and the first channel's new entry disagree (a bug).
    #[error("the CSV replaces {csv:?} but the catalog entry would replace {catalog:?}")]
    EdgeMismatch {
        /// The CSV's `spec.replaces`.
        csv: Option<String>,
        /// The entry's `replaces`.
        catalog: String,
    },
}

/// A target channel whose head is not below the version released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadConflict {
    /// The version released.
    pub version: Version,
    /// The channel.
    pub channel: String,
    /// Its head bundle.
    pub head: String,
    /// The head's version.
    pub head_version: Version,
}

impl PlanError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            PlanError::InputSizes(e) => e.hints(),
            PlanError::Existing(h) => h.hints.clone(),
            PlanError::Generate(e) => e.hint().into_iter().collect(),
            PlanError::NotAboveHead(c) => {
                let (channel, head_version) = (&c.channel, &c.head_version);
                let next = Version::new(
                    head_version.major,
                    head_version.minor,
                    head_version.patch + 1,
                );
                vec![
                    format!("release a version above {head_version} (e.g. --version {next})"),
                    format!(
                        "to add an already released version to channel {channel}, use `bundle-tool promote VERSION --to {channel}`"
                    ),
                ]
            }
            PlanError::Epoch(_) => vec![EPOCH_HINT.into()],
            PlanError::PlaceholderImage { .. } => vec![PLACEHOLDER_HINT.into()],
            PlanError::Graph(_) => vec![
                "nothing was written; `bundle-tool graph` shows the channels as they are".into(),
            ],
            PlanError::Edges(_) | PlanError::Render(_) | PlanError::EdgeMismatch { .. } => {
                Vec::new()
            }
        }
    }

    /// False only for the edge mismatch, which is a bug.
    pub fn is_user_error(&self) -> bool {
        !matches!(self, PlanError::EdgeMismatch { .. })
    }
}

/// A planned release: the second stage, which [`Planned::generate`](crate::generate)
/// generates.
#[derive(Debug)]
pub struct Planned {
    pub(crate) config: ReleaseConfig,
    pub(crate) catalog: CatalogDir,
    pub(crate) inputs: GenerateInputs,
    pub(crate) decisions: Decisions,
}

impl Planned {
    /// What was decided.
    pub fn decisions(&self) -> &Decisions {
        &self.decisions
    }
}

impl Opened {
    /// Plans the release from the operator's manifests `inputs`, as the caller loaded them:
    /// refuses objects larger than etcd stores, then decides (see the module docs).
    pub fn plan(self, inputs: GenerateInputs) -> Result<Planned, PlanError> {
        check_input_sizes(&inputs).map_err(|e| PlanError::InputSizes(Box::new(e)))?;
        let decisions = decide(&self.config, self.version, &self.catalog, &inputs)?;
        Ok(Planned {
            config: self.config,
            catalog: self.catalog,
            inputs,
            decisions,
        })
    }
}

/// The repositories of the release's images; `None` where nothing names one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageNames {
    /// The repository of the manifests' manager image, as it is.
    pub current_repo: Option<String>,
    /// The operator image's repository.
    pub operator_repo: Option<String>,
    /// The bundle image's repository.
    pub bundle_repo: Option<String>,
    /// The catalog image's repository.
    pub catalog_repo: Option<String>,
}

/// What the plan stage decided.
#[derive(Debug)]
pub struct Decisions {
    /// The version released.
    pub version: Version,
    /// Package name.
    pub package: String,
    /// Target channels, in order, without repeats.
    pub channels: Vec<String>,
    /// `<bundle_root>/<package>/<version>`.
    pub bundle_dir: PathBuf,
    /// For a re-release: the bundle image its catalog entry names.
    pub recorded_image: Option<String>,
    /// `--skip-range` as the planner's mode.
    pub skip_mode: SkipRangeMode,
    /// The CSV's `spec.replaces`.
    pub replaces: Option<String>,
    /// The CSV's `spec.skips`.
    pub skips: Vec<String>,
    /// The CSV's `olm.skipRange`.
    pub skip_range: Option<String>,
    /// The version's bundle directory, when it exists already.
    pub existing: Option<Bundle>,
    /// The CSV's `createdAt`.
    pub created_at: String,
    /// The images' build time.
    pub image_time: jiff::Timestamp,
    /// Image repositories.
    pub names: ImageNames,
    /// The command of the manifests' manager container, where the operator image puts its
    /// binary (`None`: no command, the pod runs the image's entrypoint).
    pub manager_command: Option<ManagerCommand>,
    /// The package's default channel after the release.
    pub default_channel: Option<String>,
    /// The default channel the bundle's annotations name (only one of its own channels).
    pub bundle_default: Option<String>,
}

/// Decides the release of `version` from `inputs` into `catalog`.
fn decide(
    config: &ReleaseConfig,
    version: Version,
    catalog: &CatalogDir,
    inputs: &GenerateInputs,
) -> Result<Decisions, PlanError> {
    let version = &version;
    let cfg = &catalog.config;
    let package = package_name(config, inputs)?;
    let channels = target_channels(config, cfg, &package, version);
    let bundle_dir = config.bundle_root.join(&package).join(version.to_string());

    // Edges of the CSV: the recorded ones for a released version, else the first channel's head.
    let recorded_image = released_bundle(cfg, &package, version).map(|b| b.image.clone());
    if recorded_image.is_none() {
        require_above_heads(cfg, &package, &channels, version)?;
    }
    let skip_mode = skip_mode(config);
    let (replaces, skips, skip_range) =
        csv_edge_options(cfg, &package, &channels, version, &skip_mode)?;

    // createdAt: a released bundle keeps its own, so that re-running its release is a no-op.
    let existing = if bundle_dir.exists() {
        Some(olmkit_bundle::load_bundle_dir(&bundle_dir).map_err(|e| {
            PlanError::Existing(Box::new(Hinted::new(
                e,
                [format!(
                    "{} exists but is not a bundle; move it away",
                    bundle_dir.display()
                )],
            )))
        })?)
    } else {
        None
    };
    let created_at = created_at(existing.as_ref())?;
    // Images carry the time of their release, the CSV's createdAt (SOURCE_DATE_EPOCH, or now
    // without it), read back from the string a re-run will read too: a re-run then reproduces
    // the published digests instead of making every image differ by its build time alone.
    let image_time = match created_at.parse::<jiff::Timestamp>() {
        Ok(t) => t,
        Err(_) => epoch::source_date_epoch()?.unwrap_or(jiff::Timestamp::UNIX_EPOCH),
    };
    let names = image_names(config, inputs);
    refuse_placeholder(config, inputs, &names, version)?;
    let manager_command = manager_command(inputs);
    let default_channel = config.default_channel.clone().or_else(|| {
        cfg.packages
            .iter()
            .find(|p| p.name == package)
            .map(|p| p.default_channel.clone())
            .filter(|d| channels.contains(d))
    });
    let bundle_default = default_channel.clone().filter(|d| channels.contains(d));
    Ok(Decisions {
        version: version.clone(),
        package,
        channels,
        bundle_dir,
        recorded_image,
        skip_mode,
        replaces,
        skips,
        skip_range,
        existing,
        created_at,
        image_time,
        names,
        manager_command,
        default_channel,
        bundle_default,
    })
}

/// The package name, where the bundle generator reads it: `--package`, else the base CSV's
/// name without its version (olmkit-bundle's `collect` finds the base CSV).
fn package_name(config: &ReleaseConfig, inputs: &GenerateInputs) -> Result<String, PlanError> {
    let generate_err = |e| PlanError::Generate(Box::new(e));
    let collected =
        collect(inputs, config.package.as_deref(), &mut Vec::new()).map_err(generate_err)?;
    let options = GenerateOptions {
        package: config.package.clone(),
        ..Default::default()
    };
    metadata::package_name(&options, &collected).map_err(generate_err)
}

/// A manager image with no registry host (`controller:latest`, `controller`, `my-operator:v1`)
/// is a placeholder, kubebuilder's until `make deploy IMG=...` sets one: without
/// `--operator-repo` the release would write `controller:<version>` into the CSV and publish
/// the operator image under it, so it is refused. An explicit `docker.io/...` is a registry.
fn refuse_placeholder(
    config: &ReleaseConfig,
    inputs: &GenerateInputs,
    names: &ImageNames,
    version: &Version,
) -> Result<(), PlanError> {
    if config.operator_repo.is_some() {
        return Ok(());
    }
    let Some(image) = inputs.manager_image() else {
        return Ok(());
    };
    if names_registry(image) {
        return Ok(());
    }
    Err(PlanError::PlaceholderImage {
        image: image.to_string(),
        repo: names.current_repo.clone().unwrap_or_default(),
        version: version.clone(),
    })
}

/// Whether `reference` names its registry host as written (`quay.io/...`, `localhost:5000/...`,
/// `docker.io/...`), by olmkit-core's reference grammar. A reference that does not parse is left
/// to validation, which names it.
pub fn names_registry(reference: &str) -> bool {
    match olmkit_core::image_ref::ImageRef::parse(reference) {
        Ok(r) => {
            r.domain != "docker.io"
                || reference.starts_with("docker.io/")
                || reference.starts_with("index.docker.io/")
        }
        Err(_) => true,
    }
}

/// The command of the manifests' manager container (olmkit-bundle's rule over their
/// Deployments, the first of which becomes the CSV's first deployment).
fn manager_command(inputs: &GenerateInputs) -> Option<ManagerCommand> {
    let c = inputs.manager_container()?;
    let doc = inputs.manifests.iter().find(|d| d.kind() == "Deployment")?;
    crate::manager::manager_command_of_container(
        &c,
        &format!("spec.template.spec.containers[{}]", c.index),
        format!(
            "{} (Deployment {})",
            doc.file,
            olmkit_core::object::name(&doc.object)
        ),
    )
}

/// Image names. The manifests' manager image says which containers run the operator; the
/// release points them at REPO:VERSION (like `kustomize edit set image controller=...`).
fn image_names(config: &ReleaseConfig, inputs: &GenerateInputs) -> ImageNames {
    let current_repo = inputs
        .manager_image()
        .map(|r| repository_as_written(r).to_string());
    let operator_repo = match &config.operator_repo {
        Some(r) => Some(repository_as_written(r).to_string()),
        None => current_repo.clone(),
    };
    let repo_for = |explicit: &Option<String>, suffix: &str| -> Option<String> {
        explicit
            .as_ref()
            .map(|r| repository_as_written(r).to_string())
            .or_else(|| operator_repo.as_ref().map(|o| format!("{o}{suffix}")))
    };
    ImageNames {
        bundle_repo: repo_for(&config.bundle_repo, "-bundle"),
        catalog_repo: repo_for(&config.catalog_repo, "-catalog"),
        current_repo,
        operator_repo,
    }
}

/// The catalog changes for the bundle `loaded`, whose catalog entry names `image`; checks that
/// the CSV's `replaces` is the edge the first target channel gets.
pub fn plan_catalog(
    planned: &Decisions,
    catalog: &CatalogDir,
    loaded: &Bundle,
    image: &str,
) -> Result<ReleasePlan, PlanError> {
    let blob = render_bundle_release(loaded, image, &RenderOptions::default())
        .map_err(|e| PlanError::Render(Box::new(e)))?;
    let plan = plan_release(
        &catalog.config,
        &ReleaseRequest {
            bundle: blob,
            channels: planned.channels.clone(),
            default_channel: planned.default_channel.clone(),
            skip_range: planned.skip_mode.clone(),
        },
    )
    .map_err(|e| PlanError::Graph(Box::new(e)))?;
    let first = planned.channels.first();
    let first_edge = plan.changes.iter().find_map(|c| match c {
        Change::AddEntry { channel, entry, .. } if Some(channel) == first => {
            Some(entry.replaces.clone())
        }
        Change::AddChannel(ch) if Some(&ch.name) == first => {
            ch.entries.first().map(|e| e.replaces.clone())
        }
        _ => None,
    });
    if let Some(edge) = first_edge
        && edge != planned.replaces.clone().unwrap_or_default()
    {
        return Err(PlanError::EdgeMismatch {
            csv: planned.replaces.clone(),
            catalog: edge,
        });
    }
    Ok(plan)
}

/// The catalog's bundle of `package` at `version`, when that version is released.
fn released_bundle<'a>(
    cfg: &'a DeclarativeConfig,
    package: &str,
    version: &Version,
) -> Option<&'a olmkit_catalog::declcfg::Bundle> {
    cfg.bundles.iter().find(|b| {
        b.package == package
            && olmkit_catalog::model::bundle_version(b)
                .is_some_and(|v| v.cmp_precedence(version).is_eq())
    })
}

/// A new version must be above the head of every target channel that has one: the release
/// makes it the new head (no channel gets a second one). Refused here, before a bundle is
/// generated, because later the refusal would surface as a validation error about config/.
fn require_above_heads(
    cfg: &DeclarativeConfig,
    package: &str,
    channels: &[String],
    version: &Version,
) -> Result<(), PlanError> {
    // This package's model only: graphs of the whole catalog would cost a big catalog a third
    // of a second for nothing.
    let scope = cfg.only_package(package);
    let model = olmkit_catalog::model::Model::new(&scope, None);
    let Some(pkg) = model.package(package) else {
        return Ok(());
    };
    for channel in channels {
        let Some(head) = pkg.channel(channel).and_then(|c| c.head()) else {
            continue;
        };
        let Some(head_version) = pkg.version_of(head).cloned() else {
            continue;
        };
        if version.cmp_precedence(&head_version).is_gt() {
            continue;
        }
        return Err(PlanError::NotAboveHead(Box::new(HeadConflict {
            version: version.clone(),
            channel: channel.clone(),
            head: head.to_string(),
            head_version,
        })));
    }
    Ok(())
}

/// Versions of `package` in the catalog above `version`. Re-running the release of `version`
/// once these exist cannot rebuild its catalog image: today's catalog holds them, the image
/// released with `version` did not, and what else changed since (default channel, promotions,
/// new channels) is not recorded, so the old catalog cannot be reconstructed exactly.
pub fn later_versions(cfg: &DeclarativeConfig, package: &str, version: &Version) -> Vec<Version> {
    let mut out: Vec<Version> = cfg
        .bundles
        .iter()
        .filter(|b| b.package == package)
        .filter_map(olmkit_catalog::model::bundle_version)
        .filter(|v| v.cmp_precedence(version).is_gt())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The CSV's upgrade edges: `spec.replaces`, `spec.skips`, the `olm.skipRange` annotation.
type CsvEdges = (Option<String>, Vec<String>, Option<String>);

/// `--skip-range` as the planner's mode.
fn skip_mode(config: &ReleaseConfig) -> SkipRangeMode {
    match config.skip_range.as_deref() {
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
) -> Result<CsvEdges, PlanError> {
    let released = released_bundle(cfg, package, version).is_some();
    let edges_err = |e| PlanError::Edges(Box::new(e));
    let edges = csv_edges(cfg, package, channels, version).map_err(edges_err)?;
    let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
    Ok(match (released, edges) {
        (true, Some(e)) => (non_empty(&e.replaces), e.skips, non_empty(&e.skip_range)),
        (true, None) => (None, Vec::new(), None),
        (false, e) => (
            e.map(|e| e.replaces),
            Vec::new(),
            non_empty(&skip_range_for(mode, version).map_err(edges_err)?),
        ),
    })
}

/// `createdAt`: a released bundle keeps its own, so that re-running its release is a no-op;
/// a new one gets SOURCE_DATE_EPOCH (or now).
fn created_at(existing: Option<&Bundle>) -> Result<String, PlanError> {
    let recorded = existing
        .and_then(|b| b.csv())
        .and_then(|c| c.object.pointer("/metadata/annotations/createdAt"))
        .and_then(Value::as_str);
    match recorded {
        Some(c) => Ok(c.to_string()),
        None => Ok(epoch::build_time().map(epoch::rfc3339)?),
    }
}

/// The channels to release into: as given; else, for a released version, the channels it is
/// in (so that re-running its release needs no flags); else the package's default channel, or
/// `alpha` for a new package.
fn target_channels(
    config: &ReleaseConfig,
    cfg: &DeclarativeConfig,
    package: &str,
    version: &Version,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &config.channels {
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    if out.is_empty()
        && let Some(b) = released_bundle(cfg, package, version)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(channels: &[&str]) -> ReleaseConfig {
        ReleaseConfig {
            channels: channels.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn channels_are_the_given_ones_without_repeats_else_alpha_for_a_new_package() {
        let cfg = DeclarativeConfig::default();
        let v = Version::new(0, 1, 0);
        assert_eq!(
            target_channels(&config(&["stable", "alpha", "stable"]), &cfg, "p", &v),
            ["stable", "alpha"]
        );
        assert_eq!(target_channels(&config(&[]), &cfg, "p", &v), ["alpha"]);
    }

    #[test]
    fn skip_range_flag_modes() {
        let mut c = config(&[]);
        assert_eq!(skip_mode(&c), SkipRangeMode::None);
        c.skip_range = Some(String::new());
        assert_eq!(skip_mode(&c), SkipRangeMode::BelowNew);
        c.skip_range = Some(">=0.1.0 <0.2.0".into());
        assert_eq!(
            skip_mode(&c),
            SkipRangeMode::Explicit(">=0.1.0 <0.2.0".into())
        );
    }

    #[test]
    fn the_manager_command_comes_from_the_manager_container() {
        let doc = olmkit_bundle::Manifest {
            file: "config/manager/manager.yaml".into(),
            doc_index: 1,
            item: None,
            object: serde_json::json!({
                "kind": "Deployment",
                "metadata": {"name": "controller-manager"},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "proxy", "image": "p:1", "command": ["/proxy"]},
                    {"name": "manager", "image": "m:1", "command": ["/manager"]}
                ]}}}
            }),
        };
        let inputs = GenerateInputs {
            manifests: vec![doc],
            ..Default::default()
        };
        let c = manager_command(&inputs).unwrap();
        assert_eq!(c.program, "/manager");
        assert_eq!(
            c.what(),
            "config/manager/manager.yaml (Deployment controller-manager): field spec.template.spec.containers[1].command[0]"
        );
    }

    #[test]
    fn placeholder_images_name_no_registry() {
        for placeholder in [
            "controller:latest",
            "controller",
            "example/op:v1",
            "op@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(!names_registry(placeholder), "{placeholder}");
        }
        for real in [
            "quay.io/example/op:0.1.0",
            "localhost:5000/op",
            "localhost/op",
            "docker.io/library/op:1",
            "index.docker.io/me/op",
            "registry.example.com:443/team/op",
        ] {
            assert!(names_registry(real), "{real}");
        }
        let e = PlanError::PlaceholderImage {
            image: "controller:latest".into(),
            repo: "controller".into(),
            version: Version::new(0, 1, 0),
        };
        assert!(e.to_string().contains("controller:0.1.0"), "{e}");
        assert_eq!(
            e.hints(),
            ["pass --operator-repo REGISTRY/NAME (the image the CSV should reference)"]
        );
        assert!(e.is_user_error());
    }

    #[test]
    fn a_version_below_a_head_names_the_next_patch_and_promote() {
        let e = PlanError::NotAboveHead(Box::new(HeadConflict {
            version: Version::new(0, 2, 0),
            channel: "stable".into(),
            head: "p.v0.3.0".into(),
            head_version: Version::new(0, 3, 0),
        }));
        assert_eq!(
            e.to_string(),
            "--version 0.2.0 is not above the head of channel stable, p.v0.3.0 (0.3.0): a release adds the new head of its channels"
        );
        let hints = e.hints();
        assert!(hints[0].contains("--version 0.3.1"), "{hints:?}");
        assert!(
            hints[1].contains("promote VERSION --to stable"),
            "{hints:?}"
        );
        assert!(e.is_user_error());
    }
}
