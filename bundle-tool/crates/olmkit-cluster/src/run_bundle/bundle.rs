//! The bundle to run: loaded from a directory the way `opm render` reads it, rendered to its
//! `olm.bundle` blob, and the facts `run bundle` needs before touching the cluster (package, CSV,
//! install modes, the CRDs OLM will create, the upgrade edges its CSV declares).

use crate::olm::InstallMode;
use olmkit_catalog::declcfg;
use olmkit_catalog::render::{DeclaredEdges, RenderBundleError, RenderOptions, declared_edges};
use olmkit_catalog::render_opm::{LoadOpmBundleError, load_bundle_dir_opm, render_bundle};
use olmkit_core::csv::Csv;
use std::path::Path;
use thiserror::Error;

/// A bundle ready to be put into a run-bundle catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleToRun {
    /// Where it came from, as the user named it (for messages and the CatalogSource's
    /// `injected-bundles` annotation).
    pub source: String,
    /// Package.
    pub package: String,
    /// CSV name (the bundle's name in the catalog).
    pub csv_name: String,
    /// CSV `spec.version`.
    pub version: String,
    /// CSV `spec.displayName`.
    pub display_name: String,
    /// CSV `spec.provider.name`.
    pub provider: String,
    /// CSV `spec.installModes`.
    pub install_modes: Vec<InstallMode>,
    /// Names of the CRDs in the bundle (OLM creates them).
    pub crds: Vec<String>,
    /// `replaces`, `skips` and `olm.skipRange` of the CSV.
    pub edges: DeclaredEdges,
    /// The `olm.bundle` blob, as `opm render` makes it.
    pub fbc: declcfg::Bundle,
}

/// A directory is not a bundle `run bundle` can use.
#[derive(Debug, Error)]
pub enum LoadRunBundleError {
    /// The directory could not be read (the reason names it).
    #[error("{reason}")]
    Load {
        /// The directory.
        dir: String,
        /// Why.
        reason: LoadOpmBundleError,
    },
    /// It has no CSV, no package, or a malformed one (the reason names it).
    #[error("{reason}")]
    Render {
        /// The directory.
        dir: String,
        /// Why.
        reason: RenderBundleError,
    },
    /// The CSV has no `spec.version`.
    #[error("{dir}: the ClusterServiceVersion {csv} has no spec.version")]
    NoVersion {
        /// The directory.
        dir: String,
        /// The CSV.
        csv: String,
    },
}

impl BundleToRun {
    /// Loads the bundle directory `dir`. `source` names it in messages; `image` is the bundle
    /// image the catalog records. Give `""` unless the cluster can pull that image: OLM
    /// unpacks (pulls) the image of every catalog bundle that has one (operator-registry's
    /// `ListBundles` leaves out the manifests of such bundles), and installs from the embedded
    /// manifests only when there is none.
    pub fn load(dir: &Path, source: &str, image: &str) -> Result<Self, LoadRunBundleError> {
        let shown = source.to_string();
        let loaded = load_bundle_dir_opm(dir).map_err(|reason| LoadRunBundleError::Load {
            dir: shown.clone(),
            reason,
        })?;
        let fbc = render_bundle(&loaded, image, &RenderOptions::opm()).map_err(|reason| {
            LoadRunBundleError::Render {
                dir: shown.clone(),
                reason,
            }
        })?;
        // render_bundle succeeded, so the CSV is there.
        let none = serde_json::Value::Null;
        let csv = Csv::new(loaded.csv().map_or(&none, |m| &m.object));
        let version = csv.version().unwrap_or_default().to_string();
        if version.is_empty() {
            return Err(LoadRunBundleError::NoVersion {
                dir: shown,
                csv: fbc.name.clone(),
            });
        }
        let install_modes = InstallMode::of_csv(csv);
        let mut crds: Vec<String> = loaded
            .crds()
            .map(|m| m.name().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        crds.sort();
        crds.dedup();
        Ok(BundleToRun {
            source: shown,
            package: fbc.package.clone(),
            csv_name: fbc.name.clone(),
            version,
            display_name: csv.display_name().unwrap_or_default().to_string(),
            provider: csv.provider_name().unwrap_or_default().to_string(),
            install_modes,
            crds,
            edges: declared_edges(&loaded),
            fbc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
    }

    #[test]
    fn loads_a_released_bundle() {
        let dir = repo().join("bundle/memcached-operator/0.4.0");
        let b = BundleToRun::load(&dir, "bundle/memcached-operator/0.4.0", "").unwrap();
        assert_eq!(b.package, "memcached-operator");
        assert_eq!(b.csv_name, "memcached-operator.v0.4.0");
        assert_eq!(b.version, "0.4.0");
        assert_eq!(b.crds, vec!["memcacheds.cache.example.com".to_string()]);
        assert_eq!(b.edges.replaces, "memcached-operator.v0.3.0");
        assert!(b.install_modes.iter().any(|m| m.type_ == "AllNamespaces"));
        assert_eq!(b.fbc.image, "");
        assert!(
            b.fbc
                .properties
                .iter()
                .any(|p| p.type_ == "olm.bundle.object")
        );
    }

    #[test]
    fn a_directory_without_a_csv_is_not_a_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let e = BundleToRun::load(dir.path(), "empty", "").unwrap_err();
        assert!(matches!(e, LoadRunBundleError::Load { .. }), "{e}");
        assert!(e.to_string().contains("not a bundle directory"), "{e}");
    }
}
