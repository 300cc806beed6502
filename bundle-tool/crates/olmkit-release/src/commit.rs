//! Stage 7, commit ([`Published::commit`] → [`Committed`]): the bundle directory and the
//! catalog update in one changeset (olmkit-core's crash-safe [`Changeset`]: staged and fsynced
//! in full, an intent journal, fsynced renames), rooted at the deepest directory holding both,
//! so that either both change or neither does. A run killed here is completed by the next
//! one's open stage ([`crate::open`]).

use crate::catalog_plan::Outcome;
use crate::publish::Published;
use crate::recover::common_root;
use crate::{Event, Progress, Release, ReleaseConfig, Stage};
use olmkit_catalog::catalog_dir::{WriteCatalogError, stage_package_update};
use olmkit_core::fsio::{Changeset, WriteOutputError, absolute_lexical};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Writing the release failed; the changeset left the tree as it was.
#[derive(Debug, Error)]
pub enum CommitError {
    /// The paths cannot be resolved.
    #[error(transparent)]
    Path(#[from] std::io::Error),
    /// The changeset cannot be started (its root is not writable, or locked).
    #[error(transparent)]
    Open(Box<WriteOutputError>),
    /// Staging a file failed.
    #[error(transparent)]
    Stage(Box<WriteOutputError>),
    /// Staging the catalog's package update failed.
    #[error(transparent)]
    StageCatalog(Box<WriteCatalogError>),
    /// Committing the changeset failed.
    #[error(transparent)]
    Write(Box<WriteOutputError>),
}

impl CommitError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            CommitError::Open(_) => vec!["check that bundle/ and catalog/ are writable".into()],
            CommitError::Write(e) if matches!(**e, WriteOutputError::Interrupted { .. }) => vec![
                "the change is half applied; the next `bundle-tool release` completes it \
                 (its journal is kept); check that bundle/ and catalog/ are writable"
                    .into(),
            ],
            CommitError::Write(_) => {
                vec!["nothing was changed; check that bundle/ and catalog/ are writable".into()]
            }
            CommitError::Path(_) | CommitError::Stage(_) | CommitError::StageCatalog(_) => {
                Vec::new()
            }
        }
    }

    /// True when the file system refused (permissions, space); staging failures are not.
    pub fn is_user_error(&self) -> bool {
        matches!(self, CommitError::Open(_) | CommitError::Write(_))
    }
}

/// A released version: the last stage.
#[derive(Debug)]
pub struct Committed {
    release: Release,
}

impl Committed {
    /// What was released.
    pub fn release(&self) -> &Release {
        &self.release
    }
}

impl Published {
    /// Writes the bundle directory (unless it holds these files already) and the catalog
    /// update (when the plan changes it) in one changeset.
    pub fn commit(self, progress: &mut Progress<'_>) -> Result<Committed, CommitError> {
        progress(Event::Stage(Stage::Commit));
        self.release.write(&self.config)?;
        Ok(Committed {
            release: self.release,
        })
    }
}

impl Release {
    /// The changeset of the release: the bundle directory and the catalog's package update.
    fn write(&self, config: &ReleaseConfig) -> Result<(), CommitError> {
        let write_bundle = !self.bundle_unchanged;
        let write_catalog = self.plan.outcome == Outcome::Changed;
        if !write_bundle && !write_catalog {
            return Ok(());
        }
        let bundle_abs = absolute_lexical(&self.bundle_dir)?;
        let catalog_abs = absolute_lexical(&config.catalog_dir)?;
        let root = common_root(&bundle_abs, &catalog_abs)?;
        let rel = |abs: &Path| -> Result<PathBuf, CommitError> {
            abs.strip_prefix(&root)
                .map(Path::to_path_buf)
                .map_err(|e| CommitError::Path(std::io::Error::other(e)))
        };
        let mut cs = Changeset::new(&root).map_err(|e| CommitError::Open(Box::new(e)))?;
        if write_bundle {
            let files = self.generated.files.iter();
            cs.put_dir(
                rel(&bundle_abs)?,
                files.map(|(k, v)| (k.clone(), v.clone())),
            )
            .map_err(|e| CommitError::Stage(Box::new(e)))?;
        }
        if write_catalog {
            stage_package_update(
                &mut cs,
                &rel(&catalog_abs)?,
                &self.catalog,
                &self.package,
                &self.plan.changes,
                self.catalog.format_of(&self.package),
            )
            .map_err(|e| CommitError::StageCatalog(Box::new(e)))?;
        }
        cs.commit().map_err(|e| CommitError::Write(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lexical_normalization() {
        let n = absolute_lexical(Path::new("/a/./b/../c")).unwrap();
        assert_eq!(n, PathBuf::from("/a/c"));
    }

    #[test]
    fn the_changeset_root_holds_both_directories() {
        let root = common_root(Path::new("/p/bundle/op/0.1.0"), Path::new("/p/catalog")).unwrap();
        assert_eq!(root, PathBuf::from("/p"));
        let same = common_root(Path::new("/p/x/../catalog"), Path::new("/p/catalog")).unwrap();
        assert_eq!(same, PathBuf::from("/p/catalog"));
    }
}
