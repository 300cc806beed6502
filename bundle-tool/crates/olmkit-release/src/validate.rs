//! Stage 4, validate ([`Generated::validate`] → [`Validated`]): the generated bundle as it will be on disk, with olmkit-bundle's default
//! suite, CRD upgrade safety against the released bundle it replaces, and what OLM v1 could
//! not install as it is (as warnings: the release targets OLM v0 catalogs too); then the
//! immutability of released versions: an existing bundle directory must hold exactly these
//! files. An object larger than etcd stores ([`MAX_STORED_OBJECT_BYTES`]) is an error here,
//! in the input as in the generated bundle: `validate` keeps its warning (`manifest-size`,
//! above 1 MiB), but a release would ship an object no API server accepts.

use crate::generate::Generated;
use crate::images::ImageSet;
use crate::inputs::{MAX_STORED_OBJECT_BYTES, ObjectTooLarge, json_size};
use crate::plan::Decisions;
use crate::{Event, Progress, ReleaseConfig, Stage};
use olmkit_bundle::generate::GeneratedBundle;
use olmkit_bundle::{Bundle, LoadBundleError};
use olmkit_catalog::catalog_dir::CatalogDir;
use olmkit_core::Report;
use olmkit_core::findings::Severity;
use olmkit_core::fsio::{WriteOutputError, read_tree};
use semver::Version;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The bundle cannot be released.
#[derive(Debug, Error)]
pub enum ValidateError {
    /// An input object is larger than etcd stores (found by planning, reported as a
    /// validation error).
    #[error(transparent)]
    ObjectTooLarge(Box<ObjectTooLarge>),
    /// The released bundle the new one replaces cannot be read (for upgrade safety).
    #[error("cannot read the released bundle {replaces} replaces: {error}")]
    Previous {
        /// The CSV it replaces.
        replaces: String,
        /// Why it cannot be read.
        error: Box<LoadBundleError>,
    },
    /// Validation found errors; `report` holds every finding, files named under the bundle
    /// directory.
    #[error("the bundle for {csv_name} does not validate; nothing was released")]
    Invalid {
        /// The CSV's name.
        csv_name: String,
        /// The findings.
        report: Box<Report>,
    },
    /// The version's directory holds a release with other content.
    #[error(
        "{} already holds a release of {version} with different content ({diff}); released versions are never overwritten",
        dir.display()
    )]
    Overwrite {
        /// The bundle directory.
        dir: PathBuf,
        /// The version.
        version: Version,
        /// Which files differ.
        diff: String,
    },
    /// The generated files do not load as a bundle (a generator bug).
    #[error(transparent)]
    Load(Box<LoadBundleError>),
    /// The existing bundle directory cannot be read.
    #[error(transparent)]
    Read(Box<WriteOutputError>),
}

impl ValidateError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            ValidateError::Previous { .. } => vec![
                "released bundles are read for CRD upgrade safety; fix or restore the directory named above".into(),
            ],
            ValidateError::Invalid { .. } => vec![
                "fix the inputs above (config/, the base CSV), then release again".into(),
            ],
            ValidateError::Overwrite { dir, version, .. } => vec![
                "release a new version instead (e.g. bump the patch number)".into(),
                format!(
                    "to add {version} to another channel, use `bundle-tool promote {version} --to CHANNEL`"
                ),
                format!(
                    "if {} was never published, delete it (and its catalog entries) and release again",
                    dir.display()
                ),
            ],
            ValidateError::ObjectTooLarge(e) => e.hints(),
            ValidateError::Load(_) | ValidateError::Read(_) => Vec::new(),
        }
    }

    /// False for what should not happen (the generated files not loading, an unreadable tree).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, ValidateError::Load(_) | ValidateError::Read(_))
    }
}

/// The generated bundle's objects over [`MAX_STORED_OBJECT_BYTES`] (a CSV that grew with its
/// embedded deployments and examples): errors, in place of `manifest-size` warnings.
fn refuse_unstorable(loaded: &Bundle, report: &mut Report) {
    for m in &loaded.manifests {
        // JSON is rarely more than twice the YAML it came from: skip small files.
        let file_len = loaded.manifest_files.get(&m.file).map_or(0, Vec::len);
        if file_len <= MAX_STORED_OBJECT_BYTES / 4 {
            continue;
        }
        let size = json_size(&m.object);
        if size <= MAX_STORED_OBJECT_BYTES {
            continue;
        }
        report
            .findings
            .retain(|f| !(f.rule == "manifest-size" && f.file.as_deref() == Some(m.file.as_str())));
        report.push(
            olmkit_core::Finding::error(
                "manifest-size",
                format!(
                    "{} {} is {size} bytes as JSON, more than the {MAX_STORED_OBJECT_BYTES} bytes (1.5 MiB) etcd stores in one object: no API server accepts it, so it cannot be released",
                    m.kind(),
                    m.name()
                ),
            )
            .file(m.file.clone())
            .hint("shrink it (for CRDs: drop descriptions with controller-gen crd:maxDescLen=0)"),
        );
    }
}

/// What [`validate`] found.
#[derive(Debug)]
pub struct Checked {
    /// The bundle as it will be on disk.
    pub loaded: Bundle,
    /// Findings (no errors).
    pub report: Report,
    /// The bundle directory already holds exactly these files (a re-release).
    pub bundle_unchanged: bool,
    /// What was not checked, and why.
    pub notes: Vec<String>,
}

/// A release whose bundle validates: the fourth stage, which [`Validated::build`](crate::images)
/// builds the images of.
#[derive(Debug)]
pub struct Validated {
    pub(crate) config: ReleaseConfig,
    pub(crate) catalog: CatalogDir,
    pub(crate) decisions: Decisions,
    pub(crate) images: ImageSet,
    pub(crate) bundle: GeneratedBundle,
    pub(crate) checked: Checked,
}

impl Validated {
    /// The findings (warnings only: errors stop the release).
    pub fn report(&self) -> &Report {
        &self.checked.report
    }
}

impl Generated {
    /// Validates the bundle as it will be on disk, and that it overwrites no release.
    pub fn validate(self, progress: &mut Progress<'_>) -> Result<Validated, ValidateError> {
        progress(Event::Stage(Stage::Validate));
        let checked = validate(&self.config, &self.decisions, &self.bundle)?;
        Ok(Validated {
            config: self.config,
            catalog: self.catalog,
            decisions: self.decisions,
            images: self.images,
            bundle: self.bundle,
            checked,
        })
    }
}

/// Validates `generated` as the bundle of `planned`.
pub fn validate(
    config: &ReleaseConfig,
    planned: &Decisions,
    generated: &GeneratedBundle,
) -> Result<Checked, ValidateError> {
    let bundle_dir = &planned.bundle_dir;
    let loaded = generated
        .to_bundle(bundle_dir)
        .map_err(|e| ValidateError::Load(Box::new(e)))?;
    let mut notes = Vec::new();
    let package_dir = config.bundle_root.join(&planned.package);
    let previous = match &planned.replaces {
        Some(r) => {
            let prev = find_bundle(&package_dir, r).map_err(|e| ValidateError::Previous {
                replaces: r.clone(),
                error: Box::new(e),
            })?;
            if prev.is_none() {
                notes.push(format!(
                    "no bundle directory for {r} under {}: CRD upgrade safety against it was not checked",
                    package_dir.display()
                ));
            }
            prev
        }
        None => None,
    };
    let report = validate_release(&loaded, previous.as_ref(), bundle_dir);
    if report.has_errors() {
        return Err(ValidateError::Invalid {
            csv_name: generated.csv_name.clone(),
            report: Box::new(report),
        });
    }
    // A released version is never overwritten.
    let bundle_unchanged = match &planned.existing {
        None => false,
        Some(_) => {
            let on_disk = read_tree(bundle_dir).map_err(|e| ValidateError::Read(Box::new(e)))?;
            if on_disk != generated.files {
                return Err(ValidateError::Overwrite {
                    dir: bundle_dir.clone(),
                    version: planned.version.clone(),
                    diff: tree_diff(&on_disk, &generated.files),
                });
            }
            true
        }
    };
    Ok(Checked {
        loaded,
        report,
        bundle_unchanged,
        notes,
    })
}

/// The default suite, upgrade safety against `previous`, and what OLM v1 could not install as
/// it is (warnings here: the release targets OLM v0 catalogs too; `validate --select-optional
/// suite=olm-v1` reports them with their severity). Files are named under `bundle_dir`.
fn validate_release(loaded: &Bundle, previous: Option<&Bundle>, bundle_dir: &Path) -> Report {
    let mut report = olmkit_bundle::validate_bundle(
        loaded,
        previous,
        &olmkit_bundle::ValidateOptions::default(),
    );
    refuse_unstorable(loaded, &mut report);
    report.extend(
        olmkit_catalog::olmv1::bundle_findings(loaded)
            .into_iter()
            .map(|mut f| {
                f.severity = Severity::Warning;
                f.message = format!("OLM v1: {}", f.message);
                f
            }),
    );
    for f in &mut report.findings {
        f.file = f
            .file
            .as_ref()
            .map(|p| bundle_dir.join(p).display().to_string());
    }
    report
}

/// The released bundle directory whose CSV is `csv_name`, under `package_dir`. A released
/// bundle that cannot be loaded (a broken file, a symlink out of it) is an error naming it, not
/// a reason to skip the upgrade-safety check silently.
fn find_bundle(package_dir: &Path, csv_name: &str) -> Result<Option<Bundle>, LoadBundleError> {
    // Released bundles live in <package>/<version>/: try the name's version first.
    if let Some((_, v)) = csv_name.split_once(".v") {
        let dir = package_dir.join(v);
        if dir.join("manifests").is_dir() {
            let b = olmkit_bundle::load_bundle_dir(&dir)?;
            if b.csv_name() == Some(csv_name) {
                return Ok(Some(b));
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(package_dir) else {
        return Ok(None);
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for d in dirs.into_iter().filter(|d| d.join("manifests").is_dir()) {
        let b = olmkit_bundle::load_bundle_dir(&d)?;
        if b.csv_name() == Some(csv_name) {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Which files of `a` (on disk) and `b` (generated) differ, for the refusal to overwrite.
fn tree_diff(a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>) -> String {
    let mut out = Vec::new();
    for (p, bytes) in a {
        match b.get(p) {
            None => out.push(format!("{} would go", p.display())),
            Some(x) if x != bytes => out.push(format!("{} differs", p.display())),
            _ => {}
        }
    }
    for p in b.keys().filter(|p| !a.contains_key(*p)) {
        out.push(format!("{} would be added", p.display()));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_diff_names_changed_removed_and_added_files() {
        let tree = |files: &[(&str, &str)]| -> BTreeMap<PathBuf, Vec<u8>> {
            files
                .iter()
                .map(|(p, b)| (PathBuf::from(p), b.as_bytes().to_vec()))
                .collect()
        };
        let on_disk = tree(&[("a", "1"), ("b", "2")]);
        let generated = tree(&[("a", "1"), ("b", "3"), ("c", "4")]);
        assert_eq!(
            tree_diff(&on_disk, &generated),
            "b differs, c would be added"
        );
        assert_eq!(tree_diff(&generated, &on_disk), "b differs, c would go");
    }

    #[test]
    fn a_missing_package_directory_is_no_previous_bundle() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let found = find_bundle(&tmp.path().join("nope"), "p.v0.1.0");
        assert!(matches!(found, Ok(None)));
    }
}
