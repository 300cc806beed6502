//! Promotion: an already released bundle joins another channel of its package, without
//! breaking that channel's graph, atomically.
//!
//! Two stages, like a release's: [`Promotion::plan`] completes an interrupted promote (its
//! changeset journal lives in the catalog directory), opens the catalog, picks the package and
//! plans the change ([`crate::catalog_plan::plan_promote`]); [`Promotion::write`] writes the
//! package's file in one changeset. Every refusal happens before anything is written.

use crate::Hinted;
use crate::catalog_plan::{Outcome, PlanReleaseError, ReleasePlan, plan_promote};
use olmkit_catalog::catalog_dir::{CatalogDir, WriteCatalogError, write_package_update};
use olmkit_catalog::declcfg::LoadCatalogError;
use olmkit_core::fsio::WriteOutputError;
use std::path::PathBuf;
use thiserror::Error;

/// What to promote, as the command line gives it.
#[derive(Clone, Debug, Default)]
pub struct PromoteRequest {
    /// The catalog directory.
    pub catalog_dir: PathBuf,
    /// The package (optional when the catalog has one).
    pub package: Option<String>,
    /// The released version to promote (a leading `v` is accepted).
    pub version: String,
    /// The target channel.
    pub channel: String,
}

/// A promotion refused or failed; nothing was written unless the write itself failed.
#[derive(Debug, Error)]
pub enum PromoteError {
    /// The catalog directory does not exist.
    #[error("{}: no catalog directory", .0.display())]
    NoCatalog(PathBuf),
    /// An interrupted promote's journal cannot be completed.
    #[error(transparent)]
    Recover(Box<WriteOutputError>),
    /// The catalog does not load.
    #[error(transparent)]
    Catalog(Box<LoadCatalogError>),
    /// `--package` names no package of the catalog.
    #[error("package {package:?} is not in {}", dir.display())]
    UnknownPackage {
        /// The package asked for.
        package: String,
        /// The catalog directory.
        dir: PathBuf,
        /// The catalog's packages.
        known: Vec<String>,
    },
    /// The catalog has no package.
    #[error("{} has no package", .0.display())]
    NoPackage(PathBuf),
    /// The catalog has several packages and none was named.
    #[error("the catalog has several packages")]
    SeveralPackages(Vec<String>),
    /// The promotion would break the catalog.
    #[error(transparent)]
    Plan(Box<Hinted<PlanReleaseError>>),
    /// Writing the package's file failed.
    #[error(transparent)]
    Write(Box<WriteCatalogError>),
}

impl PromoteError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            PromoteError::NoCatalog(_) => {
                vec!["promote works on a released catalog; pass --catalog-dir".into()]
            }
            PromoteError::Recover(_) => vec![
                "an interrupted promote left a journal that cannot be completed; check that the catalog directory is writable".into(),
            ],
            PromoteError::Catalog(_) => {
                vec!["fix the catalog first: bundle-tool catalog validate".into()]
            }
            PromoteError::UnknownPackage { known, .. } if known.is_empty() => vec![
                "the catalog has no package yet: release one with bundle-tool release".into(),
            ],
            PromoteError::UnknownPackage { known, .. } => {
                vec![format!("packages: {}", known.join(", "))]
            }
            PromoteError::NoPackage(_) => vec![
                "release a bundle first (bundle-tool release), or pass the --catalog-dir that holds it".into(),
            ],
            PromoteError::SeveralPackages(known) => {
                vec![format!("pass --package (one of {})", known.join(", "))]
            }
            PromoteError::Plan(h) => h.hints.clone(),
            PromoteError::Write(_) => Vec::new(),
        }
    }

    /// False only when writing failed.
    pub fn is_user_error(&self) -> bool {
        !matches!(self, PromoteError::Write(_))
    }
}

/// A planned promotion: the catalog as read and the checked plan.
#[derive(Debug)]
pub struct Promotion {
    /// The catalog as it is.
    pub catalog: CatalogDir,
    /// The package.
    pub package: String,
    /// The target channel.
    pub channel: String,
    /// The changes and the catalog after them.
    pub plan: ReleasePlan,
}

impl Promotion {
    /// Completes an interrupted promote, opens the catalog and plans the promotion.
    pub fn plan(req: &PromoteRequest) -> Result<Self, PromoteError> {
        if !req.catalog_dir.is_dir() {
            return Err(PromoteError::NoCatalog(req.catalog_dir.clone()));
        }
        // A promote killed while writing left a journal here: complete it before reading, or
        // the plan would start from a half-written catalog.
        olmkit_core::fsio::recover(&req.catalog_dir)
            .map_err(|e| PromoteError::Recover(Box::new(e)))?;
        let catalog =
            CatalogDir::open(&req.catalog_dir).map_err(|e| PromoteError::Catalog(Box::new(e)))?;
        let package = pick_package(&catalog, req)?;
        let plan = plan_promote(&catalog.config, &package, &req.version, &req.channel)
            .map_err(|e| plan_err(e, req))?;
        Ok(Promotion {
            catalog,
            package,
            channel: req.channel.clone(),
            plan,
        })
    }

    /// Writes the change in one changeset; `false` when there is nothing to write.
    pub fn write(&self) -> Result<bool, PromoteError> {
        if self.plan.outcome != Outcome::Changed {
            return Ok(false);
        }
        let format = self.catalog.format_of(&self.package);
        write_package_update(&self.catalog, &self.package, &self.plan.changes, format)
            .map_err(|e| PromoteError::Write(Box::new(e)))?;
        Ok(true)
    }
}

/// The package to promote in: the one named, else the catalog's only one.
fn pick_package(catalog: &CatalogDir, req: &PromoteRequest) -> Result<String, PromoteError> {
    let names: Vec<&str> = catalog
        .config
        .packages
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let dir = &req.catalog_dir;
    match (&req.package, names.as_slice()) {
        (Some(p), known) if !known.contains(&p.as_str()) => Err(PromoteError::UnknownPackage {
            package: p.clone(),
            dir: dir.clone(),
            known: known.iter().map(|k| k.to_string()).collect(),
        }),
        (Some(p), _) => Ok(p.clone()),
        (None, [one]) => Ok(one.to_string()),
        (None, []) => Err(PromoteError::NoPackage(dir.clone())),
        (None, many) => Err(PromoteError::SeveralPackages(
            many.iter().map(|k| k.to_string()).collect(),
        )),
    }
}

/// A refused promotion, with how to act on it.
fn plan_err(e: PlanReleaseError, req: &PromoteRequest) -> PromoteError {
    let graph = format!(
        "bundle-tool graph --catalog-dir {} shows the channels, their heads and the released versions",
        req.catalog_dir.display()
    );
    let hints: Vec<String> = match &e {
        PlanReleaseError::UnknownVersion { .. } => vec![
            "promote adds an already released version to another channel; release new versions with bundle-tool release".into(),
            graph,
        ],
        PlanReleaseError::Options(_) => {
            vec!["pass a released version such as 0.2.0 (a leading v is accepted)".into()]
        }
        PlanReleaseError::WouldFork { channel, .. } => vec![
            format!("promote a version above the head of {channel}, or release a new one"),
            graph,
        ],
        PlanReleaseError::Invalid(_) => vec![format!(
            "bundle-tool catalog validate {} shows the catalog's problems",
            req.catalog_dir.display()
        )],
        _ => vec![graph],
    };
    PromoteError::Plan(Box::new(Hinted::new(e, hints)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_missing_catalog_directory_is_refused_with_its_flag() {
        let tmp = tempfile::tempdir().unwrap();
        let req = PromoteRequest {
            catalog_dir: tmp.path().join("none"),
            version: "0.1.0".into(),
            channel: "stable".into(),
            ..Default::default()
        };
        let e = Promotion::plan(&req).unwrap_err();
        assert!(e.to_string().ends_with("none: no catalog directory"), "{e}");
        assert_eq!(
            e.hints(),
            ["promote works on a released catalog; pass --catalog-dir"]
        );
        assert!(e.is_user_error());
    }

    #[test]
    fn an_empty_catalog_has_no_package_to_promote_in() {
        let tmp = tempfile::tempdir().unwrap();
        let req = PromoteRequest {
            catalog_dir: tmp.path().to_path_buf(),
            version: "0.1.0".into(),
            channel: "stable".into(),
            ..Default::default()
        };
        let e = Promotion::plan(&req).unwrap_err();
        assert!(matches!(e, PromoteError::NoPackage(_)), "{e}");
        let named = PromoteRequest {
            package: Some("p".into()),
            ..req
        };
        let e = Promotion::plan(&named).unwrap_err();
        assert_eq!(
            e.hints(),
            ["the catalog has no package yet: release one with bundle-tool release"]
        );
    }
}
