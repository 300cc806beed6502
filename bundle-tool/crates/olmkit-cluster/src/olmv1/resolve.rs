//! Which bundle OLM v1 installs from a local catalog, and where its manifests are when the
//! catalog does not carry them.
//!
//! operator-controller resolves a ClusterExtension without an installed bundle by taking every
//! bundle of the package (only those of `spec.source.catalog.channels` when given), keeping
//! those inside `spec.source.catalog.version` and installing the highest version: not the
//! channel head of OLM v0's replaces graph. [`choose_bundle`] predicts that choice from the
//! local catalog.
//!
//! The installer RBAC is derived from the bundle's manifests. A catalog rendered with
//! `olm.csv.metadata` (ours, and opm's default since 1.28) carries no manifests, but a project
//! that releases with bundle-tool keeps every released bundle in `bundle/<package>/<version>/`
//! next to its catalog: [`find_bundle_dir`] finds the one whose CSV is the chosen bundle.

use crate::catalog_view::PackageView;
use olmkit_core::version_range::VersionRange;
use semver::Version;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The bundle OLM v1 would install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Bundle (CSV) name.
    pub bundle: String,
    /// Its version.
    pub version: Version,
    /// A caveat about the prediction (a range that could not be evaluated locally).
    pub caveat: Option<String>,
}

/// No bundle of the local catalog matches what the ClusterExtension asks for.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ChooseBundleError {
    /// The channel is not in the package.
    #[error(transparent)]
    UnknownChannel(#[from] crate::catalog_view::UnknownChannelError),
    /// Nothing matches.
    #[error("no bundle of package {package}{scope} in the catalog {catalog}{range}")]
    NoMatch {
        /// Package.
        package: String,
        /// ` in channel X` or empty.
        scope: String,
        /// The catalog directory.
        catalog: String,
        /// ` matches version range R` or empty.
        range: String,
    },
}

/// Parses an OLM v1 version constraint (Masterminds semver: `,` or spaces for AND, `||` for
/// OR, a bare version for equality). The common forms are also valid blang ranges once commas
/// become spaces; `~`, `^` and hyphen ranges are not, and give `None`.
fn parse_constraint(range: &str) -> Option<VersionRange> {
    if range.contains(['~', '^']) || range.contains(" - ") {
        return None;
    }
    VersionRange::parse(&range.replace(',', " ")).ok()
}

/// The bundle operator-controller would install for a new ClusterExtension of `view`'s
/// package with `channel` and `range` (both optional).
pub fn choose_bundle(
    view: &PackageView,
    channel: Option<&str>,
    range: Option<&str>,
) -> Result<Choice, ChooseBundleError> {
    let in_channel: Option<Vec<String>> = match channel {
        Some(c) => Some(
            view.channel(c)?
                .entries
                .iter()
                .map(|e| e.name.clone())
                .collect(),
        ),
        None => None,
    };
    let constraint = range.map(|r| (r, parse_constraint(r)));
    let caveat = match &constraint {
        Some((r, None)) => Some(format!(
            "version range {r:?} cannot be evaluated here (only comparisons such as \">=0.2.0, <1.0.0\" can); predicted the highest version instead"
        )),
        _ => None,
    };
    let best = view
        .config
        .bundles
        .iter()
        .filter(|b| {
            in_channel
                .as_ref()
                .is_none_or(|names| names.contains(&b.name))
        })
        .filter_map(|b| Some((b, olmkit_catalog::model::bundle_version(b)?)))
        .filter(|(_, v)| match &constraint {
            Some((_, Some(r))) => r.contains(v),
            _ => true,
        })
        .max_by(|(a, va), (b, vb)| va.cmp(vb).then_with(|| b.name.cmp(&a.name)));
    match best {
        Some((b, version)) => Ok(Choice {
            bundle: b.name.clone(),
            version,
            caveat,
        }),
        None => Err(ChooseBundleError::NoMatch {
            package: view.name.clone(),
            scope: channel
                .map(|c| format!(" in channel {c}"))
                .unwrap_or_default(),
            catalog: view.root.display().to_string(),
            range: range
                .map(|r| format!(" matches version range {r:?}"))
                .unwrap_or_default(),
        }),
    }
}

/// A bundle directory that should hold the chosen bundle could not be read.
#[derive(Debug, Error)]
#[error("{dir}: {source}")]
pub struct FindBundleDirError {
    /// The directory.
    pub dir: PathBuf,
    /// Why it did not load.
    #[source]
    pub source: olmkit_bundle::LoadBundleError,
}

/// The directories released bundles of a catalog may live under, in order: `bundle/` next to
/// the catalog directory (the repository layout `catalog/` + `bundle/<package>/<version>/`),
/// then `./bundle`. Duplicates are dropped.
pub fn bundle_roots(catalog_dir: &Path) -> Vec<PathBuf> {
    let beside = catalog_dir
        .parent()
        .map(|p| p.join("bundle"))
        .unwrap_or_else(|| PathBuf::from("bundle"));
    let mut out: Vec<PathBuf> = Vec::new();
    for candidate in [beside, PathBuf::from("bundle")] {
        let key = std::path::absolute(&candidate).unwrap_or_else(|_| candidate.clone());
        if !out
            .iter()
            .any(|o| std::path::absolute(o).unwrap_or_else(|_| o.clone()) == key)
        {
            out.push(candidate);
        }
    }
    out
}

/// The released bundle directory of `csv_name` (version `version`) under one of `roots`:
/// `ROOT/<package>/<version>/` first, then any directory of `ROOT/<package>/` whose CSV has
/// that name. `Ok(None)` when there is none; an error when the directory named after the
/// version exists but is not a bundle.
pub fn find_bundle_dir(
    roots: &[PathBuf],
    package: &str,
    csv_name: &str,
    version: &Version,
) -> Result<Option<olmkit_bundle::Bundle>, FindBundleDirError> {
    for root in roots {
        let package_dir = root.join(package);
        let exact = package_dir.join(version.to_string());
        if exact.is_dir() {
            let b =
                olmkit_bundle::load_bundle_dir(&exact).map_err(|source| FindBundleDirError {
                    dir: exact.clone(),
                    source,
                })?;
            if b.csv_name() == Some(csv_name) {
                return Ok(Some(b));
            }
        }
        let Ok(entries) = std::fs::read_dir(&package_dir) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|d| d != &exact && d.join("manifests").is_dir())
            .collect();
        dirs.sort();
        // Other directories are only candidates: one that does not load is not the one.
        if let Some(b) = dirs
            .iter()
            .filter_map(|d| olmkit_bundle::load_bundle_dir(d).ok())
            .find(|b| b.csv_name() == Some(csv_name))
        {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"{"schema":"olm.package","name":"op","defaultChannel":"stable"}
{"schema":"olm.channel","package":"op","name":"stable","entries":[{"name":"op.v0.1.0"},{"name":"op.v0.2.0","replaces":"op.v0.1.0"}]}
{"schema":"olm.channel","package":"op","name":"fast","entries":[{"name":"op.v0.2.0"},{"name":"op.v0.3.0","replaces":"op.v0.2.0"}]}
{"schema":"olm.bundle","name":"op.v0.1.0","package":"op","image":"x/b:v0.1.0","properties":[{"type":"olm.package","value":{"packageName":"op","version":"0.1.0"}}]}
{"schema":"olm.bundle","name":"op.v0.2.0","package":"op","image":"x/b:v0.2.0","properties":[{"type":"olm.package","value":{"packageName":"op","version":"0.2.0"}}]}
{"schema":"olm.bundle","name":"op.v0.3.0","package":"op","image":"x/b:v0.3.0","properties":[{"type":"olm.package","value":{"packageName":"op","version":"0.3.0"}}]}
"#;

    fn view() -> (tempfile::TempDir, PackageView) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("op")).unwrap();
        std::fs::write(d.path().join("op/catalog.json"), CATALOG).unwrap();
        let v = PackageView::load(d.path(), "op").unwrap();
        (d, v)
    }

    fn chosen(v: &PackageView, channel: Option<&str>, range: Option<&str>) -> String {
        choose_bundle(v, channel, range).unwrap().bundle
    }

    #[test]
    fn the_highest_version_wins_across_channels_unless_one_is_named() {
        let (_d, v) = view();
        assert_eq!(chosen(&v, None, None), "op.v0.3.0");
        assert_eq!(chosen(&v, Some("stable"), None), "op.v0.2.0");
        assert_eq!(chosen(&v, Some("fast"), None), "op.v0.3.0");
    }

    #[test]
    fn version_ranges_narrow_the_choice() {
        let (_d, v) = view();
        assert_eq!(chosen(&v, None, Some("0.1.0")), "op.v0.1.0");
        assert_eq!(chosen(&v, None, Some(">=0.1.0, <0.3.0")), "op.v0.2.0");
        assert_eq!(chosen(&v, None, Some("<0.2.0 || >=0.3.0")), "op.v0.3.0");
        let c = choose_bundle(&v, None, Some("~0.2")).unwrap();
        assert_eq!(c.bundle, "op.v0.3.0");
        assert!(c.caveat.unwrap().contains("cannot be evaluated"));
        let e = choose_bundle(&v, Some("stable"), Some(">=1.0.0")).unwrap_err();
        assert!(
            e.to_string()
                .contains("no bundle of package op in channel stable"),
            "{e}"
        );
        assert!(choose_bundle(&v, Some("beta"), None).is_err());
    }

    #[test]
    fn roots_beside_the_catalog_come_first_without_duplicates() {
        assert_eq!(
            bundle_roots(Path::new("/repo/catalog")),
            vec![PathBuf::from("/repo/bundle"), PathBuf::from("bundle")]
        );
        assert_eq!(
            bundle_roots(Path::new("catalog")),
            vec![PathBuf::from("bundle")]
        );
    }

    #[test]
    fn a_missing_bundle_directory_is_none() {
        let d = tempfile::tempdir().unwrap();
        let roots = vec![d.path().join("bundle")];
        let v = Version::new(0, 1, 0);
        assert!(
            find_bundle_dir(&roots, "op", "op.v0.1.0", &v)
                .unwrap()
                .is_none()
        );
        // A directory named after the version that is not a bundle is an error, not a miss.
        std::fs::create_dir_all(d.path().join("bundle/op/0.1.0")).unwrap();
        let e = find_bundle_dir(&roots, "op", "op.v0.1.0", &v).unwrap_err();
        assert!(e.to_string().contains("0.1.0"), "{e}");
    }
}
