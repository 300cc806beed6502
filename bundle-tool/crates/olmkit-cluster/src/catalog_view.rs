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

/// Why a local catalog cannot be the catalog image a command names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageMismatch {
    /// The image's tag, as given (`v0.3.0`).
    pub tag: String,
    /// The version the tag names.
    pub tag_version: semver::Version,
    /// What in the local catalog contradicts it, one clause each.
    pub reasons: Vec<String>,
    /// The tag that would match the local catalog (`v` + the channel head's version, in the
    /// style of the given tag), when there is one.
    pub matching_tag: Option<String>,
}

/// The version an image reference's tag names (`repo:v0.3.0`, `repo:0.3.0`); `None` for
/// digest references and tags that are not versions (`latest`).
pub fn image_tag_version(image: &str) -> Option<(String, semver::Version)> {
    if image.contains('@') {
        return None;
    }
    let last = image.rsplit('/').next()?;
    let (_, tag) = last.split_once(':')?;
    let v = semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()?;
    Some((tag.to_string(), v))
}

impl PackageView {
    /// Checks that this catalog can be `image`, as far as its tag tells: a tag naming a version
    /// must name the head of `channel` and no bundle may be newer (a release tags its catalog
    /// image with the version whose release built it, and a release only adds versions above
    /// the heads). `None` when nothing contradicts it or the tag names no version.
    pub fn image_mismatch(&self, image: &str, channel: &str) -> Option<ImageMismatch> {
        let (tag, tag_version) = image_tag_version(image)?;
        let channel = self.effective_channel(channel).to_string();
        let mut reasons = Vec::new();
        let versions: Vec<(String, semver::Version)> = self
            .config
            .bundles
            .iter()
            .filter_map(|b| Some((b.name.clone(), olmkit_catalog::model::bundle_version(b)?)))
            .collect();
        if !versions
            .iter()
            .any(|(_, v)| v.cmp_precedence(&tag_version).is_eq())
        {
            reasons.push(format!("it has no bundle of version {tag_version}"));
        }
        let head = self.head(&channel);
        let head_version = head.as_ref().and_then(|h| {
            versions
                .iter()
                .find(|(n, _)| n == h)
                .map(|(_, v)| v.clone())
        });
        if let (Some(h), Some(hv)) = (&head, &head_version)
            && !hv.cmp_precedence(&tag_version).is_eq()
        {
            reasons.push(format!("the head of channel {channel} is {h} ({hv})"));
        }
        let mut newer: Vec<&semver::Version> = versions
            .iter()
            .map(|(_, v)| v)
            .filter(|v| v.cmp_precedence(&tag_version).is_gt())
            .collect();
        newer.sort();
        newer.dedup();
        if !newer.is_empty() {
            let list: Vec<String> = newer.iter().map(|v| v.to_string()).collect();
            reasons.push(format!(
                "it has bundles newer than {tag_version} ({})",
                list.join(", ")
            ));
        }
        if reasons.is_empty() {
            return None;
        }
        let prefix = if tag.starts_with('v') { "v" } else { "" };
        Some(ImageMismatch {
            matching_tag: head_version
                .map(|v| format!("{prefix}{v}"))
                .filter(|t| *t != tag),
            tag,
            tag_version,
            reasons,
        })
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
    fn image_tags_naming_other_versions_are_caught() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), CATALOG);
        let p = PackageView::load(d.path(), "memcached-operator").unwrap();
        // The head's own tag, a digest and a non-version tag say nothing against the catalog.
        assert_eq!(p.image_mismatch("quay.io/x/cat:v0.2.0", ""), None);
        assert_eq!(p.image_mismatch("localhost:5000/cat:0.2.0", "stable"), None);
        assert_eq!(p.image_mismatch("quay.io/x/cat:latest", ""), None);
        assert_eq!(
            p.image_mismatch(
                "quay.io/x/cat@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                ""
            ),
            None
        );
        let m = p.image_mismatch("localhost:5000/x/cat:v0.1.0", "").unwrap();
        assert_eq!(m.tag, "v0.1.0");
        assert_eq!(m.matching_tag.as_deref(), Some("v0.2.0"));
        assert_eq!(
            m.reasons,
            [
                "the head of channel stable is memcached-operator.v0.2.0 (0.2.0)",
                "it has bundles newer than 0.1.0 (0.2.0)"
            ]
        );
        let m = p.image_mismatch("quay.io/x/cat:0.9.0", "").unwrap();
        assert_eq!(m.matching_tag.as_deref(), Some("0.2.0"));
        assert_eq!(m.reasons[0], "it has no bundle of version 0.9.0");
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
