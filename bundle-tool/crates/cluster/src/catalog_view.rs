//! What the cluster commands need to know from the local File-Based Catalog: a package's
//! channels, default channel, bundles with their versions, display names and install modes,
//! and (through `olmkit_catalog`'s explain logic) where a Subscription goes from a CSV.
//!
//! The catalog is the one the user released (`catalog/` by default), so install, upgrade and
//! approve can say BEFOREHAND what OLM will do, and refuse a channel switch that would silently
//! do nothing.

use crate::olm::InstallMode;
use base64::Engine;
use olmkit_catalog::declcfg::{self, Bundle, Channel, DeclarativeConfig, LoadOptions};
use olmkit_catalog::explain::{ExplainError, UpgradePath, explain_v0};
use olmkit_catalog::graph::{PackageGraph, package_graphs};
use olmkit_catalog::property;
use serde_json::Value;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A package could not be read from the local catalog.
#[derive(Debug, Error)]
pub enum LoadPackageError {
    /// The catalog did not load.
    #[error(transparent)]
    Load(#[from] declcfg::LoadCatalogError),
    /// The package is not in the catalog.
    #[error("package {package} is not in the catalog {dir} (packages: {available})")]
    NoPackage {
        /// Package asked for.
        package: String,
        /// Catalog directory.
        dir: PathBuf,
        /// Packages present.
        available: String,
    },
}

/// The CSV facts a catalog records for a bundle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CsvFacts {
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.provider.name`.
    pub provider: String,
    /// `spec.installModes`; `None` when the catalog does not record them.
    pub install_modes: Option<Vec<InstallMode>>,
}

/// One package of the local catalog.
#[derive(Clone, Debug)]
pub struct PackageView {
    /// Package name.
    pub name: String,
    /// Default channel ("" if unset).
    pub default_channel: String,
    /// Catalog directory it was read from.
    pub root: PathBuf,
    /// The package's blobs only.
    pub config: DeclarativeConfig,
    /// Its upgrade graph (None when the catalog has no `olm.package` blob for it).
    pub graph: Option<PackageGraph>,
}

/// A channel the user named is not in the package.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("channel {channel:?} is not in package {package} (channels: {available})")]
pub struct UnknownChannelError {
    /// Package.
    pub package: String,
    /// Channel asked for.
    pub channel: String,
    /// Channels present.
    pub available: String,
}

impl PackageView {
    /// Loads one package of a catalog directory.
    pub fn load(catalog_dir: &Path, package: &str) -> Result<Self, LoadPackageError> {
        let dc = declcfg::load_dir(catalog_dir, &LoadOptions::default())?;
        Self::from_config(&dc, catalog_dir, package)
    }

    /// Picks one package out of a loaded catalog.
    pub fn from_config(
        dc: &DeclarativeConfig,
        catalog_dir: &Path,
        package: &str,
    ) -> Result<Self, LoadPackageError> {
        let names = dc.package_names();
        if !names.iter().any(|n| n == package) {
            return Err(LoadPackageError::NoPackage {
                package: package.into(),
                dir: catalog_dir.to_path_buf(),
                available: if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                },
            });
        }
        let config = dc.only_package(package);
        let default_channel = config
            .packages
            .first()
            .map(|p| p.default_channel.clone())
            .unwrap_or_default();
        let graph = package_graphs(&config)
            .into_iter()
            .find(|g| g.package == package);
        Ok(Self {
            name: package.into(),
            default_channel,
            root: catalog_dir.to_path_buf(),
            config,
            graph,
        })
    }

    /// Channel names, sorted.
    pub fn channel_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .config
            .channels
            .iter()
            .map(|c| c.name.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// A channel by name.
    pub fn channel(&self, name: &str) -> Result<&Channel, UnknownChannelError> {
        self.config
            .channels
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| UnknownChannelError {
                package: self.name.clone(),
                channel: name.into(),
                available: self.channel_names().join(", "),
            })
    }

    /// The channels a bundle is in, sorted.
    pub fn channels_of(&self, bundle: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .config
            .channels
            .iter()
            .filter(|c| c.entries.iter().any(|e| e.name == bundle))
            .map(|c| c.name.clone())
            .collect();
        v.sort();
        v
    }

    /// A bundle by name.
    pub fn bundle(&self, name: &str) -> Option<&Bundle> {
        self.config.bundles.iter().find(|b| b.name == name)
    }

    /// The bundle's version from its `olm.package` property.
    pub fn version(&self, bundle: &str) -> Option<String> {
        let b = self.bundle(bundle)?;
        property::packages(&b.properties)
            .into_iter()
            .flatten()
            .next()
            .map(|p| p.version)
    }

    /// The `replaces` of a bundle's entry in a channel.
    pub fn replaces_in(&self, channel: &str, bundle: &str) -> Option<String> {
        self.config
            .channels
            .iter()
            .find(|c| c.name == channel)?
            .entries
            .iter()
            .find(|e| e.name == bundle)
            .map(|e| e.replaces.clone())
            .filter(|r| !r.is_empty())
    }

    /// The channel a Subscription follows: its own, or the default one when empty.
    pub fn effective_channel<'a>(&'a self, channel: &'a str) -> &'a str {
        if channel.is_empty() {
            &self.default_channel
        } else {
            channel
        }
    }

    /// The single head of a channel (None when the channel has none or several).
    pub fn head(&self, channel: &str) -> Option<String> {
        self.graph
            .as_ref()?
            .channel(self.effective_channel(channel))?
            .head()
            .map(String::from)
    }

    /// How OLM v0 upgrades a Subscription on `channel` from `installed`, hop by hop
    /// (`olmkit_catalog`'s explain logic).
    pub fn upgrade_path(
        &self,
        channel: &str,
        installed: &str,
    ) -> Result<UpgradePath, ExplainError> {
        match &self.graph {
            Some(g) => explain_v0(g, self.effective_channel(channel), installed),
            None => Err(ExplainError::UnknownChannel {
                package: self.name.clone(),
                channel: channel.into(),
                known: String::new(),
            }),
        }
    }

    /// The CSV facts of a bundle, from `olm.csv.metadata` or its embedded CSV object.
    pub fn csv_facts(&self, bundle: &str) -> Option<CsvFacts> {
        let b = self.bundle(bundle)?;
        if let Some(meta) = b
            .properties
            .iter()
            .find(|p| p.type_ == property::CSV_METADATA)
        {
            return Some(facts_from(&meta.value));
        }
        for p in b
            .properties
            .iter()
            .filter(|p| p.type_ == property::BUNDLE_OBJECT)
        {
            let Some(data) = property::bundle_object_data(&p.value) else {
                continue;
            };
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data.trim()) else {
                continue;
            };
            let Ok(obj) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            if obj.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion") {
                return obj.get("spec").map(facts_from);
            }
        }
        None
    }
}

/// Every package of a catalog, for commands that span packages (`status`).
#[derive(Clone, Debug, Default)]
pub struct CatalogView {
    /// The packages.
    pub packages: Vec<PackageView>,
}

impl CatalogView {
    /// Loads every package of a catalog directory.
    pub fn load(catalog_dir: &Path) -> Result<Self, LoadPackageError> {
        let dc = declcfg::load_dir(catalog_dir, &LoadOptions::graph_only())?;
        let packages = dc
            .package_names()
            .iter()
            .map(|p| PackageView::from_config(&dc, catalog_dir, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { packages })
    }
    /// A package by name.
    pub fn package(&self, name: &str) -> Option<&PackageView> {
        self.packages.iter().find(|p| p.name == name)
    }
}

impl crate::status::UpgradeOracle for CatalogView {
    fn next_hop(&self, package: &str, channel: &str, from: &str) -> Option<String> {
        self.package(package)?.next_hop(package, channel, from)
    }
}

impl crate::status::UpgradeOracle for PackageView {
    fn next_hop(&self, package: &str, channel: &str, from: &str) -> Option<String> {
        if package != self.name {
            return None;
        }
        self.upgrade_path(channel, from)
            .ok()?
            .steps
            .first()
            .map(|s| s.to.clone())
    }
}

fn facts_from(spec_like: &Value) -> CsvFacts {
    let s = |p: &str| {
        spec_like
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    CsvFacts {
        display_name: s("/displayName"),
        provider: s("/provider/name"),
        install_modes: spec_like
            .get("installModes")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) {
        std::fs::create_dir_all(dir.join("memcached-operator")).unwrap();
        std::fs::write(dir.join("memcached-operator/catalog.yaml"), text).unwrap();
    }

    const CATALOG: &str = r#"
schema: olm.package
name: memcached-operator
defaultChannel: stable
---
schema: olm.channel
package: memcached-operator
name: stable
entries:
  - name: memcached-operator.v0.1.0
  - name: memcached-operator.v0.2.0
    replaces: memcached-operator.v0.1.0
---
schema: olm.bundle
name: memcached-operator.v0.1.0
package: memcached-operator
image: quay.io/example/memcached-operator-bundle:v0.1.0
properties:
  - type: olm.package
    value: {packageName: memcached-operator, version: 0.1.0}
  - type: olm.csv.metadata
    value:
      displayName: Memcached Operator
      provider: {name: Example}
      installModes:
        - {type: OwnNamespace, supported: true}
        - {type: AllNamespaces, supported: true}
---
schema: olm.bundle
name: memcached-operator.v0.2.0
package: memcached-operator
image: quay.io/example/memcached-operator-bundle:v0.2.0
properties:
  - type: olm.package
    value: {packageName: memcached-operator, version: 0.2.0}
"#;

    #[test]
    fn reads_channels_versions_and_metadata() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), CATALOG);
        let p = PackageView::load(d.path(), "memcached-operator").unwrap();
        assert_eq!(p.default_channel, "stable");
        assert_eq!(p.channel_names(), vec!["stable"]);
        assert_eq!(
            p.version("memcached-operator.v0.2.0").as_deref(),
            Some("0.2.0")
        );
        assert_eq!(
            p.replaces_in("stable", "memcached-operator.v0.2.0")
                .as_deref(),
            Some("memcached-operator.v0.1.0")
        );
        let f = p.csv_facts("memcached-operator.v0.1.0").unwrap();
        assert_eq!(f.display_name, "Memcached Operator");
        assert_eq!(f.provider, "Example");
        assert_eq!(f.install_modes.unwrap().len(), 2);
        assert!(p.csv_facts("memcached-operator.v0.2.0").is_none());
        let e = p.channel("beta").unwrap_err();
        assert_eq!(e.available, "stable");
    }

    #[test]
    fn a_missing_package_lists_the_others() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), CATALOG);
        let e = PackageView::load(d.path(), "nope").unwrap_err();
        assert!(
            e.to_string().contains("packages: memcached-operator"),
            "{e}"
        );
    }
}
