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

pub mod collect;
pub mod csv;
pub mod metadata;
pub mod rbac;
pub mod webhooks;

use crate::load::InputDocument;
use olmkit_core::docs::RenderDocumentError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use thiserror::Error;

/// Settings of one generation (the command-line flags).
#[derive(Clone, Debug, Default)]
pub struct GenerateOptions {
    /// Bundle version (semver), e.g. `0.1.0`.
    pub version: String,
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
    pub manifests: Vec<InputDocument>,
    /// `--base-csv`, when the base is not in the stream.
    pub base_csv: Option<InputDocument>,
    /// `--samples`: custom resources for `alm-examples`, in addition to those in the stream.
    pub samples: Vec<InputDocument>,
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
            GenerateBundleError::NoPackage => {
                Some("pass --package <name> or name the base CSV `<package>.v0.0.0`".into())
            }
            GenerateBundleError::ManyBaseCsvs(_) => Some(
                "keep one base CSV in config/manifests/bases, or pass the one to use with --base-csv and remove the others from the stream".into(),
            ),
            GenerateBundleError::Duplicate { .. } => {
                Some("remove one of the two definitions from the kustomization".into())
            }
            GenerateBundleError::Invalid { .. } | GenerateBundleError::Option { .. } => None,
            GenerateBundleError::Render(_) => None,
        }
    }

    pub(crate) fn invalid(
        doc: &InputDocument,
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

/// Generates the bundle's files from `inputs`. Pure: no file is read or written.
pub fn generate_bundle(
    inputs: &GenerateInputs,
    options: &GenerateOptions,
) -> Result<GeneratedBundle, GenerateBundleError> {
    let version =
        semver::Version::parse(&options.version).map_err(|e| GenerateBundleError::Option {
            flag: "version",
            value: options.version.clone(),
            message: format!("not a semantic version (MAJOR.MINOR.PATCH): {e}"),
        })?;
    let mut notes = Vec::new();
    let collected = collect::collect(inputs, &mut notes)?;
    let package = metadata::package_name(options, &collected)?;
    let channels = metadata::channels(options)?;
    let rbac = rbac::split(&collected);
    let hooks = webhooks::derive(&collected, &mut notes)?;
    let csv = csv::build(
        &collected, &rbac, &hooks, options, &package, &version, &mut notes,
    )?;
    let files = metadata::render_files(
        &collected, &rbac, &hooks, &csv, &package, &channels, options, &mut notes,
    )?;
    Ok(GeneratedBundle {
        csv_name: crate::naming::csv_name(&package, &version.to_string()),
        package,
        files,
        notes,
    })
}
