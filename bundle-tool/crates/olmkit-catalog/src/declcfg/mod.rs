//! File-Based Catalog blobs (`declcfg`): the on-disk schema of an OLM catalog.
//!
//! These types mirror operator-registry's `alpha/declcfg` so that what we read and write is what
//! `opm` reads and writes: same field names, same field order when serialised, same
//! `omitempty` choices. Blobs of schemas this tool does not model are kept as [`Meta`] with their
//! JSON untouched. Loading lives in [`load`], writing in [`write`]; neither validates.

pub mod load;
pub mod opm;
pub mod stream;
pub mod write;

pub use load::{
    BlobAt, LoadCatalogError, LoadOptions, catalog_files, load_bytes, load_dir, load_file, walk_dir,
};
pub use write::{WriteFormat, render_blobs, render_config};

use crate::property::Property;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `olm.package`.
pub const SCHEMA_PACKAGE: &str = "olm.package";
/// `olm.channel`.
pub const SCHEMA_CHANNEL: &str = "olm.channel";
/// `olm.bundle`.
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
/// `olm.deprecations`.
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

fn is_empty_str(s: &str) -> bool {
    s.is_empty()
}

/// Go decodes `null` into a nil slice: accept it like an absent field.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Go marshals a nil slice as `null`: a channel without entries is written `"entries": null`
/// like opm does (an explicit `[]` in the input is written as `null` too; such a channel is
/// invalid anyway).
fn entries_or_null<S: serde::Serializer>(
    entries: &[ChannelEntry],
    s: S,
) -> Result<S::Ok, S::Error> {
    if entries.is_empty() {
        s.serialize_none()
    } else {
        entries.serialize(s)
    }
}

/// The icon of a package.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Icon {
    /// Base64 image data.
    #[serde(default)]
    pub base64data: String,
    /// Media type, e.g. `image/svg+xml`.
    #[serde(default)]
    pub mediatype: String,
}

/// An `olm.package` blob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Always `olm.package`.
    #[serde(default)]
    pub schema: String,
    /// Package name.
    #[serde(default)]
    pub name: String,
    /// The channel a Subscription without `channel` follows.
    #[serde(default)]
    pub default_channel: String,
    /// Package icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
    /// Long description (markdown).
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub description: String,
    /// Package properties.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub properties: Vec<Property>,
}

/// One entry of a channel: a bundle and the upgrade edges into it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEntry {
    /// Bundle name.
    #[serde(default)]
    pub name: String,
    /// The bundle this one replaces.
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub replaces: String,
    /// Bundles this one skips.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub skips: Vec<String>,
    /// Semver range of versions this one can upgrade from.
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub skip_range: String,
}

/// An `olm.channel` blob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// Always `olm.channel`.
    #[serde(default)]
    pub schema: String,
    /// Channel name.
    #[serde(default)]
    pub name: String,
    /// Package the channel belongs to.
    #[serde(default)]
    pub package: String,
    /// The upgrade graph of the channel.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        serialize_with = "entries_or_null"
    )]
    pub entries: Vec<ChannelEntry>,
    /// Channel properties.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub properties: Vec<Property>,
}

/// An image a bundle uses, by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedImage {
    /// Name (may be empty).
    #[serde(default)]
    pub name: String,
    /// Pull spec.
    #[serde(default)]
    pub image: String,
}

/// An `olm.bundle` blob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Always `olm.bundle`.
    #[serde(default)]
    pub schema: String,
    /// Bundle name (the CSV name by convention).
    #[serde(default)]
    pub name: String,
    /// Package the bundle belongs to.
    #[serde(default)]
    pub package: String,
    /// Bundle image pull spec.
    #[serde(default)]
    pub image: String,
    /// Properties: `olm.package`, `olm.gvk`, `olm.bundle.object`, ...
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub properties: Vec<Property>,
    /// Images the bundle uses.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub related_images: Vec<RelatedImage>,
    /// Number of `olm.bundle.object` properties the loader dropped to save memory (see
    /// [`LoadOptions::keep_bundle_objects`]). A bundle with dropped objects must not be written
    /// back as-is.
    #[serde(skip)]
    pub omitted_objects: usize,
}

/// What a deprecation entry points at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageScopedReference {
    /// `olm.package`, `olm.channel` or `olm.bundle`.
    #[serde(default)]
    pub schema: String,
    /// Channel or bundle name (empty for the package).
    #[serde(default, skip_serializing_if = "is_empty_str")]
    pub name: String,
}

/// One deprecated package, channel or bundle with the message shown to users.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecationEntry {
    /// The deprecated object.
    #[serde(default)]
    pub reference: PackageScopedReference,
    /// Why, and what to use instead.
    #[serde(default)]
    pub message: String,
}

/// An `olm.deprecations` blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    /// Always `olm.deprecations`.
    #[serde(default)]
    pub schema: String,
    /// Package concerned.
    #[serde(default)]
    pub package: String,
    /// Deprecated objects.
    #[serde(default)]
    pub entries: Vec<DeprecationEntry>,
}

/// A blob of a schema this tool does not model, kept verbatim.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    /// Its `schema`.
    pub schema: String,
    /// Its `package`, if any ("" otherwise).
    pub package: String,
    /// Its `name`, if any ("" otherwise).
    pub name: String,
    /// The whole blob.
    pub blob: Value,
}

impl Serialize for Meta {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.blob.serialize(s)
    }
}

/// One blob of any schema.
#[derive(Clone, Debug, PartialEq)]
pub enum Blob {
    /// `olm.package`.
    Package(Package),
    /// `olm.channel`.
    Channel(Channel),
    /// `olm.bundle`.
    Bundle(Bundle),
    /// `olm.deprecations`.
    Deprecation(Deprecation),
    /// Anything else.
    Other(Meta),
}

impl Blob {
    /// The blob's schema.
    pub fn schema(&self) -> &str {
        match self {
            Blob::Package(_) => SCHEMA_PACKAGE,
            Blob::Channel(_) => SCHEMA_CHANNEL,
            Blob::Bundle(_) => SCHEMA_BUNDLE,
            Blob::Deprecation(_) => SCHEMA_DEPRECATIONS,
            Blob::Other(m) => &m.schema,
        }
    }
    /// The package the blob belongs to ("" for none).
    pub fn package(&self) -> &str {
        match self {
            Blob::Package(p) => &p.name,
            Blob::Channel(c) => &c.package,
            Blob::Bundle(b) => &b.package,
            Blob::Deprecation(d) => &d.package,
            Blob::Other(m) => &m.package,
        }
    }
    /// The blob's name ("" for none).
    pub fn name(&self) -> &str {
        match self {
            Blob::Package(p) => &p.name,
            Blob::Channel(c) => &c.name,
            Blob::Bundle(b) => &b.name,
            Blob::Deprecation(_) => "",
            Blob::Other(m) => &m.name,
        }
    }
}

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Blob::Package(b) => b.serialize(s),
            Blob::Channel(b) => b.serialize(s),
            Blob::Bundle(b) => b.serialize(s),
            Blob::Deprecation(b) => b.serialize(s),
            Blob::Other(b) => b.serialize(s),
        }
    }
}

/// A whole catalog (or part of one) as lists of blobs, like opm's `DeclarativeConfig`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeclarativeConfig {
    /// `olm.package` blobs.
    pub packages: Vec<Package>,
    /// `olm.channel` blobs.
    pub channels: Vec<Channel>,
    /// `olm.bundle` blobs.
    pub bundles: Vec<Bundle>,
    /// `olm.deprecations` blobs.
    pub deprecations: Vec<Deprecation>,
    /// Blobs of other schemas.
    pub others: Vec<Meta>,
}

impl DeclarativeConfig {
    /// Adds one blob to the matching list.
    pub fn push(&mut self, blob: Blob) {
        match blob {
            Blob::Package(b) => self.packages.push(b),
            Blob::Channel(b) => self.channels.push(b),
            Blob::Bundle(b) => self.bundles.push(b),
            Blob::Deprecation(b) => self.deprecations.push(b),
            Blob::Other(b) => self.others.push(b),
        }
    }
    /// Appends all blobs of `other`.
    pub fn merge(&mut self, other: DeclarativeConfig) {
        self.packages.extend(other.packages);
        self.channels.extend(other.channels);
        self.bundles.extend(other.bundles);
        self.deprecations.extend(other.deprecations);
        self.others.extend(other.others);
    }
    /// Total number of blobs.
    pub fn len(&self) -> usize {
        self.packages.len()
            + self.channels.len()
            + self.bundles.len()
            + self.deprecations.len()
            + self.others.len()
    }
    /// True when there is no blob at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Names of all packages mentioned by any blob, sorted, without "".
    pub fn package_names(&self) -> Vec<String> {
        let mut names: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        names.extend(self.packages.iter().map(|p| p.name.as_str()));
        names.extend(self.channels.iter().map(|c| c.package.as_str()));
        names.extend(self.bundles.iter().map(|b| b.package.as_str()));
        names.extend(self.deprecations.iter().map(|d| d.package.as_str()));
        names.extend(self.others.iter().map(|o| o.package.as_str()));
        names.remove("");
        names.into_iter().map(String::from).collect()
    }
    /// Keeps only the blobs of `package`.
    pub fn only_package(&self, package: &str) -> DeclarativeConfig {
        DeclarativeConfig {
            packages: self
                .packages
                .iter()
                .filter(|p| p.name == package)
                .cloned()
                .collect(),
            channels: self
                .channels
                .iter()
                .filter(|c| c.package == package)
                .cloned()
                .collect(),
            bundles: self
                .bundles
                .iter()
                .filter(|b| b.package == package)
                .cloned()
                .collect(),
            deprecations: self
                .deprecations
                .iter()
                .filter(|d| d.package == package)
                .cloned()
                .collect(),
            others: self
                .others
                .iter()
                .filter(|o| o.package == package)
                .cloned()
                .collect(),
        }
    }
}
