//! Bundle generation: an operator's manifests in, the files of a registry+v1 bundle out.
//!
//! This is what `operator-sdk generate bundle` does, as a pure function: no I/O, no clock (the
//! caller passes `createdAt`), so the same inputs always give byte-identical files. The input
//! is the output of `kubectl kustomize config/manifests` (or any stream of manifests), plus a
//! base CSV carrying the hand-written content (description, icon, maintainers, descriptors...),
//! which regeneration keeps. Steps:
//!
//! 1. [`collect`] sorts the documents by role (CRDs, Deployments, RBAC, webhooks, samples...),
//!    checking the fields later steps read and naming the document on error.
//! 2. [`rbac`] turns the (Cluster)Roles bound to the operator's service accounts into CSV
//!    permissions, leaving other RBAC as bundle manifests (operator-sdk's split).
//! 3. [`webhooks`] derives `webhookdefinitions` from admission webhook configurations and from
//!    CRDs with a conversion webhook, resolving Service → Deployment → container port.
//! 4. [`csv`] assembles the CSV; [`metadata`] renders annotations, Dockerfile and file names.
//!
//! What OLM does at install time shapes some choices, cited where they are made.
//!
//! Where bundle-tool deliberately differs from operator-sdk (`internal/generate/...` at
//! v1.38.0), the difference is an [`Improvement`]: on by default, each can be turned off
//! ([`Settings::improvements`]), and [`Settings::upstream_compat`] turns them all off and also
//! reproduces the serialization artifacts of operator-sdk's typed Go objects ([`upstream`]).

pub mod collect;
pub mod csv;
pub mod kustomize;
pub mod metadata;
pub mod project;
pub mod rbac;
pub mod set_image;
pub mod supported;
pub mod upstream;
pub mod webhooks;

use crate::model::Manifest;
use olmkit_core::docs::RenderDocumentError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use thiserror::Error;

/// Settings of one generation (the command-line flags).
#[derive(Clone, Debug, Default)]
pub struct GenerateOptions {
    /// Bundle version (`--version`, parsed by [`parse_version_flag`]); `None`: the base
    /// CSV's `spec.version`, else 0.0.0.
    pub version: Option<semver::Version>,
    /// Package name; defaults to the base CSV's name without its `.vX.Y.Z` suffix.
    pub package: Option<String>,
    /// Channels; defaults to `alpha` like operator-sdk.
    pub channels: Vec<String>,
    /// Default channel; defaults to the only channel when there is exactly one.
    pub default_channel: Option<String>,
    /// `spec.replaces`.
    pub replaces: Option<String>,
    /// `spec.skips`.
    pub skips: Vec<String>,
    /// `olm.skipRange` annotation.
    pub skip_range: Option<String>,
    /// `createdAt` annotation (RFC 3339), from `SOURCE_DATE_EPOCH` or the clock, chosen by the
    /// caller so that generation itself stays deterministic.
    pub created_at: String,
    /// Tool name and version for the `builder` annotations, e.g. `bundle-tool-v0.1.0`.
    pub builder: String,
}

/// Everything generation reads.
#[derive(Clone, Debug, Default)]
pub struct GenerateInputs {
    /// The operator's manifests (one stream).
    pub manifests: Vec<Manifest>,
    /// `--base-csv`, when the base is not in the stream.
    pub base_csv: Option<Manifest>,
    /// `--samples`: custom resources for `alm-examples`, in addition to those in the stream.
    pub samples: Vec<Manifest>,
}

impl GenerateInputs {
    /// The operator's manager image among the manifests' Deployments ([`manager_image`]).
    pub fn manager_image(&self) -> Option<&str> {
        manager_image(self.deployments())
    }

    /// The operator's manager container among the manifests' Deployments
    /// ([`manager_container`]).
    pub fn manager_container(&self) -> Option<ManagerContainer<'_>> {
        manager_container(self.deployments())
    }

    fn deployments(&self) -> impl Iterator<Item = &serde_json::Value> {
        self.manifests
            .iter()
            .filter(|d| d.kind() == "Deployment")
            .map(|d| &d.object)
    }
}

/// The manager-container rule lives with the CSV view, which it reads (both kinds of
/// deployments keep their pod template at `/spec/template`).
use olmkit_core::csv::{ManagerContainer, manager_container};

/// The image of the operator's manager: the `image` of [`manager_container`].
pub fn manager_image<'a>(
    deployments: impl Iterator<Item = &'a serde_json::Value>,
) -> Option<&'a str> {
    manager_container(deployments).and_then(|c| c.image())
}

/// One deliberate difference from `operator-sdk generate bundle` (v1.38.0). Each is on by
/// default and can be turned off where someone needs operator-sdk's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Improvement {
    /// Set `spec.minKubeVersion`, when the base has none, to the lowest Kubernetes serving
    /// every API the bundle uses (operator-sdk leaves it unset).
    MinKubeVersion,
    /// `spec.relatedImages` lists every container image of the install Deployments and keeps
    /// the base's entries (operator-sdk's `FindRelatedImages` lists only `RELATED_IMAGE_*`
    /// variables and drops the base's list).
    RelatedImages,
    /// Identical RBAC rules granted to one service account through several bindings are listed
    /// once (operator-sdk's `applyRoles` appends them all).
    DedupRbacRules,
    /// Bindings kept as bundle manifests lose the operator's service accounts already covered
    /// by the CSV, and a role they still reference is kept (operator-sdk's
    /// `SplitCSVPermissionsObjects` ships those bindings unmodified and drops the role).
    RbacSplit,
    /// A service account of an install Deployment with no bound role still gets an empty
    /// `permissions` entry, so that OLM creates it (operator-sdk leaves it out, and the pods
    /// cannot start).
    ServiceAccountEntries,
    /// Owned CRD entries not described by the base get a `displayName` (the kind) and a
    /// `description` (the schema's, or another version's entry); operator-sdk's
    /// `applyCustomResourceDefinitions` writes only name, version and kind.
    CrdDescriptions,
    /// The `containerImage` annotation (the manager's image), `capabilities: Basic Install`
    /// and `spec.displayName` (the package) when the base lacks them, and the base's
    /// `alm-examples` when there are no samples and its `webhookdefinitions` when the
    /// manifests define no webhook (operator-sdk writes `[]` and drops them).
    CsvDefaults,
    /// With exactly one channel and no `--default-channel`, that channel is the default
    /// (operator-sdk writes no default-channel annotation).
    ImpliedDefaultChannel,
    /// Volume mounts at OLM's webhook certificate paths (and their volumes) are removed from
    /// webhook-serving Deployments; operator-sdk relies on a kustomize patch in
    /// `config/manifests` to do it.
    DropCertMounts,
    /// With a conversion webhook, `installModes` supports only AllNamespaces, the only mode
    /// OLM accepts for it (operator-sdk copies the base's modes and the bundle fails
    /// validation).
    ConversionInstallModes,
    /// Services that only route admission webhooks are left out or lose those ports: OLM
    /// creates its own `<deployment>-service` for them (operator-sdk ships them).
    DropWebhookServices,
}

impl Improvement {
    /// Every improvement, in documentation order.
    pub const ALL: [Improvement; 11] = [
        Improvement::MinKubeVersion,
        Improvement::RelatedImages,
        Improvement::DedupRbacRules,
        Improvement::RbacSplit,
        Improvement::ServiceAccountEntries,
        Improvement::CrdDescriptions,
        Improvement::CsvDefaults,
        Improvement::ImpliedDefaultChannel,
        Improvement::DropCertMounts,
        Improvement::ConversionInstallModes,
        Improvement::DropWebhookServices,
    ];

    /// The name used on the command line (`--without <name>`).
    pub fn name(self) -> &'static str {
        match self {
            Improvement::MinKubeVersion => "min-kube-version",
            Improvement::RelatedImages => "related-images",
            Improvement::DedupRbacRules => "dedup-rbac-rules",
            Improvement::RbacSplit => "rbac-split",
            Improvement::ServiceAccountEntries => "service-account-entries",
            Improvement::CrdDescriptions => "crd-descriptions",
            Improvement::CsvDefaults => "csv-defaults",
            Improvement::ImpliedDefaultChannel => "implied-default-channel",
            Improvement::DropCertMounts => "drop-cert-mounts",
            Improvement::ConversionInstallModes => "conversion-install-modes",
            Improvement::DropWebhookServices => "drop-webhook-services",
        }
    }

    /// The improvement called `name`, if any.
    pub fn from_name(name: &str) -> Option<Improvement> {
        Improvement::ALL.into_iter().find(|i| i.name() == name)
    }
}

/// Which [`Improvement`]s are on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Improvements(std::collections::BTreeSet<Improvement>);

impl Default for Improvements {
    /// All of them.
    fn default() -> Self {
        Improvements(Improvement::ALL.into_iter().collect())
    }
}

impl Improvements {
    /// None of them: operator-sdk's behaviour.
    pub fn none() -> Self {
        Improvements(std::collections::BTreeSet::new())
    }
    /// True when `i` is on.
    pub fn has(&self, i: Improvement) -> bool {
        self.0.contains(&i)
    }
    /// Turns `i` off.
    pub fn remove(&mut self, i: Improvement) {
        self.0.remove(&i);
    }
}

/// Where the bundle's files go, and so how `bundle.Dockerfile` refers to them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FileLayout {
    /// bundle-tool's release layout: `bundle/<package>/<version>/` holds everything,
    /// `bundle.Dockerfile` included, with COPY sources relative to that directory.
    #[default]
    Versioned,
    /// operator-sdk's layout (`make bundle`): the bundle directory holds `manifests/`,
    /// `metadata/` and `tests/`, and `bundle.Dockerfile` is written to the project root with
    /// COPY sources `<copy_dir>/manifests` etc. (operator-sdk `bundleutil.GenerateMetadata`).
    /// `annotations.yaml` has operator-sdk's section comments.
    Sdk {
        /// The bundle directory as seen from the project root (`bundle`).
        copy_dir: String,
    },
}

/// How a generation differs from the defaults `generate_bundle` uses (our release's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Service accounts besides the Deployments' whose bound roles become CSV permissions
    /// (`--extra-service-accounts`).
    pub extra_service_accounts: Vec<String>,
    /// The improvements over operator-sdk that are on.
    pub improvements: Improvements,
    /// Write objects as operator-sdk's typed Go structs serialize them (`creationTimestamp:
    /// null`, empty `status` of Services and CRDs, `strategy: {}`, HTML-escaped
    /// `alm-examples`...), see [`upstream`].
    pub upstream_compat: bool,
    /// `layout` of the project's `PROJECT` file, for the `project_layout` metrics annotations.
    pub project_layout: Option<String>,
    /// File layout.
    pub layout: FileLayout,
    /// A scorecard configuration is already in the output directory: operator-sdk adds the
    /// test labels whenever one is there, even when this run's input has none.
    pub scorecard_in_output: bool,
}

/// The generated bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedBundle {
    /// Package name.
    pub package: String,
    /// CSV name (`<package>.v<version>`).
    pub csv_name: String,
    /// Files relative to the bundle directory.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    /// Files relative to the project root ([`FileLayout::Sdk`]'s `bundle.Dockerfile`).
    pub root_files: BTreeMap<PathBuf, Vec<u8>>,
    /// What generation decided on the user's behalf and why (printed on stderr).
    pub notes: Vec<String>,
}

impl GeneratedBundle {
    /// The generated files as a loaded [`crate::Bundle`] rooted at `root`, so it can be
    /// validated before anything is written.
    pub fn to_bundle(
        &self,
        root: &std::path::Path,
    ) -> Result<crate::Bundle, crate::LoadBundleError> {
        let files: BTreeMap<String, Vec<u8>> = self
            .files
            .iter()
            .map(|(p, b)| (p.to_string_lossy().replace('\\', "/"), b.clone()))
            .collect();
        crate::load::bundle_from_files(root, &files)
    }
}

/// Generation failed; nothing should be written.
#[derive(Debug, Error)]
pub enum GenerateBundleError {
    /// A document lacks a field generation needs, or has it in the wrong shape.
    #[error("{document}: {field}: {message}")]
    Invalid {
        /// `<source> document <n> (<Kind> <name>)`.
        document: String,
        /// Field path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Two documents define the same object differently.
    #[error("{what} is defined twice, differently: {first} and {second}")]
    Duplicate {
        /// `<Kind> <name>`.
        what: String,
        /// First document.
        first: String,
        /// Second document.
        second: String,
    },
    /// Two or more ClusterServiceVersions were given.
    #[error("more than one ClusterServiceVersion in the input: {0}")]
    ManyBaseCsvs(String),
    /// The manifests hold no Deployment to install.
    #[error(
        "no Deployment in the input manifests: a bundle needs the operator's Deployment for the CSV install strategy"
    )]
    NoDeployment,
    /// A command-line option has a bad value.
    #[error("--{flag} {value:?}: {message}")]
    Option {
        /// Flag name without dashes.
        flag: &'static str,
        /// The value.
        value: String,
        /// What is wrong.
        message: String,
    },
    /// The package name could not be determined.
    #[error("cannot tell the package name: the base CSV has no usable metadata.name")]
    NoPackage,
    /// The `PROJECT` file cannot be used.
    #[error("{file}: {field}: {message}")]
    Project {
        /// The file.
        file: String,
        /// Field path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A generated object could not be rendered.
    #[error(transparent)]
    Render(#[from] RenderDocumentError),
}

impl GenerateBundleError {
    /// How to fix it, when there is something useful to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            GenerateBundleError::NoDeployment => Some(
                "feed the operator's full manifests, e.g. `kubectl kustomize config/manifests`, which includes config/default".into(),
            ),
            GenerateBundleError::NoPackage => Some(
                "pass --package <name>, set projectName in PROJECT, or name the base CSV `<package>.v0.0.0`".into(),
            ),
            GenerateBundleError::ManyBaseCsvs(_) => Some(
                "keep one base CSV in config/manifests/bases, or pass the one to use with --base-csv and remove the others from the stream".into(),
            ),
            GenerateBundleError::Duplicate { .. } => {
                Some("remove one of the two definitions from the kustomization".into())
            }
            GenerateBundleError::Invalid { .. }
            | GenerateBundleError::Option { .. }
            | GenerateBundleError::Project { .. } => None,
            GenerateBundleError::Render(_) => None,
        }
    }

    pub(crate) fn invalid(
        doc: &Manifest,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        GenerateBundleError::Invalid {
            document: doc.label(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Generates the bundle's files from `inputs` with the default [`Settings`] (every
/// improvement, the versioned layout). Pure: no file is read or written.
pub fn generate_bundle(
    inputs: &GenerateInputs,
    options: &GenerateOptions,
) -> Result<GeneratedBundle, GenerateBundleError> {
    generate_bundle_with(inputs, options, &Settings::default())
}

/// `--version` as operator-sdk's `generate bundle` takes it
/// ([`olmkit_core::version_range::parse_version_flag`]), with this command's error.
pub fn parse_version_flag(text: &str) -> Result<semver::Version, GenerateBundleError> {
    olmkit_core::version_range::parse_version_flag(text).map_err(|e| GenerateBundleError::Option {
        flag: "version",
        value: text.to_string(),
        message: format!("not a semantic version (MAJOR.MINOR.PATCH): {e}"),
    })
}

/// The bundle version: `--version`, else the base CSV's `spec.version` (operator-sdk keeps the
/// base's name and version when `--version` is not set), else 0.0.0.
fn bundle_version(
    options: &GenerateOptions,
    c: &collect::Collected,
    notes: &mut Vec<String>,
) -> Result<semver::Version, GenerateBundleError> {
    if let Some(version) = &options.version {
        return Ok(version.clone());
    }
    let from_base = c
        .base_csv
        .as_ref()
        .and_then(|b| b.csv_view().version().map(|v| (b, v)));
    match from_base {
        Some((b, v)) => semver::Version::parse(v).map_err(|e| {
            GenerateBundleError::invalid(b, "spec.version", format!("not a semantic version: {e}"))
        }),
        None => {
            notes.push("no --version and no spec.version in the base CSV: version 0.0.0".into());
            Ok(semver::Version::new(0, 0, 0))
        }
    }
}

/// Generates the bundle's files from `inputs` as `settings` say. Pure: no file is read or
/// written.
pub fn generate_bundle_with(
    inputs: &GenerateInputs,
    options: &GenerateOptions,
    settings: &Settings,
) -> Result<GeneratedBundle, GenerateBundleError> {
    let mut notes = Vec::new();
    let collected = collect::collect(inputs, options.package.as_deref(), &mut notes)?;
    let version = bundle_version(options, &collected, &mut notes)?;
    let package = metadata::package_name(options, &collected)?;
    let channels = metadata::channels(options, settings)?;
    let rbac = rbac::split(&collected, settings);
    let hooks = webhooks::derive(&collected, settings.upstream_compat, &mut notes)?;
    let csv = csv::build(
        &collected, &rbac, &hooks, options, settings, &package, &version, &mut notes,
    )?;
    let (files, root_files) = metadata::render_files(
        &collected, &rbac, &hooks, &csv, &package, &channels, options, settings, &mut notes,
    )?;
    Ok(GeneratedBundle {
        csv_name: crate::naming::csv_name(&package, &version.to_string()),
        package,
        files,
        root_files,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use olmkit_core::csv::DEFAULT_CONTAINER_ANNOTATION;
    use serde_json::json;

    fn deployment(annotation: Option<&str>, names: &[&str]) -> serde_json::Value {
        let mut d = json!({"spec": {"template": {"spec": {"containers": names
            .iter()
            .map(|n| json!({"name": n, "image": format!("{n}:1"), "command": [format!("/{n}")]}))
            .collect::<Vec<_>>()}}}});
        if let Some(a) = annotation {
            d["spec"]["template"]["metadata"] =
                json!({"annotations": {DEFAULT_CONTAINER_ANNOTATION: a}});
        }
        d
    }

    #[test]
    fn the_manager_is_the_annotated_container_else_manager_else_the_first() {
        let pick = |d: &serde_json::Value| manager_container(std::iter::once(d)).map(|c| c.index);
        assert_eq!(pick(&deployment(None, &["proxy", "manager"])), Some(1));
        assert_eq!(pick(&deployment(Some("op"), &["manager", "op"])), Some(1));
        // An annotation naming no container is ignored.
        assert_eq!(pick(&deployment(Some("gone"), &["x", "manager"])), Some(1));
        assert_eq!(pick(&deployment(None, &["a", "b"])), Some(0));
        assert_eq!(pick(&deployment(None, &[])), None);
        let d = deployment(Some("op"), &["manager", "op"]);
        let c = manager_container(std::iter::once(&d)).unwrap();
        assert_eq!(c.image(), Some("op:1"));
        assert_eq!(c.command(), Some(vec!["/op"]));
        assert_eq!(manager_image(std::iter::once(&d)), Some("op:1"));
    }
}
