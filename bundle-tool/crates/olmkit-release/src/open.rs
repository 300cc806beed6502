//! Stage 1, open: finish a release (or promote) that was killed while committing
//! ([`crate::recover`]), then parse the version (the one parse: a [`Version`] flows through
//! every later stage and is formatted only where a name or a file needs it) and read the
//! catalog, before the manifests are read. The result is an [`Opened`] release, which
//! [`Opened::plan`](crate::plan) plans.

use crate::recover::{RecoverError, Recovered, recover_interrupted};
use crate::{Event, Hinted, Progress, ReleaseConfig};
use olmkit_catalog::catalog_dir::CatalogDir;
use olmkit_catalog::declcfg::LoadCatalogError;
use semver::Version;
use thiserror::Error;

/// The release cannot start.
#[derive(Debug, Error)]
pub enum OpenError {
    /// Finishing an interrupted release failed.
    #[error(transparent)]
    Recover(#[from] RecoverError),
    /// `--version` is not semver.
    #[error("--version {given:?} is not a semver version: {message}")]
    Version {
        /// The flag's value.
        given: String,
        /// The parser's complaint.
        message: String,
    },
    /// The catalog directory cannot be loaded.
    #[error(transparent)]
    Catalog(Box<Hinted<LoadCatalogError>>),
}

impl OpenError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            OpenError::Recover(e) => e.hints(),
            OpenError::Version { .. } => vec!["versions look like 0.4.0 or 1.0.0-rc.1".into()],
            OpenError::Catalog(h) => h.hints.clone(),
        }
    }

    /// True when the input or the environment is at fault.
    pub fn is_user_error(&self) -> bool {
        match self {
            OpenError::Recover(e) => e.is_user_error(),
            OpenError::Version { .. } | OpenError::Catalog(_) => true,
        }
    }
}

/// A release with its version parsed and its catalog read: the first stage.
#[derive(Debug)]
pub struct Opened {
    pub(crate) config: ReleaseConfig,
    pub(crate) version: Version,
    pub(crate) catalog: CatalogDir,
}

impl Opened {
    /// The version released.
    pub fn version(&self) -> &Version {
        &self.version
    }
}

/// Opens the release `config` describes: completes an interrupted one (reported through
/// `progress` as notes), parses the version and loads the catalog (and warms the validator's
/// schemas meanwhile).
pub fn open(config: ReleaseConfig, progress: &mut Progress<'_>) -> Result<Opened, OpenError> {
    let recovered = recover_interrupted(&config.bundle_root, &config.catalog_dir)?;
    for note in recovery_notes(&recovered) {
        progress(Event::Note(&note));
    }
    let version = olmkit_core::version_range::parse_version_flag(&config.version).map_err(|e| {
        OpenError::Version {
            given: config.version.clone(),
            message: e.to_string(),
        }
    })?;
    olmkit_bundle::schemas::prewarm();
    let catalog = CatalogDir::open(&config.catalog_dir).map_err(|e| {
        OpenError::Catalog(Box::new(Hinted::new(
            e,
            [format!(
                "fix the catalog first (bundle-tool catalog validate {})",
                config.catalog_dir.display()
            )],
        )))
    })?;
    Ok(Opened {
        config,
        version,
        catalog,
    })
}

/// What recovery did, for the user.
fn recovery_notes(rec: &Recovered) -> Vec<String> {
    let mut notes = Vec::new();
    if rec.journal_found {
        notes.push(format!(
            "completed an interrupted release in {} ({} pending change(s) applied from {})",
            rec.root.display(),
            rec.rolled_forward,
            olmkit_core::fsio::JOURNAL_FILE
        ));
    }
    if rec.stale_stages_removed > 0 {
        notes.push(format!(
            "removed {} staging directories left by interrupted runs",
            rec.stale_stages_removed
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_version_is_parsed_once_here_a_leading_v_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let config = |version: &str| ReleaseConfig {
            version: version.into(),
            catalog_dir: tmp.path().join("catalog"),
            bundle_root: tmp.path().join("bundle"),
            ..Default::default()
        };
        let opened = open(config("v0.4.0"), &mut |_| {}).unwrap();
        assert_eq!(opened.version(), &Version::new(0, 4, 0));
        let e = open(config("0.4"), &mut |_| {}).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--version \"0.4\" is not a semver version")
        );
        assert_eq!(e.hints(), ["versions look like 0.4.0 or 1.0.0-rc.1"]);
    }

    #[test]
    fn recovery_notes_say_what_was_done() {
        assert!(recovery_notes(&Recovered::default()).is_empty());
        let rec = Recovered {
            root: "/r".into(),
            journal_found: true,
            rolled_forward: 2,
            stale_stages_removed: 1,
        };
        let notes = recovery_notes(&rec);
        assert!(notes[0].starts_with("completed an interrupted release in /r (2 pending"));
        assert_eq!(
            notes[1],
            "removed 1 staging directories left by interrupted runs"
        );
    }
}
