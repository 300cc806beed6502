//! Scaffolding of Kubernetes operators on kube-rs and `olmkit-runtime`: what `bundle-tool init`
//! and `bundle-tool create api` generate, modelled on kubebuilder and operator-sdk (`init`,
//! `create api`, the `deploy-image/v1-alpha` plugin, the `PROJECT` file).
//!
//! Everything here is pure: [`init`] returns the files of a new project, [`create_api`] the files
//! to add or rewrite in an existing one (given its [`Project`] and the text of the files it
//! edits, [`create_api_reads`]); the same inputs always give the same bytes. [`write`] applies
//! them to disk all or nothing.
//!
//! Files the user owns (`src/lib.rs`, `src/rbac.rs`, kustomizations, ...) are edited only at
//! marker comments ([`markers`]); the base CSV is read and rewritten as YAML, like
//! operator-sdk's `generate kustomize manifests` does. The generated RBAC roles come from the
//! runtime's own role generator, run in-process; the CRDs are written by the project's first
//! `make manifests` (they come from its Rust types).

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod api;
mod conversion;
mod csv;
mod init;
pub mod markers;
pub mod names;
pub mod project;
mod rbac;
mod rust;
mod template;
pub mod toolkit;
pub mod write;

use thiserror::Error;

pub use api::{create_api, create_api_reads};
pub use init::{DEFAULT_DOMAIN, init};
pub use project::Project;
pub use toolkit::Toolkit;

/// Flags of `init`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitOptions {
    /// `--domain`: the domain of every API group (kubebuilder's default `my.domain`).
    pub domain: String,
    /// `--project-name` (default: the directory's name).
    pub project_name: String,
    /// `--repo`: where the source lives, e.g. `github.com/example/whalesay-operator` (default
    /// `<domain>/<project-name>`).
    pub repo: Option<String>,
    /// Where the new project takes the toolkit's crates from.
    pub toolkit: Toolkit,
}

/// The deploy-image flags of `create api` (kubebuilder's `deploy-image/v1-alpha` plugin).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployImage {
    /// `--image`: the image the Deployment runs.
    pub image: String,
    /// `--image-container-command`: command and arguments, comma-separated.
    pub command: Option<String>,
    /// `--image-container-port`.
    pub port: Option<u16>,
    /// `--run-as-user`.
    pub run_as_user: Option<i64>,
}

/// Flags of `create api`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateApiOptions {
    /// `--group`, without the domain.
    pub group: String,
    /// `--version`.
    pub version: String,
    /// `--kind`.
    pub kind: String,
    /// `--plural` (default: kubebuilder's pluralization of the kind).
    pub plural: Option<String>,
    /// `--short-names` (kubectl short names of the resource).
    pub short_names: Vec<String>,
    /// `--namespaced`: none for the default (namespaced for a new kind, the kind's own scope for
    /// an existing one).
    pub namespaced: Option<bool>,
    /// `--resource` (default true): generate the API types.
    pub resource: bool,
    /// `--controller` (default true): generate the controller.
    pub controller: bool,
    /// `--storage`: make this new version the storage version and conversion hub of an existing
    /// kind (default: the current storage version stays).
    pub storage: bool,
    /// `--image` and friends.
    pub deploy_image: Option<DeployImage>,
}

/// A file and its content, relative to the project root (`/`-separated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// The path.
    pub path: String,
    /// The content.
    pub contents: String,
}

/// Whether a change creates a file or rewrites one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A new file.
    Create,
    /// An existing file, rewritten.
    Update,
}

/// One file `create api` adds or rewrites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// Create or update.
    pub kind: ChangeKind,
    /// The file.
    pub file: GeneratedFile,
}

/// What `create api` does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// The files, in the order they are listed.
    pub files: Vec<FileChange>,
    /// Remarks for the user (what was not done and why).
    pub notes: Vec<String>,
}

/// Why scaffolding failed. Each names the flag or the file.
#[derive(Debug, Error)]
pub enum ScaffoldError {
    /// A flag's value is not acceptable.
    #[error("{flag} {value:?}: {reason}")]
    InvalidFlag {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
    /// The flags do not fit the project (a kind that exists, a version that does not...).
    #[error("{flag}: {message}")]
    Conflict {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        message: String,
        /// What to do about it.
        hint: Option<String>,
    },
    /// A file create api edits is not there.
    #[error("{file}: not found; create api edits it")]
    MissingFile {
        /// The file.
        file: String,
    },
    /// A marker comment create api inserts at is gone.
    #[error("{file}: the marker comment `{marker}` is missing")]
    MissingMarker {
        /// The file.
        file: String,
        /// The marker.
        marker: String,
    },
    /// A marker comment is there more than once.
    #[error("{file}: the marker comment `{marker}` is there more than once")]
    DuplicateMarker {
        /// The file.
        file: String,
        /// The marker.
        marker: String,
    },
    /// The PROJECT file is unreadable.
    #[error("{file}: {message}")]
    Project {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A file create api reads could not be understood.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A bug (a template that does not render).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ScaffoldError {
    /// What the user can do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::InvalidFlag { .. } => None,
            Self::Conflict { hint, .. } => hint.clone(),
            Self::MissingFile { .. } => Some(
                "run create api in the root of a project made by `bundle-tool init` (where PROJECT is)"
                    .into(),
            ),
            Self::MissingMarker { marker, .. } => Some(format!(
                "put the comment `{marker}` back where bundle-tool init wrote it (create api inserts above it), or make this change by hand"
            )),
            Self::DuplicateMarker { .. } => Some("keep one of them".into()),
            Self::Project { .. } => Some(
                "PROJECT is written by bundle-tool init and create api; restore it from version control"
                    .into(),
            ),
            Self::Parse { .. } => Some("fix the file so that it compiles, then retry".into()),
            Self::Internal(_) => Some("this is a bug in bundle-tool; please report it".into()),
        }
    }
}
