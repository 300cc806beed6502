//! Step 0, recover: finishes a release that was killed while committing (its journal is rolled
//! forward, so the tree holds that release in full) and removes staging left by dead runs,
//! before anything is read: otherwise a half-committed tree would make this run refuse or plan
//! the wrong change.

use olmkit_core::fsio::{WriteOutputError, absolute_lexical};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// An interrupted release cannot be completed.
#[derive(Debug, Error)]
pub enum RecoverError {
    /// The paths cannot be resolved.
    #[error(transparent)]
    Path(#[from] std::io::Error),
    /// The journal cannot be rolled forward.
    #[error(transparent)]
    Journal(Box<WriteOutputError>),
}

impl RecoverError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            RecoverError::Journal(_) => vec![
                "an interrupted release left a journal that cannot be completed; check that bundle/ and catalog/ are writable".into(),
            ],
            RecoverError::Path(_) => Vec::new(),
        }
    }

    /// True for a journal that cannot be completed (permissions); false for path errors.
    pub fn is_user_error(&self) -> bool {
        matches!(self, RecoverError::Journal(_))
    }
}

/// What [`recover_interrupted`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The changeset root looked at (where both `bundle/` and the catalog live).
    pub root: PathBuf,
    /// A journal was found: an interrupted release was completed.
    pub journal_found: bool,
    /// Pending changes applied from it.
    pub rolled_forward: usize,
    /// Staging directories of dead runs removed.
    pub stale_stages_removed: usize,
}

/// Completes an interrupted release under the common root of `bundle_root` and `catalog_dir`,
/// then an interrupted `promote`, whose changesets live in `catalog_dir` itself.
pub fn recover_interrupted(
    bundle_root: &Path,
    catalog_dir: &Path,
) -> Result<Recovered, RecoverError> {
    let root = common_root(bundle_root, catalog_dir)?;
    let journal = |e| RecoverError::Journal(Box::new(e));
    let rec = olmkit_core::fsio::recover(&root).map_err(journal)?;
    let mut out = Recovered {
        root: root.clone(),
        journal_found: rec.journal_found,
        rolled_forward: rec.rolled_forward,
        stale_stages_removed: rec.stale_stages_removed,
    };
    if catalog_dir != root {
        let rec = olmkit_core::fsio::recover(catalog_dir).map_err(journal)?;
        out.journal_found |= rec.journal_found;
        out.rolled_forward += rec.rolled_forward;
        out.stale_stages_removed += rec.stale_stages_removed;
    }
    Ok(out)
}

/// The deepest directory holding both `a` and `b` (both made absolute): the root of the
/// release's changeset, and so where an interrupted release leaves its journal.
pub(crate) fn common_root(a: &Path, b: &Path) -> std::io::Result<PathBuf> {
    let (a, b) = (absolute_lexical(a)?, absolute_lexical(b)?);
    Ok(a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.as_os_str().to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tree_without_a_journal_needs_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let rec =
            recover_interrupted(&tmp.path().join("bundle"), &tmp.path().join("catalog")).unwrap();
        assert_eq!(rec.root, tmp.path());
        assert!(!rec.journal_found);
        assert_eq!(rec.rolled_forward, 0);
    }

    /// A promote killed while committing left its journal in the catalog directory: the
    /// release completes it before reading the catalog, wherever the commit stopped.
    #[test]
    fn an_interrupted_promote_is_completed_too() {
        let mut with_journal = 0;
        for step in 1.. {
            let tmp = tempfile::tempdir().unwrap();
            let catalog = tmp.path().join("catalog");
            std::fs::create_dir_all(catalog.join("p")).unwrap();
            std::fs::write(catalog.join("p/catalog.yaml"), "old").unwrap();
            let mut cs = olmkit_core::fsio::Changeset::new(&catalog).unwrap();
            cs.put_file("p/catalog.yaml", b"new").unwrap();
            if !cs.commit_crashing_at(step).unwrap() {
                break;
            }
            let journal = catalog.join(olmkit_core::fsio::JOURNAL_FILE).exists();
            with_journal += usize::from(journal);
            // The file is replaced by a rename over it: never missing, old or new.
            let now = std::fs::read(catalog.join("p/catalog.yaml")).unwrap();
            assert!(now == b"old" || now == b"new", "step {step}");
            let rec = recover_interrupted(&tmp.path().join("bundle"), &catalog).unwrap();
            assert_eq!(rec.journal_found, journal, "step {step}");
            let after = std::fs::read(catalog.join("p/catalog.yaml")).unwrap();
            if journal {
                assert_eq!(after, b"new", "step {step}");
            } else {
                assert_eq!(after, now, "step {step}");
            }
        }
        assert!(with_journal > 2, "{with_journal}");
    }
}
